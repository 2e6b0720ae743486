"""The GKE CrossGuard rules on the gke stack's resources (must pass) and on violating variants (must report),
directly and through the pack's real entry point."""

from __future__ import annotations

import copy
import json
import os
import subprocess
from pathlib import Path

import pytest

from policy import gke_rules, rules
from tools.mocks import unwrap

ROOT = Path(__file__).resolve().parent.parent
POOL = gke_rules.NODE_POOL_TYPE
SERVICE = gke_rules.SERVICE_TYPE
STATEFULSET = "kubernetes:apps/v1:StatefulSet"


@pytest.fixture(scope="module")
def gke_resources(gke_program):
    program = gke_program
    assert program.problems is None
    return [(r["type"], unwrap(r["inputs"])) for r in program.registrations if r["inputs"] and r["custom"]]


def tpu_pool(resources):
    return copy.deepcopy(next(p for t, p in resources if t == POOL and p["name"] == "tpu-v5e"))


def load_balancer(resources):
    return copy.deepcopy(next(p for t, p in resources if t == SERVICE and p["spec"].get("type") == "LoadBalancer"))


def statefulset(resources):
    return copy.deepcopy(next(p for t, p in resources if t == STATEFULSET))


def every_violation(resources, config=None):
    checks = [check for check, _ in [*rules.RESOURCE_RULES.values(), *gke_rules.RESOURCE_RULES.values()]]
    found = [message for type_, props in resources for check in checks for message in check(type_, props, config)]
    return found + [message for check, _ in rules.STACK_RULES.values() for message in check(resources, config)]


def test_the_gke_stack_passes_every_policy(gke_resources):
    assert every_violation(gke_resources) == []


def test_a_flex_start_pool_without_a_run_duration_is_reported(gke_resources):
    pool = tpu_pool(gke_resources)
    del pool["nodeConfig"]["maxRunDuration"]
    [message] = gke_rules.gke_tpu_pool_run_ends(POOL, pool)
    assert "no nodeConfig.maxRunDuration" in message and "tpu-vllm:tpu.maxRunDuration" in message
    pool["nodeConfig"]["maxRunDuration"] = "691200s"
    assert "over 7 days" in gke_rules.gke_tpu_pool_run_ends(POOL, pool)[0]
    pool["nodeConfig"]["maxRunDuration"] = "604800s"
    assert gke_rules.gke_tpu_pool_run_ends(POOL, pool) == []


@pytest.mark.parametrize("model", ["spot", "on-demand"])
def test_spot_or_on_demand_tpu_pools_need_an_explicit_opt_in(gke_resources, model):
    pool = tpu_pool(gke_resources)
    node = pool["nodeConfig"]
    for key in ("flexStart", "maxRunDuration", "reservationAffinity"):
        node.pop(key)
    if model == "spot":
        node["spot"] = True
    [message] = gke_rules.gke_tpu_pool_run_ends(POOL, pool)
    assert f"is {model}" in message and "allowUnboundedBilling" in message
    assert gke_rules.gke_tpu_pool_run_ends(POOL, pool, {"allowUnboundedBilling": True}) == []
    node["resourceLabels"]["tpu-vllm-unbounded-billing"] = "opted-in"  # what the stack writes on opt-in
    assert gke_rules.gke_tpu_pool_run_ends(POOL, pool) == []
    assert gke_rules.gke_tpu_pool_run_ends(POOL, pool, {"honorStackOptIns": False})


def test_cpu_pools_are_not_tpu_pools(gke_resources):
    system = copy.deepcopy(next(p for t, p in gke_resources if t == POOL and p["name"] == "system"))
    assert gke_rules.gke_tpu_pool_run_ends(POOL, system) == []
    system["autoscaling"] = {"totalMaxNodeCount": 100}
    assert gke_rules.gke_tpu_chips_capped(POOL, system) == []


@pytest.mark.parametrize(("machine", "autoscaling", "zones", "chips"), [
    ("ct5lp-hightpu-1t", {"totalMaxNodeCount": 9}, 1, 9),
    ("ct5lp-hightpu-1t", {"maxNodeCount": 3}, 3, 9),
    ("ct5lp-hightpu-4t", {"totalMaxNodeCount": 3}, 1, 12),
    ("ct6e-standard-8t", None, 1, 16),
])
def test_a_tpu_pool_past_the_chip_cap_is_reported(gke_resources, machine, autoscaling, zones, chips):
    pool = tpu_pool(gke_resources)
    pool["nodeConfig"]["machineType"] = machine
    pool["nodeLocations"] = [f"us-west4-{z}" for z in "abc"[:zones]]
    if autoscaling is None:
        pool.pop("autoscaling")
        pool["nodeCount"] = 2
    else:
        pool["autoscaling"] = autoscaling
    [message] = gke_rules.gke_tpu_chips_capped(POOL, pool)
    assert f"reach {chips} chips" in message and "cap of 8" in message
    assert gke_rules.gke_tpu_chips_capped(POOL, pool, {"maxTpuChips": chips}) == []


def test_the_stacks_pool_at_the_cap_passes(gke_resources):
    pool = tpu_pool(gke_resources)
    pool["autoscaling"]["totalMaxNodeCount"] = 8
    assert gke_rules.gke_tpu_chips_capped(POOL, pool) == []


def test_an_external_load_balancer_is_reported_unless_allowed(gke_resources):
    service = load_balancer(gke_resources)
    service["metadata"]["annotations"] = {}
    [message] = gke_rules.no_external_load_balancer(SERVICE, service)
    assert "external load balancer" in message and "networking.gke.io/load-balancer-type: Internal" in message
    assert gke_rules.no_external_load_balancer(SERVICE, service, {"allowExternalLoadBalancer": True}) == []
    service["metadata"]["annotations"] = {"cloud.google.com/load-balancer-type": "Internal"}  # the older spelling
    assert gke_rules.no_external_load_balancer(SERVICE, service) == []
    service["metadata"]["annotations"] = {"tpu-vllm/external-load-balancer": "opted-in by tpu-vllm:gke..."}
    assert gke_rules.no_external_load_balancer(SERVICE, service) == []
    assert gke_rules.no_external_load_balancer(SERVICE, service, {"honorStackOptIns": False})
    cluster_ip = {"metadata": {"name": "x"}, "spec": {"type": "ClusterIP"}}
    assert gke_rules.no_external_load_balancer(SERVICE, cluster_ip) == []


def test_an_external_ingress_is_reported():
    ingress = {"metadata": {"name": "web"}, "spec": {"rules": []}}
    kind = "kubernetes:networking.k8s.io/v1:Ingress"
    assert "Ingress web" in gke_rules.no_external_load_balancer(kind, ingress)[0]
    ingress["spec"]["ingressClassName"] = "gce-internal"
    assert gke_rules.no_external_load_balancer(kind, ingress) == []


@pytest.mark.parametrize(("env", "what"), [
    ({"name": "HF_TOKEN", "value": "hf_abcdefghijklmnopqrstuvwxyzABCDEF1234"}, "a Hugging Face token"),
    ({"name": "API_KEY", "value": "short"}, "secret-named variable"),
    ({"name": "vllm_api_key", "value": "x"}, "secret-named variable"),
    ({"name": "EXTRA", "value": "Zx81kQ2mPq7vRt5sLw9yBn3cHd6fGj4aKe0u"}, "a long random string"),
    ({"name": "KEYFILE_CONTENT", "value": "-----BEGIN OPENSSH PRIVATE KEY-----\nabc"}, "a private key"),
])
def test_a_literal_secret_env_value_is_reported(gke_resources, env, what):
    workload = statefulset(gke_resources)
    workload["spec"]["template"]["spec"]["containers"][0]["env"].append(env)
    [message] = gke_rules.no_literal_secret_env(STATEFULSET, workload)
    assert what in message and "vllm/vllm" in message and "file" in message


@pytest.mark.parametrize("env", [
    {"name": "HF_TOKEN_PATH", "value": "/run/secrets/tpu-vllm-hf/hf-token"},
    {"name": "API_KEY", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
    {"name": "API_KEY", "value": ""},
    {"name": "HF_HOME", "value": "/dev/shm"},
])
def test_paths_references_and_plain_settings_pass(gke_resources, env):
    workload = statefulset(gke_resources)
    workload["spec"]["template"]["spec"]["containers"][0]["env"].append(env)
    assert gke_rules.no_literal_secret_env(STATEFULSET, workload) == []


@pytest.mark.parametrize(("args", "reported"), [
    (["--api-key", "sk-literal"], True), (["--api-key=sk-literal"], True), (["--hf-token", "x"], True),
    (["--api-key", "$(API_KEY)"], False), (["--api-keys-file", "/x"], False)])
def test_a_secret_on_the_command_line_is_reported(gke_resources, args, reported):
    workload = statefulset(gke_resources)
    workload["spec"]["template"]["spec"]["containers"][0]["args"] += args
    assert bool(gke_rules.no_literal_secret_env(STATEFULSET, workload)) is reported


def test_every_workload_kind_is_read(gke_resources):
    container = {"name": "c", "env": [{"name": "DB_PASSWORD", "value": "hunter2"}]}
    pod = {"containers": [container]}
    cron = {"spec": {"jobTemplate": {"spec": {"template": {"spec": pod}}}}}
    for kind, props in [("kubernetes:core/v1:Pod", {"spec": pod}),
                        ("kubernetes:apps/v1:Deployment", {"spec": {"template": {"spec": pod}}}),
                        ("kubernetes:batch/v1:CronJob", cron),
                        ("kubernetes:batch/v1:Job", {"spec": {"template": {"spec": {"initContainers": [container]}}}})]:
        assert gke_rules.no_literal_secret_env(kind, props), kind
    assert gke_rules.no_literal_secret_env("kubernetes:core/v1:ConfigMap", {"data": {"PASSWORD": "x"}}) == []


def entry_point(resources):
    """The real pack entry (tests/policy_entry_check.py), one case of (type, props, urn) triples."""
    python = os.environ.get("TPU_VLLM_POLICY_PYTHON")
    if not python:
        pytest.skip("run through ./scripts/test.sh, which builds the policy pack's own venv")
    triples = [(type_, props, f"urn:pulumi:gke::tpu-vllm::{type_}::resource-{index}")
               for index, (type_, props) in enumerate(resources)]
    request = {"cases": {"gke": {"resources": triples, "config": {}}}}
    completed = subprocess.run([python, str(ROOT / "tests/policy_entry_check.py"), str(ROOT / "policy")],
                               input=json.dumps(request), capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    return {"reports": json.loads(completed.stdout)["cases"]["gke"]}


def test_the_pack_entry_point_passes_the_gke_stack_and_reports_each_violation(gke_resources):
    clean = entry_point(gke_resources)
    assert set(gke_rules.RESOURCE_RULES) <= set(clean["reports"])
    assert all(messages == [] for messages in clean["reports"].values())
    pool = tpu_pool(gke_resources)
    del pool["nodeConfig"]["maxRunDuration"]
    pool["autoscaling"]["totalMaxNodeCount"] = 12
    service = load_balancer(gke_resources)
    service["metadata"]["annotations"] = {}
    workload = statefulset(gke_resources)
    workload["spec"]["template"]["spec"]["containers"][0]["env"].append({"name": "HF_TOKEN", "value": "hf_x"})
    reports = entry_point([(POOL, pool), (SERVICE, service), (STATEFULSET, workload)])["reports"]
    for name in gke_rules.RESOURCE_RULES:
        assert reports[name], name


@pytest.mark.parametrize("spelling", [["--gpu-memory-utilization", "0.99"], ["--gpu_memory_utilization=0.95"],
                                      ["--GPU-MEMORY-UTILIZATION", "0.93"]])
def test_the_memory_cap_is_read_from_the_pods_args_too(gke_resources, spelling):
    workload = statefulset(gke_resources)
    vllm = next(c for c in workload["spec"]["template"]["spec"]["containers"] if "serve" in (c.get("args") or []))
    assert rules.gpu_memory_utilization_capped(STATEFULSET, workload) == []  # the stack's own 0.92
    vllm["args"] = [*vllm["args"], *spelling]  # argparse takes the last one
    [message] = rules.gpu_memory_utilization_capped(STATEFULSET, workload)
    assert "0.92" in message and "691 s" in message
