"""The operator's dashboard as the Monitoring API's Dashboard body (monitoring.v1 discovery document, schema
Dashboard: mosaicLayout of tiles, each an xyChart of PromQL dataSets, a scorecard or markdown text).

The same document's descriptions (the reference pages are rendered from them) set two rules this body keeps
(google-api-python-client 2.202.0, monitoring.v1 rev 20260903): a Threshold in an xyChart carries no `color` and no
`direction` ("Color is not allowed in a XyChart", "Direction is not allowed in a XyChart"), and a DataSet's
`legendTemplate` interpolates labels as `${...}` ("interpolations of the form ${label_name}"); Google's PromQL
dashboards name a query's result label `${labels.<name>}` (GoogleCloudPlatform/monitoring-dashboard-samples
dashboards/kuberay/ray-overview.json, `25d8c3e`).
"""

from __future__ import annotations

import json
from typing import Any

from components.monitoring import promql
from components.monitoring.promql import Scope

COLUMNS = 48
HALF = COLUMNS // 2
HEIGHT = 16


def _chart(title: str, queries: list[tuple[str, str]], *, y_label: str,
           thresholds: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    chart: dict[str, Any] = {
        "dataSets": [{"timeSeriesQuery": {"prometheusQuery": query}, "plotType": "LINE",
                      "legendTemplate": legend, "targetAxis": "Y1"} for legend, query in queries],
        "yAxis": {"label": y_label, "scale": "LINEAR"},
    }
    if thresholds:
        chart["thresholds"] = thresholds
    return {"title": title, "xyChart": chart}


# The scraped replica (`sum by (instance)` keeps the label) as the legend interpolates it.
INSTANCE_PLACEHOLDER = "${labels.instance}"


def _replica_legend(scope: Scope, what: str) -> str:
    return f"{what} {INSTANCE_PLACEHOLDER}" if scope.replicas else what


def _summary(scope: Scope) -> dict[str, Any]:
    lines = [f"**{scope.title}**", ""]
    if scope.kv is not None:
        lines.append(f"- Rule of thumb (the build log): keep clients x context under "
                     f"{scope.kv.load_limit_tokens:,} tokens, {scope.kv_rule:.0%} of the {scope.kv.kv_tokens:,}-"
                     "token KV pool per replica; past it more clients buy queueing, not throughput.")
    lines.extend(f"- {note}" for note in scope.notes)
    return {"title": "This deployment", "text": {"content": "\n".join(lines), "format": "MARKDOWN"}}


def widgets(scope: Scope) -> list[dict[str, Any]]:
    """Every tile's widget, in reading order."""
    rule = round(scope.kv_rule, 4)
    kv_line = {"value": rule, "label": f"rule of thumb: {scope.kv_rule:.0%} of the KV pool", "targetAxis": "Y1"}
    items = [
        _summary(scope),
        _chart("Output tokens/s", [(_replica_legend(scope, "tokens/s"), promql.output_tokens_per_second(scope))],
               y_label="tokens/s"),
        _chart("Time to first token (s)", [(f"p{int(q * 100)}", promql.quantile(scope, promql.TTFT, q))
                                          for q in promql.QUANTILES], y_label="seconds"),
        _chart("Time per output token (s)", [(f"p{int(q * 100)}", promql.quantile(scope, promql.TPOT, q))
                                            for q in promql.QUANTILES], y_label="seconds"),
        _chart("Requests running and waiting",
               [(_replica_legend(scope, "running"), promql.gauge(scope, promql.RUNNING)),
                (_replica_legend(scope, "waiting"), promql.gauge(scope, promql.WAITING))], y_label="requests"),
        _chart("KV-cache usage (1 = the whole pool)", [(_replica_legend(scope, "KV used"), promql.kv_usage(scope))],
               y_label="fraction", thresholds=[kv_line]),
        _chart("Preemptions (per 5 min)", [(_replica_legend(scope, "preempted"), promql.preemptions(scope))],
               y_label="requests"),
    ]
    left, spent = promql.minutes_left(scope), promql.spend_so_far(scope)
    if left:
        items.append(_chart("Run: minutes left", [("minutes left", left)], y_label="minutes"))
    if left and spent:
        items.append(_chart("Run: USD spent so far (TPU)", [("USD", spent)], y_label="USD"))
    if scope.replicas and (burn := promql.burn_rate(scope)) is not None:
        items.append(_chart("USD per hour now (replicas scraped x price + baseline)",
                            [("USD/hour", burn)], y_label="USD/hour"))
    if scope.picker_labels is not None:
        items.append(_chart("Pool at zero: replicas serving and requests the gateway holds",
                            [("replicas", promql.replicas_scraped(scope)), ("held", promql.held_requests(scope))],
                            y_label="count"))
    return items


def dashboard(scope: Scope) -> dict[str, Any]:
    """The Dashboard body: tiles two to a row."""
    tiles = [{"xPos": (index % 2) * HALF, "yPos": (index // 2) * HEIGHT, "width": HALF, "height": HEIGHT,
              "widget": widget} for index, widget in enumerate(widgets(scope))]
    return {"displayName": scope.title, "mosaicLayout": {"columns": COLUMNS, "tiles": tiles}}


def dashboard_json(scope: Scope) -> str:
    return json.dumps(dashboard(scope), sort_keys=True)


def queries(body: dict[str, Any]) -> list[str]:
    """Every PromQL query a dashboard body holds (what the tests parse)."""
    return [data_set["timeSeriesQuery"]["prometheusQuery"] for tile in body["mosaicLayout"]["tiles"]
            for data_set in (tile["widget"].get("xyChart") or {}).get("dataSets", [])]
