"""No Service gets into the serving containers' environment (issue 25, item 2).

By default the kubelet gives every container a set of variables per Service of its pod's namespace (a
Service `vllm` on 8000 makes VLLM_PORT=tcp://<ip>:8000), and vLLM reads VLLM_PORT as its own port and
refuses a URI: every replica started after the Service existed crash-looped. The stack is rendered under
the offline engine; tests/fakes/kubelet_env.py (the kubelet's rules, cited there) builds each container's
environment from the pod spec and every Service the stack renders, plus default/kubernetes; vLLM's and
tpu-inference's own envs read it in the vLLM venv (tests/vllm_cli_check.py), as the engine core does.
"""

from __future__ import annotations

import copy

import pytest

from tests.fakes import kubelet_env
from tests.fakes.kubelet_env import Service, ServicePort
from tests.k8s_schema import kubernetes_objects
from tests.test_vllm_parser import judged_once

MASTER = kubelet_env.master_service("10.96.0.1")
# Services anyone with create rights in the namespace could add, each named to write a variable that vLLM
# or tpu-inference parses (VLLM_DP_MASTER_PORT, VLLM_NIXL_SIDE_CHANNEL_PORT, JAX_PROFILER_SERVER_PORT with
# int()), or a family of names they read (VLLM_HOST_*, TPU_*); plus the two kinds the kubelet skips.
HOSTILE = [
    {"metadata": {"name": name, "namespace": None}, "spec": {"type": "ClusterIP", "ports": ports}}
    for name, ports in [
        ("vllm-dp-master", [{"name": "http", "port": 29500}]),
        ("vllm-nixl-side-channel", [{"port": 5600}]),
        ("jax-profiler-server", [{"port": 9999}]),
        ("vllm-host", [{"name": "ip", "port": 80}, {"name": "udp", "port": 53, "protocol": "UDP"}]),
        ("tpu", [{"name": "worker", "port": 8470}]),
    ]
] + [
    {"metadata": {"name": "vllm-headless", "namespace": None}, "spec": {"clusterIP": "None", "ports": [{"port": 1}]}},
    {"metadata": {"name": "vllm-external", "namespace": None},
     "spec": {"type": "ExternalName", "externalName": "example.com", "ports": [{"port": 2}]}},
]


class Rendered:
    """The serving pod and every Service of the gke stack, as the API server would hold them."""

    def __init__(self, program):
        self.objects = kubernetes_objects(program.registrations)
        serving = next(o for o in self.objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "vllm")
        self.namespace = serving["metadata"]["namespace"]
        self.pod_spec = serving["spec"]["template"]["spec"]
        self.services = [o for o in self.objects if o["kind"] == "Service"]

    def hostile_services(self) -> list[dict]:
        hostile = copy.deepcopy(HOSTILE)
        for manifest in hostile:
            manifest["metadata"]["namespace"] = self.namespace
        return hostile

    def environments(self, pod_spec: dict, services: list[dict]) -> dict[str, dict[str, str]]:
        """Each container's environment from the kubelet, with `services` (plus default/kubernetes) live."""
        live = [MASTER, *kubelet_env.allocate_cluster_ips(services)]
        return {container["name"]: kubelet_env.container_environment(pod_spec, container, self.namespace, live)
                for container in pod_spec["containers"]}


def links_on(pod_spec: dict) -> dict:
    """The pod as it was before the fix: no enableServiceLinks, which the API server defaults to true."""
    return {key: value for key, value in pod_spec.items() if key != "enableServiceLinks"}


@pytest.fixture(scope="module")
def rendered(gke_program):
    return Rendered(gke_program)


@pytest.fixture(scope="module")
def environments(rendered):
    """case -> container -> its environment."""
    with_hostile = rendered.services + rendered.hostile_services()
    return {"rendered": rendered.environments(rendered.pod_spec, rendered.services),
            "hostile": rendered.environments(rendered.pod_spec, with_hostile),
            "links-on": rendered.environments(links_on(rendered.pod_spec), rendered.services),
            "links-on-hostile": rendered.environments(links_on(rendered.pod_spec), with_hostile)}


@pytest.fixture(scope="module")
def judged(environments, tmp_path_factory):
    """What vLLM and tpu-inference make of each container's environment: 'case/container' -> verdict."""
    request = {"environments": {f"{case}/{name}": env for case, containers in environments.items()
                                for name, env in containers.items()}}
    return judged_once(tmp_path_factory, request)["environments"]


def own_env(container: dict) -> dict[str, str]:
    return {variable["name"]: variable["value"] for variable in container.get("env", [])}


# The kubelet model against the upstream rules (tests/fakes/kubelet_env.py cites them).

def test_a_service_gives_host_port_each_named_port_and_the_docker_link_variables():
    service = Service("my-svc", "ns", "10.0.0.11", (ServicePort(6379, "redis-main"), ServicePort(53, "dns", "UDP")))
    assert kubelet_env.service_variables(service) == {
        "MY_SVC_SERVICE_HOST": "10.0.0.11",
        "MY_SVC_SERVICE_PORT": "6379",
        "MY_SVC_SERVICE_PORT_REDIS_MAIN": "6379",
        "MY_SVC_SERVICE_PORT_DNS": "53",
        "MY_SVC_PORT": "tcp://10.0.0.11:6379",
        "MY_SVC_PORT_6379_TCP": "tcp://10.0.0.11:6379",
        "MY_SVC_PORT_6379_TCP_PROTO": "tcp",
        "MY_SVC_PORT_6379_TCP_PORT": "6379",
        "MY_SVC_PORT_6379_TCP_ADDR": "10.0.0.11",
        "MY_SVC_PORT_53_UDP": "udp://10.0.0.11:53",
        "MY_SVC_PORT_53_UDP_PROTO": "udp",
        "MY_SVC_PORT_53_UDP_PORT": "53",
        "MY_SVC_PORT_53_UDP_ADDR": "10.0.0.11",
    }


def test_an_unnamed_port_has_no_named_variable_and_ipv6_is_bracketed():
    variables = kubelet_env.service_variables(Service("db", "ns", "fd00::a", (ServicePort(5432),)))
    assert variables["DB_PORT"] == "tcp://[fd00::a]:5432" and variables["DB_PORT_5432_TCP_ADDR"] == "fd00::a"
    assert [name for name in variables if name.startswith("DB_SERVICE_PORT")] == ["DB_SERVICE_PORT"]


def test_headless_and_external_name_services_give_nothing():
    services = kubelet_env.allocate_cluster_ips(HOSTILE[-2:])
    assert [s.cluster_ip for s in services] == ["None", ""]
    assert [kubelet_env.service_variables(s) for s in services] == [{}, {}]
    assert kubelet_env.linked_services(services, "default", True) == []


def test_which_services_a_pod_is_linked_to():
    mine = Service("a", "mine", "10.0.0.2", (ServicePort(1),))
    other = Service("b", "other", "10.0.0.3", (ServicePort(1),))
    services = [MASTER, mine, other]
    assert kubelet_env.linked_services(services, "mine", None) == [MASTER, mine]  # nil: the default, on
    assert kubelet_env.linked_services(services, "mine", True) == [MASTER, mine]
    assert kubelet_env.linked_services(services, "mine", False) == [MASTER]  # the master's, always
    # A `kubernetes` Service of the pod's own namespace takes the master's place, but only with links on.
    own_kubernetes = Service("kubernetes", "mine", "10.0.0.4", (ServicePort(1),))
    assert kubelet_env.linked_services([own_kubernetes, MASTER], "mine", True) == [own_kubernetes]
    assert kubelet_env.linked_services([own_kubernetes, MASTER], "mine", False) == [MASTER]


def test_the_containers_own_env_wins_over_a_service_variable():
    service = Service("vllm", "ns", "10.0.0.5", (ServicePort(8000, "http"),))
    container = {"name": "c", "env": [{"name": "VLLM_PORT", "value": "9000"}]}
    env = kubelet_env.container_environment({}, container, "ns", [service])
    assert env["VLLM_PORT"] == "9000" and env["VLLM_SERVICE_HOST"] == "10.0.0.5"


@pytest.mark.parametrize("variable", [{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                                      {"name": "X", "value": "$(VLLM_SERVICE_HOST)"}])
def test_the_model_refuses_what_it_does_not_model(variable):
    with pytest.raises(NotImplementedError):
        kubelet_env.container_environment({}, {"name": "c", "env": [variable]}, "ns", [])


# The stack's serving pod.

def test_the_serving_pod_turns_service_links_off(rendered):
    assert rendered.pod_spec["enableServiceLinks"] is False


@pytest.mark.parametrize("case", ["rendered", "hostile"])
def test_no_service_of_the_namespace_reaches_a_serving_container(rendered, environments, case):
    """Each container gets its own env and default/kubernetes' variables, whatever else the namespace holds."""
    master = kubelet_env.service_variables(MASTER)
    for container in rendered.pod_spec["containers"]:
        assert environments[case][container["name"]] == {**master, **own_env(container)}, container["name"]


def test_every_pod_the_wing_renders_gets_no_vllm_variable_it_did_not_set(rendered):
    """The metrics adapter keeps its manifest's default links: its namespace holds only its own Service."""
    services = [MASTER, *kubelet_env.allocate_cluster_ips(rendered.services)]
    templates = [o for o in rendered.objects if "template" in o.get("spec", {})]
    assert {o["kind"] for o in templates} == {"Deployment"} and len(templates) == 2
    for workload in templates:
        pod_spec = workload["spec"]["template"]["spec"]
        for container in pod_spec["containers"]:
            env = kubelet_env.container_environment(pod_spec, container, workload["metadata"]["namespace"], services)
            foreign = {name for name in env if name.startswith(("VLLM_", "TPU_")) and name not in own_env(container)}
            assert not foreign, (workload["metadata"]["name"], container["name"], foreign)


@pytest.mark.parametrize("case", ["rendered", "hostile"])
def test_vllm_and_tpu_inference_read_each_serving_containers_environment(rendered, judged, case):
    for container in rendered.pod_spec["containers"]:
        verdict = judged[f"{case}/{container['name']}"]
        assert verdict["errors"] == {} and verdict["startup"] is None, (container["name"], verdict)
        assert verdict["VLLM_PORT"] is None  # unset: vLLM picks its own ports
        assert verdict["read"] > 300  # both registries were read, not an empty one


def test_the_check_bites_with_links_on(judged):
    """The same pod with service links on (as before the fix): the crash-loop, and the hostile names' hits."""
    plain = judged["links-on/vllm"]
    assert "appears to be a URI" in plain["VLLM_PORT"] and "tcp://10.96.0." in plain["VLLM_PORT"]
    assert "appears to be a URI" in plain["startup"]
    hostile = judged["links-on-hostile/vllm"]["errors"]
    assert {"vllm:VLLM_PORT", "vllm:VLLM_DP_MASTER_PORT", "vllm:VLLM_NIXL_SIDE_CHANNEL_PORT",
            "tpu_inference:JAX_PROFILER_SERVER_PORT"} <= set(hostile), hostile
