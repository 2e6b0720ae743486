"""The sweep file: the base stack, the arms (each a set of `tpu-vllm:` settings over the base), the cells, the limits.

Every arm is the base stack's config with its settings merged over it, validated by the settings package
(components/settings/loading.py `load`) before anything starts: its errors are the stack's own, each naming the key
as the user writes it, the value and the fix, prefixed with the file and the arm. No Pulumi CLI, no cloud.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from components.settings import SettingsError
from components.settings.fields import parse_duration
from components.settings.findings import InvalidSettingError
from components.settings.loading import Loaded, load
from components.settings.root import SECRET_BY_NATURE, TOP_LEVEL_KEYS
from tools.bench import reference
from tools.bench.sweep import DEFAULT_OUTPUT_TOKENS, DEFAULT_REQUESTS_PER_CLIENT
from tools.plan.placeholders import UNSET_PROJECT_STAND_IN
from tools.plan.stack_file import read_stack_config
from tools.sweep import config_paths

END_ACTIONS = ("destroy", "keep-best", "restore-base")
EXAMPLE = "sweeps/log-arms.yaml"


class SweepFileError(Exception):
    """Everything wrong with a sweep file, found in one pass."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))

    def render(self) -> str:
        return "\n".join([f"{len(self.problems)} problem(s) in the sweep file:", *(f"  - {p}" for p in self.problems)])


class Cells(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    contexts: list[int] = Field(default_factory=lambda: list(reference.CONTEXTS), min_length=1)
    clients: list[int] = Field(default_factory=lambda: list(reference.CLIENTS), min_length=1)
    reps: int = Field(3, ge=1)
    requests_per_client: int = Field(DEFAULT_REQUESTS_PER_CLIENT, ge=1, alias="requestsPerClient")
    output_tokens: int = Field(DEFAULT_OUTPUT_TOKENS, ge=2, alias="outputTokens")

    @field_validator("contexts", "clients")
    @classmethod
    def _positive(cls, values: list[int]) -> list[int]:
        if any(value < 1 for value in values):
            raise ValueError("every entry must be a whole number of at least 1")
        return values


class Limits(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    max_spend_usd: float = Field(gt=0, alias="maxSpendUsd")
    max_duration: str = Field(alias="maxDuration")
    at_end: Literal["destroy", "keep-best", "restore-base"] = Field("destroy", alias="atEnd")

    @field_validator("max_duration")
    @classmethod
    def _duration(cls, value: str) -> str:
        try:
            parse_duration(value)
        except InvalidSettingError as error:
            raise ValueError(f"{error.message}; {error.fix}") from None
        return value

    @property
    def max_seconds(self) -> int:
        return parse_duration(self.max_duration)


class Document(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    base: str = Field(min_length=1)
    stack: str | None = None
    arms: dict[str, dict[str, Any]] = Field(min_length=1)
    cells: Cells = Field(default_factory=Cells)
    limits: Limits


@dataclass(frozen=True)
class Arm:
    name: str
    overlay: dict[str, Any]
    """The arm's own `tpu-vllm:` settings, as written."""
    config: dict[str, Any]
    """The base's `tpu-vllm:` settings with the overlay merged over them: the whole configuration."""
    loaded: Loaded


@dataclass(frozen=True)
class Sweep:
    path: Path
    project_dir: Path
    base: str
    stack: str
    arms: tuple[Arm, ...]
    base_config: dict[str, Any]
    cells: Cells
    limits: Limits
    project: str | None
    """gcp:project of the base stack (None when unset: the dry run still plans)."""
    warnings: tuple[str, ...] = field(default=())
    base_loaded: Loaded | None = None
    """The base stack's own configuration (with stack_overrides), validated: its compile is the log's measured one."""
    stack_overrides: dict[str, Any] = field(default_factory=dict)
    """Settings the sweep's own stack holds whatever the base says (merged over every arm and the restored base)."""

    @property
    def restored_base(self) -> dict[str, Any]:
        return config_paths.deep_merge(self.base_config, self.stack_overrides)


def _decoded(value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def _base_config(project_dir: Path, base: str, where: str) -> tuple[dict[str, Any], str | None, frozenset[str]]:
    path = project_dir / f"Pulumi.{base}.yaml"
    if not path.is_file():
        raise SweepFileError([f"{where}: base = {json.dumps(base)}: there is no {path.name} in {project_dir}; "
                              "name a stack of this project (e.g. dev)"])
    try:
        config, secret_keys = read_stack_config(path)
    except SettingsError as error:
        raise SweepFileError(error.problems) from None
    raw = {key.partition(":")[2]: _decoded(value) if key.partition(":")[2] in TOP_LEVEL_KEYS else value
           for key, value in config.items() if key.startswith(f"{config_paths.NAMESPACE}:")}
    secret = frozenset(key.partition(":")[2] for key in secret_keys if key.startswith(config_paths.NAMESPACE))
    return raw, config.get("gcp:project"), secret


def _arm_problems(where: str, name: str, overlay: Any) -> list[str]:
    head = f"{where}: arms.{name}"
    if not isinstance(overlay, dict):
        return [f"{head} = {json.dumps(overlay, default=str)}: must be a map of tpu-vllm: settings, e.g. "
                "vllm: {maxNumBatchedTokens: 8192}; write {} for the base itself"]
    problems = []
    for path, value in config_paths.leaves(overlay).items():
        top = path.split(".", 1)[0].split("[", 1)[0]
        if top in SECRET_BY_NATURE or top == "hfTokenSecret":
            problems.append(f"{head}: tpu-vllm:{path}: a secret or the secret's name; the sweep's stack takes the "
                            "base's, so set it on the base stack instead")
        elif path == "cache.keepOnDestroy":
            problems.append(f"{head}: tpu-vllm:{path}: the sweep's stack never keeps its cache disk (a kept disk "
                            "would bill after the sweep's destroy); leave it out")
        elif top == "platform" or path.startswith("platform"):
            problems.append(f"{head}: tpu-vllm:{path}: an arm cannot change the platform; make a sweep of its own")
        elif (why := config_paths.misread(value)) is not None:
            problems.append(f"{head}: tpu-vllm:{path} = {json.dumps(value)}: {why}; write the value itself "
                            "(a number as a number, true or false unquoted)")
    return problems


def read(path: Path, project_dir: Path) -> Sweep:
    """The sweep file, every arm validated as a whole configuration; raises SweepFileError with every problem."""
    where = str(path)
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise SweepFileError([f"{where}: cannot read it ({error.strerror}); see {EXAMPLE}"]) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f", line {mark.line + 1}" if mark else ""
        raise SweepFileError([f"{where}{line}: not valid YAML ({getattr(error, 'problem', error)}); "
                              f"see {EXAMPLE}"]) from None
    try:
        parsed = Document.model_validate(document if document is not None else {})
    except ValidationError as error:
        problems = []
        for item in error.errors():
            key = ".".join(str(part) for part in item["loc"]) or "(the file)"
            value = "" if item["type"] == "missing" else f" = {json.dumps(item.get('input'), default=str)}"
            problems.append(f"{where}: {key}{value}: {item['msg'].removeprefix('Value error, ')}; see {EXAMPLE}")
        raise SweepFileError(problems) from None
    base_raw, project, secret_keys = _base_config(project_dir, parsed.base, where)
    problems: list[str] = []
    arms: list[Arm] = []
    stack = parsed.stack or f"{parsed.base}-sweep"
    if stack == parsed.base:
        problems.append(f"{where}: stack = {json.dumps(stack)}: the sweep's stack must be its own, not the base; "
                        "leave it out (default: BASE-sweep)")
    # cache.keepOnDestroy makes the disk retainOnDelete (components/vm/cache_disk.py): `pulumi destroy` would leave it
    # billing and `stack rm` forget it, so the sweep's own stack always sets it false, and says so.
    overrides: dict[str, Any] = {}
    notes: list[str] = []
    if (base_raw.get("cache") or {}).get("keepOnDestroy") is True:
        overrides = {"cache": {"keepOnDestroy": False}}
        notes.append(f"base {parsed.base} sets tpu-vllm:cache.keepOnDestroy = true; the sweep's stack {stack} sets it "
                     "false, so its destroy deletes its cache disk (the base's own disk is not touched)")
    for name, overlay in parsed.arms.items():
        own = _arm_problems(where, name, overlay)
        if own:
            problems += own
            continue
        config = config_paths.deep_merge(config_paths.deep_merge(base_raw, overlay), overrides)
        try:
            loaded = load(config, project=project or UNSET_PROJECT_STAND_IN, stack=stack,
                          secret_keys=secret_keys)
        except SettingsError as error:
            problems += [f"{where}: arms.{name}: {problem}" for problem in error.problems]
            continue
        if loaded.settings.platform != "vm":
            problems.append(f"{where}: arms.{name}: tpu-vllm:platform = {json.dumps(loaded.settings.platform)}: "
                            "the sweep reuses one node over SSH, which only the vm platform has; sweep a vm stack")
            continue
        arms.append(Arm(name, overlay, config, loaded))
    if problems:
        raise SweepFileError(problems)
    try:
        base_loaded: Loaded | None = load(config_paths.deep_merge(base_raw, overrides),
                                          project=project or UNSET_PROJECT_STAND_IN, stack=stack,
                                          secret_keys=secret_keys)
    except SettingsError:  # the base alone may be incomplete; every arm was checked above
        base_loaded = None
    # A warning every arm has (the base's own, e.g. SSH open to any address) is said once.
    shared = set.intersection(*(set(arm.loaded.warnings) for arm in arms)) if arms else set()
    warnings = notes + [f"every arm: {text}" for text in arms[0].loaded.warnings if text in shared]
    warnings += [f"arms.{arm.name}: {text}" for arm in arms for text in arm.loaded.warnings if text not in shared]
    return Sweep(path=path, project_dir=project_dir, base=parsed.base, stack=stack, arms=tuple(arms),
                 base_config=base_raw, cells=parsed.cells, limits=parsed.limits, project=project,
                 warnings=tuple(dict.fromkeys(warnings)), stack_overrides=overrides, base_loaded=base_loaded)
