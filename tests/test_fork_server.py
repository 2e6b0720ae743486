"""tests/fork_server.py: a run forked from the warm server answers exactly as a fresh process, and one run leaves
nothing behind for the next."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import fork_server, shared_runs, venv_forks
from tests import program as harness


def harness_request(config: dict[str, str], stack: str = "dev", **extra) -> str:
    return json.dumps({"config": config, "secret_keys": [], "stack": stack, **extra})


def fresh(module: str, argv: list[str], stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *argv], input=stdin, capture_output=True, text=True,
                          cwd=harness.ROOT, timeout=300)


def answer_of(completed: subprocess.CompletedProcess) -> tuple:
    """Everything a test reads from a harness run. Registrations are compared as a set: their order follows
    the engine's worker threads and differs between two fresh processes too."""
    data = json.loads(completed.stdout)
    registrations = sorted(json.dumps(registration, sort_keys=True) for registration in data.pop("registrations"))
    return completed.returncode, registrations, data, completed.stderr.splitlines()


HARNESS_CASES = {
    "dev": lambda: harness_request(harness.dev_config()),
    "gke": lambda: harness_request(harness.gke_config(), stack="gke"),
    "bad settings": lambda: harness_request(
        harness.with_section(harness.dev_config(), "vllm", gpuMemoryUtilization=0.95)),
}


@pytest.mark.parametrize("case", HARNESS_CASES)
def test_a_forked_program_run_answers_as_a_fresh_process(case):
    request = HARNESS_CASES[case]()
    forked = fork_server.run("tests.program_harness", [], request)
    expected = fresh("tests.program_harness", [], request)
    assert answer_of(forked) == answer_of(expected)
    returncode, registrations, data, _ = answer_of(forked)
    if case == "bad settings":
        assert "tpu-vllm:vllm.gpuMemoryUtilization = 0.95" in data["problems"][0] and registrations == []
    else:
        assert returncode == 0 and data["problems"] is None and len(registrations) > 20 and data["outputs"]


# The dev and gke plans, text and JSON, forked against fresh processes (with other hash seeds):
# tests/test_plan.py::test_the_plan_is_byte_identical_across_fresh_runs. Here the plan's failing exit.
def test_a_forked_plan_prints_what_a_fresh_process_prints():
    argv = ["--stack", "no-such-stack"]
    forked = fork_server.run("tools.plan", argv)
    expected = fresh("tools.plan", argv)
    assert (forked.returncode, forked.stdout, forked.stderr) == (expected.returncode, expected.stdout,
                                                                  expected.stderr)
    assert forked.returncode == 2 and "no-such-stack" in forked.stderr


def test_runs_one_after_another_leave_nothing_for_the_next():
    # Pulumi's runtime is process-global: run in one process, the second run finds the first's closed event
    # loop and settings. Each forked child starts from the server's state before any run.
    dev = harness_request(harness.dev_config())
    gke = harness_request({**harness.gke_config(), "tpu-vllm:hfToken": harness.GKE_HF_CANARY}, stack="gke",
                          secret_keys=["tpu-vllm:hfToken"])
    first = answer_of(fork_server.run("tests.program_harness", [], dev))
    between = answer_of(fork_server.run("tests.program_harness", [], gke))
    again = answer_of(fork_server.run("tests.program_harness", [], dev))
    assert first == again
    assert between != first and between[0] == 0 and between[2]["problems"] is None
    assert harness.GKE_HF_CANARY not in json.dumps(again)


def test_the_server_has_only_imported_when_it_forks():
    # Asked in a child of the session's warm server: the state every run starts from.
    checked = fork_server.run_code("import sys\nfrom tests import fork_server as f\n"
                                   "print(f._runtime_untouched(), 'pulumi_gcp.compute' in sys.modules)")
    assert checked.stdout.strip() == "[] True", checked.stderr
    touched = fork_server.run_code(
        "from tests import fork_server as f\nfrom pulumi.runtime import mocks\n"
        "class M(mocks.Mocks):\n  def new_resource(self, args): return args.name, {}\n"
        "  def call(self, args): return {}\n"
        "mocks.set_mocks(M(), project='p', stack='s')\nprint(f._runtime_untouched())")
    assert "monitor" in touched.stdout and "stack or project" in touched.stdout, touched.stderr


def test_a_run_finds_the_sdks_type_caches_filled_for_the_classes_the_shipped_stacks_register():
    # fork_server._warm_type_caches: Pulumi's per-class caches (functools.cache) hold the dev stack's disk and the
    # gke stack's Deployment before any run asks; the answers stay a fresh process's (the comparisons above).
    checked = fork_server.run_code(
        "from pulumi import _types\nimport pulumi_gcp, pulumi_kubernetes\n"
        "for cls in (pulumi_gcp.compute.Disk, pulumi_kubernetes.apps.v1.Deployment):\n"
        "    before = _types._types_from_py_properties.cache_info().hits\n"
        "    _types._types_from_py_properties(cls)\n"
        "    print(_types._types_from_py_properties.cache_info().hits - before)\n")
    assert checked.stdout.split() == ["1", "1"], checked.stderr


# --- a server's life, held with servers that import nothing (what a server has imported plays no part in when
# it is started, answers, kills a run or ends) ---


def test_edited_sources_or_another_environment_are_another_server(monkeypatch):
    current = fork_server.socket_path()
    assert fork_server.socket_path() == current  # the same sources and environment: the same server
    monkeypatch.setattr(shared_runs, "source_digest", lambda: "a program edited since")
    edited = fork_server.socket_path()
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "another environment")
    assert len({current, edited, fork_server.socket_path()}) == 3


def server_pid(path: Path) -> int:
    """The process listening on `path` (SO_PEERCRED: the credentials of the peer that called listen)."""
    import socket
    import struct

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.connect(str(path))
        pid, _, _ = struct.unpack("3i", connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                             struct.calcsize("3i")))
    return pid


def alive(pid: int) -> bool:
    """Running (not a zombie waiting to be reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    # Gone before the open (ENOENT) or between the open and the read: the kernel's stat file then answers ESRCH
    # (torvalds/linux fs/proc/base.c proc_single_show: no task, -ESRCH). A flake seen once at 2 cores.
    except (FileNotFoundError, ProcessLookupError):
        return False


def wait_until(condition, what: str, seconds: float = 60) -> None:
    """Polls `condition` for at most `seconds` (a bound, not a measurement: it only says how long to look)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def hang_code(started: Path) -> str:
    """A run that starts a process of its own, writes its pid, its own pid and its temp directory to `started`,
    and never ends."""
    return ("import json, os, pathlib, subprocess, time\n"
            "sleeper = subprocess.Popen(['sleep', '3600'])\n"
            "directory = os.path.dirname(os.readlink('/proc/self/fd/1'))\n"
            "run = {'sleeper': sleeper.pid, 'run': os.getpid(), 'directory': directory}\n"
            f"pathlib.Path({str(started) + '.writing'!r}).write_text(json.dumps(run))\n"
            f"os.replace({str(started) + '.writing'!r}, {str(started)!r})\n"
            "time.sleep(3600)\n")


def request(code: str, timeout: float | None = 60) -> dict:
    return {"code": code, "stdin": "", "env": dict(os.environ), "cwd": str(harness.ROOT), "timeout": timeout}


def started_run(started: Path) -> dict:
    wait_until(started.exists, "the run never started")
    return json.loads(started.read_text())


def assert_the_run_is_gone(run: dict) -> None:
    wait_until(lambda: not alive(run["run"]) and not alive(run["sleeper"]), "the run or its sleeper lived on")
    wait_until(lambda: not Path(run["directory"]).exists(), "the run's temp directory stayed")


@pytest.fixture
def cold():
    """A server that imports nothing, ending with a `sleep` standing for the session: (socket, server, session)."""
    session = subprocess.Popen(["sleep", "600"])
    path = shared_runs._directory / f"cold-{os.getpid()}-{time.monotonic_ns()}.sock"
    server = venv_forks.start(path, fork_server.server_command(()), dict(os.environ), session=session.pid, head=3,
                              cwd=str(harness.ROOT))
    yield path, server, session
    session.kill()
    session.wait()
    server.wait(timeout=60)


def test_a_run_that_does_not_answer_in_time_is_killed_with_what_it_started(tmp_path, monkeypatch):
    # The session's own (cold) server, through what every test calls.
    monkeypatch.setattr(fork_server, "WARM_MODULES", ())
    started = tmp_path / "started"
    fork_server.run_code("print('answered')")
    server = server_pid(fork_server.socket_path())
    with pytest.raises(subprocess.TimeoutExpired):
        fork_server.run_code(hang_code(started), timeout=4)
    assert_the_run_is_gone(started_run(started))
    again = fork_server.run_code("print('answered')")
    assert again.stdout == "answered\n" and server_pid(fork_server.socket_path()) == server  # the server lives on


WORKER = """
import json, sys
from pathlib import Path
from tests import fork_server
fork_server.ask(Path(sys.argv[1]), json.loads(sys.argv[2]))
"""


def asking_worker(path: Path, started: Path) -> subprocess.Popen:
    """A process standing for a worker, asking the server at `path` for a run that never ends."""
    return subprocess.Popen([sys.executable, "-c", WORKER, str(path), json.dumps(request(hang_code(started), None))],
                            cwd=harness.ROOT)


@pytest.mark.parametrize("client", ["closes its connection", "is killed"])
def test_a_run_whose_client_gives_up_or_dies_is_killed_with_what_it_started(tmp_path, cold, client):
    path, server, _ = cold
    started = tmp_path / "started"
    if client == "is killed":  # a worker killed -9 in the middle of a run: no atexit, no stop
        worker = asking_worker(path, started)
        run = started_run(started)
        worker.kill()
        worker.wait()
    else:
        import socket

        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.connect(str(path))
            connection.sendall(json.dumps(request(hang_code(started), None)).encode() + b"\n")
            run = started_run(started)
    assert_the_run_is_gone(run)
    assert fork_server.ask(path, request("print('next')"))["stdout"] == "next\n" and server.poll() is None


@pytest.mark.parametrize("state", ["idle", "running"])
def test_the_server_and_its_runs_end_with_the_session(tmp_path, cold, state):
    path, server, session = cold
    assert path.stat().st_mode & 0o077 == 0  # its owner's only
    started = tmp_path / "started"
    if state == "running":
        worker = asking_worker(path, started)
        run = started_run(started)
    session.kill()  # the session's main process, killed however
    session.wait()
    assert server.wait(timeout=60) == 0 and not path.exists()
    if state == "running":
        assert_the_run_is_gone(run)
        worker.wait(timeout=60)  # its connection closed unanswered
        assert worker.returncode != 0


def test_a_server_whose_sources_were_edited_since_ends_by_itself():
    session = subprocess.Popen(["sleep", "600"])
    try:
        servers = {}
        for sources in ("current", "edited since"):
            path = shared_runs._directory / f"sources-{os.getpid()}-{sources.replace(' ', '-')}.sock"
            command = fork_server.server_command((), None if sources == "current" else "imported before an edit", 0.1)
            servers[sources] = path, venv_forks.start(path, command, dict(os.environ), session=session.pid, head=3,
                                                      cwd=str(harness.ROOT))
        stale_path, stale = servers["edited since"]
        assert stale.wait(timeout=60) == 0 and not stale_path.exists()
        current_path, current = servers["current"]
        assert fork_server.ask(current_path, request("print('still')"))["stdout"] == "still\n"
        assert current.poll() is None
    finally:
        session.kill()
        session.wait()
        for _, server in servers.values():
            server.wait(timeout=60)


MEET = """
import pathlib, sys, time
mine, other = (pathlib.Path(name) for name in sys.argv[1:])
mine.write_text("here")
deadline = time.monotonic() + 60  # a bound: on a server that answers one run at a time, the other never comes
while not other.exists():
    assert time.monotonic() < deadline, "answered one after the other"
    time.sleep(0.05)
print("met")
"""


def test_two_clients_asking_at_once_are_answered_side_by_side(tmp_path, cold):
    from concurrent.futures import ThreadPoolExecutor

    path, _, _ = cold
    a, b = tmp_path / "a", tmp_path / "b"
    # Each run waits until the other has started: only runs under way at the same time both answer.
    asks = [{**request(f"import sys; sys.argv[1:] = {[str(mine), str(other)]!r}\n" + MEET, 120)}
            for mine, other in ((a, b), (b, a))]
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda asked: fork_server.ask(path, asked), asks))
    assert [(answer["returncode"], answer["stdout"]) for answer in answers] == [(0, "met\n")] * 2, answers


CHECKOUT_MAIN = """
import json, os, sys
import tools.plan
print(json.dumps({"file": tools.plan.__file__, "argv": sys.argv[1:], "cwd": os.getcwd(), "path0": sys.path[0],
                  "project": sorted(name for name in sys.modules if name.split(".")[0] in ("components", "tools",
                                                                                          "tests")),
                  "hash": hash("seed"), "env": os.environ.get("ASKED")}))
print("to stderr", file=sys.stderr)
with open(f"/proc/{os.getppid()}/stat") as parent:  # the handler's parent: the server
    print(parent.read().rsplit(")", 1)[1].split()[1], file=sys.stderr)
sys.exit(3)
"""


def another_checkout(tmp_path: Path) -> Path:
    """A checkout with a tools.plan of its own that says which project modules it found imported."""
    checkout = tmp_path / "checkout"
    (checkout / "tools" / "plan").mkdir(parents=True)
    (checkout / "tools" / "__init__.py").write_text("")
    (checkout / "tools" / "plan" / "__init__.py").write_text("")
    (checkout / "tools" / "plan" / "__main__.py").write_text(CHECKOUT_MAIN)
    return checkout


def answer_and_parent(completed: subprocess.CompletedProcess) -> tuple[tuple, int]:
    *said, parent = completed.stderr.splitlines()
    return (completed.returncode, completed.stdout, said), int(parent)


@pytest.fixture
def client_served(monkeypatch):
    """The client asks a server even under TPU_VLLM_TEST_FORK_SERVER=0: these tests are about the two themselves,
    as the tests above call fork_server.run directly."""
    monkeypatch.setattr(fork_server, "enabled", lambda: True)


@pytest.mark.usefixtures("client_served")
def test_a_script_run_in_another_checkout_imports_that_checkouts_modules_as_a_fresh_process_does(tmp_path):
    checkout = another_checkout(tmp_path)
    env = {**os.environ, "ASKED": "here"}
    command = fork_server.client_command()
    assert command[1:] and venv_forks.listening(Path(command[2]))  # a server answers, not a fresh interpreter
    forked = subprocess.run([*command, "-m", "tools.plan", "--stack", "x"], cwd=checkout, env=env,
                            capture_output=True, text=True, timeout=300)
    fresh_there = subprocess.run([sys.executable, "-m", "tools.plan", "--stack", "x"], cwd=checkout, env=env,
                                 capture_output=True, text=True, timeout=300)
    (forked_answer, forked_parent), (fresh_answer, _) = map(answer_and_parent, (forked, fresh_there))
    said = json.loads(forked.stdout)
    assert forked_parent == server_pid(Path(command[2]))  # a child of the server's handler answered
    # Its own tools.plan, no module of the server's checkout (it had imported components and tools.plan):
    assert said["file"] == str(checkout / "tools" / "plan" / "__init__.py") and said["project"] == [
        "tools", "tools.plan"] and said["path0"] == str(checkout) and said["env"] == "here"
    assert forked_answer[0] == 3 and forked_answer[2] == ["to stderr"]
    # Everything but the hash (each fresh process has its own seed; the server's children share one):
    assert {**said, "hash": None} == {**json.loads(fresh_there.stdout), "hash": None}
    assert forked_answer[0] == fresh_answer[0] and forked_answer[2] == fresh_answer[2]


# What tells a fork from a fresh start: the hash seed, the interpreter's options, what stdin held.
STDIN_MAIN = """
import sys
read = sys.stdin.buffer.read()
sys.stdout.buffer.write(f"{hash('seed')} {sys.flags.utf8_mode} ".encode() + b"read: " + read)
"""
BYTES_MAIN = """
import sys
sys.stdout.buffer.write(b"\\xff\\r\\n")
"""


@pytest.mark.parametrize("case", ["another hash seed", "a server that has ended", "something on stdin",
                                  "other interpreter options"])
def test_a_script_run_a_fork_cannot_start_as_fresh_runs_fresh(tmp_path, case, client_served):
    checkout = another_checkout(tmp_path)
    (checkout / "tools" / "plan" / "__main__.py").write_text(STDIN_MAIN)
    command = fork_server.client_command()
    env = {**os.environ, "PYTHONHASHSEED": "5"} if case == "another hash seed" else dict(os.environ)
    stand_in = [*command[:2], str(tmp_path / "ended.sock")] if case == "a server that has ended" else command
    feed = {"input": b"asked\n"} if case == "something on stdin" else {"stdin": subprocess.DEVNULL}
    options = ["-X", "utf8", "-m", "tools.plan"] if case == "other interpreter options" else ["-m", "tools.plan"]
    fresh_there, answered = (subprocess.run([*interpreter, *options], cwd=checkout, env=env, capture_output=True,
                                            timeout=300, **feed) for interpreter in ([sys.executable], stand_in))
    if case != "another hash seed":  # two processes with random seeds: compare what follows the hash
        answered.stdout, fresh_there.stdout = (out.split(b" ", 1)[1] for out in (answered.stdout, fresh_there.stdout))
    assert (answered.returncode, answered.stdout, answered.stderr) == (
        fresh_there.returncode, fresh_there.stdout, fresh_there.stderr)


def test_a_forked_scripts_output_is_the_bytes_it_wrote(tmp_path, client_served):
    # Bytes that are not UTF-8 and a CR LF, as a fresh process writes them; the server answers the next run.
    checkout = another_checkout(tmp_path)
    (checkout / "tools" / "plan" / "__main__.py").write_text(BYTES_MAIN)
    command = fork_server.client_command()
    forked, fresh_there = (subprocess.run([*interpreter, "-m", "tools.plan"], cwd=checkout, capture_output=True,
                                          stdin=subprocess.DEVNULL, timeout=300)
                           for interpreter in (command, [sys.executable]))
    assert forked.stdout == fresh_there.stdout == b"\xff\r\n" and forked.returncode == 0
    # The worker's own runs read text as subprocess reads a pipe in text mode (universal newlines):
    code = "import sys; sys.stdout.write('a\\rb\\r\\nc')"
    fresh_text = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    assert fork_server.run_code(code).stdout == fresh_text == "a\nb\nc"
