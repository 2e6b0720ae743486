"""Offline plan: run the real program under Pulumi mocks with a stack's config file.

No Pulumi CLI, no plugins, no credentials. Reviewers read a change with it:

    python -m tools.plan --stack dev          # readable
    python -m tools.plan --stack dev --json   # one JSON object

Secrets (and `secure:` values it cannot decrypt) appear only as "[secret]".
An invalid config exits 2 with every problem listed.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
PLACEHOLDER_PROJECT = "PLACEHOLDER-set-gcp-project"
SECRET_PLACEHOLDER = "[secret]"


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


def budget_summary(settings: Any) -> dict[str, Any]:
    from components import budget

    pricing = settings.tpu.provisioning_model
    summary: dict[str, Any] = {
        "pricing": pricing,
        "cost_per_hour_usd": budget.cost_per_hour_usd(pricing),
        "max_spend_usd": (round(budget.max_spend_usd(pricing, settings.tpu.run_seconds), 4)
                          if pricing == "flex-start" else None),
        "forgotten_weekend_usd": (None if pricing == "flex-start"
                                  else round(budget.forgotten_weekend_usd(pricing), 2)),
        "usd_per_million_output_tokens_at_1496_5_tok_s": round(
            budget.usd_per_million_output_tokens(pricing, 1496.5), 4),
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
        return ProgramRun(recorder.registrations, [], None, {}, error=str(error))
    _sync_await(wait_for_rpcs())
    loaded = loaded or namespace["loaded"]

    outputs = {}
    for name, value in get_root_resource().outputs.items():
        output = pulumi.Output.from_input(value)
        outputs[name] = (_sync_await(output.future()), _sync_await(output.is_secret()))
    return ProgramRun(recorder.registrations, loaded.warnings, loaded.settings, outputs)


def run_plan(stack: str, config_dir: Path = ROOT) -> dict[str, Any]:
    """Everything the plan shows, as data. Raises SettingsError on a bad config."""
    from tools.mocks import redact

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
    return {
        "stack": stack,
        "project": config["gcp:project"],
        "notes": notes,
        "warnings": program.warnings,
        "budget": budget_summary(program.settings),
        "resources": [
            {"type": r.type, "name": r.name, "parent": r.parent, "inputs": redact(r.inputs)}
            for r in program.registrations
        ],
        "outputs": {name: SECRET_PLACEHOLDER if secret else value
                    for name, (value, secret) in program.outputs.items()},
    }


KEY_INPUTS = ("service", "accountId", "secretId", "role", "member", "name", "size", "type",
              "zone", "sourceRanges", "allows", "targetTags", "algorithm", "length")
# The gke platform's: cluster and node pools, and each Kubernetes object's name and namespace.
KEY_INPUTS += ("location", "releaseChannel", "nodeLocations", "autoscaling", "placementPolicy", "management",
               "nodeConfig", "metadata")


def render_text(plan: dict[str, Any]) -> str:
    lines = [f"tpu-vllm offline plan: stack {plan['stack']}, project {plan['project']}", ""]
    lines += [f"note: {note}" for note in plan["notes"]]
    lines += [f"warning: {warning}" for warning in plan["warnings"]]
    lines += ["", f"resources ({len(plan['resources'])}):"]
    for resource in plan["resources"]:
        parent = f"  (in {resource['parent']})" if resource["parent"] else ""
        lines.append(f"  + {resource['type']}  {resource['name']}{parent}")
        inputs = resource["inputs"]
        for key in KEY_INPUTS:
            if key in inputs and inputs[key] not in (None, [], {}):
                lines.append(f"        {key}: {json.dumps(inputs[key])}")
        if "body" in inputs:
            body = json.loads(json.dumps(inputs["body"]))
            metadata = body["tpu"]["nodeSpec"][0]["node"]["metadata"]
            if "startup-script" in metadata:
                metadata["startup-script"] = f"<startup/startup.sh, {len(metadata['startup-script'])} bytes>"
            lines += ["        body: " + line for line in json.dumps(body, indent=2).splitlines()]
        if "create" in inputs:
            lines.append(f"        create: {inputs['create']}")
    lines += ["", "budget:"]
    lines += [f"  {key}: {value}" for key, value in plan["budget"].items()]
    lines += ["", "outputs:"]
    lines += [f"  {key}: {value}" for key, value in plan["outputs"].items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.plan", description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="dev", help="reads Pulumi.<stack>.yaml (default: dev)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--config-dir", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    from components.settings import SettingsError

    try:
        plan = run_plan(args.stack, args.config_dir)
    except SettingsError as error:
        print(error.render(), file=sys.stderr)
        return 2
    except (FileNotFoundError, yaml.YAMLError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(plan, indent=2, default=str) if args.json else render_text(plan))
    return 0


if __name__ == "__main__":
    sys.exit(main())
