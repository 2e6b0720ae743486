"""Whether the Pulumi CLI that started this provider host is still there.

The engine gives every plugin a stdin pipe that it holds and never writes (pulumi/pulumi
sdk/go/common/resource/plugin/plugin.go, ExecPlugin: `cmd.StdinPipe()`; read at pkg/v3.259.0-14), and the
dynamic provider's shim runs python on that same stdin (sdk/python/dist/pulumi-resource-pulumi-python).
A CLI that ends without closing its plugins (kill -9, the OOM killer, a closed terminal or SSH session, a
CI runner torn down) signals nothing: plugins run in their own process group with no parent-death signal
(cmdutil.RegisterProcessGroup, no Pdeathsig), the Python host never calls the engine back
(sdk/python/lib/pulumi/dynamic/__main__.py ignores its engine address), and only the host's next write
fails, with EPIPE. But the kernel closes the dead CLI's end of the stdin pipe at once, so a read of stdin
returns end-of-file: the soonest sign there is, and the one watched here.
"""

from __future__ import annotations

import os
import signal
import stat
import sys
import threading

_gone = threading.Event()
_watching = threading.Lock()
_started = False


def _stdin_is_a_pipe() -> bool:
    try:
        return stat.S_ISFIFO(os.fstat(0).st_mode)
    except OSError:
        return False


def _read_until_closed() -> None:
    try:
        while os.read(0, 65536):
            pass  # the engine never writes; anything read is ignored
    except OSError:
        return  # not readable after all: no verdict either way
    _gone.set()


def watch() -> None:
    """Start watching stdin, once per process; only a pipe is watched (a terminal or /dev/null says nothing
    about the engine: /dev/null would read as end-of-file at once)."""
    global _started
    with _watching:
        if _started or not _stdin_is_a_pipe():
            return
        _started = True
    threading.Thread(target=_read_until_closed, name="tpu-vllm-engine-liveness", daemon=True).start()


def engine_gone() -> bool:
    """The CLI's end of the stdin pipe has closed: no engine will call, answer or stop this host."""
    return _gone.is_set()


def end_host() -> None:
    """End this host as the engine's own close would, once nobody is left to stop it: a SIGINT, on which the
    host's main thread leaves its wait and stops the gRPC server. A host started with SIGINT ignored would
    never see it: a CLI run as a background job of a script hands it on ignored (bash 5.2 manual, "Signals":
    without job control, asynchronous commands ignore SIGINT; exec keeps an ignored signal ignored) and
    CPython then installs no KeyboardInterrupt handler (Python 3.11 docs, library/signal.rst: SIGINT becomes
    KeyboardInterrupt only "if the parent process has not changed it"). That host exits at once instead: its
    create has finished and no engine is left to read an answer."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass  # the dead CLI's end of the pipe: nothing to keep
        os._exit(0)
    os.kill(os.getpid(), signal.SIGINT)
