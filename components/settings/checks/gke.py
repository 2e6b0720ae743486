"""Cross-key rules of the gke platform."""

from __future__ import annotations

import json

from components import budget
from components.gke.metrics_door import METRICS_PORT as GKE_METRICS_PORT
from components.settings.facts import FLEX_START_VERIFIED_ZONES, NAMESPACE
from components.settings.root import Settings


def _gke_cross_checks(settings: Settings, warnings: list[str]) -> list[str]:
    """Rules of the gke platform that read more than one key."""
    gke = settings.gke
    if settings.platform != "gke":
        if "gke" in settings.model_fields_set:
            warnings.append("gke: this section is read only with tpu-vllm:platform: gke; the vm platform ignores it")
        return []
    errors: list[str] = []
    key = f"{NAMESPACE}:gke"
    if gke.max_replicas < gke.min_replicas:
        errors.append(
            f"{key}.maxReplicas = {gke.max_replicas}: below gke.minReplicas ({gke.min_replicas}); the HPA "
            f"needs min <= max. Raise maxReplicas to at least {gke.min_replicas} or lower minReplicas"
        )
    if gke.max_replicas > gke.max_tpu_chips:
        errors.append(
            f"{key}.maxReplicas = {gke.max_replicas}: each replica is one chip, over the gke.maxTpuChips cap "
            f"({gke.max_tpu_chips}); lower maxReplicas or raise maxTpuChips if you mean to pay for "
            f"{gke.max_replicas} chips"
        )
    if gke.is_regional and not gke.node_locations:
        errors.append(
            f"{key}.nodeLocations = []: a regional cluster ({gke.location}) needs the zones its TPU nodes may "
            f"use; list v5e zones, e.g. pulumi config set --path 'tpu-vllm:gke.nodeLocations[0]' {gke.location}-a"
        )
    outside = [zone for zone in gke.node_locations if zone.rsplit("-", 1)[0] != gke.region]
    if outside:
        errors.append(
            f"{key}.nodeLocations = {json.dumps(gke.node_locations)}: {', '.join(outside)} not in the cluster's "
            f"region {gke.region} (gke.location = {gke.location}); a node pool only spans zones of its cluster's "
            f"region. Use zones like {gke.region}-a, or move gke.location"
        )
    model = settings.tpu.provisioning_model
    if model != "flex-start" and not gke.allow_unbounded_billing:
        errors.append(
            f"{NAMESPACE}:tpu.provisioningModel = {model!r}: on gke the pool can hold {gke.max_replicas} chips "
            f"with nothing to stop their billing (${budget.cost_per_hour_usd(model, gke.max_replicas):.2f}/h); use "
            "flex-start, or set gke.allowUnboundedBilling true if you mean it"
        )
    if model == "flex-start":
        unverified = [zone for zone in gke.tpu_zones if zone not in FLEX_START_VERIFIED_ZONES]
        if unverified:
            warnings.append(
                "gke.nodeLocations: flex-start v5e is only verified in "
                f"{', '.join(sorted(FLEX_START_VERIFIED_ZONES))}; {', '.join(unverified)} may have no v5e "
                "capacity or no flex-start for it"
            )
    errors += _gke_port_checks(settings)
    if "container_access" in settings.vllm.model_fields_set:
        warnings.append(
            f"vllm.containerAccess = {settings.vllm.container_access!r} is read only by the vm platform (docker "
            "run); on gke the chip reaches the pod through its google.com/tpu resource request (GKE's TPU device "
            "plugin, no privileged container), so the key changes nothing there; remove it"
        )
    access = settings.access
    if gke.allow_external_load_balancer and not access.serving_source_ranges:
        errors.append(
            f"{key}.allowExternalLoadBalancer = true: an external load balancer with no "
            "access.servingSourceRanges would answer the whole internet; list the ranges that may call it "
            "(pulumi config set --path 'tpu-vllm:access.servingSourceRanges[0]' 203.0.113.0/24)"
        )
    kv = settings.kv_budget()
    if kv is not None and kv.kv_tokens > 0:
        planned = settings.load.clients * settings.load.context_tokens
        if planned > kv.load_limit_tokens * gke.max_replicas:
            warnings.append(
                f"load: {planned:,} KV tokens planned, over ~78% of the KV pool of {gke.max_replicas} replicas "
                f"({kv.load_limit_tokens * gke.max_replicas:,}); raise gke.maxReplicas or plan less load"
            )
    return errors


def _gke_port_checks(settings: Settings) -> list[str]:
    """A pod's containers share one network namespace: vLLM and the front must not take the metrics door's port."""
    errors = []
    ports = {"vllm.port": settings.vllm.port, "front.upstreamPort": settings.front.upstream_port}
    for key, port in ports.items():
        if port == GKE_METRICS_PORT:
            taken = set(ports.values())
            free = next(p for p in (8000, 8001, 8002) if p not in taken)
            errors.append(
                f"{NAMESPACE}:{key} = {port}: on gke the pod's metrics door (GET /metrics for Managed "
                f"Prometheus) listens on {GKE_METRICS_PORT} in the same network namespace, so two containers "
                f"would bind it and one would crash-loop; use another port, e.g. {free}"
            )
    return errors
