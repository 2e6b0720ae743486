"""Deleting the instance a create made, when that create fails or is interrupted: the provider's cleanup and its
watchdog (instance_watchdog_process.py) share this one loop.

Three things it does not take on trust:
- A 404 right after an insert. Compute Engine can answer 404 for an instance whose insert it has accepted while the
  insert's operation still runs (googleapis/nodejs-compute issue 377), and an insert whose reply was lost may still
  land. Until the insert is known to have settled (its operation DONE, or a refusal), only `settle_seconds` of 404s
  in a row mean nothing of the create is left.
- A DELETE accepted. The delete's own operation may end in an error (terraform-provider-google retries an operation
  that ends RESOURCE_NOT_READY: google/services/compute/compute_operation.go, IsRetryable), so its end is read, and
  the instance is deleted again until it is gone.
- A DELETE refused as not ready (400 resourceNotReady, "The resource ... is not ready": an instance still being
  inserted or changed). It is sent again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from components.vm.compute_api import ComputeApi, ComputeApiError, describe_errors, operation_errors
from components.vm.instance_incarnation import is_this_incarnation

# How long an instance whose insert may still land must stay unseen before the create is taken to have left nothing:
# the accepted insert's 404 window (seconds in the reports above) and an in-flight POST's HTTP timeout, with room.
SETTLE_SECONDS = 300.0


def not_ready(error: ComputeApiError) -> bool:
    """A refusal Compute Engine lifts by itself: the instance is busy (400 resourceNotReady)."""
    return error.status == 400 and "resourceNotReady" in str(error)


def delete_this_creates_instance(api: ComputeApi, project: str, zone: str, name: str, incarnation: str | None,
                                 until: float, poll: float, settle_seconds: float,
                                 say: Callable[[str], None] = lambda _: None) -> tuple[bool, str]:
    """(True, what happened) once the instance this create made is gone, or was never made (unseen for
    `settle_seconds`; 0 when the insert has settled), or an instance of the name is another create's; (False, why)
    when `until` came first. `incarnation` None: whatever instance has the name. Outages and not-ready refusals are
    tried again every `poll`."""
    unseen_since = api.clock()
    deleted = False
    status = "unseen"
    while True:
        try:
            found = api.get(project, zone, name)
            if found is None:
                if deleted:
                    return True, f"deleted {name}, which this create made"
                if api.clock() - unseen_since >= settle_seconds:
                    return True, (f"found no instance {name}" + (f" for {settle_seconds:g} s" if settle_seconds else "")
                                  + ": nothing of this create is left")
            elif incarnation is not None and not is_this_incarnation(found, incarnation):
                return True, f"left {name} alone: it is not this create's (its description differs)"
            else:
                unseen_since = api.clock()
                status = str(found.get("status") or "?")
                if not deleted:
                    operation = api.delete(project, zone, name)
                    say(f"sent the DELETE of {name} ({status}), which this create made")
                    deleted = operation is None or _ended_well(api, project, zone, operation, until, poll, say)
        except ComputeApiError as error:
            if not (error.transient or not_ready(error)):
                return False, str(error)
            say(f"{name}: {str(error).rstrip('.')}; trying again in {poll:g}s")
        if api.clock() + poll > until:
            seen = "" if status == "unseen" else f" (last seen {status})"
            return False, f"{name} is not gone yet{seen}"
        api.sleep(poll)


def _ended_well(api: ComputeApi, project: str, zone: str, operation: dict[str, Any], until: float, poll: float,
                say: Callable[[str], None]) -> bool:
    """Whether the delete's operation finished without an error (read until DONE or `until`)."""
    finished = api.finished(project, zone, operation, until, poll, "delete")
    errors = operation_errors(finished) if finished is not None else []
    if errors:
        say(f"the DELETE failed ({describe_errors(errors)}); sending it again")
    return finished is not None and not errors
