"""The offline engine: runs the real program under Pulumi mocks that give each resource type plausible
outputs and record what was registered.

Shared by the offline plan and the tests, so both see the program the same way.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc
import pulumi
from pulumi.output import Unknown
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockMonitor

from tools.plan import provider_answers
from tools.plan.placeholders import (
    MOCK_EXTERNAL_IP,
    MOCK_GATEWAY_IP,
    MOCK_GKE_CA,
    MOCK_GKE_CHANNEL_DEFAULTS,
    MOCK_GKE_ENDPOINT,
    MOCK_GKE_VERSION,
    MOCK_IMAGE_DIGEST_HEX,
    MOCK_INCARNATION,
    MOCK_INSTANCE_STATUS,
    MOCK_INTERNAL_IP,
    MOCK_LOAD_BALANCER_IP,
    MOCK_NODE_UID,
    MOCK_PROJECT_NUMBER,
    MOCK_PUBLIC_KEY,
    MOCK_STATE,
    MOCK_TERMINATION_TIME,
    SECRET_PLACEHOLDER,
)
from tools.plan.urns import AliasSpec, Registered, make_urn

ROOT = Path(__file__).resolve().parent.parent.parent
PROGRAM_FILE = ROOT / "__main__.py"
# Not "__main__": that name makes the file run itself, as under the Pulumi CLI.
PROGRAM_MODULE = "tpu_vllm_program"
SECRET_SIG = "4dabf18193072939515e22adb298388d"
REDACTED = SECRET_PLACEHOLDER

@dataclass
class Registration:
    type: str
    name: str
    parent: str | None
    inputs: dict[str, Any]
    """As the engine would receive them; Pulumi secrets still wrapped (see redact)."""
    custom: bool
    dependencies: list[str] = field(default_factory=list)
    """Names of the resources it waits for (explicit and through its inputs)."""
    retain_on_delete: bool = False
    delete_before_replace: bool = False
    import_id: str = ""
    """The `import` option: the id of an existing resource the engine adopts instead of creating one."""
    urn: str = ""
    """As the engine computes it (tools/plan/urns.py), not the mock monitor's."""
    parent_urn: str = ""
    aliases: list[AliasSpec] = field(default_factory=list)
    """The `aliases` option as the SDK sent it, parent URNs the engine's."""
    custom_timeouts: dict[str, str] = field(default_factory=dict)
    """The `custom_timeouts` option (create, update, delete) where one is set: how long the provider waits."""

    def urn_record(self) -> Registered:
        return Registered(urn=self.urn, type=self.type, name=self.name, parent_urn=self.parent_urn,
                          aliases=tuple(self.aliases))


def is_wrapped_secret(value: Any) -> bool:
    return isinstance(value, dict) and value.get(SECRET_SIG) == "1b47061264138c4ac30d75fd1eb44270"


def redact(value: Any) -> Any:
    """Every Pulumi secret becomes "[secret]"; the rest is left as sent."""
    if is_wrapped_secret(value):
        return REDACTED
    if isinstance(value, dict):
        return {key: redact(item) for key, item in value.items() if key != "__provider"}
    if isinstance(value, list):
        return [redact(item) for item in value]
    return value


def with_unknown_sentinels(value: Any) -> Any:
    """Each value unknown in a preview as the engine sends it on the wire (and to a policy pack): the
    sentinel string, so the record serialises and a returned output reads back as unknown."""
    if isinstance(value, Unknown):
        return rpc.UNKNOWN
    if isinstance(value, dict):
        return {key: with_unknown_sentinels(item) for key, item in value.items()}
    if isinstance(value, list):
        return [with_unknown_sentinels(item) for item in value]
    return value


def is_unknown(value: Any) -> bool:
    return value == rpc.UNKNOWN


def unwrap(value: Any) -> Any:
    if is_wrapped_secret(value):
        return unwrap(value["value"])
    if isinstance(value, dict):
        return {key: unwrap(item) for key, item in value.items()}
    if isinstance(value, list):
        return [unwrap(item) for item in value]
    return value


@dataclass
class StackMocks(pulumi.runtime.Mocks):
    project: str
    registrations: list[Registration] = field(default_factory=list)
    options: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    fixed_outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per resource type (or invoke token), outputs that replace the defaults (tests use canaries here)."""
    failing_calls: dict[str, str] = field(default_factory=dict)
    """Invoke token -> what the engine answers for it (tools/plan/provider_answers.py builds each in the
    provider's own words), to simulate a lookup that fails."""
    urn_names: dict[str, str] = field(default_factory=dict)
    engine_urns: dict[str, str] = field(default_factory=dict)
    """The mock monitor's URN -> the engine's (they differ below a grandparent)."""
    preview: bool = False
    """A dry run, as `pulumi preview` of a new stack: a new resource's outputs are only its inputs (what the
    engine returns for a provider without previews, pkg/resource/deploy/step.go CreateStep.Apply), so
    everything computed (an email, a generated key, an IP) is unknown."""
    disks: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Disks that already exist in GCP, by name: provider_answers.disk_found's keywords (labels, size, type).
    gcp.compute.get_disk of any other name fails as pulumi-gcp fails it for an absent disk."""
    event_loops: set[asyncio.AbstractEventLoop] = field(default_factory=set)
    """The loops Pulumi's mock monitor opens, one per worker thread (see close_event_loops)."""

    def close_event_loops(self) -> None:
        """Close them once the program is done with them.

        Left open, the interpreter finalises each at exit after its own self-pipe socket, in no
        fixed order, and now and then prints "Exception ignored in BaseEventLoop.__del__" to stderr.
        """
        for loop in list(self.event_loops):
            if not loop.is_running() and not loop.is_closed():
                loop.close()

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        options = self.options.get((args.typ, args.name), {})
        inputs = with_unknown_sentinels(dict(args.inputs))
        self.registrations.append(Registration(
            type=args.typ, name=args.name, inputs=inputs, custom=bool(args.custom),
            import_id=args.resource_id or "", **options,
        ))
        plain = unwrap(inputs)
        if self.preview:
            return "", plain  # the engine gives a resource to be created no id in a preview
        outputs = {**plain, **self._outputs(args.typ, args.name, plain), **self.fixed_outputs.get(args.typ, {})}
        return self._id(args.typ, args.name, outputs), outputs

    def _id(self, typ: str, name: str, outputs: dict[str, Any]) -> str:
        """The id pulumi-gcp gives what it creates, where another resource's inputs take it (a SecretVersion's
        `secret`): each resource's id template in terraform-provider-google-beta v7.45.0 (`d.SetId`):
        resource_secret_manager_secret.go, resource_compute_disk.go, resource_google_service_account.go. Any
        other type gets a marked placeholder, since no input of this stack reads its id."""
        project = outputs.get("project") or self.project
        if typ == "gcp:secretmanager/secret:Secret":
            return f"projects/{project}/secrets/{outputs['secretId']}"
        if typ == "gcp:compute/disk:Disk":
            return provider_answers.disk_id(project, outputs["zone"], outputs["name"])
        if typ == "gcp:serviceaccount/account:Account":
            return f"projects/{project}/serviceAccounts/{outputs['email']}"
        return f"<id of {name}>"

    def _outputs(self, typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
        if typ == "gcp:serviceaccount/account:Account":
            return {"email": f"{inputs['accountId']}@{inputs.get('project', self.project)}.iam.gserviceaccount.com"}
        if typ == "gcp:secretmanager/secret:Secret":
            return {"name": f"projects/{MOCK_PROJECT_NUMBER}/secrets/{inputs['secretId']}"}
        if typ == "random:index/randomPassword:RandomPassword":
            return {"result": "mock-generated-api-key-" + "x" * 25}
        if typ == "tls:index/privateKey:PrivateKey":
            return {
                "publicKeyOpenssh": MOCK_PUBLIC_KEY + "\n",
                "privateKeyOpenssh": "-----BEGIN OPENSSH PRIVATE KEY-----\nmock\n-----END OPENSSH PRIVATE KEY-----\n",
            }
        if typ == "pulumi-python:dynamic/tpu-vllm:QueuedResource" or typ.endswith(":QueuedResource"):
            spec = inputs["body"]["tpu"]["nodeSpec"][0]
            return {
                "queuedResourceName": f"{inputs['parent']}/queuedResources/{inputs['queuedResourceId']}",
                "nodeName": f"{spec['parent']}/nodes/{spec['nodeId']}",
                "nodeUid": MOCK_NODE_UID,
                "nodeCreateTime": "2026-01-01T00:00:00.000000Z",
                "state": MOCK_STATE,
                "internalIp": MOCK_INTERNAL_IP,
                "externalIp": MOCK_EXTERNAL_IP,
                "terminationTime": MOCK_TERMINATION_TIME,
                "provisioningModel": inputs["body"].get("provisioningModel", ""),
            }
        if typ == "pulumi-python:dynamic/tpu-vllm:ComputeInstance" or typ.endswith(":ComputeInstance"):
            return self._instance(inputs)
        if typ == "pulumi-python:dynamic/tpu-vllm:ImageDigest":
            from components.core.image_digest import parse

            pinned = parse(inputs["image"]).pinned(f"sha256:{MOCK_IMAGE_DIGEST_HEX}")
            return {"pinned": pinned, "digest": pinned.split("@", 1)[1]}
        if typ == "command:remote:Command":
            return {"stdout": "", "stderr": ""}
        return self._gke_outputs(typ, inputs)

    def _instance(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """A TPU VM as the provider reads it back (compute_instance_provider.observed: the instance's id, status,
        addresses and times, the incarnation in its description)."""
        project, zone, name = inputs["project"], inputs["zone"], inputs["name"]
        return {
            "instanceId": MOCK_NODE_UID,
            "selfLink": f"https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}/instances/{name}",
            "status": MOCK_INSTANCE_STATUS,
            "internalIp": MOCK_INTERNAL_IP,
            "externalIp": MOCK_EXTERNAL_IP,
            "creationTimestamp": "2026-01-01T00:00:00.000-00:00",
            "lastStartTimestamp": "2026-01-01T00:00:00.000-00:00",
            "terminationTime": MOCK_TERMINATION_TIME if "maxRunDuration" in (inputs["body"].get("scheduling") or {})
            else "",
            "incarnation": MOCK_INCARNATION,
        }

    def _gke_outputs(self, typ: str, inputs: dict[str, Any]) -> dict[str, Any]:
        if typ == "gcp:container/cluster:Cluster":
            location = inputs.get("location", "us-west4-a")
            return {
                "endpoint": MOCK_GKE_ENDPOINT,
                "masterAuth": {"clusterCaCertificate": MOCK_GKE_CA},
                "masterVersion": MOCK_GKE_VERSION,
                "selfLink": f"https://container.googleapis.com/v1/projects/{self.project}/locations/{location}"
                            f"/clusters/{inputs.get('name')}",
            }
        if typ == "gcp:container/nodePool:NodePool":
            return {"version": MOCK_GKE_VERSION, "instanceGroupUrls": []}
        if typ == "kubernetes:core/v1:Service" and (inputs.get("spec") or {}).get("type") == "LoadBalancer":
            return {"status": {"loadBalancer": {"ingress": [{"ip": MOCK_LOAD_BALANCER_IP}]}}}
        if typ == "gcp:compute/address:Address" and inputs.get("addressType") == "INTERNAL":
            return {"address": MOCK_GATEWAY_IP}
        return {}

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict, list]:
        if args.token in self.failing_calls:
            raise Exception(self.failing_calls[args.token])
        if args.token == "gcp:compute/getDisk:getDisk":
            return self._disk(dict(args.args)), []
        return {**self._call_outputs(args.token, dict(args.args)), **self.fixed_outputs.get(args.token, {})}, []

    def _disk(self, args: dict[str, Any]) -> dict[str, Any]:
        project, zone, name = args.get("project"), args.get("zone"), args.get("name")
        disk = self.disks.get(name)
        if disk is None:  # the provider's own words for a disk that is not there
            raise Exception(provider_answers.disk_absent(project, zone, name))
        return provider_answers.disk_found(project, zone, name, **disk)

    def _call_outputs(self, token: str, args: dict[str, Any]) -> dict[str, Any]:
        if token == "gcp:container/getEngineVersions:getEngineVersions":
            return {"releaseChannelDefaultVersion": dict(MOCK_GKE_CHANNEL_DEFAULTS),
                    "latestMasterVersion": MOCK_GKE_CHANNEL_DEFAULTS["RAPID"]}
        if token == "gcp:container/getCluster:getCluster":
            # An existing cluster that has everything the gke platform needs.
            return {
                "name": args.get("name"), "location": args.get("location"),
                "endpoint": MOCK_GKE_ENDPOINT, "masterVersion": MOCK_GKE_VERSION,
                "masterAuths": [{"clusterCaCertificate": MOCK_GKE_CA}],
                "workloadIdentityConfigs": [{"workloadPool": f"{self.project}.svc.id.goog"}],
                "secretManagerConfigs": [{"enabled": True}],
                "addonsConfigs": [{"gcsFuseCsiDriverConfigs": [{"enabled": True}]}],
                "monitoringConfigs": [{"managedPrometheuses": [{"enabled": True}]}],
                "datapathProvider": "ADVANCED_DATAPATH",  # Dataplane V2: NetworkPolicy enforced
                "enableAutopilot": False,  # a Standard cluster: the stack adds its own node pools
                "network": f"projects/{self.project}/global/networks/default",
            }
        return {}


class InvokeFailed(grpc.RpcError):
    """A failed invoke as the monitor's gRPC client raises it: an RpcError that is also a Call."""

    def __init__(self, details: str):
        super().__init__(details)
        self._details = details

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNKNOWN

    def details(self) -> str:
        return self._details


class RecordingMonitor(MockMonitor):
    """MockMonitor that also tells the mocks each resource's parent."""

    def __init__(self, mocks: StackMocks):
        super().__init__(mocks)
        self._stack_mocks = mocks

    def RegisterResource(self, request):  # noqa: N802 - gRPC method name
        if request.type != "pulumi:pulumi:Stack":
            names = self._stack_mocks.urn_names
            dependencies = set(request.dependencies)
            for urns in request.propertyDependencies.values():
                dependencies.update(urns.urns)
            engine_urns = self._stack_mocks.engine_urns
            parent_urn = engine_urns.get(request.parent, "")
            self._stack_mocks.options[(request.type, request.name)] = {
                "urn": make_urn(pulumi.get_stack(), pulumi.get_project(), parent_urn, request.type, request.name),
                "parent_urn": parent_urn,
                "aliases": [self._alias(alias) for alias in request.aliases],
                "parent": names.get(request.parent) if request.parent else None,
                "dependencies": sorted(names.get(urn, urn) for urn in dependencies),
                "retain_on_delete": bool(request.retainOnDelete),
                "delete_before_replace": bool(request.deleteBeforeReplace),
                "custom_timeouts": {key: value for key in ("create", "update", "delete")
                                    if (value := getattr(request.customTimeouts, key))},
            }
        response = super().RegisterResource(request)
        self._remember_loop()
        self._stack_mocks.urn_names[response.urn] = request.name
        options = self._stack_mocks.options.get((request.type, request.name), {})
        self._stack_mocks.engine_urns[response.urn] = options.get("urn", response.urn)
        return response

    def _alias(self, alias) -> AliasSpec:
        """alias_pb2.Alias: a URN, or a spec whose parent is a URN this monitor returned."""
        if alias.WhichOneof("alias") == "urn":
            return AliasSpec(urn=alias.urn)
        spec = alias.spec
        parent = spec.parentUrn if spec.WhichOneof("parent") == "parentUrn" else ""
        return AliasSpec(name=spec.name, type=spec.type, stack=spec.stack, project=spec.project,
                         parent_urn=self._stack_mocks.engine_urns.get(parent, parent),
                         no_parent=spec.WhichOneof("parent") == "noParent" and spec.noParent)

    def Invoke(self, request):  # noqa: N802 - gRPC method name
        try:
            return super().Invoke(request)
        except grpc.RpcError:
            raise
        except Exception as error:  # noqa: BLE001 - a lookup the mocks answer with a failure
            # The engine answers a failed invoke with an error status, which the SDK hands back to the caller
            # (pulumi/runtime/invoke.py, do_invoke), so a program may catch it; a bare exception here would
            # instead fail the whole run from the RPC manager.
            raise InvokeFailed(str(error)) from None
        finally:
            self._remember_loop()

    def ReadResource(self, request):  # noqa: N802 - gRPC method name
        try:
            return super().ReadResource(request)
        finally:
            self._remember_loop()

    def _remember_loop(self) -> None:
        try:
            self._stack_mocks.event_loops.add(asyncio.get_event_loop())
        except RuntimeError:
            pass  # this call made none (the stack's own registration returns before it does)


def install(project: str, stack: str, fixed_outputs: dict[str, dict[str, Any]] | None = None,
            failing_calls: dict[str, str] | None = None, preview: bool = False,
            disks: dict[str, dict[str, Any]] | None = None) -> StackMocks:
    """Set the mocks; call before importing any program code."""
    mocks = StackMocks(project=project, fixed_outputs=fixed_outputs or {}, failing_calls=failing_calls or {},
                       preview=preview, disks=disks or {})
    quiet = logging.getLogger("tpu-vllm.mock-engine")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False  # the plan reports warnings itself, once
    pulumi.runtime.set_mocks(
        mocks, project="tpu-vllm", stack=stack, preview=preview, logger=quiet,
        monitor=RecordingMonitor(mocks),
    )
    return mocks


@dataclass
class ProgramRun:
    registrations: list[Any]
    warnings: list[str]
    settings: Any
    outputs: dict[str, tuple[Any, bool]]
    """name -> (value, is_secret)."""
    error: str | None = None
    """The program's own RunError, if it stopped (bad config, a missing secret)."""


def load_program() -> ModuleType:
    """__main__.py as a module of its own name: importing it registers nothing, its run() does."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    spec = importlib.util.spec_from_file_location(PROGRAM_MODULE, PROGRAM_FILE)
    assert spec is not None and spec.loader is not None, PROGRAM_FILE
    program = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(program)
    return program


def run_program(config: dict[str, str], secret_keys: list[str], stack: str,
                fixed_outputs: dict[str, dict[str, Any]] | None = None,
                failing_calls: dict[str, str] | None = None, validate_first: bool = True,
                preview: bool = False, disks: dict[str, dict[str, Any]] | None = None) -> ProgramRun:
    """Run the program's run() once under mocks in this process.

    validate_first: an invalid config raises SettingsError (the plan's exit 2); otherwise the
    program's own error (what `pulumi up` would print) is returned with what it registered.
    """
    from pulumi.runtime import config as runtime_config
    from pulumi.runtime.stack import get_root_resource, wait_for_rpcs
    from pulumi.runtime.sync_await import _sync_await

    from components.settings import SettingsError

    os.environ.pop("PULUMI_CONFIG", None)
    recorder = install(project=config["gcp:project"], stack=stack, fixed_outputs=fixed_outputs,
                       failing_calls=failing_calls, preview=preview, disks=disks)
    runtime_config.set_all_config(config, secret_keys)
    program = load_program()
    try:
        loaded = program.run()
    except SettingsError as error:
        if validate_first:
            raise
        return ProgramRun(recorder.registrations, [], None, {}, error=error.render())
    except pulumi.RunError as error:
        try:
            _sync_await(wait_for_rpcs())  # let what was already registered reach the mocks
        except Exception:  # noqa: BLE001 - the failure behind the RunError, already reported by it
            pass
        # Registrations may still be in flight on worker threads here: their loops stay open.
        return ProgramRun(recorder.registrations, [], None, {}, error=str(error))
    _sync_await(wait_for_rpcs())

    outputs = {}
    for name, value in get_root_resource().outputs.items():
        output = pulumi.Output.from_input(value)
        known = _sync_await(output.is_known())  # False only in a preview, for what is computed at deploy
        value = _sync_await(output.future()) if known else rpc.UNKNOWN
        outputs[name] = (value, _sync_await(output.is_secret()))
    _close_loops(recorder)
    return ProgramRun(recorder.registrations, loaded.warnings, loaded.settings, outputs)


def _close_loops(recorder: Any) -> None:
    """Every RPC has returned: close the worker threads' loops and this thread's (see close_event_loops)."""
    recorder.event_loops.add(asyncio.get_event_loop())
    recorder.close_event_loops()

