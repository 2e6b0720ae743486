"""A fake of what stands between the endpoint picker's /metrics and the HPA's replica count, answering as the real
parts do when the picker has no series for a gauge (a fresh picker; an idle flow garbage-collected).

- The picker (llm-d/llm-d-router v0.10.0, 71f4f099): a GaugeVec exports only the children it has
  (pkg/epp/metrics/llm_d_router_metrics.go), so `series` lists what /metrics shows now, nothing for a fresh picker;
  the flow registry deletes an idle flow's queue series (registry.go gcFlows -> DeleteFlowControlFlowSeries).
- Google's custom metrics adapter (GoogleCloudPlatform/k8s-stackdriver, custom-metrics-stackdriver-adapter at
  673c7dd8, v0.16.9): `prometheus.googleapis.com|<metric>|gauge` lists the time series of the last 5 minutes
  (adapter.go makeProviderOrDie(..., 5*time.Minute, ...), query_builder.go createListTimeseriesRequestProject) and
  answers one item per series (response_translator.go GetRespForExternalMetric): none when there is none.
- GKE's AutoscalingMetric: `autoscaling.gke.io|<object>|<metric>` is the value of that object's PromQL. Only the
  one form the stack writes is evaluated, `sum(<gauge>{<label>="<value>",...}) or vector(<n>)`, with PromQL's
  meaning: `sum` of no series is no series, `or` then takes the right side; any other query is refused.
- The HPA (kubernetes pkg/controller/podautoscaler): an External metric with no items is invalid ("no metrics
  returned from external metrics API", metrics/rest_metrics_client.go GetExternalMetric); an AverageValue target
  proposes ceil(total / target) (replica_calculator.go GetExternalPerPodMetricReplicas); the largest valid proposal
  wins, and "If all metrics are invalid or some are invalid and we would scale down", nothing changes
  (horizontal.go computeReplicasForMetrics); the result is held to minReplicas..maxReplicas.
"""

from __future__ import annotations

import math
from typing import Any

import promql_parser

Series = dict[str, list[tuple[dict[str, str], float]]]
"""The picker's /metrics now: gauge name -> (labels, value) of each child it exports."""

ADAPTER_PREFIX = "prometheus.googleapis.com|"
GKE_PREFIX = "autoscaling.gke.io|"


def _select(series: Series, name: str, wanted: dict[str, str]) -> list[float]:
    return [value for labels, value in series.get(name, []) if all(labels.get(k) == v for k, v in wanted.items())]


def evaluate(query: str, series: Series) -> list[float]:
    """The instant vector the one form of query the stack writes yields over series; refuses any other form."""
    expr = promql_parser.parse(query)
    if not (isinstance(expr, promql_parser.BinaryExpr) and str(expr.op) == "or"
            and isinstance(expr.lhs, promql_parser.AggregateExpr) and str(expr.lhs.op) == "sum"
            and isinstance(expr.rhs, promql_parser.Call) and expr.rhs.func.name == "vector"):
        raise ValueError(f"the fake evaluates only sum(<gauge>{{...}}) or vector(<n>), not {query}")
    selector = expr.lhs.expr
    wanted = {m.name: m.value for m in selector.matchers.matchers if str(m.op) == "MatchOp.Equal"}
    if len(wanted) != len(selector.matchers.matchers):
        raise ValueError(f"the fake evaluates only equality matchers: {query}")
    found = _select(series, selector.name, wanted)
    return [sum(found)] if found else [expr.rhs.args[0].val]


def external_metric(name: str, series: Series, objects: list[dict[str, Any]]) -> list[float]:
    """What the external metrics API lists for the HPA's metric name (labels are the cluster's: every series)."""
    if name.startswith(ADAPTER_PREFIX):
        gauge = name.removeprefix(ADAPTER_PREFIX).removesuffix("|gauge")
        return [value for _, value in series.get(gauge, [])]
    if name.startswith(GKE_PREFIX):
        owner, metric = name.removeprefix(GKE_PREFIX).split("|")
        [spec] = [o["spec"] for o in objects if o["kind"] == "AutoscalingMetric" and o["metadata"]["name"] == owner]
        [query] = [m["promql"]["query"] for m in spec["metrics"] if m.get("promql", {}).get("name") == metric]
        return evaluate(query, series)
    raise ValueError(f"no fake answers {name}")


def desired_replicas(hpa: dict[str, Any], current: int, series: Series, objects: list[dict[str, Any]]) -> int:
    """The replicas the HPA asks for from current, reading each External metric through its path."""
    spec = hpa["spec"]
    proposals, invalid = [], 0
    for metric in spec["metrics"]:
        items = external_metric(metric["external"]["metric"]["name"], series, objects)
        if not items:
            invalid += 1
            continue
        target = float(metric["external"]["target"]["averageValue"])
        proposals.append(math.ceil(sum(items) / target))
    wanted = max(proposals, default=0)
    if invalid == len(spec["metrics"]) or (invalid and wanted < current):
        return current
    return min(max(wanted, spec["minReplicas"]), spec["maxReplicas"])
