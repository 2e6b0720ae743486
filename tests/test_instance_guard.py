"""The compute path's guard (components/vm/instance_guard.py) against a fake Compute Engine API on 127.0.0.1: an
interrupted first create leaves nothing billing (the fake's ledger), a released one is left alone, another
create's instance is never touched, and an instance the run's end deleted is made again by the next up.

The fake's answers are held to compute.v1.json's Instance and Operation schemas here.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest

from components.vm import compute_api, compute_instance, instance_guard
from tests.discovery_schema import load_document, validate
from tests.fakes.compute_api import FakeComputeApi
from tests.test_provider_host import service_account_key

PROJECT, ZONE, NAME = "proj", "us-central1-c", "tpu-vllm-dev"
WHERE = {"project": PROJECT, "zone": ZONE, "name": NAME}


@pytest.fixture(autouse=True)
def engine(monkeypatch):
    """The engine's liveness as a test sets it: present until the list gets an entry (the test's stdin says
    nothing about an engine)."""
    gone: list[bool] = []
    monkeypatch.setattr(instance_guard.engine_liveness, "watch", lambda: None)
    monkeypatch.setattr(instance_guard.engine_liveness, "engine_gone", lambda: bool(gone))
    monkeypatch.setattr(instance_guard, "ENGINE_POLL_SECONDS", 0.05)
    monkeypatch.setattr(instance_guard, "_WATCHING_ENGINE", instance_guard.threading.Event())
    yield gone
    gone.append(True)  # ends this test's engine watcher


@pytest.fixture
def fake(tmp_path, monkeypatch):
    token = f"ya29.fake-{uuid.uuid4().hex}"
    with FakeComputeApi(access_token=token) as server:
        key_file = tmp_path / "adc.json"
        service_account_key(key_file, f"{server.url}/token")
        # The base URL whole (api_endpoint replaces rootUrl and servicePath both): the real one is
        # https://compute.googleapis.com/compute/v1/ (compute.v1.json rootUrl + servicePath).
        monkeypatch.setenv(compute_api.ENDPOINT_ENV, server.url + "/compute/v1/")
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key_file))
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
        yield server


def insert_body(incarnation: str) -> dict:
    """What pulumi-gcp's create POSTs for the Done-when stack (instance_args, in the API's names)."""
    args = compute_instance.instance_args(
        project=PROJECT, zone=ZONE, name=NAME, machine_type="tpu7x-standard-4t", boot_image="img",
        boot_disk_type="hyperdisk-balanced", network="default", subnetwork=None, service_account_email="vm@proj",
        metadata={}, cache_disk=f"projects/{PROJECT}/zones/{ZONE}/disks/cache", cache_device_name="persistent-disk-1",
        tags=["tpu-vllm-dev"], labels={}, provisioning_model="flex-start", run_seconds=7 * 24 * 3600)
    block = args["scheduling"]
    return {"name": NAME, "machineType": f"zones/{ZONE}/machineTypes/{args['machine_type']}",
            "description": instance_guard.description(incarnation),
            "scheduling": {"provisioningModel": block["provisioning_model"],
                           "maxRunDuration": {"seconds": str(block["max_run_duration"]["seconds"])},
                           "instanceTerminationAction": block["instance_termination_action"],
                           "automaticRestart": block["automatic_restart"],
                           "onHostMaintenance": block["on_host_maintenance"]}}


def wait_for(condition, what: str, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def armed_create() -> str:
    """The guard's create, as the provider host runs it just before the instance's; its incarnation."""
    result = instance_guard.InstanceGuardProvider().create({**WHERE, "pollSeconds": 0.1, "deleteWaitSeconds": 10})
    return result.outs["incarnation"]


def host_goes_away() -> None:
    """The provider host ends (the up interrupted, the CLI gone, the create failed) before the release."""
    watchdog = instance_guard._ARMED.pop(NAME)
    watchdog._close()
    watchdog.process.wait(timeout=30)


def test_an_interrupted_first_create_leaves_nothing_billing(fake):
    incarnation = armed_create()
    fake.insert(PROJECT, ZONE, insert_body(incarnation))  # the bridged create's POST; then its wait is cut short
    fake.capacity_arrives(PROJECT, ZONE, NAME)  # Google goes on with the insert after Pulumi stopped
    assert fake.billing() == [NAME]
    host_goes_away()
    wait_for(lambda: not fake.billing(), "the watchdog deletes the instance this create made")
    assert [r.method for r in fake.requests if "/instances/" in r.path] == ["GET", "DELETE"]


def test_a_create_still_queued_when_interrupted_is_deleted_before_it_can_bill(fake):
    incarnation = armed_create()
    fake.insert(PROJECT, ZONE, insert_body(incarnation))
    host_goes_away()
    wait_for(lambda: not fake.instances, "the PENDING instance is deleted")
    fake_ledger = fake.ledger[-1]
    assert not fake_ledger.started and fake_ledger.ended


def test_a_released_create_is_left_alone(fake):
    incarnation = armed_create()
    fake.insert(PROJECT, ZONE, insert_body(incarnation))
    fake.capacity_arrives(PROJECT, ZONE, NAME)
    instance_guard.InstanceGuardReleaseProvider().create({**WHERE, "incarnation": incarnation, "instanceId": "1"})
    assert NAME not in instance_guard._ARMED
    assert fake.billing() == [NAME] and not [r for r in fake.requests if r.method == "DELETE"]


def test_another_creates_instance_is_never_deleted(fake):
    armed_create()
    fake.insert(PROJECT, ZONE, insert_body("someone-elses"))
    fake.capacity_arrives(PROJECT, ZONE, NAME)
    host_goes_away()
    assert fake.billing() == [NAME] and not [r for r in fake.requests if r.method == "DELETE"]


def test_after_the_run_end_deleted_it_an_up_says_refresh_and_a_refreshed_up_makes_it_again(fake):
    provider = instance_guard.InstanceGuardProvider()
    olds = {**WHERE, "incarnation": "abc"}
    fake.insert(PROJECT, ZONE, insert_body("abc"))
    assert provider.diff("id", olds, dict(WHERE)).changes is False
    assert provider.read("id", olds).outs["incarnation"] == "abc"
    fake.instances.clear()  # Scheduling.instanceTerminationAction DELETE at the run's end
    with pytest.raises(instance_guard.InstanceGoneError, match=r"pulumi up --refresh"):
        provider.diff("id", olds, dict(WHERE))
    refreshed = provider.read("id", olds).outs
    assert refreshed["incarnation"] == ""
    diff = provider.diff("id", refreshed, dict(WHERE))
    assert diff.changes and diff.replaces == ["incarnation"]


def test_the_fakes_bodies_are_compute_v1s(fake):
    document = load_document("compute.v1")
    operation = fake.insert(PROJECT, ZONE, insert_body("abc"))
    assert validate(operation, {"$ref": "Operation"}, document) == []
    found = compute_api.ComputeApi().get(PROJECT, ZONE, NAME)
    assert validate(found, {"$ref": "Instance"}, document) == []
    assert found["status"] in document["schemas"]["Instance"]["properties"]["status"]["enum"]
    assert compute_api.ComputeApi().get(PROJECT, ZONE, "absent") is None
    deleted = compute_api.ComputeApi().delete(PROJECT, ZONE, NAME)
    assert validate(deleted, {"$ref": "Operation"}, document) == []
    assert json.dumps(deleted).count("compute#operation") == 1


def test_a_cli_killed_outright_hands_the_create_to_its_watchdog(fake, engine):
    incarnation = armed_create()
    fake.insert(PROJECT, ZONE, insert_body(incarnation))
    fake.capacity_arrives(PROJECT, ZONE, NAME)
    engine.append(True)  # the CLI's end of the host's stdin closed (engine_liveness)
    wait_for(lambda: not fake.billing(), "the watchdog deletes the instance once the CLI is gone")
    assert NAME not in instance_guard._ARMED


@pytest.mark.parametrize("model", ["spot", "on-demand"])
def test_a_tpu_instance_starts_pending_on_every_model_and_bills_from_running(fake, model):
    # "Flex-start … and TPU instances start instead in the PENDING state" (Google's instance life cycle page).
    body = insert_body("abc")
    body["scheduling"] = {"provisioningModel": compute_instance.PROVISIONING_MODELS[model]}
    fake.insert(PROJECT, ZONE, body)
    assert compute_api.ComputeApi().get(PROJECT, ZONE, NAME)["status"] == "PENDING" and fake.billing() == []
    fake.capacity_arrives(PROJECT, ZONE, NAME)
    assert compute_api.ComputeApi().get(PROJECT, ZONE, NAME)["status"] == "RUNNING" and fake.billing() == [NAME]
