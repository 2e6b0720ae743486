"""tpu-vllm's guardrails as plain functions over resource properties.

Importable without pulumi_policy (the pack's entry point, policy/__main__.py, wraps
them), so they are tested directly on the dev stack's resources. Each returns a
list of violation messages, each saying how to fix it.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

QUEUED_RESOURCE_TYPES = {"pulumi-python:dynamic/tpu-vllm:QueuedResource"}
# pulumi-gcp TPU resources: none of them can carry a run duration.
UNBOUNDED_TPU_TYPES = {"gcp:tpu/v2Vm:V2Vm", "gcp:tpu/node:Node", "gcp:tpu/v2QueuedResource:V2QueuedResource"}
FIREWALL_TYPE = "gcp:compute/firewall:Firewall"
SECRET_TYPE = "gcp:secretmanager/secret:Secret"
COMMAND_TYPES = {"command:remote:Command", "command:local:Command"}
PROJECT_IAM_TYPES = {"gcp:projects/iAMMember:IAMMember", "gcp:projects/iAMBinding:IAMBinding"}

MAX_RUN_SECONDS = 7 * 24 * 3600  # the API's own limit for flex-start
# The build log: 0.95 fails XLA program allocation ~691 s in; 0.92 is the measured ceiling.
MAX_GPU_MEMORY_UTILIZATION = 0.92
OPEN = {"0.0.0.0/0", "::/0"}
OPT_IN_MARKER = "0.0.0.0/0 explicitly allowed by tpu-vllm:access."

DEFAULT_CONFIG = {
    "allowUnboundedBilling": False,
    "allowOpenSsh": False,
    "allowPublicServing": False,
    "honorStackOptIns": True,
    "servingPort": 8000,
}


def _config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    return {**DEFAULT_CONFIG, **(config or {})}


def _seconds(duration: str) -> int | None:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)s", str(duration or ""))
    return int(float(match.group(1))) if match else None


def tpu_billing_stops(type_: str, props: Mapping[str, Any], config: Mapping[str, Any] | None = None) -> list[str]:
    """A flex-start request runs at most 7 days; nothing may bill without an end unless allowed."""
    config = _config(config)
    if type_ in UNBOUNDED_TPU_TYPES:
        if config["allowUnboundedBilling"]:
            return []
        return [f"{type_} has no run duration, so it bills until someone deletes it; use tpu-vllm's "
                "flex-start queued resource (tpu.provisioningModel: flex-start, tpu.maxRunDuration: 4h), "
                "or set the policy config allowUnboundedBilling: true"]
    if type_ not in QUEUED_RESOURCE_TYPES:
        return []
    body = props.get("body") or {}
    model = body.get("provisioningModel")
    if model == "FLEX_START":
        seconds = _seconds((body.get("runDuration") or {}).get("maxRunDuration"))
        if seconds is None:
            return ["the flex-start queued resource has no runDuration.maxRunDuration, so nothing stops "
                    "its billing; set tpu-vllm:tpu.maxRunDuration (e.g. 4h)"]
        if seconds > MAX_RUN_SECONDS:
            return [f"runDuration.maxRunDuration is {seconds}s, over 7 days (604800s); set "
                    "tpu-vllm:tpu.maxRunDuration to 7d or less"]
        return []
    if config["allowUnboundedBilling"]:
        return []
    return [f"the queued resource is {model or 'not flex-start'}, which has no automatic stop (a forgotten "
            "weekend is $35 on spot, $72 on-demand); use tpu.provisioningModel: flex-start, or set the "
            "policy config allowUnboundedBilling: true"]


def _ports(allows: Iterable[Mapping[str, Any]]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for allow in allows or []:
        if allow.get("protocol") not in ("tcp", "all"):
            continue
        ports = allow.get("ports") or ["0-65535"]
        for port in ports:
            low, _, high = str(port).partition("-")
            spans.append((int(low), int(high or low)))
    return spans


def firewall_not_open_to_the_world(type_: str, props: Mapping[str, Any],
                                   config: Mapping[str, Any] | None = None) -> list[str]:
    """No rule opens SSH or the serving port to 0.0.0.0/0 unless explicitly allowed."""
    config = _config(config)
    if type_ != FIREWALL_TYPE or props.get("direction", "INGRESS") != "INGRESS":
        return []
    if not OPEN & set(props.get("sourceRanges") or []):
        return []
    opted_in = config["honorStackOptIns"] and OPT_IN_MARKER in (props.get("description") or "")
    spans = _ports(props.get("allows") or [])
    violations = []
    checks = [(22, "SSH", "allowOpenSsh", "tpu-vllm:access.sshSourceRanges to your address"),
              (int(config["servingPort"]), "the serving port", "allowPublicServing",
               "the SSH tunnel, or tpu-vllm:access.servingSourceRanges to your ranges")]
    for port, what, setting, fix in checks:
        if any(low <= port <= high for low, high in spans) and not (config[setting] or opted_in):
            violations.append(f"firewall {props.get('name', '')} opens {what} ({port}) to 0.0.0.0/0; use {fix}, "
                              f"or opt in explicitly (stack setting access.allow* or policy config {setting})")
    return violations


SECRET_PATTERNS = [
    (re.compile(r"hf_[A-Za-z0-9]{30,}"), "a Hugging Face token"),
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"), "a private key"),
    (re.compile(r"ya29\.[A-Za-z0-9_\-]{20,}"), "a Google access token"),
]
LONG_TOKEN = re.compile(r"[A-Za-z0-9+/=_\-]{32,}")


def _entropy(text: str) -> float:
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def _looks_random(text: str) -> bool:
    # Long, mixed-class, high-entropy runs: API keys and passwords, not paths or words.
    return (_entropy(text) > 4.0 and any(c.isdigit() for c in text)
            and any(c.isupper() for c in text) and any(c.islower() for c in text))


def metadata_has_no_secrets(type_: str, props: Mapping[str, Any],
                            config: Mapping[str, Any] | None = None) -> list[str]:
    """Instance metadata is readable from the instance: no token, key or random string in it."""
    metadata: Mapping[str, Any] = {}
    if type_ in QUEUED_RESOURCE_TYPES:
        for spec in ((props.get("body") or {}).get("tpu") or {}).get("nodeSpec") or []:
            metadata = {**metadata, **((spec.get("node") or {}).get("metadata") or {})}
    elif type_ in UNBOUNDED_TPU_TYPES or type_ == "gcp:compute/instance:Instance":
        metadata = {**(props.get("metadata") or {})}
        if props.get("metadataStartupScript"):
            metadata["startup-script"] = props["metadataStartupScript"]
    violations = []
    for key, value in metadata.items():
        text = str(value)
        for pattern, what in SECRET_PATTERNS:
            if pattern.search(text):
                violations.append(f"metadata {key!r} contains {what}; keep it in Secret Manager and let the VM "
                                  "read it at boot (tpu-vllm:hfToken or hfTokenSecret)")
        if key == "ssh-keys":
            continue  # public keys are long and random by design
        if any(_looks_random(token) for token in LONG_TOKEN.findall(text)):
            violations.append(f"metadata {key!r} contains a long random string that looks like a secret; "
                              "store it in Secret Manager and pass only its name")
    return violations


def secrets_are_labelled(type_: str, props: Mapping[str, Any], config: Mapping[str, Any] | None = None) -> list[str]:
    if type_ != SECRET_TYPE or props.get("labels"):
        return []
    return [f"secret {props.get('secretId', '')} has no labels; add labels (e.g. app, stack) so it can be "
            "found, audited and cleaned up"]


GPU_MEMORY_FLAG = re.compile(r"--gpu-memory-utilization[ =]([0-9.]+)")


def gpu_memory_utilization_capped(type_: str, props: Mapping[str, Any],
                                  config: Mapping[str, Any] | None = None) -> list[str]:
    if type_ not in COMMAND_TYPES:
        return []
    violations = []
    for field in ("create", "update"):
        for value in GPU_MEMORY_FLAG.findall(str(props.get(field) or "")):
            if float(value) > MAX_GPU_MEMORY_UTILIZATION:
                violations.append(f"the serve command sets --gpu-memory-utilization {value}: above 0.92 the "
                                  "build log saw XLA program allocation fail (~691 s in at 0.95); set "
                                  "tpu-vllm:vllm.gpuMemoryUtilization to 0.92")
    return violations


def tpu_service_account_has_no_project_role(resources: Iterable[tuple[str, Mapping[str, Any]]],
                                            config: Mapping[str, Any] | None = None) -> list[str]:
    """Stack-wide: the TPU's service account gets access per secret, never on the project."""
    resources = list(resources)
    emails = set()
    for type_, props in resources:
        if type_ in QUEUED_RESOURCE_TYPES:
            for spec in ((props.get("body") or {}).get("tpu") or {}).get("nodeSpec") or []:
                email = ((spec.get("node") or {}).get("serviceAccount") or {}).get("email")
                if email:
                    emails.add(f"serviceAccount:{email}")
    violations = []
    for type_, props in resources:
        if type_ not in PROJECT_IAM_TYPES:
            continue
        members = set(props.get("members") or []) | {props.get("member")}
        for member in sorted(members & emails):
            violations.append(f"{member} gets {props.get('role')} on the whole project; the TPU VM only needs "
                              "roles/secretmanager.secretAccessor on its own secrets (SecretIamMember)")
    return violations


RESOURCE_RULES = {
    "tpu-billing-stops": (tpu_billing_stops,
                          "A flex-start TPU runs at most 7 days; no TPU bills without an end unless allowed."),
    "firewall-not-open-to-the-world": (firewall_not_open_to_the_world,
                                       "SSH and the serving port are not open to 0.0.0.0/0 unless allowed."),
    "metadata-has-no-secrets": (metadata_has_no_secrets,
                                "No instance metadata value looks like a token, key or random secret."),
    "secrets-are-labelled": (secrets_are_labelled, "Secret Manager secrets carry labels."),
    "gpu-memory-utilization-capped": (gpu_memory_utilization_capped,
                                      "The vLLM serve command keeps --gpu-memory-utilization at 0.92 or below."),
}
STACK_RULES = {
    "tpu-service-account-has-no-project-role": (
        tpu_service_account_has_no_project_role,
        "The TPU VM's service account gets no project-level role."),
}
