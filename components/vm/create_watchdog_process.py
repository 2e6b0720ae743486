"""The watchdog process of components/vm/create_watchdog.py: waits on the create's pipe and, when the
provider host dies before the create returns, sends the DELETE of the request that create made."""

from __future__ import annotations

import json
import sys
from typing import IO, Any

from components.vm.create_watchdog import ADOPTED, CREATED, DELETE_ATTEMPTS, DONE


def watch(lines: IO[str]) -> tuple[dict[str, Any], str | None] | None:
    """Read the provider's lines until the pipe ends: (the request, its last state), or None after "done"."""
    request = json.loads(lines.readline() or "null")
    state = None
    for line in lines:
        state = line.strip()
        if state == DONE:
            return None
    return (request, state) if request else None


def act(request: dict[str, Any], state: str | None) -> None:
    from components.vm import queued_resource as qr

    qr_id, name = request["queuedResourceId"], request["name"]
    if state == ADOPTED:
        message = (f"{qr_id} was an existing request this create adopted; it is left as it was and is not in "
                   f"Pulumi's state: the next pulumi up adopts it again, or delete it: {request['handDelete']}")
    elif state == CREATED:
        try:
            qr.TpuApi(max_attempts=DELETE_ATTEMPTS, retry_base_seconds=0.5).delete(name)
            message = (f"sent the DELETE of {qr_id}, which this create requested, so it does not queue or bill "
                       "untracked; `python -m tools.status` shows when it is gone")
        except Exception as error:  # noqa: BLE001 - reported with the command that finishes the job
            reason = str(error) if isinstance(error, qr.TpuApiError) else f"{error.__class__.__name__}: {error}"
            message = (f"could not delete {qr_id} ({reason}); it may queue and bill without Pulumi knowing: "
                       f"{request['handDelete']}")
    else:
        message = (f"it stopped while requesting {qr_id}, which may exist now without Pulumi knowing: check "
                   f"with `python -m tools.status`, or delete it: {request['handDelete']}")
    print(f"[tpu-vllm queued resource] the provider host ended (SIGTERM, SIGKILL or a crash) during the create "
          f"of {qr_id}: {message}", file=sys.stderr, flush=True)


def main() -> None:
    import signal

    # Its own session already keeps the host's group signals away; a terminal's Ctrl-C must not stop it either.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from components.vm import queued_resource  # noqa: F401 - imported now, so the DELETE goes out at once

    ended_early = watch(sys.stdin)
    if ended_early:
        act(*ended_early)


if __name__ == "__main__":
    main()
