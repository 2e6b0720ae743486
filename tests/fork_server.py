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
processes with other seeds), and a child ends with os._exit after flushing its streams (no atexit handlers
or interpreter shutdown).

    python -m tests.fork_server SOCKET    # the server (started by `run` below, never by hand)
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import runpy
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path

from tests import shared_runs

ROOT = shared_runs.ROOT
# The modules a dev or gke run imports, the costly ones first. pulumi_gcp and pulumi_kubernetes load their
# submodules lazily (pulumi._utils.lazy_import): reading an attribute is what loads one (see `_load`).
WARM_MODULES = (
    "grpc", "pulumi", "pulumi.dynamic", "pulumi.runtime.mocks", "pulumi_gcp", "pulumi_gcp.compute",
    "pulumi_gcp.secretmanager", "pulumi_gcp.projects", "pulumi_gcp.serviceaccount", "pulumi_gcp.storage",
    "pulumi_gcp.container", "pulumi_gcp.monitoring", "pulumi_gcp.artifactregistry", "pulumi_kubernetes",
    "pulumi_kubernetes.core.v1", "pulumi_kubernetes.rbac.v1", "pulumi_kubernetes.apps.v1",
    "pulumi_kubernetes.storage.v1", "pulumi_kubernetes.policy.v1", "pulumi_kubernetes.networking.v1",
    "pulumi_kubernetes.autoscaling.v2", "pulumi_kubernetes.apiregistration.v1",
    "pulumi_kubernetes.apiextensions", "pulumi_command", "pulumi_command.remote", "pulumi_command.local",
    "pulumi_tls", "pulumi_random", "yaml", "pydantic",
    "tools.plan.engine", "tools.plan.model", "tools.plan.render", "tools.plan.diff", "tools.plan.stack_file",
    "components.settings", "components.core.shared_resources", "components.core.preview_access",
    "components.vm.deployment", "components.gke.deployment",
)


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


def serve(socket_path: str) -> None:
    for name in WARM_MODULES:
        _load(name)
    untouched = _runtime_untouched()
    if untouched:
        raise SystemExit(f"fork server: importing touched the runtime: {untouched}")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    listener.listen()
    print("ready", flush=True)
    while True:
        connection, _ = listener.accept()
        with connection:
            request = json.loads(_receive(connection))
            if request.get("stop"):
                return
            connection.sendall(json.dumps(_run_in_child(request, listener)).encode())


def _receive(connection: socket.socket) -> bytes:
    chunks = []
    while chunk := connection.recv(1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def _run_in_child(request: dict, listener: socket.socket) -> dict:
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
            listener.close()
            os._exit(_child(request, streams))
        _, status = os.waitpid(pid, 0)
        return {"returncode": os.waitstatus_to_exitcode(status), "stdout": streams["stdout"].read_text(),
                "stderr": streams["stderr"].read_text()}


def _child(request: dict, streams: dict[str, Path]) -> int:
    """`python -m MODULE ARGV...` with the request's stdin, environment and working directory."""
    for fd, name, mode in ((0, "stdin", os.O_RDONLY), (1, "stdout", os.O_WRONLY), (2, "stderr", os.O_WRONLY)):
        opened = os.open(streams[name], mode)
        os.dup2(opened, fd)
        os.close(opened)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    sys.argv = [request["module"], *request["argv"]]
    code = 0
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    except SystemExit as exit_:  # as the interpreter treats sys.exit's argument
        if exit_.code is None:
            code = 0
        elif isinstance(exit_.code, int):
            code = exit_.code
        else:
            print(exit_.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - an uncaught exception: traceback and 1, as `python -m` ends
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - a closed stream: what was written is already on the file
        code = code or 120
    return code


# --- the client side, in the test worker ---

class _Server:
    def __init__(self, key: str):
        self.key = key
        self.directory = tempfile.mkdtemp(prefix="tpu-vllm-fork-")
        self.socket_path = os.path.join(self.directory, "socket")
        self.process = subprocess.Popen([sys.executable, "-m", "tests.fork_server", self.socket_path], cwd=ROOT,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=open(os.path.join(self.directory, "server.log"), "w"), text=True)
        ready = self.process.stdout.readline()
        if ready.strip() != "ready":
            self.process.wait()
            log = Path(self.directory, "server.log").read_text()
            raise RuntimeError(f"fork server did not start (exit {self.process.returncode}): {log}")

    def ask(self, request: dict, timeout: float | None = None) -> dict:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.settimeout(timeout)
            connection.connect(self.socket_path)
            connection.sendall(json.dumps(request).encode())
            connection.shutdown(socket.SHUT_WR)
            return json.loads(_receive(connection))

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
                    connection.connect(self.socket_path)
                    connection.sendall(b'{"stop": true}')
            except OSError:
                self.process.kill()
            self.process.wait()
        self.process.stdout.close()
        shutil.rmtree(self.directory, ignore_errors=True)


_server: _Server | None = None
_lock = threading.Lock()


def current_key() -> str:
    """The server answers only while the sources and the environment it imported are still the same."""
    return f"{shared_runs.source_digest()}-{shared_runs.environment_digest()}"


def run(module: str, argv: list[str], stdin: str = "", timeout: float = 300) -> subprocess.CompletedProcess:
    """What `subprocess.run([python, -m, module, *argv], input=stdin, capture_output=True, text=True,
    cwd=ROOT)` returns, from a child of the fork server."""
    global _server
    with _lock:  # one run at a time per worker: the server answers one connection after another
        key = current_key()
        if _server is None or _server.key != key or _server.process.poll() is not None:
            if _server is not None:
                _server.stop()
            _server = _Server(key)
        answer = _server.ask({"module": module, "argv": argv, "stdin": stdin, "env": dict(os.environ),
                              "cwd": str(ROOT)}, timeout)
    return subprocess.CompletedProcess([sys.executable, "-m", module, *argv], answer["returncode"],
                                       answer["stdout"], answer["stderr"])


def enabled() -> bool:
    """In a pytest session that shares runs (tests/conftest.py), unless TPU_VLLM_TEST_FORK_SERVER=0."""
    return shared_runs._directory is not None and os.environ.get("TPU_VLLM_TEST_FORK_SERVER", "1") != "0"


@atexit.register
def _stop_at_exit() -> None:
    if _server is not None:
        _server.stop()


if __name__ == "__main__":
    serve(sys.argv[1])
