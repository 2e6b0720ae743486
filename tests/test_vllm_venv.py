"""A check in the vLLM venv forked from the session's one vLLM import (tests/vllm_venv.py over tests/venv_forks.py
and tests/venv_fork_server.py) is what a fresh `python` would have been: its own arguments, stdin, environment
and directory, its exit code and streams, and nothing left by the check before it. The server's life (ending
with the session, restarting after a death, refusing strangers, killing an overdue check) is held with a server
of the test venv's python that imports nothing, so those tests do not import vLLM again."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from tests import venv_forks, vllm_venv

LIGHT_SERVER = [sys.executable, str(venv_forks.SERVER), "json"]  # the same server, importing only json

FIRST = """
import json, os, sys
env = dict(os.environ)
import vllm.envs, vllm.platforms
assert not vllm.envs._is_envs_cache_enabled()
vllm.envs.enable_envs_cache()  # what the engine core does at startup: every variable frozen from now on
os.environ["TPU_VLLM_LEFT_BEHIND"] = "1"
sys.modules["left_behind"] = sys
platform = type(vllm.platforms.current_platform).__name__
print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "stdin": sys.stdin.read(), "prefix": sys.prefix,
                  "env": env, "platform": platform, "path0": sys.path[0]}))
sys.stderr.write("first done\\n")
sys.exit(3)
"""
SECOND = """
import json, os, sys
import vllm.envs
left = [vllm.envs._is_envs_cache_enabled(), "TPU_VLLM_LEFT_BEHIND" in os.environ, "left_behind" in sys.modules]
print(json.dumps(left))
raise ValueError("uncaught")
"""


def test_each_check_is_a_fresh_process_of_the_vllm_venv(tmp_path):
    first = vllm_venv.run(["-c", FIRST, "a b", "c"], input="on stdin\r\n", cwd=str(tmp_path), text=True, timeout=120)
    assert (first.returncode, first.stderr) == (3, "first done\n")
    seen = json.loads(first.stdout)
    assert seen["argv"] == ["-c", "a b", "c"] and seen["cwd"] == str(tmp_path) and seen["path0"] == ""
    # Its environment is the request's (this test's PYTEST_CURRENT_TEST too), with what importing vLLM sets.
    asked = vllm_venv.check_environment()
    assert seen["stdin"] == "on stdin\r\n" and set(asked) <= set(seen["env"])
    assert seen["env"]["PYTEST_CURRENT_TEST"] == asked["PYTEST_CURRENT_TEST"] and "TPU_VLLM_LEFT_BEHIND" not in asked
    assert seen["platform"] == "CpuPlatform"  # imported under VLLM_TARGET_DEVICE=cpu, as every check runs
    assert Path(seen["prefix"]) == Path(vllm_venv.vllm_python()).parent.parent  # the vLLM venv's interpreter
    second = vllm_venv.run(["-c", SECOND], timeout=120)
    assert json.loads(second.stdout) == [False, False, False]  # nothing of the first check is left
    assert second.returncode == 1 and second.stderr.endswith(b"ValueError: uncaught\n")  # as `python` ends


def test_a_script_gets_its_own_directory_first_on_the_path_and_bytes_come_back_unchanged(tmp_path):
    script = tmp_path / "bytes_out.py"
    script.write_text("import sys\nsys.stdout.buffer.write(sys.path[0].encode() + b'|' + sys.stdin.buffer.read())\n")
    data = "a\u2028b\r\n".encode() + bytes(range(256))
    done = vllm_venv.run([str(script)], input=data, timeout=120)
    assert (done.returncode, done.stdout) == (0, str(tmp_path).encode() + b"|" + data)


@pytest.fixture
def light(tmp_path):
    """A server of the test venv's python that imports only json, ending with a `sleep` standing for the session."""
    session = subprocess.Popen(["sleep", "600"])
    socket_path = tmp_path / "light.sock"
    server = venv_forks.start(socket_path, LIGHT_SERVER, dict(os.environ), session=session.pid)
    yield socket_path, server, session
    session.kill()
    session.wait()
    server.wait(timeout=60)


def request(code: str, timeout: float = 60) -> dict:
    return {"args": ["-c", code], "env": dict(os.environ), "cwd": "/", "timeout": timeout, "input": ""}


def test_the_server_ends_with_the_session_and_leaves_no_socket(light):
    socket_path, server, session = light
    assert venv_forks.ask(socket_path, request("print('hi')"))["stdout"] == "hi\n"
    assert socket_path.stat().st_mode & 0o077 == 0  # its owner's only
    session.kill()
    session.wait()
    assert server.wait(timeout=60) == 0  # no test asks again: the session's end alone ends it
    assert not socket_path.exists()
    assert "venv fork server: ended; CPU user" in socket_path.with_suffix(".log").read_text()


def test_a_second_asker_reuses_the_server_and_a_dead_one_is_started_again(light):
    socket_path, server, session = light
    assert venv_forks.start(socket_path, LIGHT_SERVER, dict(os.environ), session=session.pid) is None
    server.kill()  # as if killed with its worker: the socket file stays, nothing listens on it
    server.wait()
    assert socket_path.exists()
    answer = venv_forks.ask_or_start(socket_path, request("import os; print(os.getpid())"), LIGHT_SERVER,
                                    session=session.pid)
    assert answer["returncode"] == 0 and venv_forks.listening(socket_path)
    restarted = venv_forks._started[-1]
    assert restarted.pid != server.pid and restarted.poll() is None
    session.kill()
    session.wait()
    assert restarted.wait(timeout=60) == 0


def test_a_listening_socket_that_never_accepts_is_no_server(tmp_path):
    # A server killed just after it forked a handler: the handler still holds the listening socket for a moment,
    # so a connection is queued and then reset, never accepted (the flake this holds: the second asker above
    # reading "Connection reset by peer" under load). That is a server to start again, not one that answers.
    path = tmp_path / "held.sock"
    held = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    held.bind(str(path))
    held.listen(1)
    asked = []
    asker = threading.Thread(target=lambda: asked.append(venv_forks.listening(path)))
    asker.start()
    assert select.select([held], [], [], 60)[0]  # the asker's connection waits in the backlog
    held.close()
    asker.join(60)
    assert asked == [False]


def test_an_overdue_check_is_killed_and_said_to_have_timed_out(light):
    socket_path, _, _ = light
    answer = venv_forks.ask(socket_path, request("import time; print('started', flush=True); time.sleep(600)", 0.5))
    assert answer["timeout"] is True and answer["stdout"] == "started\n" and answer["returncode"] == -9


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to act as another user")
def test_another_user_cannot_run_code_through_it():
    # A socket another user could reach (its directory and itself opened up): the server still refuses them.
    directory = Path(tempfile.mkdtemp(dir="/tmp"))
    session = subprocess.Popen(["sleep", "600"])
    try:
        directory.chmod(0o755)
        socket_path = directory / "s.sock"
        server = venv_forks.start(socket_path, LIGHT_SERVER, dict(os.environ), session=session.pid)
        socket_path.chmod(0o777)
        marker = directory / "ran"
        payload = json.dumps(request(f"open({str(marker)!r}, 'w')"))
        attempt = ("import os, socket; os.setgid(65534); os.setuid(65534)\n"
                   f"c = socket.socket(socket.AF_UNIX); c.connect({str(socket_path)!r})\n"
                   f"try:\n    c.sendall({payload!r}.encode()); c.shutdown(socket.SHUT_WR); print(c.recv(100))\n"
                   "except (BrokenPipeError, ConnectionResetError):\n    print('refused')\n")
        done = subprocess.run([sys.executable, "-c", attempt], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and done.stdout in ("b''\n", "refused\n"), done.stdout + done.stderr
        assert not marker.exists()
        assert venv_forks.ask(socket_path, request("print('mine')"))["stdout"] == "mine\n"  # its owner still can
    finally:
        session.kill()
        session.wait()
        server.wait(timeout=60)
        for path in directory.iterdir():
            path.unlink()
        directory.rmdir()
