"""A check in another venv from the tests (`python SCRIPT ARGS...` or `python -c CODE ARGS...`), forked from one
process per session that has imported what the checks need (tests/venv_fork_server.py).

`run(python, args, ...)` returns what `subprocess.run([python, *args], capture_output=True)` returns. Inside a
pytest session that shares runs (tests/shared_runs.py), the check runs in a child forked from one server per
venv, environment and set of imports, shared by every worker and file of the session: the imports are paid
once, not once per check. The first asker starts it under a file lock in the session's shared directory; it
ends with the session's main process (or after 10 idle minutes), so a worker that ends or dies early takes
nothing with it. A server imports under the environment its checks run under (PYTEST_* aside), so a check
asking for another environment gets a server of its own. Outside such a session, or with the caller's opt-out
variable set to 0, every check is a fresh process. tests/vllm_venv.py and tests/policy_venv.py are its users.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import locale
import os
import socket
import subprocess
from pathlib import Path

from tests import shared_runs

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests" / "venv_fork_server.py"
SOCKET_PATH_LIMIT = 107  # sun_path is 108 bytes with its NUL (unix(7))
_started: list[subprocess.Popen] = []  # kept, so no Popen is collected (and warned about) while its server runs


def run(python: str, args: list[str], *, warm: tuple[str, ...], name: str, opt_out: str, env: dict[str, str],
        input: str | bytes = b"", cwd: str | None = None, timeout: float = 300, text: bool = False
        ) -> subprocess.CompletedProcess:
    """`python ARGS` in a child of the server that imported `warm` (its socket named after `name`), or a fresh
    process where nothing is shared or `opt_out` is set to 0."""
    if args[0] != "-c" and not args[0].endswith(".py"):
        raise ValueError(f"a check is `SCRIPT.py ARGS...` or `-c CODE ARGS...`, not {args[:1]}")
    directory = shared_runs._directory
    key = server_key(python, env, warm)
    socket_path = directory / f"{name}-{key}.sock" if directory is not None else None
    if socket_path is None or len(os.fsencode(socket_path)) > SOCKET_PATH_LIMIT or os.environ.get(opt_out) == "0":
        return subprocess.run([python, *args], input=input, env=env, cwd=cwd, capture_output=True, timeout=timeout,
                              text=text)
    encoding = locale.getpreferredencoding(False)
    request = {"args": args, "env": env, "cwd": os.path.abspath(cwd or os.getcwd()), "timeout": timeout,
               "input": (input.encode(encoding) if isinstance(input, str) else input).decode("latin-1")}
    answer = ask_or_start(socket_path, request, [python, str(SERVER), ",".join(warm)])
    if answer["timeout"]:
        raise subprocess.TimeoutExpired([python, *args], timeout)
    out, err = (answer[stream].encode("latin-1") for stream in ("stdout", "stderr"))
    if text:  # as subprocess's text mode reads a pipe: decoded, universal newlines
        out, err = (data.decode(encoding).replace("\r\n", "\n").replace("\r", "\n") for data in (out, err))
    return subprocess.CompletedProcess([python, *args], answer["returncode"], out, err)


def server_key(python: str, env: dict[str, str], warm: tuple[str, ...]) -> str:
    kept = sorted((name, value) for name, value in env.items() if not name.startswith("PYTEST_"))
    sources = [hashlib.sha256(path.read_bytes()).hexdigest() for path in (SERVER, SERVER.with_name("child_exit.py"))]
    text = json.dumps([python, kept, list(warm), sources])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def session_pid() -> int:
    """The session's main process: xdist's controller, whose child each worker is, or pytest itself."""
    return os.getppid() if os.environ.get("PYTEST_XDIST_WORKER") else os.getpid()


def ask(socket_path: Path, request: dict) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(request["timeout"] + 60)
        connection.connect(str(socket_path))
        connection.sendall(json.dumps(request).encode())
        connection.shutdown(socket.SHUT_WR)
        data = b"".join(iter(lambda: connection.recv(1 << 16), b""))
    if not data:
        raise ConnectionError(f"the fork server at {socket_path} closed without an answer")
    return json.loads(data)


def ask_or_start(socket_path: Path, request: dict, server: list[str], session: int | None = None, *,
                 asking=ask, **starting) -> dict:
    """The server's answer (`asking(socket_path, request)`); `server` (its command, less the socket and the
    session) is started if none listens."""
    try:
        return asking(socket_path, request)
    # Not started yet, ended idle, its starter died, or it died just after forking a handler (`listening`).
    except (FileNotFoundError, ConnectionRefusedError, ConnectionResetError):
        start(socket_path, server, request["env"], session, **starting)
        return asking(socket_path, request)


# How long a server may take to close an empty request (a handler forked and ended), well beyond a loaded machine's.
LISTENING_SECONDS = 60


def listening(socket_path: Path) -> bool:
    """Whether a server takes connections on `socket_path`: it closes an empty request unanswered. A server killed
    just after it forked a handler is not one, though for a moment the handler still holds its listening socket
    (until the handler closes it, venv_fork_server.listen_and_fork): a connection waits in that socket's backlog,
    never accepted, and is reset when the handler closes it (torvalds/linux net/unix/af_unix.c, 6.6,
    unix_release_sock: a listening socket's queued connections are released as embryos, their peers' sk_err set to
    ECONNRESET)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.settimeout(LISTENING_SECONDS)
            connection.connect(str(socket_path))
            connection.shutdown(socket.SHUT_WR)  # the empty request
            return connection.recv(1) == b""
    except (FileNotFoundError, ConnectionRefusedError, ConnectionResetError, TimeoutError):
        return False


def start(socket_path: Path, server: list[str], env: dict[str, str], session: int | None = None, *,
          head: int = 2, cwd: str = "/") -> subprocess.Popen | None:
    """Start `server` (python, script, modules: its first `head` words come before the socket and the session)
    once, to end with `session` (this session's main process unless given): under a lock, so a second asker waits
    for the first one's server. None when one already listens. It runs in a session of its own, so a Ctrl-C in
    the terminal reaches pytest, whose end ends it, and not the server in the middle of a run."""
    log_path = socket_path.with_suffix(".log")
    with open(socket_path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if listening(socket_path):
            return None
        socket_path.unlink(missing_ok=True)  # a server that ended left no listener behind it
        with open(log_path, "ab") as log:
            command = [*server[:head], str(socket_path), str(session or session_pid()), *server[head:]]
            process = subprocess.Popen(command, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                       stderr=log, start_new_session=True)
        _started.append(process)
        ready = process.stdout.readline()
        process.stdout.close()
    if ready != b"ready\n":
        process.wait()
        raise RuntimeError(f"the fork server {socket_path.name} did not start (exit {process.returncode}): "
                           f"{log_path.read_text()[-3000:]}")
    return process
