"""Run by a venv's python: import the modules its checks need once, then fork one child per check, each as a
fresh `python`.

Importing vLLM (torch, transformers, openai, fastapi, ...) costs ~18 s of CPU, pulumi-policy (pulumi, grpc,
protobuf) ~0.8 s; the checks themselves take well under a second, or only the second they compute. This process
imports them once for the whole pytest session and answers on a Unix socket; each request is `python SCRIPT
ARGS...` or `python -c CODE ARGS...` with its stdin, environment and working directory, run in a child forked
from this never-used process (so no check sees another's state: vLLM's envs cache, os.environ, registries,
a monkeypatched module), and answered with the child's exit code, stdout and stderr, as `subprocess.run` gives
them. The client is tests/venv_forks.py (for tests/vllm_venv.py and tests/policy_venv.py); it starts this with
the environment the checks run under, and only sends requests with that environment (PYTEST_* aside), since
importing already reads some of it (vLLM's platform follows VLLM_TARGET_DEVICE).

It ends when the pytest session's main process ends (a pidfd on it: no polling, no pid reuse), or after
IDLE_SECONDS without a request (the next check starts another), whichever comes first; a check under way
finishes in its own process. Only the same user may connect (SO_PEERCRED), the socket is 0600 in the session's
own temp dir.

    python tests/venv_fork_server.py SOCKET SESSION_PID MODULE,...   (by tests/venv_forks.py; the modules to
                                                                      import before it listens)
"""

import atexit
import gc
import importlib
import json
import os
import select
import shutil
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
import traceback
import types
from typing import NoReturn

if __package__:  # imported by tests/fork_server.py (the test venv's program server), whose loop this is too
    from tests.child_exit import exit_status
else:  # run as a script from tests/ by another venv's python
    from child_exit import exit_status

IDLE_SECONDS = 600
IMPORT_SET: dict[str, str] = {}


def untouched() -> list[str]:
    """What a child would find already done that a fresh process has not done after the same imports."""
    found = []
    envs = sys.modules.get("vllm.envs")  # when vLLM is among the imports
    if envs is not None and envs._is_envs_cache_enabled():
        found.append("vLLM's envs cache is on")  # enable_envs_cache freezes every variable's value
    threads = [thread.name for thread in threading.enumerate() if thread is not threading.main_thread()]
    if threads:  # fork copies only the calling thread; another's locks would stay held in the child
        found.append(f"threads besides the main one: {threads}")
    return found


def receive(connection: socket.socket) -> bytes:
    chunks = []
    while chunk := connection.recv(1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def serve(socket_path: str, session_pid: int, warm: tuple[str, ...]) -> None:
    before = dict(os.environ)
    # CPython's recipe for a parent that forks without exec (Doc/library/gc.rst, 3.11, gc.freeze): no collection
    # while importing, then the imports' objects frozen, so no child's collection walks them (or copies their
    # pages); each check's child enables collection again (`run`).
    gc.disable()
    for name in warm:
        importlib.import_module(name)
    gc.freeze()
    # Importing (torch and vLLM above all) sets variables of its own (LD_LIBRARY_PATH, TORCHINDUCTOR_CACHE_DIR,
    # ...): each child lays them over its request's environment, as its own import would have.
    global IMPORT_SET
    IMPORT_SET = {name: value for name, value in os.environ.items() if before.get(name) != value}
    if any(name not in os.environ for name in before):
        raise SystemExit("venv fork server: importing removed environment variables")
    problems = untouched()
    if problems:
        raise SystemExit(f"venv fork server: importing left state a fresh process would not have: {problems}")
    listen_and_fork(socket_path, session_pid, handle, "venv fork server")


def listen_and_fork(socket_path: str, session_pid: int, handle, name: str,
                    still_current=lambda: True, check_seconds: float = IDLE_SECONDS) -> NoReturn:
    """Answer on `socket_path` until the session's main process ends, IDLE_SECONDS pass without a connection or
    `still_current()` (asked every `check_seconds`) says no: each connection from this user is handed to
    `handle(connection, session_pidfd)` in a child forked for it, so askers are answered side by side. Also the
    loop of tests/fork_server.py's program server."""
    session = os.pidfd_open(session_pid)  # ESRCH: the session is already gone
    os.umask(0o077)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    listener.listen(16)
    print("ready", flush=True)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # the starter reads one line; it may be gone long before this process
    os.close(devnull)
    last_asked = last_checked = time.monotonic()
    try:
        while True:
            now = time.monotonic()
            wait = max(0.0, min(last_asked + IDLE_SECONDS, last_checked + check_seconds) - now)
            readable, _, _ = select.select([listener, session], [], [], wait)
            reap(block=False)
            now = time.monotonic()
            if session in readable or now - last_asked >= IDLE_SECONDS:
                return
            if now - last_checked >= check_seconds:
                last_checked = now
                if not still_current():
                    return
            if listener not in readable:
                continue
            last_asked = now
            connection, _ = listener.accept()
            if not same_user(connection):
                connection.close()
                continue
            if os.fork() == 0:
                listener.close()
                try:
                    handle(connection, session)
                except BaseException:  # noqa: BLE001 - into the server's log; the client sees no answer
                    traceback.print_exc()
                finally:
                    os._exit(0)
            connection.close()
    finally:
        listener.close()
        try:
            os.unlink(socket_path)
        except FileNotFoundError:
            pass
        reap(block=True)
        times = os.times()  # the imports' and every check's CPU, for the suite's measurements
        print(f"{name}: ended; CPU user {times.user + times.children_user:.2f} s, "
              f"system {times.system + times.children_system:.2f} s", file=sys.stderr, flush=True)
        os._exit(0)  # no interpreter shutdown: collecting vLLM's heap takes seconds and there is nothing to flush


def reap(block: bool) -> None:
    """Wait for the requests' handlers that have ended (every one, with block), so their CPU is counted here."""
    while True:
        try:
            pid, _ = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def same_user(connection: socket.socket) -> bool:
    credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _, uid, _ = struct.unpack("3i", credentials)
    return uid == os.getuid()


def handle(connection: socket.socket, session: int) -> None:
    """One request: run it in a child, answer with what a fresh process would have returned."""
    os.close(session)  # a check under way finishes in its own process (the client waits for it)
    data = receive(connection)
    if not data:  # a client asking whether this server listens
        return
    request = json.loads(data)
    # Not a TemporaryDirectory: its finalizer would run in the child's atexit and delete the child's output.
    directory = tempfile.mkdtemp(prefix="venv-check-")
    try:
        streams = {name: os.path.join(directory, name) for name in ("stdin", "stdout", "stderr")}
        with open(streams["stdin"], "wb") as stdin:
            stdin.write(request["input"].encode("latin-1"))
        for name in ("stdout", "stderr"):
            open(streams[name], "wb").close()
        pid = os.fork()
        if pid == 0:
            connection.close()
            os._exit(run(request, streams))
        child = os.pidfd_open(pid)
        ready, _, _ = select.select([child], [], [], request["timeout"])
        timed_out = not ready
        if timed_out:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        answer = {"returncode": os.waitstatus_to_exitcode(status), "timeout": timed_out}
        for name in ("stdout", "stderr"):
            with open(streams[name], "rb") as stream:
                answer[name] = stream.read().decode("latin-1")  # bytes through JSON unchanged
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    connection.sendall(json.dumps(answer).encode())
    connection.close()


def run(request: dict, streams: dict[str, str]) -> int:
    """`python SCRIPT ARGS...` or `python -c CODE ARGS...`, ending as the interpreter ends (exit code, traceback,
    atexit handlers, flushed streams)."""
    gc.enable()  # as in a fresh process, over what the check makes (the server's imports are frozen)
    for fd, name, flags in ((0, "stdin", os.O_RDONLY), (1, "stdout", os.O_WRONLY), (2, "stderr", os.O_WRONLY)):
        opened = os.open(streams[name], flags)
        os.dup2(opened, fd)
        os.close(opened)
    os.environ.clear()
    os.environ.update({**request["env"], **IMPORT_SET})
    os.chdir(request["cwd"])
    args = request["args"]
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = __builtins__
    sys.modules["__main__"] = main
    if args[0] == "-c":
        sys.argv, sys.path[0] = ["-c", *args[2:]], ""
        source, filename = args[1], "<string>"
    else:
        script = os.path.abspath(args[0])
        sys.argv, sys.path[0] = list(args), os.path.dirname(script)
        with open(script) as file:
            source, filename = file.read(), script
        main.__file__ = script
    code = exit_status(lambda: exec(compile(source, filename, "exec"), main.__dict__))
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed stream: what was written is already in the file
            code = code or 120
    return code


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]), tuple(filter(None, sys.argv[3].split(","))))
