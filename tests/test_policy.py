"""The CrossGuard rules on the dev stack's resources (must pass) and on violating variants (must report)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
from pathlib import Path

import pytest

from policy import gke_rules, rules
from tests import program as harness
from tools.mocks import unwrap

ROOT = Path(__file__).resolve().parent.parent
QR = "pulumi-python:dynamic/tpu-vllm:QueuedResource"


@pytest.fixture(scope="module")
def dev_resources():
    program = harness.run(harness.dev_config())
    return [(r["type"], unwrap(r["inputs"])) for r in program.registrations if r["inputs"]]


def of_type(resources, type_):
    return next(props for t, props in resources if t == type_)


def all_violations(resources, config=None):
    found = [message for type_, props in resources for check, _ in rules.RESOURCE_RULES.values()
             for message in check(type_, props, config)]
    return found + [message for check, _ in rules.STACK_RULES.values() for message in check(resources, config)]


def test_the_dev_stack_passes_every_policy(dev_resources):
    assert all_violations(dev_resources) == []


def test_run_duration_over_seven_days_is_reported(dev_resources):
    props = copy.deepcopy(of_type(dev_resources, QR))
    props["body"]["runDuration"]["maxRunDuration"] = "864000s"
    [message] = rules.tpu_billing_stops(QR, props)
    assert "over 7 days" in message and "maxRunDuration" in message


def test_flex_start_without_run_duration_is_reported(dev_resources):
    props = copy.deepcopy(of_type(dev_resources, QR))
    del props["body"]["runDuration"]
    assert "nothing stops its billing" in rules.tpu_billing_stops(QR, props)[0]


@pytest.mark.parametrize("model", ["SPOT", "STANDARD"])
def test_tpu_without_a_stop_is_reported_unless_allowed(dev_resources, model):
    props = copy.deepcopy(of_type(dev_resources, QR))
    props["body"]["provisioningModel"] = model
    del props["body"]["runDuration"]
    assert "flex-start" in rules.tpu_billing_stops(QR, props)[0]
    assert rules.tpu_billing_stops(QR, props, {"allowUnboundedBilling": True}) == []
    assert rules.tpu_billing_stops("gcp:tpu/v2Vm:V2Vm", {"name": "x"})


def ssh_rule(dev_resources):
    return copy.deepcopy(next(p for t, p in dev_resources
                              if t == rules.FIREWALL_TYPE and p["allows"][0]["ports"] == ["22"]))


def test_ssh_to_the_world_without_the_stacks_opt_in_is_reported(dev_resources):
    props = ssh_rule(dev_resources)
    assert rules.firewall_not_open_to_the_world(rules.FIREWALL_TYPE, props) == []  # dev opted in
    props["description"] = "tpu-vllm ssh"
    [message] = rules.firewall_not_open_to_the_world(rules.FIREWALL_TYPE, props)
    assert "opens SSH (22) to 0.0.0.0/0" in message and "sshSourceRanges" in message
    assert rules.firewall_not_open_to_the_world(rules.FIREWALL_TYPE, props, {"allowOpenSsh": True}) == []


def test_an_org_can_refuse_stack_opt_ins(dev_resources):
    props = ssh_rule(dev_resources)
    assert rules.firewall_not_open_to_the_world(rules.FIREWALL_TYPE, props, {"honorStackOptIns": False})


@pytest.mark.parametrize("allows", [[{"protocol": "tcp", "ports": ["8000"]}],
                                    [{"protocol": "tcp", "ports": ["7000-9000"]}],
                                    [{"protocol": "all"}]])
def test_serving_port_to_the_world_is_reported(allows):
    props = {"name": "open", "sourceRanges": ["0.0.0.0/0"], "allows": allows, "description": ""}
    messages = rules.firewall_not_open_to_the_world(rules.FIREWALL_TYPE, props)
    assert any("the serving port (8000)" in m for m in messages)


@pytest.mark.parametrize(("value", "what"), [
    ("HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyzABCDEF1234", "a Hugging Face token"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nabc", "a private key"),
    ("api_key=Zx81kQ2mPq7vRt5sLw9yBn3cHd6fGj4aKe0u", "looks like a secret"),
])
def test_secret_looking_metadata_is_reported(dev_resources, value, what):
    props = copy.deepcopy(of_type(dev_resources, QR))
    props["body"]["tpu"]["nodeSpec"][0]["node"]["metadata"]["extra"] = value
    messages = rules.metadata_has_no_secrets(QR, props)
    assert any(what in m and "Secret Manager" in m for m in messages)


def test_the_real_startup_script_and_public_key_do_not_look_like_secrets(dev_resources):
    assert rules.metadata_has_no_secrets(QR, of_type(dev_resources, QR)) == []


def test_project_level_role_for_the_tpu_account_is_reported(dev_resources):
    email = of_type(dev_resources, QR)["body"]["tpu"]["nodeSpec"][0]["node"]["serviceAccount"]["email"]
    grant = ("gcp:projects/iAMMember:IAMMember",
             {"project": "proj", "role": "roles/secretmanager.secretAccessor", "member": f"serviceAccount:{email}"})
    [message] = rules.tpu_service_account_has_no_project_role([*dev_resources, grant])
    assert "on the whole project" in message and "SecretIamMember" in message
    other = ("gcp:projects/iAMMember:IAMMember", {"role": "roles/viewer", "member": "user:me@example.com"})
    assert rules.tpu_service_account_has_no_project_role([*dev_resources, other]) == []


def test_unlabelled_secret_is_reported(dev_resources):
    props = copy.deepcopy(of_type(dev_resources, rules.SECRET_TYPE))
    props["labels"] = {}
    assert "has no labels" in rules.secrets_are_labelled(rules.SECRET_TYPE, props)[0]


@pytest.mark.parametrize(("value", "violates"), [("0.92", False), ("0.93", True), ("0.95", True)])
def test_gpu_memory_utilization_above_0_92_is_flagged(dev_resources, value, violates):
    props = copy.deepcopy(of_type(dev_resources, "command:remote:Command"))
    props["create"] = props["create"].replace("--gpu-memory-utilization 0.92", f"--gpu-memory-utilization {value}")
    messages = rules.gpu_memory_utilization_capped("command:remote:Command", props)
    assert bool(messages) is violates
    if violates:
        assert "0.92" in messages[0] and "691 s" in messages[0]


def entry_point(resources):
    python = os.environ.get("TPU_VLLM_POLICY_PYTHON")
    if not python:
        pytest.skip("run through ./scripts/test.sh, which builds the policy pack's own venv")
    completed = subprocess.run([python, str(ROOT / "tests/policy_entry_check.py")], input=json.dumps(resources),
                               capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def test_the_pack_entry_point_under_pulumi_policy(dev_resources):
    clean = entry_point(dev_resources)
    assert clean["name"] == "tpu-vllm" and clean["enforcement_level"] == "mandatory"
    assert set(clean["reports"]) == set(rules.RESOURCE_RULES) | set(rules.STACK_RULES) | set(gke_rules.RESOURCE_RULES)
    assert all(messages == [] for messages in clean["reports"].values())
    bad_secret = ("gcp:secretmanager/secret:Secret", {"secretId": "x", "labels": {}})
    assert entry_point([*dev_resources, bad_secret])["reports"]["secrets-are-labelled"]
