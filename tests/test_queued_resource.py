"""The queued-resource provider against a fake TPU v2alpha1 API on 127.0.0.1."""

from __future__ import annotations

import base64
import copy
import http.client
import json
import re
import socket
import uuid

import dill
import google.auth
import google.auth.exceptions
import httplib2
import pytest
from google.auth.credentials import AnonymousCredentials
from google.oauth2.credentials import Credentials as UserCredentials
from pulumi.dynamic.dynamic import serialize_provider

from components.vm import queued_resource as qr
from components.vm import tpu_api, tpu_request
from tests.discovery_schema import load_document, validate, validate_queued_resource
from tests.fakes.tpu_api import RPC_STATUS, FakeTpuApi, Fault, retry_info

PARENT = "projects/proj/locations/us-west4-a"
NAME = f"{PARENT}/queuedResources/tpu-vllm-dev"
ORIGINAL_DEFAULT_CREDENTIALS = google.auth.default
HAND_DELETE = ("gcloud alpha compute tpus queued-resources delete tpu-vllm-dev --project=proj "
               "--zone=us-west4-a --force --quiet")


def body(**overrides):
    arguments = dict(
        project="proj", zone="us-west4-a", node_id="tpu-vllm-dev", accelerator_type="v5litepod-1",
        runtime_version="v2-alpha-tpuv5-lite", provisioning_model="flex-start", run_seconds=14400,
        queue_seconds=3600, network="default", subnetwork=None,
        service_account_email="vm@proj.iam.gserviceaccount.com",
        metadata={"startup-script": "#!/bin/bash\ntrue\n", "tpu-vllm-image": "vllm/vllm-tpu:nightly"},
        data_disks=["projects/proj/zones/us-west4-a/disks/tpu-vllm-dev-cache"],
        tags=["tpu-vllm-dev"], labels={"app": "tpu-vllm"},
    )
    arguments.update(overrides)
    return tpu_request.queued_resource_body(**arguments)


def props(**overrides):
    values = {"body": body(), "parent": PARENT, "queuedResourceId": "tpu-vllm-dev",
              "waitSeconds": 10, "pollSeconds": 0.01, "deleteWaitSeconds": 5, "retryBaseSeconds": 0.01}
    values.update(overrides)
    return values


@pytest.fixture
def sleeps(monkeypatch):
    recorded: list[float] = []
    monkeypatch.setattr(tpu_api.time, "sleep", lambda seconds: recorded.append(seconds))
    return recorded


@pytest.fixture
def api(monkeypatch, sleeps):
    def make(**kwargs):
        server = FakeTpuApi(**kwargs).__enter__()
        made.append(server)
        monkeypatch.setenv(tpu_api.ENDPOINT_ENV, server.url + "/")
        return server

    made: list[FakeTpuApi] = []
    monkeypatch.setattr(google.auth, "default", lambda scopes=None: (AnonymousCredentials(), None))
    yield make
    for server in made:
        server.__exit__(None, None, None)


def assert_bodies_valid(server: FakeTpuApi):
    assert server.created_bodies
    for sent in server.created_bodies:
        assert validate_queued_resource(sent) == []


def test_flex_start_body_matches_the_discovery_schema_and_the_logs_command():
    sent = body()
    assert validate_queued_resource(sent) == []
    assert sent["provisioningModel"] == "FLEX_START"
    assert sent["runDuration"] == {"maxRunDuration": "14400s"}
    assert sent["queueingPolicy"] == {"validUntilDuration": "3600s"}
    node = sent["tpu"]["nodeSpec"][0]["node"]
    assert node["dataDisks"] == [{"sourceDisk": "projects/proj/zones/us-west4-a/disks/tpu-vllm-dev-cache",
                                  "mode": "READ_WRITE"}]
    assert tpu_request.gcloud_equivalent(sent, "tpu-vllm-dev") == (
        "gcloud alpha compute tpus queued-resources create tpu-vllm-dev --node-id=tpu-vllm-dev "
        "--zone=us-west4-a --accelerator-type=v5litepod-1 --runtime-version=v2-alpha-tpuv5-lite "
        "--provisioning-model=flex-start --max-run-duration=14400s")


@pytest.mark.parametrize(("model", "value"), [("spot", "SPOT"), ("on-demand", "STANDARD")])
def test_spot_and_on_demand_bodies_are_valid_and_have_no_run_duration(model, value):
    sent = body(provisioning_model=model, run_seconds=None)
    assert validate_queued_resource(sent) == []
    assert sent["provisioningModel"] == value and "runDuration" not in sent


def test_the_schema_check_itself_catches_unknown_fields_and_enum_values():
    bad = copy.deepcopy(body())
    bad["schedulingConfig"] = {"maxRunDuration": "14400s"}
    bad["provisioningModel"] = "FLEXSTART"
    errors = validate_queued_resource(bad)
    assert any("schedulingConfig: unknown field" in e for e in errors)
    assert any("FLEXSTART" in e for e in errors)
    document = load_document("tpu.v2alpha1")
    assert validate({"acceleratorType": 1}, {"$ref": "Node"}, document)


def test_create_waits_through_the_queue_to_active(api):
    server = api(states=["WAITING_FOR_RESOURCES", "WAITING_FOR_RESOURCES", "PROVISIONING", "ACTIVE"])
    result = qr.QueuedResourceProvider().create(props())
    assert result.id == f"{PARENT}/queuedResources/tpu-vllm-dev"
    outs = result.outs
    assert outs["state"] == "ACTIVE"
    assert outs["externalIp"] == "34.0.0.7" and outs["internalIp"] == "10.164.0.7"
    assert outs["terminationTime"] == "2026-11-29T13:00:00Z"
    assert outs["provisioningModel"] == "FLEX_START"
    assert outs["nodeName"] == f"{PARENT}/nodes/tpu-vllm-dev"
    assert outs["nodeUid"] == server.node_uids()[0] and outs["nodeUid"].isdigit()
    assert outs["nodeCreateTime"].startswith("2026-11-29T09:")
    assert_bodies_valid(server)
    create = [r for r in server.requests if r.method == "POST"][0]
    assert create.query["queuedResourceId"] == "tpu-vllm-dev"


def test_create_prints_state_changes(api, capsys):
    api(states=["WAITING_FOR_RESOURCES", "WAITING_FOR_RESOURCES", "ACTIVE"])
    qr.QueuedResourceProvider().create(props())
    err = capsys.readouterr().err
    assert err.count("WAITING_FOR_RESOURCES") == 1 and "ACTIVE" in err


def test_transient_503_then_success(api):
    server = api()
    server.inject(Fault("POST", "/queuedResources", 503, times=2))
    assert qr.QueuedResourceProvider().create(props()).outs["state"] == "ACTIVE"
    assert len([r for r in server.requests if r.method == "POST"]) == 3


def test_429_honours_the_servers_retry_info(api, sleeps):
    server = api()
    server.inject(Fault("GET", "/queuedResources/", 429, details=[retry_info(7)]))
    qr.QueuedResourceProvider().create(props())
    assert 7.0 in sleeps


def test_429_honours_a_retry_after_header_too(api, sleeps):
    server = api()
    server.inject(Fault("GET", "/queuedResources/", 429, headers={"Retry-After": "9"}))
    qr.QueuedResourceProvider().create(props())
    assert 9.0 in sleeps


def test_connection_reset_is_retried(api):
    server = api()
    server.inject(Fault("POST", "/queuedResources", 0, drop_connection=True))
    assert qr.QueuedResourceProvider().create(props()).outs["state"] == "ACTIVE"
    assert len(server.created_bodies) == 1


def test_403_fails_at_once_naming_the_permission(api):
    server = api()

    def refuse(request):
        from tests.fakes.tpu_api import error
        return error(403, "PERMISSION_DENIED", "Permission denied on resource project proj.", [
            {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "IAM_PERMISSION_DENIED",
             "metadata": {"permission": "tpu.queuedResources.create"}}])

    server.handle = refuse
    with pytest.raises(tpu_api.TpuApiError) as caught:
        qr.QueuedResourceProvider().create(props())
    assert "missing permission: tpu.queuedResources.create" in str(caught.value)
    assert "Permission denied" in str(caught.value)
    assert len(server.requests) == 1


def test_the_fake_names_each_error_status_as_code_proto_maps_it(api):
    """googleapis google/rpc/code.proto: `UNIMPLEMENTED = 12`, "HTTP Mapping: 501 Not Implemented" (not 405)."""
    server = api()
    server.inject(Fault("GET", "/queuedResources/", 501))
    host, port = server.url.removeprefix("http://").split(":")
    answers = []
    for method in ("GET", "PATCH"):  # an injected 501, and a method the API has no binding for
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
        connection.request(method, "/v2alpha1/projects/p/locations/us-west4-a/queuedResources/q")
        reply = connection.getresponse()
        answers.append((reply.status, json.loads(reply.read())["error"]))
        connection.close()
    assert [(status, body["code"], body["status"]) for status, body in answers] == [
        (501, 501, "UNIMPLEMENTED"), (501, 501, "UNIMPLEMENTED")]
    assert RPC_STATUS[501] == "UNIMPLEMENTED" and 502 not in RPC_STATUS


def test_400_names_the_field(api):
    server = api()
    from tests.fakes.tpu_api import error

    server.handle = lambda request: error(400, "INVALID_ARGUMENT", "Invalid run duration", [
        {"@type": "type.googleapis.com/google.rpc.BadRequest",
         "fieldViolations": [{"field": "run_duration.max_run_duration", "description": "must be <= 7d"}]}])
    with pytest.raises(tpu_api.TpuApiError) as caught:
        qr.QueuedResourceProvider().create(props())
    assert "field run_duration.max_run_duration: must be <= 7d" in str(caught.value)
    assert len(server.requests) == 1


def test_failed_raises_the_apis_message_and_deletes_the_request(api):
    message = 'FLEX_START provisioning model is not supported for accelerator type "v5litepod-1"'
    server = api(states=["WAITING_FOR_RESOURCES", "FAILED"], failed_message=message)
    with pytest.raises(tpu_api.TpuApiError) as caught:
        qr.QueuedResourceProvider().create(props())
    assert message in str(caught.value) and "deleted" in str(caught.value)
    assert server.deleted == [f"{PARENT}/queuedResources/tpu-vllm-dev"]


def test_a_request_that_never_leaves_the_queue_is_bounded_and_deleted(api, monkeypatch):
    server = api(states=["WAITING_FOR_RESOURCES"] * 10_000)
    clock = iter(range(0, 10**6, 1))
    monkeypatch.setattr(tpu_api.time, "monotonic", lambda: float(next(clock)))
    with pytest.raises(tpu_api.TpuApiError) as caught:
        qr.QueuedResourceProvider().create(props(waitSeconds=20))
    assert "gave up" in str(caught.value) and "queueTimeout" in str(caught.value)
    assert server.deleted


def test_read_reports_suspended_and_diff_replaces_it(api, capsys):
    server = api()
    provider = qr.QueuedResourceProvider()
    created = provider.create(props())
    server.suspend(created.id)
    read = provider.read(created.id, created.outs)
    assert read.id == created.id
    assert read.outs["state"] == "SUSPENDED" and read.outs["externalIp"] == ""
    assert "next pulumi up replaces it" in capsys.readouterr().err
    diff = provider.diff(created.id, read.outs, props())
    assert diff.changes and "state" in diff.replaces and diff.delete_before_replace


def test_an_active_request_whose_node_is_gone_is_replaced_not_dialled(api, capsys):
    server = api()
    provider = qr.QueuedResourceProvider()
    created = provider.create(props())
    server.nodes.clear()  # the node deleted by hand; the request still says ACTIVE
    read = provider.read(created.id, created.outs)
    assert read.outs["state"] == "ACTIVE" and read.outs["nodeUid"] == "" and read.outs["externalIp"] == ""
    assert "ACTIVE but its node is gone" in capsys.readouterr().err
    diff = provider.diff(created.id, read.outs, props())
    assert diff.changes and diff.replaces == ["nodeUid"] and diff.delete_before_replace


def test_a_create_that_finds_the_request_active_without_a_node_fails_and_deletes_it(api):
    server = api()
    server._make_node = lambda name: None  # GCP reports ACTIVE, but nodes.get finds nothing
    with pytest.raises(tpu_api.TpuApiError) as caught:
        qr.QueuedResourceProvider().create(props())
    assert "is ACTIVE but its node" in str(caught.value) and "does not exist" in str(caught.value)
    assert server.deleted == [f"{PARENT}/queuedResources/tpu-vllm-dev"]


def test_read_of_a_missing_request_drops_it_from_state(api):
    api()
    read = qr.QueuedResourceProvider().read(f"{PARENT}/queuedResources/gone", props(queuedResourceId="gone"))
    assert not read.id


def test_diff_replaces_on_any_request_change_and_only_updates_on_tuning():
    provider = qr.QueuedResourceProvider()
    old = {**props(), "state": "ACTIVE"}
    changed = props(body=body(run_seconds=7200))
    assert provider.diff("id", old, changed).replaces == ["body"]
    tuning = provider.diff("id", old, props(pollSeconds=30))
    assert tuning.changes and tuning.replaces == []
    assert not provider.diff("id", old, props()).changes


def test_an_unknown_request_leaf_in_a_preview_is_a_possible_replacement_an_unknown_tuning_value_is_not():
    from pulumi.runtime import rpc

    provider = qr.QueuedResourceProvider()
    old = {**props(), "state": "ACTIVE"}
    unknown_key = props()
    unknown_key["body"]["tpu"]["nodeSpec"][0]["node"]["metadata"]["ssh-keys"] = rpc.UNKNOWN
    possible = provider.diff("id", old, unknown_key)
    assert possible.changes and possible.replaces == ["body"] and possible.delete_before_replace
    assert provider.diff("id", old, props(queuedResourceId=rpc.UNKNOWN)).replaces == ["queuedResourceId"]
    tuning = provider.diff("id", old, props(pollSeconds=rpc.UNKNOWN))
    assert tuning.changes and tuning.replaces == []


def test_delete_treats_404_as_gone(api):
    server = api()
    qr.QueuedResourceProvider().delete(f"{PARENT}/queuedResources/tpu-vllm-dev", props())
    assert [r.method for r in server.requests] == ["DELETE"]


def test_delete_retries_while_the_api_refuses_then_succeeds(api):
    server = api(refuse_delete=2)
    provider = qr.QueuedResourceProvider()
    created = provider.create(props())
    provider.delete(created.id, created.outs)
    assert server.deleted == [created.id]
    assert all(r.query.get("force") == "true" for r in server.requests if r.method == "DELETE")


def test_delete_refused_past_the_bound_names_the_gcloud_command(api, monkeypatch):
    server = api(refuse_delete=10_000)
    provider = qr.QueuedResourceProvider()
    created = provider.create(props())
    clock = iter(range(0, 10**6, 1))
    monkeypatch.setattr(tpu_api.time, "monotonic", lambda: float(next(clock)))
    with pytest.raises(tpu_api.TpuApiError) as caught:
        provider.delete(created.id, {**created.outs, "deleteWaitSeconds": 10})
    assert HAND_DELETE in str(caught.value)
    assert not server.deleted


def test_provider_survives_pickling_and_holds_no_credentials(api):
    api()
    provider = qr.QueuedResourceProvider()
    provider.create(props())  # a used provider must pickle just as clean
    restored = dill.loads(base64.b64decode(serialize_provider(provider)))
    assert isinstance(restored, qr.QueuedResourceProvider)
    assert vars(restored) == {}
    assert restored.diff("id", {**props(), "state": "ACTIVE"}, props()).changes is False

# The provider as stacks' state holds it: pulumi's serialize_provider (pulumi/pulumi
# sdk/python/lib/pulumi/dynamic/dynamic.py, pkg/v3.259.0-14) pickles it with dill, its class by reference
# (module path and name), and the host loads it back with dill.loads (sdk/python/lib/pulumi/dynamic/__main__.py,
# get_provider) on refresh, update and destroy. These blobs were made on main at 2dd964c, before
# queued_resource.py was split into tpu_request, tpu_api, host_stopping and tpu_node: under the wing's module,
# and under the top-level path of stacks made before components/vm/ existed.
STATE_BLOBS_BEFORE_THE_SPLIT = {
    "components.vm.queued_resource": (
        "gASVPwAAAAAAAACMHWNvbXBvbmVudHMudm0ucXVldWVkX3Jlc291cmNllIwW"
        "UXVldWVkUmVzb3VyY2VQcm92aWRlcpSTlCmBlC4="),
    "components.queued_resource": (
        "gASVPAAAAAAAAACMGmNvbXBvbmVudHMucXVldWVkX3Jlc291cmNllIwWUXVl"
        "dWVkUmVzb3VyY2VQcm92aWRlcpSTlCmBlC4="),
}


@pytest.mark.parametrize("module_path", sorted(STATE_BLOBS_BEFORE_THE_SPLIT))
def test_a_provider_pickled_into_state_before_the_split_still_loads_and_reads(api, module_path):
    api()
    created = qr.QueuedResourceProvider().create(props())
    restored = dill.loads(base64.b64decode(STATE_BLOBS_BEFORE_THE_SPLIT[module_path]))
    assert type(restored) is qr.QueuedResourceProvider
    assert restored.read(created.id, created.outs).id == created.id


def test_the_provider_pickles_today_exactly_as_stacks_state_holds_it():
    # A different blob would be a change of every stack's `__provider` input: the class stays at its path.
    assert qr.QueuedResourceProvider.__module__ == "components.vm.queued_resource"
    assert (serialize_provider(qr.QueuedResourceProvider())
            == STATE_BLOBS_BEFORE_THE_SPLIT["components.vm.queued_resource"])


def test_no_spurious_update_when_inputs_carry_output_placeholders(api):
    # The resource declares its outputs as None-valued inputs (how dynamic resources expose attributes).
    api()
    provider = qr.QueuedResourceProvider()
    placeholders = dict.fromkeys(["queuedResourceName", "nodeName", "state", "externalIp", "internalIp"])
    created = provider.create({**placeholders, **props()})
    diff = provider.diff(created.id, created.outs, {**placeholders, **props()})
    assert not diff.changes
    updated = provider.update(created.id, created.outs, {**placeholders, **props(pollSeconds=1)})
    assert updated.outs["externalIp"] == "34.0.0.7" and updated.outs["pollSeconds"] == 1


# A retried or repeated create never leaves a queued resource Pulumi does not track.

def posts(server: FakeTpuApi):
    return [r for r in server.requests if r.method == "POST" and "/queuedResources" in r.path]


def test_every_retry_of_a_create_carries_the_same_request_id_and_a_new_create_a_new_one(api):
    server = api()
    server.inject(Fault("POST", "/queuedResources", 503, times=2))
    provider = qr.QueuedResourceProvider()
    provider.create(props())
    first = {r.query.get("requestId") for r in posts(server)}
    assert len(posts(server)) == 3 and len(first) == 1
    assert uuid.UUID(first.pop()).version == 4
    provider.delete(NAME, props())
    provider.create(props())
    assert len({r.query["requestId"] for r in posts(server)}) == 2


@pytest.mark.parametrize("lost_reply", [
    Fault("POST", "/queuedResources", 503, after_handling=True),
    Fault("POST", "/queuedResources", 0, drop_connection=True, after_handling=True),
], ids=["503", "connection-reset"])
@pytest.mark.parametrize("honour_request_id", [True, False], ids=["idempotent-api", "409-on-retry"])
def test_a_create_whose_reply_is_lost_ends_with_exactly_one_tracked_request(api, lost_reply, honour_request_id):
    server = api(honour_request_id=honour_request_id)
    server.inject(lost_reply)
    result = qr.QueuedResourceProvider().create(props())
    assert list(server.queued) == [result.id] == [NAME]
    assert len(server.created_bodies) == 1 and not server.deleted
    assert result.outs["state"] == "ACTIVE" and result.outs["nodeUid"] == server.node_uids()[0]


def test_a_create_whose_operation_fails_because_the_name_is_taken_never_deletes_that_request(api):
    """Should the API accept the POST and fail its operation with ALREADY_EXISTS (google.rpc.Code 6) rather
    than answer 409, the request of that name is not this create's: it must not be deleted."""
    server = api(conflict_in_operation=True)
    server.seed(NAME, body(labels={"owner": "someone-else"}), "ACTIVE")
    with pytest.raises(tpu_api.TpuApiError, match=r"queuedResources.create failed: .* already exists \(code 6\)"):
        qr.QueuedResourceProvider().create(props())
    assert server.deleted == [] and list(server.queued) == [NAME]


@pytest.mark.parametrize("state", ["WAITING_FOR_RESOURCES", "PROVISIONING", "ACTIVE"])
def test_an_existing_request_with_this_stacks_body_is_adopted_and_waited_for(api, capsys, state):
    # What an interrupted earlier `pulumi up` leaves: same id, same body, unknown to the state.
    server = api()
    server.seed(NAME, body(labels={}), state, then=[] if state == "ACTIVE" else ["PROVISIONING", "ACTIVE"])
    result = qr.QueuedResourceProvider().create(props(body=body(labels={})))
    assert result.id == NAME and result.outs["state"] == "ACTIVE"
    assert result.outs["externalIp"] == "34.0.0.7" and result.outs["nodeUid"] == server.node_uids()[0]
    assert server.created_bodies == [] and server.deleted == [] and list(server.queued) == [NAME]
    assert f"adopting the existing request ({state})" in capsys.readouterr().err


def test_an_existing_request_with_another_body_is_refused_with_the_exact_delete_command(api):
    server = api()
    server.seed(NAME, body(accelerator_type="v5litepod-4"), "WAITING_FOR_RESOURCES")
    with pytest.raises(tpu_api.TpuApiError) as caught:
        qr.QueuedResourceProvider().create(props())
    message = str(caught.value)
    assert "already exists (WAITING_FOR_RESOURCES)" in message
    assert "differs in: tpu.nodeSpec[0].node.acceleratorType" in message
    assert HAND_DELETE in message and "tpu-vllm:tpu.nodeId" in message
    assert server.created_bodies == [] and server.deleted == []


def test_a_stale_request_still_being_deleted_is_waited_out_then_requested_anew(api, capsys):
    server = api()
    server.seed(NAME, body(accelerator_type="v5litepod-4"), "DELETING", deleting_reads=3)
    result = qr.QueuedResourceProvider().create(props())
    assert result.id == NAME and result.outs["state"] == "ACTIVE"
    assert len(server.created_bodies) == 1 and list(server.queued) == [NAME]
    assert server.queued[NAME]["tpu"]["nodeSpec"][0]["node"]["acceleratorType"] == "v5litepod-1"
    assert "being deleted; waiting for it" in capsys.readouterr().err


def test_a_stale_request_that_never_finishes_deleting_is_bounded(api, monkeypatch):
    server = api()
    server.seed(NAME, body(), "DELETING", deleting_reads=10**6)
    clock = iter(range(0, 10**6, 1))
    monkeypatch.setattr(tpu_api.time, "monotonic", lambda: float(next(clock)))
    with pytest.raises(tpu_api.TpuApiError) as caught:
        qr.QueuedResourceProvider().create(props(deleteWaitSeconds=10))
    assert "still being deleted" in str(caught.value) and HAND_DELETE in str(caught.value)
    assert server.created_bodies == []


@pytest.mark.parametrize("dead_state", ["SUSPENDED", "FAILED"])
def test_a_dead_earlier_request_of_this_stack_is_deleted_and_requested_anew(api, dead_state):
    server = api()
    server.seed(NAME, body(), dead_state)
    result = qr.QueuedResourceProvider().create(props())
    assert server.deleted == [NAME] and len(server.created_bodies) == 1
    assert list(server.queued) == [result.id] and result.outs["state"] == "ACTIVE"


def test_request_comparison_ignores_what_the_server_adds_and_empty_values_it_leaves_out():
    sent = body(labels={}, tags=[])
    observed = copy.deepcopy(sent)
    node = observed["tpu"]["nodeSpec"][0]["node"]
    del node["labels"], node["tags"]
    node.update({"name": "projects/proj/locations/us-west4-a/nodes/tpu-vllm-dev", "id": "1", "state": "READY"})
    observed.update({"name": NAME, "createTime": "2026-11-29T09:00:00Z", "state": {"state": "ACTIVE"}})
    observed["runDuration"]["terminationTime"] = "2026-11-29T13:00:00Z"
    observed["queueingPolicy"] = {"validUntilTime": "2026-11-29T10:00:00Z"}
    assert tpu_request.request_differences(sent, observed) == []

    other_script = copy.deepcopy(observed)
    other_script["tpu"]["nodeSpec"][0]["node"]["metadata"]["startup-script"] = "#!/bin/bash\nfalse\n"
    assert tpu_request.request_differences(sent, other_script) == ["tpu.nodeSpec[0].node.metadata.startup-script"]
    no_run_duration = copy.deepcopy(observed)
    del no_run_duration["runDuration"]
    assert tpu_request.request_differences(sent, no_run_duration) == ["runDuration"]
    two_disks = copy.deepcopy(observed)
    two_disks["tpu"]["nodeSpec"][0]["node"]["dataDisks"].append({"sourceDisk": "other", "mode": "READ_WRITE"})
    assert tpu_request.request_differences(sent, two_disks) == ["tpu.nodeSpec[0].node.dataDisks"]
    other_deadline = copy.deepcopy(observed)
    other_deadline["queueingPolicy"] = {"validUntilDuration": "60s"}
    assert tpu_request.request_differences(sent, other_deadline) == ["queueingPolicy.validUntilDuration"]


def test_operations_are_waited_for_until_done(api):
    server = api(operation_polls=3)
    qr.QueuedResourceProvider().create(props())
    paths = [r.path for r in server.requests if r.method == "GET"]
    operation_reads = [p for p in paths if "/operations/" in p]
    assert len(operation_reads) == 4
    assert paths.index(operation_reads[-1]) < next(i for i, p in enumerate(paths) if "/queuedResources/" in p)


def test_a_new_node_after_the_run_ends_has_a_new_uid(api):
    server = api()
    provider = qr.QueuedResourceProvider()
    first = provider.create(props())
    server.suspend(first.id)
    read = provider.read(first.id, first.outs)
    assert read.outs["nodeUid"] == "" and read.outs["nodeName"] == ""
    assert "state" in provider.diff(first.id, read.outs, props()).replaces
    provider.delete(first.id, read.outs)
    second = provider.create(props())
    assert second.outs["nodeName"] == first.outs["nodeName"]
    assert second.outs["nodeUid"] not in ("", first.outs["nodeUid"])


# Progress while waiting, on an injected clock: no real waiting.

class FakeClock:
    def __init__(self) -> None:
        self.now = 5000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_the_wait_logs_state_and_elapsed_time_at_least_every_minute(api, monkeypatch, capsys):
    api(states=["WAITING_FOR_RESOURCES"] * 40 + ["PROVISIONING"] * 12 + ["ACTIVE"], operation_polls=0)
    clock = FakeClock()
    monkeypatch.setattr(tpu_api.time, "monotonic", clock.monotonic)
    monkeypatch.setattr(tpu_api.time, "sleep", clock.sleep)
    qr.QueuedResourceProvider().create(props(pollSeconds=15, waitSeconds=5400))
    err = capsys.readouterr().err
    progress = re.findall(r"tpu-vllm-dev: (\w+), (\d+m\d\ds) since the request \(gives up after 1h30m\)", err)
    seconds = [int(e.split("m")[0]) * 60 + int(e.split("m")[1][:-1]) for _, e in progress]
    assert seconds[0] == 0 and seconds == sorted(seconds)
    assert max(b - a for a, b in zip(seconds, seconds[1:], strict=False)) <= 60
    assert seconds[-1] == 52 * 15
    # Not a line per poll: a line a minute, plus one per state change.
    assert len(progress) <= 52 * 15 // 60 + 3
    assert [state for state, _ in progress].count("PROVISIONING") >= 3
    assert ("PROVISIONING", "10m00s") in progress and progress[-1][0] == "ACTIVE"


def test_elapsed_time_reads_in_hours_past_the_first_hour():
    assert tpu_api.duration(0) == "0m00s"
    assert tpu_api.duration(61) == "1m01s"
    assert tpu_api.duration(3725) == "1h02m"


# Network and credential faults: a transient one is retried within a bound, a permanent one is a clear error.

def flaky_request(fault: Exception, failures: int = 1):
    """A discovery-client request whose first `failures` executions raise `fault`."""
    calls: list[int] = []

    class Request:
        def execute(self, num_retries=0):
            calls.append(1)
            if len(calls) <= failures:
                raise fault
            return {"ok": True}

    return Request, calls


TRANSIENT_FAULTS = {
    "dns": httplib2.ServerNotFoundError("Unable to find the server at tpu.googleapis.com"),
    "token-refresh-transport": google.auth.exceptions.TransportError("token refresh: connection refused"),
    "token-endpoint-5xx": google.auth.exceptions.RefreshError("temporarily_unavailable: try later", retryable=True),
    "reply-cut-short": http.client.IncompleteRead(b"{\"na", 120),
    "connection-reset": ConnectionResetError(104, "Connection reset by peer"),
}


@pytest.mark.parametrize("fault", TRANSIENT_FAULTS.values(), ids=TRANSIENT_FAULTS.keys())
def test_a_transient_transport_error_is_retried(fault):
    request, calls = flaky_request(fault)
    waits: list[float] = []
    api = tpu_api.TpuApi(retry_base_seconds=1, sleep=waits.append)
    assert api.call("queuedResources.get", request) == {"ok": True}
    assert len(calls) == 2 and waits == [1]


@pytest.mark.parametrize("fault", TRANSIENT_FAULTS.values(), ids=TRANSIENT_FAULTS.keys())
def test_a_transport_error_that_lasts_is_a_bounded_clear_error(fault):
    request, calls = flaky_request(fault, failures=10**6)
    waits: list[float] = []
    api = tpu_api.TpuApi(retry_base_seconds=1, sleep=waits.append)
    with pytest.raises(tpu_api.TpuApiError) as caught:
        api.call("queuedResources.delete", request)
    assert len(calls) == 6 and waits == [1, 2, 4, 8, 16]
    message = str(caught.value)
    assert caught.value.transient
    assert "queuedResources.delete" in message and "after 6 attempts" in message
    assert type(fault).__name__ in message and "DNS, proxy, firewall" in message


PERMANENT_FAULTS = {
    "refresh-refused": (google.auth.exceptions.RefreshError(
        "invalid_grant: Token has been expired or revoked.", {"error": "invalid_grant"}), "invalid_grant"),
    "reauth-needed": (google.auth.exceptions.ReauthFailError("reauth is needed"), "Reauthentication failed"),
    "no-credentials": (google.auth.exceptions.DefaultCredentialsError(
        "Your default credentials were not found."), "default credentials were not found"),
    "no-credentials-file": (google.auth.exceptions.OSError("File /nope/adc.json was not found."), "/nope/adc.json"),
}


@pytest.mark.parametrize(("fault", "said"), PERMANENT_FAULTS.values(), ids=PERMANENT_FAULTS.keys())
def test_a_credential_failure_is_not_retried_and_says_how_to_sign_in(fault, said):
    request, calls = flaky_request(fault, failures=10**6)
    waits: list[float] = []
    with pytest.raises(tpu_api.TpuApiError) as caught:
        tpu_api.TpuApi(retry_base_seconds=1, sleep=waits.append).call("queuedResources.create", request)
    assert len(calls) == 1 and waits == []
    message = str(caught.value)
    assert not caught.value.transient
    assert "queuedResources.create" in message and said in message
    assert "gcloud auth application-default login" in message and "GOOGLE_APPLICATION_CREDENTIALS" in message


def test_a_permanent_httplib2_error_is_a_clear_error_not_a_retry():
    request, calls = flaky_request(httplib2.ProxiesUnavailableError("Proxy support missing"), failures=10**6)
    with pytest.raises(tpu_api.TpuApiError) as caught:
        tpu_api.TpuApi(retry_base_seconds=1, sleep=lambda seconds: None).call("queuedResources.get", request)
    assert len(calls) == 1
    assert "queuedResources.get" in str(caught.value) and "HTTPS_PROXY" in str(caught.value)


def test_a_bug_is_not_dressed_up_as_an_outage():
    request, calls = flaky_request(KeyError("body"), failures=10**6)
    with pytest.raises(KeyError):
        tpu_api.TpuApi(retry_base_seconds=1, sleep=lambda seconds: None).call("queuedResources.get", request)
    assert len(calls) == 1


# The same faults through the real client stack (discovery client, httplib2, google-auth) and the fake API.

REFRESH_TOKEN_CANARY = "1//canary-refresh-token-0123456789"
CLIENT_SECRET_CANARY = "canary-client-secret-0123456789"


@pytest.fixture
def dns(monkeypatch):
    """`localhost` lookups fail `dns["localhost"]` times first (a DNS blip), then give 127.0.0.1 only.

    Only lookups made from Python are affected, and only `localhost`: nothing leaves the machine."""
    real = socket.getaddrinfo
    failures: dict[str, int] = {}

    def getaddrinfo(host, port, *args, **kwargs):
        if host == "localhost":
            if failures.get(host, 0) > 0:
                failures[host] -= 1
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
            host = "127.0.0.1"
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    return failures


def signed_in_user(monkeypatch, token_uri: str) -> None:
    """Application Default Credentials of a user (`gcloud auth application-default login`)."""
    credentials = UserCredentials(token=None, refresh_token=REFRESH_TOKEN_CANARY, token_uri=token_uri,
                                  client_id="client.apps.googleusercontent.com",
                                  client_secret=CLIENT_SECRET_CANARY, scopes=[tpu_request.CLOUD_PLATFORM_SCOPE])
    monkeypatch.setattr(google.auth, "default", lambda scopes=None: (credentials, "proj"))


def test_a_dns_blip_on_the_api_is_retried(api, dns, monkeypatch, capsys):
    server = api()
    monkeypatch.setenv(tpu_api.ENDPOINT_ENV, f"http://localhost:{server.port}/")
    dns["localhost"] = 2
    result = qr.QueuedResourceProvider().create(props())
    assert result.outs["state"] == "ACTIVE" and dns["localhost"] == 0
    assert len(server.created_bodies) == 1
    assert "queuedResources.create: ServerNotFoundError" in capsys.readouterr().err


def test_a_dns_blip_on_the_token_endpoint_is_retried(api, dns, monkeypatch, capsys):
    server = api(access_token="ya29.fake-token")
    signed_in_user(monkeypatch, f"http://localhost:{server.port}/token")
    dns["localhost"] = 2
    result = qr.QueuedResourceProvider().create(props())
    assert result.outs["state"] == "ACTIVE" and dns["localhost"] == 0
    assert len(server.token_requests) == 1 and len(server.created_bodies) == 1
    assert "queuedResources.create: TransportError" in capsys.readouterr().err


def test_a_token_endpoint_outage_is_retried(api, monkeypatch):
    # google-auth tries 3 times itself, then gives up with a RefreshError it marks retryable.
    server = api(access_token="ya29.fake-token")
    signed_in_user(monkeypatch, f"{server.url}/token")
    server.refuse_tokens(503, "temporarily_unavailable", "try again later", times=4)
    assert qr.QueuedResourceProvider().create(props()).outs["state"] == "ACTIVE"
    assert len(server.token_requests) == 5 and len(server.created_bodies) == 1


def test_refused_credentials_end_the_create_at_once_with_how_to_sign_in(api, monkeypatch, capsys):
    server = api(access_token="ya29.fake-token")
    signed_in_user(monkeypatch, f"{server.url}/token")
    server.refuse_tokens(400, "invalid_grant", "Token has been expired or revoked.", times=10)
    with pytest.raises(tpu_api.TpuApiError) as caught:
        qr.QueuedResourceProvider().create(props())
    message = str(caught.value)
    assert "invalid_grant: Token has been expired or revoked." in message
    assert "gcloud auth application-default login" in message
    assert len(server.token_requests) == 1 and server.created_bodies == []
    seen = message + capsys.readouterr().err
    assert REFRESH_TOKEN_CANARY not in seen and CLIENT_SECRET_CANARY not in seen


def test_missing_credentials_end_the_create_with_how_to_sign_in(api, monkeypatch, tmp_path):
    server = api()
    monkeypatch.setattr(google.auth, "default", ORIGINAL_DEFAULT_CREDENTIALS)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing-adc.json"))
    with pytest.raises(tpu_api.TpuApiError) as caught:
        qr.QueuedResourceProvider().create(props())
    assert "missing-adc.json" in str(caught.value)
    assert "gcloud auth application-default login" in str(caught.value)
    assert server.requests == []


def test_an_api_401_says_how_to_sign_in(api, monkeypatch):
    # google-auth-httplib2 refreshes the token and tries again on a 401, twice, then hands it over.
    server = api(access_token="ya29.fake-token")
    signed_in_user(monkeypatch, f"{server.url}/token")
    server.inject(Fault("POST", "/queuedResources", 401, times=3))
    with pytest.raises(tpu_api.TpuApiError) as caught:
        qr.QueuedResourceProvider().create(props())
    assert "401" in str(caught.value) and "gcloud auth application-default login" in str(caught.value)


def test_a_page_that_is_not_the_api_is_a_clear_error(api):
    server = api()
    server.inject(Fault("POST", "/queuedResources", 200, raw_body=b"<html>Sign in to the proxy</html>"))
    with pytest.raises(tpu_api.TpuApiError) as caught:
        qr.QueuedResourceProvider().create(props())
    assert "something other than JSON" in str(caught.value) and "Sign in to the proxy" in str(caught.value)
    assert server.created_bodies == []


# An outage once the request is on the server: the wait rides it out until its deadline; a create that
# still fails deletes its request (a failed create is not in Pulumi's state, so destroy would not), or
# names the command that does. All on an injected clock.

@pytest.fixture
def clock(monkeypatch, sleeps):
    fake = FakeClock()
    monkeypatch.setattr(tpu_api.time, "monotonic", fake.monotonic)
    monkeypatch.setattr(tpu_api.time, "sleep", fake.sleep)
    return fake


WAIT = 1800  # waitSeconds: the queue deadline plus provisioning
DELETE_WAIT = 1200


def real_props(**overrides):
    """The provider's own defaults for polling and retries: outages are measured in real (fake-clock) time."""
    return props(**{"waitSeconds": WAIT, "deleteWaitSeconds": DELETE_WAIT, "pollSeconds": 15, "retryBaseSeconds": 1,
                    **overrides})


@pytest.mark.parametrize("outage_starts", [0, 120], ids=["during-the-create-operation", "in-the-queue"])
@pytest.mark.parametrize(("outage_seconds", "outcome"), [
    (120, "active"),  # longer than one call's retry budget (6 attempts, 31 s)
    (WAIT - 300, "active"),
    (WAIT + 300, "deleted"),  # outlasts the wait, over before the delete gives up
    (float("inf"), "named"),  # the delete cannot get through either
], ids=["2-minutes", "ends-before-the-deadline", "outlasts-the-deadline", "never-ends"])
def test_an_outage_during_the_queue_wait_never_leaves_an_unmentioned_request(api, clock, capsys, outage_starts,
                                                                             outage_seconds, outcome):
    server = api(states=["WAITING_FOR_RESOURCES"] * 10 + ["PROVISIONING", "ACTIVE"], operation_polls=3)
    started = clock.now
    # Everything after the create call fails: the create operation or the queue polls, and the delete.
    begins, ends = started + outage_starts, started + outage_starts + outage_seconds
    server.outage = lambda request: request.method != "POST" and begins <= clock.now < ends
    provider = qr.QueuedResourceProvider()
    if outcome == "active":
        result = provider.create(real_props())
        assert result.id == NAME and result.outs["state"] == "ACTIVE" and result.outs["externalIp"]
        assert list(server.queued) == [NAME] and not server.deleted
        assert server.outage_replies > 6
        waited_for = "the queuedResources.create operation" if outage_starts == 0 else "tpu-vllm-dev"
        assert f"waiting for {waited_for}: TPU API refused" in capsys.readouterr().err
        return
    with pytest.raises(tpu_api.TpuApiError) as caught:
        provider.create(real_props())
    message = str(caught.value)
    assert "503" in message and "ran out" in message
    # Bounded: the wait, then at most the delete's own bound (plus the calls in flight at each deadline).
    assert clock.now - started <= WAIT + DELETE_WAIT + 2 * (31 + 15)
    assert server.outage_replies > 6
    if outcome == "deleted":
        assert server.deleted == [NAME] and NAME not in server.queued
        assert "The request was deleted, so nothing is left queued or billing." in message
        assert HAND_DELETE not in message
    else:
        assert server.deleted == [] and NAME in server.queued
        assert "Deleting it failed as well" in message and message.count(HAND_DELETE) == 1


def test_an_outage_while_queued_is_logged_and_ridden_out(api, clock, capsys):
    server = api(states=["WAITING_FOR_RESOURCES"] * 40 + ["ACTIVE"], operation_polls=0)
    started = clock.now
    server.outage = lambda request: started + 120 <= clock.now < started + 720
    result = qr.QueuedResourceProvider().create(real_props())
    assert result.outs["state"] == "ACTIVE" and not server.deleted
    err = capsys.readouterr().err
    retries = re.findall(r"waiting for tpu-vllm-dev: TPU API refused queuedResources.get \(503 UNAVAILABLE\): "
                         r"The service is currently unavailable; trying again in 15s \((\d+)m\d\ds left\)", err)
    # One line per failed round (6 attempts, then a poll) through the 10 minutes, counting down to the deadline.
    minutes_left = [int(m) for m in retries]
    assert 600 // (31 + 15) <= len(minutes_left) <= 600 // (31 + 15) + 1
    assert minutes_left[0] == (WAIT - 120 - 31) // 60 and minutes_left == sorted(minutes_left, reverse=True)


@pytest.mark.parametrize("states", [["WAITING_FOR_RESOURCES", "FAILED"], ["WAITING_FOR_RESOURCES"] * 10_000],
                         ids=["failed", "queue-deadline"])
def test_a_request_that_could_not_be_deleted_is_not_reported_as_deleted(api, clock, states):
    server = api(states=states, refuse_delete=10**6, failed_message="no capacity for FLEX_START")
    with pytest.raises(tpu_api.TpuApiError) as caught:
        qr.QueuedResourceProvider().create(real_props())
    message = str(caught.value)
    assert "was deleted" not in message and "Deleting it failed as well" in message
    assert message.count(HAND_DELETE) == 1 and NAME in server.queued


def test_a_refusal_while_queued_ends_the_wait_and_deletes_the_request(api, clock):
    server = api(states=["WAITING_FOR_RESOURCES"] * 10 + ["ACTIVE"])
    server.inject(Fault("GET", "/queuedResources/", 403))
    with pytest.raises(tpu_api.TpuApiError) as caught:
        qr.QueuedResourceProvider().create(real_props())
    assert "403" in str(caught.value) and "roles/tpu.admin" in str(caught.value)
    assert "The request was deleted" in str(caught.value) and server.deleted == [NAME]


@pytest.mark.parametrize("break_it", ["garbled-reply", "bug"])
def test_an_unexpected_failure_while_queued_deletes_the_request(api, clock, monkeypatch, break_it):
    server = api(states=["WAITING_FOR_RESOURCES", "ACTIVE"])
    if break_it == "garbled-reply":
        server.inject(Fault("GET", "/queuedResources/", 200, raw_body=b"<html>captive portal</html>"))
        said = "something other than JSON"
    else:
        def broken(*args):
            raise RuntimeError("a bug in reading the node")
        monkeypatch.setattr(qr, "_observed", broken)
        said = "unexpected RuntimeError: a bug in reading the node while waiting for tpu-vllm-dev"
    with pytest.raises(tpu_api.TpuApiError) as caught:
        qr.QueuedResourceProvider().create(real_props())
    assert said in str(caught.value) and "The request was deleted" in str(caught.value)
    assert server.deleted == [NAME]


def test_a_create_lost_in_an_outage_says_it_may_exist_and_the_next_up_adopts_it(api, clock):
    server = api()
    server.inject(Fault("POST", "/queuedResources", 503, after_handling=True))
    server.inject(Fault("POST", "/queuedResources", 503, times=5))
    provider = qr.QueuedResourceProvider()
    with pytest.raises(tpu_api.TpuApiError) as caught:
        provider.create(real_props())
    message = str(caught.value)
    assert "may have reached the API" in message and "next pulumi up adopts it" in message and HAND_DELETE in message
    assert list(server.queued) == [NAME]
    result = provider.create(real_props())
    assert result.id == NAME and len(server.created_bodies) == 1 and not server.deleted


def test_destroy_rides_out_an_outage(api, clock):
    server = api()
    provider = qr.QueuedResourceProvider()
    created = provider.create(real_props())
    started = clock.now
    server.outage = lambda request: clock.now < started + 300
    provider.delete(created.id, created.outs)
    assert server.deleted == [NAME] and NAME not in server.queued
    assert server.outage_replies > 6


def test_destroy_that_cannot_finish_names_the_command(api, clock):
    server = api(deleting_reads=10**6)
    provider = qr.QueuedResourceProvider()
    created = provider.create(real_props())
    server.outage = lambda request: request.method == "GET"
    with pytest.raises(tpu_api.TpuApiError) as caught:
        provider.delete(created.id, created.outs)
    assert str(caught.value).count(HAND_DELETE) == 1 and "ran out" in str(caught.value)
