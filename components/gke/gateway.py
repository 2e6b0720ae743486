"""The opt-in inference gateway (gke.inferenceGateway): a GKE Gateway of the regional internal Application Load
Balancer class that balances requests, not connections, through the InferencePool and its endpoint picker
(components/gke/inference_pool.py).

Why: the passthrough load balancer (components/gke/exposure.py) picks a replica per connection; an agent's
kept connections (the openai SDK keeps an idle one 5 s) keep its requests on the replicas they first reached, so a
replica the HPA adds gets nothing over them, not even a conversation started after it came, and a conversation's
long prefix is prefilled again wherever a new connection lands. The gateway's proxies pick per request, and the
picker sends a prompt to the replica holding its prefix (so one conversation stays where its prefix is) and places
new prefixes, or load past what the prefix weight outweighs, across every replica (tests/test_gateway_balancing.py
shows this on 127.0.0.1).

The objects follow llm-d/llm-d-router v0.10.0's chart for GKE (config/charts/llm-d-router-gateway/templates/gke.yaml,
httproute.yaml). The class is GKE's internal one; the same repository's GKE sample (config/manifests/gateway/gke/
gateway.yaml) uses the regional external class, which the policy pack refuses (GKE's GatewayClass list names both):
- Gateway `gke-l7-rilb` (GKE's regional internal Application Load Balancer class), one HTTP listener;
- HTTPRoute: the OpenAI paths (/v1) to the pool; every other path (e.g. /metrics) has no route;
- HealthCheckPolicy on the pool: HTTP GET /health on the front's port (the one path the front answers keyless);
- GCPBackendPolicy on the pool: the backend timeout, which on GKE is the whole request's, set to the front's own
  stream timeout (the chart's 300 s would cut a long stream).
The class needs a proxy-only subnet (purpose REGIONAL_MANAGED_PROXY, role ACTIVE) in the cluster's region and
network; the region has at most one active, so an existing one can be named instead (gke.inferenceGateway.
proxyOnlySubnet). The proxies' connections to the pods come from that subnet, and Google's health checks from
130.211.0.0/22 and 35.191.0.0/16 (components/gke/network_policy.py admits exactly these to the front's port).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.gke import inference_pool, manifests, network_policy, scale_to_zero
from components.serving import front

GATEWAY_API_VERSION = "gateway.networking.k8s.io/v1"
GKE_POLICY_API_VERSION = "networking.gke.io/v1"
GATEWAY_NAME = "vllm-gateway"
ROUTE_NAME = "vllm-openai"
POLICY_NAME = inference_pool.POOL_NAME
# GKE's GatewayClasses (kubernetes-engine/docs/concepts/gateway-api, "GatewayClass capabilities"): the internal
# regional one; the regional external one is what the policy pack refuses without the external opt-in.
INTERNAL_CLASS = "gke-l7-rilb"
EXTERNAL_CLASSES = ("gke-l7-global-external-managed", "gke-l7-regional-external-managed", "gke-l7-gxlb")
LISTENER_PORT = 80
OPENAI_PATH_PREFIX = "/v1"
HEALTH_PATH = "/health"
# Google's health-check probers (load-balancing/docs/health-check-concepts, "Probe IP ranges and firewall rules").
HEALTH_CHECK_RANGES = ("35.191.0.0/16", "130.211.0.0/22")
# The chart's (gke.yaml: "a more aggressive health check than the default 5s for faster switch over").
HEALTH_CHECK_SECONDS = 2
# A stream may run as long as the front lets it (front.STREAM_TIMEOUT_SECONDS); GKE's backend timeout bounds the
# whole response, not the idle time between bytes.
BACKEND_TIMEOUT_SECONDS = front.STREAM_TIMEOUT_SECONDS
PROXY_ONLY_PURPOSE = "REGIONAL_MANAGED_PROXY"


def pool_target_ref() -> dict[str, str]:
    return {"group": inference_pool.POOL_GROUP, "kind": "InferencePool", "name": inference_pool.POOL_NAME}


def gateway(namespace: str, address_name: str) -> dict[str, Any]:
    """On the stack's reserved internal address, named by a `NamedAddress` (the Gateway API v1.5.1 CRD allows the
    type; that GKE's controller takes a reserved regional internal address so is its documentation's, not read
    here: docs/gke.md lists it unverified), so the endpoint is known from the first `pulumi up` and outlives the
    Gateway's replacement; Pulumi reads no status of a custom resource."""
    return {
        "apiVersion": GATEWAY_API_VERSION, "kind": "Gateway",
        "metadata": manifests.metadata(GATEWAY_NAME, namespace),
        "spec": {"gatewayClassName": INTERNAL_CLASS,
                 "addresses": [{"type": "NamedAddress", "value": address_name}],
                 "listeners": [{"name": "http", "protocol": "HTTP", "port": LISTENER_PORT,
                                "allowedRoutes": {"namespaces": {"from": "Same"}}}]},
    }


def http_route(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": GATEWAY_API_VERSION, "kind": "HTTPRoute",
        "metadata": manifests.metadata(ROUTE_NAME, namespace),
        "spec": {
            "parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": GATEWAY_NAME}],
            "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": OPENAI_PATH_PREFIX}}],
                       "backendRefs": [{**pool_target_ref(), "weight": 1}]}],
        },
    }


def health_check_policy(namespace: str, front_port: int) -> dict[str, Any]:
    return {
        "apiVersion": GKE_POLICY_API_VERSION, "kind": "HealthCheckPolicy",
        "metadata": manifests.metadata(POLICY_NAME, namespace),
        "spec": {"targetRef": pool_target_ref(),
                 "default": {"timeoutSec": HEALTH_CHECK_SECONDS, "checkIntervalSec": HEALTH_CHECK_SECONDS,
                             "config": {"type": "HTTP",
                                        "httpHealthCheck": {"requestPath": HEALTH_PATH, "port": front_port}}}},
    }


def backend_policy(namespace: str) -> dict[str, Any]:
    """No request logging (the chart turns it on): Cloud Logging bills per GiB, and the front logs already."""
    return {
        "apiVersion": GKE_POLICY_API_VERSION, "kind": "GCPBackendPolicy",
        "metadata": manifests.metadata(POLICY_NAME, namespace),
        "spec": {"targetRef": pool_target_ref(),
                 "default": {"timeoutSec": BACKEND_TIMEOUT_SECONDS, "logging": {"enabled": False}}},
    }


def proxy_only_subnet_name(resource_prefix: str) -> str:
    return f"{resource_prefix}-proxy-only"


def address_name(resource_prefix: str) -> str:
    return f"{resource_prefix}-gateway"


@dataclass
class InferenceGatewayArgs:
    project: str
    region: str
    network: str
    """tpu.network: where the cluster's nodes are."""
    subnetwork: str
    """The nodes' subnet in the region (tpu.subnetwork; an auto-mode network's is named as the network): the
    gateway's address is reserved in it."""
    resource_prefix: str
    namespace: str
    selector_labels: dict[str, str]
    """The serving pods' labels (workload.selector_labels): the pool's selector."""
    front_port: int
    adopted_subnet: str | None
    """gke.inferenceGateway.proxyOnlySubnet: an existing proxy-only subnet (the stack makes none)."""
    proxy_only_range: str
    picker_image: pulumi.Input[str]
    """The picker's image, pinned by digest."""
    provider: k8s.Provider
    workload: pulumi.Resource
    services: list[pulumi.Resource]
    pool_grace_seconds: int
    """The serving pods' terminationGracePeriodSeconds (gke.terminationGracePeriod): the picker's mirrors it."""
    zero: scale_to_zero.ZeroPool | None = None
    """The pool's zero (gke.minReplicas 0): the picker holds requests (flow control) and Managed Prometheus scrapes
    its queue for the HPA."""


def gateway_endpoint(address: pulumi.Input[str]) -> pulumi.Output[str]:
    return pulumi.Output.concat("http://", address, f"{OPENAI_PATH_PREFIX}")


class InferenceGateway(pulumi.ComponentResource):
    """`address`: the gateway's IP in the VPC, the agents' endpoint; `outputs`: what the stack exports of it."""

    address: pulumi.Output[str]
    subnet: str
    outputs: dict[str, Any]

    def __init__(self, name: str, args: InferenceGatewayArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-vllm:gke:InferenceGateway", name, None, opts)
        after: list[pulumi.Resource] = [args.workload]
        self.subnet = args.adopted_subnet or proxy_only_subnet_name(args.resource_prefix)
        if args.adopted_subnet is None:
            after.append(gcp.compute.Subnetwork(
                f"{name}-proxy-only-subnet", project=args.project, region=args.region, network=args.network,
                name=self.subnet, ip_cidr_range=args.proxy_only_range, purpose=PROXY_ONLY_PURPOSE, role="ACTIVE",
                description="tpu-vllm: the inference gateway's proxies (regional internal Application Load Balancer)",
                opts=pulumi.ResourceOptions(parent=self, depends_on=args.services)))
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=after)
        ns = args.namespace
        sources = [args.proxy_only_range, *HEALTH_CHECK_RANGES]
        picker_ports = [inference_pool.EXT_PROC_PORT, inference_pool.HEALTH_PORT]
        zero = args.zero
        for manifest in [network_policy.gateway_network_policy(ns, args.selector_labels, args.front_port, sources,
                                                               inference_pool.PICKER_LABELS),
                         network_policy.picker_network_policy(
                             ns, inference_pool.PICKER_LABELS, sources, picker_ports,
                             collector_port=scale_to_zero.PICKER_METRICS_PORT if zero is not None else None),
                         *inference_pool.picker_access(ns), inference_pool.picker_config_map(ns, zero),
                         inference_pool.picker_deployment(ns, args.picker_image, args.pool_grace_seconds, zero),
                         inference_pool.picker_service(ns),
                         *([scale_to_zero.picker_pod_monitoring(ns, inference_pool.PICKER_LABELS,
                                                                inference_pool.PICKER_NAME)] if zero is not None
                           else []),
                         inference_pool.inference_pool(ns, args.selector_labels, args.front_port),
                         http_route(ns), health_check_policy(ns, args.front_port), backend_policy(ns)]:
            manifests.declare(f"{name}-{manifest['metadata']['name']}-{manifest['kind'].lower()}", manifest, k8s_opts)
        reserved = gcp.compute.Address(
            f"{name}-address", project=args.project, region=args.region, name=address_name(args.resource_prefix),
            address_type="INTERNAL", purpose="SHARED_LOADBALANCER_VIP", subnetwork=args.subnetwork,
            description="tpu-vllm: the inference gateway's address in the VPC",
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.services))
        manifests.declare(f"{name}-gateway", gateway(ns, address_name(args.resource_prefix)),
                          pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[*after, reserved]))
        self.address = reserved.address
        self.outputs = {
            "inferenceGateway": {"class": INTERNAL_CLASS, "address": self.address, "gateway": GATEWAY_NAME,
                                 "inferencePool": inference_pool.POOL_NAME,
                                 "endpointPicker": inference_pool.PICKER_NAME,
                                 "pickerImage": args.picker_image, "proxyOnlySubnet": self.subnet,
                                 "proxyOnlySubnetAdopted": args.adopted_subnet is not None,
                                 "failureMode": inference_pool.FAILURE_MODE,
                                 **({"flowControl": {"requestTtlSeconds": zero.request_ttl_seconds,
                                                     "requestTtl": zero.ttl_text(),
                                                     "heldRequestLimit": zero.held_limit}}
                                    if zero is not None else {})},
        }
        self.register_outputs({"address": self.address})
