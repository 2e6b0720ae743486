"""The queued-resource provider as the Pulumi engine runs it.

The engine starts the `pulumi-resource-pulumi-python` plugin, which runs `python -u -m pulumi.dynamic`
in the project directory, and speaks the ResourceProvider gRPC service to it; every request carries
the provider pickled by `pulumi.dynamic.dynamic.serialize_provider` in the `__provider` property.
This test does the engine's part: it starts that real host as a subprocess from the project root,
marshals properties as the engine does (secrets, unknowns), and drives Configure, Check, Diff, Create,
Read, Update and Delete against the fake TPU API. Credentials are real Application Default
Credentials: a throwaway service-account key whose token endpoint is the fake server.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import functools
import json
import os
import pickletools
import re
import select
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from google.protobuf import json_format, struct_pb2
from pulumi.dynamic.dynamic import serialize_provider
from pulumi.runtime import proto, rpc
from pulumi.runtime.proto import provider_pb2_grpc

import components.queued_resource as old_path_module
from components.vm import create_watchdog, tpu_api, tpu_request
from components.vm import queued_resource as qr
from tests.fakes.tpu_api import FakeTpuApi, Fault, retry_info
from tests.program import plain_occurrences

ROOT = Path(__file__).resolve().parent.parent
TYPE = "pulumi-python:dynamic/tpu-vllm:QueuedResource"
URN = f"urn:pulumi:dev::tpu-vllm::tpu-vllm:tpu:TpuNode${TYPE}::tpu-qr"
PARENT = "projects/proj/locations/us-west4-a"
SSH_KEYS_CANARY = "tpu-vllm:ssh-ed25519 AAAACANARYsecretINPUT0123456789 tpu-vllm"
CALL_TIMEOUT = 20  # seconds per gRPC call; the slowest (Create) takes well under one here
START_TIMEOUT = 30  # the host imports pulumi and grpc before it prints its port
ENV = shutil.which("env") or "/usr/bin/env"  # GNU coreutils >= 8.31 for --default-signal


# The engine's side of the protocol (pulumi sdk/go/common/resource/plugin/provider_plugin.go).

def secret(value: Any) -> dict[str, Any]:
    """A Pulumi secret as the engine holds it in a property map."""
    return rpc.wrap_rpc_secret(value)


def without_secrets(value: Any) -> Any:
    if rpc.is_rpc_secret(value):
        return without_secrets(value["value"])
    if isinstance(value, dict):
        return {key: without_secrets(item) for key, item in value.items()}
    if isinstance(value, list):
        return [without_secrets(item) for item in value]
    return value


def marshal(properties: dict[str, Any], accept_secrets: bool) -> struct_pb2.Struct:
    """MarshalProperties: secrets go as secrets only to a provider that said it accepts them."""
    struct = struct_pb2.Struct()
    struct.update(properties if accept_secrets else without_secrets(properties))
    return struct


def unmarshal(struct: struct_pb2.Struct) -> dict[str, Any]:
    return json_format.MessageToDict(struct)


def annotate_secrets(outs: dict[str, Any], ins: dict[str, Any]) -> dict[str, Any]:
    """annotateSecrets: for a provider that does not accept secrets, the engine marks an output
    secret where the input of the same name (recursing through objects) held one."""
    marked = dict(outs)
    for key, in_value in ins.items():
        if key not in marked:
            continue
        out_value = marked[key]
        both_objects = all(isinstance(v, dict) and not rpc.is_rpc_secret(v) for v in (out_value, in_value))
        if both_objects:
            marked[key] = annotate_secrets(out_value, in_value)
        elif not rpc.is_rpc_secret(out_value) and contains_secrets(in_value):
            marked[key] = secret(out_value)
    return marked


def contains_secrets(value: Any) -> bool:
    if rpc.is_rpc_secret(value):
        return True
    if isinstance(value, dict):
        return any(contains_secrets(item) for item in value.values())
    if isinstance(value, list):
        return any(contains_secrets(item) for item in value)
    return False


def pickled_globals(provider_blob: str) -> list[tuple[str, str]]:
    """The (module, name) pairs a pickle imports: by reference, the provider is just its class path."""
    strings, found = [], []
    for opcode, argument, _ in pickletools.genops(base64.b64decode(provider_blob)):
        if opcode.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE"):
            strings.append(argument)
        elif opcode.name == "STACK_GLOBAL":
            found.append((strings[-2], strings[-1]))
        elif opcode.name == "GLOBAL":
            found.append(tuple(argument.split(" ", 1)))
    return found


def old_path_provider_blob() -> str:
    """What state written before components/vm/ existed holds: the class under its old module."""
    provider_class = qr.QueuedResourceProvider
    assert old_path_module.QueuedResourceProvider is provider_class
    provider_class.__module__ = "components.queued_resource"
    try:
        return serialize_provider(provider_class())
    finally:
        provider_class.__module__ = "components.vm.queued_resource"


# The world around the host: the fake API, credentials, the host process.

@functools.cache
def throwaway_private_key() -> str:
    """One RSA key per test process: only the token endpoint (the fake's) differs between the key files."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def service_account_key(path: Path, token_uri: str) -> None:
    pem = throwaway_private_key()
    path.write_text(json.dumps({
        "type": "service_account", "project_id": "proj", "private_key_id": "test-key",
        "private_key": pem, "client_email": "deployer@proj.iam.gserviceaccount.com",
        "client_id": "1", "token_uri": token_uri,
    }))


class Host:
    """`python -u -m pulumi.dynamic ENGINE_ADDRESS`, as pulumi-resource-pulumi-python runs it, with its stdio
    as the engine gives it (pulumi sdk/go/common/resource/plugin/plugin.go, ExecPlugin): a stdin pipe the
    engine holds and never writes, stdout and stderr pipes the engine reads line by line (each stderr line
    becomes a diagnostic: here, a line of `stderr_path`)."""

    # SIGINT at its default, as a CLI started from a terminal or a CI runner gives it to its plugins (exec
    # keeps an ignored signal ignored). A test run started as a background job of a script (`cmd &` without
    # job control: bash ignores SIGINT in it) would hand it on ignored; one test asks for that on purpose.
    sigint = "--default-signal=INT"

    def __init__(self, cwd: Path, env: dict[str, str], stderr_path: Path):
        self.stderr_path = stderr_path
        self.process = subprocess.Popen(
            # `env` sets SIGINT's disposition (`sigint`) and execs the host: the same process.
            [ENV, self.sigint, sys.executable, "-u", "-m", "pulumi.dynamic", "127.0.0.1:1"],
            cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            # Its own process group, as the engine starts every plugin (cmdutil.RegisterProcessGroup),
            # so a signal to the group reaches the host and nothing else.
            start_new_session=True,
        )
        self._cli_dead = threading.Event()
        self.stderr_closed = threading.Event()
        """Every holder of the host's stderr has let go of it: the engine's Close would finish reading it."""
        self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_reader.start()
        ready, _, _ = select.select([self.process.stdout], [], [], START_TIMEOUT)
        assert ready, "the provider host did not print its port"
        port = int(self.process.stdout.readline())
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.enable_http_proxy", 0)])
        grpc.channel_ready_future(self.channel).result(timeout=START_TIMEOUT)
        self.stub = provider_pb2_grpc.ResourceProviderStub(self.channel)

    def _read_stderr(self) -> None:
        stderr = self.process.stderr
        with self.stderr_path.open("ab") as copy:
            while not self._cli_dead.is_set():
                ready, _, _ = select.select([stderr], [], [], 0.05)
                if not ready:
                    continue
                chunk = os.read(stderr.fileno(), 65536)
                if not chunk:
                    self.stderr_closed.set()
                    break
                copy.write(chunk)
                copy.flush()
        stderr.close()  # by the reader only: when the CLI dies, so does its end of the pipe

    def call(self, method: str, request: Any) -> Any:
        return getattr(self.stub, method)(request, timeout=CALL_TIMEOUT)

    def cli_dies(self) -> None:
        """The CLI ends without a word to its plugins (kill -9, a closed terminal, a CI runner torn down): the
        kernel closes its ends of the host's pipes and its gRPC connection; no signal reaches the host."""
        self.channel.close()
        self.process.stdin.close()
        self._cli_dead.set()  # the reader closes its end of stderr: the host's next line meets EPIPE
        self._stderr_reader.join(timeout=CALL_TIMEOUT)
        self.process.stdout.close()

    def stop(self) -> tuple[str, str]:
        """Stop the host; its stdout after the port line and its stderr."""
        self.channel.close()
        self.process.kill()
        stdout = self.process.stdout.read().decode() if not self.process.stdout.closed else ""
        self.process.wait(timeout=CALL_TIMEOUT)
        if not self.process.stdout.closed:
            self.process.stdout.close()
        if not self.process.stdin.closed:
            self.process.stdin.close()
        self._stderr_reader.join(timeout=CALL_TIMEOUT)
        return stdout, self.stderr_path.read_text()


@contextlib.contextmanager
def open_world(directory: Path):
    """The fake API, an ADC key for it, and `start` for hosts in it (each stopped, and the fake, at the end)."""
    token = f"ya29.fake-{uuid.uuid4().hex}"
    server = FakeTpuApi(access_token=token).__enter__()
    key_file = directory / "adc.json"
    service_account_key(key_file, f"{server.url}/token")
    env = {
        "PATH": os.environ["PATH"], "HOME": str(directory), "LANG": "C.UTF-8",
        "PULUMI_PROJECT": "tpu-vllm",  # the engine sets it for every plugin
        tpu_api.ENDPOINT_ENV: server.url + "/",
        "GOOGLE_APPLICATION_CREDENTIALS": str(key_file),
        "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
    }
    hosts: list[Host] = []

    def start(cwd: Path = ROOT, **more_env: str) -> Host:
        host = Host(cwd, {**env, **more_env}, directory / f"host-{len(hosts)}.stderr")
        hosts.append(host)
        return host

    try:
        yield server, token, key_file, start
    finally:
        for host in hosts:
            if host.process.poll() is None:
                host.stop()
        server.__exit__(None, None, None)


@pytest.fixture
def world(tmp_path):
    with open_world(tmp_path) as opened:
        yield opened


def inputs(provider_blob: str, **overrides: Any) -> dict[str, Any]:
    """The resource's inputs as the engine holds them: `__provider` is always a secret (pulumi.dynamic
    makes it one), and the node's ssh-keys are one here too, as when they come from secret config."""
    body = tpu_request.queued_resource_body(
        project="proj", zone="us-west4-a", node_id="tpu-vllm-dev", accelerator_type="v5litepod-1",
        runtime_version="v2-alpha-tpuv5-lite", provisioning_model="flex-start", run_seconds=14400,
        queue_seconds=3600, network="default", subnetwork=None,
        service_account_email="vm@proj.iam.gserviceaccount.com",
        metadata={"startup-script": "#!/bin/bash\ntrue\n"},
        data_disks=["projects/proj/zones/us-west4-a/disks/tpu-vllm-dev-cache"],
        tags=["tpu-vllm-dev"], labels={"app": "tpu-vllm"},
    )
    body["tpu"]["nodeSpec"][0]["node"]["metadata"]["ssh-keys"] = secret(SSH_KEYS_CANARY)
    values = {"body": body, "parent": PARENT, "queuedResourceId": "tpu-vllm-dev", "waitSeconds": 60.0,
              "pollSeconds": 0.01, "deleteWaitSeconds": 30.0, "retryBaseSeconds": 0.01,
              "__provider": secret(provider_blob)}
    values.update(overrides)
    return values


def test_the_real_host_runs_the_provider_from_the_project_root_through_every_call(world):
    server, token, key_file, start = world
    provider_blob = serialize_provider(qr.QueuedResourceProvider())
    # Pickled by reference: the host must import it, from the project directory.
    assert pickled_globals(provider_blob) == [("components.vm.queued_resource", "QueuedResourceProvider")]
    host = start()

    configured = host.call("Configure", proto.ConfigureRequest(
        args=struct_pb2.Struct(), acceptSecrets=True, acceptResources=True))
    # So the engine sends secrets as plain values and marks outputs secret by name itself,
    # and never calls Create during a preview.
    assert configured.acceptSecrets is False and configured.supportsPreview is False
    accept = configured.acceptSecrets
    ins = inputs(provider_blob)

    # Preview of a new stack: the body depends on resources not made yet.
    preview_ins = {**ins, "body": rpc.UNKNOWN}
    checked = host.call("Check", proto.CheckRequest(
        urn=URN, type=TYPE, name="tpu-qr", olds=struct_pb2.Struct(), news=marshal(preview_ins, accept)))
    assert list(checked.failures) == []
    assert unmarshal(checked.inputs)["body"] == rpc.UNKNOWN

    checked = host.call("Check", proto.CheckRequest(
        urn=URN, type=TYPE, name="tpu-qr", olds=struct_pb2.Struct(), news=marshal(ins, accept)))
    assert unmarshal(checked.inputs) == without_secrets(ins)

    created = host.call("Create", proto.CreateRequest(
        urn=URN, type=TYPE, name="tpu-qr", properties=marshal(ins, accept), timeout=CALL_TIMEOUT))
    outs = unmarshal(created.properties)
    assert created.id == f"{PARENT}/queuedResources/tpu-vllm-dev" and list(server.queued) == [created.id]
    assert outs["state"] == "ACTIVE" and outs["externalIp"] == "34.0.0.7"
    assert outs["nodeUid"] == server.node_uids()[0] and outs["nodeCreateTime"]
    sent = server.created_bodies[0]["tpu"]["nodeSpec"][0]["node"]["metadata"]
    assert sent["ssh-keys"] == SSH_KEYS_CANARY  # the API gets the value, not the secret wrapper
    # Every secret input comes back under its own name, so the engine keeps it secret in state.
    stored = annotate_secrets(outs, ins)
    assert rpc.is_rpc_secret(stored["__provider"])
    assert plain_occurrences(stored, SSH_KEYS_CANARY) == []
    assert plain_occurrences(stored, provider_blob) == []

    # Preview of a change whose body (or one leaf of it) is unknown yet: a possible replacement, since any
    # change of the body is one and `pulumi up` diffs again with every value known and would then replace the
    # running TPU without another confirmation. The preview must not understate it (the bridge shows an
    # unknown ForceNew value as a replacement too: pulumi-terraform-bridge v3.136.0
    # pkg/tests/diff_test/detailed_diff_unknown_test.go).
    unknown_leaf = json.loads(json.dumps(ins))
    unknown_leaf["body"]["tpu"]["nodeSpec"][0]["node"]["metadata"]["ssh-keys"] = rpc.UNKNOWN
    for news in (preview_ins, unknown_leaf):
        diff = host.call("Diff", proto.DiffRequest(
            id=created.id, urn=URN, type=TYPE, name="tpu-qr", olds=created.properties,
            old_inputs=marshal(ins, accept), news=marshal(news, accept)))
        assert diff.changes == proto.DiffResponse.DIFF_SOME
        assert list(diff.replaces) == ["body"] and diff.deleteBeforeReplace
    # A known difference beside an unknown leaf is a new request, the old one deleted first.
    resized = json.loads(json.dumps(unknown_leaf))
    resized["body"]["tpu"]["nodeSpec"][0]["node"]["acceleratorType"] = "v5litepod-4"
    diff = host.call("Diff", proto.DiffRequest(
        id=created.id, urn=URN, type=TYPE, name="tpu-qr", olds=created.properties,
        old_inputs=marshal(ins, accept), news=marshal(resized, accept)))
    assert diff.changes == proto.DiffResponse.DIFF_SOME
    assert list(diff.replaces) == ["body"] and diff.deleteBeforeReplace
    diff = host.call("Diff", proto.DiffRequest(
        id=created.id, urn=URN, type=TYPE, name="tpu-qr", olds=created.properties,
        old_inputs=marshal(ins, accept), news=marshal(ins, accept)))
    assert diff.changes == proto.DiffResponse.DIFF_NONE

    read = host.call("Read", proto.ReadRequest(
        id=created.id, urn=URN, type=TYPE, name="tpu-qr", properties=created.properties,
        inputs=marshal(ins, accept)))
    assert read.id == created.id and unmarshal(read.properties)["nodeUid"] == outs["nodeUid"]

    tuned = {**ins, "pollSeconds": 0.02}
    diff = host.call("Diff", proto.DiffRequest(
        id=created.id, urn=URN, type=TYPE, name="tpu-qr", olds=read.properties,
        old_inputs=marshal(ins, accept), news=marshal(tuned, accept)))
    assert diff.changes == proto.DiffResponse.DIFF_SOME and list(diff.replaces) == []
    updated = host.call("Update", proto.UpdateRequest(
        id=created.id, urn=URN, type=TYPE, name="tpu-qr", olds=read.properties,
        old_inputs=marshal(ins, accept), news=marshal(tuned, accept)))
    updated_outs = unmarshal(updated.properties)
    assert updated_outs["pollSeconds"] == 0.02 and updated_outs["nodeUid"] == outs["nodeUid"]
    assert server.created_bodies[1:] == [] and server.deleted == []

    # State written before the move names the old module; refresh and destroy must still load it.
    old_blob = old_path_provider_blob()
    assert pickled_globals(old_blob) == [("components.queued_resource", "QueuedResourceProvider")]
    old_state = {**updated_outs, "__provider": old_blob}
    read = host.call("Read", proto.ReadRequest(
        id=created.id, urn=URN, type=TYPE, name="tpu-qr", properties=marshal(old_state, accept)))
    assert read.id == created.id and unmarshal(read.properties)["state"] == "ACTIVE"
    host.call("Delete", proto.DeleteRequest(
        id=created.id, urn=URN, type=TYPE, name="tpu-qr", properties=marshal(old_state, accept),
        old_inputs=marshal(ins, accept)))
    assert server.deleted == [created.id] and server.queued == {}

    # The host used the ADC key: one token from the (fake) token endpoint, sent on every API call.
    assert len(server.token_requests) >= 1
    assert all(r.headers.get("Authorization") == f"Bearer {token}" for r in server.requests
               if r.path.startswith("/v2alpha1/"))

    # Progress goes to the host's stderr (the engine shows each line as a diagnostic), not stdout.
    stdout, stderr = host.stop()
    assert stdout == ""
    assert f"[tpu-vllm queued resource] requested {created.id}" in stderr
    # The elapsed time is the machine's (a loaded one reads 0m02s): only its shape is the provider's.
    assert re.search(r"tpu-vllm-dev: ACTIVE, \d+m\d\ds since the request", stderr), stderr
    for leaked in (SSH_KEYS_CANARY, token, provider_blob, "PRIVATE KEY"):
        assert leaked not in stderr


def test_outside_the_project_directory_the_host_cannot_load_the_provider(world, tmp_path):
    # Why the plugin must run from the project root: the provider is pickled by reference.
    _, _, _, start = world
    host = start(cwd=tmp_path)
    provider_blob = serialize_provider(qr.QueuedResourceProvider())
    with pytest.raises(grpc.RpcError) as caught:
        host.call("Check", proto.CheckRequest(
            urn=URN, type=TYPE, name="tpu-qr", olds=struct_pb2.Struct(),
            news=marshal(without_secrets(inputs(provider_blob)), False)))
    assert caught.value.code() == grpc.StatusCode.UNKNOWN
    assert "No module named 'components'" in caught.value.details()


# The engine's shutdown of a plugin (pulumi sdk/go/common/resource/plugin/plugin.go, newPlugin's `kill`):
# SIGINT to the plugin's process group, then SIGKILL to the group if it has not exited 5 s later.
ENGINE_GRACE_SECONDS = 5


def engine_kills(host: Host) -> int:
    """Stop the host as the engine does on a second Ctrl-C; the host's exit status."""
    pgid = os.getpgid(host.process.pid)
    os.killpg(pgid, signal.SIGINT)
    try:
        return host.process.wait(timeout=ENGINE_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(pgid, signal.SIGKILL)
        return host.process.wait(timeout=CALL_TIMEOUT)


def wait_for(condition, what: str) -> None:
    """Until the fake has seen something (an event, not a duration, is what the test checks)."""
    seen = threading.Event()
    for _ in range(CALL_TIMEOUT * 20):
        if condition():
            return
        seen.wait(0.05)
    raise AssertionError(f"never happened: {what}")


def create_in_flight(world, until, what: str, env: dict[str, str] | None = None, **overrides: Any) -> Host:
    """A Create in flight on the real host, once the fake API has seen `until(server)`; the pending call is
    `host.pending`."""
    server, _, _, start = world
    provider_blob = serialize_provider(qr.QueuedResourceProvider())
    host = start(**(env or {}))
    host.call("Configure", proto.ConfigureRequest(args=struct_pb2.Struct(), acceptResources=True))
    host.pending = host.stub.Create.future(proto.CreateRequest(
        urn=URN, type=TYPE, name="tpu-qr", properties=marshal(inputs(provider_blob, **overrides), False)),
        timeout=CALL_TIMEOUT * 3)
    wait_for(lambda: until(server), what)
    return host


def requests_of(server, method: str, path_end: str = "") -> int:
    return sum(1 for r in server.requests if r.method == method and r.path.endswith(path_end))


# The provider's poll (its pollSeconds input) in the tests that need a create waiting in the queue: they wait for
# two polls, never for a duration, so a short one only makes them sooner.
QUEUE_POLL_SECONDS = 0.05


def create_left_waiting_in_the_queue(world, env: dict[str, str] | None = None, **overrides: Any):
    """A Create in flight on the real host, its request queued (no capacity) and polled at least twice."""
    server = world[0]
    server.states = ["WAITING_FOR_RESOURCES"]
    host = create_in_flight(world, lambda api: requests_of(api, "GET", "/tpu-vllm-dev") >= 2,
                            "the provider waiting in the queue", env=env,
                            **{"pollSeconds": QUEUE_POLL_SECONDS, **overrides})
    assert server.deleted == []
    return host, host.pending, f"{PARENT}/queuedResources/tpu-vllm-dev"


def test_an_interrupted_create_deletes_the_request_it_made_before_the_engine_kills_the_host(world):
    server = world[0]
    host, pending, name = create_left_waiting_in_the_queue(world)

    engine_kills(host)
    # The host sends the DELETE on the SIGINT; should a loaded machine keep it past the engine's grace, the
    # SIGKILL ends it and its watchdog sends the DELETE instead. Either way the request is deleted, and said.
    wait_for(lambda: server.deleted, "the DELETE of the request")
    assert set(server.deleted) == {name}
    delete = next(r for r in server.requests if r.method == "DELETE")
    assert delete.query.get("force") == "true"
    with pytest.raises(grpc.RpcError):
        pending.result()
    wait_for(lambda: "sent the DELETE of tpu-vllm-dev" in host.stderr_path.read_text(), "the DELETE said")
    stderr = host.stderr_path.read_text()
    assert ("interrupted while waiting for tpu-vllm-dev: sent the DELETE of tpu-vllm-dev, which this create "
            "requested" in stderr or "the create of tpu-vllm-dev ended early: sent the DELETE of tpu-vllm-dev, which "
            "this create requested" in stderr), stderr
    assert SSH_KEYS_CANARY not in stderr


def create_that_went_active(world):
    """A Create on the real host whose request went ACTIVE and was returned to the engine (so is in state)."""
    _, _, _, start = world
    provider_blob = serialize_provider(qr.QueuedResourceProvider())
    host = start()
    host.call("Configure", proto.ConfigureRequest(args=struct_pb2.Struct(), acceptResources=True))
    created = host.call("Create", proto.CreateRequest(
        urn=URN, type=TYPE, name="tpu-qr", properties=marshal(inputs(provider_blob), False)))
    assert unmarshal(created.properties)["state"] == "ACTIVE"
    return host, created


def test_a_request_that_went_active_and_was_returned_is_left_alone_on_interrupt(world):
    server = world[0]
    host, created = create_that_went_active(world)
    # Returned to the engine, it is in state: neither the SIGINT path nor a watchdog may delete it.
    assert watchdogs_of(host) == []
    engine_kills(host)
    assert server.deleted == [] and list(server.queued) == [created.id]
    assert "interrupted" not in host.stderr_path.read_text()


def watchdogs_of(host: Host, module: str = "components.vm.create_watchdog") -> list[int]:
    """The create watchdogs the host started (components/vm/create_watchdog.py; the compute path's
    instance_watchdog_process), by pid."""
    children = []
    for task in Path(f"/proc/{host.process.pid}/task").iterdir():
        children += [int(pid) for pid in (task / "children").read_text().split()]
    return [pid for pid in children if module.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()]


def is_running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    # Gone before the open (ENOENT) or between the open and the read: the kernel's stat file then answers ESRCH
    # (torvalds/linux fs/proc/base.c proc_single_show: no task, -ESRCH). A flake seen once at 2 cores.
    except (FileNotFoundError, ProcessLookupError):
        return False


ENVIRONMENT_CANARIES = {
    "PULUMI_CONFIG_PASSPHRASE": "CANARY-passphrase-2718",
    "PULUMI_ACCESS_TOKEN": "pul-CANARY0123456789abcdef",
    "GITHUB_TOKEN": "ghs_CANARYtoken0123456789",
    "GOOGLE_CREDENTIALS": '{"type": "service_account", "private_key": "CANARY-key"}',
}


@dataclasses.dataclass
class KilledMidCreate:
    """A create left waiting in the queue, its host holding the CLI's secrets in its environment, then `signum` to
    the host's process group: what the tests read of that one life."""

    server: FakeTpuApi
    host: Host
    pending: Any
    name: str
    watchdog: int
    watchdog_environ: dict[bytes, bytes]
    """The watchdog's environment while the create waited (before the signal)."""
    exit_status: int


@pytest.fixture(scope="module")
def killed_mid_create(tmp_path_factory):
    """signum -> that life, lived at most once per module (each test checks its own facts of it)."""
    lives: dict[int, KilledMidCreate] = {}
    with contextlib.ExitStack() as worlds:
        def life(signum: int) -> KilledMidCreate:
            if signum not in lives:
                world = worlds.enter_context(open_world(tmp_path_factory.mktemp(f"killed-{signum}")))
                host, pending, name = create_left_waiting_in_the_queue(world, env=ENVIRONMENT_CANARIES)
                [watchdog] = watchdogs_of(host)
                environ = dict(item.split(b"=", 1) for item in Path(f"/proc/{watchdog}/environ").read_bytes()
                               .split(b"\0") if item)
                os.killpg(os.getpgid(host.process.pid), signum)
                status = host.process.wait(timeout=CALL_TIMEOUT)
                lives[signum] = KilledMidCreate(world[0], host, pending, name, watchdog, environ, status)
            return lives[signum]

        yield life


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_create_whose_host_is_terminated_or_killed_still_deletes_its_request(killed_mid_create, signum):
    """SIGTERM (a CI runner, `kill`) or SIGKILL (the engine's kill 5 s after its SIGINT, or a killed CLI's) to
    the host's process group ends it with no provider code run; the create's watchdog sends the DELETE."""
    killed = killed_mid_create(signum)
    server, host, name = killed.server, killed.host, killed.name
    assert killed.exit_status == -signum  # no Python ran in the host: the signal ended it
    wait_for(lambda: server.deleted == [name], "the DELETE of the request the create made")
    assert next(r for r in server.requests if r.method == "DELETE").query.get("force") == "true"
    wait_for(lambda: not is_running(killed.watchdog), "the watchdog ending once it has acted")
    with pytest.raises(grpc.RpcError):
        killed.pending.result()
    stderr = host.stderr_path.read_text()
    assert ("the create of tpu-vllm-dev ended early: sent the DELETE of tpu-vllm-dev, which this create "
            "requested") in stderr
    assert SSH_KEYS_CANARY not in stderr


def test_the_watchdog_gets_only_what_the_tpu_client_needs_and_still_deletes(killed_mid_create):
    killed = killed_mid_create(signal.SIGKILL)
    environ = killed.watchdog_environ
    for name_, value in ENVIRONMENT_CANARIES.items():
        assert name_.encode() not in environ and value.encode() not in b"".join(environ.values())
    assert environ[b"GOOGLE_APPLICATION_CREDENTIALS"] and environ[tpu_api.ENDPOINT_ENV.encode()]
    # What it kept is enough: killed with no Python run in the host, the watchdog's DELETE goes through.
    assert killed.exit_status == -signal.SIGKILL
    wait_for(lambda: killed.server.deleted == [killed.name], "the watchdog's DELETE")


def test_after_a_create_returns_its_watchdog_is_gone_and_a_sigterm_deletes_nothing(world):
    server = world[0]
    host, created = create_that_went_active(world)
    wait_for(lambda: watchdogs_of(host) == [], "the watchdog released when the create returned")
    os.killpg(os.getpgid(host.process.pid), signal.SIGTERM)
    assert host.process.wait(timeout=CALL_TIMEOUT) == -signal.SIGTERM
    assert server.deleted == [] and list(server.queued) == [created.id]
    assert "ended early" not in host.stderr_path.read_text()


NAME = f"{PARENT}/queuedResources/tpu-vllm-dev"


@pytest.mark.parametrize("after_handling, status", [(True, 503), (False, 429)],
                         ids=["made-then-503", "429-not-made"])
def test_ctrl_c_while_a_create_waits_to_retry_its_post_deletes_what_it_may_have_made(world, after_handling, status):
    """The API answered the POST with 503 after making the request, or 429: either way asking for 30 s (RetryInfo) the
    provider sleeps before its retry, not knowing whether the request exists. An interrupt then deletes it."""
    server = world[0]
    server.inject(Fault("POST", "/queuedResources", status, details=[retry_info(30)], after_handling=after_handling))
    host = create_in_flight(world, lambda api: requests_of(api, "POST") >= 1, "the create POST answered")
    engine_kills(host)
    wait_for(lambda: requests_of(server, "DELETE", "/tpu-vllm-dev") >= 1, "the DELETE of the request")
    wait_for(lambda: "which this create may have requested" in host.stderr_path.read_text(), "the DELETE said")
    assert server.deleted == ([NAME] if after_handling else [])
    assert NAME not in server.queued or server.queued[NAME]["state"]["state"] == "DELETING"
    stderr = host.stderr_path.read_text()
    said = "sent the DELETE of tpu-vllm-dev" if after_handling else "found nothing left of tpu-vllm-dev"
    assert said in stderr, stderr


def test_ctrl_c_while_a_failed_create_is_being_deleted_leaves_the_delete_to_the_watchdog(world):
    """The request FAILED, and the API refuses its DELETE while it still provisions (400 FAILED_PRECONDITION);
    an interrupt in the provider's retry loop hands the DELETE to the watchdog, which sends it until accepted."""
    server = world[0]
    server.states, server.failed_message, server.refuse_delete = ["FAILED"], "no capacity in zone", 10**6
    host = create_in_flight(world, lambda api: requests_of(api, "DELETE", "/tpu-vllm-dev") >= 2,
                            "the DELETE refused at least twice", pollSeconds=QUEUE_POLL_SECONDS)
    engine_kills(host)  # returns once the host has ended
    with server.lock:
        server.refuse_delete = 0  # the request has left PROVISIONING: the next DELETE is accepted
    wait_for(lambda: server.deleted == [NAME], "the watchdog's DELETE accepted")
    wait_for(lambda: "sent the DELETE of tpu-vllm-dev, which this create requested" in host.stderr_path.read_text()
             or "keeps trying" in host.stderr_path.read_text(), "the watchdog's line")


@pytest.mark.parametrize("sigint", ["--default-signal=INT", "--ignore-signal=INT"], ids=["default", "ignored"])
def test_a_cli_that_dies_without_a_signal_still_deletes_the_request_and_the_host_ends(world, sigint, monkeypatch):
    """kill -9 of the CLI, a closed terminal, a torn-down CI runner: no signal reaches the host, only the
    CLI's ends of its pipes close. The host notices at once (stdin end-of-file), deletes its request despite
    a dead stderr, and ends itself (nobody is left to stop it), even when it was started with SIGINT ignored
    (a CLI run as a background job of a script), so its own SIGINT would do nothing."""
    monkeypatch.setattr(Host, "sigint", sigint)
    server = world[0]
    host, pending, name = create_left_waiting_in_the_queue(world)
    [watchdog] = watchdogs_of(host)
    host.cli_dies()
    wait_for(lambda: server.deleted == [name], "the DELETE of the request the create made")
    assert host.process.wait(timeout=CALL_TIMEOUT) is not None
    wait_for(lambda: not is_running(watchdog), "the watchdog released")
    assert server.deleted == [name] and requests_of(server, "DELETE") == 1


def test_a_watchdog_whose_delete_hangs_says_so_and_lets_go_of_the_cli_on_time(world):
    """The engine's Close reads the plugin's stderr to its end: a watchdog holding it through a DELETE that
    never answers would hang the CLI. It says its one line and lets go at its report deadline."""
    server = world[0]
    hang = threading.Event()
    host, pending, name = create_left_waiting_in_the_queue(world, watchdogReportSeconds=0.5)
    server.inject(Fault("DELETE", "/tpu-vllm-dev", 503, hold=hang, times=1000))
    [watchdog] = watchdogs_of(host)
    os.killpg(os.getpgid(host.process.pid), signal.SIGKILL)
    try:
        wait_for(host.stderr_closed.is_set, "every holder of the host's stderr letting go")
        assert is_running(watchdog)  # still trying, in the background, with nothing of the CLI's
        stderr = host.stderr_path.read_text()
        assert "the DELETE of tpu-vllm-dev (which this create requested) has no answer after 0.5 s" in stderr
        assert "gcloud alpha compute tpus queued-resources delete tpu-vllm-dev" in stderr
    finally:
        server.faults.clear()
        hang.set()
    wait_for(lambda: server.deleted == [name], "the DELETE once the API answers again")


def test_the_watchdog_keeps_every_variable_google_auth_reads_by_name():
    """google-auth reads most of its variables through environment_vars.py, and a few by a literal name in place
    (pluggable.py's GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES: without it, credentials from an executable refuse
    to run and the watchdog could not delete the request). Every literal the installed package reads is kept."""
    import google.auth

    package = Path(google.auth.__file__).parent
    read = set()
    for source in [*package.rglob("*.py"), *(package.parent / "oauth2").rglob("*.py")]:
        read |= set(re.findall(r"""os\.(?:environ\.get|getenv)\(\s*["']([A-Za-z_][A-Za-z0-9_]*)["']""",
                               source.read_text(encoding="utf-8")))
        read |= set(re.findall(r"""os\.environ\[\s*["']([A-Za-z_][A-Za-z0-9_]*)["']\s*\]""",
                               source.read_text(encoding="utf-8")))
    assert "GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES" in read  # the scan finds what it is for
    host = {name: "1" for name in read} | {"PULUMI_CONFIG_PASSPHRASE": "CANARY"}
    kept = create_watchdog.watchdog_environment(host)
    assert sorted(read - set(kept)) == [] and "PULUMI_CONFIG_PASSPHRASE" not in kept
    # httplib2 (which carries every TPU and token request) reads its CA bundle from HTTPLIB2_CA_CERTS alone (0.32.1
    # certs.py); googleapiclient's discovery.build reads GOOGLE_CLOUD_UNIVERSE_DOMAIN (2.202.0 discovery.py).
    beside = create_watchdog.watchdog_environment({"HTTPLIB2_CA_CERTS": "/ca.pem", "GOOGLE_CLOUD_UNIVERSE_DOMAIN": "u"})
    assert beside == {"HTTPLIB2_CA_CERTS": "/ca.pem", "GOOGLE_CLOUD_UNIVERSE_DOMAIN": "u"}
