"""How clients reach the front: a ClusterIP Service inside the cluster and a passthrough load balancer for the
VPC, internal unless gke.allowExternalLoadBalancer opts in. Both land on the front's port, never on vLLM."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.gke import manifests
from components.gke.workload import serving_service
from components.settings import Settings

CLUSTER_SERVICE = "vllm"
LOAD_BALANCER_SERVICE = "vllm-lb"
# GKE's annotation for an internal passthrough Network Load Balancer.
INTERNAL_LB_ANNOTATION = "networking.gke.io/load-balancer-type"
# Marks an external load balancer as the stack's explicit choice; the policy pack reads it.
EXTERNAL_LB_OPT_IN_ANNOTATION = "tpu-vllm/external-load-balancer"
EXTERNAL_LB_OPT_IN = "opted-in by tpu-vllm:gke.allowExternalLoadBalancer"


def cluster_service(settings: Settings, namespace: str) -> dict[str, Any]:
    return serving_service(settings, CLUSTER_SERVICE, namespace, {"type": "ClusterIP"})


def load_balancer_service(settings: Settings, namespace: str) -> dict[str, Any]:
    """Source ranges: the VPC's (access.internalSourceRanges) and the listed outside ones; an external one
    gets only the listed outside ranges (never an empty list, which Kubernetes reads as everyone)."""
    access = settings.access
    if settings.gke.allow_external_load_balancer:
        annotations = {EXTERNAL_LB_OPT_IN_ANNOTATION: EXTERNAL_LB_OPT_IN}
        ranges = list(access.serving_source_ranges)
    else:
        annotations = {INTERNAL_LB_ANNOTATION: "Internal"}
        ranges = list(dict.fromkeys([*access.internal_source_ranges, *access.serving_source_ranges]))
    return serving_service(settings, LOAD_BALANCER_SERVICE, namespace,
                           {"type": "LoadBalancer", "loadBalancerSourceRanges": ranges}, annotations)


@dataclass
class ExposureArgs:
    settings: Settings
    """The validated stack settings (vllm.port, access ranges, gke.allowExternalLoadBalancer)."""
    provider: k8s.Provider
    """The cluster's Kubernetes provider."""
    workload: pulumi.Resource
    """The serving workload (its namespace must exist first)."""


class Exposure(pulumi.ComponentResource):
    """`address` is the load balancer's IP: the endpoint for agents in the VPC."""

    address: pulumi.Output[str]
    in_cluster_url: str

    def __init__(self, name: str, args: ExposureArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-vllm:gke:Exposure", name, None, opts)
        cfg, ns = args.settings, args.settings.gke.namespace
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[args.workload])
        manifests.declare(f"{name}-cluster-ip", cluster_service(cfg, ns), k8s_opts)
        balancer = manifests.declare(f"{name}-load-balancer", load_balancer_service(cfg, ns), k8s_opts)
        self.address = balancer.status.apply(lambda status: status.load_balancer.ingress[0].ip)
        self.in_cluster_url = f"http://{CLUSTER_SERVICE}.{ns}.svc.cluster.local:{cfg.vllm.port}/v1"
        self.register_outputs({"address": self.address})
