"""How clients reach the front: a ClusterIP Service inside the cluster and a passthrough load balancer for the
VPC, internal unless gke.allowExternalLoadBalancer opts in. Both land on the front's port, never on vLLM."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.gke import manifests
from components.gke.workload import serving_service

CLUSTER_SERVICE = "vllm"
LOAD_BALANCER_SERVICE = "vllm-lb"
# GKE's annotation for an internal passthrough Network Load Balancer.
INTERNAL_LB_ANNOTATION = "networking.gke.io/load-balancer-type"
# Marks an external load balancer as the stack's explicit choice; the policy pack reads it.
EXTERNAL_LB_OPT_IN_ANNOTATION = "tpu-vllm/external-load-balancer"
EXTERNAL_LB_OPT_IN = "opted-in by tpu-vllm:gke.allowExternalLoadBalancer"


@dataclass
class ExposureArgs:
    namespace: str
    """The workload's Kubernetes namespace (gke.namespace)."""
    selector_labels: dict[str, str]
    """The labels of the serving pods the Services send to (workload.selector_labels)."""
    serving_port: int
    """front.listenPort: the front's port, on the pods and on both Services."""
    allow_external_load_balancer: bool
    """gke.allowExternalLoadBalancer: the load balancer faces the internet instead of the VPC."""
    internal_source_ranges: list[str]
    """access.internalSourceRanges: the VPC's ranges, allowed on an internal load balancer."""
    serving_source_ranges: list[str]
    """access.servingSourceRanges: the listed outside ranges, allowed on either kind."""
    provider: k8s.Provider
    """The cluster's Kubernetes provider."""
    workload: pulumi.Resource
    """The serving workload (its namespace must exist first)."""
    passthrough_load_balancer: bool = True
    """False when gke.inferenceGateway is on: the gateway (components/gke/gateway.py) is the VPC's way in, and a
    second, connection-level way in beside it would keep the agents that use it on one replica."""


def cluster_service(args: ExposureArgs) -> dict[str, Any]:
    return serving_service(args.selector_labels, args.serving_port, CLUSTER_SERVICE, args.namespace,
                           {"type": "ClusterIP"})


def load_balancer_service(args: ExposureArgs) -> dict[str, Any]:
    """Source ranges: the VPC's (access.internalSourceRanges) and the listed outside ones; an external one
    gets only the listed outside ranges (never an empty list, which Kubernetes reads as everyone)."""
    if args.allow_external_load_balancer:
        annotations = {EXTERNAL_LB_OPT_IN_ANNOTATION: EXTERNAL_LB_OPT_IN}
        ranges = list(args.serving_source_ranges)
    else:
        annotations = {INTERNAL_LB_ANNOTATION: "Internal"}
        ranges = list(dict.fromkeys([*args.internal_source_ranges, *args.serving_source_ranges]))
    return serving_service(args.selector_labels, args.serving_port, LOAD_BALANCER_SERVICE, args.namespace,
                           {"type": "LoadBalancer", "loadBalancerSourceRanges": ranges}, annotations)


class Exposure(pulumi.ComponentResource):
    """`address` is the load balancer's IP: the endpoint for agents in the VPC (None without one)."""

    address: pulumi.Output[str] | None
    in_cluster_url: str

    def __init__(self, name: str, args: ExposureArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-vllm:gke:Exposure", name, None, opts)
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[args.workload])
        manifests.declare(f"{name}-cluster-ip", cluster_service(args), k8s_opts)
        self.address = None
        if args.passthrough_load_balancer:
            balancer = manifests.declare(f"{name}-load-balancer", load_balancer_service(args), k8s_opts)
            self.address = balancer.status.apply(lambda status: status.load_balancer.ingress[0].ip)
        self.in_cluster_url = f"http://{CLUSTER_SERVICE}.{args.namespace}.svc.cluster.local:{args.serving_port}/v1"
        self.register_outputs({"address": self.address})
