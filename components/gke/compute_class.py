"""The ComputeClass that provisions every TPU node (cloud.google.com/v1, node pool auto-creation).

Priorities, in order: tpu.provisioningModel (flex-start by default, with its run duration and node recycling:
GKE brings up the replacement `gke.recyclingLeadTime` before a node's run ends, so a replica moves to a warm
node instead of waiting for one), then the `gke.fallback` models the user opted into. Zones from
gke.nodeLocations. Shaped after Google's v5e 1x1 class (GoogleCloudPlatform/accelerated-platforms,
platforms/gke/base/core/custom_compute_class/templates/manifests/tpu/v5e/custom-compute-tpu-v5e-1x1.yaml), and
checked against the CRD's own schema in the tests (tests/schemas/computeclass_v1.json).

A namespace ResourceQuota caps the chips the workload's pods may request at gke.maxReplicas plus the one surge pod
a rollout adds (components/gke/workload.py ROLLOUT_STRATEGY): a ComputeClass has no node maximum of its own.
"""

from __future__ import annotations

from typing import Any

from components import catalog
from components.gke import manifests
from components.gke.cluster import BOOT_DISK_GB
from components.settings.gke import GkeSettings

COMPUTE_CLASS_API = "cloud.google.com/v1"
# GKE labels (and taints) every node a class creates with the class's name; pods select it with this key.
COMPUTE_CLASS_LABEL = "cloud.google.com/compute-class"
# The node's TPU block follows tpu.acceleratorType: the catalog's GKE accelerator label (tpu-v5-lite-podslice,
# tpu-v6e-slice), topology (1x1, 2x2, 2x4) and chip count, every chip of a single-host node to one pod.
DEFAULT_SHAPE = catalog.shape("v5litepod-1")
TPU_TYPE = DEFAULT_SHAPE.generation.gke_accelerator
TPU_TOPOLOGY = DEFAULT_SHAPE.gke_topology
CHIPS_PER_NODE = DEFAULT_SHAPE.gke_tpu_count
# Written from gke.fallback / gke.allowUnboundedBilling only; the policy pack honours it on the stack's own class.
UNBOUNDED_BILLING_ANNOTATION = "tpu-vllm/unbounded-billing-opt-in"
# Taints GKE puts on the nodes of each model (the pods tolerate the ones their class can make).
MODEL_TAINTS = {"flex-start": "cloud.google.com/gke-flex-start", "spot": "cloud.google.com/gke-spot"}
TPU_RESOURCE = "google.com/tpu"


def class_name(resource_prefix: str, shape: catalog.Shape = DEFAULT_SHAPE) -> str:
    # A Kubernetes object name is a lowercase RFC 1123 subdomain: "TPU7x" goes in as "tpu7x".
    return f"{resource_prefix}-tpu-{shape.generation.name.lower()}-{shape.gke_topology}"


def models(provisioning_model: str, gke: GkeSettings) -> list[str]:
    """The provisioning models of the class's priorities, first to last: tpu.provisioningModel, then gke.fallback."""
    return [provisioning_model, *gke.fallback]


def unbounded_models(models_in_order: list[str]) -> list[str]:
    """Models with no run end that the settings opted into: fallbacks, or a spot / on-demand primary
    (gke.allowUnboundedBilling)."""
    return [model for model in models_in_order if model != "flex-start"]


def tpu_block(shape: catalog.Shape) -> dict[str, Any]:
    """The priority's TPU: the accelerator label, the topology and the chips of one node."""
    return {"type": shape.generation.gke_accelerator, "topology": shape.gke_topology, "count": shape.gke_tpu_count}


def priority(model: str, gke: GkeSettings, run_seconds: int, shape: catalog.Shape = DEFAULT_SHAPE) -> dict[str, Any]:
    rule: dict[str, Any] = {
        "tpu": tpu_block(shape),
        "location": {"zones": list(gke.tpu_zones)},
        # The boot disk stated, so the plan prices exactly it: the type the generation's machines take.
        "storage": {"bootDiskSize": BOOT_DISK_GB, "bootDiskType": shape.generation.gke_boot_disk_type},
    }
    if model == "flex-start":
        rule["flexStart"] = {"enabled": True,
                             "nodeRecycling": {"leadTimeSeconds": gke.recycling_lead_seconds}}
        rule["maxRunDurationSeconds"] = run_seconds
    else:
        rule["spot"] = model == "spot"
    return rule


def compute_class(name: str, models_in_order: list[str], gke: GkeSettings, run_seconds: int,
                  node_service_account: Any, shape: catalog.Shape = DEFAULT_SHAPE) -> dict[str, Any]:
    """name: class_name(); models_in_order: models(); run_seconds: tpu.maxRunDuration in seconds."""
    unbounded = unbounded_models(models_in_order)
    annotations = {UNBOUNDED_BILLING_ANNOTATION: ",".join(unbounded)} if unbounded else None
    return {
        "apiVersion": COMPUTE_CLASS_API, "kind": "ComputeClass",
        "metadata": manifests.metadata(name, annotations=annotations),
        "spec": {
            "priorities": [priority(model, gke, run_seconds, shape) for model in models_in_order],
            # The class makes its own node pools, with the nodes' least-privilege identity (not Compute's default).
            # No imageStreaming (Google's class sets it): it streams Artifact Registry images only, and needs the
            # Container File System API; vllm/vllm-tpu comes from Docker Hub.
            "nodePoolAutoCreation": {"enabled": True},
            "nodePoolConfig": {"serviceAccount": node_service_account},
            # With no priority satisfiable, wait for capacity rather than put a TPU pod anywhere else.
            "whenUnsatisfiable": "DoNotScaleUp",
            # Move replicas back to the first priority when it has capacity again (a fallback costs more).
            "activeMigration": {"optimizeRulePriority": bool(gke.fallback)},
        },
    }


def node_selector(name: str, shape: catalog.Shape = DEFAULT_SHAPE) -> dict[str, str]:
    """Only nodes this class made carry its label: a pod can land nowhere else."""
    return {COMPUTE_CLASS_LABEL: name,
            "cloud.google.com/gke-tpu-accelerator": shape.generation.gke_accelerator,
            "cloud.google.com/gke-tpu-topology": shape.gke_topology}


def tolerations(name: str, models_in_order: list[str]) -> list[dict[str, str]]:
    found = [{"key": TPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"},
             {"key": COMPUTE_CLASS_LABEL, "operator": "Equal", "value": name, "effect": "NoSchedule"}]
    found += [{"key": MODEL_TAINTS[model], "operator": "Exists", "effect": "NoSchedule"}
              for model in models_in_order if model in MODEL_TAINTS]
    return found


def chip_quota(max_replicas: int, namespace: str, surge_pods: int, chips_per_node: int = CHIPS_PER_NODE
               ) -> dict[str, Any]:
    """The namespace's pods may request at most gke.maxReplicas chips plus the rollout's surge pods: the cap the
    API server enforces. Without the surge chip a rollout at maxReplicas could not create its new pod, and would
    wait (maxUnavailable 0) until the HPA scaled down."""
    return {
        "apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": manifests.metadata("tpu-chips", namespace),
        "spec": {"hard": {f"requests.{TPU_RESOURCE}": str(peak_chips(max_replicas, surge_pods, chips_per_node))}},
    }


def peak_chips(max_replicas: int, surge_pods: int, chips_per_node: int = CHIPS_PER_NODE) -> int:
    """The most chips the namespace holds at once: every replica the HPA may ask for, and a rollout's surge."""
    return (max_replicas + surge_pods) * chips_per_node
