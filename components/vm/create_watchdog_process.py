"""The watchdog process of components/vm/create_watchdog.py: waits on the create's pipe and, when it ends
before "done", sends the DELETE of the request that create made (or may have made)."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from typing import IO, Any

from components.vm.create_watchdog import (
    ADOPTED,
    CREATED,
    DONE,
    HTTP_TIMEOUT_SECONDS,
    REPORT_SECONDS,
    REQUESTING,
)

PREFIX = "[tpu-vllm queued resource]"


def watch(lines: IO[str]) -> tuple[dict[str, Any], str | None] | None:
    """Read the provider's lines until the pipe ends: (the request, its last state), or None after "done"."""
    request = json.loads(lines.readline() or "null")
    state = None
    for line in lines:
        state = line.strip()
        if state == DONE:
            return None
    return (request, state) if request else None


class Reporter:
    """The watchdog's one line to the CLI, then it lets go of the host's stderr, so the engine's Plugin.Close
    (which reads that stderr to its end) is never held longer than the report deadline."""

    def __init__(self, prefix: str = PREFIX) -> None:
        self.prefix = prefix
        self.lock = threading.Lock()
        self.done = False

    def say_and_let_go(self, message: str) -> None:
        with self.lock:
            if self.done:
                return
            self.done = True
            try:
                print(f"{self.prefix} {message}", file=sys.stderr, flush=True)
            except (OSError, ValueError):
                pass  # the CLI that read it is gone
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)
            os.close(devnull)


def delete_until_accepted(request: dict[str, Any], until: float) -> tuple[bool, str]:
    """Send the DELETE, again while the API refuses it (400/409: still provisioning) or fails on an outage,
    until `until`. (True, what happened) once it was accepted or the request is gone."""
    from components.vm import tpu_api

    api = tpu_api.TpuApi(max_attempts=2, retry_base_seconds=0.5)
    poll = float(request.get("pollSeconds", 15))
    while True:
        try:
            operation = api.delete(request["name"])
            return True, ("sent the DELETE of" if operation is not None else "found nothing left of")
        except Exception as error:  # noqa: BLE001 - any failure is retried until the deadline, then reported
            reason = str(error) if isinstance(error, tpu_api.TpuApiError) else f"{error.__class__.__name__}: {error}"
            retryable = not isinstance(error, tpu_api.TpuApiError) or error.transient or error.status in (400, 409)
            if not retryable or time.monotonic() + poll > until:
                return False, reason
        time.sleep(poll)


def act(request: dict[str, Any], state: str | None) -> None:
    qr_id, hand_delete = request["queuedResourceId"], request["handDelete"]
    reporter = Reporter()
    if state == ADOPTED:
        reporter.say_and_let_go(
            f"the create of {qr_id} ended early: {qr_id} was an existing request this create adopted; it is left "
            "as it was and is not in Pulumi's state: the next pulumi up adopts it again, or delete it: "
            f"{hand_delete}")
        return
    if state not in (CREATED, REQUESTING):
        reporter.say_and_let_go(
            f"the create of {qr_id} ended early, before it made a request: nothing of it is queued; check with "
            f"`python -m tools.status`, or delete any leftover: {hand_delete}")
        return
    whose = "which this create requested" if state == CREATED else "which this create may have requested"
    started = time.monotonic()
    report_seconds = float(request.get("reportSeconds", REPORT_SECONDS))
    background = float(request.get("deleteWaitSeconds", 1200))
    keeps_trying = (f"this watchdog keeps trying for {background / 60:.0f} min in the background; if "
                    f"`python -m tools.status` still shows it after that, delete it: {hand_delete}")
    # However long a call below hangs, the line is said and the CLI let go of on time.
    deadline = threading.Timer(report_seconds, reporter.say_and_let_go, args=(
        f"the create of {qr_id} ended early and the DELETE of {qr_id} ({whose}) has no answer after "
        f"{report_seconds:g} s; {keeps_trying}",))
    deadline.daemon = True
    deadline.start()
    accepted, said = delete_until_accepted(request, started + report_seconds)
    if accepted:
        reporter.say_and_let_go(f"the create of {qr_id} ended early: {said} {qr_id}, {whose}, so it does not "
                                "queue or bill untracked; `python -m tools.status` shows when it is gone")
        return
    reporter.say_and_let_go(f"the create of {qr_id} ended early and the DELETE of {qr_id} ({whose}) is not "
                            f"accepted yet ({said}); {keeps_trying}")
    delete_until_accepted(request, started + background)


def main() -> None:
    import signal

    # Its own session already keeps the host's group signals away; a terminal's Ctrl-C must not stop it either.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    socket.setdefaulttimeout(HTTP_TIMEOUT_SECONDS)  # a DELETE that hangs must not hold this process for ever
    from components.vm import tpu_api  # noqa: F401 - imported now, so the DELETE goes out at once

    ended_early = watch(sys.stdin)
    if ended_early:
        act(*ended_early)


if __name__ == "__main__":
    main()
