"""Cross-key rules of the chip: the run's length against the deploy, the zone against flex-start, the subnetwork."""

from __future__ import annotations

import math
import re

from components.basis import boot, spending
from components.settings.facts import (
    FLEX_START_REJECTING_ZONES,
    FLEX_START_VERIFIED_ZONES,
    MAX_RUN_SECONDS,
    MIN_RUN_SECONDS,
)
from components.settings.findings import Finding
from components.settings.root import Settings


def tpu_checks(settings: Settings) -> list[Finding]:
    findings: list[Finding] = []
    tpu, vllm = settings.tpu, settings.vllm
    if tpu.provisioning_model == "flex-start":
        seconds = tpu.run_seconds
        deploy_seconds = boot.COLD_BOOT_SECONDS + vllm.health_timeout_seconds
        if not MIN_RUN_SECONDS <= seconds <= MAX_RUN_SECONDS:
            findings.append(Finding("tpu.maxRunDuration", tpu.max_run_duration,
                                    "flex-start runs between 1 minute and 7 days", "set something like 4h"))
        elif seconds < deploy_seconds:
            findings.append(Finding(
                "tpu.maxRunDuration", tpu.max_run_duration,
                f"GCP deletes the node {seconds} s after it starts, before the deploy can be sure to finish: a cold "
                f"start takes ~{boot.COLD_BOOT_SECONDS} s (the log) and the deploy waits up to vllm.healthTimeout "
                f"({vllm.health_timeout_seconds} s) for /health",
                f"set it to at least {math.ceil(deploy_seconds / 60)}m (the default is 4h), or lower "
                "vllm.healthTimeout",
                also_keys=("vllm.healthTimeout",),
            ))
        if tpu.zone in FLEX_START_REJECTING_ZONES:
            findings.append(Finding(
                "tpu.zone", tpu.zone,
                "the API rejects this there, whatever the quota: 'FLEX_START provisioning model is not supported "
                f"for accelerator type \"{tpu.accelerator_type}\"'",
                "set it to us-west4-a",
            ))
        elif tpu.zone not in FLEX_START_VERIFIED_ZONES:
            findings.append(Finding.warning(
                "tpu.zone", tpu.zone,
                f"flex-start {tpu.accelerator_type} is only verified in us-west4-a; other zones may reject it at "
                "the API",
                "use us-west4-a to be sure of it",
            ))
    else:
        if "max_run_duration" in tpu.model_fields_set:
            findings.append(Finding(
                "tpu.maxRunDuration", tpu.max_run_duration,
                f"only flex-start accepts a run duration, not {tpu.provisioning_model}",
                "remove the key or use flex-start", also_keys=("tpu.provisioningModel",),
            ))
        weekend = spending.forgotten_weekend_usd(tpu.provisioning_model)
        findings.append(Finding.warning(
            "tpu.provisioningModel", tpu.provisioning_model,
            f"nothing stops its billing until you run pulumi destroy; a forgotten weekend "
            f"({spending.FORGOTTEN_WEEKEND_HOURS} h) costs ${weekend:.0f}",
            "flex-start costs 3.8% more than spot and stops by itself",
        ))
    if tpu.subnetwork and (region := re.search(r"regions/([^/]+)/", tpu.subnetwork)) \
            and region.group(1) != tpu.region:
        findings.append(Finding(
            "tpu.subnetwork", tpu.subnetwork,
            f"the subnetwork is in {region.group(1)} but the node is in {tpu.zone} ({tpu.region})",
            f"use a subnetwork of {tpu.region}", also_keys=("tpu.zone",),
        ))
    return findings
