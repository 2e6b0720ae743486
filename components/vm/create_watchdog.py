"""A watchdog for one queued-resource create: deletes the request if the provider host dies mid-create.

The dynamic-provider host runs the provider on a gRPC worker thread, and Python lets only the main thread
install signal handlers (its main thread sits in pulumi.dynamic's `Event().wait()`), so a SIGTERM or SIGKILL
of the host ends it with no provider code run. The create therefore starts this small process first and
holds a pipe to it: it learns the request's name on the first line, then "created" (the request is this
create's own), "adopted" (someone else's, left alone) or "done" (the create returned or cleaned up itself).
When the pipe ends without "done", the host is gone (SIGTERM, SIGKILL, the engine's kill of its process
group, a crash): it sends the DELETE of a created request at once and says so on the host's stderr, which
the engine shows. It runs in its own session, so the signals sent to the host's process group do not reach
it, and it ends as soon as it has acted: its lifetime is the host's plus one bounded DELETE.

    python -m components.vm.create_watchdog      (started by QueuedResourceProvider.create)
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import IO, Any

MODULE = "components.vm.create_watchdog"
CREATED, ADOPTED, DONE = "created", "adopted", "done"
# One quick retry: the point is to send the DELETE before anything else ends this process.
DELETE_ATTEMPTS = 2


class CreateWatchdog:
    """The provider's end of the pipe."""

    def __init__(self, process: subprocess.Popen):
        self.process = process

    @classmethod
    def start(cls, request: dict[str, Any]) -> CreateWatchdog | None:
        """Start it from the project directory (the host's cwd); None when it cannot start (then the SIGINT
        path alone guards the create, as before)."""
        try:
            process = subprocess.Popen([sys.executable, "-m", MODULE], stdin=subprocess.PIPE,
                                       stdout=subprocess.DEVNULL, start_new_session=True, text=True)
            watchdog = cls(process)
            watchdog._send(json.dumps(request))
            return watchdog
        except OSError:
            return None

    def _send(self, line: str) -> None:
        try:
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()
        except (OSError, ValueError):
            pass  # it is gone already: nothing more it could do

    def tell(self, state: str) -> None:
        self._send(state)

    def release(self) -> None:
        """The create is over, whatever its outcome: the watchdog ends without acting."""
        self._send(DONE)
        try:
            self.process.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


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
