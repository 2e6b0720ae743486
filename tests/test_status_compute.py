"""tools.status on `tpu.api: compute`: the instance's status from the fake Compute Engine API (tests/fakes/
compute_api.py), its run's end, and the same SSH reading as the queued-resource path once it runs."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from components.vm.instance_incarnation import description
from tests import test_compute_instance_provider
from tests.test_compute_instance_provider import NAME, PROJECT, ZONE, body
from tools import status, status_compute
from tools.status_node import NodeFacts

NOW = datetime(2026, 12, 7, 18, 0, tzinfo=UTC)
OUTPUTS = {"instanceName": f"projects/{PROJECT}/zones/{ZONE}/instances/{NAME}",
           "sshCommand": "ssh -i ~/.ssh/k tpu-vllm@203.0.113.10", "sshPrivateKey": "key",
           "sshKnownHosts": "tpu-vllm-dev ssh-ed25519 AAAA", "localEndpoint": "http://127.0.0.1:8000/v1"}


# The fake Compute API and credentials for it: tests/test_compute_instance_provider.py's fixture.
fake = test_compute_instance_provider.fake


def insert_body(incarnation: str) -> dict:
    return {**body(), "description": description(incarnation)}


def ready(_target, _port) -> NodeFacts:
    return NodeFacts(startup_status="ready", container="running 0 2026-12-07T17:00:00Z", health="200")


def test_a_queued_flex_start_instance_says_nothing_bills(fake):
    fake.insert(PROJECT, ZONE, insert_body("a"))
    report = status_compute.decide(OUTPUTS, "stack dev", NOW, status.serving, node_reader=ready)
    assert report.state == "queued" and "no TPU bills while queued" in report.next_step


def test_a_running_instance_is_read_over_ssh_and_shows_its_run_end(fake):
    fake.insert(PROJECT, ZONE, insert_body("a"))
    fake.capacity_arrives(PROJECT, ZONE, NAME)
    instance = fake.instances[(PROJECT, ZONE, NAME)]
    instance["lastStartTimestamp"] = "2026-12-07T09:30:00.000-08:00"
    instance["networkInterfaces"] = [{"accessConfigs": [{"natIP": "203.0.113.10"}]}]
    report = status_compute.decide(OUTPUTS, "stack dev", NOW, status.serving, node_reader=ready)
    assert report.state == "ready"
    [ends] = [value for label, value in report.facts if label == "run ends"]
    assert ends.startswith("2026-12-14 17:30 UTC") and "computed: last start + maxRunDuration" in ends


def test_an_instance_the_run_end_deleted_says_up_makes_it_again(fake):
    ended = {**OUTPUTS, "runEndsAt": "2026-12-07T17:00:00Z"}
    report = status_compute.decide(ended, "stack dev", NOW, status.serving, node_reader=ready)
    assert report.state == "run ended" and "`pulumi up` makes it again" in report.next_step


@pytest.mark.parametrize("ends", [None, "2026-12-14T17:00:00Z"])
def test_an_instance_gone_before_its_run_end_is_a_failed_create_not_a_run_ended(fake, ends):
    # Right after a failed or interrupted create (its watchdog deleted what it left), or before runEndsAt.
    outputs = {**OUTPUTS, **({"runEndsAt": ends} if ends else {})}
    report = status_compute.decide(outputs, "stack dev", NOW, status.serving, node_reader=ready)
    assert report.state == "gone" and "a create that failed" in report.headline
    assert "`pulumi up` makes it again" in report.next_step


@pytest.mark.parametrize(("status_word", "state"), [("REPAIRING", "repairing"), ("PENDING_STOP", "ending"),
                                                    ("STOPPING", "ending"), ("DEPROVISIONING", "ending")])
def test_a_passing_status_is_not_node_lost_with_delete_advice(fake, status_word, state):
    fake.insert(PROJECT, ZONE, insert_body("a"))
    fake.instances[(PROJECT, ZONE, NAME)]["status"] = status_word
    report = status_compute.decide(OUTPUTS, "stack dev", NOW, status.serving, node_reader=ready)
    assert report.state == state and "instances delete" not in report.next_step


def test_a_terminated_instance_is_still_node_lost(fake):
    fake.insert(PROJECT, ZONE, insert_body("a"))
    fake.instances[(PROJECT, ZONE, NAME)]["status"] = "TERMINATED"
    report = status_compute.decide(OUTPUTS, "stack dev", NOW, status.serving, node_reader=ready)
    assert report.state == "node lost" and "instances delete" in report.next_step
