"""The plan as text, the way a reviewer reads it: a tree of resources with their key inputs, costs, outputs."""

from __future__ import annotations

import json
from typing import Any

from tools.plan import command_line
from tools.plan.model import (
    COMMAND_INPUTS,
    is_command_input,
    is_command_output,
    leading_file,
    sha256,
    strings_in,
    tree_order,
)

KEY_INPUTS = ("service", "accountId", "secretId", "role", "member", "name", "size", "type",
              "zone", "sourceRanges", "allows", "targetTags", "algorithm", "length")
# The gke platform's: cluster and node pools, and each Kubernetes object's name and namespace.
KEY_INPUTS += ("location", "releaseChannel", "nodeLocations", "autoscaling", "placementPolicy", "management",
               "nodeConfig", "metadata", "image")
# Kubernetes objects whose whole spec is what a reviewer reads first: the ComputeClass makes every TPU node.
SPEC_SHOWN_TYPES = ("kubernetes:cloud.google.com/v1:ComputeClass",)
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
    return len(command) > WRAP_ABOVE_CHARS and command_line.split(command) is not None


def _render_input(resource_type: str, key: str, value: Any, files: dict[str, str], indent: str) -> list[str]:
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


def render_budget(plan: dict[str, Any]) -> list[str]:
    from components.economics.cost_lines import plan_cost_lines

    budget = plan["budget"]
    # The log's shape adds no tpu_* fields to the budget (components/economics/costs.py shape_summary).
    # None: no price read for the chip (TPU7x); the TPU line then says "price not found".
    region = budget.get("tpu_price_region", "us-west4") or "no TPU"
    lines = [f"cost (USD, {region} list prices; sources in components/basis/price_list.py and "
             "components/catalog/prices.py):", *plan_cost_lines(budget)]
    if budget.get("platform") == "gke":
        lines += ["", "gke (the cluster as a whole, between gke.minReplicas and gke.maxReplicas):"]
        lines += [f"  {key}: {budget[key]}" for key in (
            "gke_replicas", "gke_cost_per_hour_usd_at_max_replicas", "gke_cost_per_hour_usd_at_min_replicas",
            "gke_baseline_usd_per_hour", "gke_max_spend_per_run_usd",
            "gke_usd_per_month_at_min_replicas", "kv_tokens_at_max_replicas", "load_limit_tokens_at_max_replicas")
            if key in budget]
    host = (f"{budget['tpu_accelerator_type']}, tensor-parallel size {budget['tensor_parallel_size']}"
            if "tpu_accelerator_type" in budget else "one v5e chip")
    if "data_parallel_size" in budget:
        host += f" x data-parallel size {budget['data_parallel_size']}"
    lines += ["", f"memory and load ({host}):"]
    for key in ("layout_how", "output_tokens_per_second", "output_tokens_per_second_how",
                "usd_per_million_output_tokens", "usd_per_million_output_tokens_how", "kv_tokens_how",
                "kv_measured_on_this_shape"):
        if key in budget:
            lines.append(f"  {key}: {budget[key]}")
    for key in ("kv_bytes_per_token", "kv_tokens", "kv_blocks", "block_size", "hbm_cap_gib", "kv_pool_gib",
                "outside_cap_gib", "load_limit_tokens", "planned_load_tokens"):
        lines.append(f"  {key}: {budget[key]}")
    for key in ("blocks_per_request", "token_buckets", "tpu_inference_environment"):
        if key in budget:
            shown = budget[key] if isinstance(budget[key], int) else json.dumps(budget[key], sort_keys=True)
            lines.append(f"  {key}: {shown}")
    if budget.get("untested_arms"):
        lines += ["", "untested arms (the build log did not measure these; compare each with docs/arms.md):"]
        for arm in budget["untested_arms"]:
            lines += [f"  {arm['setting']}: {arm['renders']}", f"    {arm['why']}"]
    return lines


def render_text(plan: dict[str, Any]) -> str:
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
        waits = resource.get("custom_timeouts") or {}
        if waits:
            shown = ", ".join(f"{time} to {step}" for step, time in waits.items())
            kept += f"  (the provider waits up to {shown})"
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

