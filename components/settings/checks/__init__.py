"""Rules that read more than one key, by subject; `_cross_checks` runs them all."""

from __future__ import annotations

import math
import re

from components import budget
from components.settings.checks.access import _access_checks
from components.settings.checks.gke import _gke_cross_checks
from components.settings.checks.memory import _memory_checks
from components.settings.checks.model import _model_checks
from components.settings.facts import (
    FLEX_START_REJECTING_ZONES,
    FLEX_START_VERIFIED_ZONES,
    MAX_RUN_SECONDS,
    MIN_RUN_SECONDS,
    NAMESPACE,
)
from components.settings.root import Settings


def _cross_checks(settings: Settings, warnings: list[str]) -> list[str]:
    """Rules that read more than one key."""
    errors: list[str] = []
    tpu, vllm = settings.tpu, settings.vllm
    fields_set = tpu.model_fields_set

    if tpu.provisioning_model == "flex-start":
        seconds = tpu.run_seconds
        deploy_seconds = budget.COLD_BOOT_SECONDS + vllm.health_timeout_seconds
        if not MIN_RUN_SECONDS <= seconds <= MAX_RUN_SECONDS:
            errors.append(
                f"{NAMESPACE}:tpu.maxRunDuration = {tpu.max_run_duration!r}: flex-start runs "
                "between 1 minute and 7 days; set something like 4h"
            )
        elif seconds < deploy_seconds:
            errors.append(
                f"{NAMESPACE}:tpu.maxRunDuration = {tpu.max_run_duration!r}: GCP deletes the node "
                f"{seconds} s after it starts, before the deploy can be sure to finish: a cold "
                f"start takes ~{budget.COLD_BOOT_SECONDS} s (the log) and the deploy waits up to "
                f"vllm.healthTimeout ({vllm.health_timeout_seconds} s) for /health; set it to at "
                f"least {math.ceil(deploy_seconds / 60)}m (the default is 4h), or lower "
                "vllm.healthTimeout"
            )
        if tpu.zone in FLEX_START_REJECTING_ZONES:
            errors.append(
                f"{NAMESPACE}:tpu.zone = {tpu.zone!r}: the API rejects this there, whatever "
                "the quota: 'FLEX_START provisioning model is not supported for accelerator "
                f"type \"{tpu.accelerator_type}\"'; set it to us-west4-a"
            )
        elif tpu.zone not in FLEX_START_VERIFIED_ZONES:
            warnings.append(
                f"tpu.zone={tpu.zone}: flex-start {tpu.accelerator_type} is only verified in "
                "us-west4-a; other zones may reject it at the API"
            )
    else:
        if "max_run_duration" in fields_set:
            errors.append(
                f"{NAMESPACE}:tpu.maxRunDuration = {tpu.max_run_duration!r}: only flex-start "
                f"accepts a run duration, not {tpu.provisioning_model}; remove the key or use "
                "flex-start"
            )
        weekend = budget.forgotten_weekend_usd(tpu.provisioning_model)
        warnings.append(
            f"tpu.provisioningModel={tpu.provisioning_model}: nothing stops its billing until "
            f"you run pulumi destroy; a forgotten weekend ({budget.FORGOTTEN_WEEKEND_HOURS} h) "
            f"costs ${weekend:.0f}. flex-start costs 3.8% more than spot and stops by itself"
        )

    if tpu.subnetwork and (region := re.search(r"regions/([^/]+)/", tpu.subnetwork)) \
            and region.group(1) != tpu.region:
        errors.append(
            f"{NAMESPACE}:tpu.subnetwork = {tpu.subnetwork!r}: the subnetwork is in "
            f"{region.group(1)} but the node is in {tpu.zone} ({tpu.region}); use a subnetwork of "
            f"{tpu.region}"
        )
    errors += _model_checks(settings, warnings)
    errors += _memory_checks(settings, warnings)

    if settings.front.upstream_port in (vllm.port, 22):
        errors.append(
            f"{NAMESPACE}:front.upstreamPort = {settings.front.upstream_port}: vLLM's loopback port must differ "
            f"from the front's serving port (vllm.port = {vllm.port}) and from SSH (22); use another free port, "
            f"e.g. {8002 if vllm.port == 8001 else 8001}"
        )

    access = settings.access
    errors += _access_checks(access, warnings, needs_ssh=settings.platform == "vm")
    if (access.ssh_public_key is None) != (settings.ssh_private_key is None):
        errors.append(
            f"{NAMESPACE}:access.sshPublicKey / {NAMESPACE}:sshPrivateKey: set both (the private "
            "key with --secret) or neither (the stack generates an ED25519 key)"
        )
    if vllm.weights_on_disk and settings.cache.size_gb < 20:
        errors.append(
            f"{NAMESPACE}:cache.sizeGb = {settings.cache.size_gb}: weightsOnDisk needs room "
            "for the 9.54 GiB checkpoint and the compile cache; use at least 20"
        )
    errors += _gke_cross_checks(settings, warnings)
    return errors
