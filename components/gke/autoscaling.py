"""Scaling on vLLM's queue: the path from `vllm:num_requests_waiting` to the HPA.

  vLLM /metrics (loopback) -> metrics door :9090 in the pod -> PodMonitoring (Managed Service for
  Prometheus scrapes every 15 s into Cloud Monitoring as prometheus.googleapis.com/vllm:num_requests_waiting/gauge)
  -> Google's custom metrics adapter (custom.metrics.k8s.io, reads Cloud Monitoring with its own Google
  identity) -> the HPA (autoscaling/v2, Pods metric, average per pod) -> Deployment replicas -> a pending
  pod -> the cluster autoscaler adds a flex-start TPU node.

A pool that may stand at zero (gke.minReplicas 0, components/gke/scale_to_zero.py) scales on the endpoint picker's
own gauges instead, the requests it holds and those it has sent on, as External metrics GKE's AutoscalingMetric
reads with PromQL (0 when the picker has no series); the adapter is not installed then.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.basis import boot
from components.core.identity import ServiceIdentity, ServiceIdentityArgs
from components.gke import manifests, metrics_door, scale_to_zero
from components.gke.workload import APP_NAME, bind_workload_identity
from components.monitoring.scrape import GKE_SCRAPE_INTERVAL
from components.settings import GKE_METRICS_ADAPTER_NAMESPACE

QUEUE_METRIC = "vllm:num_requests_waiting"
# The adapter's name for a Managed Prometheus gauge: prometheus.googleapis.com|<metric>|gauge.
HPA_METRIC = f"prometheus.googleapis.com|{QUEUE_METRIC}|gauge"
# The HPA keeps a replica that took minutes to warm through a dip shorter than a cold start.
SCALE_DOWN_WINDOW_SECONDS = 900

# Google's custom metrics adapter (GoogleCloudPlatform/k8s-stackdriver,
# custom-metrics-stackdriver-adapter/deploy/production/adapter_new_resource_model.yaml at af49d863, 2026-08-17, the
# commit that moved it to v0.16.9-gke.0: the tag cm-sd-adapter-v0.16.9 still names v0.16.7-gke.0). Its objects as
# that file has them, less its GPU/TPU tolerations, `imagePullPolicy: Always` and cluster-service labels, plus the
# Workload Identity annotation. The object names and the namespace are the adapter's contract with the API server;
# keep them.
ADAPTER_IMAGE = "gcr.io/gke-release/custom-metrics-stackdriver-adapter:v0.16.9-gke.0"
ADAPTER_NAMESPACE = GKE_METRICS_ADAPTER_NAMESPACE  # gke.namespace may not take it (components/settings/gke.py)
ADAPTER_NAME = "custom-metrics-stackdriver-adapter"
ADAPTER_ROLE = "roles/monitoring.viewer"


def pod_monitoring(labels: dict[str, str], namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.googleapis.com/v1", "kind": "PodMonitoring",
        "metadata": manifests.metadata(APP_NAME, namespace, dict(labels)),
        "spec": {
            "selector": {"matchLabels": dict(labels)},
            "endpoints": [{"port": metrics_door.METRICS_PORT_NAME, "path": metrics_door.METRICS_PATH,
                           "interval": GKE_SCRAPE_INTERVAL}],
        },
    }


def horizontal_pod_autoscaler(labels: dict[str, str], namespace: str, *, min_replicas: int, max_replicas: int,
                              waiting_requests_target: int,
                              zero: scale_to_zero.ZeroPool | None = None) -> dict[str, Any]:
    """zero: the pool's zero; then the floor is 0, the metrics are the picker's and the scale-down window is
    gke.scaleToZeroAfter (the HPA removes the last replica only after that long with nothing held or running)."""
    if zero is not None:
        return {
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": manifests.metadata(APP_NAME, namespace, dict(labels)),
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": APP_NAME},
                "minReplicas": 0,
                "maxReplicas": max_replicas,
                "metrics": scale_to_zero.hpa_metrics(zero),
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": zero.idle_seconds,
                                           "policies": [{"type": "Pods", "value": 1, "periodSeconds": 300}]}},
            },
        }
    return {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": manifests.metadata(APP_NAME, namespace, dict(labels)),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": APP_NAME},
            "minReplicas": min_replicas,
            "maxReplicas": max_replicas,
            "metrics": [{"type": "Pods", "pods": {
                "metric": {"name": HPA_METRIC},
                "target": {"type": "AverageValue", "averageValue": str(waiting_requests_target)},
            }}],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": SCALE_DOWN_WINDOW_SECONDS,
                                       "policies": [{"type": "Pods", "value": 1, "periodSeconds": 300}]}},
        },
    }


def metrics_adapter(google_service_account: pulumi.Input[str]) -> list[dict[str, Any]]:
    """The adapter's objects, in the order they must exist."""
    subject = [{"kind": "ServiceAccount", "name": ADAPTER_NAME, "namespace": ADAPTER_NAMESPACE}]
    labels = {"run": ADAPTER_NAME, "k8s-app": ADAPTER_NAME}
    service = {"name": ADAPTER_NAME, "namespace": ADAPTER_NAMESPACE}

    def api_service(group: str, version: str, priority: int) -> dict[str, Any]:
        return {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                "metadata": manifests.metadata(f"{version}.{group}"),
                "spec": {"group": group, "version": version, "service": service,
                         "insecureSkipTLSVerify": True, "groupPriorityMinimum": 100, "versionPriority": priority}}

    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": manifests.metadata(ADAPTER_NAMESPACE)},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": manifests.metadata(ADAPTER_NAME, ADAPTER_NAMESPACE,
                                        annotations={"iam.gke.io/gcp-service-account": google_service_account})},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": manifests.metadata("custom-metrics:system:auth-delegator"),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"},
         "subjects": subject},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": manifests.metadata("custom-metrics-auth-reader", "kube-system"),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                     "name": "extension-apiserver-authentication-reader"},
         "subjects": subject},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": manifests.metadata("custom-metrics-resource-reader"),
         "rules": [{"apiGroups": [""], "resources": ["pods", "nodes", "nodes/stats"],
                    "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": manifests.metadata("custom-metrics-resource-reader"),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": "custom-metrics-resource-reader"},
         "subjects": subject},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": manifests.metadata(ADAPTER_NAME, ADAPTER_NAMESPACE, labels),
         "spec": {
             "replicas": 1,
             "selector": {"matchLabels": labels},
             "template": {"metadata": {"labels": labels}, "spec": {
                 "serviceAccountName": ADAPTER_NAME,
                 "containers": [{
                     "name": "pod-custom-metrics-stackdriver-adapter",
                     "image": ADAPTER_IMAGE,
                     "command": ["/adapter", "--use-new-resource-model=true",
                                 "--fallback-for-container-metrics=true"],
                     "resources": {"limits": {"cpu": "250m", "memory": "200Mi"},
                                   "requests": {"cpu": "250m", "memory": "200Mi"}},
                     "readinessProbe": {"httpGet": {"path": "/healthz", "port": 443, "scheme": "HTTPS"},
                                        "initialDelaySeconds": 40, "periodSeconds": 10, "timeoutSeconds": 5},
                 }],
             }},
         }},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": manifests.metadata(ADAPTER_NAME, ADAPTER_NAMESPACE, labels),
         "spec": {"type": "ClusterIP", "selector": labels,
                  "ports": [{"port": 443, "protocol": "TCP", "targetPort": 443}]}},
        api_service("custom.metrics.k8s.io", "v1beta1", 100),
        api_service("custom.metrics.k8s.io", "v1beta2", 200),
        api_service("external.metrics.k8s.io", "v1beta1", 100),
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": manifests.metadata("external-metrics-reader"),
         "rules": [{"apiGroups": ["external.metrics.k8s.io"], "resources": ["*"], "verbs": ["list", "get", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": manifests.metadata("external-metrics-reader"),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "external-metrics-reader"},
         "subjects": [{"kind": "ServiceAccount", "name": "horizontal-pod-autoscaler", "namespace": "kube-system"}]},
    ]


def scale_up_latency(tpu_zones: list[str]) -> str:
    warm, cold = boot.WARM_BOOT_SECONDS, boot.COLD_BOOT_SECONDS
    zones = ", ".join(tpu_zones)
    return (f"queue -> HPA: ~1-2 min ({GKE_SCRAPE_INTERVAL} scrape, Cloud Monitoring, 15 s HPA sync); then a new "
            f"flex-start TPU node (minutes with capacity, queued until there is some in {zones}); "
            f"then vLLM starts warm in ~{warm // 60} min ({warm} s) on a replica that has run before, "
            f"~{cold // 60} min ({cold} s) cold on a new one")


def _adapter_key(manifest: dict[str, Any]) -> str:
    """kind-name, e.g. clusterrolebinding-custom-metrics-system-auth-delegator (no ':' in a Pulumi name)."""
    return re.sub(r"[^a-z0-9.-]+", "-", f"{manifest['kind']}-{manifest['metadata']['name']}".lower())


@dataclass
class AutoscalingArgs:
    project: str
    """The project of the adapter's Google identity and its monitoring.viewer grant."""
    namespace: str
    """The workload's Kubernetes namespace (gke.namespace): the PodMonitoring and the HPA live there."""
    selector_labels: dict[str, str]
    """The serving pods' labels (workload.selector_labels): what the PodMonitoring scrapes."""
    min_replicas: int
    """gke.minReplicas: the HPA's floor."""
    max_replicas: int
    """gke.maxReplicas: the HPA's ceiling."""
    waiting_requests_target: int
    """gke.waitingRequestsTarget: the queued requests per pod the HPA aims at."""
    adapter_account_id: str
    """The metrics adapter's Google service-account id (naming.service_account_id)."""
    provider: k8s.Provider
    """The cluster's Kubernetes provider."""
    workload: pulumi.Resource
    """The serving workload whose Deployment the HPA scales."""
    install_adapter: bool
    """Deploy Google's custom metrics adapter (off when a reused cluster already runs one)."""
    cluster_ready: list[pulumi.Resource]
    """The cluster (its workload pool must exist before the Workload Identity binding)."""
    zero: scale_to_zero.ZeroPool | None = None
    """The pool's zero (gke.minReplicas 0): the HPA's floor, metrics and idle window."""
    picker_series: dict[str, str] | None = None
    """At zero: the labels that select the picker's series in Managed Prometheus (the dashboard's picker_labels)."""
    engine_series: dict[str, str] | None = None
    """At zero: the labels that select the engines' series (the dashboard's labels)."""


class Autoscaling(pulumi.ComponentResource):
    """PodMonitoring, the custom metrics adapter with its own Google identity (monitoring.viewer), the HPA."""

    hpa: pulumi.CustomResource

    def __init__(self, name: str, args: AutoscalingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-vllm:gke:Autoscaling", name, None, opts)
        ns = args.namespace
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[args.workload])
        manifests.declare(f"{name}-pod-monitoring", pod_monitoring(args.selector_labels, ns), k8s_opts)
        adapter_ready: list[pulumi.Resource] = []
        if args.zero is not None:
            # At zero the HPA reads only the AutoscalingMetric's External metrics; the adapter would serve nothing.
            demand = scale_to_zero.autoscaling_metric(ns, args.picker_series or {}, args.engine_series or {})
            adapter_ready.append(manifests.declare(f"{name}-picker-demand", demand, k8s_opts))
        elif args.install_adapter:
            identity = ServiceIdentity(
                f"{name}-adapter",
                ServiceIdentityArgs(project=args.project, account_id=args.adapter_account_id,
                               display_name="tpu-vllm metrics adapter",
                               description="Reads the queue metric from Cloud Monitoring for the HPA."),
                pulumi.ResourceOptions(parent=self))
            role = gcp.projects.IAMMember(
                f"{name}-adapter-monitoring-viewer", project=args.project, role=ADAPTER_ROLE,
                member=pulumi.Output.concat("serviceAccount:", identity.email),
                opts=pulumi.ResourceOptions(parent=self))
            binding = bind_workload_identity(
                f"{name}-adapter-workload-identity", args.project, identity.email, ADAPTER_NAMESPACE, ADAPTER_NAME,
                pulumi.ResourceOptions(parent=self, depends_on=args.cluster_ready))
            previous: list[pulumi.Resource] = [role, binding]
            for manifest in metrics_adapter(identity.email):
                previous = [manifests.declare(
                    f"{name}-adapter-{_adapter_key(manifest)}", manifest,
                    pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=previous))]
                adapter_ready += previous
        self.hpa = manifests.declare(
            f"{name}-hpa", horizontal_pod_autoscaler(
                args.selector_labels, ns, min_replicas=args.min_replicas, max_replicas=args.max_replicas,
                waiting_requests_target=args.waiting_requests_target, zero=args.zero),
            pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=adapter_ready)))
        self.register_outputs({})

