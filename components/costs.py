"""What each platform costs and holds: plain numbers for the stack's outputs and the offline plan's budget,
and the plan's cost lines, the VM's and the gke's side by side (tools/plan only renders them)."""

from __future__ import annotations

from typing import Any

from components import budget
from components.settings import Settings

# ct5lp-hightpu-1t: one v5e chip per node (the only machine the settings accept).
CHIPS_PER_NODE = 1
GKE_MACHINE = "ct5lp-hightpu-1t"


def gke_costs(settings: Settings) -> dict[str, Any]:
    """$/hour at the least and the most replicas, the cluster's own baseline, and one run of every node."""
    gke, pricing = settings.gke, settings.tpu.provisioning_model
    reused = gke.use_existing_cluster
    system_nodes = 0 if reused else gke.system_node_count

    def cost(chips: int) -> budget.GkeCost:
        return budget.gke_cost(pricing, chips * CHIPS_PER_NODE, gke.system_machine_type, system_nodes,
                               cluster_fee=not reused)

    most, least = cost(gke.max_replicas), cost(gke.min_replicas)
    costs: dict[str, Any] = {
        "costPerHourUsd": round(most.total_usd_per_hour, 4),
        "costPerHourAtMinReplicasUsd": round(least.total_usd_per_hour, 4),
        "clusterBaselineUsdPerHour": round(most.baseline_usd_per_hour, 4),
    }
    if pricing == "flex-start":
        costs["maxSpendPerRunUsd"] = round(most.max_spend_usd(settings.tpu.run_seconds), 2)
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
            f"{gke.max_replicas}; e.g. 16 agents per replica at {kv.load_limit_tokens // 16:,} tokens each"),
    }


def gke_plan_summary(settings: Settings) -> dict[str, Any]:
    """The plan's budget lines for gke (snake_case, like the rest of the plan's budget)."""
    costs, kv = gke_costs(settings), settings.kv_budget()
    gke = settings.gke
    reused = gke.use_existing_cluster
    system_nodes = 0 if reused else gke.system_node_count
    least = budget.gke_cost(settings.tpu.provisioning_model, gke.min_replicas * CHIPS_PER_NODE,
                            gke.system_machine_type, system_nodes, cluster_fee=not reused)
    summary: dict[str, Any] = {
        "platform": "gke",
        "gke_replicas": f"{gke.min_replicas}..{gke.max_replicas}",
        "gke_cost_per_hour_usd_at_max_replicas": costs["costPerHourUsd"],
        "gke_cost_per_hour_usd_at_min_replicas": costs["costPerHourAtMinReplicasUsd"],
        "gke_cluster_fee_and_system_pool_usd_per_hour": costs["clusterBaselineUsdPerHour"],
        "gke_max_spend_per_run_usd": costs.get("maxSpendPerRunUsd"),
        "gke_min_replicas": gke.min_replicas,
        "gke_max_replicas": gke.max_replicas,
        "gke_reused_cluster": reused,
        "gke_cluster_fee_usd_per_hour": round(least.cluster_fee_usd_per_hour, 4),
        "gke_system_pool": f"{system_nodes} x {gke.system_machine_type}",
        "gke_system_pool_usd_per_hour": round(least.system_pool_usd_per_hour, 4),
        # minReplicas chips never scale away, so they bill every hour the stack exists, like the fee.
        "gke_usd_per_month_at_min_replicas": round(least.total_usd_per_hour * budget.HOURS_PER_MONTH, 2),
    }
    if kv is not None:
        summary["kv_tokens_at_max_replicas"] = kv.kv_tokens * gke.max_replicas
        summary["load_limit_tokens_at_max_replicas"] = kv.load_limit_tokens * gke.max_replicas
    return summary


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
    itself. A node's run ends, but the autoscaler brings a new one for as long as gke.minReplicas asks, and the
    cluster fee, the system pool, the cache volumes and the secrets bill until `pulumi destroy`."""
    least, most = summary["gke_min_replicas"], summary["gke_max_replicas"]
    disk = summary["cache_disk_usd_per_month"]
    lines = [f"  TPU v5e chip (one per replica, {GKE_MACHINE}), {summary['pricing']}: "
             f"{_money(summary['cost_per_hour_usd'])}/hour each"]
    if summary["gke_reused_cluster"]:
        lines.append("  reused cluster (gke.useExistingCluster): its fee and system nodes are its owner's, not in "
                     "these numbers")
    else:
        baseline = summary["gke_cluster_fee_usd_per_hour"] + summary["gke_system_pool_usd_per_hour"]
        lines.append(f"  cluster fee {_money(summary['gke_cluster_fee_usd_per_hour'])}/hour and system pool "
                     f"({summary['gke_system_pool']}) {_money(summary['gke_system_pool_usd_per_hour'])}/hour: "
                     f"{_money(baseline)}/hour from pulumi up to pulumi destroy, with or without a TPU node")
    lines.append(f"  all of it at {least} replica(s) (gke.minReplicas): "
                 f"{_money(summary['gke_cost_per_hour_usd_at_min_replicas'])}/hour; at {most} (gke.maxReplicas): "
                 f"{_money(summary['gke_cost_per_hour_usd_at_max_replicas'])}/hour")
    if summary["run_hours"] is not None:
        lines.append(f"  each TPU node's run ends after {summary['run_hours']:g}h (tpu.maxRunDuration), but the "
                     f"billing does not: the autoscaler brings a new node for as long as gke.minReplicas ({least}) "
                     "asks")
        lines.append(f"  one run of {most} nodes with the cluster for the same hours: at most "
                     f"{_money(summary['gke_max_spend_per_run_usd'])}")
    else:
        lines.append(f"  no run duration ({summary['pricing']}): every TPU node bills until the autoscaler "
                     f"removes it, never below gke.minReplicas ({least}), or until pulumi destroy")
    lines.append(f"  compile-cache volumes ({summary['cache_disk_type']}, {summary['cache_disk_gb']} GB, one per "
                 f"replica that has run): {_money(disk)}/month each, {_money(disk * most)}/month at {most}; a "
                 "replica scaled away keeps its volume")
    idle = [f"{least} replica(s) (gke.minReplicas)"]
    if not summary["gke_reused_cluster"]:
        idle.append("the cluster fee and the system pool")
    idle.append(f"{least} cache volume(s)")
    if summary["secret_versions"]:
        idle.append(f"{summary['secret_versions']} Secret Manager secret version(s)")
    idle_month = (summary["gke_usd_per_month_at_min_replicas"] + least * disk
                  + summary["secret_versions_usd_per_month"])
    lines.append(f"  with no requests, still billing: {', '.join(idle)}; about {_money(idle_month)}/month "
                 "until pulumi destroy")
    if summary["cache_disk_outlives_destroy"]:
        lines.append(f"  cache.keepOnDestroy: the volumes outlive pulumi destroy and bill {_money(disk)}/month each "
                     "until you delete them")
    else:
        lines.append("  pulumi destroy deletes the cluster and its node pools; Kubernetes deletes the cache volumes "
                     "as their claims go, which may not finish before the cluster is gone: check for pvc- disks")
    lines.append(f"  at the log's peak, 1,496.5 output tok/s per replica: "
                 f"${summary['usd_per_million_output_tokens_at_1496_5_tok_s']} per million output tokens (chip only)")
    return lines


def plan_cost_lines(budget: dict[str, Any]) -> list[str]:
    """The plan's cost lines for the budget's platform."""
    # The VM's lines say a run stops the billing; nothing on gke does.
    return gke_plan_cost_lines(budget) if budget.get("platform") == "gke" else vm_plan_cost_lines(budget)
