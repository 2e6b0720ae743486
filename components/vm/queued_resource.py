"""The flex-start TPU as a Pulumi dynamic provider: CRUD of one queued resource over the TPU v2alpha1 API.

STATE CONTRACT: Pulumi stores this provider in every stack's state by reference, as this module's path and
the class name (pulumi/pulumi sdk/python/lib/pulumi/dynamic/dynamic.py, serialize_provider: dill pickles the
instance, its class by reference; pkg/v3.259.0-14), and loads it from there on refresh and destroy:
`QueuedResourceProvider` stays defined here. The body is `tpu_request.py`, the client `tpu_api.py`, the
component a stack declares `tpu_node.py`.
"""

from __future__ import annotations

import functools
import uuid
from typing import Any

from pulumi.dynamic import (
    CreateResult,
    DiffResult,
    ReadResult,
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
from components.vm.host_stopping import HostStoppingError, in_provider_host, sleep_unless_stopping
from components.vm.tpu_api import (
    ALREADY_EXISTS_CODE,
    OperationFailedError,
    TpuApi,
    TpuApiError,
    duration,
    log,
    message_of,
)
from components.vm.tpu_request import request_differences

WAITING_STATES = {"CREATING", "ACCEPTED", "WAITING_FOR_RESOURCES", "PROVISIONING", "STATE_UNSPECIFIED"}
GONE_STATES = {"SUSPENDED", "SUSPENDING", "FAILED", "MISSING"}
# An earlier request in one of these holds the name but will never give a node.
DEAD_STATES = {"SUSPENDED", "SUSPENDING", "FAILED"}
# Inputs whose change is a new request; the rest only tune how the provider waits.
REQUEST_KEYS = ("body", "parent", "queuedResourceId")
TUNING_KEYS = ("waitSeconds", "pollSeconds", "deleteWaitSeconds", "retryBaseSeconds")
# A wait in the queue can last an hour: say where it stands at least this often, not only on changes.
PROGRESS_LOG_SECONDS = 60


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
                engine_liveness.end_host()  # nobody will call or stop this host any more

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
                f"unexpected {message_of(error)} while waiting for {props['queuedResourceId']}")
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
                    log(f"{qr_id}: an earlier request of that name is being deleted; waiting for it")
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
                    log(f"{qr_id}: an earlier request of this stack is {state}; deleting it and requesting anew")
                    self._delete(api, props)
                    continue
                log(f"{qr_id}: adopting the existing request ({state}); it is exactly what this stack "
                     "requests (left by an interrupted run or a lost reply)")
                return None
            log(f"requested {name}")
            return operation
        raise TpuApiError(f"queued resource {qr_id} kept existing after {self.MAX_CREATE_ATTEMPTS} attempts "
                          f"to request it; check it, or delete it: {_hand_delete_command(props)}")

    def _wait_until_active(self, api: TpuApi, props: dict[str, Any], started: float,
                           deadline: float) -> dict[str, Any]:
        """The observed outputs once the request is ACTIVE; raises (without deleting) on anything else."""
        name, qr_id = self._name(props), props["queuedResourceId"]
        poll = float(props.get("pollSeconds", 15))
        limit = duration(deadline - started)
        last_state, last_logged = None, started
        while True:
            queued_resource = api.through_outages(functools.partial(api.get, name), deadline, poll, qr_id)
            state = _state(queued_resource)
            now = api.clock()
            # Log on a change, and before the next poll would leave a minute without a line.
            if state != last_state or now - last_logged + poll > PROGRESS_LOG_SECONDS:
                log(f"{qr_id}: {state}, {duration(now - started)} since the request (gives up after {limit})")
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
                reason = str(error) if isinstance(error, TpuApiError) else message_of(error)
                message = (f"the DELETE of {qr_id} ({whose}) was not accepted ({reason}); "
                           f"{progress.hand_over(CREATED, props)}")
        else:
            message = (f"this create had made no request yet ({qr_id} was held by another); nothing of it is "
                       "queued")
        log(f"interrupted while waiting for {qr_id}: {message}")
        return message

    def _remove_after_failed_create(self, api: TpuApi, props: dict[str, Any], progress: CreateProgress) -> str:
        """Delete a request whose create failed (bounded by deleteWaitSeconds, never raising); say how it went."""
        log(f"deleting {props['queuedResourceId']}: the create failed and Pulumi will not track it")
        try:
            deleted = self._delete(api, props)
        except HostStoppingError as error:
            # Interrupted while the API still refused the DELETE (a request provisioning): the watchdog goes on.
            log(f"{error} while deleting the request")
            return f"Interrupted while deleting it: {progress.hand_over(CREATED, props)}"
        except Exception as error:
            reason = _with_hand_delete(str(error) if isinstance(error, TpuApiError) else message_of(error), props)
            log(f"could not delete the request: {reason}")
            return ("Deleting it failed as well, so it may still be queued or running (and billing) "
                    f"without Pulumi knowing of it: {reason}")
        if not deleted:
            return "The request is gone, so nothing is left queued or billing."
        return "The request was deleted, so nothing is left queued or billing."

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        api = self._api(props)
        queued_resource = api.get(id_)
        if queued_resource is None:
            log(f"{id_} no longer exists; the next pulumi up requests a new one")
            return ReadResult(id_=None, outs={})
        observed = _observed(api, queued_resource, self._node_name(props))
        if observed["state"] in GONE_STATES:
            log(f"{id_} is {observed['state']} (its run duration ended or it failed; the node "
                 "is gone); the next pulumi up replaces it with a fresh node")
        elif node_is_missing(observed):
            log(f"{id_} is ACTIVE but its node is gone (deleted by hand or by GCP); the next pulumi up "
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
                log(f"delete not accepted yet ({error}); retrying in {poll:g}s")
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
