"""What each platform costs: plain numbers for the stack's outputs and the offline plan's budget, the
VM's and the gke's side by side (components/economics/cost_lines.py writes them as the plan's lines)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components.basis import boot, chip_memory, price_list, spending
from components.basis.price_list import GKE_BOOT_DISK_GB as BOOT_DISK_GB
from components.basis.price_list import GKE_BOOT_DISK_TYPE as BOOT_DISK_TYPE
from components.economics import gateway_costs
from components.monitoring import alerts, scrape
from components.settings import Settings, fitting, untested_arms
from components.settings.facts import GKE_ROLLOUT_SURGE_PODS
from components.settings.fields import parse_duration

# The log's shape and price region: its plan's budget is the log's, field for field; any other shape adds the
# tpu_* fields that say which (plan_budget).
LOG_SHAPE = "v5litepod-1"
LOG_PRICE_REGION = "us-west4"


def boot_disk_usd_per_hour() -> float:
    """One system node's boot disk (GKE's 100 GB pd-balanced default, written out in the stack)."""
    return spending.disk_usd_per_month(BOOT_DISK_TYPE, BOOT_DISK_GB) / price_list.HOURS_PER_MONTH


def tpu_boot_disk_usd_per_hour(settings: Settings) -> float | None:
    """One TPU node's boot disk; None where its type's price was not read."""
    month = spending.disk_usd_per_month(settings.tpu.shape.generation.gke_boot_disk_type, BOOT_DISK_GB)
    return None if month is None else month / price_list.HOURS_PER_MONTH


def recycling_factor(settings: Settings, model: str) -> float:
    """Node recycling brings the replacement up to gke.recyclingLeadTime before the old node ends: at most
    run / (run - lead) node-hours per replica-hour (the replacement's queue time shortens the overlap)."""
    if model != "flex-start":
        return 1.0
    run, lead = settings.tpu.run_seconds, settings.gke.recycling_lead_seconds
    return run / (run - lead)


def replica_usd_per_hour(settings: Settings, model: str) -> float | None:
    """One replica on a node of this model: the chip, its node's boot disk, and the recycling overlap; None where no
    price was read for the chip (TPU7x), never a figure in its place."""
    chips, disk = settings.tpu_usd_per_hour(model), tpu_boot_disk_usd_per_hour(settings)
    if chips is None or disk is None:
        return None
    return (chips + disk) * recycling_factor(settings, model)


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def cache_usd_per_month(settings: Settings) -> float:
    """The shared bucket holds one cache per configuration served (image digest x serve flags): the log's 197 MB."""
    return boot.MEASURED_CACHE_GB * price_list.STORAGE_USD_PER_GB_MONTH


@dataclass(frozen=True)
class Baseline:
    """What bills with no TPU node: the fee, the system nodes with their boot disks, the cache bucket, and the
    inference gateway's proxies when it is on."""

    cluster_fee_usd_per_hour: float
    system_nodes_usd_per_hour: float
    system_boot_disks_usd_per_hour: float
    cache_usd_per_hour: float
    gateway_usd_per_hour: float = 0.0
    """The inference gateway's proxies at their least (gke.inferenceGateway; 0 without it)."""

    @property
    def usd_per_hour(self) -> float:
        return (self.cluster_fee_usd_per_hour + self.system_nodes_usd_per_hour + self.system_boot_disks_usd_per_hour
                + self.cache_usd_per_hour + self.gateway_usd_per_hour)


def baseline(settings: Settings) -> Baseline:
    gke = settings.gke
    reused = gke.use_existing_cluster
    system_nodes = 0 if reused else gke.system_node_count
    return Baseline(
        cluster_fee_usd_per_hour=0.0 if reused else price_list.GKE_CLUSTER_FEE_USD_PER_HOUR,
        system_nodes_usd_per_hour=spending.system_machine_usd_per_hour(gke.system_machine_type) * system_nodes,
        system_boot_disks_usd_per_hour=boot_disk_usd_per_hour() * system_nodes,
        cache_usd_per_hour=cache_usd_per_month(settings) / price_list.HOURS_PER_MONTH,
        gateway_usd_per_hour=gateway_costs.gateway_usd_per_hour() if gke.inference_gateway is not None else 0.0,
    )


def total_usd_per_hour(settings: Settings, replicas: int, model: str | None = None) -> float | None:
    """The baseline and `replicas` replicas; None past zero replicas where the chip's price was not read."""
    replica = replica_usd_per_hour(settings, model or settings.tpu.provisioning_model)
    if replica is None:
        return baseline(settings).usd_per_hour if replicas == 0 else None
    return replicas * replica + baseline(settings).usd_per_hour


def gke_costs(settings: Settings) -> dict[str, Any]:
    """$/hour at the least and the most replicas (first priority), each fallback's, the baseline, one run."""
    gke, model = settings.gke, settings.tpu.provisioning_model
    disk_type = settings.tpu.shape.generation.gke_boot_disk_type
    costs: dict[str, Any] = {
        "costPerHourUsd": _rounded(total_usd_per_hour(settings, gke.max_replicas), 4),
        "costPerHourAtMinReplicasUsd": _rounded(total_usd_per_hour(settings, gke.min_replicas), 4),
        "clusterBaselineUsdPerHour": round(baseline(settings).usd_per_hour, 4),
        "replicaUsdPerHour": _rounded(replica_usd_per_hour(settings, model), 4),
        "bootDiskUsdPerMonthPerNode": _rounded(spending.disk_usd_per_month(disk_type, BOOT_DISK_GB), 2),
        "compileCacheUsdPerMonth": round(cache_usd_per_month(settings), 4),
        # A rollout (a serve flag, the image, the front's config) starts the surge replica before an old one leaves
        # (components/gke/workload.py ROLLOUT_STRATEGY): one more chip bills while each replica is replaced.
        "costPerHourDuringRolloutUsd": {
            "atMinReplicas": _rounded(total_usd_per_hour(settings, gke.min_replicas + GKE_ROLLOUT_SURGE_PODS), 4),
            "atMaxReplicas": _rounded(total_usd_per_hour(settings, gke.max_replicas + GKE_ROLLOUT_SURGE_PODS), 4)},
    }
    # Empty when gke.fallback is: a replica then waits for first-priority capacity.
    costs["fallbackCostPerHourUsd"] = {
        fallback: {"perReplica": _rounded(replica_usd_per_hour(settings, fallback), 4),
                   "atMaxReplicas": _rounded(total_usd_per_hour(settings, gke.max_replicas, fallback), 4)}
        for fallback in gke.fallback}
    if gke.inference_gateway is not None:
        costs.update(gateway_costs.gateway_costs())
    if gke.min_replicas == 0:
        costs["scaleToZeroCostUsd"] = zero_day(settings)
    if model == "flex-start":
        # One run of every replica, each with its replacement's overlap, and the baseline for the same hours.
        at_most = total_usd_per_hour(settings, gke.max_replicas)
        costs["maxSpendPerRunUsd"] = None if at_most is None else round(at_most * settings.tpu.run_seconds / 3600, 2)
    if settings.tpu_usd_per_hour(model) is None:
        costs["priceNotFound"] = settings.price_not_found()
    elif tpu_boot_disk_usd_per_hour(settings) is None:
        costs["priceNotFound"] = (f"price not found for the TPU nodes' {disk_type} boot disk "
                                  "(components/catalog/prices.py DISK_PRICES holds none: Hyperdisk Balanced bills "
                                  "capacity plus IOPS and throughput above a baseline), so no sum with it is shown")
    return costs


def zero_day(settings: Settings) -> dict[str, Any]:
    """What a pool at zero costs and saves (gke.minReplicas 0), computed: the baseline alone at zero (the cluster fee,
    the system pool and its disks, the gateway's proxy, the cache; the picker runs on the system pool), one replica
    more while serving, and a day of load.activeHoursPerDay followed by the gke.scaleToZeroAfter idle tail at one
    replica, the rest at zero, against one replica kept all day."""
    gke, load = settings.gke, settings.load
    at_zero, at_one = total_usd_per_hour(settings, 0), total_usd_per_hour(settings, 1)
    if at_one is None:
        return {"perHourAtZero": round(at_zero, 4), "perHourAtOneReplica": None,
                "formula": "the replica's price was not found, so no day is priced (the baseline at zero is)"}
    serving_hours = min(24.0, load.active_hours_per_day + parse_duration(gke.scale_to_zero_after) / 3600)
    day = serving_hours * at_one + (24 - serving_hours) * at_zero
    return {"perHourAtZero": round(at_zero, 4), "perHourAtOneReplica": round(at_one, 4),
            "activeHoursPerDay": load.active_hours_per_day, "servingHoursPerDay": round(serving_hours, 4),
            "perDay": round(day, 2), "perDayAtOneReplicaAllDay": round(24 * at_one, 2),
            "savedPerMonth": round((24 * at_one - day) * price_list.HOURS_PER_MONTH / 24, 2),
            "formula": (f"({load.active_hours_per_day:g} h active + {gke.scale_to_zero_after} idle tail) x "
                        f"${at_one:.4f}/h + the rest of 24 h x ${at_zero:.4f}/h (computed; the cold starts' minutes "
                        "are in the serving hours' margin, not priced apart)")}


def gke_plan_summary(settings: Settings) -> dict[str, Any]:
    """The plan's budget lines for gke (snake_case, like the rest of the plan's budget)."""
    costs, kv, gke = gke_costs(settings), settings.kv_budget(), settings.gke
    base = baseline(settings)
    model = settings.tpu.provisioning_model
    least = total_usd_per_hour(settings, gke.min_replicas)
    summary: dict[str, Any] = {
        "platform": "gke",
        "gke_replicas": f"{gke.min_replicas}..{gke.max_replicas}",
        "gke_cost_per_hour_usd_at_max_replicas": costs["costPerHourUsd"],
        "gke_cost_per_hour_usd_at_min_replicas": costs["costPerHourAtMinReplicasUsd"],
        "gke_baseline_usd_per_hour": costs["clusterBaselineUsdPerHour"],
        "gke_max_spend_per_run_usd": costs.get("maxSpendPerRunUsd"),
        "gke_min_replicas": gke.min_replicas,
        "gke_max_replicas": gke.max_replicas,
        "gke_reused_cluster": gke.use_existing_cluster,
        "gke_cluster_fee_usd_per_hour": round(base.cluster_fee_usd_per_hour, 4),
        "gke_system_pool": f"{0 if gke.use_existing_cluster else gke.system_node_count} x {gke.system_machine_type}",
        "gke_system_pool_usd_per_hour": round(base.system_nodes_usd_per_hour, 4),
        "gke_system_boot_disks_usd_per_hour": round(base.system_boot_disks_usd_per_hour, 4),
        "gke_boot_disk": f"{BOOT_DISK_GB} GB {settings.tpu.shape.generation.gke_boot_disk_type}",
        "gke_boot_disk_usd_per_month_per_node": costs["bootDiskUsdPerMonthPerNode"],
        "gke_replica_usd_per_hour": costs["replicaUsdPerHour"],
        "gke_recycling_lead_hours": (gke.recycling_lead_seconds / 3600 if model == "flex-start" else None),
        "gke_recycling_factor": round(recycling_factor(settings, model), 4),
        "gke_fallbacks": {fallback: {"per_replica_usd_per_hour": prices["perReplica"],
                                     "at_max_replicas_usd_per_hour": prices["atMaxReplicas"]}
                          for fallback, prices in costs["fallbackCostPerHourUsd"].items()},
        "gke_cache_usd_per_month": costs["compileCacheUsdPerMonth"],
        "gke_cache_gb_per_configuration": boot.MEASURED_CACHE_GB,
        # minReplicas chips never scale away, so they bill every hour the stack exists, like the fee.
        "gke_usd_per_month_at_min_replicas": None if least is None else round(least * price_list.HOURS_PER_MONTH, 2),
        "gke_rollout_surge_replicas": GKE_ROLLOUT_SURGE_PODS,
        "gke_cost_per_hour_usd_during_rollout_at_min_replicas": costs["costPerHourDuringRolloutUsd"]["atMinReplicas"],
        "gke_cost_per_hour_usd_during_rollout_at_max_replicas": costs["costPerHourDuringRolloutUsd"]["atMaxReplicas"],
    }
    if gke.inference_gateway is not None:
        summary.update(gateway_costs.gateway_summary())
    if "scaleToZeroCostUsd" in costs:
        summary["gke_zero"] = costs["scaleToZeroCostUsd"]
    if kv is not None:
        summary["kv_tokens_at_max_replicas"] = kv.kv_tokens * gke.max_replicas
        summary["load_limit_tokens_at_max_replicas"] = kv.load_limit_tokens * gke.max_replicas
    return summary


def monitoring_summary(settings: Settings) -> dict[str, Any]:
    """The dashboard's and alerts' monthly cost (monitoring.*): samples ingested and alert conditions."""
    monitoring = settings.monitoring
    if not monitoring.enabled:
        return {"monitoring_enabled": False}
    gke = settings.platform == "gke"
    interval = scrape.GKE_SCRAPE_INTERVAL if gke else scrape.VM_SCRAPE_INTERVAL
    targets = settings.gke.max_replicas if gke else 1
    samples = spending.prometheus_samples_per_month(int(interval.removesuffix("s")), targets)
    conditions = 0
    if monitoring.alerts:
        conditions = 3 + (1 if not gke and settings.tpu.provisioning_model == "flex-start" else 0)
    evaluation = int(alerts.EVALUATION_INTERVAL.removesuffix("s"))
    return {
        "monitoring_enabled": True,
        # gke: the HPA's PodMonitoring already scrapes (and bills) these samples; the dashboard reads them.
        "monitoring_samples_collected_by": "the HPA's PodMonitoring" if gke else "the Ops Agent",
        "monitoring_scrape_interval": interval,
        "monitoring_samples_per_month_at_most": samples,
        "monitoring_samples_usd_per_month": round(samples / 1e6 * price_list.USD_PER_MILLION_PROMETHEUS_SAMPLES, 2),
        "monitoring_alert_conditions": conditions,
        "monitoring_alerts_usd_per_month": round(spending.alert_usd_per_month(conditions, targets, evaluation), 2),
    }


def shape_summary(settings: Settings) -> dict[str, Any]:
    """Which shape, fit and price the budget is for: empty for the log's shape priced in the log's region (its budget
    stays the log's, field for field), else the tpu_* fields the cost lines name."""
    tpu, fitted = settings.tpu, settings.fit
    price = fitting.chip_usd_per_hour(settings, tpu.provisioning_model)
    if (tpu.accelerator_type, price.region if price else None) == (LOG_SHAPE, LOG_PRICE_REGION) \
            and fitted is not None and fitted.measured_here:
        return {}
    summary: dict[str, Any] = {
        "tpu_accelerator_type": tpu.accelerator_type,
        "tpu_generation": tpu.shape.generation.name,
        "tpu_chips": tpu.shape.chips,
        "tpu_usd_per_chip_hour": price.usd_per_chip_hour if price else None,
        "tpu_price_region": price.region if price else None,
        "tpu_price_source": str(price.source) if price else None,
        "tensor_parallel_size": settings.tensor_parallel_size,
    }
    if settings.platform == "gke":
        summary["gke_machine_type"] = settings.gke_machine_type
        summary["gke_tpu_topology"] = tpu.shape.gke_topology
    if fitted is not None and "kv_tokens" in fitted.figures:
        chosen = fitted.figures.get("kv_tokens_measured") or fitted.figures["kv_tokens"]
        summary["kv_tokens_how"] = chosen.how
        summary["kv_measured_on_this_shape"] = fitted.measured_here
    if tpu.shape.devices > 1:
        summary.update(layout_summary(settings))
    return summary


def layout_summary(settings: Settings) -> dict[str, Any]:
    """A host of several chips: the layout served, whether planned or given, and its computed rate and $ per
    million output tokens at the planned load (components/sizing/layouts.py, rate.py)."""
    fitted, vllm = settings.fit, settings.vllm
    given = [f"vllm.{key} {value}" for key, value in (("tensorParallelSize", vllm.tensor_parallel_size),
                                                        ("dataParallelSize", vllm.data_parallel_size))
             if value is not None]
    summary: dict[str, Any] = {
        "data_parallel_size": settings.data_parallel_size,
        "layout_how": ("given: " + ", ".join(given)) if given else (
            f"computed: the lowest $ per million output tokens at {settings.load.clients} clients x "
            f"{settings.load.context_tokens:,} tokens among the layouts that hold one {vllm.max_model_len:,}-token "
            "request (python -m tools.fit --layouts)"),
    }
    if fitted is not None and fitted.output_rate is not None:
        summary["output_tokens_per_second"] = fitted.output_rate.value
        summary["output_tokens_per_second_how"] = fitted.output_rate.how
        per_million = fitted.usd_per_million_output.get(settings.tpu.provisioning_model)
        if per_million is not None:
            summary["usd_per_million_output_tokens"] = per_million.value
            summary["usd_per_million_output_tokens_how"] = per_million.how
    return summary


def plan_budget(settings: Settings, secret_versions: int, disk_outlives_destroy: bool | None) -> dict[str, Any]:
    """The offline plan's cost, memory and load figures (snake_case); None where a figure does not apply.

    secret_versions and disk_outlives_destroy are what the program registered (None: no disk registered).
    """
    pricing = settings.tpu.provisioning_model
    run_seconds = settings.tpu.run_seconds if pricing == "flex-start" else None
    cache, disk_type = settings.cache, settings.cache_disk_type
    chips, rate = settings.tpu.shape.chips, settings.usd_per_chip_hour(pricing)
    # No price read for the chip (TPU7x): every TPU figure is None and price_not_found says so; spending's
    # functions would otherwise fall back to the log's v5e prices, another chip's figure.
    priced = rate is not None
    disk_per_month = spending.disk_usd_per_month(disk_type, cache.size_gb)
    disk_per_run = spending.disk_usd_for_seconds(disk_type, cache.size_gb, run_seconds) if run_seconds else None
    with_disk = (spending.max_spend_with_disk_usd(pricing, run_seconds, disk_type, cache.size_gb, chips, rate)
                 if run_seconds and priced else None)
    secrets_month = secret_versions * price_list.USD_PER_SECRET_VERSION_MONTH
    summary: dict[str, Any] = {
        "pricing": pricing,
        "cost_per_hour_usd": spending.cost_per_hour_usd(pricing, chips, rate) if priced else None,
        "run_hours": run_seconds / 3600 if run_seconds else None,
        "max_spend_usd": (round(spending.max_spend_usd(pricing, run_seconds, chips, rate), 4)
                          if run_seconds and priced else None),
        "forgotten_weekend_usd": (None if run_seconds or not priced else
                                  round(spending.forgotten_weekend_usd(pricing, chips, rate), 2)),
        "usd_per_million_output_tokens_at_1496_5_tok_s": round(
            spending.usd_per_million_output_tokens(pricing, 1496.5, chips, rate), 4) if priced else None,
        "cache_disk_type": disk_type,
        "cache_disk_gb": cache.size_gb,
        # None: no price read for this disk type (Hyperdisk Balanced); the plan says so instead of guessing.
        "cache_disk_usd_per_gb_month": spending.disk_usd_per_gb_month(disk_type),
        "cache_disk_usd_per_month": None if disk_per_month is None else round(disk_per_month, 4),
        "cache_disk_usd_per_run": None if disk_per_run is None else round(disk_per_run, 4),
        "max_spend_with_disk_usd": None if with_disk is None else round(with_disk, 4),
        "cache_disk_outlives_destroy": (cache.keep_on_destroy if disk_outlives_destroy is None
                                        else disk_outlives_destroy),
        "secret_versions": secret_versions,
        "secret_versions_usd_per_month": round(secrets_month, 4),
        "idle_usd_per_month": round((disk_per_month or 0.0) + secrets_month, 4),
    }
    if not priced:
        summary["price_not_found"] = settings.price_not_found(pricing)
    summary.update(shape_summary(settings))
    kv = settings.kv_budget()
    if kv is None:
        summary.update(dict.fromkeys(
            ["kv_bytes_per_token", "kv_tokens", "kv_blocks", "block_size", "hbm_cap_gib",
             "kv_pool_gib", "outside_cap_gib", "load_limit_tokens"], "unknown"))
    else:
        summary.update({
            "kv_bytes_per_token": kv.kv_bytes_per_token,
            "kv_tokens": kv.kv_tokens,
            "kv_blocks": kv.kv_blocks,
            "block_size": kv.block_size,
            "hbm_cap_gib": round(chip_memory.gib(kv.hbm_cap_bytes), 2),
            "kv_pool_gib": round(chip_memory.gib(kv.kv_pool_bytes), 2),
            "outside_cap_gib": round(chip_memory.gib(kv.outside_cap_bytes), 2),
            "load_limit_tokens": kv.load_limit_tokens,
        })
    summary["planned_load_tokens"] = settings.load.clients * settings.load.context_tokens
    summary.update(untested_arms.plan_summary(settings))
    summary.update(monitoring_summary(settings))
    if settings.platform == "gke":
        summary.update(gke_plan_summary(settings))  # the lines above are per chip; these are the whole cluster
    return summary
