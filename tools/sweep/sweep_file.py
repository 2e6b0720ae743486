"""The sweep file: the base stack, the arms (each a set of `tpu-vllm:` settings over the base), the cells, the limits.

Every arm is the base stack's config with its settings merged over it, validated by the settings package
(components/settings/loading.py `load`) before anything starts: its errors are the stack's own, each naming the key
as the user writes it, the value and the fix, prefixed with the file and the arm. No Pulumi CLI, no cloud.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from components.reading import bounded
from components.settings import SettingsError
from components.settings.fields import parse_duration
from components.settings.findings import InvalidSettingError
from components.settings.loading import Loaded, load
from components.settings.root import SECRET_BY_NATURE, TOP_LEVEL_KEYS
from components.settings.text import escaped
from tools.bench import reference
from tools.bench.sweep import DEFAULT_OUTPUT_TOKENS, DEFAULT_REQUESTS_PER_CLIENT
from tools.plan.placeholders import UNSET_PROJECT_STAND_IN
from tools.plan.stack_file import read_stack_config
from tools.sweep import config_paths, ownership

END_ACTIONS = ("destroy", "keep-best", "restore-base")
EXAMPLE = "sweeps/log-arms.yaml"
MAX_SWEEP_FILE_BYTES = bounded.MIB
"""The shipped sweep is 2 KB; a megabyte holds any sweep a person writes."""
ARM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}")
"""An arm's name becomes a directory (`NN-NAME` under --out), a table row, a plot label and a progress line: ASCII
letters, digits, '.', '_' and '-', starting with a letter or digit, at most 40, so it is inert everywhere (no
path, no line break, no escape, no look-alike letters of other scripts)."""
# Within reason for one rented chip: past these no cell of the sweep ends in hours.
MAX_CONTEXT, MAX_CLIENTS, MAX_REPS, MAX_REQUESTS, MAX_OUTPUT_TOKENS = 1 << 20, 1024, 100, 10_000, 1 << 16


class SweepFileError(Exception):
    """Everything wrong with a sweep file, found in one pass."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))

    def render(self) -> str:
        return "\n".join([f"{len(self.problems)} problem(s) in the sweep file:", *(f"  - {p}" for p in self.problems)])


class Cells(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    contexts: list[int] = Field(default_factory=lambda: list(reference.CONTEXTS), min_length=1, max_length=32)
    clients: list[int] = Field(default_factory=lambda: list(reference.CLIENTS), min_length=1, max_length=32)
    reps: int = Field(3, ge=1, le=MAX_REPS)
    requests_per_client: int = Field(DEFAULT_REQUESTS_PER_CLIENT, ge=1, le=MAX_REQUESTS, alias="requestsPerClient")
    output_tokens: int = Field(DEFAULT_OUTPUT_TOKENS, ge=2, le=MAX_OUTPUT_TOKENS, alias="outputTokens")

    @field_validator("contexts", "clients")
    @classmethod
    def _positive(cls, values: list[int], info: Any) -> list[int]:
        top = MAX_CONTEXT if info.field_name == "contexts" else MAX_CLIENTS
        if any(not 1 <= value <= top for value in values):
            raise ValueError(f"every entry must be a whole number from 1 to {top:,}")
        return values


class Limits(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    max_spend_usd: float = Field(gt=0, allow_inf_nan=False, alias="maxSpendUsd")
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
    arms: dict[str, dict[str, Any]] = Field(min_length=1, max_length=64)
    cells: Cells = Field(default_factory=Cells)
    limits: Limits

    @field_validator("arms")
    @classmethod
    def _arm_names(cls, arms: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        seen: dict[str, str] = {}
        for name in arms:
            if not ARM_NAME.fullmatch(name):
                raise ValueError(f"arm name {escaped(name)!r}: an arm's name is 1 to 40 ASCII letters, digits, '.', "
                                 "'_' or '-', starting with a letter or digit (it names a directory and a table "
                                 "row); rename it, e.g. ngram-4")
            if name.casefold() in seen:
                raise ValueError(f"arm names {seen[name.casefold()]!r} and {name!r} differ only in case; rename one")
            seen[name.casefold()] = name
        return arms


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


def _shown_value(value: Any) -> str:
    """A value as JSON on one inert line, cut at 200 characters (a refusal quotes what was written, not all of it)."""
    try:
        text = json.dumps(value, default=str)
    except (ValueError, RecursionError):
        text = repr(type(value).__name__)
    text = escaped(text)
    return text if len(text) <= 200 else text[:197] + "..."


def _decoded(value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def _base_config(project_dir: Path, base: str, where: str) -> tuple[dict[str, Any], str | None, frozenset[str]]:
    problem = ownership.base_problem(base, project_dir)
    if problem is not None:
        raise SweepFileError([f"{escaped(where)}: {problem}"])
    path = project_dir / f"Pulumi.{base}.yaml"
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
        return [f"{head} = {_shown_value(overlay)}: must be a map of tpu-vllm: settings, e.g. "
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
            problems.append(f"{head}: tpu-vllm:{escaped(path)} = {_shown_value(value)}: {why}; write the value itself "
                            "(a number as a number, true or false unquoted)")
    return problems


def project_name(project_dir: Path) -> str | None:
    """Pulumi.yaml's `name` (the project the sweep's stack belongs to); None when it cannot be read."""
    try:
        document = bounded.read_yaml(project_dir / "Pulumi.yaml", MAX_SWEEP_FILE_BYTES, "Pulumi.yaml")
    except bounded.ReadError:
        return None
    name = document.get("name") if isinstance(document, dict) else None
    return name if isinstance(name, str) else None


def read(path: Path, project_dir: Path, resumed_stack: str | None = None) -> Sweep:
    """The sweep file, every arm validated as a whole configuration; raises SweepFileError with every problem.
    `resumed_stack`: the stack a journal of this sweep names (--resume), whose own stack file is expected."""
    where = escaped(str(path))
    try:
        document = bounded.read_yaml(path, MAX_SWEEP_FILE_BYTES, "sweep file")
    except bounded.ReadError as error:
        raise SweepFileError([f"{error}; see {EXAMPLE}"]) from None
    try:
        parsed = Document.model_validate(document if document is not None else {})
    except ValidationError as error:
        problems = []
        for item in error.errors():
            key = ".".join(escaped(str(part)) for part in item["loc"]) or "(the file)"
            value = "" if item["type"] == "missing" else f" = {_shown_value(item.get('input'))}"
            problems.append(f"{where}: {key}{value}: {item['msg'].removeprefix('Value error, ')}; see {EXAMPLE}")
        raise SweepFileError(problems) from None
    base_raw, project, secret_keys = _base_config(project_dir, parsed.base, where)
    problems: list[str] = []
    arms: list[Arm] = []
    stack = parsed.stack or f"{parsed.base}-sweep"
    problems += [f"{where}: {problem}" for problem in ownership.sweep_stack_problems(
        stack, parsed.base, project_dir, project_name(project_dir), resumed_stack)]
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
