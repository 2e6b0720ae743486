"""What the gke platform costs and holds, as plain numbers for the outputs and the offline plan."""

from __future__ import annotations

from typing import Any

from components import budget
from components.settings import Settings

# ct5lp-hightpu-1t: one v5e chip per node (the only machine the settings accept).
CHIPS_PER_NODE = 1


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


def plan_summary(settings: Settings) -> dict[str, Any]:
    """The plan's budget lines for gke (snake_case, like the rest of the plan's budget)."""
    costs, kv = gke_costs(settings), settings.kv_budget()
    gke = settings.gke
    summary: dict[str, Any] = {
        "platform": "gke",
        "gke_replicas": f"{gke.min_replicas}..{gke.max_replicas}",
        "gke_cost_per_hour_usd_at_max_replicas": costs["costPerHourUsd"],
        "gke_cost_per_hour_usd_at_min_replicas": costs["costPerHourAtMinReplicasUsd"],
        "gke_cluster_fee_and_system_pool_usd_per_hour": costs["clusterBaselineUsdPerHour"],
        "gke_max_spend_per_run_usd": costs.get("maxSpendPerRunUsd"),
    }
    if kv is not None:
        summary["kv_tokens_at_max_replicas"] = kv.kv_tokens * gke.max_replicas
        summary["load_limit_tokens_at_max_replicas"] = kv.load_limit_tokens * gke.max_replicas
    return summary
