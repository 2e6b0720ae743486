"""Offline plan: run the real program under Pulumi mocks with a stack's config file.

No Pulumi CLI, no plugins, no credentials. Reviewers read a change with it:

    python -m tools.plan --stack dev                     # readable
    python -m tools.plan --stack dev --json > base.json  # one JSON object
    python -m tools.plan --stack dev --diff base.json    # what changed since that plan

Both outputs are byte-identical from run to run, so a plan can be diffed and reviewed.
Secrets (and `secure:` values it cannot decrypt) appear only as "[secret]"; what only GCP
knows after deploy (IPs, states) appears as a marked <placeholder>.
An invalid config exits 2 with every problem listed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import runpy
import sys
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
PLACEHOLDER_PROJECT = "PLACEHOLDER-set-gcp-project"
SECRET_PLACEHOLDER = "[secret]"
# Files whose text the program hands to the VM; the plan names them instead of printing them.
VM_FILES_DIR = ROOT / "startup"


def _strip_secure(value: Any) -> tuple[Any, bool]:
    """Replace `{secure: ...}` ciphertext (which needs the Pulumi CLI to decrypt) with a marker."""
    if isinstance(value, dict) and set(value) == {"secure"}:
        return SECRET_PLACEHOLDER, True
    if isinstance(value, dict):
        found = False
        cleaned = {}
        for key, item in value.items():
            cleaned[key], secret = _strip_secure(item)
            found = found or secret
        return cleaned, found
    if isinstance(value, list):
        pairs = [_strip_secure(item) for item in value]
        return [item for item, _ in pairs], any(secret for _, secret in pairs)
    return value, False


class _StackFileLoader(yaml.SafeLoader):
    """safe_load that refuses a key given twice in one map (plain YAML keeps the last silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Mark] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                continue  # left to the constructor, which says what is wrong
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice (first on line {seen[key].line + 1}); YAML "
                    "would silently keep only the last value, so delete one", key_node.start_mark)
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def read_stack_config(path: Path) -> tuple[dict[str, str], list[str]]:
    """Pulumi.<stack>.yaml -> (engine-style config map, secret keys).

    A file Pulumi could not read either is a SettingsError (the plan's exit 2) naming the file,
    the line and the fix, never a traceback.
    """
    from components.settings import SettingsError

    shape = ("a stack file is a map whose config: key maps each setting to its value, e.g.\n"
             "      config:\n        gcp:project: my-project\n        tpu-vllm:vllm:\n"
             "          maxModelLen: 32768\n    (see Pulumi.dev.yaml)")
    try:
        with path.open(encoding="utf-8") as stream:
            document = yaml.load(stream, Loader=_StackFileLoader)  # a SafeLoader subclass
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = " ".join(part for part in (error.context, error.problem) if part)
        if not isinstance(error, yaml.constructor.ConstructorError):
            problem = f"not valid YAML ({problem}); fix that line, or let pulumi config set write it"
        raise SettingsError([f"{path}{where}: {problem}"]) from None
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise SettingsError([f"{path}: cannot be read as YAML ({error}); {shape}"]) from None
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise SettingsError([f"{path}: holds a {type(document).__name__}, not a map; {shape}"])
    settings_map = document.get("config")
    if settings_map is None:
        settings_map = {}
    if not isinstance(settings_map, dict):
        raise SettingsError([f"{path}: config: holds a {type(settings_map).__name__}, not a map of "
                             f"setting: value; {shape}"])
    bad_keys = [key for key in settings_map if not isinstance(key, str)]
    if bad_keys:
        raise SettingsError([f"{path}: config: key {bad_keys[0]!r} is not a setting name; write keys "
                             "like tpu-vllm:vllm or gcp:project"])
    config: dict[str, str] = {}
    secret_keys: list[str] = []
    for key, value in settings_map.items():
        if ":" not in key:
            key = f"tpu-vllm:{key}"
        value, secret = _strip_secure(value)
        if secret:
            secret_keys.append(key)
        config[key] = value if isinstance(value, str) else json.dumps(value)
    return config, secret_keys


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


@dataclass
class ProgramRun:
    registrations: list[Any]
    warnings: list[str]
    settings: Any
    outputs: dict[str, tuple[Any, bool]]
    """name -> (value, is_secret)."""
    error: str | None = None
    """The program's own RunError, if it stopped (bad config, a missing secret)."""


def run_program(config: dict[str, str], secret_keys: list[str], stack: str,
                fixed_outputs: dict[str, dict[str, Any]] | None = None,
                failing_calls: dict[str, str] | None = None, validate_first: bool = True) -> ProgramRun:
    """Run __main__.py once under mocks in this process.

    validate_first: check the settings before the program runs and raise SettingsError (the
    plan's exit 2); otherwise the program's own RunError is returned with what it registered.
    """
    import pulumi
    from pulumi.runtime import config as runtime_config
    from pulumi.runtime.stack import get_root_resource, wait_for_rpcs
    from pulumi.runtime.sync_await import _sync_await

    from tools import mocks as stack_mocks

    os.environ.pop("PULUMI_CONFIG", None)
    recorder = stack_mocks.install(project=config["gcp:project"], stack=stack, fixed_outputs=fixed_outputs,
                                   failing_calls=failing_calls)
    runtime_config.set_all_config(config, secret_keys)

    from components import settings as settings_module

    loaded = settings_module.from_pulumi_config() if validate_first else None

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    try:
        namespace = runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")
    except pulumi.RunError as error:
        try:
            _sync_await(wait_for_rpcs())  # let what was already registered reach the mocks
        except Exception:  # noqa: BLE001 - the failure behind the RunError, already reported by it
            pass
        # Registrations may still be in flight on worker threads here: their loops stay open.
        return ProgramRun(recorder.registrations, [], None, {}, error=str(error))
    _sync_await(wait_for_rpcs())
    loaded = loaded or namespace["loaded"]

    outputs = {}
    for name, value in get_root_resource().outputs.items():
        output = pulumi.Output.from_input(value)
        outputs[name] = (_sync_await(output.future()), _sync_await(output.is_secret()))
    _close_loops(recorder)
    return ProgramRun(recorder.registrations, loaded.warnings, loaded.settings, outputs)


def _close_loops(recorder: Any) -> None:
    """Every RPC has returned: close the worker threads' loops and this thread's (see close_event_loops)."""
    import asyncio

    recorder.event_loops.add(asyncio.get_event_loop())
    recorder.close_event_loops()


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
    from tools.mocks import PLACEHOLDER_MEANINGS, mark_placeholders, redact

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


KEY_INPUTS = ("service", "accountId", "secretId", "role", "member", "name", "size", "type",
              "zone", "sourceRanges", "allows", "targetTags", "algorithm", "length")
# The gke platform's: cluster and node pools, and each Kubernetes object's name and namespace.
KEY_INPUTS += ("location", "releaseChannel", "nodeLocations", "autoscaling", "placementPolicy", "management",
               "nodeConfig", "metadata", "image")
# Kubernetes objects whose whole spec is what a reviewer reads first: the ComputeClass makes every TPU node.
SPEC_SHOWN_TYPES = ("kubernetes:cloud.google.com/v1:ComputeClass",)
# Inputs that are shell commands on the providers that run them (pulumi-command).
COMMAND_INPUTS = ("create", "update", "delete")
COMMAND_PROVIDER_PREFIX = "command:"
# Outputs named like this hold one command line each.
COMMAND_OUTPUT_SUFFIXES = ("Command", "Equivalent")
UNKNOWN_OFFLINE = "<unknown offline>"
# Shorter command lines read best as they are.
WRAP_ABOVE_CHARS = 100


def file_label(path: str, text: str) -> str:
    return f"<{path}: {len(text.encode()):,} bytes, sha256 {sha256(text)[:12]}>"


def _with_file_labels(value: Any, files: dict[str, str]) -> Any:
    found = leading_file(value, files) if isinstance(value, str) else None
    if found:
        repo_path, text, rest = found
        return file_label(repo_path, text) + (f" + {len(rest.encode()):,} rendered bytes" if rest else "")
    if isinstance(value, dict):
        return {key: _with_file_labels(item, files) for key, item in value.items()}
    if isinstance(value, list):
        return [_with_file_labels(item, files) for item in value]
    return value


def _wrappable(command: str) -> bool:
    from tools import command_line

    return len(command) > WRAP_ABOVE_CHARS and command_line.split(command) is not None


def is_command_output(name: str) -> bool:
    return name.endswith(COMMAND_OUTPUT_SUFFIXES)


def is_command_input(resource_type: str, key: str) -> bool:
    return resource_type.startswith(COMMAND_PROVIDER_PREFIX) and key in COMMAND_INPUTS


def _render_input(resource_type: str, key: str, value: Any, files: dict[str, str], indent: str) -> list[str]:
    from tools import command_line

    if value in (None, [], {}, ""):
        return []
    found = leading_file(value, files) if isinstance(value, str) else None
    if found:
        repo_path, text, rest = found
        lines = [f"{indent}{key}: {file_label(repo_path, text)}"]
        if rest:
            # What the stack renders after the script (config, units) is the part a reviewer must read.
            lines.append(f"{indent}  then, rendered by the stack:")
            lines += [f"{indent}    {line}".rstrip() for line in rest.splitlines()]
        return lines
    if isinstance(value, str) and is_command_input(resource_type, key) and _wrappable(value):
        return [f"{indent}{key}:", *command_line.wrap(value, indent + "  ")]
    if isinstance(value, str) and "\n" in value:
        return [f"{indent}{key}: |", *(f"{indent}  {line}" for line in value.splitlines())]
    if isinstance(value, str):
        return [f"{indent}{key}: {value}"] if is_command_input(resource_type, key) else [
            f"{indent}{key}: {json.dumps(value)}"]
    shown = json.dumps(_with_file_labels(value, files), sort_keys=True)
    if len(shown) <= 100:
        return [f"{indent}{key}: {shown}"]
    block = json.dumps(_with_file_labels(value, files), sort_keys=True, indent=2).splitlines()
    return [f"{indent}{key}:", *(f"{indent}  {line}" for line in block)]


def _shown_inputs(resource: dict[str, Any]) -> list[str]:
    """The inputs a reviewer reads first; --json has every one."""
    inputs = resource["inputs"]
    keys = [key for key in KEY_INPUTS if key in inputs]
    keys += [key for key in ("body", *COMMAND_INPUTS, "stdin", "connection") if key in inputs]
    if resource["type"] in SPEC_SHOWN_TYPES and "spec" in inputs:
        keys.append("spec")
    return keys


def _money(value: float) -> str:
    return f"${value:,.2f}"


def render_budget(plan: dict[str, Any]) -> list[str]:
    budget = plan["budget"]
    lines = ["cost (USD, us-west4 list prices; sources in components/budget.py):"]
    pricing = budget["pricing"]
    lines.append(f"  TPU v5litepod-1, {pricing}: {_money(budget['cost_per_hour_usd'])}/hour")
    if budget["max_spend_usd"] is not None:
        hours = f"{budget['run_hours']:g}h"
        lines.append(f"  one run stops by itself after {hours} (tpu.maxRunDuration): at most "
                     f"{_money(budget['max_spend_usd'])} for the TPU")
    else:
        lines.append(f"  nothing stops the TPU until pulumi destroy: a forgotten weekend costs "
                     f"{_money(budget['forgotten_weekend_usd'])}")
    lines.append(f"  compile-cache disk ({budget['cache_disk_type']}, {budget['cache_disk_gb']} GB x "
                 f"${budget['cache_disk_usd_per_gb_month']}/GB-month): {_money(budget['cache_disk_usd_per_month'])}"
                 "/month, billed whether or not a run is active")
    if budget["max_spend_with_disk_usd"] is not None:
        lines.append(f"  one run with the disk's share of those hours ({_money(budget['cache_disk_usd_per_run'])}): "
                     f"at most {_money(budget['max_spend_with_disk_usd'])}")
    idle = [f"the cache disk ({_money(budget['cache_disk_usd_per_month'])}/month)"]
    if budget["secret_versions"]:
        idle.append(f"{budget['secret_versions']} Secret Manager secret version(s) "
                    f"({_money(budget['secret_versions_usd_per_month'])}/month; the first 6 a month are free "
                    "per billing account)")
    lines.append(f"  with no run, still billing: {' and '.join(idle)}; about "
                 f"{_money(budget['idle_usd_per_month'])}/month")
    if budget["cache_disk_outlives_destroy"]:
        lines.append("  cache.keepOnDestroy: the disk outlives pulumi destroy and bills "
                     f"{_money(budget['cache_disk_usd_per_month'])}/month until you delete it "
                     "(see the cacheDiskBilling output)")
    else:
        lines.append("  pulumi destroy deletes the disk (cache.keepOnDestroy is false)")
    lines.append(f"  at the log's peak, 1,496.5 output tok/s: "
                 f"${budget['usd_per_million_output_tokens_at_1496_5_tok_s']} per million output tokens")
    if budget.get("platform") == "gke":
        from components.gke.costs import plan_cost_lines

        # The lines above are the VM's, which say a run stops the billing; nothing on gke does.
        lines = lines[:1] + plan_cost_lines(budget)
        lines += ["", "gke (the cluster as a whole, between gke.minReplicas and gke.maxReplicas):"]
        lines += [f"  {key}: {budget[key]}" for key in (
            "gke_replicas", "gke_cost_per_hour_usd_at_max_replicas", "gke_cost_per_hour_usd_at_min_replicas",
            "gke_baseline_usd_per_hour", "gke_max_spend_per_run_usd",
            "gke_usd_per_month_at_min_replicas", "kv_tokens_at_max_replicas", "load_limit_tokens_at_max_replicas")
            if key in budget]
    lines += ["", "memory and load (one v5e chip):"]
    for key in ("kv_bytes_per_token", "kv_tokens", "kv_blocks", "block_size", "hbm_cap_gib", "kv_pool_gib",
                "outside_cap_gib", "load_limit_tokens", "planned_load_tokens"):
        lines.append(f"  {key}: {budget[key]}")
    return lines


def render_text(plan: dict[str, Any]) -> str:
    from tools import command_line

    files = _file_texts(plan)
    lines = [f"tpu-vllm offline plan: stack {plan['stack']}, project {plan['project']}", ""]
    lines += [f"note: {note}" for note in plan["notes"]]
    if plan["placeholders"]:
        lines.append("note: values in <angle brackets> are placeholders: only GCP knows them after deploy")
        lines += [f"  {marker}: {meaning}" for marker, meaning in plan["placeholders"].items()]
    lines += [f"warning: {warning}" for warning in plan["warnings"]]

    resources = plan["resources"]
    real = [r for r in resources if not r["component"]]
    wrappers = len(resources) - len(real)
    lines += ["", f"resources: {len(real)} to create (+), grouped by {wrappers} component wrappers "
                  "(which create nothing themselves)"]
    for resource, depth in tree_order(resources):
        indent = "  " * (depth + 1)
        if resource["component"]:
            lines.append(f"{indent}[component] {resource['type']}  {resource['name']}")
            continue
        kept = "  (kept on pulumi destroy)" if resource["retain_on_delete"] else ""
        lines.append(f"{indent}+ {resource['type']}  {resource['name']}{kept}")
        for key in _shown_inputs(resource):
            lines += _render_input(resource["type"], key, resource["inputs"][key], files, indent + "    ")

    if plan["files"]:
        lines += ["", "files the program hands to the VM (repo file: where it goes):"]
        for entry in plan["files"]:
            lines.append(f"  {entry['path']} ({entry['bytes']:,} bytes, sha256 {entry['sha256'][:12]}): "
                         + "; ".join(entry["used_by"]))

    lines += [""] + render_budget(plan)
    lines += ["", "outputs:"]
    for name, value in plan["outputs"].items():
        if value is None:
            lines.append(f"  {name}: {UNKNOWN_OFFLINE}")
        elif isinstance(value, str) and is_command_output(name) and _wrappable(value):
            lines += [f"  {name}:", *command_line.wrap(value, "    ")]
        elif isinstance(value, str):
            lines.append(f"  {name}: {value}")
        else:
            lines.append(f"  {name}: {json.dumps(value, sort_keys=True)}")
    return "\n".join(lines) + "\n"


def _file_texts(plan: dict[str, Any]) -> dict[str, str]:
    """Text -> path for the files this plan recorded (their text is in the inputs)."""
    wanted = {entry["sha256"]: (entry["path"], entry["bytes"]) for entry in plan.get("files", [])}
    found = {}
    for resource in plan["resources"]:
        for _, text in strings_in(resource["inputs"]):
            for digest, (path, size) in wanted.items():
                # The file is the whole value, or its head (serve.sh before the files rendered for it).
                head = text.encode()[:size].decode(errors="ignore")
                if sha256(head) == digest:
                    found[head] = path
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.plan", description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="dev", help="reads Pulumi.<stack>.yaml (default: dev)")
    shape = parser.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true", help="print one JSON object (keys sorted)")
    shape.add_argument("--diff", type=Path, metavar="BASE.json",
                       help="compare with a plan saved by --json from another commit")
    parser.add_argument("--config-dir", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    from components.settings import SettingsError
    from tools import plan_diff

    try:
        base = plan_diff.load_plan(args.diff) if args.diff else None
        plan = run_plan(args.stack, args.config_dir)
    except SettingsError as error:
        print(error.render(), file=sys.stderr)
        return 2
    except (FileNotFoundError, yaml.YAMLError, plan_diff.PlanFileError, PlanError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if base is not None:
        print(plan_diff.render_diff(base, json.loads(to_json(plan)), base_label=args.diff.name), end="")
    elif args.json:
        print(to_json(plan))
    else:
        print(render_text(plan), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
