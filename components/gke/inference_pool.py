"""The InferencePool over the serving pods' front port, and llm-d's endpoint picker that chooses a pod per request.

Declared as llm-d/llm-d-router v0.10.0's `llm-d-router-gateway` chart renders them (config/charts/routerlib/
templates/_inferencepool.yaml, _deployment.yaml, _service.yaml, _rbac.yaml, _config.yaml and the gateway chart's
rbac.yaml), with this stack's differences, each said where it is made: the pool's port is the front's (the key
check stays in the front; the gateway never sees vLLM's port); requests that fit the cluster's system pool (the
chart asks 8 CPUs and 8 GiB); the picker reads each replica's metrics from the metrics door, not the pool's port
(picker_config.py); the image pinned by digest. tests/test_gke_gateway.py compares these objects with the chart's
templates.
"""

from __future__ import annotations

from typing import Any

import pulumi

from components.gke import manifests, picker_config, scale_to_zero
from components.settings.gateway import PICKER_MEMORY_LIMIT, PICKER_REQUESTS

POOL_GROUP = "inference.networking.k8s.io"
POOL_API_VERSION = f"{POOL_GROUP}/v1"
POOL_NAME = "vllm-pool"
# The chart names the picker "<release>-epp" (routerlib/templates/_helpers.tpl, llm-d-router.name).
PICKER_NAME = f"{POOL_NAME}-epp"
PICKER_LABELS = {"llm-d-router-gateway": PICKER_NAME}
# The release whose flow control holds a request while the pool is empty (v0.10.0, 2026-08-17); pinned to its digest
# at the first `pulumi up` (components/core/image_digest.py), the repository its chart names at that release
# (config/charts/routerlib/values.yaml epp.image: ghcr.io/llm-d, llm-d-router-endpoint-picker).
PICKER_IMAGE = "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0"
# The picker's ports (routerlib/values.yaml extProcPort, _deployment.yaml grpc-health default 9003): the load
# balancer calls ext_proc on 9002 and health-checks the picker over gRPC on 9003 (llm-d-router-gateway/templates/
# gke.yaml: "The GKE gateway controller health-checks the EPP backend on gRPC port 9003 by default").
EXT_PROC_PORT = 9002
HEALTH_PORT = 9003
CONFIG_DIR = "/config"
# FailOpen: when the picker does not answer, the load balancer still sends the request to a ready pod of the pool
# (the CRD's endpointPickerRef.failureMode; its default is FailClose, the chart's FailOpen). The picker is one pod
# on the system pool (the chart's recommended single active replica, Recreate): with FailClose each of its restarts
# or evictions would refuse every request though every replica is serving. FailOpen loses only the choice (queue,
# KV, prefix) while the picker is away; the front's key check is on the pods either way.
FAILURE_MODE = "FailOpen"
# Set beside the saturation detector's staleness it must stay inside (picker_config.py says why both).
REFRESH_METRICS_INTERVAL = picker_config.REFRESH_METRICS_INTERVAL
# Sized for the system pool (components/settings/gateway.py PICKER_REQUESTS says why); no CPU limit, as the chart,
# so it may burst.
PICKER_RESOURCES = {"requests": dict(PICKER_REQUESTS), "limits": {"memory": PICKER_MEMORY_LIMIT}}


def inference_pool(namespace: str, selector_labels: dict[str, str], front_port: int) -> dict[str, Any]:
    return {
        "apiVersion": POOL_API_VERSION, "kind": "InferencePool",
        "metadata": manifests.metadata(POOL_NAME, namespace),
        "spec": {
            "targetPorts": [{"number": front_port}],
            "appProtocol": "http",
            "selector": {"matchLabels": dict(selector_labels)},
            "endpointPickerRef": {"name": PICKER_NAME, "port": {"number": EXT_PROC_PORT},
                                  "failureMode": FAILURE_MODE},
        },
    }


def picker_config_map(namespace: str, zero: scale_to_zero.ZeroPool | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": manifests.metadata(PICKER_NAME, namespace),
            "data": {picker_config.FILE_NAME: picker_config.picker_config_text(zero)}}


def picker_args(namespace: str, zero: scale_to_zero.ZeroPool | None = None) -> list[str]:
    """The chart's arguments for a pool-backed picker (_deployment.yaml), plus the metrics interval (the port of the
    replicas' metrics is the metrics source's parameter at v0.10.0, picker_config.py); at
    zero, the picker's own /metrics for Managed Prometheus (scale_to_zero.PICKER_METRICS_FLAGS)."""
    return ["--pool-name", POOL_NAME, "--pool-namespace", namespace, "--pool-group", POOL_GROUP,
            "--zap-encoder", "json", "--config-file", f"{CONFIG_DIR}/{picker_config.FILE_NAME}",
            "--grpc-health-port", str(HEALTH_PORT), "--tracing=false",
            f"--refresh-metrics-interval={REFRESH_METRICS_INTERVAL}",
            *(scale_to_zero.PICKER_METRICS_FLAGS if zero is not None else ())]


def picker_deployment(namespace: str, image: pulumi.Input[str], pool_grace_seconds: int,
                      zero: scale_to_zero.ZeroPool | None = None) -> dict[str, Any]:
    """pool_grace_seconds: the serving pods' grace (gke.terminationGracePeriod). The picker's mirrors it, as the
    chart's comment asks ("this timeout should mirror the longest grace period of the pods within the pool",
    routerlib _deployment.yaml; its own 130 is that rule for its pods, not a figure for these)."""
    probe = {"grpc": {"port": HEALTH_PORT, "service": "inference-extension"}}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": manifests.metadata(PICKER_NAME, namespace, PICKER_LABELS),
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": dict(PICKER_LABELS)},
            "template": {
                "metadata": {"labels": dict(PICKER_LABELS)},
                "spec": {
                    "serviceAccountName": PICKER_NAME,
                    "terminationGracePeriodSeconds": pool_grace_seconds,
                    "containers": [{
                        "name": "epp", "image": image, "imagePullPolicy": "IfNotPresent",
                        "args": picker_args(namespace, zero),
                        "resources": PICKER_RESOURCES,
                        "ports": [{"name": "grpc", "containerPort": EXT_PROC_PORT},
                                  {"name": "grpc-health", "containerPort": HEALTH_PORT},
                                  *([{"name": scale_to_zero.PICKER_METRICS_PORT_NAME,
                                      "containerPort": scale_to_zero.PICKER_METRICS_PORT}] if zero is not None
                                    else [])],
                        "livenessProbe": {**probe, "initialDelaySeconds": 5, "periodSeconds": 10},
                        "readinessProbe": {**probe, "periodSeconds": 2},
                        "env": [{"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                        "volumeMounts": [{"name": "plugins-config-volume", "mountPath": CONFIG_DIR}],
                        "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True,
                                            "capabilities": {"drop": ["ALL"]}},
                    }],
                    "volumes": [{"name": "plugins-config-volume", "configMap": {"name": PICKER_NAME}}],
                },
            },
        },
    }


def picker_service(namespace: str) -> dict[str, Any]:
    """ext_proc only: the chart's http-metrics port is left off (Managed Prometheus scrapes the pod, not the
    Service). `appProtocol: kubernetes.io/h2c` as v0.10.0's chart has it (routerlib/templates/_service.yaml): the
    load balancer speaks gRPC, HTTP/2 without TLS, to the picker."""
    return {"apiVersion": "v1", "kind": "Service", "metadata": manifests.metadata(PICKER_NAME, namespace),
            "spec": {"type": "ClusterIP", "selector": dict(PICKER_LABELS),
                     "ports": [{"name": "grpc-ext-proc", "protocol": "TCP", "port": EXT_PROC_PORT,
                                "appProtocol": "kubernetes.io/h2c"}]}}


def picker_access(namespace: str) -> list[dict[str, Any]]:
    """The chart's namespaced grants, nothing cluster-wide: read pods (routerlib _rbac.yaml) and the pool and
    objectives (llm-d-router-gateway rbac.yaml). The chart's ClusterRole for token and access reviews exists only to
    guard the picker's own /metrics when Prometheus scrapes it, which this stack does not."""
    rules = [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "watch", "list"]},
        {"apiGroups": [POOL_GROUP], "resources": ["inferencepools"], "verbs": ["get", "watch", "list"]},
        {"apiGroups": ["inference.networking.x-k8s.io", "llm-d.ai"],
         "resources": ["inferenceobjectives", "inferencemodelrewrites"], "verbs": ["get", "watch", "list"]},
    ]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": manifests.metadata(PICKER_NAME, namespace),
         "automountServiceAccountToken": True},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": manifests.metadata(PICKER_NAME, namespace), "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": manifests.metadata(PICKER_NAME, namespace),
         "subjects": [{"kind": "ServiceAccount", "name": PICKER_NAME, "namespace": namespace}],
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": PICKER_NAME}},
    ]
