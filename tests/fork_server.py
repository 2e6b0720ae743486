"""One process per test worker that has imported what a program or plan run needs, and forks a child per run.

A fresh `python -m tests.program_harness` or `python -m tools.plan` spends most of its ~3.7 s CPU importing
pulumi_gcp's and pulumi_kubernetes's modules and the project. Pulumi's runtime is process-global (settings,
mocks, the root stack resource), which is why every run had its own process; a child forked from a parent
that has only imported, never run, starts from the same pristine runtime a fresh process has, so it keeps
that isolation and skips the imports. The child runs the module as `python -m` would (runpy, `__main__`,
argv, stdin), with its stdin, stdout and stderr on files, and the server hands back the returncode and both
streams: what `subprocess.run(..., capture_output=True)` returns.

The server is keyed on tests/shared_runs.py's digest of the program's sources and of the environment: a
source file edited during the session, or another environment, stops it and starts a new one, so no run is
answered by modules imported from older sources. What differs from a fresh process: every child shares the
server's hash seed (tests/test_plan.py::test_the_plan_is_byte_identical_across_fresh_runs still runs fresh
processes with other seeds), the objects the server's imports made are frozen out of the cycle collector
(gc.freeze: left out of gc.get_objects() and never collected), and a child ends with os._exit after flushing its streams
(no atexit handlers or interpreter shutdown).

Nothing outlives its worker. The server's stdin is a pipe only the worker holds: it reads "stop" and EOF when
the worker stops it (a new key, at exit), a bare EOF when the worker dies however it dies (kill -9 included);
either way it kills the run it is waiting for, if any, and exits, and after a death removes its own temp
directory (a parent pid that changed says the same, checked every few seconds, in case the pipe's end leaked
to another process). A run that does not answer in time: the client closes its
connection, the server kills the child's process group (the child leads its own, so whatever it started goes
too) and reaps it, the client stops that server and raises subprocess.TimeoutExpired, and the next run starts
a new server. The server runs in a session of its own, so a Ctrl-C in the terminal reaches the workers, which
stop it, and a server that does not end when stopped is killed with its whole session.

    python -m tests.fork_server SOCKET [MODULE ...]   # the server (started by `run` below, never by hand)
"""

from __future__ import annotations

import atexit
import gc
import importlib
import json
import locale
import os
import runpy
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from tests import child_exit, shared_runs

ROOT = shared_runs.ROOT
# The modules a dev or gke run imports, the costly ones first. pulumi_gcp and pulumi_kubernetes load their
# submodules lazily (pulumi._utils.lazy_import): reading an attribute is what loads one (see `_load`).
WARM_MODULES = (
    "grpc", "pulumi", "pulumi.dynamic", "pulumi.runtime.mocks", "pulumi_gcp", "pulumi_gcp.compute",
    "pulumi_gcp.secretmanager", "pulumi_gcp.projects", "pulumi_gcp.serviceaccount", "pulumi_gcp.storage",
    "pulumi_gcp.container", "pulumi_gcp.monitoring", "pulumi_gcp.artifactregistry", "pulumi_kubernetes",
    "pulumi_kubernetes.core.v1", "pulumi_kubernetes.rbac.v1", "pulumi_kubernetes.apps.v1",
    "pulumi_kubernetes.storage.v1", "pulumi_kubernetes.policy.v1", "pulumi_kubernetes.networking.v1",
    "pulumi_kubernetes.autoscaling.v2", "pulumi_kubernetes.apiregistration.v1", "pulumi_kubernetes.apiextensions",
    "pulumi_kubernetes.meta.v1", "pulumi_command", "pulumi_command.remote", "pulumi_command.local",
    "pulumi_tls", "pulumi_random", "yaml", "pydantic",
    "tools.plan.engine", "tools.plan.model", "tools.plan.render", "tools.plan.diff", "tools.plan.stack_file",
    "components.settings", "components.core.shared_resources", "components.core.preview_access",
    "components.vm.deployment", "components.gke.deployment",
)

# Cached answers that a run computes from the installed packages alone, the same for every child: computed once,
# before the fork (~30 ms of each run's CPU otherwise).
WARM_CALLS = (("components.settings.namespaces", "provider_namespaces"),)


def _load(name: str) -> None:
    module = importlib.import_module(name)
    # A lazy module runs its code on the first read of an attribute other than the introspection dunders
    # (pulumi/pulumi, sdk/python/lib/pulumi/_utils.py, SDK 3.272.0: _LazyModule, _INTROSPECTION_ATTRS).
    hasattr(module, "_loaded_by_the_fork_server")


def _runtime_untouched() -> list[str]:
    """What in Pulumi's process-global runtime a run would find already set (nothing, for a fresh start)."""
    from pulumi.runtime import config as runtime_config
    from pulumi.runtime import settings

    found = []
    if settings.SETTINGS.monitor is not None or settings.SETTINGS.engine is not None:
        found.append("a monitor or engine (set_mocks) is installed")
    # Importing pulumi leaves the placeholders "stack" and "project" (pulumi/pulumi,
    # sdk/python/lib/pulumi/runtime/settings.py, SDK 3.272.0: `SETTINGS = Settings(stack="stack", ...)`).
    if (settings.SETTINGS.stack, settings.SETTINGS.project) != ("stack", "project"):
        found.append("a stack or project is set")
    if settings.get_root_resource() is not None:
        found.append("a root stack resource exists")
    if runtime_config.CONFIG.get():  # a ContextVar, {} until set_all_config (runtime/config.py, SDK 3.272.0)
        found.append("config is set")
    threads = [thread.name for thread in threading.enumerate() if thread is not threading.main_thread()]
    if threads:
        found.append(f"threads besides the main one: {threads}")
    return found


# How often the server looks at its parent pid besides watching its stdin (a bound on how long it can outlive a
# worker whose end of the pipe leaked into another process; not a wait any test makes).
PARENT_CHECK_SECONDS = 5.0


def serve(socket_path: str, modules: tuple[str, ...]) -> None:
    worker = os.getppid()
    # CPython's recipe for a parent that forks without exec (Doc/library/gc.rst, 3.11, gc.freeze): no collection
    # while importing (~400k objects that live as long as the process), then all of them frozen, so no child's
    # collection walks them (or touches, and so copies, their pages); each child enables collection (`_child`).
    gc.disable()
    for name in modules:
        _load(name)
    for module_name, function in WARM_CALLS:
        if module_name in sys.modules:
            getattr(sys.modules[module_name], function)()
    gc.freeze()
    untouched = _runtime_untouched()
    if untouched:
        raise SystemExit(f"fork server: importing touched the runtime: {untouched}")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    listener.listen()
    print("ready", flush=True)
    while True:
        ready = _wait_readable([listener, sys.stdin.fileno()], worker)
        if ready is None:
            return _worker_gone(socket_path, worker)
        if listener not in ready:
            continue
        connection, _ = listener.accept()
        with connection:
            request = json.loads(_receive_line(connection))
            refusal = _not_as_fresh(request)
            answer = {"fresh": refusal} if refusal else _run_in_child(request, listener, connection, worker)
            if answer is _WORKER_GONE:
                return _worker_gone(socket_path, worker)
            if answer is not _CANCELLED:
                connection.sendall(json.dumps(answer).encode())


def _worker_gone(socket_path: str, worker: int) -> None:
    """A worker that stops its server says "stop" before closing the pipe and removes the server's directory
    itself (after reading its log); a bare EOF or another parent: the worker died, the server removes it."""
    said = select.select([sys.stdin.fileno()], [], [], 0)[0] and os.read(sys.stdin.fileno(), 64)
    if os.getppid() != worker or not said or not said.startswith(b"stop"):
        shutil.rmtree(os.path.dirname(socket_path), ignore_errors=True)


_WORKER_GONE = "the worker closed the server's stdin or died"
_CANCELLED = "the client closed its connection before the answer"


def _wait_readable(watched: list, worker: int) -> list | None:
    """Which of `watched` can be read; None once the worker is gone (EOF on stdin, or another parent)."""
    while True:
        ready, _, _ = select.select(watched, [], [], PARENT_CHECK_SECONDS)
        # The worker never writes to the server's stdin: readable means EOF.
        if sys.stdin.fileno() in ready or os.getppid() != worker:
            return None
        if ready:
            return ready


def _receive_line(connection: socket.socket) -> bytes:
    """One request: JSON on one line (json.dumps writes no raw newline). The client keeps its end open for
    the answer, so an EOF (or anything else) read while a run is under way means it gave up."""
    chunks = []
    while not chunks or not chunks[-1].endswith(b"\n"):
        chunk = connection.recv(1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _receive(connection: socket.socket) -> bytes:
    chunks = []
    while chunk := connection.recv(1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def _run_in_child(request: dict, listener: socket.socket, connection: socket.socket, worker: int) -> dict | str:
    with tempfile.TemporaryDirectory(prefix="fork-run-") as directory:
        streams = {name: Path(directory) / name for name in ("stdin", "stdout", "stderr")}
        streams["stdin"].write_text(request["stdin"])
        for name in ("stdout", "stderr"):
            streams[name].touch()
        sys.stdout.flush()
        sys.stderr.flush()
        if threading.active_count() != 1:  # fork copies only this thread; another's locks would stay held
            raise RuntimeError(f"fork server: threads at fork time: {threading.enumerate()}")
        pid = os.fork()
        if pid == 0:
            os.setpgid(0, 0)  # its own process group: a kill of the run reaches what the run started
            listener.close()
            connection.close()
            os._exit(_child(request, streams))
        _set_process_group(pid)  # set on both sides, so it holds whichever side runs first
        ended = _wait_for_child(pid, connection, worker)
        if ended is not None:
            return ended
        _, status = os.waitpid(pid, 0)
        # The bytes as written (latin-1 maps each byte to one character): the client decodes them as a pipe
        # would be read, or writes them out unchanged.
        return {"returncode": os.waitstatus_to_exitcode(status),
                **{name: streams[name].read_bytes().decode("latin-1") for name in ("stdout", "stderr")}}


def _set_process_group(pid: int) -> None:
    try:
        os.setpgid(pid, pid)
    except (PermissionError, ProcessLookupError):  # the child already set it and exec'd, or already ended
        pass


def _wait_for_child(pid: int, connection: socket.socket, worker: int) -> str | None:
    """None when the child has exited (still to be reaped); otherwise the child's process group has been
    killed and reaped because the client gave up or the worker is gone, and the reason is returned."""
    child = os.pidfd_open(pid)
    try:
        ready = _wait_readable([child, connection], worker)
    finally:
        os.close(child)
    if ready is not None and child in ready:
        return None
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)
    return _WORKER_GONE if ready is None else _CANCELLED


# What a fresh interpreter, or an import the server made ahead, reads from the environment: python(1)'s
# ENVIRONMENT VARIABLES (all PYTHON*), the locale (PEP 538), setuptools' distutils-precedence.pth, gRPC's GRPC_*,
# and what tests/shared_runs.py keys the server on (PULUMI_*, GOOGLE_*, ...). A request that sets any of these
# otherwise than the server started with cannot be answered by a fork.
STARTUP_PREFIXES = ("PYTHON", "LC_", "GRPC_", *shared_runs.ENV_PREFIXES)
STARTUP_NAMES = ("LANG", "SETUPTOOLS_USE_DISTUTILS")


def startup_environment(env: dict[str, str]) -> dict[str, str]:
    """The part of `env` a forked child must share with its server to start as a fresh `python` would."""
    return {name: value for name, value in env.items()
            if (name.startswith(STARTUP_PREFIXES) or name in STARTUP_NAMES) and name != "PYTEST_XDIST_WORKER"}


def _not_as_fresh(request: dict) -> str | None:
    """Why a child of this server would not start as `python` would for this request (None: it would). Asked
    by tests/fork_client.py, whose caller then runs a fresh process."""
    if request.get("executable", sys.executable) != sys.executable:
        return f"another interpreter: {request['executable']}"
    asked, started = startup_environment(request["env"]), startup_environment(_STARTED_WITH)
    differing = sorted(name for name in asked.keys() | started.keys() if asked.get(name) != started.get(name))
    return f"another start-up environment: {differing}" if differing else None


_STARTED_WITH = dict(os.environ)


def _enter_checkout(directory: str) -> None:
    """`python -m` started in another checkout (a copy of the repository): that directory first on sys.path,
    and none of the modules the server imported from this checkout (the other's are imported afresh, as its own
    process imports them); the libraries the server imported from the venv stay."""
    sys.path[0] = directory
    venvs = (Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve())
    for name, module in list(sys.modules.items()):
        places = [getattr(module, "__file__", None), *list(getattr(module, "__path__", None) or [])]
        for place in filter(None, places):
            resolved = Path(place).resolve()
            if resolved.is_relative_to(ROOT) and not any(resolved.is_relative_to(venv) for venv in venvs):
                del sys.modules[name]
                break
    importlib.invalidate_caches()


def _child(request: dict, streams: dict[str, Path]) -> int:
    """`python -m MODULE ARGV...` (or `python -c CODE`) with the request's stdin, environment and working
    directory."""
    gc.enable()  # collection as in a fresh process, over what the run makes (the server's imports are frozen)
    for fd, name, mode in ((0, "stdin", os.O_RDONLY), (1, "stdout", os.O_WRONLY), (2, "stderr", os.O_WRONLY)):
        opened = os.open(streams[name], mode)
        os.dup2(opened, fd)
        os.close(opened)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    if Path(request["cwd"]).resolve() != ROOT:
        _enter_checkout(request["cwd"])

    def program() -> None:
        if request.get("code") is not None:
            # As `python -c` runs it: argv ["-c"], a fresh __main__ namespace, the working directory on sys.path.
            sys.argv = ["-c"]
            sys.path[0] = ""
            exec(compile(request["code"], "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
        else:
            sys.argv = [request["module"], *request["argv"]]
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)

    code = child_exit.exit_status(program)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - a closed stream: what was written is already on the file
        code = code or 120
    return code


# --- the client side, in the test worker ---

# How long a stopped server may take to end before its session is killed.
STOP_GRACE_SECONDS = 60


class _Server:
    def __init__(self, key: str, modules: tuple[str, ...] = WARM_MODULES):
        """modules: what the server imports before it forks (none: a cold server, for tests of its life alone)."""
        self.key = key
        self.directory = tempfile.mkdtemp(prefix="tpu-vllm-fork-")
        self.socket_path = os.path.join(self.directory, "socket")
        # stdin: a pipe only this worker holds (Popen's end is close-on-exec); its EOF ends the server.
        self.process = subprocess.Popen([sys.executable, "-m", "tests.fork_server", self.socket_path, *modules],
                                        cwd=ROOT,
                                        start_new_session=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=open(os.path.join(self.directory, "server.log"), "w"), text=True)
        ready = self.process.stdout.readline()
        if ready.strip() != "ready":
            self.stop()
            raise RuntimeError(f"fork server did not start (exit {self.process.returncode}): {self.log}")

    def ask(self, request: dict, timeout: float | None = None) -> dict:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.settimeout(timeout)
            connection.connect(self.socket_path)
            connection.sendall(json.dumps(request).encode() + b"\n")
            # Closing the connection on a timeout (leaving this block) tells the server to kill the run.
            return json.loads(_receive(connection))

    def stop(self) -> None:
        """"stop" and EOF on the server's stdin: it ends (and with it any run it waits for); if it does not,
        its session is killed."""
        if not self.process.stdin.closed:
            try:
                self.process.stdin.write("stop\n")
                self.process.stdin.close()
            except BrokenPipeError:  # the server has already ended
                pass
        try:
            self.process.wait(timeout=STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait()
        self.process.stdout.close()
        self.log = Path(self.directory, "server.log").read_text()
        shutil.rmtree(self.directory, ignore_errors=True)


_server: _Server | None = None
_lock = threading.Lock()


def current_key() -> str:
    """The server answers only while the sources and the environment it imported are still the same."""
    return f"{shared_runs.source_digest()}-{shared_runs.environment_digest()}"


def run(module: str, argv: list[str], stdin: str = "", timeout: float = 300) -> subprocess.CompletedProcess:
    """What `subprocess.run([python, -m, module, *argv], input=stdin, capture_output=True, text=True,
    cwd=ROOT, timeout=timeout)` returns, from a child of the fork server."""
    return _ask({"module": module, "argv": argv}, [sys.executable, "-m", module, *argv], stdin, timeout)


def run_code(code: str, stdin: str = "", timeout: float = 300) -> subprocess.CompletedProcess:
    """What `subprocess.run([python, -c, code], ...)` returns, from a child of the fork server."""
    return _ask({"code": code}, [sys.executable, "-c", code], stdin, timeout)


def _ask(what: dict, args: list[str], stdin: str, timeout: float) -> subprocess.CompletedProcess:
    global _server
    with _lock:  # one run at a time per worker: the server answers one connection after another
        _current_server()
        try:
            answer = _server.ask({**what, "stdin": stdin, "env": dict(os.environ), "cwd": str(ROOT)}, timeout)
        except TimeoutError:
            # The server has killed the run on the closed connection; a new server answers the next run.
            _server.stop()
            _server = None
            raise subprocess.TimeoutExpired(args, timeout) from None
    if "fresh" in answer:  # the environment differs from the server's where a fresh start reads it
        return subprocess.run(args, input=stdin, capture_output=True, text=True, cwd=ROOT, timeout=timeout)
    # As subprocess's text mode reads a pipe: the locale's encoding, strictly, and universal newlines.
    encoding = locale.getpreferredencoding(False)
    out, err = (answer[name].encode("latin-1").decode(encoding).replace("\r\n", "\n").replace("\r", "\n")
                for name in ("stdout", "stderr"))
    return subprocess.CompletedProcess(args, answer["returncode"], out, err)


def client_command() -> list[str]:
    """The command line that stands in for this venv's `python` in a script a test runs (`CMD -m MODULE ARGS`,
    from any directory, another checkout included): tests/fork_client.py asking this worker's server, which is
    started now if it is not current. While the script runs, the worker must not ask the server itself (it
    answers one run at a time). Outside a session that forks, the plain interpreter."""
    if not enabled():
        return [sys.executable]
    with _lock:
        return [sys.executable, str(ROOT / "tests" / "fork_client.py"), _current_server().socket_path]


def _current_server() -> _Server:
    """This worker's server for the sources and environment as they are now (a new one if they changed or it
    ended). Called under _lock."""
    global _server
    key = current_key()
    if _server is None or _server.key != key or _server.process.poll() is not None:
        if _server is not None:
            _server.stop()
        _server = _Server(key, WARM_MODULES)
    return _server


def enabled() -> bool:
    """In a pytest session that shares runs (tests/conftest.py), unless TPU_VLLM_TEST_FORK_SERVER=0."""
    return shared_runs._directory is not None and os.environ.get("TPU_VLLM_TEST_FORK_SERVER", "1") != "0"


@atexit.register
def _stop_at_exit() -> None:
    if _server is not None:
        _server.stop()


if __name__ == "__main__":
    serve(sys.argv[1], tuple(sys.argv[2:]))
