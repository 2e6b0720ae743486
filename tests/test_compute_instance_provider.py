"""The compute path's node (components/vm/compute_instance_provider.py) against a fake Compute Engine on 127.0.0.1:
a flex-start insert queues and is waited for through PENDING; the queue giving up, a quota, a stockout and a lost
reply each end as Google words them with nothing left billing; an interrupted first create (Ctrl-C, SIGTERM,
SIGKILL of the real provider host) leaves nothing billing (the fake's ledger); an instance the run's end deleted
is made again by a plain up; labels change in place; another's instance is never touched.

The fake's answers, and the body the stack sends, are held to compute.v1.json's schemas here.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid
from pathlib import Path

import grpc
import pytest
from google.protobuf import struct_pb2
from pulumi.dynamic.dynamic import serialize_provider
from pulumi.runtime import proto, rpc

from components.vm import compute_api, compute_instance, compute_instance_provider
from components.vm.compute_api import ComputeApi, ComputeApiError
from components.vm.compute_instance_provider import ComputeInstanceProvider
from components.vm.instance_incarnation import description
from tests import test_provider_host as provider_host
from tests.discovery_schema import load_document, validate
from tests.fakes.compute_api import FakeComputeApi, quota_exceeded
from tests.test_provider_host import (
    CALL_TIMEOUT,
    Host,
    engine_kills,
    is_running,
    marshal,
    pickled_globals,
    service_account_key,
    unmarshal,
    wait_for,
)

PROJECT, ZONE, NAME = "proj", "us-central1-c", "tpu-vllm-tpu7xflex"
TYPE = compute_instance.TYPE_TOKEN
URN = f"urn:pulumi:tpu7xflex::tpu-vllm::tpu-vllm:tpu:ComputeNode${TYPE}::tpu-vm-instance"
ROOT = Path(__file__).resolve().parent.parent
SSH_KEYS_CANARY = "tpu-vllm:ssh-ed25519 AAAACANARYcomputeINPUT0123456789 tpu-vllm"


def body(**overrides) -> dict:
    """The Done-when stack's instance (tpu7x-standard-4t, flex-start, 7 days, a one-hour queue)."""
    values = dict(
        project=PROJECT, zone=ZONE, name=NAME, machine_type="tpu7x-standard-4t",
        boot_image="projects/my-proj/global/images/family/tpu-vm", boot_disk_type="hyperdisk-balanced",
        network="default", subnetwork=None, service_account_email="vm@proj.iam.gserviceaccount.com",
        metadata={"startup-script": "#!/bin/bash\ntrue\n", "block-project-ssh-keys": "TRUE"},
        cache_disk=f"projects/{PROJECT}/zones/{ZONE}/disks/tpu-vllm-tpu7xflex-cache",
        cache_device_name="persistent-disk-1", tags=["tpu-vllm-tpu7xflex"], labels={"app": "tpu-vllm"},
        provisioning_model="flex-start", run_seconds=7 * 24 * 3600, queue_seconds=3600)
    return compute_instance.instance_body(**{**values, **overrides})


def props(**overrides) -> dict:
    return {"project": PROJECT, "zone": ZONE, "name": NAME, "body": body(), "waitSeconds": 30.0,
            "pollSeconds": 0.02, "deleteWaitSeconds": 10.0, "retryBaseSeconds": 0.01, **overrides}


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
        server.key_file = key_file
        yield server


class Running:
    """A create on a thread of this process (the provider's own waits, without a host)."""

    def __init__(self, values: dict):
        self.result, self.error = None, None
        self.thread = threading.Thread(target=self._run, args=(values,), daemon=True)
        self.thread.start()

    def _run(self, values: dict) -> None:
        try:
            self.result = ComputeInstanceProvider().create(values)
        except Exception as error:  # noqa: BLE001 - the test reads it
            self.error = error

    def join(self):
        self.thread.join(timeout=CALL_TIMEOUT)
        assert not self.thread.is_alive(), "the create never returned"
        return self


def pending(fake) -> bool:
    return fake.instances.get((PROJECT, ZONE, NAME), {}).get("status") == "PENDING"


def polled_while_pending(fake, times: int = 2) -> bool:
    return pending(fake) and sum(1 for r in fake.requests if r.method == "GET" and r.path.endswith(NAME)) >= times


@pytest.mark.parametrize("done_while_pending", [True, False], ids=["op-done-while-pending", "op-done-at-running"])
def test_a_flex_start_insert_queues_and_is_waited_for_through_pending(fake, done_while_pending):
    fake.operation_done_while_pending = done_while_pending
    create = Running(props())
    wait_for(lambda: polled_while_pending(fake), "the create waiting while the VM is PENDING")
    assert fake.billing() == []
    fake.capacity_arrives(PROJECT, ZONE, NAME)
    outs = create.join().result.outs
    assert create.error is None
    [sent] = fake.inserts
    assert sent["params"] == {"requestValidForDuration": {"seconds": "3600"}}  # the queue is asked for
    assert sent["description"] == description(outs["incarnation"])
    assert outs["status"] == "RUNNING" and outs["externalIp"] == "203.0.113.7" and outs["internalIp"]
    assert outs["terminationTime"] == "2026-12-14T09:20:00.000-08:00"  # Compute Engine's own word for the end
    assert fake.billing() == [NAME]


def test_the_queue_giving_up_fails_the_create_in_googles_words_and_leaves_nothing(fake):
    fake.operation_done_while_pending = False
    create = Running(props())
    wait_for(lambda: polled_while_pending(fake), "the create waiting in the queue")
    fake.queue_gives_up(PROJECT, ZONE, NAME)
    error = create.join().error
    assert isinstance(error, ComputeApiError)
    assert "ZONE_RESOURCE_POOL_EXHAUSTED" in str(error) and "does not have enough resources" in str(error)
    assert "nothing of this create is left" in str(error)
    assert fake.billing() == [] and not fake.instances


def test_a_quota_refusal_names_the_quota_and_its_limit(fake):
    fake.faults.insert_fails = quota_exceeded("compute.googleapis.com/preemptible_tpu_v7", "PREEMPTIBLE-TPU-V7",
                                              0.0, "us-central1")
    error = Running(props()).join().error
    assert "QUOTA_EXCEEDED" in str(error) and "compute.googleapis.com/preemptible_tpu_v7" in str(error)
    assert "limit 0.0 PREEMPTIBLE-TPU-V7" in str(error)
    assert not fake.instances and fake.billing() == []


def test_giving_up_after_the_wait_deletes_the_queued_instance(fake):
    error = Running(props(waitSeconds=0.3)).join().error
    assert "gave up on tpu-vllm-tpu7xflex" in str(error) and "tpu.queueTimeout" in str(error)
    assert "deleted tpu-vllm-tpu7xflex, which this create made" in str(error)
    assert not fake.instances and fake.ledger[-1].ended and not fake.ledger[-1].started


def test_a_lost_insert_reply_is_retried_as_the_same_request(fake):
    fake.faults.lose_insert_reply = True
    create = Running(props())
    wait_for(lambda: pending(fake), "the instance inserted")
    fake.capacity_arrives(PROJECT, ZONE, NAME)
    assert create.join().error is None
    inserts = [r for r in fake.requests if r.method == "POST" and r.path.endswith("/instances")]
    assert len(inserts) == 2 and len({r.query["requestId"] for r in inserts}) == 1 and len(fake.inserts) == 1


def test_an_outage_while_queued_is_waited_out(fake):
    create = Running(props())
    wait_for(lambda: polled_while_pending(fake), "the create waiting in the queue")
    fake.faults.unavailable = 8  # more than one call's retries: the wait itself goes on through them
    wait_for(lambda: fake.faults.unavailable == 0, "the outage over")
    fake.capacity_arrives(PROJECT, ZONE, NAME)
    assert create.join().error is None


def test_an_instance_of_the_name_that_is_not_a_tpu_vllm_node_is_refused_and_left_alone(fake):
    fake.insert(PROJECT, ZONE, {**body(), "description": "the data team's VM"})
    error = Running(props()).join().error
    assert "is not a tpu-vllm node" in str(error) and "tpu-vllm:tpu.nodeId" in str(error)
    assert (PROJECT, ZONE, NAME) in fake.instances and not [r for r in fake.requests if r.method == "DELETE"]


def test_an_earlier_node_of_the_stack_that_stopped_is_deleted_and_made_anew(fake):
    fake.insert(PROJECT, ZONE, {**body(), "description": description("earlier")})
    fake.instances[(PROJECT, ZONE, NAME)]["status"] = "TERMINATED"
    create = Running(props())
    wait_for(lambda: len(fake.inserts) == 2 and pending(fake), "the new insert")
    fake.capacity_arrives(PROJECT, ZONE, NAME)
    assert create.join().error is None


def test_a_failed_create_never_deletes_an_instance_it_did_not_make(fake):
    fake.faults.insert_refused = (403, "Required 'compute.instances.create' permission for "
                                       f"'projects/{PROJECT}/zones/{ZONE}/instances/{NAME}'", "forbidden")
    error = Running(props()).join().error
    assert "403" in str(error) and "compute.instances.create" in str(error)
    assert "roles/compute.instanceAdmin.v1" not in str(error) or "forbidden" in str(error)
    assert not [r for r in fake.requests if r.method == "DELETE"]


def created(fake) -> dict:
    create = Running(props())
    wait_for(lambda: pending(fake), "the instance inserted")
    fake.capacity_arrives(PROJECT, ZONE, NAME)
    return create.join().result.outs


def test_after_the_run_end_deleted_it_a_plain_up_makes_it_again(fake):
    olds = created(fake)
    provider = ComputeInstanceProvider()
    assert provider.diff("id", olds, props()).changes is False
    fake.run_ends(PROJECT, ZONE, NAME)  # instanceTerminationAction DELETE at maxRunDuration
    diff = provider.diff("id", olds, props())
    assert diff.changes and diff.replaces == ["status"] and diff.delete_before_replace
    provider.delete("id", olds)  # the replacement's delete of a VM already gone is no error
    again = Running(props())
    wait_for(lambda: pending(fake), "the new instance")
    fake.capacity_arrives(PROJECT, ZONE, NAME)
    outs = again.join().result.outs
    assert outs["incarnation"] != olds["incarnation"]
    [_, cache] = fake.instances[(PROJECT, ZONE, NAME)]["disks"]
    assert cache["source"].endswith("/disks/tpu-vllm-tpu7xflex-cache") and cache["autoDelete"] is False


def test_a_refresh_forgets_a_gone_instance_and_keeps_a_running_one(fake):
    olds = created(fake)
    provider = ComputeInstanceProvider()
    assert provider.read("id", olds).outs["status"] == "RUNNING"
    fake.run_ends(PROJECT, ZONE, NAME)
    assert provider.read("id", olds).id is None


def test_a_label_change_is_set_in_place_and_anything_else_replaces(fake):
    olds = created(fake)
    provider = ComputeInstanceProvider()
    relabelled = props(body=body(labels={"app": "tpu-vllm", "team": "agents"}))
    diff = provider.diff("id", olds, relabelled)
    assert diff.changes and diff.replaces == []
    outs = provider.update("id", olds, relabelled).outs
    assert fake.instances[(PROJECT, ZONE, NAME)]["labels"] == {"app": "tpu-vllm", "team": "agents"}
    assert outs["body"]["labels"]["team"] == "agents" and outs["incarnation"] == olds["incarnation"]
    assert provider.diff("id", olds, props(body=body(machine_type="tpu7x-standard-1t"))).replaces == ["body"]
    assert provider.diff("id", olds, props(zone="us-central1-b")).replaces == ["zone"]


def test_an_unknown_value_in_a_preview_shows_as_a_replacement(fake):
    olds = created(fake)
    unknown = props(body={**body(), "serviceAccounts": [{"email": rpc.UNKNOWN, "scopes": []}]})
    assert ComputeInstanceProvider().diff("id", olds, unknown).replaces == ["body"]


def test_destroy_waits_until_the_instance_is_gone(fake):
    olds = created(fake)
    ComputeInstanceProvider().delete("id", olds)
    assert not fake.instances and fake.billing() == []
    assert ComputeInstanceProvider().delete("id", olds) is None  # and again: nothing to delete is no error


def test_the_body_and_the_fakes_answers_are_compute_v1s(fake):
    document = load_document("compute.v1")
    for model in compute_instance.PROVISIONING_MODELS:
        assert validate(body(provisioning_model=model), {"$ref": "Instance"}, document) == []
    operation = fake.insert(PROJECT, ZONE, {**body(), "description": description("abc")})
    assert validate(operation, {"$ref": "Operation"}, document) == []
    fake.capacity_arrives(PROJECT, ZONE, NAME)
    found = ComputeApi().get(PROJECT, ZONE, NAME)
    assert validate(found, {"$ref": "Instance"}, document) == []
    assert found["status"] in document["schemas"]["Instance"]["properties"]["status"]["enum"]
    assert ComputeApi().get(PROJECT, ZONE, "absent") is None
    deleted = ComputeApi().delete(PROJECT, ZONE, NAME)
    assert validate(deleted, {"$ref": "Operation"}, document) == []
    assert validate({"error": {"errors": [quota_exceeded("m", "L", 1.0, "r")]}}, {"$ref": "Operation"},
                    document) == []
    assert json.dumps(deleted).count("compute#operation") == 1


# The real provider host (pulumi.dynamic over gRPC, as the engine runs it), interrupted while the VM is queued.

@pytest.fixture
def host_world(fake, tmp_path):
    hosts: list[Host] = []
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LANG": "C.UTF-8", "PULUMI_PROJECT": "tpu-vllm",
           compute_api.ENDPOINT_ENV: fake.url + "/compute/v1/", "GOOGLE_APPLICATION_CREDENTIALS": str(fake.key_file),
           "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}

    def start() -> Host:
        host = Host(ROOT, env, tmp_path / f"host-{len(hosts)}.stderr")
        hosts.append(host)
        host.call("Configure", proto.ConfigureRequest(args=struct_pb2.Struct(), acceptResources=True))
        return host

    yield fake, start
    for host in hosts:
        if host.process.poll() is None:
            host.stop()


def watchdogs_of(host: Host) -> list[int]:
    return provider_host.watchdogs_of(host, "components.vm.instance_watchdog_process")


def queued_on_a_host(host_world):
    fake, start = host_world
    blob = serialize_provider(ComputeInstanceProvider())
    assert pickled_globals(blob) == [("components.vm.compute_instance_provider", "ComputeInstanceProvider")]
    values = props(pollSeconds=0.05, waitSeconds=120.0, deleteWaitSeconds=30.0)
    values["body"]["metadata"]["items"].append({"key": "ssh-keys", "value": SSH_KEYS_CANARY})
    host = start()
    future = host.stub.Create.future(proto.CreateRequest(
        urn=URN, type=TYPE, name="tpu-vm-instance",
        properties=marshal({**values, "__provider": blob}, False)), timeout=CALL_TIMEOUT * 3)
    wait_for(lambda: polled_while_pending(fake), "the create waiting in the queue on the host")
    return fake, host, future


def test_the_real_host_creates_the_vm_once_capacity_comes(host_world):
    fake, host, future = queued_on_a_host(host_world)
    fake.capacity_arrives(PROJECT, ZONE, NAME)
    outs = unmarshal(future.result().properties)
    assert outs["status"] == "RUNNING" and fake.billing() == [NAME]
    wait_for(lambda: not watchdogs_of(host), "the released watchdog gone")


def test_ctrl_c_during_the_queue_wait_leaves_nothing_billing(host_world):
    fake, host, future = queued_on_a_host(host_world)
    engine_kills(host)  # the engine's SIGINT, then SIGKILL after its grace
    wait_for(lambda: not fake.instances, "the queued instance deleted")
    assert fake.billing() == [] and not fake.ledger[-1].started
    with pytest.raises(grpc.RpcError):
        future.result()
    stderr = host.stderr_path.read_text()
    assert "tpu-vllm-tpu7xflex" in stderr and SSH_KEYS_CANARY not in stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_host_terminated_or_killed_during_the_queue_wait_leaves_nothing_billing(host_world, signum):
    fake, host, future = queued_on_a_host(host_world)
    [watchdog] = watchdogs_of(host)
    os.killpg(os.getpgid(host.process.pid), signum)
    assert host.process.wait(timeout=CALL_TIMEOUT) == -signum  # no Python ran in the host
    wait_for(lambda: not fake.instances, "the watchdog deletes the queued instance")
    assert fake.billing() == [] and not fake.ledger[-1].started
    wait_for(lambda: "the create of tpu-vllm-tpu7xflex ended early: deleted tpu-vllm-tpu7xflex, which this create made"
             in host.stderr_path.read_text(), "the watchdog's line")
    wait_for(lambda: not is_running(watchdog), "the watchdog ending once it has acted")


def test_the_run_end_is_compute_engines_word_and_else_the_start_plus_the_run():
    said = {"status": "RUNNING", "lastStartTimestamp": "2026-12-07T10:00:00.000-08:00",
            "resourceStatus": {"scheduling": {"terminationTimestamp": "2026-12-14T10:00:00.000-08:00"}}}
    assert compute_instance_provider.observed(said, body())["terminationTime"] == "2026-12-14T10:00:00.000-08:00"
    unsaid = {key: value for key, value in said.items() if key != "resourceStatus"}
    assert compute_instance_provider.observed(unsaid, body())["terminationTime"] == "2026-12-14T18:00:00Z"
    assert compute_instance_provider.observed(unsaid, body(provisioning_model="spot"))["terminationTime"] == ""
    assert compute_instance_provider.run_end("", 3600) == ""


# What the second reader found Compute Engine does that the provider did not ride out (docs/development.md's
# contracts rows for the node through Compute Engine say where each is read).

def _watchdog_request(**extra) -> dict:
    return {"project": PROJECT, "zone": ZONE, "name": NAME, "incarnation": "inc1", "pollSeconds": 0.02, **extra}


def test_the_watchdog_does_not_take_a_404_right_after_the_insert_for_nothing_made(fake):
    """googleapis/nodejs-compute issue 377: an instance whose insert was taken answers 404 for a while."""
    from components.vm import instance_watchdog_process
    fake.insert(PROJECT, ZONE, {**body(), "description": description("inc1")})
    fake.faults.hidden_gets = 3
    done, said = instance_watchdog_process.delete_if_ours(_watchdog_request(settleSeconds=5.0),
                                                          time.monotonic() + 60)
    assert done and said == f"deleted {NAME}, which this create made"
    assert not fake.instances and fake.billing() == []


def test_the_watchdog_says_nothing_was_made_only_after_the_settle_time(fake):
    from components.vm import instance_watchdog_process
    started = time.monotonic()
    done, said = instance_watchdog_process.delete_if_ours(_watchdog_request(settleSeconds=0.3), started + 10)
    assert done and said == f"found no instance {NAME} for 0.3 s: nothing of this create is left"
    # It asked, and went on asking until the settle time had passed (a lower bound: true however slow the machine).
    assert any(r.method == "GET" and r.path.endswith(NAME) for r in fake.requests)
    assert time.monotonic() - started >= 0.3


def test_a_delete_whose_operation_fails_is_sent_again_until_the_instance_is_gone(fake):
    """terraform-provider-google retries an operation that ends RESOURCE_NOT_READY; so does the cleanup."""
    from components.vm import instance_watchdog_process
    fake.insert(PROJECT, ZONE, {**body(), "description": description("inc1")})
    fake.faults.delete_fails = 1
    done, said = instance_watchdog_process.delete_if_ours(_watchdog_request(settleSeconds=0.0),
                                                          time.monotonic() + 60)
    assert done and not fake.instances
    assert sum(1 for r in fake.requests if r.method == "DELETE") == 2


def test_destroy_rides_out_a_delete_refused_while_the_instance_is_not_ready(fake):
    """400 resourceNotReady ("The resource '…' is not ready"): sent again, not handed to the user."""
    fake.insert(PROJECT, ZONE, {**body(), "description": description("inc1")})
    fake.faults.delete_not_ready = 2
    ComputeInstanceProvider().delete(f"projects/{PROJECT}/zones/{ZONE}/instances/{NAME}",
                                     props(incarnation="inc1"))
    assert not fake.instances and fake.billing() == []


def test_destroy_leaves_an_instance_of_the_name_another_create_made_alone(fake):
    fake.insert(PROJECT, ZONE, {**body(), "description": description("someone-else")})
    ComputeInstanceProvider().delete(f"projects/{PROJECT}/zones/{ZONE}/instances/{NAME}",
                                     props(incarnation="inc1"))
    assert (PROJECT, ZONE, NAME) in fake.instances


def test_a_repair_on_the_way_up_is_waited_out(fake):
    """REPAIRING "returns the instance state to its original state" (the instance life cycle page)."""
    create = Running(props())
    wait_for(lambda: polled_while_pending(fake), "the create waiting in the queue")
    fake.instances[(PROJECT, ZONE, NAME)]["status"] = "REPAIRING"
    wait_for(lambda: polled_while_repairing(fake), "the create reading the repair")
    fake.capacity_arrives(PROJECT, ZONE, NAME)
    assert create.join().error is None and fake.billing() == [NAME]


def polled_while_repairing(fake) -> bool:
    if fake.instances.get((PROJECT, ZONE, NAME), {}).get("status") != "REPAIRING":
        return False
    return sum(1 for r in fake.requests if r.method == "GET" and r.path.endswith(NAME)) >= 4


def test_an_earlier_node_that_stops_rather_than_goes_is_deleted_then_made_again(fake):
    """A stop ends TERMINATED, never gone: a STOPPING leftover is waited on until it rests, then deleted."""
    fake.insert(PROJECT, ZONE, {**body(), "description": description("earlier")})
    fake.instances[(PROJECT, ZONE, NAME)]["status"] = "STOPPING"
    create = Running(props())
    wait_for(lambda: sum(1 for r in fake.requests if r.method == "GET" and r.path.endswith(NAME)) >= 3,
             "the create waiting on the stopping leftover")
    fake.instances[(PROJECT, ZONE, NAME)]["status"] = "TERMINATED"
    wait_for(lambda: len(fake.inserts) == 2 and pending(fake), "the leftover deleted and a new insert queued")
    fake.capacity_arrives(PROJECT, ZONE, NAME)
    assert create.join().error is None


def test_a_failed_create_whose_insert_did_not_settle_watches_for_the_instance_before_saying_nothing_is_left(fake):
    """With no watchdog (not in a provider host), the cleanup itself watches the settle time when the insert's end
    was not read, and deletes the instance that shows up late."""
    fake.insert(PROJECT, ZONE, {**body(), "description": description("inc1")})
    fake.faults.hidden_gets = 3
    provider = ComputeInstanceProvider()
    said, handed_over = provider._remove_after_failed_create(
        ComputeApi(retry_base_seconds=0.01), props(settleSeconds=5.0), "inc1", None, settled=False)
    assert not handed_over and f"deleted {NAME}, which this create made" in said
    assert not fake.instances and fake.billing() == []


def test_a_failed_create_whose_insert_settled_takes_one_404_for_nothing_made(fake):
    said, _ = ComputeInstanceProvider()._remove_after_failed_create(
        ComputeApi(retry_base_seconds=0.01), props(), "inc1", None, settled=True)
    assert said == f"Cleanup: found no instance {NAME}: nothing of this create is left."
    assert sum(1 for r in fake.requests if r.method == "GET" and r.path.endswith(NAME)) == 1


@pytest.mark.parametrize("model", ["spot", "on-demand"])
def test_a_spot_or_on_demand_tpu_vm_that_starts_pending_is_waited_for(fake, model):
    """"… and TPU instances start instead in the PENDING state", whatever the model (the life cycle page)."""
    create = Running(props(body=body(provisioning_model=model, run_seconds=None, queue_seconds=None)))
    wait_for(lambda: polled_while_pending(fake), "the create waiting while the TPU VM is PENDING")
    assert "params" not in fake.inserts[0]  # only flex-start asks for the queue
    fake.capacity_arrives(PROJECT, ZONE, NAME)
    assert create.join().error is None and fake.billing() == [NAME]
