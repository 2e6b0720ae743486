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

from components.vm.create_watchdog import CREATED, HTTP_TIMEOUT_SECONDS, REPORT_SECONDS, REQUESTING
from components.vm.create_watchdog_process import Reporter, watch

PREFIX = "[tpu-vllm compute instance]"


def delete_if_ours(request: dict[str, Any], until: float) -> tuple[bool, str]:
    """(True, what happened) once the instance is gone, was never made (unseen for the settle time: an insert may
    land after it was sent), or is another create's; (False, why) at `until`. components/vm/instance_cleanup.py."""
    from components.vm.compute_api import ComputeApi
    from components.vm.instance_cleanup import SETTLE_SECONDS, delete_this_creates_instance

    return delete_this_creates_instance(
        ComputeApi(), request["project"], request["zone"], request["name"], request["incarnation"], until,
        float(request.get("pollSeconds", 15)), float(request.get("settleSeconds", SETTLE_SECONDS)))


def act(request: dict[str, Any], state: str | None) -> None:
    name = request["name"]
    hand_delete = f"gcloud compute instances delete {name} --zone={request['zone']} --project={request['project']}"
    reporter = Reporter(PREFIX)
    reporter_prefix = f"the create of {name} ended early:"
    if state not in (REQUESTING, CREATED):
        reporter.say_and_let_go(f"{reporter_prefix} before it sent the insert: nothing of it is queued")
        return
    started = time.monotonic()
    report_seconds = float(request.get("reportSeconds", REPORT_SECONDS))
    background = float(request.get("deleteWaitSeconds", 1200))
    deadline = threading.Timer(report_seconds, reporter.say_and_let_go, args=(
        f"{reporter_prefix} {name} is not gone after {report_seconds:g} s (an instance can show up a while after "
        f"its insert, and a DELETE can be refused while it is not ready); this watchdog keeps at it for "
        f"{background / 60:.0f} min; if `python -m tools.status` still shows the instance after that, delete it: "
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
        act(*ended_early)


if __name__ == "__main__":
    main()
