"""No TPU bills without an end: a flex-start request carries a run duration of at most 7 days."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

try:
    from .resource_view import QUEUED_RESOURCE_TYPES, UNBOUNDED_TPU_TYPES, with_defaults
except ImportError:  # run by the pack's __main__, which puts this directory on sys.path
    from resource_view import QUEUED_RESOURCE_TYPES, UNBOUNDED_TPU_TYPES, with_defaults

MAX_RUN_SECONDS = 7 * 24 * 3600  # the API's own limit for flex-start


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
