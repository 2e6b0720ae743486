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

from tools.plan.engine import run_program
from tools.plan.placeholders import PLACEHOLDER_PROJECT, SECRET_PLACEHOLDER
from tools.plan.stack_file import read_stack_config

ROOT = Path(__file__).resolve().parent.parent.parent
# Files whose text the program hands to the VM; the plan names them instead of printing them.
VM_FILES_DIR = ROOT / "startup"


def budget_summary(settings: Any, resources: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """Cost, memory and load figures; None where a figure does not apply (the text leaves it out)."""
    from components import budget

    pricing = settings.tpu.provisioning_model
    run_seconds = settings.tpu.run_seconds if pricing == "flex-start" else None
    cache = settings.cache
    disk_per_month = budget.disk_usd_per_month(cache.disk_type, cache.size_gb)
    secret_versions = sum(1 for r in resources if r["type"] == SECRET_VERSION_TYPE)
    disk = next((r for r in resources if r["type"] == DISK_TYPE), None)
    summary: dict[str, Any] = {
        "pricing": pricing,
        "cost_per_hour_usd": budget.cost_per_hour_usd(pricing),
        "run_hours": run_seconds / 3600 if run_seconds else None,
        "max_spend_usd": round(budget.max_spend_usd(pricing, run_seconds), 4) if run_seconds else None,
        "forgotten_weekend_usd": None if run_seconds else round(budget.forgotten_weekend_usd(pricing), 2),
        "usd_per_million_output_tokens_at_1496_5_tok_s": round(
            budget.usd_per_million_output_tokens(pricing, 1496.5), 4),
        "cache_disk_type": cache.disk_type,
        "cache_disk_gb": cache.size_gb,
        "cache_disk_usd_per_gb_month": budget.USD_PER_GB_MONTH[cache.disk_type],
        "cache_disk_usd_per_month": round(disk_per_month, 4),
        "cache_disk_usd_per_run": (round(budget.disk_usd_for_seconds(cache.disk_type, cache.size_gb, run_seconds), 4)
                                   if run_seconds else None),
        "max_spend_with_disk_usd": (round(budget.max_spend_with_disk_usd(pricing, run_seconds, cache.disk_type,
                                                                         cache.size_gb), 4)
                                    if run_seconds else None),
        "cache_disk_outlives_destroy": bool(disk["retain_on_delete"]) if disk else cache.keep_on_destroy,
        "secret_versions": secret_versions,
        "secret_versions_usd_per_month": round(secret_versions * budget.USD_PER_SECRET_VERSION_MONTH, 4),
        "idle_usd_per_month": round(disk_per_month + secret_versions * budget.USD_PER_SECRET_VERSION_MONTH, 4),
    }
    kv = settings.kv_budget()
    if kv is None:
        summary.update(dict.fromkeys(
            ["kv_bytes_per_token", "kv_tokens", "kv_blocks", "block_size", "hbm_cap_gib",
             "kv_pool_gib", "outside_cap_gib", "load_limit_tokens"], "unknown"))
    else:
        summary.update({
            "kv_bytes_per_token": kv.kv_bytes_per_token,
            "kv_tokens": kv.kv_tokens,
            "kv_blocks": kv.kv_blocks,
            "block_size": kv.block_size,
            "hbm_cap_gib": round(budget.gib(kv.hbm_cap_bytes), 2),
            "kv_pool_gib": round(budget.gib(kv.kv_pool_bytes), 2),
            "outside_cap_gib": round(budget.gib(kv.outside_cap_bytes), 2),
            "load_limit_tokens": kv.load_limit_tokens,
        })
    summary["planned_load_tokens"] = settings.load.clients * settings.load.context_tokens
    if settings.platform == "gke":
        from components.gke.costs import plan_summary

        summary.update(plan_summary(settings))  # the lines above are per chip; these are the whole cluster
    return summary


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
    from tools.plan.engine import redact
    from tools.plan.placeholders import PLACEHOLDER_MEANINGS, mark_placeholders

    config_path = config_dir / f"Pulumi.{stack}.yaml"
    if not config_path.exists():
        raise FileNotFoundError(f"no stack config {config_path}; pass --stack NAME for Pulumi.NAME.yaml")
    config, secret_keys = read_stack_config(config_path)
    notes = []
    if not config.get("gcp:project"):
        config["gcp:project"] = PLACEHOLDER_PROJECT
        notes.append(f"gcp:project is not set; the plan uses {PLACEHOLDER_PROJECT!r}. "
                     "Set it with: pulumi config set gcp:project YOUR_PROJECT")
    program = run_program(config, secret_keys, stack)
    if program.error:
        raise PlanError(program.error)
    registered = [
        {"type": r.type, "name": r.name, "parent": r.parent, "component": not r.custom,
         "retain_on_delete": r.retain_on_delete, "inputs": _tidy(redact(r.inputs))}
        for r in program.registrations
    ]
    resources = mark_placeholders([resource for resource, _ in tree_order(registered)])
    outputs = mark_placeholders({name: SECRET_PLACEHOLDER if secret else _tidy(value)
                                 for name, (value, secret) in program.outputs.items()})
    shown = json.dumps([resources, outputs])
    return {
        "stack": stack,
        "project": config["gcp:project"],
        "notes": notes,
        "placeholders": {marker: meaning for marker, meaning in PLACEHOLDER_MEANINGS.items() if marker in shown},
        "warnings": program.warnings,
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


