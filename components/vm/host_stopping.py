"""Whether the dynamic-provider host that runs a create is going away, and a sleep that notices it."""

from __future__ import annotations

import threading
import time

from components.vm import engine_liveness
from components.vm.tpu_api import TpuApiError


class HostStoppingError(TpuApiError):
    """The provider host is shutting down (the engine's SIGINT, or its CLI gone) while a create waits."""


# The host polls this often for its own shutdown while it waits: well inside the engine's 5 s grace.
SHUTDOWN_POLL_SECONDS = 0.1


def host_is_stopping() -> bool:
    """The dynamic-provider host is going away: the engine stopped it, or the CLI is gone without a word.

    On the engine's SIGINT the host's main thread leaves `Event().wait()` through KeyboardInterrupt, stops the
    gRPC server and returns (pulumi sdk/python/lib/pulumi/dynamic/__main__.py, main), while the call's worker
    thread runs on until the engine kills the process group 5 s after the SIGINT
    (sdk/go/common/resource/plugin/plugin.go, newPlugin's kill: InterruptChildren, then KillChildren).
    Never true on the main thread (tests, tools). At the main thread's end CPython sets
    threading._SHUTTING_DOWN and then joins the worker threads (threading._shutdown, concurrent.futures'
    exit hook) before it marks the main thread stopped, so the flag is the first sign; is_alive() is the
    public fallback. A CLI that died without signalling (components/vm/engine_liveness.py) counts too.
    tests/test_provider_host.py checks both against the real host."""
    main = threading.main_thread()
    if threading.current_thread() is main:
        return False
    return (bool(getattr(threading, "_SHUTTING_DOWN", False)) or not main.is_alive()
            or engine_liveness.engine_gone())


def in_provider_host() -> bool:
    """On a worker thread of the dynamic-provider host (its gRPC server's), not in a test or a tool."""
    return threading.current_thread() is not threading.main_thread()


def _stopping_reason() -> str:
    if engine_liveness.engine_gone():
        return ("interrupted: the Pulumi CLI is gone without stopping this provider (killed, its terminal or "
                "runner closed)")
    return "interrupted: the Pulumi engine is stopping this provider (Ctrl-C, a CI timeout)"


def sleep_unless_stopping(seconds: float) -> None:
    """time.sleep that ends with HostStoppingError as soon as the host is stopping."""
    if threading.current_thread() is threading.main_thread():
        time.sleep(seconds)  # not inside the host's gRPC server: nothing to watch for
        return
    end = time.monotonic() + seconds
    while True:
        if host_is_stopping():
            raise HostStoppingError(_stopping_reason())
        left = end - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, SHUTDOWN_POLL_SECONDS))
