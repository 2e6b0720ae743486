"""What the replicas hold: one chip's KV-cache figures and the load line, per replica and in total (the gke
wing's outputs; the vm wing writes its one chip's in its deployment.py)."""

from __future__ import annotations

from typing import Any

from components.basis import chip_memory
from components.settings.facts import GKE_ROLLOUT_SURGE_PODS


def kv_outputs(kv: chip_memory.KvBudget | None, min_replicas: int, max_replicas: int) -> dict[str, Any]:
    if kv is None:
        return {}
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
            f"a rollout adds {GKE_ROLLOUT_SURGE_PODS} replica (one more chip) before an old one leaves, so these "
            f"lines hold through it, and at {max_replicas} the namespace holds "
            f"{max_replicas + GKE_ROLLOUT_SURGE_PODS} chips while it runs"),
    }
