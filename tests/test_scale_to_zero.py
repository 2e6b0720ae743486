"""gke.minReplicas: 0 behind the inference gateway: the settings' refusals, the version floor, the picker's flow
control and the HPA at zero in the plan, and a request held through a scale-up on 127.0.0.1."""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from components import settings
from components.basis import boot
from components.gke import cluster, inference_pool, network_policy, picker_config, scale_to_zero
from components.gke.autoscaling import ADAPTER_NAME
from components.settings.checks.scale_to_zero import minor_at_least
from dev.fake_openai_server import FakeOpenAIServer, FakeTiming
from tests import autoscaler_fake
from tests import program as harness
from tests.flow_control_fake import (
    DROPPED_REASON_HEADER,
    FULL_AT_ZERO_BODY,
    SATURATED_BODY,
    TTL_AT_ZERO_BODY,
    FlowControlFake,
    wait_until,
)
from tests.k8s_schema import kubernetes_objects, validation_errors
from tests.test_gke_gateway import loader_errors
from tests.test_gke_settings import gke_raw, problems_of

ROOT = Path(__file__).resolve().parents[1]
KEY = "CANARYzeroKEY0123456789abcdef"


def with_gke(**values) -> dict:
    raw = gke_raw()
    return {**raw, "gke": {**raw["gke"], **values}}


def test_zero_without_the_gateway_is_refused_naming_it():
    [problem] = problems_of(with_gke(minReplicas=0))
    assert problem.startswith("tpu-vllm:gke.minReplicas = 0") and "set gke.inferenceGateway to true" in problem


def test_zero_with_the_gateway_loads():
    loaded = settings.load(with_gke(minReplicas=0, inferenceGateway=True), "my-proj", "gke")
    assert loaded.settings.gke.min_replicas == 0


@pytest.mark.parametrize(("pin", "refused"), [("1.36", True), ("1.36.4-gke.1200", True), ("1.37", False),
                                              ("1.38.1-gke.5", False)])
def test_a_pinned_version_before_1_37_is_refused_at_zero(pin, refused):
    raw = with_gke(minReplicas=0, inferenceGateway=True, minMasterVersion=pin)
    if refused:
        [problem] = problems_of(raw)
        assert problem.startswith("tpu-vllm:gke.minMasterVersion = ") and pin in problem and "pin 1.37" in problem
    else:
        settings.load(raw, "my-proj", "gke")


@pytest.mark.parametrize(("idle", "refused"), [("30s", True), ("2h", True), ("1m", False), ("1h", False)])
def test_the_idle_time_is_an_hpa_window_the_api_server_takes(idle, refused):
    raw = with_gke(minReplicas=0, inferenceGateway=True, scaleToZeroAfter=idle)
    if refused:
        [problem] = problems_of(raw)
        assert problem.startswith("tpu-vllm:gke.scaleToZeroAfter = ") and idle in problem and "use 1m to 1h" in problem
    else:
        settings.load(raw, "my-proj", "gke")


def test_the_idle_time_is_only_warned_about_where_the_pool_never_reaches_zero():
    loaded = settings.load(with_gke(minReplicas=2, scaleToZeroAfter="20m"), "my-proj", "gke")
    assert any(w.startswith("tpu-vllm:gke.scaleToZeroAfter = ") and "read only with gke.minReplicas: 0" in w
               for w in loaded.warnings)
    assert not any("scaleToZeroAfter" in w for w in settings.load(with_gke(minReplicas=2), "my-proj", "gke").warnings)


@pytest.mark.parametrize(("version", "newer"), [("1.37", True), ("1.37.0-gke.1", True), ("latest", True),
                                                ("1.36.9-gke.99", False), ("1.4", False), ("1.x", None)])
def test_the_minor_floor_reads_gke_versions(version, newer):
    assert minor_at_least(version) is newer


def test_a_channel_default_before_1_37_stops_the_preview_only_at_zero():
    problem = cluster.check_channel_version("REGULAR", "1.36.3-gke.1000", gateway=True, scale_to_zero=True)
    assert problem and "older than 1.37" in problem and "gke.minMasterVersion to 1.37" in problem
    assert cluster.check_channel_version("REGULAR", "1.36.3-gke.1000", gateway=True) is None
    assert cluster.check_channel_version("RAPID", "1.37.1-gke.200", gateway=True, scale_to_zero=True) is None


@functools.cache
def zero_program():
    config = harness.with_section(harness.gke_config(), "gke", inferenceGateway=True, minReplicas=0,
                                  minMasterVersion="1.37")
    return harness.run(config, stack="gke")


def objects() -> list[dict]:
    return kubernetes_objects(zero_program().registrations)


def one(kind: str, name: str | None = None) -> dict:
    [found] = [o for o in objects() if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    return found


def test_the_zero_plan_is_valid_against_the_upstream_schemas():
    for manifest in objects():
        assert validation_errors(manifest) == [], manifest["kind"]


def test_the_hpa_has_floor_zero_and_reads_the_pickers_own_gauges():
    spec = one("HorizontalPodAutoscaler")["spec"]
    assert spec["minReplicas"] == 0
    names = [m["external"]["metric"]["name"] for m in spec["metrics"]]
    assert names == ["autoscaling.gke.io|picker-demand|held-requests",
                     "autoscaling.gke.io|picker-demand|running-requests",
                     "autoscaling.gke.io|picker-demand|engine-running-requests"]
    assert all(m["type"] == "External" for m in spec["metrics"])  # no Pods metric: none exists at zero
    assert spec["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 900  # gke.scaleToZeroAfter's 15m
    queries = [m["promql"]["query"] for m in one("AutoscalingMetric", "picker-demand")["spec"]["metrics"]]
    assert all(q.endswith(" or vector(0)") for q in queries)
    assert all('job="vllm-pool-epp"' in q for q in queries[:2]) and 'job="vllm"' in queries[2]
    assert "llm_d_epp_flow_control_queue_size" in queries[0] and "llm_d_epp_request_running" in queries[1]
    assert "vllm:num_requests_running" in queries[2]
    # At zero nothing reads Google's adapter, and its external.metrics.k8s.io APIService would answer External too.
    assert not [o for o in objects() if o["kind"] == "APIService" or o["metadata"].get("name") == ADAPTER_NAME]


def picker_series(held: float | None = None, running: float | None = None,
                  engine_running: float | None = None) -> autoscaler_fake.Series:
    """The picker's /metrics as Managed Prometheus stores it (its labels and the target's), and the one engine's
    running gauge; None: no child (no engine: none)."""
    target = {"cluster": zero_program().output("clusterName")["value"], "namespace": "tpu-vllm",
              "job": inference_pool.PICKER_NAME, "instance": "vllm-pool-epp-0:metrics"}
    flow = {**target, "fairness_id": "default-flow", "priority": "0", "inference_pool": "vllm-pool",
            "model_name": "google/gemma-4-E2B-it", "target_model_name": "google/gemma-4-E2B-it"}
    series: autoscaler_fake.Series = {}
    if held is not None:
        series[scale_to_zero.HELD_METRIC] = [(flow, held)]
    if running is not None:
        series[scale_to_zero.RUNNING_METRIC] = [(flow, running)]
    if engine_running is not None:
        engine = {**target, "job": "vllm", "instance": "vllm-0:metrics", "engine": "0",
                  "model_name": "google/gemma-4-E2B-it"}
        series[scale_to_zero.ENGINE_RUNNING_METRIC] = [(engine, engine_running)]
    return series


def zero_hpa() -> dict:
    return one("HorizontalPodAutoscaler")


@pytest.mark.parametrize(("why", "series"), [
    ("a fresh picker exports no child of either gauge", picker_series()),
    ("the flow registry deleted the idle flow's queue series", picker_series(running=0)),
    ("both at zero before the garbage collection", picker_series(held=0, running=0)),
])
def test_an_idle_pool_reaches_zero_whatever_series_the_picker_shows(why, series):
    assert autoscaler_fake.desired_replicas(zero_hpa(), 1, series, objects()) == 0, why


def test_a_held_request_wakes_the_pool_and_running_ones_keep_it_awake():
    assert autoscaler_fake.desired_replicas(zero_hpa(), 0, picker_series(held=1), objects()) == 1
    assert autoscaler_fake.desired_replicas(zero_hpa(), 0, picker_series(held=5, running=0), objects()) == 1
    busy = picker_series(held=0, running=300)  # 300 running over 256 per replica
    assert autoscaler_fake.desired_replicas(zero_hpa(), 1, busy, objects()) == 2


def test_a_request_the_picker_counts_no_model_for_keeps_the_pool_awake():
    # llm_d_epp_request_running counts only requests with a model (metrics.go), and the passthrough parser sets
    # none: a long /v1/audio request shows nothing running at the picker, only at the engine.
    passthrough = picker_series(engine_running=1)
    assert autoscaler_fake.desired_replicas(zero_hpa(), 1, passthrough, objects()) == 1
    assert autoscaler_fake.desired_replicas(zero_hpa(), 1, picker_series(engine_running=0), objects()) == 0


def test_the_adapters_gauges_would_keep_the_last_replica_forever():
    """The fake answers as the adapter and the HPA do: with the picker's gauges read through Google's adapter (the
    first landing), a series gone is an invalid metric and the HPA never scales down from one."""
    hpa = zero_hpa()
    through_adapter = {**hpa, "spec": {**hpa["spec"], "metrics": [
        {"type": "External", "external": {"metric": {"name": f"prometheus.googleapis.com|{gauge}|gauge"},
                                          "target": {"type": "AverageValue", "averageValue": "1"}}}
        for gauge in (scale_to_zero.HELD_METRIC, scale_to_zero.RUNNING_METRIC)]}}
    assert autoscaler_fake.desired_replicas(through_adapter, 1, picker_series(), objects()) == 1
    assert autoscaler_fake.desired_replicas(through_adapter, 1, picker_series(running=0), objects()) == 1
    assert autoscaler_fake.desired_replicas(through_adapter, 0, picker_series(held=1), objects()) == 1


def test_the_fake_evaluates_only_the_query_the_stack_writes():
    with pytest.raises(ValueError, match="only sum"):
        autoscaler_fake.evaluate("max(llm_d_epp_request_running) or vector(0)", {})
    assert autoscaler_fake.evaluate('sum(x{a="b"}) or vector(0)', {"x": [({"a": "c"}, 4.0)]}) == [0.0]
    assert autoscaler_fake.evaluate('sum(x{a="b"}) or vector(0)', {"x": [({"a": "b"}, 4.0)] * 2}) == [8.0]


def test_the_picker_holds_requests_longer_than_the_stated_cold_start():
    import yaml

    config = yaml.safe_load(one("ConfigMap", inference_pool.PICKER_NAME)["data"][picker_config.FILE_NAME])
    assert loader_errors(config) == []
    assert config["featureGates"] == ["flowControl"]
    ttl = int(config["flowControl"]["defaultRequestTTL"].removesuffix("s"))
    cold = scale_to_zero.ColdStart()
    assert ttl > cold.seconds == cold.detection_seconds + cold.node_seconds + boot.WARM_BOOT_SECONDS
    assert config["flowControl"]["defaultPriorityBand"] == {"priority": 0, "maxRequests": str(4 * 256)}
    outputs = zero_program().output("scaleToZero")["value"]
    assert outputs["requestTtlSeconds"] == ttl and "measured" in outputs["requestTtl"]
    assert "computed" in outputs["requestTtl"] and "timeout=" in outputs["clients"]


def test_only_the_collectors_reach_the_pickers_metrics_and_only_at_zero():
    container = one("Deployment", inference_pool.PICKER_NAME)["spec"]["template"]["spec"]["containers"][0]
    assert "--metrics-endpoint-auth=false" in container["args"]
    rules = one("NetworkPolicy", network_policy.PICKER_POLICY_NAME)["spec"]["ingress"]
    [collectors] = [r for r in rules if r["ports"] == [{"protocol": "TCP", "port": 9090}]]
    assert collectors["from"][0]["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "gmp-system"}
    assert one("PodMonitoring", inference_pool.PICKER_NAME)["spec"]["endpoints"][0]["port"] == "metrics"
    at_one = harness.run(harness.with_section(harness.gke_config(), "gke", inferenceGateway=True), stack="gke")
    policy = [o for o in kubernetes_objects(at_one.registrations)
              if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == network_policy.PICKER_POLICY_NAME][0]
    assert len(policy["spec"]["ingress"]) == 1
    assert "featureGates" not in picker_config.picker_config()


@pytest.fixture
def replica():
    started = FakeOpenAIServer(FakeTiming(ttft=0, tpot=0)).start_in_thread()
    yield started
    started.stop()


def test_a_request_at_zero_is_held_until_a_replica_is_ready_then_served(replica):
    import openai

    picker = FlowControlFake(replica.url, ttl_seconds=30, ready_after=None).start()
    try:
        client = openai.OpenAI(base_url=picker.url, api_key=KEY, max_retries=0, timeout=30)
        answers: list[str] = []
        asking = threading.Thread(target=lambda: answers.append(client.chat.completions.create(
            model="google/gemma-4-E2B-it", messages=[{"role": "user", "content": "hi"}],
            max_completion_tokens=8).choices[0].message.content or ""))
        asking.start()
        assert wait_until(lambda: picker.held == 1)  # held, not refused, while the pool is at zero
        assert not answers
        picker.ready.set()  # the replica the HPA asked for is ready
        asking.join(30)
        assert answers and answers[0]
    finally:
        picker.stop()


def test_past_the_ttl_the_agent_says_the_pickers_error_in_one_line(replica):
    picker = FlowControlFake(replica.url, ttl_seconds=0.2, ready_after=None).start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
        env.update({"OPENAI_BASE_URL": picker.url, "OPENAI_API_KEY": KEY})
        done = subprocess.run([sys.executable, "examples/agent.py", "--retries", "0"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
    finally:
        picker.stop()
    assert done.returncode == 1 and "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("agent: the server answered HTTP 503: ")
    assert TTL_AT_ZERO_BODY in line and "no replica was ready: the gateway held it" in line
    assert KEY not in done.stdout + done.stderr


def _post(url: str) -> tuple[int, str, str] | None:
    """POST to the fake: None when served, else the refusal's status, dropped reason and body."""
    import urllib.error
    import urllib.request

    try:
        urllib.request.urlopen(urllib.request.Request(f"{url}/chat/completions", data=b"{}", method="POST"), timeout=30)
    except urllib.error.HTTPError as error:
        return error.code, error.headers[DROPPED_REASON_HEADER], error.read().decode()
    return None


def test_a_full_band_at_zero_is_503_no_endpoints_and_429_saturated_once_a_replica_serves(replica):
    """processor.go's capacity check: RejectedNoEndpoints while the pool is empty, RejectedCapacity otherwise."""
    picker = FlowControlFake(replica.url, ttl_seconds=30, ready_after=None, max_requests=1).start()
    try:
        held = threading.Thread(target=lambda: _post(picker.url))
        held.start()
        assert wait_until(lambda: picker.held == 1)
        assert _post(picker.url) == (503, "rejected-no-endpoints", FULL_AT_ZERO_BODY)
        picker.ready.set()
        held.join(30)
    finally:
        picker.stop()
    busy = FlowControlFake(replica.url, ttl_seconds=30, ready_after=0, max_requests=0).start()
    try:
        assert wait_until(busy.ready.is_set)
        assert _post(busy.url) == (429, "rejected-saturated", SATURATED_BODY)
    finally:
        busy.stop()


def test_the_fakes_words_are_the_pickers():
    """The fake's body and header are the strings llm-d-router v0.10.0 builds (tests/flow_control_fake.py)."""
    assert DROPPED_REASON_HEADER == "x-llm-d-request-dropped-reason"
    from examples import agent

    assert agent.DROPPED_REASON_HEADER == DROPPED_REASON_HEADER
    assert set(agent.DROPPED_REASONS) == {"rejected-no-endpoints", "rejected-ttl-expired", "rejected-saturated"}
    # Error.Error's "inference error: %s - %s" over translateFlowControlOutcome's Msg and types/errors.go's texts.
    rejected, evicted = "request rejected pre-queue", "request evicted from queue"
    assert SATURATED_BODY == f"inference error: ResourceExhausted - {rejected}: queue at capacity"
    assert FULL_AT_ZERO_BODY == ("inference error: ServiceUnavailable - no endpoints available: "
                                 f"{rejected}: no endpoints available")
    assert TTL_AT_ZERO_BODY == ("inference error: ServiceUnavailable - request timed out in queue and no endpoints "
                                f"are available: {evicted}: request TTL expired")


def test_the_plan_prices_the_pool_at_zero_beside_one_replica_and_a_working_day():
    from components.economics.costs import total_usd_per_hour, zero_day

    loaded = settings.load(with_gke(minReplicas=0, inferenceGateway=True, scaleToZeroAfter="30m"), "my-proj", "gke")
    day = zero_day(loaded.settings)
    at_zero, at_one = total_usd_per_hour(loaded.settings, 0), total_usd_per_hour(loaded.settings, 1)
    assert 0 < day["perHourAtZero"] == round(at_zero, 4) < day["perHourAtOneReplica"] == round(at_one, 4)
    assert day["servingHoursPerDay"] == 10.5  # load.activeHoursPerDay's 10 + the 30m idle tail
    assert day["perDay"] == round(10.5 * at_one + 13.5 * at_zero, 2) < day["perDayAtOneReplicaAllDay"]
    assert "computed" in day["formula"]
    all_day = settings.load({**with_gke(minReplicas=0, inferenceGateway=True), "load": {"activeHoursPerDay": 24}},
                            "my-proj", "gke")
    assert zero_day(all_day.settings)["savedPerMonth"] == 0  # nothing idles, nothing is saved


def test_at_zero_the_alert_is_a_request_turned_away_not_a_pool_with_no_replica():
    from components.monitoring import dashboard
    from tests.test_monitoring import load_document, validate

    program = zero_program()
    names = {p["name"] for p in program.of_type("gcp:monitoring/alertPolicy:AlertPolicy")}
    assert names == {f"gke-monitoring-alert-{key}" for key in ("kv", "waiting", "held-timeout")}
    [held] = [p for p in program.of_type("gcp:monitoring/alertPolicy:AlertPolicy") if p["name"].endswith("timeout")]
    query = held["inputs"]["conditions"][0]["conditionPrometheusQueryLanguage"]["query"]
    assert 'job="vllm-pool-epp"' in query
    # Every QueueOutcome.String (flowcontrol/types/outcomes.go) that answers 503 or 429, none that serves or that
    # the client ended.
    [outcomes] = re.findall(r'outcome=~"([^"]*)"', query)
    # Not RejectedOther/EvictedOther: a client that hung up before its request queued is filed there too.
    assert set(outcomes.split("|")) == {"EvictedTTL", "RejectedNoEndpoints", "RejectedCapacity"}
    assert "turned a request away" in held["inputs"]["displayName"]
    [board] = program.of_type("gcp:monitoring/dashboard:Dashboard")
    import json

    import promql_parser

    body = json.loads(board["inputs"]["dashboardJson"])
    assert validate(body, {"$ref": "Dashboard"}, load_document("monitoring.v1")) == []
    queries = dashboard.queries(body)
    for each in queries:
        promql_parser.parse(each)
    assert any("llm_d_epp_flow_control_queue_size" in q for q in queries)
