"""The queued-resource provider against a fake TPU v2alpha1 API on 127.0.0.1."""

from __future__ import annotations

import base64
import copy

import dill
import google.auth
import pytest
from google.auth.credentials import AnonymousCredentials
from pulumi.dynamic.dynamic import serialize_provider

from components.vm import queued_resource as qr
from tests.discovery_schema import load_document, validate, validate_queued_resource
from tests.fakes.tpu_api import FakeTpuApi, Fault

PARENT = "projects/proj/locations/us-west4-a"


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
    return qr.queued_resource_body(**arguments)


def props(**overrides):
    values = {"body": body(), "parent": PARENT, "queuedResourceId": "tpu-vllm-dev",
              "waitSeconds": 10, "pollSeconds": 0.01, "deleteWaitSeconds": 5, "retryBaseSeconds": 0.01}
    values.update(overrides)
    return values


@pytest.fixture
def sleeps(monkeypatch):
    recorded: list[float] = []
    monkeypatch.setattr(qr.time, "sleep", lambda seconds: recorded.append(seconds))
    return recorded


@pytest.fixture
def api(monkeypatch, sleeps):
    def make(**kwargs):
        server = FakeTpuApi(**kwargs).__enter__()
        made.append(server)
        monkeypatch.setenv(qr.ENDPOINT_ENV, server.url + "/")
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
    assert qr.gcloud_equivalent(sent, "tpu-vllm-dev") == (
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


def test_429_honours_retry_after(api, sleeps):
    server = api()
    server.inject(Fault("GET", "/queuedResources/", 429, headers={"Retry-After": "7"}))
    qr.QueuedResourceProvider().create(props())
    assert 7.0 in sleeps


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
    with pytest.raises(qr.TpuApiError) as caught:
        qr.QueuedResourceProvider().create(props())
    assert "missing permission: tpu.queuedResources.create" in str(caught.value)
    assert "Permission denied" in str(caught.value)
    assert len(server.requests) == 1


def test_400_names_the_field(api):
    server = api()
    from tests.fakes.tpu_api import error

    server.handle = lambda request: error(400, "INVALID_ARGUMENT", "Invalid run duration", [
        {"@type": "type.googleapis.com/google.rpc.BadRequest",
         "fieldViolations": [{"field": "run_duration.max_run_duration", "description": "must be <= 7d"}]}])
    with pytest.raises(qr.TpuApiError) as caught:
        qr.QueuedResourceProvider().create(props())
    assert "field run_duration.max_run_duration: must be <= 7d" in str(caught.value)
    assert len(server.requests) == 1


def test_failed_raises_the_apis_message_and_deletes_the_request(api):
    message = 'FLEX_START provisioning model is not supported for accelerator type "v5litepod-1"'
    server = api(states=["WAITING_FOR_RESOURCES", "FAILED"], failed_message=message)
    with pytest.raises(qr.TpuApiError) as caught:
        qr.QueuedResourceProvider().create(props())
    assert message in str(caught.value) and "deleted" in str(caught.value)
    assert server.deleted == [f"{PARENT}/queuedResources/tpu-vllm-dev"]


def test_a_request_that_never_leaves_the_queue_is_bounded_and_deleted(api, monkeypatch):
    server = api(states=["WAITING_FOR_RESOURCES"] * 10_000)
    clock = iter(range(0, 10**6, 1))
    monkeypatch.setattr(qr.time, "monotonic", lambda: float(next(clock)))
    with pytest.raises(qr.TpuApiError) as caught:
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
    monkeypatch.setattr(qr.time, "monotonic", lambda: float(next(clock)))
    with pytest.raises(qr.TpuApiError) as caught:
        provider.delete(created.id, {**created.outs, "deleteWaitSeconds": 10})
    assert ("gcloud alpha compute tpus queued-resources delete tpu-vllm-dev --zone=us-west4-a --force"
            in str(caught.value))
    assert not server.deleted


def test_provider_survives_pickling_and_holds_no_credentials(api):
    api()
    provider = qr.QueuedResourceProvider()
    provider.create(props())  # a used provider must pickle just as clean
    restored = dill.loads(base64.b64decode(serialize_provider(provider)))
    assert isinstance(restored, qr.QueuedResourceProvider)
    assert vars(restored) == {}
    assert restored.diff("id", {**props(), "state": "ACTIVE"}, props()).changes is False


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


def test_an_existing_request_with_the_same_id_is_explained(api):
    server = api()
    provider = qr.QueuedResourceProvider()
    provider.create(props())
    with pytest.raises(qr.TpuApiError) as caught:
        provider.create(props())
    assert "409" in str(caught.value) and "already exists" in str(caught.value)
    assert "queued-resources delete" in str(caught.value)
    assert len(server.created_bodies) == 1
