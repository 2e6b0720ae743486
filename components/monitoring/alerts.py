"""The build log's rules as alert policies: the Monitoring API's AlertPolicy bodies (monitoring.v3 discovery
document, schema AlertPolicy, condition conditionPrometheusQueryLanguage), each threshold from the Scope.

disableMetricValidation: a policy is made at `pulumi up`, before vLLM has written a sample; without it the API
refuses a PromQL condition whose metric has no descriptor yet (cloud.google.com/monitoring/promql/
promql-in-alerting, "Disable the metric-existence check").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from components.monitoring import promql
from components.monitoring.promql import Scope

EVALUATION_INTERVAL = "60s"
NOT_SCRAPED_FOR_SECONDS = 300


@dataclass(frozen=True)
class Rule:
    key: str
    """Names the policy's resource: <wing>-alert-<key>."""
    title: str
    query: str
    for_seconds: int
    severity: str
    why: str


def rules(scope: Scope, *, kv_for_seconds: int, waiting_for_seconds: int, run_end_warning_seconds: int) -> list[Rule]:
    found = [
        Rule("kv", f"{scope.title}: KV cache above {scope.kv_rule:.0%}", promql.kv_above_rule(scope),
             kv_for_seconds, "WARNING",
             f"KV-cache use stayed above {scope.kv_rule:.0%} of the pool: the build log's wall, past which more "
             "clients buy queueing and an 11.7 s time to first token, not throughput. Fewer clients or shorter "
             "contexts" + ("; on gke, more replicas (gke.maxReplicas)." if scope.replicas else ".")),
        Rule("waiting", f"{scope.title}: requests waiting", promql.requests_waiting(scope), waiting_for_seconds,
             "WARNING", "Requests have been waiting in vLLM's queue: the engine is full (see the KV tile)."),
    ]
    if scope.picker_labels is None:
        found.append(Rule(
            "down", f"{scope.title}: endpoint not serving", promql.not_scraped(scope), NOT_SCRAPED_FOR_SECONDS,
            "CRITICAL", "No successful scrape of vLLM's metrics: the server is down, still booting (a cold "
            "start takes ~14 min), or the run has ended. tools.status says which."))
    else:
        # At zero no vLLM is scraped by design: what fails a user is a request the picker turned away.
        found.append(Rule(
            "held-timeout", f"{scope.title}: the gateway turned a request away", promql.held_turned_away(scope), 0,
            "CRITICAL", "The inference gateway's endpoint picker answered a request 503 or 429 instead of serving "
            "it: its time-to-live (the scaleToZero output's requestTtlSeconds) ended while held, or more arrived "
            "than the band holds (heldRequestLimit), or flow control failed it. The pool did not wake in time (no "
            "TPU capacity, a cold compile) or every replica stayed busy. tools.status shows the replicas."))
    ending = promql.run_ending_in_flight(scope, run_end_warning_seconds)
    if ending:
        found.append(Rule("run-end", f"{scope.title}: run ends with requests in flight", ending, 0, "CRITICAL",
                          f"The flex-start run ends within {run_end_warning_seconds // 60} min and requests are "
                          "running: GCP deletes the node at the end. Drain the agents, or `pulumi up` a new run."))
    return found


def policy_body(rule: Rule, channels: list[str], labels: dict[str, str]) -> dict[str, Any]:
    """The AlertPolicy as the Monitoring API takes it."""
    return {
        "displayName": rule.title,
        "combiner": "OR",
        "severity": rule.severity,
        "conditions": [{"displayName": rule.title, "conditionPrometheusQueryLanguage": {
            "query": rule.query, "duration": f"{rule.for_seconds}s", "evaluationInterval": EVALUATION_INTERVAL,
            "disableMetricValidation": True}}],
        "documentation": {"content": rule.why, "mimeType": "text/markdown"},
        "notificationChannels": channels,
        "userLabels": dict(labels),
    }


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def pulumi_args(body: Any) -> Any:
    """The same body with pulumi-gcp's argument names (camelCase -> snake_case keys; label maps kept)."""
    if isinstance(body, dict):
        return {_snake(key): (value if key == "userLabels" else pulumi_args(value)) for key, value in body.items()}
    if isinstance(body, list):
        return [pulumi_args(item) for item in body]
    return body
