"""`python -m MODULE ARGS...` answered by the pytest session's fork server (tests/fork_server.py), for scripts a
test runs: a wrapper or PLAN_PYTHON puts `python tests/fork_client.py SOCKET` where the interpreter would be.

    python tests/fork_client.py SOCKET -m MODULE [ARG ...]

The run has this process's environment and working directory (another checkout included: the server's child
imports that checkout's modules, not the ones it holds); its stdout and stderr (the bytes as written) and exit
status become this process's. This process becomes a fresh `python` with the same arguments instead whenever a
fork could not stand in for one: other interpreter options than `-m MODULE`, a stdin that is not /dev/null (the
child's is empty, and reading this one would take what a caller meant for someone else), another interpreter or
start-up environment than the server's (fork_server.startup_environment), or a server that has ended.
Standard library only, so it starts in milliseconds: it is a stand-in, not a second interpreter start.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import sys


def stdin_is_empty() -> bool:
    """stdin closed or /dev/null: what the fork's empty stdin is."""
    try:
        mode = os.fstat(0)
    except OSError:
        return True
    null = os.stat(os.devnull)
    return stat.S_ISCHR(mode.st_mode) and mode.st_rdev == null.st_rdev


def answer_of(socket_path: str, module: str, argv: list[str]) -> dict:
    request = {"module": module, "argv": argv, "stdin": "", "env": dict(os.environ), "cwd": os.getcwd(),
               "executable": sys.executable}
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.connect(socket_path)
            connection.sendall(json.dumps(request).encode() + b"\n")
            return json.loads(b"".join(iter(lambda: connection.recv(1 << 16), b"")))
    except (FileNotFoundError, ConnectionRefusedError):  # the server has ended since the script was written
        return {"fresh": "no server"}


def main() -> int:
    socket_path, *arguments = sys.argv[1:]
    if len(arguments) < 2 or arguments[0] != "-m" or not stdin_is_empty():
        answer = {"fresh": "not a plain -m run with nothing on stdin"}
    else:
        answer = answer_of(socket_path, arguments[1], arguments[2:])
    if "fresh" in answer:
        os.execv(sys.executable, [sys.executable, *arguments])
    for stream, name in ((sys.stdout.buffer, "stdout"), (sys.stderr.buffer, "stderr")):
        stream.write(answer[name].encode("latin-1"))
        stream.flush()
    if answer["returncode"] < 0:  # killed by a signal: end the same way, as the shell sees a fresh process end
        os.kill(os.getpid(), -answer["returncode"])
    return answer["returncode"]


if __name__ == "__main__":
    sys.exit(main())
