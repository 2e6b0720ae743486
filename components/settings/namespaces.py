"""Config keys outside every namespace anything reads: `tpu-vlm:cache` is a typo the stack would ignore.

Pulumi passes every key of the stack file to the program, and each provider reads only its own namespace
(its package's pulumi-plugin.json `name`), so a key under a namespace nobody reads is silently dropped.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import pkgutil
from collections.abc import Iterable
from functools import cache

from components.settings.facts import NAMESPACE
from components.settings.findings import NO_VALUE, Finding

# The engine's own settings (pulumi:tags, pulumi:disable-default-providers, ...).
ENGINE_NAMESPACE = "pulumi"
# Spellings a typo of the program's namespace is likely to take: closer than this is "meant to be tpu-vllm".
CLOSE_TO_NAMESPACE = 0.7


@cache
def provider_namespaces() -> frozenset[str]:
    """The config namespaces of the Pulumi provider packages installed beside the program."""
    names = set()
    for module in pkgutil.iter_modules():
        if not module.name.startswith("pulumi_") or not module.ispkg:
            continue
        spec = importlib.util.find_spec(module.name)
        for location in (spec.submodule_search_locations or []) if spec else []:
            try:
                with open(f"{location}/pulumi-plugin.json", encoding="utf-8") as stream:
                    plugin = json.load(stream)
            except (OSError, ValueError):
                continue
            if isinstance(plugin, dict) and isinstance(plugin.get("name"), str) and plugin.get("resource", True):
                names.add(plugin["name"])
    return frozenset(names)


def _normalised(namespace: str) -> str:
    return "".join(character for character in namespace.lower() if character.isalnum())


def is_close_to_ours(namespace: str) -> bool:
    if _normalised(namespace) == _normalised(NAMESPACE):
        return True
    return difflib.SequenceMatcher(None, namespace.lower(), NAMESPACE).ratio() >= CLOSE_TO_NAMESPACE


def unread_namespace_findings(keys: Iterable[str], stack_file: str) -> list[Finding]:
    """One error per key whose namespace neither this program nor an installed provider reads."""
    known = provider_namespaces() | {NAMESPACE, ENGINE_NAMESPACE}
    findings = []
    for key in sorted(keys):
        namespace, separator, name = key.partition(":")
        if not separator or namespace in known:
            continue
        if is_close_to_ours(namespace):
            message = (f"is under the namespace {namespace!r}, which nothing reads, so the stack ignores it "
                       f"(a typo of {NAMESPACE!r}?)")
            fix = (f"rename the key to {NAMESPACE}:{name} in {stack_file} (or `pulumi config rm '{key}'` and set "
                   f"it again under {NAMESPACE}:)")
        else:
            message = (f"is under the namespace {namespace!r}, which neither this program ({NAMESPACE}) nor an "
                       f"installed provider ({', '.join(sorted(provider_namespaces()))}) reads")
            fix = f"fix its namespace in {stack_file}, or remove it: `pulumi config rm '{key}'`"
        # The value may be a secret of another tool: name the key only.
        findings.append(Finding(key, NO_VALUE, message, fix))
    return findings


# pulumi-gcp's provider-wide defaults that this stack never leaves to the provider: every zonal or regional resource
# names its place from the stack's own settings, so these decide nothing here (issue 29).
PLACED_BY_THE_STACK = {
    "gcp:zone": "tpu-vllm:tpu.zone (the TPU, its disk; gke: tpu-vllm:gke.location and gke.tpuZones)",
    "gcp:region": "tpu-vllm:tpu.zone's region (gke: tpu-vllm:gke.location)",
}


def provider_default_findings(config: dict[str, object], stack_file: str) -> list[Finding]:
    """A warning per gcp:zone / gcp:region set on the stack: the stack places everything by its own settings."""
    findings = []
    for key, decides in PLACED_BY_THE_STACK.items():
        if key in config:
            findings.append(Finding.warning(
                key, config[key], f"is set, but no resource of this stack takes its place from it: {decides} does",
                f"set {decides.split(' ')[0]} instead and remove it: `pulumi config rm {key}` ({stack_file})"))
    return findings
