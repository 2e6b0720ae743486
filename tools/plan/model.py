"""The plan as data: every resource, file, cost and output the program would create, in a fixed order.

What `python -m tools.plan --json` prints; render and diff read only this.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from components.catalog import COMPUTE
from components.vm.boot_script import INSTALL_DOCKER, STARTUP_SCRIPT, boot_script
from tools.plan.engine import redact, run_program
from tools.plan.placeholders import (
    PLACEHOLDER_MEANINGS,
    PLACEHOLDER_PROJECT,
    SECRET_PLACEHOLDER,
    UNSET_PROJECT_STAND_IN,
    mark_placeholders,
    replace_everywhere,
)
from tools.plan.stack_file import read_stack_config
from tools.plan.urns import candidate_aliases

ROOT = Path(__file__).resolve().parent.parent.parent
# Files whose text the program hands to the VM; the plan names them instead of printing them.
VM_FILES_DIR = ROOT / "startup"


def budget_summary(settings: Any, resources: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """The plan's budget: the costs module's, told what the program registered."""
    from components.economics import costs

    disk = next((r for r in resources if r["type"] == DISK_TYPE), None)
    return costs.plan_budget(settings, secret_versions=sum(1 for r in resources if r["type"] == SECRET_VERSION_TYPE),
                             disk_outlives_destroy=bool(disk["retain_on_delete"]) if disk else None)


class PlanError(Exception):
    """The program itself stopped (its own RunError) after the settings passed."""


SECRET_VERSION_TYPE = "gcp:secretmanager/secretVersion:SecretVersion"
DISK_TYPE = "gcp:compute/disk:Disk"


def _tidy(value: Any) -> Any:
    """Whole numbers as integers (the engine sends every number as a double: size 50.0)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _tidy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_tidy(item) for item in value]
    return value


def tree_order(resources: list[dict[str, Any]]) -> list[tuple[dict[str, Any], int]]:
    """Each component followed by what it holds, siblings by name: the same order every run.

    The engine registers resources in whatever order their inputs resolve, which varies.
    """
    components = {r["name"] for r in resources if r.get("component")}
    children: dict[str | None, list[dict[str, Any]]] = defaultdict(list)
    for resource in resources:
        children[resource["parent"] if resource["parent"] in components else None].append(resource)
    ordered: list[tuple[dict[str, Any], int]] = []
    visited: set[str] = set()

    def visit(parent: str | None, depth: int) -> None:
        for resource in sorted(children.get(parent, []), key=lambda r: (r["name"], r["type"])):
            ordered.append((resource, depth))
            if resource.get("component") and resource["name"] not in visited:
                visited.add(resource["name"])
                visit(resource["name"], depth + 1)

    visit(None, 0)
    return ordered


def vm_files() -> dict[str, str]:
    """Text of each file under startup/ -> its path: how the plan recognises them in inputs.

    Only texts of more than one line: a one-word file would claim every input that says that word.
    """
    files = {}
    for path in sorted(VM_FILES_DIR.rglob("*")):
        if not path.is_file():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        if "\n" in text.strip():
            files[text] = path.relative_to(ROOT).as_posix()
    # The compute path's boot script is two of those files in one (components/vm/boot_script.py).
    files[boot_script(COMPUTE)] = (f"{STARTUP_SCRIPT.relative_to(ROOT).as_posix()} with "
                                   f"{INSTALL_DOCKER.relative_to(ROOT).as_posix()} (components/vm/boot_script.py)")
    return files


def strings_in(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(dotted path, text) of every string inside an input value."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings_in(item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from strings_in(item, f"{path}[{index}]")


def leading_file(value: str, files: dict[str, str]) -> tuple[str, str, str] | None:
    """(repo path, the file's text, what follows it) when a value is a repo file, or starts with one
    (serve.sh arrives on stdin followed by the files the stack renders for it)."""
    if value in files:
        return files[value], value, ""
    for text, path in files.items():
        head = text.rstrip("\n")
        if value.startswith(head + "\n"):
            return path, text, value[len(head) + 1:]
    return None


def file_uses(resources: list[dict[str, Any]], files: dict[str, str]) -> list[dict[str, Any]]:
    """Where each repo file's text went (metadata, a command's stdin...), as the program registered it."""
    uses: dict[str, list[str]] = defaultdict(list)
    texts: dict[str, str] = {}
    for resource in resources:
        for path, text in strings_in(resource["inputs"]):
            found = leading_file(text, files)
            if found:
                repo_path, file_text, rest = found
                then = f" (then {len(rest.encode()):,} bytes the stack renders, shown in full)" if rest else ""
                uses[repo_path].append(f"{resource['name']} {path}{then}")
                texts[repo_path] = file_text
    return [{"path": path, "bytes": len(texts[path].encode()), "sha256": sha256(texts[path]),
             "used_by": sorted(uses[path])} for path in sorted(uses)]


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def run_plan(stack: str, config_dir: Path = ROOT) -> dict[str, Any]:
    """Everything the plan shows, as data. Raises SettingsError on a bad config."""
    config_path = config_dir / f"Pulumi.{stack}.yaml"
    if not config_path.exists():
        raise FileNotFoundError(f"no stack config {config_path}; pass --stack NAME for Pulumi.NAME.yaml")
    config, secret_keys = read_stack_config(config_path)
    notes = []
    shown_project = None
    if not config.get("gcp:project"):
        # A valid id the program accepts as any other; the plan shows the marker wherever it went.
        config["gcp:project"] = UNSET_PROJECT_STAND_IN
        shown_project = PLACEHOLDER_PROJECT
        notes.append(f"gcp:project is not set; the plan uses {PLACEHOLDER_PROJECT!r}. "
                     "Set it with: pulumi config set gcp:project YOUR_PROJECT")
    program = run_program(config, secret_keys, stack)
    if program.error:
        raise PlanError(program.error)

    def mark(value: Any) -> Any:
        value = mark_placeholders(value)
        # The stand-in is distinctive, so it is marked inside derived names too (gke's cache bucket ends with it).
        return replace_everywhere(value, UNSET_PROJECT_STAND_IN, shown_project) if shown_project else value

    aliases = candidate_aliases(r.urn_record() for r in program.registrations)
    registered = [
        {"type": r.type, "name": r.name, "parent": r.parent, "component": not r.custom,
         "retain_on_delete": r.retain_on_delete, "inputs": _tidy(redact(r.inputs)),
         "urn": r.urn, "aliases": aliases[r.urn],
         # Only where one is set (the compute path's instance waits out the flex-start queue), so no other
         # resource's entry changes.
         **({"custom_timeouts": r.custom_timeouts} if r.custom_timeouts else {})}
        for r in program.registrations
    ]
    resources = mark([resource for resource, _ in tree_order(registered)])
    outputs = mark({name: SECRET_PLACEHOLDER if secret else _tidy(value)
                    for name, (value, secret) in program.outputs.items()})
    shown = json.dumps([resources, outputs])
    return {
        "stack": stack,
        "project": mark(config["gcp:project"]),
        "notes": notes,
        "placeholders": {marker: meaning for marker, meaning in PLACEHOLDER_MEANINGS.items() if marker in shown},
        "warnings": mark(program.warnings),
        "budget": budget_summary(program.settings, resources),
        "resources": resources,
        "files": file_uses(resources, vm_files()),
        "outputs": outputs,
    }


def to_json(plan: dict[str, Any]) -> str:
    """Sorted keys: the engine hands inputs over in no fixed order."""
    return json.dumps(plan, indent=2, sort_keys=True, default=str)


# Inputs that are shell commands on the providers that run them (pulumi-command).
COMMAND_INPUTS = ("create", "update", "delete")
COMMAND_PROVIDER_PREFIX = "command:"
# Outputs named like this hold one command line each.
COMMAND_OUTPUT_SUFFIXES = ("Command", "Equivalent")


def is_command_output(name: str) -> bool:
    return name.endswith(COMMAND_OUTPUT_SUFFIXES)


def is_command_input(resource_type: str, key: str) -> bool:
    return resource_type.startswith(COMMAND_PROVIDER_PREFIX) and key in COMMAND_INPUTS


