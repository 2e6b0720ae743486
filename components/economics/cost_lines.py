"""The plan's cost lines and the stack's billing sentences, written from the figures components/economics/costs.py
computes (tools/plan only places them)."""

from __future__ import annotations

from typing import Any

from components import catalog
from components.basis import price_list
from components.basis.spending import disk_usd_per_gb_month, disk_usd_per_month
from components.economics.costs import LOG_SHAPE
from components.economics.gateway_costs import gateway_cost_lines


def cache_disk_billing(disk_type: str, size_gb: int, keep_on_destroy: bool, *, disk_name: str, zone: str,
                       project: str) -> str:
    """One sentence on what the disk costs and when that stops (the stack output and the plan)."""
    price, month = disk_usd_per_gb_month(disk_type), disk_usd_per_month(disk_type, size_gb)
    if price is None or month is None:
        # Hyperdisk Balanced bills its capacity by the GiB-month; the stack provisions only its free baseline IOPS
        # and throughput (components/vm/cache_disk.py), and no capacity price has been read.
        text = (f"{disk_type} {size_gb} GB, billed by the GB-month from creation until deleted, whether or not a "
                "run is active (no price read for this type: see the Compute Engine disk pricing page)")
    else:
        text = (f"{disk_type} {size_gb} GB x ${price}/GB-month = ${month:.2f}/month from creation until deleted, "
                "whether or not a run is active")
    if keep_on_destroy:
        return (f"{text}; cache.keepOnDestroy is set, so it outlives pulumi destroy and bills on until you "
                f"delete it: gcloud compute disks delete {disk_name} --zone={zone} --project={project}")
    return f"{text}; pulumi destroy deletes it"


def monitoring_cost_lines(summary: dict[str, Any]) -> list[str]:
    if not summary.get("monitoring_enabled"):
        return ["  monitoring.enabled is false: no dashboard, no alerts, nothing billed by Cloud Monitoring"]
    already = (" (billed with or without the dashboard: the autoscaler needs them)"
               if summary["monitoring_samples_collected_by"] != "the Ops Agent" else "")
    lines = [f"  dashboard (free) from vLLM's metrics, scraped every {summary['monitoring_scrape_interval']} by "
             f"{summary['monitoring_samples_collected_by']}{already}: about "
             f"{summary['monitoring_samples_per_month_at_most'] / 1e6:,.0f} million Prometheus samples a month at "
             f"most (~{price_list.VLLM_SERIES_PER_SCRAPE} series a scrape, estimated), "
             f"{_money(summary['monitoring_samples_usd_per_month'])}/month at "
             f"${price_list.USD_PER_MILLION_PROMETHEUS_SAMPLES}/million (no free allotment for Prometheus samples); "
             "only while vLLM is up"]
    if summary["monitoring_alert_conditions"]:
        lines.append(f"  {summary['monitoring_alert_conditions']} alert policies (one condition each, "
                     f"${price_list.USD_PER_ALERT_CONDITION_MONTH:.2f}/condition-month plus "
                     f"${price_list.USD_PER_MILLION_ALERT_SERIES_RETURNED}/million series returned): about "
                     f"{_money(summary['monitoring_alerts_usd_per_month'])}/month until pulumi destroy; "
                     "monitoring.alerts: false removes them")
    return lines



# What describes one VM (its run, its idle month): a gke plan's budget holds them, its text shows the cluster's.
VM_ONLY_BUDGET_FIELDS = frozenset({"max_spend_usd", "forgotten_weekend_usd", "cache_disk_usd_per_run",
                                   "max_spend_with_disk_usd", "idle_usd_per_month"})


def budget_fields_shown(budget: dict[str, Any]) -> set[str]:
    """The budget fields a plan of the budget's platform shows (a plan diff compares only these)."""
    if budget.get("platform") == "gke":
        return set(budget) - VM_ONLY_BUDGET_FIELDS
    return {key for key in budget if not key.startswith("gke_") and key != "platform"}


def _money(value: float | None) -> str:
    """A dollar figure, or that it has none: a sum with a chip whose price nobody read (TPU7x)."""
    return "price not found" if value is None else f"${value:,.2f}"


def vm_plan_cost_lines(budget: dict[str, Any]) -> list[str]:
    """The plan's cost lines for one VM, from the plan's budget (JSON as well)."""
    lines: list[str] = []
    pricing = budget["pricing"]
    shape = budget.get("tpu_accelerator_type", LOG_SHAPE)
    rate = (f" ({budget['tpu_chips']} chip(s) x ${budget['tpu_usd_per_chip_hour']}/chip-hour in "
            f"{budget['tpu_price_region']})" if "tpu_chips" in budget else "")
    if budget.get("price_not_found"):
        # No figure in place of a price nobody read: the run's bound is its hours, not dollars.
        lines.append(f"  TPU {shape}, {pricing}: {budget['price_not_found']}")
        lines.append(f"  one run stops by itself after {budget['run_hours']:g}h (tpu.maxRunDuration)"
                     if budget["run_hours"] is not None else "  nothing stops the TPU until pulumi destroy")
    elif budget["max_spend_usd"] is not None:
        lines.append(f"  TPU {shape}, {pricing}: {_money(budget['cost_per_hour_usd'])}/hour{rate}")
        hours = f"{budget['run_hours']:g}h"
        lines.append(f"  one run stops by itself after {hours} (tpu.maxRunDuration): at most "
                     f"{_money(budget['max_spend_usd'])} for the TPU")
    else:
        lines.append(f"  TPU {shape}, {pricing}: {_money(budget['cost_per_hour_usd'])}/hour{rate}")
        lines.append(f"  nothing stops the TPU until pulumi destroy: a forgotten weekend costs "
                     f"{_money(budget['forgotten_weekend_usd'])}")
    if budget["cache_disk_usd_per_month"] is None:
        lines.append(f"  compile-cache disk ({budget['cache_disk_type']}, {budget['cache_disk_gb']} GB): no price read "
                     "for this type, billed by the GB-month whether or not a run is active")
    else:
        lines.append(f"  compile-cache disk ({budget['cache_disk_type']}, {budget['cache_disk_gb']} GB x "
                     f"${budget['cache_disk_usd_per_gb_month']}/GB-month): "
                     f"{_money(budget['cache_disk_usd_per_month'])}/month, billed whether or not a run is active")
    if budget["max_spend_with_disk_usd"] is not None:
        lines.append(f"  one run with the disk's share of those hours ({_money(budget['cache_disk_usd_per_run'])}): "
                     f"at most {_money(budget['max_spend_with_disk_usd'])}")
    idle = [f"the cache disk ({_money(budget['cache_disk_usd_per_month'])}/month)"
            if budget["cache_disk_usd_per_month"] is not None else "the cache disk (unpriced)"]
    if budget["secret_versions"]:
        idle.append(f"{budget['secret_versions']} Secret Manager secret version(s) "
                    f"({_money(budget['secret_versions_usd_per_month'])}/month; the first 6 a month are free "
                    "per billing account)")
    lines.append(f"  with no run, still billing: {' and '.join(idle)}; about "
                 f"{_money(budget['idle_usd_per_month'])}/month")
    if budget["cache_disk_outlives_destroy"]:
        month = budget["cache_disk_usd_per_month"]
        lines.append("  cache.keepOnDestroy: the disk outlives pulumi destroy and bills "
                     f"{_money(month) + '/month' if month is not None else 'by the GB-month'} until you delete it "
                     "(see the cacheDiskBilling output)")
    else:
        lines.append("  pulumi destroy deletes the disk (cache.keepOnDestroy is false)")
    other = " (the rate E2B reached on v5e-1, not measured for this pair)" if "tpu_chips" in budget else ""
    if budget["usd_per_million_output_tokens_at_1496_5_tok_s"] is not None:
        lines.append(f"  at the log's peak, 1,496.5 output tok/s{other}: "
                     f"${budget['usd_per_million_output_tokens_at_1496_5_tok_s']} per million output tokens")
    return lines


def gke_plan_cost_lines(summary: dict[str, Any]) -> list[str]:
    """The plan's cost lines for gke, from the plan's budget (JSON as well): nothing here stops billing by
    itself. A node's run ends, but the ComputeClass brings a new one for as long as gke.minReplicas asks, and the
    cluster fee, the system pool, the boot disks, the cache bucket and the secrets bill until `pulumi destroy`."""
    least, most = summary["gke_min_replicas"], summary["gke_max_replicas"]
    disk_month = summary["gke_boot_disk_usd_per_month_per_node"]
    shape = catalog.shape(summary.get("tpu_accelerator_type", LOG_SHAPE))
    chips = (f"{shape.generation.name} chip (one per replica" if shape.chips == 1 else
             f"{shape.generation.name} {shape.accelerator_type} ({shape.chips} chips per replica")
    price = (summary["price_not_found"] if summary.get("price_not_found")
             else f"{_money(summary['cost_per_hour_usd'])}/hour each")
    lines = [f"  TPU {chips}, {shape.gke_machine_type}), {summary['pricing']}: "
             f"{price}, plus its node's boot disk ({summary['gke_boot_disk']}, {_money(disk_month)}/month)"]
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
    lines += gateway_cost_lines(summary)
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
    zero = summary.get("gke_zero")
    if zero is not None:
        lines.append(f"  at zero replicas (gke.minReplicas 0, after gke.scaleToZeroAfter idle): "
                     f"{_money(zero['perHourAtZero'])}/hour (the cluster, the system pool with the picker, the "
                     f"gateway's proxy, the cache); with one replica serving: {_money(zero['perHourAtOneReplica'])}"
                     "/hour")
        lines.append(f"  a day of {zero['activeHoursPerDay']:g} active hours (load.activeHoursPerDay): "
                     f"{_money(zero['perDay'])}, against {_money(zero['perDayAtOneReplicaAllDay'])} with one replica "
                     f"all day; about {_money(zero['savedPerMonth'])}/month saved ({zero['formula']})")
    idle = [f"{least} replica(s) (gke.minReplicas) with their boot disks"]
    if not summary["gke_reused_cluster"]:
        idle.append("the cluster fee and the system pool")
    if "gke_gateway_proxy_usd_per_hour_at_least" in summary:
        idle.append("the inference gateway's proxies")
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
