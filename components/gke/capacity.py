"""What the replicas hold: one replica's KV-cache figures and the load line, per replica and in total (the gke
wing's outputs; the vm wing writes its one node's in its deployment.py). A replica is one pod holding every chip
of its node (the shape's count: compute_class.py, workload.py)."""

from __future__ import annotations

from typing import Any

from components.basis import chip_memory
from components.settings.facts import GKE_ROLLOUT_SURGE_PODS


def kv_outputs(kv: chip_memory.KvBudget | None, min_replicas: int, max_replicas: int,
               chips_per_replica: int) -> dict[str, Any]:
    if kv is None:
        return {}
    surge_chips = GKE_ROLLOUT_SURGE_PODS * chips_per_replica
    more_chips = "one more chip" if surge_chips == 1 else f"{surge_chips} more chips, a node of {chips_per_replica}"
    return {
        "kvBytesPerToken": kv.kv_bytes_per_token,
        "kvTokens": kv.kv_tokens,
        "kvTokensAtMaxReplicas": kv.kv_tokens * max_replicas,
        "kvPoolGib": round(chip_memory.gib(kv.kv_pool_bytes), 2),
        "hbmCapGib": round(chip_memory.gib(kv.hbm_cap_bytes), 2),
        "concurrencyGuidance": (
            f"per replica keep clients x context under {kv.load_limit_tokens:,} tokens (78% of "
            f"{kv.kv_tokens:,}); in total under {kv.load_limit_tokens * min_replicas:,} at "
            f"{min_replicas} replica(s) and {kv.load_limit_tokens * max_replicas:,} at "
            f"{max_replicas}; e.g. 16 agents per replica at {kv.load_limit_tokens // 16:,} tokens each; "
            f"a rollout adds {GKE_ROLLOUT_SURGE_PODS} replica ({more_chips}) before an old one "
            f"leaves, so these lines hold through it, and at {max_replicas} the namespace holds "
            f"{(max_replicas + GKE_ROLLOUT_SURGE_PODS) * chips_per_replica} chips while it runs"
            f"{kv.replicas_clause}"),
    }
