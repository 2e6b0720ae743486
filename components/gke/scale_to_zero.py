"""A pool that may stand at zero replicas (`gke.minReplicas: 0`, only behind `gke.inferenceGateway`): one value,
`ZeroPool`, that the picker's configuration, the HPA, the picker's scrape, the network policy, the outputs and the
dashboard read.

At zero no vLLM pod exists to report a queue, and a Kubernetes Service holds nothing ("Kubernetes Services do not
buffer requests while no Pods are ready, so HTTP and other request-driven workloads need a separate buffering
layer", kubernetes.io/blog/2026/09/02/kubernetes-v1-37-hpa-scale-to-zero-beta). The buffer is llm-d-router
v0.10.0's flow control: with its `flowControl` feature gate on, a request that finds no endpoint waits in the
picker ("When the pool has no endpoints the queue acts as a scale-from-zero waiting room and requests hold for the
full budget", pkg/epp/flowcontrol/README.md) for at most `defaultRequestTTL` (60 s when omitted: apix/config/
v1alpha1/endpointpickerconfig_types.go, flowcontrol/controller/config.go defaultRequestTTL). The picker counts what
it holds in `llm_d_epp_flow_control_queue_size` and what it has sent on in `llm_d_epp_request_running`
(pkg/epp/metrics/llm_d_router_metrics.go, subsystem `llm_d_epp`), and the HPA scales on them as External metrics,
which Kubernetes 1.37 lets scale to and from zero ("A HorizontalPodAutoscaler (HPA) that uses a suitable object
metric or external metric can now scale a workload to zero replicas", the same blog; Beta and on by default).

Neither gauge has a series while the pool idles: a GaugeVec with no child exports nothing, so a fresh picker shows
neither, and the flow registry deletes an idle flow's queue series (registry.go gcFlows ->
metrics.DeleteFlowControlFlowSeries, after FlowGCTimeout, 5 min by default: registry/config.go). An External metric
with no series is one the HPA cannot compute ("no metrics returned from external metrics API", kubernetes
pkg/controller/podautoscaler/metrics/rest_metrics_client.go), and an HPA with an invalid metric does not scale down
("If all metrics are invalid or some are invalid and we would scale down, return an error", horizontal.go
computeReplicasForMetrics), so read through Google's custom metrics adapter (which answers one item per time series
of its 5-minute window, none when there is none: k8s-stackdriver response_translator.go GetRespForExternalMetric,
adapter.go) the pool would never reach zero. The demand is read instead by GKE's own AutoscalingMetric
(autoscaling.gke.io/v1beta1, the managed metrics path GKE's scale-to-zero tutorial uses) as PromQL over Managed
Prometheus, `sum(...) or vector(0)`: one value always, 0 when the picker has no series. Nothing else reads
Google's adapter at zero, so it is not installed then (its external.metrics.k8s.io APIService would be a second
answerer for External metrics).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from components.basis import boot
from components.catalog import paging
from components.monitoring import promql
from components.monitoring.scrape import GKE_SCRAPE_INTERVAL
from components.settings.facts import GKE_NODE_UP_ALLOWANCE_SECONDS
from components.settings.fields import parse_duration

# llm-d-router v0.10.0 (71f4f099): the flow-control gate (pkg/epp/flowcontrol/config.go FeatureGate, registered off
# by default in cmd/epp/runner/runner.go) and the two gauges (pkg/epp/metrics/llm_d_router_metrics.go).
FLOW_CONTROL_GATE = "flowControl"
HELD_METRIC = promql.HELD
RUNNING_METRIC = promql.PICKER_RUNNING
# GKE's AutoscalingMetric: the HPA names each of its metrics autoscaling.gke.io|<object>|<metric> (GKE's "Expose
# custom metrics for autoscaling"); the names are lowercase with hyphens.
AUTOSCALING_METRIC_API = "autoscaling.gke.io/v1beta1"
DEMAND_OBJECT = "picker-demand"
HELD_DEMAND = "held-requests"
RUNNING_DEMAND = "running-requests"
# vLLM's own running gauge, beside the picker's: llm_d_epp_request_running counts only requests that carry a model
# (pkg/epp/metrics/metrics.go, `if modelName != ""`), and the passthrough parser the route sends /v1/audio, /v1/score
# and /v1/rerank to sets none (pkg/epp/framework/plugins/requesthandling/parsers/passthrough), so a long request
# there would count as nothing running and the pool could go to zero under it. The engine counts every request.
ENGINE_RUNNING_DEMAND = "engine-running-requests"
ENGINE_RUNNING_METRIC = promql.RUNNING
# The picker's own /metrics (pkg/epp/server/options.go MetricsPort 9090); its bearer-token check
# (--metrics-endpoint-auth, on by default) is turned off for Managed Prometheus, which sends no token; the network
# policy admits only the collectors to the port (components/gke/network_policy.py).
PICKER_METRICS_PORT = 9090
PICKER_METRICS_PORT_NAME = "metrics"
PICKER_METRICS_FLAGS = (f"--metrics-port={PICKER_METRICS_PORT}", "--metrics-endpoint-auth=false")
# From a request held to the HPA's decision: the collectors scrape every GKE_SCRAPE_INTERVAL, Cloud Monitoring and
# the AutoscalingMetric's PromQL read add their delay, the HPA syncs every 15 s (kube-controller-manager
# --horizontal-pod-autoscaler-sync-period default). The same ~1-2 min as autoscaling.scale_up_latency; the bound
# taken here is its upper end (computed, not measured).
DETECTION_SECONDS = 120
# The TTL's headroom over the stated cold start: a cold start the stack has not measured on GKE may run long.
TTL_HEADROOM = 1.25
# The Go duration form metav1.Duration reads (time.ParseDuration).
_GO_DURATION = "{seconds}s"


@dataclass(frozen=True)
class ColdStart:
    """How long a held request waits at zero before a replica serves it, each part labelled by its source."""

    detection_seconds: int = DETECTION_SECONDS
    node_seconds: int = GKE_NODE_UP_ALLOWANCE_SECONDS
    warm_boot_seconds: int = boot.WARM_BOOT_SECONDS

    @property
    def seconds(self) -> int:
        return self.detection_seconds + self.node_seconds + self.warm_boot_seconds

    def text(self) -> str:
        return (f"~{self.seconds} s: the HPA sees the held request in ~{self.detection_seconds} s (computed: "
                f"{GKE_SCRAPE_INTERVAL} scrape, Cloud Monitoring, the AutoscalingMetric's PromQL, the HPA's 15 s "
                f"sync), a flex-start TPU node in ~{self.node_seconds} s (the stack's allowance for node and image, "
                f"not measured), vLLM warm from the shared compile cache in {self.warm_boot_seconds} s (measured, "
                "the build log)")


@dataclass(frozen=True)
class ZeroPool:
    idle_seconds: int
    """gke.scaleToZeroAfter: the HPA's scale-down window, so the last replica goes only after this long with no
    request held and none running."""
    running_per_replica: int
    """vLLM's max_num_seqs: the in-flight requests one replica takes (the HPA keeps ceil(running / this))."""
    held_per_replica: int
    """gke.waitingRequestsTarget: the held requests per replica the HPA aims at."""
    held_limit: int
    """The default band's maxRequests: what the whole pool at gke.maxReplicas takes at once; more is refused."""
    cold_start: ColdStart

    @property
    def request_ttl_seconds(self) -> int:
        """The cold start with headroom, in whole minutes (computed)."""
        return math.ceil(self.cold_start.seconds * TTL_HEADROOM / 60) * 60

    def ttl_text(self) -> str:
        return (f"{self.request_ttl_seconds} s (computed: {self.cold_start.seconds} s cold start x {TTL_HEADROOM}, "
                f"rounded up to a minute; the cold start: {self.cold_start.text()})")


def zero_pool(min_replicas: int, max_replicas: int, *, scale_to_zero_after: str, waiting_requests_target: int,
              max_num_seqs: int | None) -> ZeroPool | None:
    """The pool's zero, or None when gke.minReplicas keeps a replica (nothing here is read then)."""
    if min_replicas != 0:
        return None
    running = max_num_seqs or paging.DEFAULT_MAX_NUM_SEQS
    return ZeroPool(idle_seconds=parse_duration(scale_to_zero_after), running_per_replica=running,
                    held_per_replica=waiting_requests_target, held_limit=max_replicas * running,
                    cold_start=ColdStart())


def flow_control(zero: ZeroPool) -> dict[str, Any]:
    """The picker configuration's flow-control section (FlowControlConfig, PriorityBandConfig: endpointpickerconfig_
    types.go; built by pkg/epp/config/loader/flowcontrol.go). One band: the stack sends no priorities, so every
    request is priority 0 and lands in `defaultPriorityBand`; its maxRequests bounds what is held (the system default
    5000 otherwise); past it the picker answers 503 rejected-no-endpoints at zero, 429 rejected-saturated above it."""
    return {"defaultRequestTTL": _GO_DURATION.format(seconds=zero.request_ttl_seconds),
            "defaultPriorityBand": {"priority": 0, "maxRequests": str(zero.held_limit)}}


def autoscaling_metric(namespace: str, picker_series: dict[str, str],
                       engine_series: dict[str, str]) -> dict[str, Any]:
    """The demand as GKE's AutoscalingMetric reads it: PromQL over Managed Prometheus, the picker's gauges selected by
    its series labels (cluster, namespace, its PodMonitoring's job) and vLLM's running gauge by the engines', each 0
    when it has no series (at zero no engine exists to report one)."""
    return {
        "apiVersion": AUTOSCALING_METRIC_API, "kind": "AutoscalingMetric",
        "metadata": {"name": DEMAND_OBJECT, "namespace": namespace},
        "spec": {"metrics": [{"promql": {"name": name, "query": promql.picker_total(metric, series)}}
                             for name, metric, series in ((HELD_DEMAND, HELD_METRIC, picker_series),
                                                          (RUNNING_DEMAND, RUNNING_METRIC, picker_series),
                                                          (ENGINE_RUNNING_DEMAND, ENGINE_RUNNING_METRIC,
                                                           engine_series))]},
    }


def _external(name: str, per_replica: int) -> dict[str, Any]:
    return {"type": "External", "external": {
        "metric": {"name": f"autoscaling.gke.io|{DEMAND_OBJECT}|{name}"},
        "target": {"type": "AverageValue", "averageValue": str(per_replica)}}}


def hpa_metrics(zero: ZeroPool) -> list[dict[str, Any]]:
    """The held requests (what wakes the pool) and the running ones, as the picker and as the engines count them
    (what keeps it awake while it serves). The HPA takes the largest proposal, so the pool goes to zero only when
    all are zero for `idle_seconds`."""
    return [_external(HELD_DEMAND, zero.held_per_replica), _external(RUNNING_DEMAND, zero.running_per_replica),
            _external(ENGINE_RUNNING_DEMAND, zero.running_per_replica)]


def picker_pod_monitoring(namespace: str, picker_labels: dict[str, str], name: str) -> dict[str, Any]:
    """Managed Prometheus scrapes the picker's own /metrics (a PodMonitoring as autoscaling.pod_monitoring's)."""
    return {
        "apiVersion": "monitoring.googleapis.com/v1", "kind": "PodMonitoring",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": dict(picker_labels)},
                 "endpoints": [{"port": PICKER_METRICS_PORT_NAME, "path": "/metrics",
                                "interval": GKE_SCRAPE_INTERVAL}]},
    }


# The openai SDK waits 600 s for a response and retries a timeout, a 429 or a 5xx twice (openai 3.57.0
# _constants.py DEFAULT_TIMEOUT = httpx2.Timeout(timeout=600, connect=5.0), DEFAULT_MAX_RETRIES = 2).
SDK_TIMEOUT_SECONDS = 600
SDK_MAX_RETRIES = 2


def hpa_metric_text(zero: ZeroPool) -> str:
    return (f"autoscaling.gke.io|{DEMAND_OBJECT}|{HELD_DEMAND} (External: the endpoint picker's held requests, "
            f"sum({HELD_METRIC}) or 0, target {zero.held_per_replica} per replica) and "
            f"autoscaling.gke.io|{DEMAND_OBJECT}|{RUNNING_DEMAND} (its running requests, sum({RUNNING_METRIC}) or 0, "
            f"target {zero.running_per_replica} per replica) and autoscaling.gke.io|{DEMAND_OBJECT}|"
            f"{ENGINE_RUNNING_DEMAND} (vLLM's, sum({ENGINE_RUNNING_METRIC}) or 0, which also counts requests the "
            f"picker sends on without a model), read by GKE's AutoscalingMetric {DEMAND_OBJECT}; floor 0")


def clients_text(zero: ZeroPool) -> str:
    """What an agent sees while the pool wakes, and the client timeouts that let it wait."""
    ttl = zero.request_ttl_seconds
    return (f"a request that finds the pool at zero is held by the endpoint picker for up to {ttl} s; the client "
            f"gets no byte until a replica answers. The openai SDK's default timeout ({SDK_TIMEOUT_SECONDS} s, "
            f"{SDK_MAX_RETRIES} retries) ends a wait before that: create the client with timeout={ttl + 60} or "
            f"more (examples/agent.py: --timeout {ttl + 60} --turn-seconds {ttl + 240}). Past {ttl} s the picker "
            "answers HTTP 503 with x-llm-d-request-dropped-reason: rejected-no-endpoints")


def outputs(zero: ZeroPool) -> dict[str, Any]:
    return {"minReplicas": 0, "idleSecondsBeforeZero": zero.idle_seconds,
            "requestTtlSeconds": zero.request_ttl_seconds, "requestTtl": zero.ttl_text(),
            "coldStartSeconds": zero.cold_start.seconds, "heldRequestLimit": zero.held_limit,
            "clients": clients_text(zero)}
