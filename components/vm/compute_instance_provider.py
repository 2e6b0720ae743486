"""The TPU VM through Compute Engine as a Pulumi dynamic provider: insert, wait, read, diff, relabel and delete one
instance over Compute v1, as queued_resource.py does one queued resource over the TPU API.

STATE CONTRACT: Pulumi stores this provider in every stack's state by reference, as this module's path and the
class name (pulumi/pulumi sdk/python/lib/pulumi/dynamic/dynamic.py, serialize_provider), and loads it from there on
refresh and destroy: `ComputeInstanceProvider` stays defined here. The body is compute_instance.py's, the client
compute_api.py's.

The create:
- starts a watchdog process (create_watchdog.py, instance_watchdog_process.py) that knows the instance's name and
  this create's incarnation, a new id the instance carries in its description: if the host dies mid-create (a
  SIGTERM, a SIGKILL, the CLI gone), the watchdog deletes the instance that carries it, and nothing else;
- inserts with one requestId for all its retries, a flex-start one with params.requestValidForDuration, so the
  request waits in Compute Engine's queue;
- waits through PENDING ("For Flex Start provisioning instance is waiting for available capacity"),
  PROVISIONING and STAGING to RUNNING, under waitSeconds (the queue, then the start);
- on any failure or interruption deletes what it made, or hands that to the watchdog, and says so.

After a flex-start run's end deleted the VM (instanceTerminationAction DELETE), the diff reads the instance and
replaces it: a plain `pulumi up` makes it again with the kept cache disk attached, warm.
"""

from __future__ import annotations

import functools
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from pulumi.dynamic import CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from components.vm import engine_liveness
from components.vm.compute_api import ComputeApi, ComputeApiError, describe_errors, log, operation_errors
from components.vm.create_watchdog import CREATED, REPORT_SECONDS, REQUESTING, CreateWatchdog
from components.vm.host_stopping import HostStoppingError, in_provider_host, sleep_unless_stopping
from components.vm.instance_cleanup import SETTLE_SECONDS, delete_this_creates_instance
from components.vm.instance_incarnation import description, is_a_tpu_vllm_node, is_this_incarnation
from components.vm.queued_resource import compare_known
from components.vm.tpu_api import duration, message_of

WATCHDOG_MODULE = "components.vm.instance_watchdog_process"
# Instance.status values on the way to RUNNING (compute.v1.json enumDescriptions): PENDING "waiting for available
# capacity from Dynamic Workload Scheduler", PROVISIONING "Resources are being allocated", STAGING "All required
# resources have been allocated and the instance is being started".
WAITING_STATUSES = ("PENDING", "PROVISIONING", "STAGING")
# REPAIRING "The instance is in repair"; a repair "returns the instance state to its original state" (Google's
# instance life cycle page): a VM seen in repair on its way up is waited for, not given up on.
REPAIR_STATUS = "REPAIRING"
# Where a stopped or suspended VM comes to rest (a stop ends TERMINATED, not deleted: the life cycle page).
STOPPED_STATUSES = ("TERMINATED", "STOPPED", "SUSPENDED")
# An instance in one of these serves nothing and will not again without a new one: TERMINATED "has stopped",
# STOPPING "either being deleted or killed", DEPROVISIONING "tear down tasks", SUSPENDED, STOPPED; MISSING: gone.
GONE_STATUSES = {"MISSING", "TERMINATED", "STOPPED", "STOPPING", "PENDING_STOP", "DEPROVISIONING", "SUSPENDING",
                 "SUSPENDED"}
# Inputs whose change is a new instance (the body but its labels, which setLabels changes in place).
REQUEST_KEYS = ("project", "zone", "name", "body")
TUNING_KEYS = ("waitSeconds", "pollSeconds", "deleteWaitSeconds", "retryBaseSeconds", "watchdogReportSeconds",
               "settleSeconds")
# Body keys the provider sets or Compute Engine changes in place.
UPDATABLE_BODY_KEYS = ("labels",)
PROVIDER_BODY_KEYS = ("description",)
PROGRESS_LOG_SECONDS = 60
MAX_INSERT_ATTEMPTS = 3


def status_of(instance: dict[str, Any] | None) -> str:
    return "MISSING" if instance is None else str(instance.get("status") or "STATUS_UNSPECIFIED")


def run_end(started: str, run_seconds: int | None) -> str:
    """The VM's start plus maxRunDuration (RFC 3339, UTC): computed, where Compute Engine does not say."""
    if not started or not run_seconds:
        return ""
    at = datetime.fromisoformat(started.replace("Z", "+00:00"))
    return (at + timedelta(seconds=int(run_seconds))).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def observed(instance: dict[str, Any] | None, body: dict[str, Any]) -> dict[str, Any]:
    """The outputs other resources and the user read."""
    found = instance or {}
    nic = (found.get("networkInterfaces") or [{}])[0]
    access = (nic.get("accessConfigs") or [{}])[0]
    run = ((body.get("scheduling") or {}).get("maxRunDuration") or {}).get("seconds")
    # ResourceStatus.scheduling.terminationTimestamp: "Time in future when the instance will be terminated".
    said = ((found.get("resourceStatus") or {}).get("scheduling") or {}).get("terminationTimestamp", "")
    return {
        "instanceId": str(found.get("id", "")),
        "selfLink": found.get("selfLink", ""),
        "status": status_of(instance),
        "internalIp": nic.get("networkIP", ""),
        "externalIp": access.get("natIP", ""),
        "creationTimestamp": found.get("creationTimestamp", ""),
        "lastStartTimestamp": found.get("lastStartTimestamp", ""),
        "terminationTime": said or (run_end(found.get("lastStartTimestamp", ""), int(run)) if run else ""),
    }


def hand_delete_command(props: dict[str, Any]) -> str:
    return (f"gcloud compute instances delete {props['name']} --zone={props['zone']} --project={props['project']} "
            "--quiet")


def _request_part(props: dict[str, Any]) -> dict[str, Any]:
    body = {key: value for key, value in (props.get("body") or {}).items()
            if key not in UPDATABLE_BODY_KEYS + PROVIDER_BODY_KEYS}
    return {**{key: props.get(key) for key in REQUEST_KEYS}, "body": body}


class ComputeInstanceProvider(ResourceProvider):
    """CRUD for one TPU VM instance. Holds no client or credentials: it is pickled into state."""

    def _api(self, props: dict[str, Any]) -> ComputeApi:
        return ComputeApi(retry_base_seconds=float(props.get("retryBaseSeconds", 1.0)), sleep=sleep_unless_stopping)

    @staticmethod
    def _id(props: dict[str, Any]) -> str:
        return f"projects/{props['project']}/zones/{props['zone']}/instances/{props['name']}"

    def create(self, props: dict[str, Any]) -> CreateResult:
        api = self._api(props)
        poll = float(props.get("pollSeconds", 15))
        started = api.clock()
        deadline = started + float(props.get("waitSeconds", 9000))
        incarnation = uuid.uuid4().hex
        body = {**props["body"], "description": description(incarnation)}
        watchdog = None
        if in_provider_host():
            engine_liveness.watch()
            # A SIGTERM or SIGKILL ends the host with no Python run (signal handlers are the main thread's, and
            # this is a gRPC worker): the watchdog deletes the instance of this incarnation then.
            watchdog = CreateWatchdog.start({
                "project": props["project"], "zone": props["zone"], "name": props["name"],
                "incarnation": incarnation, "pollSeconds": poll,
                "deleteWaitSeconds": float(props.get("deleteWaitSeconds", 1200)),
                "settleSeconds": float(props.get("settleSeconds", SETTLE_SECONDS)),
                "reportSeconds": float(props.get("watchdogReportSeconds", REPORT_SECONDS))}, module=WATCHDOG_MODULE)
        handed_over = False
        # Whether the insert has settled: its operation DONE, or a refusal. Until then a 404 may be an accepted
        # insert not yet visible (components/vm/instance_cleanup.py).
        progress = {"settled": False}
        try:
            outs = self._create(api, props, body, started, deadline, poll, watchdog, progress)
        except HostStoppingError as error:
            handed_over = watchdog is not None
            raise ComputeApiError(f"{error}. {self._abandon(props, incarnation, watchdog)}") from None
        except Exception as error:
            reason = str(error) if isinstance(error, ComputeApiError) else (
                f"unexpected {message_of(error)} while waiting for {props['name']}")
            cleanup, handed_over = self._remove_after_failed_create(api, props, incarnation, watchdog,
                                                                    progress["settled"])
            raise ComputeApiError(f"{reason.rstrip('.')}. {cleanup}") from None
        finally:
            if watchdog is not None and not handed_over:
                watchdog.release()
            if in_provider_host() and engine_liveness.engine_gone():
                engine_liveness.end_host()  # nobody will call or stop this host any more
        return CreateResult(id_=self._id(props), outs={**props, "body": body, **outs, "incarnation": incarnation})

    def _create(self, api: ComputeApi, props: dict[str, Any], body: dict[str, Any], started: float,
                deadline: float, poll: float, watchdog: CreateWatchdog | None,
                progress: dict[str, bool]) -> dict[str, Any]:
        if watchdog is not None:
            watchdog.tell(REQUESTING)
        try:
            operation = self._insert(api, props, body)
        except ComputeApiError as error:
            progress["settled"] = not error.transient  # a refusal made nothing; an outage may have
            raise
        if watchdog is not None:
            watchdog.tell(CREATED)
        incarnation = str(body["description"]).rsplit(" ", 1)[-1]
        return self._wait_until_running(api, props, body, incarnation, operation, started, deadline, poll,
                                        progress)

    def _insert(self, api: ComputeApi, props: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        """The insert's Operation; an instance of this name left by an earlier node of this stack that is on its
        way out is waited out (or deleted, when it has stopped), one of anybody else's refused."""
        project, zone, name = props["project"], props["zone"], props["name"]
        for _ in range(MAX_INSERT_ATTEMPTS):
            try:
                # One id per create call: the API answers a retry of it with the first call's operation.
                operation = api.insert(project, zone, body, str(uuid.uuid4()))
                log(f"inserted {self._id(props)}")
                return operation
            except ComputeApiError as error:
                if error.status != 409:
                    raise
            existing = api.get(project, zone, name)
            status = status_of(existing)
            if existing is None:
                continue  # it went away in between
            if not is_a_tpu_vllm_node(existing):
                raise ComputeApiError(
                    f"an instance named {name} already exists in {zone} ({status}) and is not a tpu-vllm node; "
                    "choose another tpu-vllm:tpu.nodeId, or delete it if it is yours to delete: "
                    f"{hand_delete_command(props)}") from None
            if status in STOPPED_STATUSES:
                log(f"{name}: an earlier node of this stack is {status}; deleting it and inserting anew")
                self._delete(api, props, None)
                continue
            if status in GONE_STATUSES:
                log(f"{name}: an earlier node of this stack is {status}; waiting for it to go or come to rest")
                self._wait_until_at_rest(api, props)
                continue
            raise ComputeApiError(
                f"an earlier tpu-vllm node named {name} is {status} in {zone} and this stack does not hold it (an "
                "interrupted run's, or another stack's with the same tpu.nodeId); if it is a leftover of this stack, "
                f"delete it and run pulumi up again: {hand_delete_command(props)}") from None
        raise ComputeApiError(f"instance {name} kept existing after {MAX_INSERT_ATTEMPTS} attempts to insert it; "
                              f"check it, or delete it: {hand_delete_command(props)}")

    def _wait_until_running(self, api: ComputeApi, props: dict[str, Any], body: dict[str, Any], incarnation: str,
                            operation: dict[str, Any], started: float, deadline: float,
                            poll: float, progress: dict[str, bool]) -> dict[str, Any]:
        """The observed outputs once the instance is RUNNING. Reads the insert's Operation until it is DONE (its
        errors end the wait) and the instance itself, so a VM that waits PENDING after or before its operation
        ends is waited for either way."""
        project, zone, name = props["project"], props["zone"], props["name"]
        limit = duration(deadline - started)
        last_status, last_logged = None, started
        while True:
            if operation.get("status") != "DONE":
                read_operation = functools.partial(api.operation, project, zone, operation.get("name", ""))
                operation = api.through_outages(read_operation, deadline, poll, "the insert operation")
            progress["settled"] = operation.get("status") == "DONE"
            if operation.get("status") == "DONE" and operation_errors(operation):
                raise ComputeApiError(f"the insert of {name} failed: {describe_errors(operation_errors(operation))}")
            instance = api.through_outages(functools.partial(api.get, project, zone, name), deadline, poll, name)
            status = status_of(instance)
            now = api.clock()
            if status != last_status or now - last_logged + poll > PROGRESS_LOG_SECONDS:
                log(f"{name}: {status}, {duration(now - started)} since the insert (gives up after {limit})")
                last_status, last_logged = status, now
            if status == "RUNNING" and is_this_incarnation(instance, incarnation):
                return observed(instance, body)
            if status == "MISSING" and operation.get("status") == "DONE":
                raise ComputeApiError(
                    f"{name} is gone though its insert finished without an error: Compute Engine removed it "
                    "before it ran (its request ran out of time in the queue, or someone deleted it)")
            if status not in (*WAITING_STATUSES, REPAIR_STATUS, "MISSING", "RUNNING"):
                raise ComputeApiError(f"{name} is {status}, not RUNNING")
            if now > deadline:
                raise ComputeApiError(
                    f"gave up on {name} after {props.get('waitSeconds')} s still {status} (no capacity yet): try "
                    "again later or in another zone, or raise tpu-vllm:tpu.queueTimeout (flex-start waits up to 2h)")
            api.sleep(poll)

    def _abandon(self, props: dict[str, Any], incarnation: str, watchdog: CreateWatchdog | None) -> str:
        """On an interruption (the engine kills the host 5 s after its SIGINT): the watchdog, which outlives the
        host, deletes what this create made; without one, one quick DELETE."""
        name = props["name"]
        if watchdog is not None:
            watchdog.hand_over(CREATED)
            message = (f"the create's watchdog deletes {name} if this create made it, so it does not queue or bill "
                       "untracked; if `python -m tools.status` still shows it, delete it: "
                       f"{hand_delete_command(props)}")
        else:
            try:
                api = ComputeApi(max_attempts=1)
                found = api.get(props["project"], props["zone"], name)
                if is_this_incarnation(found, incarnation):
                    api.delete(props["project"], props["zone"], name)
                    message = f"sent the DELETE of {name}, which this create made, so it does not queue or bill"
                elif found is None:
                    message = (f"found no instance {name} yet, but an insert Compute Engine took can show up a while "
                               "later; if `python -m tools.status` shows it, delete it: "
                               f"{hand_delete_command(props)}")
                else:
                    message = f"left {name} alone: it is not this create's"
            except Exception as error:  # noqa: BLE001 - said, with the command that finishes the job
                message = (f"could not delete {name} ({message_of(error)}); it may queue and bill without Pulumi "
                           f"knowing: {hand_delete_command(props)}")
        log(f"interrupted while waiting for {name}: {message}")
        return message

    def _remove_after_failed_create(self, api: ComputeApi, props: dict[str, Any], incarnation: str,
                                    watchdog: CreateWatchdog | None, settled: bool) -> tuple[str, bool]:
        """Delete the instance a failed create made (never one it did not); (what happened, handed over). Before
        the insert settled, the instance may show up later: the watchdog, which outlives this call, watches for
        it; without one, this call does."""
        name = props["name"]
        if not settled and watchdog is not None:
            watchdog.hand_over(CREATED)
            return (f"The insert may still land (its outcome was not read): the create's watchdog watches for {name} "
                    f"for {SETTLE_SECONDS / 60:.0f} min and deletes it if it shows up; if `python -m tools.status` "
                    f"shows it after that, delete it: {hand_delete_command(props)}"), True
        try:
            done, said = delete_this_creates_instance(
                api, props["project"], props["zone"], name, incarnation,
                api.clock() + float(props.get("deleteWaitSeconds", 1200)), float(props.get("pollSeconds", 15)),
                0.0 if settled else float(props.get("settleSeconds", SETTLE_SECONDS)), say=log)
            if done:
                return f"Cleanup: {said}.", False
            raise ComputeApiError(said)
        except HostStoppingError as error:
            log(f"{error} while deleting the instance")
            if watchdog is not None:
                watchdog.hand_over(CREATED)
                return "Interrupted while deleting it: the create's watchdog goes on with it.", True
            return f"Interrupted while deleting it; delete it: {hand_delete_command(props)}", False
        except Exception as error:  # noqa: BLE001 - handed on, with the command that finishes the job
            reason = str(error) if isinstance(error, ComputeApiError) else message_of(error)
            log(f"could not delete the instance: {reason}")
            if watchdog is not None:
                watchdog.hand_over(CREATED)
                return (f"Deleting it failed as well ({reason}); the create's watchdog keeps trying; if "
                        f"`python -m tools.status` still shows it, delete it: {hand_delete_command(props)}"), True
            return (f"Deleting it failed as well, so it may still be queued or running (and billing) without "
                    f"Pulumi knowing of it: {reason}; {hand_delete_command(props)}"), False

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        instance = self._api(props).get(props["project"], props["zone"], props["name"])
        if instance is None:
            log(f"{id_} no longer exists (its run ended, or it was deleted); the next pulumi up makes a new one "
                "with the kept cache disk")
            return ReadResult(id_=None, outs={})
        return ReadResult(id_=id_, outs={**props, **observed(instance, props.get("body") or {})})

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # An unknown leaf of the request (a preview) shows as the replacement it may be, never as an update:
        # queued_resource.py's diff says why.
        old_request, new_request = _request_part(olds), _request_part(news)
        compared = {key: compare_known(old_request.get(key), new_request.get(key)) for key in REQUEST_KEYS}
        replaces = [key for key, (changed, maybe) in compared.items() if changed or maybe]
        if not replaces and self._gone(olds):
            replaces.append("status")  # its run ended (DELETE) or it was stopped: made again, warm
        labels_changed, labels_unknown = compare_known((olds.get("body") or {}).get("labels"),
                                                       (news.get("body") or {}).get("labels"))
        if labels_unknown and "body" not in replaces:
            replaces.append("body")
        tuning_changed = any(olds.get(key) != news.get(key) for key in TUNING_KEYS)
        return DiffResult(changes=bool(replaces) or labels_changed or tuning_changed, replaces=replaces,
                          delete_before_replace=True)

    def _gone(self, olds: dict[str, Any]) -> bool:
        """Whether the stack's instance is gone or stopped now. Read live: a flex-start run's end deletes the VM
        without a word to Pulumi. When it cannot be read (an outage, no credentials), the last known status."""
        try:
            found = self._api(olds).get(olds["project"], olds["zone"], olds["name"])
        except Exception as error:  # noqa: BLE001 - a diff must not fail on a read: the state's word stands
            log(f"could not read {olds.get('name')} ({message_of(error)}); judging it by the last known status")
            return olds.get("status") in GONE_STATUSES
        return status_of(found) in GONE_STATUSES or not is_this_incarnation(found, olds.get("incarnation", ""))

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        """The labels (instances.setLabels, with the fingerprint it wants) and how the provider waits."""
        body = dict(olds.get("body") or {})
        labels = (news.get("body") or {}).get("labels") or {}
        if labels != body.get("labels"):
            api = self._api(news)
            project, zone, name = news["project"], news["zone"], news["name"]
            found = api.get(project, zone, name) or {}
            operation = api.set_labels(project, zone, name, labels, found.get("labelFingerprint", ""))
            self._wait_for_operation(api, news, operation, "instances.setLabels")
            body["labels"] = labels
        return UpdateResult(outs={**olds, "body": body, **{key: news[key] for key in TUNING_KEYS if key in news}})

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        try:
            # This stack's instance only: one of the name that another create made is left alone.
            self._delete(self._api(props), props, props.get("incarnation") or None)
        except ComputeApiError as error:
            message = str(error)
            if hand_delete_command(props) not in message:
                message = f"{message.rstrip('.')}; delete it by hand: {hand_delete_command(props)}"
            raise ComputeApiError(message, error.status, error.transient) from None

    def _wait_for_operation(self, api: ComputeApi, props: dict[str, Any], operation: dict[str, Any],
                            action: str) -> None:
        deadline = api.clock() + float(props.get("deleteWaitSeconds", 1200))
        finished = api.finished(props["project"], props["zone"], operation, deadline,
                                float(props.get("pollSeconds", 15)), action)
        if finished is None:
            raise ComputeApiError(f"{action}: operation {operation.get('name')} did not finish in time")
        if operation_errors(finished):
            raise ComputeApiError(f"{action} failed: {describe_errors(operation_errors(finished))}")

    def _delete(self, api: ComputeApi, props: dict[str, Any], incarnation: str | None) -> None:
        """Delete the instance (of `incarnation`; None: whatever this stack's node of the name is) and wait until it
        is gone, within deleteWaitSeconds: a not-ready refusal and a delete that failed are sent again."""
        done, said = delete_this_creates_instance(
            api, props["project"], props["zone"], props["name"], incarnation,
            api.clock() + float(props.get("deleteWaitSeconds", 1200)), float(props.get("pollSeconds", 15)), 0.0,
            say=log)
        if not done:
            raise ComputeApiError(f"{said}; check: {hand_delete_command(props)}")

    def _wait_until_at_rest(self, api: ComputeApi, props: dict[str, Any]) -> None:
        """Until the instance is gone or stopped (a STOPPING VM ends TERMINATED, a deleted one gone)."""
        poll = float(props.get("pollSeconds", 15))
        deadline = api.clock() + float(props.get("deleteWaitSeconds", 1200))
        read = functools.partial(api.get, props["project"], props["zone"], props["name"])
        while (found := api.through_outages(read, deadline, poll, f"{props['name']} to stop")) is not None \
                and status_of(found) not in STOPPED_STATUSES:
            if api.clock() > deadline:
                raise ComputeApiError(f"{props['name']} is still {status_of(found)}; check: "
                                      f"{hand_delete_command(props)}")
            api.sleep(poll)
