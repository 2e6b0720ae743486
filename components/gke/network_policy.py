"""Who may open a connection to a vLLM pod: the front's port for the clients the Services bring, the metrics
door's port for Managed Prometheus's collectors only, nothing else.

The metrics door answers on the pod's IP without a key (components/gke/metrics_door.py), and vLLM's /metrics
tells the load and the model; without this policy every pod in the cluster could read it. Enforced by GKE
Dataplane V2, which the stack's cluster turns on (components/gke/cluster.py; a reused cluster is checked).
"""

from __future__ import annotations

from typing import Any

from components.gke import manifests, metrics_door

NAME = "vllm-ingress"
# Managed Service for Prometheus runs its collectors as the DaemonSet `collector` in gmp-system, pods labelled
# app.kubernetes.io/name: collector, on the pod network (GoogleCloudPlatform/prometheus-engine,
# manifests/operator.yaml); a collector scrapes the targets on its own node from its pod IP.
COLLECTOR_NAMESPACE = "gmp-system"
COLLECTOR_LABELS = {"app.kubernetes.io/name": "collector"}
# Every namespace carries this label (Kubernetes 1.22+), so a namespace can be selected by its name.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def pod_network_policy(namespace: str, pod_labels: dict[str, str], front_port: int) -> dict[str, Any]:
    """For the pods with pod_labels; ingress only (the pods still reach Hugging Face and the metadata server).

    The front's port is open to any source: the Services route clients to it, the internal load balancer
    already limits who reaches it (loadBalancerSourceRanges) and delivers the client's address or, when it
    forwards through another node, possibly that node's, which the stack cannot list; and the front wants the
    key on every path but /health. The metrics door's port answers only the collectors.
    """
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": manifests.metadata(NAME, namespace, pod_labels),
        "spec": {
            "podSelector": {"matchLabels": dict(pod_labels)},
            "policyTypes": ["Ingress"],
            "ingress": [
                {"ports": [{"protocol": "TCP", "port": front_port}]},
                _collectors_to(metrics_door.METRICS_PORT),
            ],
        },
    }


GATEWAY_POLICY_NAME = "vllm-gateway-ingress"
PICKER_POLICY_NAME = "vllm-picker-ingress"


def _from_ranges(ranges: list[str]) -> list[dict[str, Any]]:
    return [{"ipBlock": {"cidr": cidr}} for cidr in ranges]


def gateway_network_policy(namespace: str, pod_labels: dict[str, str], front_port: int, gateway_sources: list[str],
                           picker_labels: dict[str, str]) -> dict[str, Any]:
    """What the inference gateway adds for the serving pods, beside vllm-ingress (Kubernetes admits a connection
    any policy selecting the pod allows): the gateway's proxies (the proxy-only subnet) and Google's health checks
    reach the front's port, and the endpoint picker's pods reach the metrics door, the one thing they scrape. The
    picker is given neither the front nor vLLM."""
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": manifests.metadata(GATEWAY_POLICY_NAME, namespace, pod_labels),
        "spec": {
            "podSelector": {"matchLabels": dict(pod_labels)},
            "policyTypes": ["Ingress"],
            "ingress": [
                {"from": _from_ranges(gateway_sources), "ports": [{"protocol": "TCP", "port": front_port}]},
                {"from": [{"podSelector": {"matchLabels": dict(picker_labels)}}],
                 "ports": [{"protocol": "TCP", "port": metrics_door.METRICS_PORT}]},
            ],
        },
    }


def _collectors_to(port: int) -> dict[str, Any]:
    return {"from": [{"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: COLLECTOR_NAMESPACE}},
                      "podSelector": {"matchLabels": dict(COLLECTOR_LABELS)}}],
            "ports": [{"protocol": "TCP", "port": port}]}


def picker_network_policy(namespace: str, picker_labels: dict[str, str], gateway_sources: list[str],
                          ports: list[int], collector_port: int | None = None) -> dict[str, Any]:
    """The endpoint picker answers the gateway's proxies (ext_proc) and Google's health checks on its own ports,
    and no one else: nothing in the cluster may steer the routing. collector_port: the picker's own /metrics
    (keyless, for the HPA at zero), which only Managed Prometheus's collectors may read."""
    ingress = [{"from": _from_ranges(gateway_sources), "ports": [{"protocol": "TCP", "port": port} for port in ports]}]
    if collector_port is not None:
        ingress.append(_collectors_to(collector_port))
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": manifests.metadata(PICKER_POLICY_NAME, namespace, picker_labels),
        "spec": {"podSelector": {"matchLabels": dict(picker_labels)}, "policyTypes": ["Ingress"],
                 "ingress": ingress},
    }
