"""No TPU bills without an end: a flex-start request carries a run duration of at most 7 days."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

try:
    from .resource_view import (
        COMPUTE_INSTANCE_TYPES,
        INSTANCE_TYPE,
        QUEUED_RESOURCE_TYPES,
        TPU_MACHINE_PREFIXES,
        UNBOUNDED_TPU_TYPES,
        with_defaults,
    )
except ImportError:  # run by the pack's __main__, which puts this directory on sys.path
    from resource_view import (
        COMPUTE_INSTANCE_TYPES,
        INSTANCE_TYPE,
        QUEUED_RESOURCE_TYPES,
        TPU_MACHINE_PREFIXES,
        UNBOUNDED_TPU_TYPES,
        with_defaults,
    )

MAX_RUN_SECONDS = 7 * 24 * 3600  # the API's own limit for flex-start
# Compute Engine's shortest flex-start run: it "must be between 10 minutes and seven days" (About Flex-start VMs).
MIN_INSTANCE_RUN_SECONDS = 10 * 60


def _seconds(duration: str) -> int | None:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)s", str(duration or ""))
    return int(float(match.group(1))) if match else None


def tpu_billing_stops(type_: str, props: Mapping[str, Any], config: Mapping[str, Any] | None = None) -> list[str]:
    """A flex-start request runs at most 7 days; nothing may bill without an end unless allowed."""
    config = with_defaults(config)
    if type_ in UNBOUNDED_TPU_TYPES:
        if config["allowUnboundedBilling"]:
            return []
        return [f"{type_} has no run duration, so it bills until someone deletes it; use tpu-vllm's "
                "flex-start queued resource (tpu.provisioningModel: flex-start, tpu.maxRunDuration: 4h), "
                "or set the policy config allowUnboundedBilling: true"]
    if type_ == INSTANCE_TYPE:
        return _instance_billing_stops(props, config)
    if type_ in COMPUTE_INSTANCE_TYPES:
        return _instance_billing_stops(props.get("body") or {}, config)
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


def _instance_billing_stops(props: Mapping[str, Any], config: Mapping[str, Any]) -> list[str]:
    """A TPU VM through Compute Engine: flex-start with a maxRunDuration of at most 7 days that deletes it, or
    (allowed) an end-less spot/on-demand one. Scheduling names are compute.v1.json's (Scheduling), which both
    pulumi-gcp's inputs and tpu-vllm's own instance body use."""
    machine = str(props.get("machineType") or "").rsplit("/", 1)[-1]
    if not machine.startswith(TPU_MACHINE_PREFIXES):
        return []
    scheduling = props.get("scheduling") or {}
    model = scheduling.get("provisioningModel") or "STANDARD"
    seconds = (scheduling.get("maxRunDuration") or {}).get("seconds")
    seconds = int(float(seconds)) if seconds not in (None, "") else None
    if seconds is not None:
        if seconds > MAX_RUN_SECONDS:
            return [f"the {machine} instance's scheduling.maxRunDuration is {seconds}s, over 7 days (604800s); "
                    "set tpu-vllm:tpu.maxRunDuration to 7d or less"]
        if model == "FLEX_START" and seconds < MIN_INSTANCE_RUN_SECONDS:
            return [f"the flex-start {machine} instance's scheduling.maxRunDuration is {seconds}s, under Compute "
                    f"Engine's 10-minute minimum ({MIN_INSTANCE_RUN_SECONDS}s), so the insert is refused; set "
                    "tpu-vllm:tpu.maxRunDuration to 10m or more"]
        if scheduling.get("instanceTerminationAction") != "DELETE":
            return [f"the {machine} instance's run ends with {scheduling.get('instanceTerminationAction') or 'no'} "
                    "termination action, not DELETE, so what it leaves goes on billing; use tpu-vllm's "
                    "flex-start (it sets DELETE)"]
        return []
    if model == "FLEX_START":
        return [f"the flex-start {machine} instance has no scheduling.maxRunDuration, so nothing stops its billing; "
                "set tpu-vllm:tpu.maxRunDuration (e.g. 4h)"]
    if config["allowUnboundedBilling"]:
        return []
    return [f"the {machine} instance is {model}, which has no automatic stop; use tpu.provisioningModel: "
            "flex-start, or set the policy config allowUnboundedBilling: true"]
