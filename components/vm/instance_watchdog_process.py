"""The compute path's watchdog (components/vm/compute_instance_provider.py): waits on the create's pipe and, when it
ends before "done", deletes the instance this create made, known by its incarnation, so nothing bills untracked.

    python -m components.vm.instance_watchdog_process   (started by ComputeInstanceProvider.create)
"""

from __future__ import annotations

import signal
import socket
import sys
import threading
import time
from typing import Any

from components.vm.create_watchdog import HTTP_TIMEOUT_SECONDS, REPORT_SECONDS
from components.vm.create_watchdog_process import Reporter, watch

PREFIX = "[tpu-vllm compute instance]"


def delete_if_ours(request: dict[str, Any], until: float) -> tuple[bool, str]:
    """(True, what happened) once the instance is gone, was never made, is another create's, or its DELETE was
    accepted; retried (an outage, a refusal while it is still being inserted) until `until`."""
    from components.vm.compute_api import ComputeApi, ComputeApiError
    from components.vm.instance_incarnation import is_this_incarnation

    api = ComputeApi()
    project, zone, name = request["project"], request["zone"], request["name"]
    poll = float(request.get("pollSeconds", 15))
    while True:
        try:
            found = api.get(project, zone, name)
            if found is None:
                return True, f"found no instance {name}: nothing of this create is left"
            if not is_this_incarnation(found, request["incarnation"]):
                return True, f"left {name} alone: it is not this create's (its description differs)"
            operation = api.delete(project, zone, name)
            return True, (f"sent the DELETE of {name} ({found.get('status', '?')}), which this create made"
                          if operation is not None else f"found {name} gone")
        except (ComputeApiError, OSError) as error:
            if time.monotonic() + poll > until:
                return False, str(error)
        time.sleep(poll)


def act(request: dict[str, Any]) -> None:
    name = request["name"]
    hand_delete = f"gcloud compute instances delete {name} --zone={request['zone']} --project={request['project']}"
    reporter = Reporter(PREFIX)
    reporter_prefix = f"the create of {name} ended early:"
    started = time.monotonic()
    report_seconds = float(request.get("reportSeconds", REPORT_SECONDS))
    background = float(request.get("deleteWaitSeconds", 1200))
    deadline = threading.Timer(report_seconds, reporter.say_and_let_go, args=(
        f"{reporter_prefix} no answer from Compute Engine after {report_seconds:g} s; this watchdog keeps trying "
        f"for {background / 60:.0f} min; if `python -m tools.status` still shows the instance, delete it: "
        f"{hand_delete}",))
    deadline.daemon = True
    deadline.start()
    done, said = delete_if_ours(request, started + background)
    reporter.say_and_let_go(f"{reporter_prefix} {said}" if done else
                            f"{reporter_prefix} the DELETE did not go through ({said}); delete it: {hand_delete}")


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # its own session; a terminal's Ctrl-C must not stop it either
    socket.setdefaulttimeout(HTTP_TIMEOUT_SECONDS)
    ended_early = watch(sys.stdin)
    if ended_early:
        act(ended_early[0])


if __name__ == "__main__":
    main()
