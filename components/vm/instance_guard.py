"""What keeps an interrupted create on the compute path from leaving a TPU VM billing that no stack holds.

pulumi-gcp's instance create POSTs the insert, stores the id, waits for the operation, then for RUNNING
(resource_compute_instance.go, resourceComputeInstanceCreate). A failed or timed-out operation wait clears the id
("The resource didn't actually create"), so Pulumi's state holds nothing while Compute Engine may go on with the
insert; a failed RUNNING wait (a TPU VM's PENDING is not in its list of states) keeps the id, and Pulumi records a
partly created instance. A Ctrl-C does not stop the provider's wait: pulumi-terraform-bridge's Cancel is a no-op
("For TF, this is a no-op", pkg/tfbridge/provider.go), so the first Ctrl-C lets the create run on and a second one
kills the CLI, leaving the insert Google goes on with. The create is bridged, so no code of ours runs inside it;
two dynamic resources bracket it:

- `InstanceGuard`, created just before the instance, starts a watchdog process (the queued-resource path's
  CreateWatchdog, components/vm/create_watchdog.py) that knows the instance's name and this create's
  `incarnation`, a new id the instance carries in its description;
- `InstanceGuardRelease`, created just after the instance (it depends on it), tells the watchdog "done".

When the pipe ends before "done" (the up was interrupted, the CLI died, or the create failed), the watchdog reads
the instance and deletes it if it carries this incarnation: nothing made by this create bills untracked. A
tracked instance deleted that way (an interrupt between the create and the release) is found gone by the next up.

After a flex-start run's end deleted the VM (Scheduling.instanceTerminationAction DELETE), a plain `pulumi up` would
see nothing to do, and a replacement would fail at the provider's delete of a missing instance; so the guard's diff
reads the instance and, when it is gone, stops the up with the fix: `pulumi up --refresh`. The refresh drops the
instance (the provider's Read: getInstance, HandleNotFoundError) and the guard's incarnation (its read), so that up
makes the instance again with the kept cache disk attached, warm.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult
from pulumi.dynamic import Resource as DynamicResource

from components.vm import engine_liveness
from components.vm.create_watchdog import CREATED, CreateWatchdog

WATCHDOG_MODULE = "components.vm.instance_watchdog_process"
KEYS = ("project", "zone", "name")
# The watchdogs this provider host started, by instance name, until their release.
_ARMED: dict[str, CreateWatchdog] = {}
_LOCK = threading.Lock()
_WATCHING_ENGINE = threading.Event()
ENGINE_POLL_SECONDS = 0.5


def _hand_over_when_the_engine_is_gone() -> None:
    """A CLI killed outright leaves this host (and the bridged provider's wait) running with nobody to record the
    instance (engine_liveness.py): hand every armed create to its watchdog then, which acts on the closed pipe."""
    while not engine_liveness.engine_gone():
        time.sleep(ENGINE_POLL_SECONDS)
    with _LOCK:
        armed = list(_ARMED.values())
        _ARMED.clear()
    for watchdog in armed:
        watchdog.hand_over(CREATED)


def _watch_the_engine() -> None:
    engine_liveness.watch()
    if not _WATCHING_ENGINE.is_set():
        _WATCHING_ENGINE.set()
        threading.Thread(target=_hand_over_when_the_engine_is_gone, name="tpu-vllm-instance-guard",
                         daemon=True).start()


class InstanceGoneError(Exception):
    """The stack's instance is gone while Pulumi may hold it: the words say `pulumi up --refresh`."""


def description(incarnation: str) -> str:
    """The instance's description: how the watchdog tells this create's instance from any other."""
    return f"tpu-vllm node, incarnation {incarnation}"


def is_this_incarnation(instance: dict[str, Any] | None, incarnation: str) -> bool:
    return bool(instance) and instance.get("description", "") == description(incarnation)


class InstanceGuardProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        incarnation = uuid.uuid4().hex
        request = {key: props[key] for key in KEYS} | {
            "incarnation": incarnation, "deleteWaitSeconds": props.get("deleteWaitSeconds", 1200),
            "pollSeconds": props.get("pollSeconds", 15)}
        _watch_the_engine()
        watchdog = CreateWatchdog.start(request, module=WATCHDOG_MODULE)
        if watchdog is not None:
            watchdog.tell(CREATED)
            with _LOCK:
                _ARMED[props["name"]] = watchdog
        return CreateResult(id_=f"{props['name']}-{incarnation}", outs={**props, "incarnation": incarnation})

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """A refresh: an instance gone (or another's) leaves the guard without an incarnation, so this up makes a
        new one, for the instance the provider's own refresh dropped (getInstance, HandleNotFoundError)."""
        from components.vm.compute_api import ComputeApi

        found = ComputeApi().get(props["project"], props["zone"], props["name"])
        kept = props.get("incarnation", "") if is_this_incarnation(found, props.get("incarnation", "")) else ""
        return ReadResult(id_=id_, outs={**props, "incarnation": kept})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        moved = [key for key in KEYS if olds.get(key) != news.get(key)]
        if moved:
            return DiffResult(changes=True, replaces=moved, delete_before_replace=True)
        if not olds.get("incarnation"):
            return DiffResult(changes=True, replaces=["incarnation"], delete_before_replace=True)
        from components.vm.compute_api import ComputeApi

        found = ComputeApi().get(news["project"], news["zone"], news["name"])
        if is_this_incarnation(found, olds["incarnation"]):
            return DiffResult(changes=False)
        # Gone: the run's end deleted it (or an interrupted create's watchdog did). Pulumi's state may still hold
        # it, and the provider's delete of a missing instance fails (resourceComputeInstanceDelete: "Error deleting
        # instance"), so only a refresh lets this up make it again.
        raise InstanceGoneError(
            f"the TPU VM {news['name']} in {news['zone']} is gone (its run ended, or an interrupted create's "
            "instance was deleted); run `pulumi up --refresh`: the refresh forgets it and this stack makes it again, "
            "with the kept cache disk (a warm boot)")

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs={**news, "incarnation": olds.get("incarnation", "")})

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        return None  # the guard holds nothing in the cloud


class InstanceGuardReleaseProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        with _LOCK:
            watchdog = _ARMED.pop(props["name"], None)
        if watchdog is not None:
            watchdog.release()
        return CreateResult(id_=f"{props['name']}-{props['incarnation']}", outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # A new incarnation is a new create to release: made again, never updated.
        changed = [key for key in ("name", "incarnation") if olds.get(key) != news.get(key)]
        return DiffResult(changes=bool(changed), replaces=changed, delete_before_replace=True)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        return None


class InstanceGuard(DynamicResource, module="tpu-vllm", name="InstanceGuard"):
    incarnation: pulumi.Output[str]

    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None):
        super().__init__(InstanceGuardProvider(), name, {"incarnation": None, **props}, opts)


class InstanceGuardRelease(DynamicResource, module="tpu-vllm", name="InstanceGuardRelease"):
    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None):
        super().__init__(InstanceGuardReleaseProvider(), name, props, opts)
