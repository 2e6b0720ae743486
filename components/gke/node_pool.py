"""The TPU node pool: ct5lp-hightpu-1t (one v5e chip per node), flex-start with a run duration, autoscaled
from zero by the cluster autoscaler over the listed zones."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp

from components.gke.cluster import CLOUD_PLATFORM_SCOPE

# One v5e chip: the GKE accelerator label value and its topology. GKE labels a single-host TPU node with its
# topology by itself (cloud.google.com/gke-tpu-topology), so the pods select 1x1 without the pool naming it.
TPU_ACCELERATOR = "tpu-v5-lite-podslice"
TPU_TOPOLOGY = "1x1"
# Marks a spot / on-demand pool the stack opted into (gke.allowUnboundedBilling); the policy pack reads it.
UNBOUNDED_BILLING_LABEL = "tpu-vllm-unbounded-billing"
UNBOUNDED_BILLING_OPT_IN = "opted-in"


def tpu_node_config(*, machine_type: str, provisioning_model: str, run_seconds: int | None,
                    service_account_email: pulumi.Input[str], labels: dict[str, str],
                    unbounded_billing_opt_in: bool) -> dict:
    """node_config: flex-start with its run duration, or spot / on-demand, each in its own field (as on the VM)."""
    resource_labels = dict(labels)
    if provisioning_model != "flex-start" and unbounded_billing_opt_in:
        resource_labels[UNBOUNDED_BILLING_LABEL] = UNBOUNDED_BILLING_OPT_IN
    config: dict = {
        "machine_type": machine_type,
        "service_account": service_account_email,
        "oauth_scopes": [CLOUD_PLATFORM_SCOPE],
        "labels": dict(labels),
        "resource_labels": resource_labels,
        # Pods get their own identity (Workload Identity), never the node's.
        "workload_metadata_config": {"mode": "GKE_METADATA"},
    }
    if provisioning_model == "flex-start":
        # Flex-start VMs consume no reservation (gcloud: --flex-start --reservation-affinity=none).
        config.update(flex_start=True, max_run_duration=f"{int(run_seconds)}s",
                      reservation_affinity={"consume_reservation_type": "NO_RESERVATION"})
    elif provisioning_model == "spot":
        config["spot"] = True
    return config


@dataclass
class TpuNodePoolArgs:
    project: str
    """The cluster's project."""
    cluster: pulumi.Input[str]
    """The cluster's name."""
    location: str
    """The cluster's location (zone or region)."""
    pool_name: str
    """The node pool's name; pods select it by the cloud.google.com/gke-nodepool label."""
    zones: list[str]
    """Zones the autoscaler may put a TPU node in (ANY: wherever there is capacity)."""
    max_nodes: int
    """Total nodes (= chips) the autoscaler may reach: gke.maxReplicas."""
    machine_type: str
    """ct5lp-hightpu-1t."""
    provisioning_model: str
    """flex-start, spot or on-demand (tpu.provisioningModel)."""
    run_seconds: int | None
    """flex-start only: each node's run (tpu.maxRunDuration)."""
    service_account_email: pulumi.Input[str]
    """The nodes' identity (the same as the system pool's)."""
    unbounded_billing_opt_in: bool = False
    """gke.allowUnboundedBilling: marks a spot / on-demand pool as an explicit choice."""
    labels: dict[str, str] = field(default_factory=dict)
    """Kubernetes node labels and GCP resource labels of the stack."""


class TpuNodePool(pulumi.ComponentResource):
    """Auto-repair is off (flex-start requires it), queued provisioning is not set (GKE refuses it for
    single-host TPU flex-start VMs) and there is no placement policy (single host, several zones): a pending
    pod is what asks for a node."""

    pool: gcp.container.NodePool
    name: pulumi.Output[str]

    def __init__(self, name: str, args: TpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-vllm:gke:TpuNodePool", name, None, opts)
        self.pool = gcp.container.NodePool(
            name,
            project=args.project,
            cluster=args.cluster,
            location=args.location,
            name=args.pool_name,
            node_locations=list(args.zones),
            initial_node_count=0,
            autoscaling={"total_min_node_count": 0, "total_max_node_count": args.max_nodes,
                         "location_policy": "ANY"},
            management={"auto_repair": False, "auto_upgrade": True},
            # No placement_policy. A single-host pool takes neither a COMPACT placement nor a TPU topology:
            # Google's xpk sets both only for multi-host slices (AI-Hypercomputer/xpk src/xpk/core/nodepool.py,
            # "--tpu-topology should not be set for single-host node pools", PR #822), and a compact placement
            # keeps a pool's nodes in one zone (cloud.google.com/kubernetes-engine/docs/how-to/compact-placement,
            # Limitations), against the several gke.nodeLocations that are this pool's capacity fallback.
            # pulumi-gcp cannot send a topology alone: placement_policy.type is required and only COMPACT.
            node_config=tpu_node_config(
                machine_type=args.machine_type, provisioning_model=args.provisioning_model,
                run_seconds=args.run_seconds, service_account_email=args.service_account_email,
                labels=args.labels, unbounded_billing_opt_in=args.unbounded_billing_opt_in),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.name = self.pool.name
        self.register_outputs({"name": self.name})
