"""Cross-key rules of the gke platform: replicas against the chip cap, zones against the cluster's region,
billing, and what the vm platform alone reads."""

from __future__ import annotations

import math

from components import catalog
from components.basis import boot
from components.settings.facts import (
    GKE_FALLBACK_MODELS,
    GKE_NODE_UP_ALLOWANCE_SECONDS,
    GKE_ROLLOUT_SURGE_PODS,
    STACK_VERSION_FLOOR,
    gke_version_at_least,
    gke_version_floor,
)
from components.settings.findings import NO_VALUE, Finding
from components.settings.root import Settings


def gke_checks(settings: Settings) -> list[Finding]:
    gke = settings.gke
    if settings.platform != "gke":
        if "gke" in settings.model_fields_set:
            return [Finding.warning("gke", NO_VALUE, "this section is read only with tpu-vllm:platform: gke; the vm "
                                    "platform ignores it", "remove it, or set tpu-vllm:platform gke")]
        return []
    findings: list[Finding] = []
    shape = settings.tpu.shape
    if not shape.on_gke:
        sized = [other.accelerator_type for other in catalog.all_shapes()
                 if other.generation is shape.generation and other.on_gke]
        return [Finding(
            "tpu.acceleratorType", settings.tpu.accelerator_type,
            f"the gke wing sizes each pod to fit its node, and the {shape.accelerator_type} host's vCPUs and memory "
            f"have not been read (components/catalog/shapes.py; the {shape.generation.name} shapes it sizes: "
            f"{', '.join(sized)})",
            "use one of those on gke, or tpu-vllm:platform vm (a Compute Engine instance)", also_keys=("platform",))]
    findings += _generation_version_findings(settings)
    if gke.machine_type is not None and gke.machine_type != shape.gke_machine_type:
        named = catalog.shape_for_gke_machine(gke.machine_type)
        findings.append(Finding(
            "gke.machineType", gke.machine_type,
            f"it is {named.accelerator_type if named else 'another'}'s machine, and tpu.acceleratorType "
            f"({settings.tpu.accelerator_type}) names the shape on both platforms: its machine is "
            f"{shape.gke_machine_type}",
            "remove the key to follow tpu.acceleratorType"
            + (f", or set tpu.acceleratorType to {named.accelerator_type}" if named else ""),
            also_keys=("tpu.acceleratorType",),
        ))
    if gke.max_replicas < gke.min_replicas:
        findings.append(Finding(
            "gke.maxReplicas", gke.max_replicas,
            f"below gke.minReplicas ({gke.min_replicas}); the HPA needs min <= max",
            f"raise maxReplicas to at least {gke.min_replicas} or lower minReplicas", also_keys=("gke.minReplicas",),
        ))
    peak = (gke.max_replicas + GKE_ROLLOUT_SURGE_PODS) * shape.chips
    if peak > gke.max_tpu_chips:
        per_replica = "one chip" if shape.chips == 1 else f"{shape.chips} chips ({shape.accelerator_type})"
        fits = gke.max_tpu_chips // shape.chips - GKE_ROLLOUT_SURGE_PODS
        findings.append(Finding(
            "gke.maxReplicas", gke.max_replicas, f"each replica is {per_replica}, and a rollout adds "
            f"{GKE_ROLLOUT_SURGE_PODS} more replica while its new one starts: {peak} chips, over the "
            f"gke.maxTpuChips cap ({gke.max_tpu_chips})",
            f"lower maxReplicas to {fits} or raise maxTpuChips to {peak} if you mean to pay for {peak} chips",
            also_keys=("gke.maxTpuChips",),
        ))
    if gke.min_replicas == 1 and settings.tpu.provisioning_model == "flex-start":
        findings.append(Finding.warning(
            "gke.minReplicas", 1,
            "one replica serves alone: at every node run end (each tpu.maxRunDuration, "
            f"{settings.tpu.max_run_duration}) and every eviction it stops before its successor is ready, a gap "
            "of a warm start (~"
            f"{boot.WARM_BOOT_SECONDS // 60} min, {boot.WARM_BOOT_SECONDS} s) with nothing serving; a change "
            "of flags or image does not gap (the rollout starts the new replica first)",
            f"set gke.minReplicas to 2 ({'one more chip' if shape.chips == 1 else 'one more node'}, "
            f"{_hourly(settings.tpu_usd_per_hour('flex-start'))}): the "
            "PodDisruptionBudget then moves one replica at a time and the other keeps serving",
            also_keys=("tpu.maxRunDuration",),
        ))
    if gke.is_regional and not gke.node_locations:
        findings.append(Finding(
            "gke.nodeLocations", [], f"a regional cluster ({gke.location}) needs the zones its TPU nodes may use",
            f"list {settings.tpu.shape.generation.name} zones, e.g. pulumi config set --path "
            f"'tpu-vllm:gke.nodeLocations[0]' {gke.location}-a",
            also_keys=("gke.location",),
        ))
    outside = [zone for zone in gke.node_locations if zone.rsplit("-", 1)[0] != gke.region]
    if outside:
        findings.append(Finding(
            "gke.nodeLocations", gke.node_locations,
            f"{', '.join(outside)} not in the cluster's region {gke.region} (gke.location = {gke.location}); a node "
            "pool only spans zones of its cluster's region",
            f"use zones like {gke.region}-a, or move gke.location", also_keys=("gke.location",),
        ))
    model = settings.tpu.provisioning_model
    if model != "flex-start" and not gke.allow_unbounded_billing:
        findings.append(Finding(
            "tpu.provisioningModel", model,
            f"on gke the pool can hold {gke.max_replicas * shape.chips} chips with nothing to stop their billing "
            f"(${settings.tpu_usd_per_hour(model) * gke.max_replicas:.2f}/h)",
            "use flex-start, or set gke.allowUnboundedBilling true if you mean it",
            also_keys=("gke.maxReplicas",),
        ))
    findings += class_checks(settings)
    if "size_gb" in settings.cache.model_fields_set:
        findings.append(Finding.warning(
            "cache.sizeGb", settings.cache.size_gb,
            "read only by the vm platform (its cache disk); on gke the compile cache is a Cloud Storage bucket, "
            "billed for what it holds", "remove it"))
    if model == "flex-start":
        verified = sorted(shape.flex_start_accepted_zones)
        unverified = [zone for zone in gke.tpu_zones if zone not in shape.flex_start_accepted_zones]
        absent = [zone for zone in gke.tpu_zones if zone not in shape.generation.zones]
        # Issue 46: a zone nobody wrote down warns (Google's lists change); only the default location left on another
        # generation, which the user never chose, is an error.
        chosen = bool({"location", "node_locations"} & gke.model_fields_set)
        if absent:
            findings.append((Finding.warning if chosen else Finding)(
                "gke.nodeLocations", gke.node_locations or NO_VALUE,
                "; ".join((shape.generation.zone_unknown if chosen else shape.generation.zone_not_listed)(zone)
                          for zone in absent),
                f"list {', '.join(verified)} (where flex-start {shape.generation.flex_start_observed_on} was run)",
                also_keys=("gke.location", "tpu.acceleratorType"),
            ))
        elif unverified and verified:
            findings.append(Finding.warning(
                "gke.nodeLocations", gke.node_locations or NO_VALUE,
                f"flex-start {shape.generation.name} is only verified (on {shape.generation.flex_start_observed_on}) "
                f"in {', '.join(verified)}; "
                f"{', '.join(unverified)} may have no {shape.generation.name} capacity or no flex-start for it",
                f"list {', '.join(verified)} first, or accept the risk",
            ))
        elif unverified:
            findings.append(Finding.warning(
                "gke.nodeLocations", gke.node_locations or NO_VALUE,
                f"flex-start {shape.generation.name} has not been seen accepted in any zone yet; "
                f"{', '.join(unverified)} may have no {shape.generation.name} capacity or no flex-start for it",
                "accept the risk, or record the zone's answer in components/catalog/shapes.py",
            ))
    if "container_access" in settings.vllm.model_fields_set:
        findings.append(Finding.warning(
            "vllm.containerAccess", settings.vllm.container_access,
            "read only by the vm platform (docker run); on gke the chip reaches the pod through its google.com/tpu "
            "resource request (GKE's TPU device plugin, no privileged container), so the key changes nothing there",
            "remove it",
        ))
    if gke.allow_external_load_balancer and not settings.access.serving_source_ranges:
        findings.append(Finding(
            "gke.allowExternalLoadBalancer", True,
            "an external load balancer with no access.servingSourceRanges would answer the whole internet",
            "list the ranges that may call it (pulumi config set --path 'tpu-vllm:access.servingSourceRanges[0]' "
            "203.0.113.0/24)",
            also_keys=("access.servingSourceRanges",),
        ))
    kv = settings.kv_budget()
    if kv is not None and kv.kv_tokens > 0:
        planned = settings.load.clients * settings.load.context_tokens
        if planned > kv.load_limit_tokens * gke.max_replicas:
            findings.append(Finding.warning(
                "load", {"clients": settings.load.clients, "contextTokens": settings.load.context_tokens},
                f"{planned:,} KV tokens planned, over ~78% of the KV pool of {gke.max_replicas} replicas "
                f"({kv.load_limit_tokens * gke.max_replicas:,})",
                "raise gke.maxReplicas or plan less load",
            ))
    return findings


def class_checks(settings: Settings) -> list[Finding]:
    """The ComputeClass's priorities: fallbacks after the first one, and a recycling lead time that brings a warm
    replacement before each run ends without replacing a node that has barely started."""
    gke, model = settings.gke, settings.tpu.provisioning_model
    findings: list[Finding] = []
    if model in gke.fallback:
        findings.append(Finding(
            "gke.fallback", gke.fallback, f"{model!r} is already the first priority (tpu.provisioningModel)",
            f"list only what to try after it, e.g. {[m for m in GKE_FALLBACK_MODELS if m != model]}".replace("'", '"'),
            also_keys=("tpu.provisioningModel",)))
    if model != "flex-start":
        if "recycling_lead_time" in gke.model_fields_set:
            findings.append(Finding.warning(
                "gke.recyclingLeadTime", gke.recycling_lead_time,
                f"read only with flex-start (its nodes end after tpu.maxRunDuration); {model} nodes have no run "
                "end, so nothing is recycled", "remove it"))
        return findings
    lead, run = gke.recycling_lead_seconds, settings.tpu.run_seconds
    least = boot.WARM_BOOT_SECONDS + GKE_NODE_UP_ALLOWANCE_SECONDS
    if lead < least:
        findings.append(Finding(
            "gke.recyclingLeadTime", gke.recycling_lead_time,
            f"{lead} s is too short for the replacement to be up and warm before the run ends (a node, "
            f"~{GKE_NODE_UP_ALLOWANCE_SECONDS} s, plus the log's warm start, {boot.WARM_BOOT_SECONDS} s: {least} s)",
            f"use at least {math.ceil(least / 60)}m, e.g. 1h (Google's v5e class)"))
    if lead * 2 > run:
        findings.append(Finding(
            "gke.recyclingLeadTime", gke.recycling_lead_time,
            f"{lead} s is over half of tpu.maxRunDuration ({settings.tpu.max_run_duration}, {run} s), so two chips "
            "would bill for most of every run",
            f"use at most {run // 2 // 60}m, or raise tpu.maxRunDuration (e.g. 1d)",
            also_keys=("tpu.maxRunDuration",)))
    return findings


def _generation_version_findings(settings: Settings) -> list[Finding]:
    """A pinned gke.minMasterVersion against the version the generation's node pools need (TPU7x: GKE's own page),
    where that is later than the stack's floor (settings/gke.py judges that one alone)."""
    shape, pinned = settings.tpu.shape, settings.gke.min_master_version
    floor = gke_version_floor(shape.generation)
    if pinned is None or floor is STACK_VERSION_FLOOR:
        return []
    newer = gke_version_at_least(pinned, floor.version)
    if newer:
        return []
    return [Finding(
        "gke.minMasterVersion", pinned,
        f"a {shape.accelerator_type} node pool needs GKE {floor.version} or later ({floor.reason}), and "
        f"{pinned} is {'older' if newer is False else 'a minor that may be older'}",
        f"pin {floor.pin} or later, or remove gke.minMasterVersion (the channel's default is checked at preview)",
        also_keys=("tpu.acceleratorType",))]


def _hourly(usd_per_hour: float | None) -> str:
    """An hour of the replica's chips, or that no price was read for them (TPU7x): never a figure in its place."""
    return f"${usd_per_hour:.2f}/h" if usd_per_hour is not None else "price not found"
