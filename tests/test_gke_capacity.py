"""components/gke/capacity.py's concurrencyGuidance: a replica is one pod holding every chip of its node."""

from __future__ import annotations

from components import settings
from components.gke import capacity

SSH = {"access": {"sshSourceRanges": ["198.51.100.7/32"]}}


def kv_budget(accelerator_type: str, max_tpu_chips: int):
    return settings.load({**SSH, "platform": "gke", "tpu": {"acceleratorType": accelerator_type, "zone": "us-east5-a"},
                          "gke": {"location": "us-east5-a", "nodeLocations": ["us-east5-a"], "minReplicas": 2,
                                  "maxReplicas": 2, "maxTpuChips": max_tpu_chips},
                          "vllm": {"model": "Qwen/Qwen3-8B"}}, project="my-proj", stack="dev").settings.kv_budget()


def test_a_rollout_on_a_four_chip_replica_adds_four_chips():
    # The pod requests google.com/tpu: the shape's count (workload.py), a v6e-4 node's 4 (gke-labs/tpu-operator
    # chipsPerNode "ct6e-standard-4t" -> 4).
    text = capacity.kv_outputs(kv_budget("v6e-4", 12), 2, 2, chips_per_replica=4)["concurrencyGuidance"]
    assert "one more chip" not in text
    assert "a rollout adds 1 replica (4 more chips, a node of 4)" in text and "holds 12 chips while it runs" in text


def test_a_rollout_on_a_one_chip_replica_adds_one_chip():
    text = capacity.kv_outputs(kv_budget("v6e-1", 8), 2, 2, chips_per_replica=1)["concurrencyGuidance"]
    assert "a rollout adds 1 replica (one more chip)" in text and "holds 3 chips while it runs" in text
