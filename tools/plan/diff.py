"""What changed between two offline plans (`python -m tools.plan --json`), as a reviewer reads it.

Resources are matched by type and name (or, in plans with URNs, by an alias naming the old URN: renamed or
moved, each URN change says whether it is kept or replaced); their inputs are compared field by field (so the
queued-resource body shows as `body.runDuration.maxRunDuration: "14400s" -> "7200s"`),
commands argument by argument, scripts line by line, and the budget as a cost delta.
Pure functions of two plan dicts: the base may come from an older commit, so missing keys
are tolerated and the mocks' invented values are marked as placeholders on both sides.
"""

from __future__ import annotations

import difflib
import json
import shlex
from pathlib import Path
from typing import Any

from components.reading import bounded
from components.settings.text import escaped
from tools.plan import command_line
from tools.plan.model import COMMAND_PROVIDER_PREFIX, is_command_input, is_command_output, sha256
from tools.plan.placeholders import mark_placeholders

ABSENT = "(absent)"
SCRIPT_DIFF_LINES = 60
# Long enough for any one-line setting or output; only big structures are cut.
VALUE_CHARS = 500


class PlanFileError(Exception):
    """The base plan cannot be read."""


MAX_PLAN_BYTES = 64 * bounded.MIB
"""The default stack's plan is ~100 KB; a saved plan past 64 MB is not one."""


def load_plan(path: Path) -> dict[str, Any]:
    """A plan saved by `python -m tools.plan --json`, read with bounds (components/reading/bounded.py)."""
    shown = escaped(str(path))
    if not Path(path).exists() and not Path(path).is_symlink():
        raise PlanFileError(f"no base plan at {shown}; make one with: python -m tools.plan --stack dev --json "
                            f"> {shlex.quote(str(path))}")
    try:
        plan = bounded.read_json(path, MAX_PLAN_BYTES, "saved plan")
    except bounded.ReadError as error:
        raise PlanFileError(f"{shown} is not a plan saved by `python -m tools.plan --json`: {error.problem}") from None
    if not isinstance(plan, dict) or not isinstance(plan.get("resources"), list):
        raise PlanFileError(f"{shown} is not a plan saved by `python -m tools.plan --json`: it has no resources list")
    for index, resource in enumerate(plan["resources"]):
        if not (isinstance(resource, dict) and isinstance(resource.get("type"), str)
                and isinstance(resource.get("name"), str)):
            raise PlanFileError(f"{shown} is not a plan saved by `python -m tools.plan --json`: resource {index} "
                                "has no type and name")
    return mark_placeholders(plan)


def _is_component(resource: dict[str, Any], resources: list[dict[str, Any]]) -> bool:
    if "component" in resource:
        return bool(resource["component"])
    # Plans from before the flag: a component has no inputs and holds other resources.
    return not resource.get("inputs") and any(r.get("parent") == resource["name"] for r in resources)


def _by_identity(plan: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    resources = plan["resources"]
    return {(r["type"], r["name"]): {**r, "component": _is_component(r, resources)} for r in resources}


def flatten(value: Any, path: str = "") -> dict[str, Any]:
    """Leaf values by dotted path (`body.tpu.nodeSpec[0].node.labels.app`)."""
    if isinstance(value, dict) and value:
        flat: dict[str, Any] = {}
        for key, item in value.items():
            flat.update(flatten(item, f"{path}.{key}" if path else str(key)))
        return flat
    if isinstance(value, list) and value:
        flat = {}
        for index, item in enumerate(value):
            flat.update(flatten(item, f"{path}[{index}]"))
        return flat
    return {path: value}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _show(value: Any) -> str:
    if value is ABSENT:
        return ABSENT
    if _is_number(value):
        return f"{value:,}"  # 1,285,376 and 0.6, never 1.285e+06
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= VALUE_CHARS else f"{text[:VALUE_CHARS]}... ({len(text):,} chars)"


def _file_paths(*plans: dict[str, Any]) -> dict[str, tuple[str, int]]:
    """sha256 -> (repo path, bytes) of every file the plans recorded."""
    return {entry["sha256"]: (entry["path"], entry.get("bytes", 0))
            for plan in plans for entry in plan.get("files", [])}


def _file_label(text: str, files: dict[str, tuple[str, int]]) -> str | None:
    """The repo file a value is, or starts with (serve.sh, then the files rendered for it)."""
    for digest, (path, size) in files.items():
        if sha256(text) == digest:
            return path
        if size and sha256(text.encode()[:size].decode(errors="ignore")) == digest:
            return f"{path} (and the files rendered after it)"
    return None


def describe_change(path: str, old: Any, new: Any, *, command: bool, files: dict[str, tuple[str, int]]) -> list[str]:
    """One changed field: a command by argument, a script by line, anything else old -> new."""
    if isinstance(old, str) and isinstance(new, str):
        if command:
            changes = command_line.argument_changes(old, new)
            if changes is not None:
                return [f"{path} (by argument):", *(f"  {command_line.describe(change)}" for change in changes)]
        if "\n" in old or "\n" in new:
            label = _file_label(new, files) or _file_label(old, files) or "text"
            lines = [f"{path}: {label} changed ({len(old.encode()):,} -> {len(new.encode()):,} bytes)"]
            body = [line for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=1)
                    if not line.startswith(("---", "+++"))]
            lines += [f"  {line}" for line in body[:SCRIPT_DIFF_LINES]]
            if len(body) > SCRIPT_DIFF_LINES:
                lines.append(f"  ... {len(body) - SCRIPT_DIFF_LINES} more lines")
            return lines
    return [f"{path}: {_show(old)} -> {_show(new)}"]


def _field_changes(old: dict[str, Any], new: dict[str, Any], resource_type: str,
                   files: dict[str, tuple[str, int]]) -> list[str]:
    lines = []
    for key in sorted(set(old) | set(new)):
        before, after = old.get(key, ABSENT), new.get(key, ABSENT)
        if before == after:
            continue
        if isinstance(before, str) or isinstance(after, str) or before is ABSENT or after is ABSENT:
            lines += describe_change(key, before, after, command=is_command_input(resource_type, key), files=files)
            continue
        flat_old, flat_new = flatten(before, key), flatten(after, key)
        for path in sorted(set(flat_old) | set(flat_new)):
            a, b = flat_old.get(path, ABSENT), flat_new.get(path, ABSENT)
            if a != b:
                lines += describe_change(path, a, b, command=False, files=files)
        if key == "triggers" and resource_type.startswith(COMMAND_PROVIDER_PREFIX):
            lines.append("  (pulumi-command replaces the command when its triggers change: it runs again)")
    return lines


def _label(resource: dict[str, Any]) -> str:
    prefix = "[component] " if resource["component"] else ""
    return f"{prefix}{resource['type']}  {resource['name']}"


def _paired_by_urn(old: dict[tuple[str, str], dict[str, Any]],
                   new: dict[tuple[str, str], dict[str, Any]]) -> dict[tuple[str, str], tuple[str, str]]:
    """Old key -> new key where the new resource has the old one's URN as an alias (renamed or moved: the
    engine updates it in place). Only plans that carry URNs; the rest match by type and name."""
    by_alias = {alias: key for key, resource in new.items() for alias in resource.get("aliases") or []}
    pairs = {}
    for key, resource in old.items():
        target = by_alias.get(resource.get("urn") or "")
        if target is not None and target != key and key not in new:
            pairs[key] = target
    return pairs


def _urn_change(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    old_urn, new_urn = before.get("urn"), after.get("urn")
    if not old_urn or not new_urn or old_urn == new_urn:
        return []
    if old_urn in (after.get("aliases") or []):
        return [f"(urn): {_show(old_urn)} -> {_show(new_urn)} (kept: the old URN is an alias, updated in place)"]
    return [f"(urn): {_show(old_urn)} -> {_show(new_urn)} (REPLACED: no alias names the old URN)"]


def _resource_section(base: dict[str, Any], head: dict[str, Any], files: dict[str, tuple[str, int]]) -> list[str]:
    old, new = _by_identity(base), _by_identity(head)
    # A resource kept through an alias is compared with what it was, under its new type and name.
    for old_key, new_key in _paired_by_urn(old, new).items():
        old[new_key] = {**old.pop(old_key), "renamed_from": old_key}
    added = sorted(new.keys() - old.keys(), key=lambda key: (key[1], key[0]))
    removed = sorted(old.keys() - new.keys(), key=lambda key: (key[1], key[0]))
    changed = []
    for key in sorted(old.keys() & new.keys(), key=lambda key: (key[1], key[0])):
        before, after = old[key], new[key]
        fields = _field_changes(before.get("inputs", {}), after.get("inputs", {}), key[0], files)
        if "renamed_from" in before:
            fields.append(f"(type, name): {_show(list(before['renamed_from']))} -> {_show(list(key))}")
        fields += _urn_change(before, after)
        for option in ("parent", "retain_on_delete"):
            if option in before and option in after and before[option] != after[option]:
                fields.append(f"({option}): {_show(before[option])} -> {_show(after[option])}")
        if fields:
            changed.append((after, fields))

    def real(resources: list[dict[str, Any]]) -> int:
        return sum(1 for resource in resources if not resource["component"])

    changed_real = real([resource for resource, _ in changed])
    kept_real = real([new[key] for key in old.keys() & new.keys()])
    lines = [f"resources: {real([new[key] for key in added])} added, {real([old[key] for key in removed])} removed, "
             f"{changed_real} changed, {kept_real - changed_real} unchanged (component wrappers not counted)"]
    for key in added:
        lines.append(f"  + {_label(new[key])}")
        lines += [f"      {path}: {_show(value)}" for path, value in sorted(flatten(new[key].get("inputs", {})).items())
                  if path and value not in ({}, [])]
    for key in removed:
        lines.append(f"  - {_label(old[key])}")
    for resource, fields in changed:
        lines.append(f"  ~ {_label(resource)}")
        lines += [f"      {line}" for line in fields]
    return lines


def _delta(before: float, after: float) -> str:
    change = after - before
    # Float noise (2.4 - 1.2 = 1.1999999999999997) goes; the plan's figures have at most 4 decimals.
    return f"{round(change, 6) if isinstance(change, float) else change:+,}"


def _budget_section(base: dict[str, Any], head: dict[str, Any]) -> list[str]:
    from components.economics.cost_lines import budget_fields_shown

    old, new = base.get("budget", {}), head.get("budget", {})
    # Each plan's own platform's fields: a gke budget also holds the VM's, which its plan does not show.
    shown_old, shown_new = budget_fields_shown(old), budget_fields_shown(new)
    cost, other = [], []
    for key in sorted(shown_old | shown_new):
        before = old[key] if key in shown_old else ABSENT
        after = new[key] if key in shown_new else ABSENT
        if before == after:
            continue
        line = f"  {key}: {_show(before)} -> {_show(after)}"
        if _is_number(before) and _is_number(after):
            line += f" ({_delta(before, after)})"
        (cost if "usd" in key or key == "pricing" else other).append(line)
    lines = []
    if cost:
        lines += ["cost (USD):", *cost]
    if other:
        lines += ["memory, load and billing facts:", *other]
    return lines


def _outputs_section(base: dict[str, Any], head: dict[str, Any]) -> list[str]:
    old, new = base.get("outputs", {}), head.get("outputs", {})
    lines = []
    for name in sorted(set(old) | set(new)):
        before, after = old.get(name, ABSENT), new.get(name, ABSENT)
        if before == after:
            continue
        if before is ABSENT:
            lines.append(f"  + {name}: {_show(after)}")
        elif after is ABSENT:
            lines.append(f"  - {name}: {_show(before)}")
        else:
            lines += [f"  ~ {line}" if index == 0 else f"    {line}" for index, line in
                      enumerate(describe_change(name, before, after, command=is_command_output(name), files={}))]
    return ["outputs:", *lines] if lines else []


def _list_section(title: str, old: list[str], new: list[str]) -> list[str]:
    lines = [f"  - {item}" for item in old if item not in new] + [f"  + {item}" for item in new if item not in old]
    return [f"{title}:", *lines] if lines else []


def _files_section(base: dict[str, Any], head: dict[str, Any]) -> list[str]:
    if "files" not in base:
        return []
    old = {entry["path"]: entry for entry in base["files"]}
    new = {entry["path"]: entry for entry in head.get("files", [])}
    lines = []
    for path in sorted(set(old) | set(new)):
        before, after = old.get(path), new.get(path)
        if before and after and before["sha256"] != after["sha256"]:
            lines.append(f"  ~ {path}: {before['bytes']:,} -> {after['bytes']:,} bytes")
        elif after and not before:
            lines.append(f"  + {path}: " + "; ".join(after["used_by"]))
        elif before and not after:
            lines.append(f"  - {path}")
        elif before and after and before["used_by"] != after["used_by"]:
            lines.append(f"  ~ {path}: now " + "; ".join(after["used_by"]))
    return ["files handed to the VM:", *lines] if lines else []


def render_diff(base: dict[str, Any], head: dict[str, Any], base_label: str = "base") -> str:
    """The whole difference as text; says so when there is none."""
    base = mark_placeholders(base)
    files = _file_paths(base, head)
    base_stack, stack = base.get("stack") or "unknown", head.get("stack") or "unknown"
    lines = [f"offline plan diff: {base_label} (stack {base_stack}) -> this commit (stack {stack})"]
    if base.get("stack") not in (None, stack):
        lines.append(f"note: the base plan is of stack {base_stack}, not {stack}: what differs between the two "
                     "stacks' settings shows as changes too")
    sections = [
        _resource_section(base, head, files),
        _files_section(base, head),
        _budget_section(base, head),
        _outputs_section(base, head),
        _list_section("warnings", base.get("warnings", []), head.get("warnings", [])),
        _list_section("notes", base.get("notes", []), head.get("notes", [])),
    ]
    changed = [section for section in sections if section]
    only_counts = len(changed) == 1 and len(changed[0]) == 1 and " 0 added, 0 removed, 0 changed" in changed[0][0]
    if only_counts:
        return "\n".join([*lines, "no changes: the plan is the same as the base plan"]) + "\n"
    for section in changed:
        lines += ["", *section]
    return "\n".join(lines) + "\n"
