"""One process per pytest session that has imported what a program or plan run needs, and forks a child per run.

A fresh `python -m tests.program_harness` or `python -m tools.plan` spends most of its ~3.7 s CPU importing
pulumi_gcp's and pulumi_kubernetes's modules and the project. Pulumi's runtime is process-global (settings,
mocks, the root stack resource), which is why every run had its own process; a child forked from a parent
that has only imported, never run, starts from the same pristine runtime a fresh process has, so it keeps
that isolation and skips the imports. The child runs the module as `python -m` would (runpy, `__main__`,
argv, stdin), with its stdin, stdout and stderr on files, and the server hands back the returncode and both
streams: what `subprocess.run(..., capture_output=True)` returns.

One server per pytest session, shared by every xdist worker (as tests/venv_fork_server.py's are, whose loop it
runs): the first worker that needs it starts it under a lock in the session's shared directory
(tests/shared_runs.py), and every asker connects to it. It answers each connection in a child forked for it, so
the workers' runs go side by side, and that child forks the run's own child. Its socket's name carries
tests/shared_runs.py's digest of the program's sources and of the environment (`current_key`): a source file
edited during the session, or another environment, is another server, so no run is answered by modules imported
from older sources; a server whose sources are no longer the checkout's ends by itself (checked every
SOURCE_CHECK_SECONDS), and any server ends after venv_fork_server.IDLE_SECONDS without a connection. What
differs from a fresh process: every child shares the server's hash seed
(tests/test_plan.py::test_the_plan_is_byte_identical_across_fresh_runs still runs fresh processes with other
seeds), the objects the server's imports made are frozen out of the cycle collector (gc.freeze: left out of
gc.get_objects() and never collected), Pulumi's per-class type caches already hold the classes the shipped stacks
register (`_warm_type_caches`: the same values, computed ahead), and a child ends with os._exit after flushing
its streams (no atexit handlers or interpreter shutdown).

Nothing outlives the session. The server ends when the session's main process ends (a pidfd on it), however
it ends; a run's handler watches the same pidfd, its client's connection and the run's timeout: the session
gone, the connection closed (the client gave up, or its worker died, kill -9 included) or the time up, it kills
the run's process group (the run leads its own, so whatever it started goes too), reaps it and removes the
run's temp directory; on a timeout the client raises subprocess.TimeoutExpired. The server runs in a session of
its own, so a Ctrl-C in the terminal reaches pytest, whose end ends it. Only the same user may connect
(SO_PEERCRED), and the socket is 0600.

    python -m tests.fork_server SOCKET SESSION_PID SOURCES MODULE,... CHECK_SECONDS   # started by `run` below
"""

from __future__ import annotations

import gc
import hashlib
import importlib
import io
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

from tests import child_exit, shared_runs, venv_fork_server, venv_forks

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
    "pulumi_kubernetes.meta.v1",
    # A gke run loads these too (~0.35 s of CPU): the kinds it declares alias their older API versions' types
    # (pulumi-kubernetes 4.34.2, apps/v1/Deployment.py: `pulumi.Alias(type_="kubernetes:apps/v1beta1:Deployment")`).
    "pulumi_kubernetes.apiregistration.v1beta1", "pulumi_kubernetes.apps.v1beta1", "pulumi_kubernetes.apps.v1beta2",
    "pulumi_kubernetes.autoscaling.v1", "pulumi_kubernetes.autoscaling.v2beta1",
    "pulumi_kubernetes.autoscaling.v2beta2", "pulumi_kubernetes.networking.v1alpha1",
    "pulumi_kubernetes.networking.v1beta1", "pulumi_kubernetes.policy.v1beta1", "pulumi_kubernetes.rbac.v1alpha1",
    "pulumi_kubernetes.rbac.v1beta1",
    "pulumi_command", "pulumi_command.remote", "pulumi_command.local",
    "pulumi_tls", "pulumi_random", "yaml", "pydantic",
    "tools.plan.engine", "tools.plan.model", "tools.plan.render", "tools.plan.diff", "tools.plan.stack_file",
    "components.settings", "components.core.shared_resources", "components.core.preview_access",
    "components.vm.deployment", "components.gke.deployment",
)

# Cached answers that a run computes from the installed packages alone, the same for every child: computed once,
# before the fork (~30 ms of each run's CPU otherwise).
WARM_CALLS = (("components.settings.namespaces", "provider_namespaces"),)

# Pulumi's Python SDK resolves each class's property types (every getter's return annotation, through
# typing.get_type_hints) once per process and keeps them (pulumi/pulumi, sdk/python/lib/pulumi/_types.py, SDK
# 3.272.0: _py_properties, _required_property_names, _raw_return_hints and _types_from_py_properties are each
# @functools.cache, keyed by the class): a pure function of the class, which every forked run computed again for
# each class it registers (a quarter of a dev run's CPU, a third of a gke run's). The server fills these caches for
# the libraries' classes that the shipped stacks' runs ask about, found by a probe run of each (`_warm_type_caches`).
TYPE_CACHES = ("_py_properties", "_required_property_names", "_raw_return_hints", "_types_from_py_properties")
PROBE_STACKS = ("dev", "gke")
# A bound on a probe run (one takes about a second), so a probe that hangs cannot keep the server from listening.
PROBE_TIMEOUT_SECONDS = 120


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


def _warm_type_caches() -> None:
    """TYPE_CACHES filled for the classes from the venv's libraries that a run of each PROBE_STACKS asks them about:
    the probe runs in a child (the server itself never runs anything), and the server then computes those same
    entries, from the same classes, as the runs would. A class the probe could not name or this process cannot
    compute is left to each run, as before."""
    from pulumi import _types

    asked: set[tuple[str, str, str]] = set()
    for stack in PROBE_STACKS:
        asked |= _probe(stack)
    for cache, module_name, qualname in sorted(asked):
        found = sys.modules.get(module_name)
        if found is None or not _from_venv(found):
            continue
        try:
            for part in qualname.split("."):
                found = getattr(found, part)
            getattr(_types, cache)(found)
        except Exception:  # noqa: BLE001 - not warmed: each run computes it, as a fresh process does
            continue


def _probe(stack: str) -> set[tuple[str, str, str]]:
    """(cache, module, class) for every class a run of the shipped `stack` asked TYPE_CACHES about; empty when
    the probe failed or hung (then nothing is warmed)."""
    from tests import program as harness

    config = harness.dev_config() if stack == "dev" else harness.gke_config()
    request = json.dumps({"config": config, "secret_keys": [], "stack": stack})
    reading, writing = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(reading)
        os._exit(_record_type_caches(request, writing))
    os.close(writing)
    child = os.pidfd_open(pid)
    try:
        with os.fdopen(reading, "rb") as stream:
            ready, _, _ = select.select([child], [], [], PROBE_TIMEOUT_SECONDS)
            if not ready:
                os.kill(pid, signal.SIGKILL)
            answer = stream.read()
    finally:
        os.close(child)
    _, status = os.waitpid(pid, 0)
    if status != 0 or not answer:
        return set()
    return {tuple(entry) for entry in json.loads(answer)}


def _record_type_caches(request: str, answer_fd: int) -> int:
    """In the probe child: the program's run (tests/program_harness.py) with each of TYPE_CACHES recording the
    class it is asked about (the SDK's own callers look them up as module globals), written to `answer_fd`."""
    from pulumi import _types

    gc.enable()
    asked: set[tuple[str, str, str]] = set()
    for name in TYPE_CACHES:
        setattr(_types, name, _recording(name, getattr(_types, name), asked))
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    sys.stdin, sys.stdout = io.StringIO(request), io.StringIO()
    sys.argv = ["tests.program_harness"]
    code = child_exit.exit_status(
        lambda: runpy.run_module("tests.program_harness", run_name="__main__", alter_sys=True))
    if code == 0:
        with os.fdopen(answer_fd, "wb") as answer:
            answer.write(json.dumps(sorted(asked)).encode())
    return code


def _recording(name: str, cached, asked: set[tuple[str, str, str]]):
    def recording(cls: type) -> object:
        asked.add((name, cls.__module__, cls.__qualname__))
        return cached(cls)

    return recording


def _from_venv(module: object) -> bool:
    """A module of the interpreter's libraries (site-packages or the standard library), not of a checkout."""
    place = getattr(module, "__file__", None)
    if not place:
        return False
    resolved = Path(place).resolve()
    return any(resolved.is_relative_to(Path(prefix).resolve()) for prefix in (sys.prefix, sys.base_prefix))


# How often a server looks whether the checkout's sources are still the ones it imported (~15 ms a look).
SOURCE_CHECK_SECONDS = 10.0


def serve(socket_path: str, session_pid: int, sources: str, modules: tuple[str, ...],
          check_seconds: float = SOURCE_CHECK_SECONDS) -> None:
    # CPython's recipe for a parent that forks without exec (Doc/library/gc.rst, 3.11, gc.freeze): no collection
    # while importing (~400k objects that live as long as the process), then all of them frozen, so no child's
    # collection walks them (or touches, and so copies, their pages); each run's child enables collection
    # (`_child`).
    gc.disable()
    for name in modules:
        _load(name)
    for module_name, function in WARM_CALLS:
        if module_name in sys.modules:
            getattr(sys.modules[module_name], function)()
    if "tools.plan.engine" in sys.modules:  # a server that can run the program (not a cold one)
        _warm_type_caches()
    gc.freeze()
    untouched = _runtime_untouched()
    if untouched:
        raise SystemExit(f"fork server: importing touched the runtime: {untouched}")
    venv_fork_server.listen_and_fork(socket_path, session_pid, _handle, "fork server",
                                     still_current=lambda: shared_runs.source_digest() == sources,
                                     check_seconds=check_seconds)


def _handle(connection: socket.socket, session: int) -> None:
    """One connection, in a child of the server: a request answered (or refused: `_not_as_fresh`), or nothing
    when the client only asked whether the server listens, gave up, or the session ended."""
    line = _receive_line(connection)
    if not line:
        return
    request = json.loads(line)
    refusal = _not_as_fresh(request)
    answer = {"fresh": refusal} if refusal else _run_in_child(request, connection, session)
    if answer is not None:
        connection.sendall(json.dumps(answer).encode())


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


def _run_in_child(request: dict, connection: socket.socket, session: int) -> dict | None:
    """The run's answer, {"timeout": True} when it ran out of time, None when the client gave up or the session
    ended (the run's process group killed and reaped in these two cases and on a timeout)."""
    # Not a TemporaryDirectory: its finalizer would be the child's too (it ends with os._exit, but be plain).
    directory = tempfile.mkdtemp(prefix="fork-run-")
    try:
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
            connection.close()
            os.close(session)
            os._exit(_child(request, streams))
        _set_process_group(pid)  # set on both sides, so it holds whichever side runs first
        child = os.pidfd_open(pid)
        try:
            ready, _, _ = select.select([child, connection, session], [], [], request.get("timeout"))
        finally:
            os.close(child)
        if child not in ready:  # out of time, the client gone (its connection readable: EOF) or the session
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _, status = os.waitpid(pid, 0)
        if child not in ready:
            return {"timeout": True} if not ready else None
        # The bytes as written (latin-1 maps each byte to one character): the client decodes them as a pipe
        # would be read, or writes them out unchanged.
        return {"returncode": os.waitstatus_to_exitcode(status),
                **{name: streams[name].read_bytes().decode("latin-1") for name in ("stdout", "stderr")}}
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _set_process_group(pid: int) -> None:
    try:
        os.setpgid(pid, pid)
    except (PermissionError, ProcessLookupError):  # the child already set it and exec'd, or already ended
        pass


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


def current_key() -> str:
    """The server answers only while the sources and the environment it imported are still the same."""
    return f"{shared_runs.source_digest()}-{shared_runs.environment_digest()}"


def socket_path(modules: tuple[str, ...] | None = None) -> Path | None:
    """This session's server for the sources and environment as they are now, and these imports (WARM_MODULES
    unless given); None outside a session that shares runs, or where the path would not fit a socket's."""
    directory = shared_runs._directory
    if directory is None:
        return None
    asked = WARM_MODULES if modules is None else modules
    name = hashlib.sha256(json.dumps([current_key(), list(asked)]).encode()).hexdigest()[:16]
    path = directory / f"program-{name}.sock"
    return path if len(os.fsencode(path)) <= venv_forks.SOCKET_PATH_LIMIT else None


def server_command(modules: tuple[str, ...] | None = None, sources: str | None = None,
                   check_seconds: float = SOURCE_CHECK_SECONDS) -> list[str]:
    """What venv_forks.start runs (the socket and the session's pid go after its first three words): a server
    of `modules` (WARM_MODULES unless given) for `sources` (the checkout's as they are now unless given)."""
    asked = WARM_MODULES if modules is None else modules
    return [sys.executable, "-m", "tests.fork_server", sources or shared_runs.source_digest(), ",".join(asked),
            str(check_seconds)]


def ask(path: Path, request: dict) -> dict:
    """The server's answer; the connection stays open until it comes (closing it cancels the run). A client-side
    timeout beyond the run's own is the server's fault: it raises TimeoutError, which cancels the run."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        timeout = request.get("timeout")
        connection.settimeout(None if timeout is None else timeout + ANSWER_GRACE_SECONDS)
        connection.connect(str(path))
        connection.sendall(json.dumps(request).encode() + b"\n")
        data = _receive(connection)
    if not data:
        raise ConnectionError(f"the fork server at {path} closed without an answer (see {path.with_suffix('.log')})")
    return json.loads(data)


# How long past a run's timeout the client waits for the server to say so.
ANSWER_GRACE_SECONDS = 60


def _ask_or_start(request: dict, modules: tuple[str, ...] | None = None) -> dict:
    path = socket_path(modules)
    if path is None:
        return {"fresh": "no session to share a server with"}
    return venv_forks.ask_or_start(path, request, server_command(modules), asking=ask, head=3, cwd=str(ROOT))


def run(module: str, argv: list[str], stdin: str = "", timeout: float = 300) -> subprocess.CompletedProcess:
    """What `subprocess.run([python, -m, module, *argv], input=stdin, capture_output=True, text=True,
    cwd=ROOT, timeout=timeout)` returns, from a child of the session's fork server (a fresh process outside a
    session)."""
    return _ask({"module": module, "argv": argv}, [sys.executable, "-m", module, *argv], stdin, timeout)


def run_code(code: str, stdin: str = "", timeout: float = 300) -> subprocess.CompletedProcess:
    """What `subprocess.run([python, -c, code], ...)` returns, from a child of the session's fork server."""
    return _ask({"code": code}, [sys.executable, "-c", code], stdin, timeout)


def _ask(what: dict, args: list[str], stdin: str, timeout: float) -> subprocess.CompletedProcess:
    request = {**what, "stdin": stdin, "env": dict(os.environ), "cwd": str(ROOT), "timeout": timeout}
    try:
        answer = _ask_or_start(request)
    except TimeoutError:  # the server did not answer in time either; closing the connection killed the run
        raise subprocess.TimeoutExpired(args, timeout) from None
    if answer.get("timeout"):  # the server has killed the run's process group
        raise subprocess.TimeoutExpired(args, timeout)
    if "fresh" in answer:  # no session, or the environment differs from the server's where a fresh start reads it
        return subprocess.run(args, input=stdin, capture_output=True, text=True, cwd=ROOT, timeout=timeout)
    # As subprocess's text mode reads a pipe: the locale's encoding, strictly, and universal newlines.
    encoding = locale.getpreferredencoding(False)
    out, err = (answer[name].encode("latin-1").decode(encoding).replace("\r\n", "\n").replace("\r", "\n")
                for name in ("stdout", "stderr"))
    return subprocess.CompletedProcess(args, answer["returncode"], out, err)


def client_command() -> list[str]:
    """The command line that stands in for this venv's `python` in a script a test runs (`CMD -m MODULE ARGS`,
    from any directory, another checkout included): tests/fork_client.py asking the session's server, which is
    started now if none listens. Outside a session that forks, the plain interpreter."""
    path = socket_path() if enabled() else None
    if path is None:
        return [sys.executable]
    if not venv_forks.listening(path):
        venv_forks.start(path, server_command(), dict(os.environ), head=3, cwd=str(ROOT))
    return [sys.executable, str(ROOT / "tests" / "fork_client.py"), str(path)]


def enabled() -> bool:
    """In a pytest session that shares runs (tests/conftest.py), unless TPU_VLLM_TEST_FORK_SERVER=0."""
    return shared_runs._directory is not None and os.environ.get("TPU_VLLM_TEST_FORK_SERVER", "1") != "0"


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]), sys.argv[3], tuple(filter(None, sys.argv[4].split(","))),
          float(sys.argv[5]))
