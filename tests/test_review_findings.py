"""Adversarial review: each test shows a gap found by trying a variant; each fails on the reviewed code."""

from __future__ import annotations

import pytest

from components import settings
from components.gke import metrics_door, workload
from tests.test_gke_settings import gke_raw, problems_of

DEV_RAW = {"access": {"sshSourceRanges": ["198.51.100.7/32"]}}


# 1. GKE: the pod's three containers share one network namespace. The metrics door always binds :9090, so
#    a serving port or a vLLM port of 9090 makes two containers bind the same port (one crash-loops).

@pytest.mark.parametrize("section, key", [("vllm", "port"), ("front", "upstreamPort")])
def test_gke_refuses_a_port_that_collides_with_the_metrics_door(section, key):
    raw = gke_raw()
    raw[section] = {**raw.get(section, {}), key: metrics_door.METRICS_PORT}
    assert any(f"{section}.{key}" in p for p in problems_of(raw))


def test_the_rendered_pod_never_binds_one_port_twice():
    raw = gke_raw()
    raw["vllm"] = {**raw["vllm"], "port": metrics_door.METRICS_PORT}
    try:
        loaded = settings.load(raw, "my-proj", "gke")
    except settings.SettingsError:
        return  # refused: fine
    pod = workload.pod_template(loaded.settings, service_account="vllm", node_pool="tpu", hash_of_config="x")
    ports = [p["containerPort"] for c in pod["spec"]["containers"] for p in c.get("ports", [])]
    ports.append(loaded.settings.front.upstream_port)  # vLLM's loopback port, in the same namespace
    assert len(ports) == len(set(ports)), ports


# 3. gke.namespace may name a namespace the stack does not own: the stack declares it as its own Namespace
#    (create fails on an existing one; destroy deletes it), and custom-metrics is the adapter's own.

@pytest.mark.parametrize("namespace", ["kube-system", "default", "custom-metrics", "gmp-system"])
def test_gke_namespace_refuses_namespaces_the_stack_does_not_own(namespace):
    raw = gke_raw()
    raw["gke"] = {**raw["gke"], "namespace": namespace}
    assert any("gke.namespace" in p for p in problems_of(raw))


# 6. The gke plan prints the VM's cost block unchanged: "one run stops by itself" and "with no run, still
#    billing: the cache disk ... about $5.56/month", while on gke a new node replaces each ended one for as
#    long as gke.minReplicas asks, and the cluster fee and system pool bill all the time (README: "nothing
#    on gke stops billing by itself").

def test_the_gke_plan_does_not_say_billing_stops_by_itself():
    import subprocess
    import sys
    from pathlib import Path
    result = subprocess.run([sys.executable, "-m", "tools.plan", "--stack", "gke"], capture_output=True, text=True,
                            cwd=Path(__file__).resolve().parent.parent, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "stops by itself" not in result.stdout
    idle = [line for line in result.stdout.splitlines() if "with no run, still billing" in line]
    assert all("system pool" in line or "cluster" in line for line in idle), idle
