"""`python -m MODULE ARGS...` answered by a test worker's fork server (tests/fork_server.py), for scripts a
test runs: a wrapper or PLAN_PYTHON puts `python tests/fork_client.py SOCKET` where the interpreter would be.

    python tests/fork_client.py SOCKET -m MODULE [ARG ...]

The run has this process's environment and working directory (another checkout included: the server's child
imports that checkout's modules, not the ones it holds) and an empty stdin; its stdout, stderr and exit status
become this process's. When a forked child would not start as a fresh `python` would (another interpreter or
start-up environment: fork_server.STARTUP_VARIABLES), this process becomes that fresh `python` instead.
Standard library only, so it starts in milliseconds: it is a stand-in, not a second interpreter start.
"""

from __future__ import annotations

import json
import os
import socket
import sys


def main() -> int:
    socket_path, flag, module, *argv = sys.argv[1:]
    if flag != "-m":
        raise SystemExit(f"usage: {sys.argv[0]} SOCKET -m MODULE [ARG ...] (not {flag})")
    request = {"module": module, "argv": argv, "stdin": "", "env": dict(os.environ), "cwd": os.getcwd(),
               "executable": sys.executable}
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.connect(socket_path)
            connection.sendall(json.dumps(request).encode() + b"\n")
            answer = json.loads(b"".join(iter(lambda: connection.recv(1 << 16), b"")))
    except (FileNotFoundError, ConnectionRefusedError):  # the server has ended since the script was written
        answer = {"fresh": "no server"}
    if "fresh" in answer:
        os.execv(sys.executable, [sys.executable, "-m", module, *argv])
    sys.stdout.write(answer["stdout"])
    sys.stderr.write(answer["stderr"])
    sys.stdout.flush()
    if answer["returncode"] < 0:  # killed by a signal: end the same way, as the shell sees a fresh process end
        os.kill(os.getpid(), -answer["returncode"])
    return answer["returncode"]


if __name__ == "__main__":
    sys.exit(main())
