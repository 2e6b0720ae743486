"""Cross-key rules of the chip: the run's length against the deploy, the zone against flex-start, the subnetwork."""

from __future__ import annotations

import math
import re

from components.basis import boot, spending
from components.settings.facts import MAX_RUN_SECONDS, MIN_RUN_SECONDS
from components.settings.findings import Finding
from components.settings.root import Settings


def tpu_checks(settings: Settings) -> list[Finding]:
    findings: list[Finding] = []
    tpu, vllm = settings.tpu, settings.vllm
    shape = tpu.shape
    # The zones in the order someone saw flex-start accepted (the first is the fix the messages give).
    accepted = [seen.zone for seen in shape.generation.flex_start if seen.accepted]
    exists = tpu.zone in shape.generation.zones
    if not exists:
        findings.append(Finding(
            "tpu.zone", tpu.zone,
            # The catalog's words: its zone list is Google's pages as read, not proof the zone has none.
            shape.generation.zone_not_listed(tpu.zone),
            f"set it to {accepted[0]}, where flex-start {shape.generation.flex_start_observed_on} was run",
            also_keys=("tpu.acceleratorType",),
        ))
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
        if exists and tpu.zone in shape.flex_start_refused_zones:
            findings.append(Finding(
                "tpu.zone", tpu.zone,
                "the API rejects this there, whatever the quota: 'FLEX_START provisioning model is not supported "
                f"for accelerator type \"{tpu.accelerator_type}\"'",
                f"set it to {accepted[0]}",
            ))
        elif exists and tpu.zone not in shape.flex_start_accepted_zones:
            listed = (f" (Google's flex-start page lists {tpu.zone})"
                      if tpu.zone in shape.generation.flex_start_listed else "")
            findings.append(Finding.warning(
                "tpu.zone", tpu.zone,
                f"flex-start {shape.generation.name} is only verified (on {shape.generation.flex_start_observed_on}) "
                f"in {', '.join(sorted(accepted))}; other zones may reject it at the API{listed}",
                f"use {accepted[0]} to be sure of it",
            ))
    else:
        if "max_run_duration" in tpu.model_fields_set:
            findings.append(Finding(
                "tpu.maxRunDuration", tpu.max_run_duration,
                f"only flex-start accepts a run duration, not {tpu.provisioning_model}",
                "remove the key or use flex-start", also_keys=("tpu.provisioningModel",),
            ))
        weekend = spending.forgotten_weekend_usd(tpu.provisioning_model, tpu.shape.chips,
                                                 settings.usd_per_chip_hour())
        findings.append(Finding.warning(
            "tpu.provisioningModel", tpu.provisioning_model,
            f"nothing stops its billing until you run pulumi destroy; a forgotten weekend "
            f"({spending.FORGOTTEN_WEEKEND_HOURS} h) costs ${weekend:.0f}",
            _flex_against_spot(settings),
        ))
    disk = settings.cache.disk_type
    if disk is not None and disk != tpu.shape.cache_disk_type:
        findings.append(Finding(
            "cache.diskType", disk,
            f"a {tpu.accelerator_type} node takes {' and '.join(tpu.shape.generation.data_disk_types)} as a data "
            f"disk ({tpu.shape.generation.data_disk_source.where}), and the stack uses and prices "
            f"{tpu.shape.cache_disk_type}",
            f"remove the key (it follows tpu.acceleratorType) or set it to {tpu.shape.cache_disk_type}",
            also_keys=("tpu.acceleratorType",),
        ))
    if tpu.subnetwork and (region := re.search(r"regions/([^/]+)/", tpu.subnetwork)) \
            and region.group(1) != tpu.region:
        findings.append(Finding(
            "tpu.subnetwork", tpu.subnetwork,
            f"the subnetwork is in {region.group(1)} but the node is in {tpu.zone} ({tpu.region})",
            f"use a subnetwork of {tpu.region}", also_keys=("tpu.zone",),
        ))
    return findings


def _flex_against_spot(settings: Settings) -> str:
    """The fix for an unbounded model: flex-start's price against spot's for this shape (the catalog's; on v5e
    3.8% more, on v6e less)."""
    flex, spot = settings.usd_per_chip_hour("flex-start"), settings.usd_per_chip_hour("spot")
    difference = flex / spot - 1
    return (f"flex-start costs {abs(difference) * 100:.1f}% {'more' if difference > 0 else 'less'} than spot and "
            "stops by itself")
