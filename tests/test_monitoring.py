"""The operator's dashboard and alerts: their bodies against the Monitoring API's discovery documents, every
query through a real PromQL parser, each threshold from the budget, and what each wing registers."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import promql_parser
import pytest
import yaml

from components import settings as settings_package
from components.gke.autoscaling import pod_monitoring
from components.gke.workload import selector_labels
from components.monitoring import alerts, dashboard, promql
from components.monitoring.resources import epoch_of
from components.settings import Settings
from components.vm import boot_contract, ops_agent
from tests import program as harness
from tests import test_program
from tests.discovery_schema import description_rules, load_document, validate

# Runs of tests/test_program.py that set a monitoring knob beside an access one (disjoint resources): the same
# fixtures, the same requests, so tests/shared_runs.py runs each once a session for both modules.
served_and_mailed = test_program.served_and_mailed
user_key_alerts_off = test_program.user_key_alerts_off


def load(sections: dict, stack: str = "t") -> Settings:
    sections = {**sections, "access": {"sshSourceRanges": ["198.51.100.7/32"], **sections.get("access", {})}}
    return settings_package.load(sections, project="my-proj", stack=stack).settings


def gke_settings() -> Settings:
    sections = {}
    for key, value in harness.gke_config().items():
        if key.startswith("tpu-vllm:") and key != "tpu-vllm:hfToken":
            try:
                sections[key.split(":", 1)[1]] = json.loads(value)
            except json.JSONDecodeError:
                sections[key.split(":", 1)[1]] = value
    return load(sections, stack="gke")

DASHBOARD = "gcp:monitoring/dashboard:Dashboard"
POLICY = "gcp:monitoring/alertPolicy:AlertPolicy"
CHANNEL = "gcp:monitoring/notificationChannel:NotificationChannel"
IAM_MEMBER = "gcp:projects/iAMMember:IAMMember"
QUEUED_RESOURCE = "pulumi-python:dynamic/tpu-vllm:QueuedResource"
RUN_END = 4_070_908_800  # 2099-01-01T00:00:00Z


def vm_scope(settings: Settings | None = None, run_end: int | None = RUN_END) -> promql.Scope:
    settings = settings or load({})
    return promql.Scope(title="tpu-vllm t (vm)", labels={"job": ops_agent.job_name(settings.resource_prefix)},
                        kv=settings.kv_budget(), replicas=False, usd_per_hour=0.6, run_seconds=4 * 3600,
                        run_end_epoch=run_end)


def gke_scope() -> promql.Scope:
    from components.economics.costs import baseline, replica_usd_per_hour
    from components.gke.deployment import monitoring_scope
    cfg = gke_settings()
    model = cfg.tpu.provisioning_model
    return monitoring_scope(cfg.gke, stack=cfg.stack, cluster_name=cfg.gke.cluster_name or cfg.resource_prefix,
                            provisioning_model=model, max_run_duration=cfg.tpu.max_run_duration, kv=cfg.kv_budget(),
                            replica_usd_per_hour=replica_usd_per_hour(cfg, model),
                            baseline_usd_per_hour=baseline(cfg).usd_per_hour)


THRESHOLDS = {"kv_for_seconds": 300, "waiting_for_seconds": 300, "run_end_warning_seconds": 1800}


def all_queries(scope: promql.Scope) -> list[str]:
    return dashboard.queries(dashboard.dashboard(scope)) + [rule.query for rule in alerts.rules(scope, **THRESHOLDS)]


@pytest.mark.parametrize("scope", [vm_scope(), vm_scope(run_end=None), gke_scope()], ids=["vm", "vm-before-run",
                                                                                         "gke"])
def test_the_dashboard_is_a_dashboard_the_monitoring_api_takes(scope):
    body = json.loads(dashboard.dashboard_json(scope))
    assert validate(body, {"$ref": "Dashboard"}, load_document("monitoring.v1")) == []
    tiles = body["mosaicLayout"]["tiles"]
    assert all(tile["xPos"] + tile["width"] <= body["mosaicLayout"]["columns"] for tile in tiles)
    assert len({(tile["xPos"], tile["yPos"]) for tile in tiles}) == len(tiles)  # no tile hides another


def test_the_rules_the_check_reads_from_the_descriptions_are_the_references():
    """What the monitoring.v1 descriptions forbid, found in their own words; a reworded document fails here
    rather than silently checking less."""
    rules = description_rules(load_document("monitoring.v1"))
    assert rules["not_allowed_in"] == {("Threshold", "color", "XyChart"), ("Threshold", "direction", "XyChart"),
                                       ("Threshold", "targetAxis", "Scorecard")}
    assert ("DataSet", "legendTemplate") in rules["interpolation"]
    assert {("Dashboard", "displayName"), ("XyChart", "dataSets"), ("DataSet", "timeSeriesQuery")} <= rules["required"]
    alert_rules = description_rules(load_document("monitoring.v3"))
    assert ("PrometheusQueryLanguageCondition", "query") in alert_rules["required"]


def _kv_chart(body: dict) -> dict:
    return next(tile["widget"]["xyChart"] for tile in body["mosaicLayout"]["tiles"]
                if tile["widget"]["title"].startswith("KV-cache"))


def test_the_check_refuses_what_the_descriptions_forbid():
    document = load_document("monitoring.v1")
    body = dashboard.dashboard(gke_scope())
    _kv_chart(body)["thresholds"][0].update(color="RED", direction="ABOVE")
    _kv_chart(body)["dataSets"][0]["legendTemplate"] = "KV used {{instance}}"
    del body["displayName"]
    errors = validate(body, {"$ref": "Dashboard"}, document)
    assert any(e.endswith("thresholds[0].color: not allowed in a XyChart (The state color for this threshold. "
                          "Color is not allowed in a XyChart.)") for e in errors), errors
    assert any("thresholds[0].direction: not allowed in a XyChart" in e for e in errors), errors
    assert any("legendTemplate: 'KV used {{instance}}' has a placeholder not of the form ${label_name}" in e
               for e in errors), errors
    assert "$.displayName: required field missing" in errors
    assert len(errors) == 4, errors


def test_the_check_lets_through_what_the_descriptions_allow():
    """A threshold's color and direction in a scorecard, and a ${labels.name} legend, are the reference's own use."""
    document = load_document("monitoring.v1")
    scorecard = {"timeSeriesQuery": {"prometheusQuery": "up"},
                 "thresholds": [{"value": 1, "color": "RED", "direction": "ABOVE"}]}
    assert validate(scorecard, {"$ref": "Scorecard"}, document) == []
    scorecard["thresholds"][0]["targetAxis"] = "Y1"
    assert validate(scorecard, {"$ref": "Scorecard"}, document) == [
        "$.thresholds[0].targetAxis: not allowed in a Scorecard (The target axis to use for plotting the threshold. "
        "Target axis is not allowed in a Scorecard.)"]
    data_set = {"timeSeriesQuery": {"prometheusQuery": "up"}, "legendTemplate": "${labels.instance} (${labels.job})"}
    assert validate(data_set, {"$ref": "DataSet"}, document) == []


def test_the_schema_check_would_catch_a_misspelt_field():
    body = dashboard.dashboard(vm_scope())
    body["mosaicLayout"]["tiles"][1]["widget"]["xyChart"]["dataSets"][0]["timeSeriesQuery"]["promQuery"] = "up"
    body["mosaicLayout"]["tiles"][2]["widget"]["xyChart"]["dataSets"][0]["plotType"] = "AREA"
    errors = validate(body, {"$ref": "Dashboard"}, load_document("monitoring.v1"))
    assert any("promQuery: unknown field" in error for error in errors)
    assert any("'AREA' is not one of" in error for error in errors)


@pytest.mark.parametrize("scope", [vm_scope(), gke_scope()], ids=["vm", "gke"])
def test_every_query_parses_as_promql_and_selects_only_this_stacks_series(scope):
    queries = all_queries(scope)
    assert len(queries) >= 12
    for query in queries:
        promql_parser.parse(query)  # raises on a query Cloud Monitoring's PromQL would refuse
        assert promql.selector(scope) in query, query


def test_the_parser_refuses_what_a_slip_would_make():
    with pytest.raises(ValueError):
        promql_parser.parse(promql.quantile(vm_scope(), promql.TTFT, 0.95).removesuffix(")"))


def test_the_metric_names_are_vllms():
    """vLLM 0.33.0's own names, read from vllm/v1/metrics/loggers.py in the vLLM venv scripts/test.sh builds."""
    import subprocess

    from tests.test_vllm_parser import vllm_python
    located = subprocess.run([vllm_python(), "-c", "import importlib.util as u; "
                              "print(u.find_spec('vllm').submodule_search_locations[0])"],
                             capture_output=True, text=True, timeout=120)
    assert located.returncode == 0, located.stderr
    source = (Path(located.stdout.strip()) / "v1" / "metrics" / "loggers.py").read_text()
    for name in (promql.RUNNING, promql.WAITING, promql.KV_USAGE):
        assert f'name="{name}"' in source
    for counter in (promql.GENERATION_TOKENS, promql.PREEMPTIONS):
        assert f'name="{counter.removesuffix("_total")}"' in source  # prometheus_client adds _total
    for histogram in (promql.TTFT, promql.TPOT):
        assert f'name="{histogram.removesuffix("_bucket")}"' in source


# What each collector asks vLLM's /metrics for, as Prometheus's scrape.go acceptHeader builds it from the scrape
# protocols (config.go ScrapeProtocolsHeaders): the Ops Agent's receiver runs Prometheus v3.12.0 (contrib v0.154.0,
# google-built-opentelemetry-collector go.mod at `3dcb506`) with the protocols and `allow-utf-8` escaping its
# generated config gives every job (ops-agent golden metrics-receiver_prometheus otel.yaml, `588c4b9`); Managed
# Service for Prometheus runs Prometheus v2.53.5-gmp (prometheus-engine go.mod and manifests/operator.yaml,
# `2ffde4e`), whose header has no escaping.
COLLECTOR_ACCEPT = {
    "ops agent": "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,"
                 "application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;"
                 "q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
    "managed prometheus": "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;"
                          "version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
}
# vLLM 0.33.0's own /metrics route (vllm/entrypoints/serve/instrumentator/metrics.py attach_router) over its registry,
# holding the metrics the queries read as vllm/v1/metrics/loggers.py declares them (names, kinds, label names).
VLLM_METRICS_ROUTE = """
import json, sys
from fastapi import FastAPI
from prometheus_client import Counter, Gauge, Histogram
from starlette.testclient import TestClient
from vllm.entrypoints.serve.instrumentator.metrics import attach_router
from vllm.v1.metrics.prometheus import get_prometheus_registry
registry = get_prometheus_registry()
labels = ["model_name", "engine"]
for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"):
    Gauge(name, "g", labelnames=labels, registry=registry).labels("m", "0").set(1)
for name in ("vllm:generation_tokens", "vllm:num_preemptions"):
    Counter(name, "c", labelnames=labels, registry=registry).labels("m", "0").inc()
for name in ("vllm:time_to_first_token_seconds", "vllm:request_time_per_output_token_seconds"):
    Histogram(name, "h", labelnames=labels, registry=registry).labels("m", "0").observe(0.1)
app = FastAPI()
attach_router(app)
client = TestClient(app)
answers = {}
for who, accept in json.loads(sys.argv[1]).items():
    answer = client.get("/metrics", headers={"Accept": accept})
    names = {line.split("{")[0].split(" ")[0] for line in answer.text.splitlines() if line and line[0] != "#"}
    answers[who] = [answer.status_code, answer.headers["content-type"], sorted(names)]
print(json.dumps(answers))
"""


def test_both_collectors_get_the_sample_names_the_queries_read_total_included():
    """vLLM's /metrics answers the classic text format whatever the collector asks for (the instrumentator's route
    comes before prometheus_client's negotiating app), so both collectors see `vllm:..._total`; neither renames it
    (components/monitoring/promql.py cites why), so a query that dropped `_total` would match nothing."""
    from tests import vllm_venv
    done = vllm_venv.run(["-c", VLLM_METRICS_ROUTE, json.dumps(COLLECTOR_ACCEPT)], text=True, timeout=300, cwd="/")
    assert done.returncode == 0, done.stderr[-2000:]
    answers = json.loads(done.stdout.splitlines()[-1])
    read = (promql.RUNNING, promql.WAITING, promql.KV_USAGE, promql.GENERATION_TOKENS, promql.PREEMPTIONS,
            promql.TTFT, promql.TPOT)
    for who, (status, content_type, names) in answers.items():
        assert (status, content_type) == (200, "text/plain; version=1.0.0; charset=utf-8"), who
        assert set(read) <= set(names), (who, sorted(set(read) - set(names)))
        assert promql.GENERATION_TOKENS.removesuffix("_total") not in names
    queried = " ".join(all_queries(vm_scope()) + all_queries(gke_scope()))
    assert all(f"{name}{{" in queried for name in read)
    # What keeps the names on the vm: the receiver gets only Prometheus's own config, never trim_metric_suffixes.
    document = yaml.safe_load(ops_agent.config(resource_prefix="p", upstream_port=8000))
    [receiver] = document["metrics"]["receivers"].values()
    assert set(receiver) == {"type", "config"}


def test_the_kv_line_and_alert_are_the_budgets_rule_not_a_typed_number():
    default = vm_scope()
    kv = default.kv
    assert (kv.kv_tokens, kv.load_limit_tokens) == (321_344, 250_648)
    widget = next(tile["widget"] for tile in dashboard.dashboard(default)["mosaicLayout"]["tiles"]
                  if tile["widget"]["title"].startswith("KV-cache"))
    [line] = widget["xyChart"]["thresholds"]
    assert line["value"] == round(kv.load_limit_tokens / kv.kv_tokens, 4) == 0.78
    # A different pool (a bigger context at a smaller cap) moves both with it: whole blocks round the rule.
    other = vm_scope(load({"vllm": {"gpuMemoryUtilization": 0.85, "maxModelLen": 65536}}))
    assert other.kv.kv_tokens != kv.kv_tokens
    rule = round(other.kv.load_limit_tokens / other.kv.kv_tokens, 4)
    [kv_rule] = [r for r in alerts.rules(other, **THRESHOLDS) if r.key == "kv"]
    assert kv_rule.query.endswith(f"> {rule}")
    assert f"{other.kv.load_limit_tokens:,}" in dashboard.widgets(other)[0]["text"]["content"]


def test_the_run_tiles_and_alert_count_down_to_the_run_end():
    scope = vm_scope()
    assert f"clamp_min({RUN_END} - timestamp(" in promql.minutes_left(scope)
    spent = promql.spend_so_far(scope)
    assert f"- ({RUN_END} - 14400), 0), 14400) / 3600 * 0.6" in spent
    [ending] = [r for r in alerts.rules(scope, **THRESHOLDS) if r.key == "run-end"]
    assert ending.query.startswith(f"{RUN_END} - timestamp(sum(") and ending.query.endswith("> 0) < 1800")
    # Before the run has an end (spot, on-demand, gke): no run tiles, no run-end alert.
    for scope in (vm_scope(run_end=None), gke_scope()):
        assert promql.minutes_left(scope) is None and promql.spend_so_far(scope) is None
        assert "run-end" not in {r.key for r in alerts.rules(scope, **THRESHOLDS)}


@pytest.mark.parametrize(("text", "epoch"), [("2099-01-01T00:00:00Z", RUN_END),
                                             ("2099-01-01T00:00:00.123456789Z", RUN_END),
                                             ("2099-01-01T01:00:00+01:00", RUN_END)])
def test_the_run_end_is_read_as_the_tpu_api_writes_it(text, epoch):
    assert epoch_of(text) == epoch


@pytest.mark.parametrize("text", ["", "2099-01-01", "2099-01-01 00:00:00", "(set by GCP)", "4070908800"])
def test_a_run_end_that_is_not_a_time_is_refused_not_guessed(text):
    with pytest.raises(ValueError, match="not an RFC 3339 time"):
        epoch_of(text)


def test_gke_tiles_split_by_replica_and_select_what_the_pod_monitoring_scrapes():
    settings = gke_settings()
    scope = gke_scope()
    monitoring = pod_monitoring(selector_labels(settings.resource_prefix), settings.gke.namespace)
    assert scope.labels == {"job": monitoring["metadata"]["name"], "namespace": monitoring["metadata"]["namespace"],
                            "cluster": settings.resource_prefix}
    assert "sum by (instance) (vllm:num_requests_waiting" in promql.gauge(scope, promql.WAITING)
    legends = [data_set["legendTemplate"] for tile in dashboard.dashboard(scope)["mosaicLayout"]["tiles"]
               for data_set in (tile["widget"].get("xyChart") or {}).get("dataSets", [])]
    assert "KV used ${labels.instance}" in legends  # the label `sum by (instance)` keeps, as the legend names it
    assert not [legend for legend in legends if "{{" in legend]
    assert "* " in promql.burn_rate(scope) and f"+ {scope.baseline_usd_per_hour}" in promql.burn_rate(scope)


@pytest.mark.parametrize("scope", [vm_scope(), gke_scope()], ids=["vm", "gke"])
def test_the_alert_policies_are_policies_the_monitoring_api_takes(scope):
    document = load_document("monitoring.v3")
    for rule in alerts.rules(scope, **THRESHOLDS):
        body = alerts.policy_body(rule, ["projects/p/notificationChannels/1"], {"app": "tpu-vllm"})
        assert validate(body, {"$ref": "AlertPolicy"}, document) == [], rule.key
        condition = body["conditions"][0]["conditionPrometheusQueryLanguage"]
        assert condition["disableMetricValidation"] is True  # made before vLLM's first sample
        args = alerts.pulumi_args(body)
        assert args["conditions"][0]["condition_prometheus_query_language"]["query"] == rule.query
        assert args["user_labels"] == {"app": "tpu-vllm"}


def test_the_ops_agent_scrapes_vllm_on_loopback_under_the_job_the_dashboard_selects():
    settings = load({})
    document = yaml.safe_load(ops_agent.config(resource_prefix=settings.resource_prefix,
                                               upstream_port=settings.vllm.server_port))
    receivers = document["metrics"]["receivers"]
    [(name, receiver)] = receivers.items()
    assert receiver["type"] == "prometheus"
    [job] = receiver["config"]["scrape_configs"]
    assert job["static_configs"] == [{"targets": [f"127.0.0.1:{settings.vllm.server_port}"]}]
    assert {"job": job["job_name"]} == vm_scope(settings).labels
    assert document["metrics"]["service"]["pipelines"][ops_agent.PIPELINE]["receivers"] == [name]
    # What the agent's own validation refuses (ops-agent confgenerator/prometheus.go, validatePrometheus).
    assert set(job) <= {"job_name", "scrape_interval", "metrics_path", "static_configs"}
    assert int(job["scrape_interval"].removesuffix("s")) >= 10


@pytest.fixture(scope="module")
def dev_program():
    return harness.run(harness.dev_config())


def test_the_vm_stack_makes_the_dashboard_the_alerts_and_the_agents_two_grants(dev_program):
    [board] = dev_program.of_type(DASHBOARD)
    body = json.loads(board["inputs"]["dashboardJson"])
    assert validate(body, {"$ref": "Dashboard"}, load_document("monitoring.v1")) == []
    assert any("Run: minutes left" == tile["widget"]["title"] for tile in body["mosaicLayout"]["tiles"])
    policies = {policy["name"]: policy["inputs"] for policy in dev_program.of_type(POLICY)}
    assert set(policies) == {f"vm-monitoring-alert-{key}" for key in ("kv", "waiting", "down", "run-end")}
    for inputs in policies.values():
        promql_parser.parse(inputs["conditions"][0]["conditionPrometheusQueryLanguage"]["query"])
        assert inputs["notificationChannels"] == []  # no channel set: incidents in the console only
    grants = {(member["inputs"]["role"], member["inputs"]["member"]) for member in dev_program.of_type(IAM_MEMBER)}
    assert grants == {(role, "serviceAccount:tpu-vllm-dev-vm@my-proj.iam.gserviceaccount.com")
                      for role in ops_agent.AGENT_ROLES}
    [queued] = dev_program.of_type(QUEUED_RESOURCE)
    metadata = queued["inputs"]["body"]["tpu"]["nodeSpec"][0]["node"]["metadata"]
    assert yaml.safe_load(metadata[boot_contract.OPS_AGENT_CONFIG_ATTRIBUTE])["metrics"]["receivers"]


def test_opting_out_makes_none_of_it(dev_program, user_key_alerts_off):
    config = harness.with_section(harness.dev_config(), "monitoring", enabled=False)
    off = harness.run(config)
    for type_ in (DASHBOARD, POLICY, CHANNEL, IAM_MEMBER):
        assert off.of_type(type_) == [], type_
    [queued] = off.of_type(QUEUED_RESOURCE)
    assert boot_contract.OPS_AGENT_CONFIG_ATTRIBUTE not in queued["inputs"]["body"]["tpu"]["nodeSpec"][0]["node"][
        "metadata"]
    alerts_off = user_key_alerts_off
    assert len(alerts_off.of_type(DASHBOARD)) == 1 and alerts_off.of_type(POLICY) == []


def test_an_email_becomes_the_channel_every_policy_notifies(served_and_mailed):
    program = served_and_mailed
    [channel] = program.of_type(CHANNEL)
    assert channel["inputs"]["type"] == "email"
    assert channel["inputs"]["labels"] == {"email_address": "ops@example.com"}
    names = {json.dumps(policy["inputs"]["notificationChannels"]) for policy in program.of_type(POLICY)}
    assert len(names) == 1 and names != {"[]"}


def test_the_gke_stack_makes_a_per_replica_dashboard_and_three_alerts(gke_program):
    [board] = gke_program.of_type(DASHBOARD)
    body = json.loads(board["inputs"]["dashboardJson"])
    assert validate(body, {"$ref": "Dashboard"}, load_document("monitoring.v1")) == []
    for query in dashboard.queries(body):
        promql_parser.parse(query)
    assert {policy["name"] for policy in gke_program.of_type(POLICY)} == {
        f"gke-monitoring-alert-{key}" for key in ("kv", "waiting", "down")}
    # The pods' identity gets no writer role: Managed Prometheus's collectors write with the nodes' identity.
    assert not [m for m in gke_program.of_type(IAM_MEMBER) if "metricWriter" in m["inputs"]["role"]]


@pytest.mark.parametrize(("values", "says"), [
    ({"notificationEmail": "ops@example.com, boss@example.com"}, "not one email address"),
    ({"notificationEmail": "Ops <ops@example.com>"}, "not one email address"),
    ({"notificationChannel": "notificationChannels/123"}, "not a notification channel's name"),
    ({"runEndWarning": "half an hour"}, "as a duration"),
])
def test_bad_monitoring_settings_are_refused_naming_the_key(values, says):
    with pytest.raises(settings_package.SettingsError) as raised:
        load({"monitoring": values})
    rendered = raised.value.render()
    assert says in rendered and f"monitoring.{next(iter(values))}" in rendered


def test_the_channel_name_and_a_plain_address_are_accepted():
    # One at a time: both at once is an error (tests/test_settings_that_say_nothing.py).
    channel = load({"monitoring": {"notificationChannel": "projects/p-1/notificationChannels/123"}})
    assert channel.monitoring.notification_channel == "projects/p-1/notificationChannels/123"
    settings = load({"monitoring": {"notificationEmail": " ops@example.com "}})
    assert settings.monitoring.notification_email == "ops@example.com"
    assert dataclasses.is_dataclass(vm_scope(settings))
