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

    python -m components.vm.create_watchdog_process   (started by QueuedResourceProvider.create)
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

# The watchdog process itself, which imports the TPU client (this side must not: queued_resource imports it).
MODULE = "components.vm.create_watchdog_process"
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
