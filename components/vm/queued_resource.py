"""The flex-start TPU as a Pulumi resource, over the TPU v2alpha1 queuedResources API.

pulumi-gcp's V2QueuedResource cannot express a provisioning model, a run
duration, metadata, a service account or data disks; v2alpha1 has them all.
The request body is a resource input, built by one pure function over input leaves
(components/vm/deployment.py), so previews and the offline plan show what is sent:
in a preview only a value computed at deploy (a new stack's SSH key) is unknown.
"""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi.dynamic import (
    CreateResult,
    DiffResult,
    ReadResult,
    Resource,
    ResourceProvider,
    UpdateResult,
)

from components.vm import engine_liveness
from components.vm.create_watchdog import (
    ADOPTED,
    CREATED,
    EXISTING,
    REPORT_SECONDS,
    REQUESTING,
    CreateWatchdog,
)

# Points the provider at another TPU API root (tests, private endpoints).
ENDPOINT_ENV = "TPU_VLLM_TPU_API_ENDPOINT"
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"

PROVISIONING_MODELS = {"flex-start": "FLEX_START", "spot": "SPOT", "on-demand": "STANDARD"}
WAITING_STATES = {"CREATING", "ACCEPTED", "WAITING_FOR_RESOURCES", "PROVISIONING", "STATE_UNSPECIFIED"}
GONE_STATES = {"SUSPENDED", "SUSPENDING", "FAILED", "MISSING"}
# An earlier request in one of these holds the name but will never give a node.
DEAD_STATES = {"SUSPENDED", "SUSPENDING", "FAILED"}
# Inputs whose change is a new request; the rest only tune how the provider waits.
REQUEST_KEYS = ("body", "parent", "queuedResourceId")
TUNING_KEYS = ("waitSeconds", "pollSeconds", "deleteWaitSeconds", "retryBaseSeconds")
TRANSIENT_STATUSES = {429, 500, 502, 503, 504}
RETRY_INFO_TYPE = "type.googleapis.com/google.rpc.RetryInfo"
# After the queue deadline, how long provisioning itself may take before the provider gives up.
PROVISIONING_GRACE_SECONDS = 1800
# A wait in the queue can last an hour: say where it stands at least this often, not only on changes.
PROGRESS_LOG_SECONDS = 60
# Outputs of the dynamic resource (declared as None inputs so Pulumi exposes them as attributes).
OUTPUT_KEYS = (
    "queuedResourceName", "nodeName", "nodeUid", "nodeCreateTime", "state", "nodeState", "internalIp",
    "externalIp", "terminationTime", "provisioningModel",
)


def queued_resource_body(
    *,
    project: str,
    zone: str,
    node_id: str,
    accelerator_type: str,
    runtime_version: str,
    provisioning_model: str,
    run_seconds: int | None,
    queue_seconds: int | None,
    network: str,
    subnetwork: str | None,
    service_account_email: str,
    metadata: dict[str, str],
    data_disks: list[str],
    tags: list[str],
    labels: dict[str, str],
) -> dict[str, Any]:
    """The QueuedResource body, field names as in tpu.v2alpha1.json."""
    network_config: dict[str, Any] = {"network": network, "enableExternalIps": True}
    if subnetwork:
        network_config["subnetwork"] = subnetwork
    node = {
        "acceleratorType": accelerator_type,
        "runtimeVersion": runtime_version,
        "networkConfig": network_config,
        "serviceAccount": {"email": service_account_email, "scope": [CLOUD_PLATFORM_SCOPE]},
        "metadata": dict(metadata),
        "dataDisks": [{"sourceDisk": disk, "mode": "READ_WRITE"} for disk in data_disks],
        "tags": list(tags),
        "labels": dict(labels),
    }
    body: dict[str, Any] = {
        "tpu": {"nodeSpec": [{
            "parent": f"projects/{project}/locations/{zone}",
            "nodeId": node_id,
            "node": node,
        }]},
        "provisioningModel": PROVISIONING_MODELS[provisioning_model],
    }
    if provisioning_model == "flex-start":
        # Top level of the QueuedResource, not schedulingConfig: this is what stops billing.
        body["runDuration"] = {"maxRunDuration": f"{int(run_seconds)}s"}
    if queue_seconds:
        body["queueingPolicy"] = {"validUntilDuration": f"{int(queue_seconds)}s"}
    return body


def gcloud_equivalent(body: dict[str, Any], queued_resource_id: str) -> str:
    """The gcloud command from the build log that this body corresponds to."""
    spec = body["tpu"]["nodeSpec"][0]
    zone = spec["parent"].rsplit("/", 1)[-1]
    parts = [
        "gcloud alpha compute tpus queued-resources create", queued_resource_id,
        f"--node-id={spec['nodeId']}", f"--zone={zone}",
        f"--accelerator-type={spec['node']['acceleratorType']}",
        f"--runtime-version={spec['node']['runtimeVersion']}",
        f"--provisioning-model={body['provisioningModel'].lower().replace('_', '-')}",
    ]
    if "runDuration" in body:
        parts.append(f"--max-run-duration={body['runDuration']['maxRunDuration']}")
    return " ".join(parts)


def is_unknown(value: Any) -> bool:
    """A value the engine does not know yet (a preview): pulumi's Unknown, or its wire sentinel."""
    from pulumi.output import Unknown
    from pulumi.runtime import rpc

    return isinstance(value, Unknown) or value == rpc.UNKNOWN


def compare_known(old: Any, new: Any) -> tuple[bool, bool]:
    """(differs in a known value, has an unknown value) of a new input against the old one, leaf by leaf."""
    if is_unknown(new):
        return False, True
    if isinstance(old, dict) and isinstance(new, dict):
        results = [compare_known(old.get(key), new.get(key)) for key in old.keys() | new.keys()]
        return any(changed for changed, _ in results), any(maybe for _, maybe in results)
    if isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            return True, False
        results = [compare_known(mine, theirs) for mine, theirs in zip(old, new, strict=True)]
        return any(changed for changed, _ in results), any(maybe for _, maybe in results)
    return old != new, False


def _is_empty(value: Any) -> bool:
    return value in ({}, [], "", False, None)


def request_differences(sent: Any, observed: Any, path: str = "") -> list[str]:
    """Paths where a queued resource read back from the API differs from the body this stack sends.

    Only what we send is compared: fields the server adds (name, createTime, state, terminationTime,
    node defaults) are ignored, and a missing field equals an empty value we sent, because proto3
    JSON leaves empty maps, lists and strings out of responses.
    """
    if isinstance(sent, dict):
        if not isinstance(observed, dict):
            return [path or "(body)"]
        differences = []
        for key, value in sent.items():
            where = f"{path}.{key}" if path else key
            if key in observed:
                differences += request_differences(value, observed[key], where)
            elif where == "queueingPolicy.validUntilDuration" and "validUntilTime" in observed:
                continue  # the API may keep a relative queue deadline as the absolute time it ends
            elif not _is_empty(value):
                differences.append(where)
        return differences
    if isinstance(sent, list):
        if not isinstance(observed, list) or len(sent) != len(observed):
            return [path]
        return [difference for index, (mine, theirs) in enumerate(zip(sent, observed, strict=True))
                for difference in request_differences(mine, theirs, f"{path}[{index}]")]
    return [] if sent == observed else [path]


class TpuApiError(Exception):
    """A refusal from the TPU API, with what to do about it.

    `transient`: the last attempt failed on an outage (5xx, 429, network, token endpoint), not a refusal,
    so trying again later may work.
    """

    def __init__(self, message: str, status: int | None = None, transient: bool = False):
        super().__init__(message)
        self.status = status
        self.transient = transient


class HostStoppingError(TpuApiError):
    """The provider host is shutting down (the engine's SIGINT, or its CLI gone) while a create waits."""


class OperationFailedError(TpuApiError):
    """A long-running operation that finished with an error (google.rpc.Status: `code`, `message`)."""

    def __init__(self, message: str, code: int | None):
        super().__init__(message)
        self.code = code


# google.rpc.Code ALREADY_EXISTS (googleapis google/rpc/code.proto).
ALREADY_EXISTS_CODE = 6


# The host polls this often for its own shutdown while it waits: well inside the engine's 5 s grace.
SHUTDOWN_POLL_SECONDS = 0.1


def host_is_stopping() -> bool:
    """The dynamic-provider host is going away: the engine stopped it, or the CLI is gone without a word.

    On the engine's SIGINT the host's main thread leaves `Event().wait()` through KeyboardInterrupt, stops the
    gRPC server and returns (pulumi sdk/python/lib/pulumi/dynamic/__main__.py, main), while the call's worker
    thread runs on until the engine kills the process group 5 s after the SIGINT
    (sdk/go/common/resource/plugin/plugin.go, newPlugin's kill: InterruptChildren, then KillChildren).
    Never true on the main thread (tests, tools). At the main thread's end CPython sets
    threading._SHUTTING_DOWN and then joins the worker threads (threading._shutdown, concurrent.futures'
    exit hook) before it marks the main thread stopped, so the flag is the first sign; is_alive() is the
    public fallback. A CLI that died without signalling (components/vm/engine_liveness.py) counts too.
    tests/test_provider_host.py checks both against the real host."""
    main = threading.main_thread()
    if threading.current_thread() is main:
        return False
    return (bool(getattr(threading, "_SHUTTING_DOWN", False)) or not main.is_alive()
            or engine_liveness.engine_gone())


def in_provider_host() -> bool:
    """On a worker thread of the dynamic-provider host (its gRPC server's), not in a test or a tool."""
    return threading.current_thread() is not threading.main_thread()


def _stopping_reason() -> str:
    if engine_liveness.engine_gone():
        return ("interrupted: the Pulumi CLI is gone without stopping this provider (killed, its terminal or "
                "runner closed)")
    return "interrupted: the Pulumi engine is stopping this provider (Ctrl-C, a CI timeout)"


def sleep_unless_stopping(seconds: float) -> None:
    """time.sleep that ends with HostStoppingError as soon as the host is stopping."""
    if threading.current_thread() is threading.main_thread():
        time.sleep(seconds)  # not inside the host's gRPC server: nothing to watch for
        return
    end = time.monotonic() + seconds
    while True:
        if host_is_stopping():
            raise HostStoppingError(_stopping_reason())
        left = end - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, SHUTDOWN_POLL_SECONDS))


def _log(message: str) -> None:
    # The dynamic-provider host has no engine log stream; stderr reaches the CLI's diagnostics.
    try:
        print(f"[tpu-vllm queued resource] {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass  # the CLI reading it is gone (EPIPE): the line has nowhere to go, and the cleanup must go on


def _error_details(error: Any) -> tuple[int, str, dict[str, Any]]:
    status = int(error.resp.status)
    try:
        payload = json.loads(error.content.decode("utf-8")).get("error", {})
    except (ValueError, AttributeError):
        payload = {}
    return status, payload.get("message") or str(error), payload


def _server_retry_delay(error: Any, payload: dict[str, Any]) -> float | None:
    """How long the server asks to wait: a google.rpc.RetryInfo detail's retryDelay (AIP-193; the proto3 JSON
    of a Duration, "7s"), or an HTTP Retry-After of whole seconds; None when it says nothing."""
    for detail in payload.get("details") or []:
        if isinstance(detail, dict) and detail.get("@type") == RETRY_INFO_TYPE:
            match = re.fullmatch(r"(\d+(?:\.\d+)?)s", str(detail.get("retryDelay", "")))
            if match:
                return float(match.group(1))
    retry_after = error.resp.get("retry-after")
    return float(retry_after) if retry_after and retry_after.isdigit() else None


def _explain(action: str, status: int, message: str, payload: dict[str, Any]) -> str:
    hints = []
    for detail in payload.get("details", []):
        permission = (detail.get("metadata") or {}).get("permission")
        if permission:
            hints.append(f"missing permission: {permission}")
        for violation in detail.get("fieldViolations", []):
            hints.append(f"field {violation.get('field')}: {violation.get('description')}")
    if status == 403 and not hints:
        hints.append("the deployer needs roles/tpu.admin on the project")
    if status == 401:
        hints.append(f"the credentials were not accepted; {SIGN_IN_FIX}")
    suffix = f" ({'; '.join(hints)})" if hints else ""
    return f"TPU API refused {action} ({status} {payload.get('status', '')}): {message}{suffix}".replace(" )", ")")


SIGN_IN_FIX = ("sign in again with `gcloud auth application-default login`, or point "
               "GOOGLE_APPLICATION_CREDENTIALS at a valid key")


def _message_of(error: BaseException) -> str:
    # google-auth errors carry (message, raw response) as args; the message alone reads better.
    return f"{error.__class__.__name__}: {error.args[0] if error.args else error}"


def _is_transient_fault(error: Exception) -> bool:
    """A network or token-endpoint failure worth another attempt, as opposed to a refusal or a bug."""
    import http.client

    import google.auth.exceptions
    import httplib2

    if isinstance(error, google.auth.exceptions.RefreshError):
        return error.retryable  # google-auth's own verdict: 5xx/429 from the token endpoint, not a refusal
    if isinstance(error, google.auth.exceptions.DefaultCredentialsError):
        return False  # no usable credentials (one of them is also an OSError)
    # ServerNotFoundError: a failed DNS lookup. TransportError: the token refresh could not connect
    # (google-auth-httplib2 wraps httplib2 and http.client errors in it).
    return isinstance(error, (OSError, http.client.HTTPException, httplib2.ServerNotFoundError,
                              google.auth.exceptions.TransportError))


def _permanent_fault(action: str, error: Exception) -> TpuApiError | None:
    """The clear error for a failure no retry fixes; None for one this module does not know."""
    import google.auth.exceptions
    import httplib2

    if isinstance(error, google.auth.exceptions.GoogleAuthError):
        return TpuApiError(f"Google credentials failed during {action} ({_message_of(error)}); {SIGN_IN_FIX}")
    if isinstance(error, httplib2.HttpLib2Error):
        return TpuApiError(f"TPU API request {action} failed ({_message_of(error)}); check "
                           f"{ENDPOINT_ENV} and the proxy settings (HTTPS_PROXY, NO_PROXY) if set")
    return None


@dataclass
class TpuApi:
    """A thin, retrying wrapper over the discovery client. Built fresh in every provider call."""

    retry_base_seconds: float = 1.0
    max_attempts: int = 6
    sleep: Any = field(default=lambda seconds: time.sleep(seconds), repr=False)
    clock: Any = field(default=lambda: time.monotonic(), repr=False)
    _service: Any = field(default=None, repr=False)

    @property
    def service(self) -> Any:
        if self._service is None:
            import google.auth
            from google.api_core.client_options import ClientOptions
            from googleapiclient import discovery

            credentials, _ = google.auth.default(scopes=[CLOUD_PLATFORM_SCOPE])
            endpoint = os.environ.get(ENDPOINT_ENV)
            self._service = discovery.build(
                "tpu", "v2alpha1", credentials=credentials, static_discovery=True,
                cache_discovery=False,
                client_options=ClientOptions(api_endpoint=endpoint) if endpoint else None,
            )
        return self._service

    def _locations(self) -> Any:
        return self.service.projects().locations()

    def call(self, action: str, build_request: Any, allow: tuple[int, ...] = ()) -> Any:
        """Run a request; retry transient faults, honour Retry-After; `allow` statuses return None."""
        from googleapiclient.errors import HttpError

        delay = self.retry_base_seconds
        for attempt in range(1, self.max_attempts + 1):
            try:
                reply = build_request().execute(num_retries=0)
            except HttpError as error:
                status, message, payload = _error_details(error)
                if status in allow:
                    return None
                transient = status in TRANSIENT_STATUSES
                if not transient or attempt == self.max_attempts:
                    raise TpuApiError(_explain(action, status, message, payload), status, transient) from None
                wait = _server_retry_delay(error, payload)
                wait = delay if wait is None else wait
                _log(f"{action}: {status}, retrying in {wait:g}s ({attempt}/{self.max_attempts})")
            except Exception as error:
                if not _is_transient_fault(error):
                    permanent = _permanent_fault(action, error)
                    if permanent is None:
                        raise
                    raise permanent from None
                if attempt == self.max_attempts:
                    raise TpuApiError(
                        f"TPU API unreachable during {action} after {attempt} attempts ({_message_of(error)}); "
                        "check this machine's connection to Google APIs (DNS, proxy, firewall) and try again",
                        transient=True,
                    ) from None
                wait = delay
                _log(f"{action}: {_message_of(error)}, retrying in {wait:g}s ({attempt}/{self.max_attempts})")
            else:
                if not isinstance(reply, dict):  # e.g. a proxy's HTML page: not the API at all
                    raise TpuApiError(f"TPU API answered {action} with something other than JSON: "
                                      f"{str(reply)[:120]!r}; check {ENDPOINT_ENV} and any proxy in between")
                return reply
            self.sleep(min(wait, 60.0))
            delay *= 2
        raise AssertionError("unreachable")

    def through_outages(self, read: Any, deadline: float, poll: float, waiting_for: str) -> Any:
        """`read()` (a call with its own short retry), tried again every `poll` while it fails on an
        outage, until `deadline`. A queue wait lasts up to an hour and a half: a few minutes without the
        API must not end it."""
        while True:
            try:
                return read()
            except TpuApiError as error:
                if not error.transient:
                    raise
                left = deadline - self.clock()
                if left <= 0:
                    raise TpuApiError(f"{str(error).rstrip('.')}; still failing when the time to wait for "
                                      f"{waiting_for} ran out", error.status, transient=True) from None
                _log(f"waiting for {waiting_for}: {str(error).rstrip('.')}; trying again in {poll:g}s "
                     f"({_duration(left)} left)")
                self.sleep(poll)

    def create(self, parent: str, queued_resource_id: str, body: dict[str, Any], request_id: str) -> dict[str, Any]:
        """`request_id` is the same on every retry, so a retry after a lost reply is the same request."""
        return self.call("queuedResources.create", lambda: self._locations().queuedResources().create(
            parent=parent, queuedResourceId=queued_resource_id, requestId=request_id, body=body))

    def get(self, name: str) -> dict[str, Any] | None:
        return self.call("queuedResources.get", lambda: self._locations().queuedResources().get(
            name=name), allow=(404,))

    def delete(self, name: str) -> dict[str, Any] | None:
        return self.call("queuedResources.delete", lambda: self._locations().queuedResources().delete(
            name=name, force=True), allow=(404,))

    def get_node(self, name: str) -> dict[str, Any] | None:
        return self.call("nodes.get", lambda: self._locations().nodes().get(name=name), allow=(404,))

    def get_operation(self, name: str) -> dict[str, Any]:
        return self.call("operations.get", lambda: self._locations().operations().get(name=name))

    def wait_operation(self, operation: dict[str, Any], action: str, deadline: float, poll: float) -> None:
        read = functools.partial(self.get_operation, operation.get("name"))
        while not operation.get("done"):
            if self.clock() > deadline:
                raise TpuApiError(f"{action}: operation {operation.get('name')} did not finish in time")
            self.sleep(poll)
            operation = self.through_outages(read, deadline, poll, f"the {action} operation")
        if operation.get("error"):
            error = operation["error"]
            raise OperationFailedError(f"{action} failed: {error.get('message')} (code {error.get('code')})",
                                       error.get("code"))


def _state(queued_resource: dict[str, Any] | None) -> str:
    if queued_resource is None:
        return "MISSING"
    return (queued_resource.get("state") or {}).get("state", "STATE_UNSPECIFIED")


def _observed(api: TpuApi, queued_resource: dict[str, Any] | None, node_name: str) -> dict[str, Any]:
    """The outputs other resources and the user read."""
    state = _state(queued_resource)
    node = api.get_node(node_name) if state == "ACTIVE" else None
    endpoint = ((node or {}).get("networkEndpoints") or [{}])[0]
    return {
        "queuedResourceName": (queued_resource or {}).get("name", ""),
        "nodeName": node_name if node else "",
        # The node's own identity: a new node (after the run ended, or a replacement) has a new one.
        "nodeUid": (node or {}).get("id", ""),
        "nodeCreateTime": (node or {}).get("createTime", ""),
        "state": state,
        "nodeState": (node or {}).get("state", ""),
        "internalIp": endpoint.get("ipAddress", ""),
        "externalIp": (endpoint.get("accessConfig") or {}).get("externalIp", ""),
        "terminationTime": ((queued_resource or {}).get("runDuration") or {}).get("terminationTime", ""),
        "provisioningModel": (queued_resource or {}).get("provisioningModel", ""),
    }


def node_is_missing(observed: dict[str, Any]) -> bool:
    """An ACTIVE request whose node is not there: nodes.get answered 404, so the node id read back is "".
    (State written before the nodeUid output existed has no such key: not a missing node.)"""
    return observed.get("state") == "ACTIVE" and observed.get("nodeUid") == ""


def _hand_delete_command(props: dict[str, Any]) -> str:
    project, zone = props["parent"].split("/")[1], props["parent"].rsplit("/", 1)[-1]
    return (f"gcloud alpha compute tpus queued-resources delete {props['queuedResourceId']} "
            f"--project={project} --zone={zone} --force --quiet")


def _with_hand_delete(reason: str, props: dict[str, Any]) -> str:
    command = _hand_delete_command(props)
    return reason if command in reason else f"{reason.rstrip('.')}; delete it by hand: {command}"


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


class CreateProgress:
    """What one create has done on the server so far, told to its watchdog as it changes: whether an
    interruption must delete a request (one it made, or may have made) or leave it (one it did not make)."""

    def __init__(self, watchdog: CreateWatchdog | None):
        self.watchdog = watchdog
        self.state: str | None = None
        self.handed_over = False

    def now(self, state: str) -> None:
        self.state = state
        if self.watchdog is not None:
            self.watchdog.tell(state)

    def hand_over(self, state: str, props: dict[str, Any]) -> str:
        """Leave the DELETE to the watchdog (it retries a refusal after this host has gone); what to tell."""
        if self.watchdog is None:
            return f"it may queue and bill without Pulumi knowing: {_hand_delete_command(props)}"
        self.handed_over = True
        self.watchdog.hand_over(state)
        return (f"the create's watchdog keeps sending the DELETE after this host has gone; if "
                f"`python -m tools.status` still shows it, delete it: {_hand_delete_command(props)}")

    def finish(self) -> None:
        if self.watchdog is not None and not self.handed_over:
            self.watchdog.release()


class QueuedResourceProvider(ResourceProvider):
    """CRUD for one queued resource. Holds no client or credentials: it is pickled into state."""

    # A 409 leads to waiting out a DELETING request or deleting a dead one of ours, then a new try.
    MAX_CREATE_ATTEMPTS = 3

    def _api(self, props: dict[str, Any]) -> TpuApi:
        return TpuApi(retry_base_seconds=float(props.get("retryBaseSeconds", 1.0)), sleep=sleep_unless_stopping)

    @staticmethod
    def _name(props: dict[str, Any]) -> str:
        return f"{props['parent']}/queuedResources/{props['queuedResourceId']}"

    @staticmethod
    def _node_name(props: dict[str, Any]) -> str:
        spec = props["body"]["tpu"]["nodeSpec"][0]
        return f"{spec['parent']}/nodes/{spec['nodeId']}"

    def create(self, props: dict[str, Any]) -> CreateResult:
        api, name = self._api(props), self._name(props)
        poll = float(props.get("pollSeconds", 15))
        started = api.clock()
        deadline = started + float(props.get("waitSeconds", 5400))
        progress = CreateProgress(None)
        if in_provider_host():
            engine_liveness.watch()
            # A SIGTERM or SIGKILL ends the host with no Python run (signal handlers are the main thread's, and
            # this is a gRPC worker): a watchdog process deletes this create's request then.
            progress.watchdog = CreateWatchdog.start({
                "name": name, "queuedResourceId": props["queuedResourceId"], "handDelete": _hand_delete_command(props),
                "pollSeconds": poll, "deleteWaitSeconds": float(props.get("deleteWaitSeconds", 1200)),
                "reportSeconds": float(props.get("watchdogReportSeconds", REPORT_SECONDS))})
        try:
            return self._create(api, props, started, deadline, poll, progress)
        finally:
            progress.finish()
            if in_provider_host() and engine_liveness.engine_gone():
                # Nobody will call or stop this host any more: end it as the engine's own close would.
                os.kill(os.getpid(), signal.SIGINT)

    def _create(self, api: TpuApi, props: dict[str, Any], started: float, deadline: float, poll: float,
                progress: CreateProgress) -> CreateResult:
        # A failed create records nothing in Pulumi's state, so `pulumi destroy` would not know its request:
        # whatever ends the create deletes what it made (or may have made), or says how to.
        try:
            operation = self._request(api, props, progress)
            progress.now(CREATED if operation is not None else ADOPTED)
            if operation is not None:
                self._wait_for_create_operation(api, operation, deadline, poll, progress)
            outs = self._wait_until_active(api, props, started, deadline)
        except HostStoppingError as error:
            # Not in state (the create never returned): left alone, it would queue, go ACTIVE and bill unseen.
            raise TpuApiError(f"{error}. {self._abandon(props, progress)}") from None
        except Exception as error:
            if progress.state not in (CREATED, ADOPTED):
                raise  # nothing this create made is known to be on the server: the error says what to do
            reason = str(error) if isinstance(error, TpuApiError) else (
                f"unexpected {_message_of(error)} while waiting for {props['queuedResourceId']}")
            raise TpuApiError(
                f"{reason.rstrip('.')}. {self._remove_after_failed_create(api, props, progress)}") from None
        return CreateResult(id_=self._name(props), outs={**props, **outs})

    @staticmethod
    def _wait_for_create_operation(api: TpuApi, operation: dict[str, Any], deadline: float, poll: float,
                                   progress: CreateProgress) -> None:
        try:
            api.wait_operation(operation, "queuedResources.create", deadline, poll)
        except OperationFailedError as failed:
            if failed.code == ALREADY_EXISTS_CODE:
                # The name is held by a request this create did not make: never delete that one.
                progress.now(EXISTING)
            raise

    def _request(self, api: TpuApi, props: dict[str, Any], progress: CreateProgress) -> dict[str, Any] | None:
        """Request the queued resource (its create operation), or adopt the one an interrupted run of
        this stack left behind (None)."""
        name, qr_id = self._name(props), props["queuedResourceId"]
        for _ in range(self.MAX_CREATE_ATTEMPTS):
            # From the POST on, the request may exist even if no reply says so (a reply lost, or a 503 sent
            # after the work was done): an interruption from here deletes it.
            progress.now(REQUESTING)
            try:
                # One id per create call: the API answers a retry of it with the first call's operation.
                operation = api.create(props["parent"], qr_id, props["body"], str(uuid.uuid4()))
            except TpuApiError as error:
                if error.transient:
                    # The last reply was lost or an outage's, so the request may exist anyway.
                    raise TpuApiError(
                        f"{str(error).rstrip('.')}. The request may have reached the API before that: if it "
                        "did, the next "
                        f"pulumi up adopts it; or delete it: {_hand_delete_command(props)}",
                        error.status, transient=True,
                    ) from None
                if error.status != 409:
                    raise
                progress.now(EXISTING)
                existing = api.get(name)
                state = _state(existing)
                if state == "MISSING":
                    continue  # it went away in between
                if state == "DELETING":
                    _log(f"{qr_id}: an earlier request of that name is being deleted; waiting for it")
                    self._wait_until_gone(api, props)
                    continue
                differences = request_differences(props["body"], existing)
                if differences:
                    raise TpuApiError(
                        f"queued resource {qr_id} already exists ({state}) and is not what this stack "
                        f"requests (differs in: {', '.join(differences[:6])}). If it is a leftover of this "
                        f"stack, delete it and run pulumi up again: {_hand_delete_command(props)}; "
                        "otherwise choose another tpu-vllm:tpu.nodeId"
                    ) from None
                if state in DEAD_STATES:
                    _log(f"{qr_id}: an earlier request of this stack is {state}; deleting it and requesting anew")
                    self._delete(api, props)
                    continue
                _log(f"{qr_id}: adopting the existing request ({state}); it is exactly what this stack "
                     "requests (left by an interrupted run or a lost reply)")
                return None
            _log(f"requested {name}")
            return operation
        raise TpuApiError(f"queued resource {qr_id} kept existing after {self.MAX_CREATE_ATTEMPTS} attempts "
                          f"to request it; check it, or delete it: {_hand_delete_command(props)}")

    def _wait_until_active(self, api: TpuApi, props: dict[str, Any], started: float,
                           deadline: float) -> dict[str, Any]:
        """The observed outputs once the request is ACTIVE; raises (without deleting) on anything else."""
        name, qr_id = self._name(props), props["queuedResourceId"]
        poll = float(props.get("pollSeconds", 15))
        limit = _duration(deadline - started)
        last_state, last_logged = None, started
        while True:
            queued_resource = api.through_outages(functools.partial(api.get, name), deadline, poll, qr_id)
            state = _state(queued_resource)
            now = api.clock()
            # Log on a change, and before the next poll would leave a minute without a line.
            if state != last_state or now - last_logged + poll > PROGRESS_LOG_SECONDS:
                _log(f"{qr_id}: {state}, {_duration(now - started)} since the request (gives up after {limit})")
                last_state, last_logged = state, now
            if state == "ACTIVE":
                observe = functools.partial(_observed, api, queued_resource, self._node_name(props))
                observed = api.through_outages(observe, deadline, poll, f"the node of {qr_id}")
                if node_is_missing(observed):
                    raise TpuApiError(f"queued resource {qr_id} is ACTIVE but its node "
                                      f"{self._node_name(props)} does not exist")
                return observed
            if state == "FAILED":
                error = ((queued_resource["state"].get("failedData") or {}).get("error") or {})
                raise TpuApiError(f"queued resource {qr_id} FAILED: {error.get('message', 'no reason given')}")
            if state not in WAITING_STATES:
                raise TpuApiError(f"queued resource {qr_id} is {state}, not ACTIVE")
            if now > deadline:
                raise TpuApiError(
                    f"gave up on {qr_id} after {props.get('waitSeconds')} s still {state} (no capacity yet): "
                    "try again later or raise tpu-vllm:tpu.queueTimeout"
                )
            api.sleep(poll)

    def _abandon(self, props: dict[str, Any], progress: CreateProgress) -> str:
        """On an interruption: send the DELETE of what this create made or may have made, once and without
        waiting for it (the engine kills the host 5 s after its SIGINT); hand it to the watchdog when it is
        not accepted; say what was done on stderr, which reaches the CLI."""
        qr_id = props["queuedResourceId"]
        if progress.state == ADOPTED:
            message = (f"{qr_id} was an existing request this create adopted; it is left as it was and is not "
                       f"in Pulumi's state: the next pulumi up adopts it again, or delete it: "
                       f"{_hand_delete_command(props)}")
        elif progress.state in (CREATED, REQUESTING):
            whose = "which this create " + ("requested" if progress.state == CREATED else "may have requested")
            try:
                operation = TpuApi(max_attempts=1).delete(self._name(props))
                done = "sent the DELETE of" if operation is not None else "found nothing left of"
                message = (f"{done} {qr_id}, {whose}, so it does not queue or bill untracked; "
                           "`python -m tools.status` shows when it is gone")
            except Exception as error:  # noqa: BLE001 - handed on, with the command that finishes the job
                reason = str(error) if isinstance(error, TpuApiError) else _message_of(error)
                message = (f"the DELETE of {qr_id} ({whose}) was not accepted ({reason}); "
                           f"{progress.hand_over(CREATED, props)}")
        else:
            message = (f"this create had made no request yet ({qr_id} was held by another); nothing of it is "
                       "queued")
        _log(f"interrupted while waiting for {qr_id}: {message}")
        return message

    def _remove_after_failed_create(self, api: TpuApi, props: dict[str, Any], progress: CreateProgress) -> str:
        """Delete a request whose create failed (bounded by deleteWaitSeconds, never raising); say how it went."""
        _log(f"deleting {props['queuedResourceId']}: the create failed and Pulumi will not track it")
        try:
            deleted = self._delete(api, props)
        except HostStoppingError as error:
            # Interrupted while the API still refused the DELETE (a request provisioning): the watchdog goes on.
            _log(f"{error} while deleting the request")
            return f"Interrupted while deleting it: {progress.hand_over(CREATED, props)}"
        except Exception as error:
            reason = _with_hand_delete(str(error) if isinstance(error, TpuApiError) else _message_of(error), props)
            _log(f"could not delete the request: {reason}")
            return ("Deleting it failed as well, so it may still be queued or running (and billing) "
                    f"without Pulumi knowing of it: {reason}")
        if not deleted:
            return "The request is gone, so nothing is left queued or billing."
        return "The request was deleted, so nothing is left queued or billing."

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        api = self._api(props)
        queued_resource = api.get(id_)
        if queued_resource is None:
            _log(f"{id_} no longer exists; the next pulumi up requests a new one")
            return ReadResult(id_=None, outs={})
        observed = _observed(api, queued_resource, self._node_name(props))
        if observed["state"] in GONE_STATES:
            _log(f"{id_} is {observed['state']} (its run duration ended or it failed; the node "
                 "is gone); the next pulumi up replaces it with a fresh node")
        elif node_is_missing(observed):
            _log(f"{id_} is ACTIVE but its node is gone (deleted by hand or by GCP); the next pulumi up "
                 "replaces the request with a fresh node")
        return ReadResult(id_=id_, outs={**props, **observed})

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # In a preview, news may hold unknowns (pulumi.dynamic's Diff deserialises them with keep_unknowns:
        # sdk/python/lib/pulumi/dynamic/__main__.py, Diff). Any change of the request is a new request, and
        # `pulumi up` diffs again with every value known (the SDK resolves inputs before it registers) and
        # replaces then without asking again: so an unknown leaf of the request is shown as the replacement it
        # may be, never as an update (as the bridge shows an unknown ForceNew value:
        # pulumi-terraform-bridge v3.136.0 pkg/tests/diff_test/detailed_diff_unknown_test.go,
        # TestUnknownCollectionForceNewDetailedDiff). A replacement the preview
        # showed can turn out an update at `up`; the other way round never happens.
        compared = {key: compare_known(olds.get(key), news.get(key)) for key in REQUEST_KEYS}
        replaces = [key for key, (changed, maybe) in compared.items() if changed or maybe]
        if olds.get("state") in GONE_STATES:
            replaces.append("state")
        elif node_is_missing(olds):
            replaces.append("nodeUid")  # the serving step would otherwise dial host "" 60 times
        # Only named inputs count: the None placeholders for outputs must not look like changes.
        tuning_changed = any(olds.get(key) != news.get(key) for key in TUNING_KEYS)
        # The old request must go first: it holds the node id, the quota and the disk.
        return DiffResult(
            changes=bool(replaces) or tuning_changed,
            replaces=replaces,
            delete_before_replace=True,
        )

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        """Only how the provider waits changed; the request and what was observed stay."""
        return UpdateResult(outs={**olds, **{key: news[key] for key in TUNING_KEYS if key in news}})

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        try:
            self._delete(self._api(props), props)
        except TpuApiError as error:
            raise TpuApiError(_with_hand_delete(str(error), props), error.status, error.transient) from None

    def _delete(self, api: TpuApi, props: dict[str, Any]) -> bool:
        """force=true deletes the node first; a request still PROVISIONING, or an outage, is retried
        within a bound. False when it was already gone."""
        name = self._name(props)
        poll = float(props.get("pollSeconds", 15))
        deadline = api.clock() + float(props.get("deleteWaitSeconds", 1200))
        while True:
            try:
                operation = api.delete(name)
                break
            except TpuApiError as error:
                # 400/409 FAILED_PRECONDITION: the API will not delete it yet (e.g. PROVISIONING).
                if not (error.transient or error.status in (400, 409)) or api.clock() > deadline:
                    raise TpuApiError(
                        f"{str(error).rstrip('.')}. The request could not be deleted in time; finish by hand: "
                        f"{_hand_delete_command(props)}", error.status, error.transient,
                    ) from None
                _log(f"delete not accepted yet ({error}); retrying in {poll:g}s")
                api.sleep(poll)
        if operation is None:
            return False  # already gone
        api.wait_operation(operation, "queuedResources.delete", deadline, poll)
        self._wait_until_gone(api, props, deadline)
        return True

    def _wait_until_gone(self, api: TpuApi, props: dict[str, Any], deadline: float | None = None) -> None:
        name = self._name(props)
        poll = float(props.get("pollSeconds", 15))
        if deadline is None:
            deadline = api.clock() + float(props.get("deleteWaitSeconds", 1200))
        read = functools.partial(api.get, name)
        while api.through_outages(read, deadline, poll, f"{name} to be deleted") is not None:
            if api.clock() > deadline:
                raise TpuApiError(f"{name} is still being deleted; check: {_hand_delete_command(props)}")
            api.sleep(poll)


class QueuedResource(Resource, module="tpu-vllm", name="QueuedResource"):
    """The dynamic resource; use TpuNode below rather than this directly."""

    queuedResourceName: pulumi.Output[str]
    nodeName: pulumi.Output[str]
    nodeUid: pulumi.Output[str]
    """The node's `id` (int64 as a string): every node GCP makes has its own."""
    nodeCreateTime: pulumi.Output[str]
    state: pulumi.Output[str]
    internalIp: pulumi.Output[str]
    externalIp: pulumi.Output[str]
    terminationTime: pulumi.Output[str]
    provisioningModel: pulumi.Output[str]

    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None):
        super().__init__(QueuedResourceProvider(), name, {**dict.fromkeys(OUTPUT_KEYS), **props}, opts)


@dataclass
class TpuNodeArgs:
    """What the TPU node is and how long the provider waits for it."""

    body: pulumi.Input[dict]
    """The QueuedResource request body, from queued_resource_body()."""
    parent: str
    """projects/<project>/locations/<zone>."""
    queued_resource_id: str
    queue_seconds: int
    """How long the request may wait for capacity; the provider waits this plus provisioning."""
    poll_seconds: float = 15.0
    delete_wait_seconds: int = 1200


class TpuNode(pulumi.ComponentResource):
    """One flex-start (or spot / on-demand) TPU node, requested through a queued resource."""

    queued_resource: QueuedResource
    node_name: pulumi.Output[str]
    node_uid: pulumi.Output[str]
    """Changes with every new node, unlike node_name (fixed per stack)."""
    node_create_time: pulumi.Output[str]
    external_ip: pulumi.Output[str]
    internal_ip: pulumi.Output[str]
    state: pulumi.Output[str]
    termination_time: pulumi.Output[str]

    def __init__(self, name: str, args: TpuNodeArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-vllm:tpu:TpuNode", name, None, opts)
        self.queued_resource = QueuedResource(
            f"{name}-qr",
            {
                "body": args.body,
                "parent": args.parent,
                "queuedResourceId": args.queued_resource_id,
                "waitSeconds": args.queue_seconds + PROVISIONING_GRACE_SECONDS,
                "pollSeconds": args.poll_seconds,
                "deleteWaitSeconds": args.delete_wait_seconds,
            },
            # A component's depends_on does not reach its children: the request itself must wait for the
            # account, secrets, disk and firewall that the body names by value.
            pulumi.ResourceOptions(parent=self, delete_before_replace=True,
                                   depends_on=opts.depends_on if opts is not None else None),
        )
        self.node_name = self.queued_resource.nodeName
        self.node_uid = self.queued_resource.nodeUid
        self.node_create_time = self.queued_resource.nodeCreateTime
        self.external_ip = self.queued_resource.externalIp
        self.internal_ip = self.queued_resource.internalIp
        self.state = self.queued_resource.state
        self.termination_time = self.queued_resource.terminationTime
        self.register_outputs({
            "node_name": self.node_name,
            "node_uid": self.node_uid,
            "node_create_time": self.node_create_time,
            "external_ip": self.external_ip,
            "internal_ip": self.internal_ip,
            "state": self.state,
            "termination_time": self.termination_time,
        })
