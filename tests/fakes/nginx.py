"""Debian's real nginx, started by the same command its container runs, for the front's and the door's tests."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

NGINX = os.environ.get("TPU_VLLM_NGINX") or shutil.which("nginx") or (
    "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
SKIP_REASON = "run through ./scripts/test.sh, which installs nginx"
START_SECONDS = 20


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def workdir(prefix: str) -> Path:
    """Outside pytest's 0700 tmp tree: nginx's workers drop to an unprivileged user and must traverse it."""
    base = Path(tempfile.mkdtemp(prefix=prefix))
    base.chmod(0o755)
    return base


class RunningNginx:
    """`argv` (a container's command, which ends by exec-ing `nginx`) with the real nginx first on PATH."""

    def __init__(self, argv: list[str], port: int, base: Path):
        bin_dir = base / "bin"
        bin_dir.mkdir(exist_ok=True)
        (bin_dir / "nginx").symlink_to(NGINX)
        env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
        self.port = port
        self.process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Drained as nginx writes: a full pipe would block its worker (the access log goes to stdout).
        self._out: list[str] = []
        self._err: list[str] = []
        self._drains = [threading.Thread(target=self._drain, args=(stream, sink), daemon=True)
                        for stream, sink in ((self.process.stdout, self._out), (self.process.stderr, self._err))]
        for drain in self._drains:
            drain.start()
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.process.kill()
                    self._join()
                    raise RuntimeError(f"nginx did not start: {''.join(self._err)}") from None
                time.sleep(0.05)

    @staticmethod
    def _drain(stream, sink: list[str]) -> None:
        for line in stream:
            sink.append(line)

    def _join(self) -> None:
        self.process.wait(timeout=10)
        for drain in self._drains:
            drain.join(timeout=10)

    def access_log(self) -> str:
        """What nginx has written to stdout (its access log) so far."""
        return "".join(self._out)

    def error_log(self) -> str:
        return "".join(self._err)

    def stop(self) -> str:
        """Stops nginx; returns what it wrote to stderr."""
        self.process.terminate()
        self._join()
        return self.error_log()


def raw_request(port: int, request: bytes) -> tuple[int, bytes]:
    """Exactly these bytes on the wire: no client library normalises the path first."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        try:
            while chunk := sock.recv(65536):
                data += chunk
        except ConnectionResetError:
            # nginx may reset a connection whose unread body it refused (413), after its answer.
            if not data:
                raise
    return int(data.split(b"\r\n", 1)[0].split()[1]), data
