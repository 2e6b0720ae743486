"""tools.status for a node made through Compute Engine (`tpu.api: compute`): the instance's status, its run's end,
then the same reading over SSH as the queued-resource path (tools/status.py, `serving`).

Instance.status values and their meanings are compute.v1.json's (rev 20261106): PENDING is a flex-start request
"waiting for available capacity from Dynamic Workload Scheduler"; PROVISIONING and STAGING come before RUNNING;
REPAIRING is "in repair"; PENDING_STOP ("gracefully shutting down"), STOPPING and DEPROVISIONING ("performing tear
down tasks") are on the way out. A flex-start run's end deletes the instance (Scheduling.instanceTerminationAction
DELETE), so a missing one has ended only once runEndsAt has passed; before that it is a create that failed (no queue
is requested: the settings' tpu.api warning) or was interrupted, whose watchdog deleted what it left.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from components.vm.compute_api import ComputeApi, ComputeApiError
from tools.status_node import NodeFacts, SshTarget, read_node
from tools.status_report import Report, StatusError, parse_time, span

INSTANCE_NAME = re.compile(r"^projects/([^/]+)/zones/([^/]+)/instances/([^/]+)$")
COMING_UP = {"PROVISIONING", "STAGING"}
GOING_AWAY = {"PENDING_STOP", "STOPPING", "DEPROVISIONING"}


def run_end(instance: dict[str, Any]) -> datetime | None:
    """When the run ends: its last start plus maxRunDuration (computed; the run counts from the VM's start)."""
    started = parse_time(instance.get("lastStartTimestamp", "")) or parse_time(instance.get("creationTimestamp", ""))
    seconds = ((instance.get("scheduling") or {}).get("maxRunDuration") or {}).get("seconds")
    if started is None or seconds in (None, ""):
        return None
    return (started + timedelta(seconds=int(float(seconds)))).astimezone(UTC)


def decide(outputs: dict[str, Any], stack_label: str, now: datetime, serving: Callable[..., Report],
           api: ComputeApi | None = None, node_reader: Callable[[SshTarget, int], NodeFacts] = read_node) -> Report:
    """serving: tools.status.serving, the SSH reading both paths share (passed in: no import cycle)."""
    name = outputs["instanceName"]
    match = INSTANCE_NAME.match(name)
    if not match:
        raise StatusError(f"{stack_label}'s instanceName output is not an instance's name: {name!r}")
    project, zone, instance_id = match.groups()
    try:
        instance = (api or ComputeApi()).get(project, zone, instance_id)
    except ComputeApiError as error:
        raise StatusError(str(error)) from None
    if instance is None:
        return _gone(outputs, instance_id, zone, now)
    status = instance.get("status", "?")
    facts = [("instance", f"{instance_id} in {zone}: {status} "
                          f"({instance.get('machineType', '').rsplit('/', 1)[-1]})")]
    ends = run_end(instance) if status == "RUNNING" else None
    if ends is not None:
        left = (ends - now).total_seconds()
        facts.append(("run ends", f"{ends:%Y-%m-%d %H:%M UTC} ({span(left)} left; computed: last start + "
                                  "maxRunDuration)"))
    if status == "PENDING":
        created = parse_time(instance.get("creationTimestamp", ""))
        if created:
            facts.append(("waiting", f"{span((now - created).total_seconds())} since the request"))
        return Report("queued", "waiting for TPU capacity (flex-start, Dynamic Workload Scheduler)",
                      "nothing to do: keep `pulumi up` running; no TPU bills while queued (the kept cache disk "
                      "does)", facts=facts)
    if status in COMING_UP:
        return Report("provisioning", "capacity granted; Compute Engine is starting the TPU VM",
                      "wait a few minutes: the boot script and the serving step follow", facts=facts)
    if status == "REPAIRING":
        return Report("repairing", "Compute Engine is repairing the instance ('The instance is in repair')",
                      "wait: it comes back RUNNING or ends; run tools.status again in a few minutes", facts=facts)
    if status in GOING_AWAY:
        return Report("ending", f"the instance is {status}: Compute Engine is taking it down (its run's end, a "
                      "preemption or a delete)", "wait until it is gone, then `pulumi up` makes it again with the "
                      "kept cache disk (a warm boot)", facts=facts)
    if status != "RUNNING":
        delete = f"gcloud compute instances delete {instance_id} --zone={zone} --project={project}"
        return Report("node lost", f"the instance is {status}: it cannot serve",
                      f"`pulumi up` after deleting it ({delete}); the cache disk is kept", facts=facts)
    interfaces = instance.get("networkInterfaces") or [{}]
    host = ((interfaces[0].get("accessConfigs") or [{}])[0]).get("natIP", "")
    facts.append(("address", host or "none yet"))
    if not host:
        return Report("provisioning", "the instance runs but has no external address yet", "wait a minute",
                      facts=facts)
    return serving(outputs, host, stack_label, facts, now, node_reader)


def _gone(outputs: dict[str, Any], instance_id: str, zone: str, now: datetime) -> Report:
    """A missing instance: its run ended only if runEndsAt (the last up's output) has passed."""
    facts = [("instance", f"{instance_id} in {zone}: gone")]
    again = "`pulumi up` makes it again (its diff finds the old one gone)"
    ends = parse_time(outputs.get("runEndsAt", ""))
    if ends is not None and now >= ends:
        return Report("run ended", f"the instance {instance_id} is gone: its run's end deleted it (or someone did); "
                      "billing for the TPU stopped, the cache disk is kept",
                      f"{again} and the kept compile cache makes the boot warm (~8 min)", facts=facts)
    return Report("gone", f"the instance {instance_id} is gone before its run's end: a create that failed (no "
                  "capacity within tpu.queueTimeout, a quota) or was interrupted, whose watchdog deleted what "
                  "it left, or someone deleted it; nothing bills for the TPU, the cache disk is kept",
                  f"{again} to try again; if it fails on capacity, try later or another zone", facts=facts)
