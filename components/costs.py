"""What each platform costs and holds: plain numbers for the stack's outputs and the offline plan's budget,
and the plan's cost lines, the VM's and the gke's side by side (tools/plan only renders them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components import arms, budget
from components.budget import GKE_BOOT_DISK_GB as BOOT_DISK_GB
from components.budget import GKE_BOOT_DISK_TYPE as BOOT_DISK_TYPE
from components.gke import compile_cache
from components.settings import Settings
from components.settings.facts import GKE_ROLLOUT_SURGE_PODS

# ct5lp-hightpu-1t: one v5e chip per node (the only machine the settings accept; compute_class.CHIPS_PER_NODE).
CHIPS_PER_NODE = 1
GKE_MACHINE = "ct5lp-hightpu-1t"
# Cloud Storage, Standard class, regional us-west4: USD per GB-month (cloud.google.com/storage/pricing, "Regional"
# table). Operations are left out: a compile writes a few hundred objects once per configuration, a warm start
# reads them, cents per month at most.
STORAGE_USD_PER_GB_MONTH = 0.023


def boot_disk_usd_per_hour() -> float:
    """One node's boot disk (every node has one: GKE's 100 GB pd-balanced default, written out in the stack)."""
    return budget.disk_usd_per_month(BOOT_DISK_TYPE, BOOT_DISK_GB) / budget.HOURS_PER_MONTH


def recycling_factor(settings: Settings, model: str) -> float:
    """Node recycling brings the replacement up to gke.recyclingLeadTime before the old node ends: at most
    run / (run - lead) node-hours per replica-hour (the replacement's queue time shortens the overlap)."""
    if model != "flex-start":
        return 1.0
    run, lead = settings.tpu.run_seconds, settings.gke.recycling_lead_seconds
    return run / (run - lead)


def replica_usd_per_hour(settings: Settings, model: str) -> float:
    """One replica on a node of this model: the chip, its node's boot disk, and the recycling overlap."""
    node = budget.cost_per_hour_usd(model, CHIPS_PER_NODE) + boot_disk_usd_per_hour()
    return node * recycling_factor(settings, model)


def cache_usd_per_month(settings: Settings) -> float:
    """The shared bucket holds one cache per configuration served (image digest x serve flags): the log's 197 MB."""
    return compile_cache.MEASURED_CACHE_GB * STORAGE_USD_PER_GB_MONTH


@dataclass(frozen=True)
class Baseline:
    """What bills with no TPU node: the fee, the system nodes with their boot disks, the cache bucket."""

    cluster_fee_usd_per_hour: float
    system_nodes_usd_per_hour: float
    system_boot_disks_usd_per_hour: float
    cache_usd_per_hour: float

    @property
    def usd_per_hour(self) -> float:
        return (self.cluster_fee_usd_per_hour + self.system_nodes_usd_per_hour + self.system_boot_disks_usd_per_hour
                + self.cache_usd_per_hour)


def baseline(settings: Settings) -> Baseline:
    gke = settings.gke
    reused = gke.use_existing_cluster
    system_nodes = 0 if reused else gke.system_node_count
    return Baseline(
        cluster_fee_usd_per_hour=0.0 if reused else budget.GKE_CLUSTER_FEE_USD_PER_HOUR,
        system_nodes_usd_per_hour=budget.system_machine_usd_per_hour(gke.system_machine_type) * system_nodes,
        system_boot_disks_usd_per_hour=boot_disk_usd_per_hour() * system_nodes,
        cache_usd_per_hour=cache_usd_per_month(settings) / budget.HOURS_PER_MONTH,
    )


def total_usd_per_hour(settings: Settings, replicas: int, model: str | None = None) -> float:
    return replicas * replica_usd_per_hour(settings, model or settings.tpu.provisioning_model) + \
        baseline(settings).usd_per_hour


def gke_costs(settings: Settings) -> dict[str, Any]:
    """$/hour at the least and the most replicas (first priority), each fallback's, the baseline, one run."""
    gke, model = settings.gke, settings.tpu.provisioning_model
    costs: dict[str, Any] = {
        "costPerHourUsd": round(total_usd_per_hour(settings, gke.max_replicas), 4),
        "costPerHourAtMinReplicasUsd": round(total_usd_per_hour(settings, gke.min_replicas), 4),
        "clusterBaselineUsdPerHour": round(baseline(settings).usd_per_hour, 4),
        "replicaUsdPerHour": round(replica_usd_per_hour(settings, model), 4),
        "bootDiskUsdPerMonthPerNode": round(boot_disk_usd_per_hour() * budget.HOURS_PER_MONTH, 2),
        "compileCacheUsdPerMonth": round(cache_usd_per_month(settings), 4),
        # A rollout (a serve flag, the image, the front's config) starts the surge replica before an old one leaves
        # (components/gke/workload.py ROLLOUT_STRATEGY): one more chip bills while each replica is replaced.
        "costPerHourDuringRolloutUsd": {
            "atMinReplicas": round(total_usd_per_hour(settings, gke.min_replicas + GKE_ROLLOUT_SURGE_PODS), 4),
            "atMaxReplicas": round(total_usd_per_hour(settings, gke.max_replicas + GKE_ROLLOUT_SURGE_PODS), 4)},
    }
    # Empty when gke.fallback is: a replica then waits for first-priority capacity.
    costs["fallbackCostPerHourUsd"] = {
        fallback: {"perReplica": round(replica_usd_per_hour(settings, fallback), 4),
                   "atMaxReplicas": round(total_usd_per_hour(settings, gke.max_replicas, fallback), 4)}
        for fallback in gke.fallback}
    if model == "flex-start":
        # One run of every replica, each with its replacement's overlap, and the baseline for the same hours.
        costs["maxSpendPerRunUsd"] = round(total_usd_per_hour(settings, gke.max_replicas) *
                                           settings.tpu.run_seconds / 3600, 2)
    return costs


def kv_outputs(settings: Settings) -> dict[str, Any]:
    kv = settings.kv_budget()
    if kv is None:
        return {}
    gke = settings.gke
    return {
        "kvBytesPerToken": kv.kv_bytes_per_token,
        "kvTokens": kv.kv_tokens,
        "kvTokensAtMaxReplicas": kv.kv_tokens * gke.max_replicas,
        "kvPoolGib": round(budget.gib(kv.kv_pool_bytes), 2),
        "hbmCapGib": round(budget.gib(kv.hbm_cap_bytes), 2),
        "concurrencyGuidance": (
            f"per replica keep clients x context under {kv.load_limit_tokens:,} tokens (78% of "
            f"{kv.kv_tokens:,}); in total under {kv.load_limit_tokens * gke.min_replicas:,} at "
            f"{gke.min_replicas} replica(s) and {kv.load_limit_tokens * gke.max_replicas:,} at "
            f"{gke.max_replicas}; e.g. 16 agents per replica at {kv.load_limit_tokens // 16:,} tokens each; "
            f"a rollout adds {GKE_ROLLOUT_SURGE_PODS} replica (one more chip) before an old one leaves, so these "
            f"lines hold through it, and at {gke.max_replicas} the namespace holds "
            f"{gke.max_replicas + GKE_ROLLOUT_SURGE_PODS} chips while it runs"),
    }


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
        "gke_boot_disk": f"{BOOT_DISK_GB} GB {BOOT_DISK_TYPE}",
        "gke_boot_disk_usd_per_month_per_node": costs["bootDiskUsdPerMonthPerNode"],
        "gke_replica_usd_per_hour": costs["replicaUsdPerHour"],
        "gke_recycling_lead_hours": (gke.recycling_lead_seconds / 3600 if model == "flex-start" else None),
        "gke_recycling_factor": round(recycling_factor(settings, model), 4),
        "gke_fallbacks": {fallback: {"per_replica_usd_per_hour": prices["perReplica"],
                                     "at_max_replicas_usd_per_hour": prices["atMaxReplicas"]}
                          for fallback, prices in costs["fallbackCostPerHourUsd"].items()},
        "gke_cache_usd_per_month": costs["compileCacheUsdPerMonth"],
        "gke_cache_gb_per_configuration": compile_cache.MEASURED_CACHE_GB,
        # minReplicas chips never scale away, so they bill every hour the stack exists, like the fee.
        "gke_usd_per_month_at_min_replicas": round(least * budget.HOURS_PER_MONTH, 2),
        "gke_rollout_surge_replicas": GKE_ROLLOUT_SURGE_PODS,
        "gke_cost_per_hour_usd_during_rollout_at_min_replicas": costs["costPerHourDuringRolloutUsd"]["atMinReplicas"],
        "gke_cost_per_hour_usd_during_rollout_at_max_replicas": costs["costPerHourDuringRolloutUsd"]["atMaxReplicas"],
    }
    if kv is not None:
        summary["kv_tokens_at_max_replicas"] = kv.kv_tokens * gke.max_replicas
        summary["load_limit_tokens_at_max_replicas"] = kv.load_limit_tokens * gke.max_replicas
    return summary


def monitoring_summary(settings: Settings) -> dict[str, Any]:
    """The dashboard's and alerts' monthly cost (monitoring.*): samples ingested and alert conditions."""
    from components.gke.autoscaling import SCRAPE_INTERVAL
    from components.monitoring import alerts
    from components.vm import ops_agent

    monitoring = settings.monitoring
    if not monitoring.enabled:
        return {"monitoring_enabled": False}
    gke = settings.platform == "gke"
    interval = SCRAPE_INTERVAL if gke else ops_agent.SCRAPE_INTERVAL
    targets = settings.gke.max_replicas if gke else 1
    samples = budget.prometheus_samples_per_month(int(interval.removesuffix("s")), targets)
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
        "monitoring_samples_usd_per_month": round(samples / 1e6 * budget.USD_PER_MILLION_PROMETHEUS_SAMPLES, 2),
        "monitoring_alert_conditions": conditions,
        "monitoring_alerts_usd_per_month": round(budget.alert_usd_per_month(conditions, targets, evaluation), 2),
    }


def monitoring_cost_lines(summary: dict[str, Any]) -> list[str]:
    if not summary.get("monitoring_enabled"):
        return ["  monitoring.enabled is false: no dashboard, no alerts, nothing billed by Cloud Monitoring"]
    already = (" (billed with or without the dashboard: the autoscaler needs them)"
               if summary["monitoring_samples_collected_by"] != "the Ops Agent" else "")
    lines = [f"  dashboard (free) from vLLM's metrics, scraped every {summary['monitoring_scrape_interval']} by "
             f"{summary['monitoring_samples_collected_by']}{already}: about "
             f"{summary['monitoring_samples_per_month_at_most'] / 1e6:,.0f} million Prometheus samples a month at "
             f"most (~{budget.VLLM_SERIES_PER_SCRAPE} series a scrape, estimated), "
             f"{_money(summary['monitoring_samples_usd_per_month'])}/month at "
             f"${budget.USD_PER_MILLION_PROMETHEUS_SAMPLES}/million (no free allotment for Prometheus samples); "
             "only while vLLM is up"]
    if summary["monitoring_alert_conditions"]:
        lines.append(f"  {summary['monitoring_alert_conditions']} alert policies (one condition each, "
                     f"${budget.USD_PER_ALERT_CONDITION_MONTH:.2f}/condition-month plus "
                     f"${budget.USD_PER_MILLION_ALERT_SERIES_RETURNED}/million series returned): about "
                     f"{_money(summary['monitoring_alerts_usd_per_month'])}/month until pulumi destroy; "
                     "monitoring.alerts: false removes them")
    return lines


def plan_budget(settings: Settings, secret_versions: int, disk_outlives_destroy: bool | None) -> dict[str, Any]:
    """The offline plan's cost, memory and load figures (snake_case); None where a figure does not apply.

    secret_versions and disk_outlives_destroy are what the program registered (None: no disk registered).
    """
    pricing = settings.tpu.provisioning_model
    run_seconds = settings.tpu.run_seconds if pricing == "flex-start" else None
    cache = settings.cache
    disk_per_month = budget.disk_usd_per_month(cache.disk_type, cache.size_gb)
    summary: dict[str, Any] = {
        "pricing": pricing,
        "cost_per_hour_usd": budget.cost_per_hour_usd(pricing),
        "run_hours": run_seconds / 3600 if run_seconds else None,
        "max_spend_usd": round(budget.max_spend_usd(pricing, run_seconds), 4) if run_seconds else None,
        "forgotten_weekend_usd": None if run_seconds else round(budget.forgotten_weekend_usd(pricing), 2),
        "usd_per_million_output_tokens_at_1496_5_tok_s": round(
            budget.usd_per_million_output_tokens(pricing, 1496.5), 4),
        "cache_disk_type": cache.disk_type,
        "cache_disk_gb": cache.size_gb,
        "cache_disk_usd_per_gb_month": budget.USD_PER_GB_MONTH[cache.disk_type],
        "cache_disk_usd_per_month": round(disk_per_month, 4),
        "cache_disk_usd_per_run": (round(budget.disk_usd_for_seconds(cache.disk_type, cache.size_gb, run_seconds), 4)
                                   if run_seconds else None),
        "max_spend_with_disk_usd": (round(budget.max_spend_with_disk_usd(pricing, run_seconds, cache.disk_type,
                                                                         cache.size_gb), 4)
                                    if run_seconds else None),
        "cache_disk_outlives_destroy": (cache.keep_on_destroy if disk_outlives_destroy is None
                                        else disk_outlives_destroy),
        "secret_versions": secret_versions,
        "secret_versions_usd_per_month": round(secret_versions * budget.USD_PER_SECRET_VERSION_MONTH, 4),
        "idle_usd_per_month": round(disk_per_month + secret_versions * budget.USD_PER_SECRET_VERSION_MONTH, 4),
    }
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
            "hbm_cap_gib": round(budget.gib(kv.hbm_cap_bytes), 2),
            "kv_pool_gib": round(budget.gib(kv.kv_pool_bytes), 2),
            "outside_cap_gib": round(budget.gib(kv.outside_cap_bytes), 2),
            "load_limit_tokens": kv.load_limit_tokens,
        })
    summary["planned_load_tokens"] = settings.load.clients * settings.load.context_tokens
    summary.update(arms.plan_summary(settings))
    summary.update(monitoring_summary(settings))
    if settings.platform == "gke":
        summary.update(gke_plan_summary(settings))  # the lines above are per chip; these are the whole cluster
    return summary


# What describes one VM (its run, its idle month): a gke plan's budget holds them, its text shows the cluster's.
VM_ONLY_BUDGET_FIELDS = frozenset({"max_spend_usd", "forgotten_weekend_usd", "cache_disk_usd_per_run",
                                   "max_spend_with_disk_usd", "idle_usd_per_month"})


def budget_fields_shown(budget: dict[str, Any]) -> set[str]:
    """The budget fields a plan of the budget's platform shows (a plan diff compares only these)."""
    if budget.get("platform") == "gke":
        return set(budget) - VM_ONLY_BUDGET_FIELDS
    return {key for key in budget if not key.startswith("gke_") and key != "platform"}


def _money(value: float) -> str:
    return f"${value:,.2f}"


def vm_plan_cost_lines(budget: dict[str, Any]) -> list[str]:
    """The plan's cost lines for one VM, from the plan's budget (JSON as well)."""
    lines: list[str] = []
    pricing = budget["pricing"]
    lines.append(f"  TPU v5litepod-1, {pricing}: {_money(budget['cost_per_hour_usd'])}/hour")
    if budget["max_spend_usd"] is not None:
        hours = f"{budget['run_hours']:g}h"
        lines.append(f"  one run stops by itself after {hours} (tpu.maxRunDuration): at most "
                     f"{_money(budget['max_spend_usd'])} for the TPU")
    else:
        lines.append(f"  nothing stops the TPU until pulumi destroy: a forgotten weekend costs "
                     f"{_money(budget['forgotten_weekend_usd'])}")
    lines.append(f"  compile-cache disk ({budget['cache_disk_type']}, {budget['cache_disk_gb']} GB x "
                 f"${budget['cache_disk_usd_per_gb_month']}/GB-month): {_money(budget['cache_disk_usd_per_month'])}"
                 "/month, billed whether or not a run is active")
    if budget["max_spend_with_disk_usd"] is not None:
        lines.append(f"  one run with the disk's share of those hours ({_money(budget['cache_disk_usd_per_run'])}): "
                     f"at most {_money(budget['max_spend_with_disk_usd'])}")
    idle = [f"the cache disk ({_money(budget['cache_disk_usd_per_month'])}/month)"]
    if budget["secret_versions"]:
        idle.append(f"{budget['secret_versions']} Secret Manager secret version(s) "
                    f"({_money(budget['secret_versions_usd_per_month'])}/month; the first 6 a month are free "
                    "per billing account)")
    lines.append(f"  with no run, still billing: {' and '.join(idle)}; about "
                 f"{_money(budget['idle_usd_per_month'])}/month")
    if budget["cache_disk_outlives_destroy"]:
        lines.append("  cache.keepOnDestroy: the disk outlives pulumi destroy and bills "
                     f"{_money(budget['cache_disk_usd_per_month'])}/month until you delete it "
                     "(see the cacheDiskBilling output)")
    else:
        lines.append("  pulumi destroy deletes the disk (cache.keepOnDestroy is false)")
    lines.append(f"  at the log's peak, 1,496.5 output tok/s: "
                 f"${budget['usd_per_million_output_tokens_at_1496_5_tok_s']} per million output tokens")
    return lines


def gke_plan_cost_lines(summary: dict[str, Any]) -> list[str]:
    """The plan's cost lines for gke, from the plan's budget (JSON as well): nothing here stops billing by
    itself. A node's run ends, but the ComputeClass brings a new one for as long as gke.minReplicas asks, and the
    cluster fee, the system pool, the boot disks, the cache bucket and the secrets bill until `pulumi destroy`."""
    least, most = summary["gke_min_replicas"], summary["gke_max_replicas"]
    disk_month = summary["gke_boot_disk_usd_per_month_per_node"]
    lines = [f"  TPU v5e chip (one per replica, {GKE_MACHINE}), {summary['pricing']}: "
             f"{_money(summary['cost_per_hour_usd'])}/hour each, plus its node's boot disk "
             f"({summary['gke_boot_disk']}, {_money(disk_month)}/month)"]
    if summary["gke_recycling_lead_hours"] is not None:
        lines.append(f"  node recycling: each replacement comes up {summary['gke_recycling_lead_hours']:g}h before "
                     f"its node's {summary['run_hours']:g}h run ends, so a replica bills at most "
                     f"x{summary['gke_recycling_factor']:g} node-hours: {_money(summary['gke_replica_usd_per_hour'])}"
                     "/hour per replica with its disk")
    else:
        lines.append(f"  one replica with its node's boot disk: {_money(summary['gke_replica_usd_per_hour'])}/hour")
    for fallback, prices in summary["gke_fallbacks"].items():
        lines.append(f"  fallback {fallback} (gke.fallback, when the first priority has no capacity): "
                     f"{_money(prices['per_replica_usd_per_hour'])}/hour per replica, "
                     f"{_money(prices['at_max_replicas_usd_per_hour'])}/hour at {most}; no run end, nothing stops "
                     "its billing but the ComputeClass moving the replica back")
    if summary["gke_reused_cluster"]:
        lines.append("  reused cluster (gke.useExistingCluster): its fee and system nodes are its owner's, not in "
                     "these numbers")
    else:
        lines.append(f"  cluster fee {_money(summary['gke_cluster_fee_usd_per_hour'])}/hour, system pool "
                     f"({summary['gke_system_pool']}) {_money(summary['gke_system_pool_usd_per_hour'])}/hour and its "
                     f"boot disks {_money(summary['gke_system_boot_disks_usd_per_hour'])}/hour: from pulumi up to "
                     "pulumi destroy, with or without a TPU node")
    lines.append(f"  compile cache (one Cloud Storage bucket every replica shares, "
                 f"~{summary['gke_cache_gb_per_configuration']} GB per configuration served): "
                 f"${summary['gke_cache_usd_per_month']:.4f}/month")
    lines.append(f"  all of it at {least} replica(s) (gke.minReplicas): "
                 f"{_money(summary['gke_cost_per_hour_usd_at_min_replicas'])}/hour; at {most} (gke.maxReplicas): "
                 f"{_money(summary['gke_cost_per_hour_usd_at_max_replicas'])}/hour")
    surge = summary["gke_rollout_surge_replicas"]
    lines.append(f"  while a rollout runs (a serve flag, the image, the front's config): {surge} more replica "
                 f"(its chip and node) starts before an old one leaves: "
                 f"{_money(summary['gke_cost_per_hour_usd_during_rollout_at_min_replicas'])}/hour at {least}, "
                 f"{_money(summary['gke_cost_per_hour_usd_during_rollout_at_max_replicas'])}/hour at {most}, for "
                 "each replica's warm start (~8 min) or cold compile (~14 min) plus its node's queue")
    if summary["run_hours"] is not None:
        lines.append(f"  each TPU node's run ends after {summary['run_hours']:g}h (tpu.maxRunDuration), but the "
                     f"billing does not: the ComputeClass brings a new node for as long as gke.minReplicas ({least}) "
                     "asks")
        lines.append(f"  one run of {most} replicas with everything else for the same hours: at most "
                     f"{_money(summary['gke_max_spend_per_run_usd'])}")
    else:
        lines.append(f"  no run duration ({summary['pricing']}): every TPU node bills until the autoscaler "
                     f"removes it, never below gke.minReplicas ({least}), or until pulumi destroy")
    idle = [f"{least} replica(s) (gke.minReplicas) with their boot disks"]
    if not summary["gke_reused_cluster"]:
        idle.append("the cluster fee and the system pool")
    idle.append("the cache bucket")
    if summary["secret_versions"]:
        idle.append(f"{summary['secret_versions']} Secret Manager secret version(s)")
    idle_month = summary["gke_usd_per_month_at_min_replicas"] + summary["secret_versions_usd_per_month"]
    lines.append(f"  with no requests, still billing: {', '.join(idle)}; about {_money(idle_month)}/month "
                 "until pulumi destroy")
    if summary["cache_disk_outlives_destroy"]:
        lines.append(f"  cache.keepOnDestroy: the bucket outlives pulumi destroy and bills "
                     f"{_money(summary['gke_cache_usd_per_month'])}/month per configuration until you delete it")
    else:
        lines.append("  pulumi destroy deletes the cluster (its auto-created node pools with it) and the cache "
                     "bucket with its objects")
    lines.append(f"  at the log's peak, 1,496.5 output tok/s per replica: "
                 f"${summary['usd_per_million_output_tokens_at_1496_5_tok_s']} per million output tokens (chip only)")
    return lines


def plan_cost_lines(budget: dict[str, Any]) -> list[str]:
    """The plan's cost lines for the budget's platform."""
    # The VM's lines say a run stops the billing; nothing on gke does.
    lines = gke_plan_cost_lines(budget) if budget.get("platform") == "gke" else vm_plan_cost_lines(budget)
    return lines + monitoring_cost_lines(budget)
