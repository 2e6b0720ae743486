"""The GKE CrossGuard rules on the gke stack's resources (must pass) and on violating variants (must report),
directly and through the pack's real entry point."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from components import settings
from components.gke import exposure
from components.gke.deployment import exposure_args
from policy import gke_rules, memory_cap, rules
from tests.policy_venv import entry_reports
from tests.test_gke_settings import gke_raw
from tools.plan.engine import unwrap

ROOT = Path(__file__).resolve().parent.parent
POOL = gke_rules.NODE_POOL_TYPE
CLUSTER = gke_rules.CLUSTER_TYPE
SERVICE = gke_rules.SERVICE_TYPE
DEPLOYMENT = "kubernetes:apps/v1:Deployment"


def with_urns(registrations):
    """(type, props, urn) of each custom resource, its URN carrying its parents' types as Pulumi writes them.
    A parent is always a component (a child may share its name, as the TPU pool does)."""
    components = {r["name"]: r for r in registrations if not r["custom"]}

    def chain(registration):
        parent = components.get(registration["parent"])
        return (chain(parent) + "$" if parent else "") + registration["type"]

    return [(r["type"], unwrap(r["inputs"]), f"urn:pulumi:gke::tpu-vllm::{chain(r)}::{r['name']}")
            for r in registrations if r["custom"] and r["inputs"]]


@pytest.fixture(scope="module")
def gke_triples(gke_program):
    """(type, props, urn) of every resource the gke stack makes."""
    assert gke_program.problems is None
    return with_urns(gke_program.registrations)


@pytest.fixture(scope="module")
def gke_resources(gke_triples):
    return [(type_, props) for type_, props, _ in gke_triples]


def urn_of(triples, type_, name):
    return next(urn for t, _, urn in triples if t == type_ and urn.endswith(f"::{name}"))


def tpu_pool(resources=None):
    """A flex-start v5e pool as someone might add it by hand next to the stack (which makes no TPU pool)."""
    return {"name": "tpu-v5e", "cluster": "tpu-vllm-gke", "nodeLocations": ["us-west4-a"], "initialNodeCount": 0,
            "autoscaling": {"totalMinNodeCount": 0, "totalMaxNodeCount": 4, "locationPolicy": "ANY"},
            "nodeConfig": {"machineType": "ct5lp-hightpu-1t", "flexStart": True, "maxRunDuration": "86400s",
                           "reservationAffinity": {"consumeReservationType": "NO_RESERVATION"},
                           "resourceLabels": {"app": "tpu-vllm"}}}


def load_balancer(resources):
    return copy.deepcopy(next(p for t, p in resources if t == SERVICE and p["spec"].get("type") == "LoadBalancer"))


def serving_workload(resources):
    return copy.deepcopy(next(p for t, p in resources if t == DEPLOYMENT and p["metadata"]["name"] == "vllm"))


def every_violation(triples, config=None):
    found = [message for type_, props, _ in triples for check, _ in rules.RESOURCE_RULES.values()
             for message in check(type_, props, config)]
    found += [message for type_, props, urn in triples for check, _ in gke_rules.RESOURCE_RULES.values()
              for message in check(type_, props, config, urn=urn)]
    return found + [message for check, _ in rules.STACK_RULES.values() for message in check(triples, config)]


def test_the_gke_stack_passes_every_policy(gke_triples):
    assert every_violation(gke_triples) == []


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
    # The stack makes no TPU pool, so no label on one, wherever it sits, is an opt-in.
    node["resourceLabels"]["tpu-vllm-unbounded-billing"] = "opted-in"
    for urn in ("", f"urn:pulumi:gke::tpu-vllm::tpu-vllm:gke:Deployment${POOL}::tpu-pool"):
        assert gke_rules.gke_tpu_pool_run_ends(POOL, pool, urn=urn), urn


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
    cluster_ip = {"metadata": {"name": "x"}, "spec": {"type": "ClusterIP"}}
    assert gke_rules.no_external_load_balancer(SERVICE, cluster_ip) == []


def opted_in_balancer() -> dict:
    """The load balancer the stack's Exposure renders with gke.allowExternalLoadBalancer (the real function)."""
    raw = {**gke_raw(), "access": {"servingSourceRanges": ["203.0.113.0/24"]}}
    raw["gke"] = {**raw["gke"], "allowExternalLoadBalancer": True}
    cfg = settings.load(raw, "my-proj", "gke").settings
    # The wing's own mapping from the settings; the Service's manifest uses neither provider nor workload.
    return copy.deepcopy(exposure.load_balancer_service(exposure_args(
        cfg.gke, cfg.access, resource_prefix=cfg.resource_prefix, serving_port=cfg.front.listen_port, provider=None,
        workload=None)))


def test_the_stacks_own_opt_in_clears_only_the_service_its_exposure_made(gke_triples):
    service, urn = opted_in_balancer(), urn_of(gke_triples, SERVICE, "exposure-load-balancer")
    assert service["metadata"]["annotations"] == {gke_rules.EXTERNAL_LB_ANNOTATION: gke_rules.EXTERNAL_LB_OPT_IN}
    assert gke_rules.no_external_load_balancer(SERVICE, service, urn=urn) == []
    assert gke_rules.no_external_load_balancer(SERVICE, service, {"honorStackOptIns": False}, urn=urn)
    # The same annotation on a Service anyone else made (a hand-written one, a Helm chart's, the stack's
    # cluster-IP Service's parent under another component): reported.
    for other in ("", f"urn:pulumi:gke::tpu-vllm::{SERVICE}::mine",
                  urn.replace("tpu-vllm:gke:Exposure$", "tpu-vllm:gke:Autoscaling$"),
                  urn.replace("tpu-vllm:gke:Exposure$", "tpu-vllm:gke:Exposure$my:chart:Chart$")):
        assert gke_rules.no_external_load_balancer(SERVICE, service, urn=other), other


@pytest.mark.parametrize("change", ["another value", "no ranges"])
def test_an_opt_in_the_stack_would_not_write_clears_nothing(gke_triples, change):
    service, urn = opted_in_balancer(), urn_of(gke_triples, SERVICE, "exposure-load-balancer")
    if change == "another value":
        service["metadata"]["annotations"][gke_rules.EXTERNAL_LB_ANNOTATION] = "yes"
    else:
        service["spec"]["loadBalancerSourceRanges"] = []  # Kubernetes reads an empty list as everyone
    assert gke_rules.no_external_load_balancer(SERVICE, service, urn=urn)


def test_the_policy_knows_the_stacks_component_types(gke_program):
    components = {r["type"] for r in gke_program.registrations if not r["custom"]}
    assert {gke_rules.EXPOSURE_TYPE, gke_rules.CLASS_COMPONENT_TYPE} <= components
    [tpu_class] = [r for r in gke_program.registrations if r["type"] == gke_rules.COMPUTE_CLASS_TYPE]
    assert [r["type"] for r in gke_program.registrations if r["name"] == tpu_class["parent"]] == [
        gke_rules.CLASS_COMPONENT_TYPE]


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
    workload = serving_workload(gke_resources)
    workload["spec"]["template"]["spec"]["containers"][0]["env"].append(env)
    [message] = gke_rules.no_literal_secret_env(DEPLOYMENT, workload)
    assert what in message and "vllm/vllm" in message and "file" in message


@pytest.mark.parametrize("env", [
    {"name": "HF_TOKEN_PATH", "value": "/run/secrets/tpu-vllm-hf/hf-token"},
    {"name": "API_KEY", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
    {"name": "API_KEY", "value": ""},
    {"name": "HF_HOME", "value": "/dev/shm"},
])
def test_paths_references_and_plain_settings_pass(gke_resources, env):
    workload = serving_workload(gke_resources)
    workload["spec"]["template"]["spec"]["containers"][0]["env"].append(env)
    assert gke_rules.no_literal_secret_env(DEPLOYMENT, workload) == []


@pytest.mark.parametrize(("args", "reported"), [
    (["--api-key", "sk-literal"], True), (["--api-key=sk-literal"], True), (["--hf-token", "x"], True),
    (["--api-key", "$(API_KEY)"], False), (["--api-keys-file", "/x"], False)])
def test_a_secret_on_the_command_line_is_reported(gke_resources, args, reported):
    workload = serving_workload(gke_resources)
    workload["spec"]["template"]["spec"]["containers"][0]["args"] += args
    assert bool(gke_rules.no_literal_secret_env(DEPLOYMENT, workload)) is reported


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


def entry_points(cases):
    """The real pack entry (tests/policy_entry_check.py): each case a list of (type, props, urn) triples."""
    return entry_reports({name: (triples, {}) for name, triples in cases.items()})["cases"]


def hand_made(type_, props, name="hand-made"):
    return (type_, props, f"urn:pulumi:gke::tpu-vllm::{type_}::{name}")


def test_the_pack_entry_point_passes_the_gke_stack_and_reports_each_violation(gke_triples, gke_resources):
    pool = tpu_pool(gke_resources)
    del pool["nodeConfig"]["maxRunDuration"]
    pool["autoscaling"]["totalMaxNodeCount"] = 12
    service = load_balancer(gke_resources)
    service["metadata"]["annotations"] = {}
    workload = serving_workload(gke_resources)
    workload["spec"]["template"]["spec"]["containers"][0]["env"].append({"name": "HF_TOKEN", "value": "hf_x"})
    balancer_urn = urn_of(gke_triples, SERVICE, "exposure-load-balancer")
    reports = entry_points({
        "clean": gke_triples,
        "violations": [hand_made(POOL, pool), hand_made(SERVICE, service), hand_made(DEPLOYMENT, workload)],
        "stack opt-in": [(SERVICE, opted_in_balancer(), balancer_urn)],
        "copied opt-in": [hand_made(SERVICE, opted_in_balancer())],
        "tpu cluster": [hand_made(CLUSTER, tpu_cluster("default-pool"))],
        "tpu auto-provisioning": [hand_made(CLUSTER, tpu_cluster("auto-provisioning"))],
    })
    assert set(gke_rules.RESOURCE_RULES) <= set(reports["clean"])
    assert all(messages == [] for messages in reports["clean"].values())
    for name in gke_rules.RESOURCE_RULES:
        assert reports["violations"][name], name
    assert reports["stack opt-in"]["no-external-load-balancer"] == []
    assert reports["copied opt-in"]["no-external-load-balancer"]
    for case in ("tpu cluster", "tpu auto-provisioning"):
        assert reports[case]["gke-tpu-pool-run-ends"] and reports[case]["gke-tpu-chips-capped"], case


def tpu_cluster(shape: str) -> dict:
    """A cluster that declares TPU capacity itself, in each of the shapes a NodePool rule alone would miss."""
    cluster = {"name": "big", "location": "us-west4-a", "nodeConfig": {"machineType": "e2-medium"},
               "initialNodeCount": 1}
    if shape == "default-pool":
        cluster.update(nodeConfig={"machineType": "ct5lp-hightpu-4t"}, initialNodeCount=3)
    elif shape == "node-pools":
        cluster["nodePools"] = [{"name": "tpu", "nodeConfig": {"machineType": "ct5lp-hightpu-4t", "flexStart": True},
                                 "autoscaling": {"totalMaxNodeCount": 3}}]
    elif shape == "auto-provisioning":
        cluster["clusterAutoscaling"] = {"enabled": True, "resourceLimits": [
            {"resourceType": "cpu", "maximum": 64}, {"resourceType": "memory", "maximum": 256},
            {"resourceType": "tpu-v5-lite-podslice", "maximum": 16}]}
    return cluster


@pytest.mark.parametrize(("shape", "run_ends", "chips"), [
    ("default-pool", "big/default-pool is on-demand", "reach 12 chips"),
    ("node-pools", "big/tpu is flex-start with no nodeConfig.maxRunDuration", "reach 12 chips"),
    ("auto-provisioning", "node auto-provisioning create TPU nodes (tpu-v5-lite-podslice up to 16", "reach 16 chips"),
])
def test_tpu_capacity_declared_on_the_cluster_is_checked(shape, run_ends, chips):
    cluster = tpu_cluster(shape)
    [message] = gke_rules.gke_tpu_pool_run_ends(CLUSTER, cluster)
    assert run_ends in message, message
    [message] = gke_rules.gke_tpu_chips_capped(CLUSTER, cluster)
    assert chips in message and "cap of 8" in message, message
    assert gke_rules.gke_tpu_chips_capped(CLUSTER, cluster, {"maxTpuChips": 16}) == []
    assert gke_rules.gke_tpu_pool_run_ends(CLUSTER, cluster, {"allowUnboundedBilling": True}) == [] or \
        shape == "node-pools"  # a flex-start pool without a run duration is refused whatever the opt-in


def test_cluster_variants_that_stay_in_bounds_pass(gke_resources):
    stacks_cluster = next(p for t, p in gke_resources if t == CLUSTER)
    assert gke_rules.gke_tpu_pool_run_ends(CLUSTER, stacks_cluster) == []
    assert gke_rules.gke_tpu_chips_capped(CLUSTER, stacks_cluster) == []
    bounded = tpu_cluster("node-pools")
    bounded["nodePools"][0]["nodeConfig"]["maxRunDuration"] = "86400s"
    bounded["nodePools"][0]["autoscaling"] = {"totalMaxNodeCount": 2}
    assert gke_rules.gke_tpu_pool_run_ends(CLUSTER, bounded) == []
    assert gke_rules.gke_tpu_chips_capped(CLUSTER, bounded) == []
    cpu_only = tpu_cluster("auto-provisioning")
    cpu_only["clusterAutoscaling"]["resourceLimits"].pop()
    assert gke_rules.gke_tpu_pool_run_ends(CLUSTER, cpu_only) == gke_rules.gke_tpu_chips_capped(CLUSTER, cpu_only) == []
    switched_off = tpu_cluster("auto-provisioning")
    switched_off["clusterAutoscaling"]["enabled"] = False
    assert gke_rules.gke_tpu_pool_run_ends(CLUSTER, switched_off) == []


def test_a_regional_clusters_pools_count_every_zone():
    cluster = {**tpu_cluster("default-pool"), "location": "us-west4", "initialNodeCount": 1}
    assert "reach 12 chips" in gke_rules.gke_tpu_chips_capped(CLUSTER, cluster)[0]  # 1 node x 3 zones x 4 chips
    cluster["nodeLocations"] = ["us-west4-a"]
    assert gke_rules.gke_tpu_chips_capped(CLUSTER, cluster) == []
    cluster["nodePools"] = [{"name": "p", "nodeConfig": {"machineType": "ct5lp-hightpu-1t", "flexStart": True,
                                                         "maxRunDuration": "3600s"},
                             "autoscaling": {"maxNodeCount": 3}, "nodeLocations": ["us-west4-a", "us-west4-b"]}]
    assert "reach 10 chips" in gke_rules.gke_tpu_chips_capped(CLUSTER, cluster)[0]  # 4 + 3 per zone x 2


@pytest.mark.parametrize("spelling", [["--gpu-memory-utilization", "0.99"], ["--gpu_memory_utilization=0.95"],
                                      ["--GPU-MEMORY-UTILIZATION", "0.93"]])
def test_the_memory_cap_is_read_from_the_pods_args_too(gke_resources, spelling):
    workload = serving_workload(gke_resources)
    vllm = next(c for c in workload["spec"]["template"]["spec"]["containers"] if "serve" in (c.get("args") or []))
    assert memory_cap.gpu_memory_utilization_capped(DEPLOYMENT, workload) == []  # the stack's own 0.92
    vllm["args"] = [*vllm["args"], *spelling]  # argparse takes the last one
    [message] = memory_cap.gpu_memory_utilization_capped(DEPLOYMENT, workload)
    assert "0.92" in message and "691 s" in message
