"""Cross-key rules of the chip: the node API against the generation, the run's length against the deploy and the
API's limit, the zone against where the type is listed and flex-start was seen, the subnetwork."""

from __future__ import annotations

import math
import re

from components import catalog
from components.basis import boot, spending
from components.settings.facts import MAX_RUN_SECONDS_BY_API, MAX_RUN_SOURCE_BY_API, MIN_RUN_SECONDS_BY_API
from components.settings.findings import Finding
from components.settings.root import Settings
from components.settings.tpu import TpuSettings

# "By allowing your capacity requests to persist in a queue for up to two hours" (Google's Flex-start VMs
# announcement, 2025-09-25): the longest params.requestValidForDuration a flex-start insert can ask for.
COMPUTE_FLEX_QUEUE_SECONDS = 2 * 3600
# The shortest wait that queues at all: "specify a duration between 90 seconds (90s) and two hours (2h)" (Google's
# create-flex-start-vm page); the VM goes PENDING only "with a wait time (requestValidForDuration) that is 90 seconds
# or longer" (the instance life cycle page).
COMPUTE_FLEX_MIN_QUEUE_SECONDS = 90


def tpu_checks(settings: Settings) -> list[Finding]:
    findings: list[Finding] = []
    tpu, vllm = settings.tpu, settings.vllm
    vm = settings.platform != "gke"
    # On gke the node pool's zones are gke.location / gke.nodeLocations and GKE makes the nodes: tpu.zone and
    # tpu.api are never read there, so they are not judged there.
    if vm:
        findings += _api_findings(tpu)
        if (tpu.node_api == catalog.COMPUTE and tpu.provisioning_model == "flex-start"
                and tpu.queue_seconds > COMPUTE_FLEX_QUEUE_SECONDS):
            findings.append(Finding(
                "tpu.queueTimeout", tpu.queue_timeout,
                "Compute Engine keeps a flex-start request in its queue for up to two hours (Google's Flex-start "
                "VMs announcement, 2025-09-25)", "set it to 2h or less, like 1h"))
        if (tpu.node_api == catalog.COMPUTE and tpu.provisioning_model == "flex-start"
                and tpu.queue_seconds < COMPUTE_FLEX_MIN_QUEUE_SECONDS):
            findings.append(Finding(
                "tpu.queueTimeout", tpu.queue_timeout,
                "Compute Engine takes a flex-start wait of 90 seconds to two hours ('specify a duration between 90 "
                "seconds (90s) and two hours (2h)', its create-flex-start-vm page); a shorter one never queues",
                "set it to 90s or more, like 1h"))
        findings += _zone_findings(tpu)
        generation = tpu.shape.generation
        if tpu.node_api == catalog.COMPUTE and tpu.provisioning_model in generation.allowlisted_models:
            findings.append(Finding.warning(
                "tpu.provisioningModel", tpu.provisioning_model,
                f"Compute Engine gives {generation.name} {tpu.provisioning_model} only to projects on its allowlist "
                f"(\"TPU7x adds an allowlist on spot, flex-start, and calendar-mode reservations\": "
                f"{generation.allowlist_source.where}); off it, the insert is refused",
                "ask your Google Cloud account team to add the project, or use on-demand",
                also_keys=("tpu.acceleratorType",)))
    elif "api" in tpu.model_fields_set:
        findings.append(Finding.warning(
            "tpu.api", tpu.api, "read only by the vm platform; on gke, GKE makes the node pool's nodes",
            "remove it"))
    if tpu.provisioning_model == "flex-start":
        seconds = tpu.run_seconds
        deploy_seconds = boot.COLD_BOOT_SECONDS + vllm.health_timeout_seconds
        api = tpu.node_api if vm else "queued-resource"
        shortest, longest = MIN_RUN_SECONDS_BY_API[api], MAX_RUN_SECONDS_BY_API[api]
        if not shortest <= seconds <= longest:
            findings.append(Finding(
                "tpu.maxRunDuration", tpu.max_run_duration,
                f"flex-start runs between {shortest // 60} minute{'s' if shortest > 60 else ''} and "
                f"{longest // 86400} days ({MAX_RUN_SOURCE_BY_API[api]})",
                f"set it to {longest // 86400}d or less, like 4h" if seconds > longest
                else f"set it to {shortest // 60}m or more, like 4h"))
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
    else:
        if "max_run_duration" in tpu.model_fields_set:
            findings.append(Finding(
                "tpu.maxRunDuration", tpu.max_run_duration,
                f"only flex-start accepts a run duration, not {tpu.provisioning_model}",
                "remove the key or use flex-start", also_keys=("tpu.provisioningModel",),
            ))
        rate = settings.usd_per_chip_hour()
        cost = (f"a forgotten weekend ({spending.FORGOTTEN_WEEKEND_HOURS} h) costs "
                f"${spending.forgotten_weekend_usd(tpu.provisioning_model, tpu.shape.chips, rate):.0f}"
                if rate is not None else f"its price: {settings.price_not_found(tpu.provisioning_model)}")
        findings.append(Finding.warning(
            "tpu.provisioningModel", tpu.provisioning_model,
            f"nothing stops its billing until you run pulumi destroy; {cost}",
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
    if vm and tpu.subnetwork and (region := re.search(r"regions/([^/]+)/", tpu.subnetwork)) \
            and region.group(1) != tpu.region:
        findings.append(Finding(
            "tpu.subnetwork", tpu.subnetwork,
            f"the subnetwork is in {region.group(1)} but the node is in {tpu.zone} ({tpu.region})",
            f"use a subnetwork of {tpu.region}", also_keys=("tpu.zone",),
        ))
    return findings


def _flex_against_spot(settings: Settings) -> str:
    """The fix for an unbounded model: flex-start's price against spot's for this shape (the catalog's; on v5e
    3.8% more, on v6e less), or flex-start alone where either price was not found."""
    flex, spot = settings.usd_per_chip_hour("flex-start"), settings.usd_per_chip_hour("spot")
    if flex is None or spot is None:
        return "use flex-start: it stops by itself"
    difference = flex / spot - 1
    return (f"flex-start costs {abs(difference) * 100:.1f}% {'more' if difference > 0 else 'less'} than spot and "
            "stops by itself")


def _api_findings(tpu: TpuSettings) -> list[Finding]:
    """tpu.api against the generation's node APIs (the vm platform only)."""
    generation, api = tpu.shape.generation, tpu.node_api
    if api not in generation.node_apis:
        if api == catalog.COMPUTE:
            return [Finding(
                "tpu.api", api,
                f"Compute Engine does not list {generation.name} among its TPU machines (TPU7x, v6e, v5p: "
                "cloud.google.com/compute/docs/tpus/tpu-machines); a "
                f"{tpu.shape.accelerator_type} node is a queued resource",
                "remove the key (v5e takes queued-resource), or set tpu.acceleratorType to a v6e or TPU7x shape "
                "(ct6e-standard-1t, tpu7x-standard-4t)",
                also_keys=("tpu.acceleratorType",))]
        return [Finding(
            "tpu.api", api,
            f"the Cloud TPU API makes no {generation.name} node: 'The Cloud TPU API is not supported on TPU7x and "
            "later TPU versions' (cloud.google.com/tpu/docs/queued-resources)",
            f"set tpu.api to compute, or remove the key ({generation.name} takes compute)",
            also_keys=("tpu.acceleratorType",))]
    return []


def _zone_findings(tpu: TpuSettings) -> list[Finding]:
    """tpu.zone against where the generation is listed and where flex-start was seen (the vm platform only). Zone
    lists change every few months: a zone nobody wrote down warns; only a zone seen refusing, or the default zone
    of another generation the user never chose, is an error."""
    shape, generation, api = tpu.shape, tpu.shape.generation, tpu.node_api
    seen = shape.flex_start_seen(api)
    accepted = [observation.zone for observation in seen if observation.accepted]
    refused = {observation.zone for observation in seen if not observation.accepted}
    # An AI zone last: a standard zone is the plainer first try.
    suggestion = (accepted or sorted(generation.zones, key=lambda zone: ("-ai" in zone, zone)))[0]
    where = (f"where flex-start {generation.flex_start_observed_on} was run" if accepted else
             f"where Google's pages list {generation.name}")
    findings: list[Finding] = []
    listed = tpu.zone in generation.zones
    if not listed and "zone" not in tpu.model_fields_set:
        findings.append(Finding(
            "tpu.zone", tpu.zone,
            f"tpu.zone is unset, and its default ({tpu.zone}, v5e's measured zone) is not where {generation.name} "
            f"is listed ({', '.join(sorted(generation.zones))}; {generation.zones_source.where})",
            f"set it to {suggestion}, {where}", also_keys=("tpu.acceleratorType",)))
        return findings
    if not listed:
        findings.append(Finding.warning(
            "tpu.zone", tpu.zone, generation.zone_unknown(tpu.zone),
            f"use {suggestion} ({where}) to be sure of it", also_keys=("tpu.acceleratorType",)))
    if tpu.provisioning_model != "flex-start":
        return findings
    if tpu.zone in refused:
        findings.append(Finding(
            "tpu.zone", tpu.zone,
            "the API rejects this there, whatever the quota: 'FLEX_START provisioning model is not supported "
            f"for accelerator type \"{shape.accelerator_type}\"'",
            f"set it to {suggestion}",
        ))
    elif listed and tpu.zone not in accepted:
        page = (f" (Google's flex-start page lists {tpu.zone})"
                if api == catalog.QUEUED_RESOURCE and tpu.zone in generation.flex_start_listed else "")
        verified = (f"is only verified (on {generation.flex_start_observed_on}) in {', '.join(sorted(accepted))}"
                    if accepted else "has not been seen accepted in any zone yet")
        through = "" if api == catalog.QUEUED_RESOURCE else " through Compute Engine"
        findings.append(Finding.warning(
            "tpu.zone", tpu.zone,
            f"flex-start {generation.name}{through} {verified}; other zones may reject it at the API{page}",
            f"use {suggestion} to be sure of it" if accepted else "accept the risk, or record the zone's answer in "
            "components/catalog/shapes.py",
        ))
    return findings
