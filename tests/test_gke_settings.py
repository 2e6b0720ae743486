"""The gke platform's settings and costs: bad values refused with key, value and fix; good variants pass."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path

import pytest

from components import settings
from components.basis import boot, spending
from components.gke import autoscaling, metrics_door
from tools.plan.stack_file import read_stack_config

ROOT = Path(__file__).resolve().parent.parent


def gke_raw() -> dict:
    """Pulumi.gke.yaml as the program reads it: the caller's own copy, free to change."""
    return copy.deepcopy(_gke_stack_file())


@functools.cache
def _gke_stack_file() -> dict:
    """Read once per process: the cases below are built at import (each worker's collection), ~20 of them, and
    each YAML parse of the file costs ~8 ms of CPU."""
    config, _ = read_stack_config(ROOT / "Pulumi.gke.yaml")
    raw = {}
    for key, value in config.items():
        namespace, _, name = key.partition(":")
        if namespace == settings.NAMESPACE:
            raw[name] = json.loads(value) if settings.TOP_LEVEL_KEYS.get(name) else value
    return raw


def with_gke(**values) -> dict:
    raw = gke_raw()
    return {**raw, "gke": {**raw["gke"], **values}}


def problems_of(raw: dict) -> list[str]:
    with pytest.raises(settings.SettingsError) as caught:
        settings.load(raw, "my-proj", "gke")
    return caught.value.problems


def test_the_example_gke_stack_is_valid_and_needs_no_ssh():
    loaded = settings.load(gke_raw(), "my-proj", "gke")
    assert loaded.settings.platform == "gke"
    assert loaded.settings.access.ssh_source_ranges == []
    # The example keeps one replica, and is told what that costs at every run end.
    [gap] = loaded.warnings
    assert gap.startswith("tpu-vllm:gke.minReplicas = 1") and "set gke.minReplicas to 2" in gap
    gke = loaded.settings.gke
    assert (gke.region, gke.tpu_zones, gke.is_regional) == ("us-west4", ["us-west4-a"], False)


def test_the_vm_platform_stays_the_default_and_still_wants_ssh_ranges():
    loaded = settings.load({"access": {"sshSourceRanges": ["198.51.100.7/32"]}}, "my-proj", "dev")
    assert loaded.settings.platform == "vm"
    with pytest.raises(settings.SettingsError) as caught:
        settings.load({}, "my-proj", "dev")
    assert "tpu-vllm:access.sshSourceRanges = []" in caught.value.render()


def test_a_gke_section_on_the_vm_platform_is_ignored_with_a_warning():
    loaded = settings.load({"access": {"sshSourceRanges": ["198.51.100.7/32"]}, "gke": {"maxReplicas": 2}},
                           "my-proj", "dev")
    ignored = "tpu-vllm:gke: this section is read only with tpu-vllm:platform: gke"
    assert any(w.startswith(ignored) for w in loaded.warnings)


BAD = [
    (with_gke(minReplicas=3, maxReplicas=2), "gke.maxReplicas", "2", "raise maxReplicas to at least 3"),
    # tpu.acceleratorType names the shape on both platforms: another shape's machine is refused with the fix.
    (with_gke(machineType="ct5lp-hightpu-4t"), "gke.machineType", "ct5lp-hightpu-4t",
     "set tpu.acceleratorType to v5litepod-4"),
    (with_gke(machineType="ct6e-standard-1t"), "gke.machineType", "ct6e-standard-1t",
     "its machine is ct5lp-hightpu-1t"),
    (with_gke(machineType="a2-highgpu-1g"), "gke.machineType", "a2-highgpu-1g",
     "remove the key to follow tpu.acceleratorType"),
    (with_gke(nodeLocations=["us-west4-a", "us-east5-b"]), "gke.nodeLocations", "us-east5-b",
     "use zones like us-west4-a"),
    (with_gke(location="us-west4", nodeLocations=["europe-west4-a"]), "gke.nodeLocations", "europe-west4-a",
     "not in the cluster's region us-west4"),
    (with_gke(location="us-west4", nodeLocations=[]), "gke.nodeLocations", "[]", "nodeLocations[0]' us-west4-a"),
    (with_gke(minMasterVersion="1.32.2-gke.1652000"), "gke.minMasterVersion", "1.32.2-gke.1652000",
     "GKE 1.33.3-gke.1136000 or later is needed"),
    # Flex-start TPU runs here, but the ComputeClass cannot create its own node pools yet.
    (with_gke(minMasterVersion="1.33.0-gke.1712000"), "gke.minMasterVersion", "1.33.0-gke.1712000",
     "node pool auto-creation without node auto-provisioning"),
    (with_gke(minMasterVersion="1.33.3-gke.1135999"), "gke.minMasterVersion", "1.33.3-gke.1135999",
     "GKE 1.33.3-gke.1136000 or later is needed"),
    (with_gke(minMasterVersion="1.33"), "gke.minMasterVersion", "1.33", "a newer minor like 1.34"),
    (with_gke(maxReplicas=9), "gke.maxReplicas", "9", "over the gke.maxTpuChips cap (8)"),
    (with_gke(releaseChannel="regular"), "gke.releaseChannel", "regular", "RAPID, REGULAR, STABLE"),
    (with_gke(systemMachineType="n2-standard-2"), "gke.systemMachineType", "n2-standard-2", "e2-standard-2"),
    (with_gke(allowExternalLoadBalancer=True), "gke.allowExternalLoadBalancer", "true",
     "servingSourceRanges[0]"),
    ({**gke_raw(), "tpu": {"provisioningModel": "spot"}}, "tpu.provisioningModel", "spot",
     "set gke.allowUnboundedBilling true"),
    (with_gke(maxReplica=3), "gke.maxReplica", "maxReplica", "did you mean 'maxReplicas'?"),
    ({**gke_raw(), "platform": "k8s"}, "platform", "k8s", "'vm' or 'gke'"),
]


@pytest.mark.parametrize(("raw", "key", "value", "fix"), BAD, ids=[f"{case[1]}={case[2]}" for case in BAD])
def test_bad_gke_settings_are_refused_with_key_value_and_fix(raw, key, value, fix):
    problem = next(p for p in problems_of(raw) if p.startswith(f"tpu-vllm:{key}"))
    assert value in problem and fix in problem, problem


@pytest.mark.parametrize("version", ["1.33.3-gke.1136000", "1.33.4-gke.1", "1.34", "1.35.0", "latest"])
def test_versions_at_or_past_the_class_auto_creation_minimum_pass(version):
    loaded = settings.load(with_gke(minMasterVersion=version), "my-proj", "gke")
    assert loaded.settings.gke.min_master_version == version


@pytest.mark.parametrize(("version", "verdict"), [
    ("1.33.3-gke.1136000", True), ("1.33.3-gke.1136001", True), ("1.33.3-gke.1135999", False),
    ("1.33.4-gke.100", True), ("1.33.0-gke.1712000", False), ("1.32.9-gke.9999999", False), ("2.0", True),
    ("1.34", True), ("1.33", None), ("1.33.3", None), ("1.x", None), ("latest", True)])
def test_gke_version_comparison(version, verdict):
    assert settings.gke_version_at_least(version) is verdict


def test_several_zones_in_the_region_pass_and_unverified_ones_warn():
    loaded = settings.load(with_gke(location="us-west4", nodeLocations=["us-west4-a", "us-west4-b"]), "my-proj", "gke")
    assert loaded.settings.gke.tpu_zones == ["us-west4-a", "us-west4-b"]
    assert any("gke.nodeLocations" in w and "us-west4-b" in w for w in loaded.warnings)


def test_spot_on_gke_passes_with_the_explicit_opt_in_and_still_warns():
    raw = {**with_gke(allowUnboundedBilling=True), "tpu": {"provisioningModel": "spot"}}
    loaded = settings.load(raw, "my-proj", "gke")
    assert any("nothing stops its billing" in w for w in loaded.warnings)


def test_an_external_load_balancer_passes_with_source_ranges():
    raw = {**with_gke(allowExternalLoadBalancer=True), "access": {"servingSourceRanges": ["203.0.113.0/24"]}}
    assert settings.load(raw, "my-proj", "gke").settings.gke.allow_external_load_balancer is True


def test_load_beyond_every_replica_warns():
    raw = {**with_gke(maxReplicas=2), "load": {"clients": 64, "contextTokens": 8192}}
    warnings = settings.load(raw, "my-proj", "gke").warnings
    assert any("raise gke.maxReplicas" in w for w in warnings)
    assert not any("raise gke.maxReplicas" in w for w in settings.load(gke_raw(), "my-proj", "gke").warnings)


def test_gke_costs_chips_fee_and_system_pool():
    cost = spending.gke_cost("flex-start", chips=4, system_machine_type="e2-standard-2", system_nodes=1)
    assert cost.chips_usd_per_hour == pytest.approx(2.40)
    assert cost.cluster_fee_usd_per_hour == 0.10
    assert cost.system_pool_usd_per_hour == pytest.approx(2 * 0.024553 + 8 * 0.003291)
    assert cost.total_usd_per_hour == pytest.approx(2.40 + 0.10 + 0.075434)
    assert cost.max_spend_usd(24 * 3600) == pytest.approx(24 * (2.40 + 0.10 + 0.075434))
    reused = spending.gke_cost("flex-start", chips=1, system_machine_type="e2-standard-2", system_nodes=0,
                             cluster_fee=False)
    assert reused.total_usd_per_hour == pytest.approx(0.60)
    assert spending.gke_cost("on-demand", 2, "e2-standard-4", 2).total_usd_per_hour == pytest.approx(
        2.40 + 0.10 + 2 * (4 * 0.024553 + 16 * 0.003291))


# The pod's containers share one network namespace; the metrics door always binds metrics_door.METRICS_PORT.

@pytest.mark.parametrize("section, key", [("front", "listenPort"), ("vllm", "serverPort")])
def test_gke_refuses_a_port_that_collides_with_the_metrics_door(section, key):
    raw = gke_raw()
    raw[section] = {**raw.get(section, {}), key: metrics_door.METRICS_PORT}
    problem = next(p for p in problems_of(raw) if p.startswith(f"tpu-vllm:{section}.{key} = 9090"))
    assert "metrics door" in problem and "use another port, e.g. 80" in problem


@pytest.mark.parametrize("section, key, port", [("front", "listenPort", 9091), ("vllm", "serverPort", 9089),
                                                ("front", "listenPort", 8080)])
def test_ports_next_to_the_metrics_door_pass(section, key, port):
    raw = gke_raw()
    raw[section] = {**raw.get(section, {}), key: port}
    assert settings.load(raw, "my-proj", "gke").settings


def test_the_metrics_port_stays_free_on_the_vm():
    raw = {"access": {"sshSourceRanges": ["198.51.100.7/32"]}, "front": {"listenPort": metrics_door.METRICS_PORT}}
    assert settings.load(raw, "my-proj", "dev").settings.front.listen_port == metrics_door.METRICS_PORT


# The stack declares gke.namespace as its own Namespace: creating an existing one fails and destroy deletes it.

@pytest.mark.parametrize("namespace", ["kube-system", "kube-public", "kube-node-lease", "default", "custom-metrics",
                                       autoscaling.ADAPTER_NAMESPACE, "gmp-system", "gmp-public",
                                       "gke-managed-system"])
def test_gke_namespace_refuses_namespaces_the_stack_does_not_own(namespace):
    [problem] = [p for p in problems_of(with_gke(namespace=namespace)) if p.startswith("tpu-vllm:gke.namespace")]
    assert f'"{namespace}"' in problem and "must be its own" in problem and "e.g. tpu-vllm" in problem


@pytest.mark.parametrize("namespace", ["Tpu-vllm", "tpu_vllm", "-tpu", "tpu-", "a" * 64, ""])
def test_gke_namespace_must_be_a_dns_label(namespace):
    assert any(p.startswith("tpu-vllm:gke.namespace") for p in problems_of(with_gke(namespace=namespace)))


@pytest.mark.parametrize("namespace", ["tpu-vllm", "kube", "my-kube-system", "defaults", "team-gmp", "a" * 63, "0"])
def test_namespaces_of_the_users_own_pass(namespace):
    assert settings.load(with_gke(namespace=namespace), "my-proj", "gke").settings.gke.namespace == namespace


@pytest.mark.parametrize("access", ["devices", "privileged"])
def test_container_access_on_gke_is_named_as_ignored(access):
    raw = {**gke_raw(), "vllm": {**gke_raw().get("vllm", {}), "containerAccess": access}}
    warnings = settings.load(raw, "my-proj", "gke").warnings
    [warning] = [w for w in warnings if w.startswith("tpu-vllm:vllm.containerAccess = ")]
    assert f'"{access}"' in warning and "google.com/tpu" in warning and "remove it" in warning
    vm = {"access": {"sshSourceRanges": ["198.51.100.7/32"]}, "vllm": {"containerAccess": access}}
    assert not any("containerAccess" in w for w in settings.load(vm, "my-proj", "dev").warnings)


@pytest.mark.parametrize(("values", "tpu", "warned"), [
    ({"minReplicas": 1}, {}, True),
    ({"minReplicas": 2}, {}, False),
    # No run end on on-demand: nothing recycles the node, so no gap to name.
    ({"minReplicas": 1, "allowUnboundedBilling": True}, {"provisioningModel": "on-demand", "maxRunDuration": None},
     False),
])
def test_one_replica_on_flex_start_is_warned_of_the_gap_at_every_run_end(values, tpu, warned):
    raw = with_gke(**values)
    raw["tpu"] = {key: value for key, value in {**raw["tpu"], **tpu}.items() if value is not None}
    warnings = settings.load(raw, "my-proj", "gke").warnings
    gap = [w for w in warnings if w.startswith("tpu-vllm:gke.minReplicas")]
    assert bool(gap) is warned
    if warned:
        assert f"{boot.WARM_BOOT_SECONDS} s" in gap[0] and "set gke.minReplicas to 2" in gap[0]


@pytest.mark.parametrize(("max_replicas", "cap", "refused"), [(7, 8, False), (8, 8, True), (4, 5, False),
                                                              (4, 4, True)])
def test_the_chip_cap_counts_the_rollouts_surge_chip(max_replicas, cap, refused):
    raw = with_gke(maxReplicas=max_replicas, maxTpuChips=cap)
    if refused:
        [problem] = [p for p in problems_of(raw) if p.startswith("tpu-vllm:gke.maxReplicas")]
        assert f"{max_replicas + 1} chips" in problem and f"raise maxTpuChips to {max_replicas + 1}" in problem
    else:
        settings.load(raw, "my-proj", "gke")


def test_tool_choice_off_on_gke_names_vllms_refusal_not_a_smoke_test():
    # Only the vm wing runs startup/serve.sh's smoke test; on gke vLLM 0.33.0 refuses tool_choice auto
    # (vllm/renderers/online_renderer.py: '"auto" tool choice requires --enable-auto-tool-choice ...').
    raw = gke_raw()
    text = " ".join(problems_of({**raw, "vllm": {**raw.get("vllm", {}), "enableAutoToolChoice": False}}))
    assert "tpu-vllm:vllm.enableAutoToolChoice = false" in text
    assert "serve.sh" not in text and "no smoke test runs on gke" in text
    assert '"auto" tool choice requires --enable-auto-tool-choice' in text
