"""Debian's real nginx, started by the same command its container runs, for the front's and the door's tests."""

from __future__ import annotations

import os
import shutil
import socket
import socketserver
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

NGINX = os.environ.get("TPU_VLLM_NGINX") or shutil.which("nginx") or (
    "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
SKIP_REASON = "run through ./scripts/test.sh, which installs nginx"
START_SECONDS = 20
ADDRESS_IN_USE = "Address already in use"
TCP_LISTEN = "0A"  # /proc/net/tcp state column


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
        if not (bin_dir / "nginx").is_symlink():
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
        while not self._listens_on(port):
            # nginx retries a taken port itself, 5 times 500 ms apart, before it exits (nginx/nginx
            # src/core/ngx_connection.c ngx_open_listening_sockets, release-1.22.1): its first "bind() ...
            # failed" already says this port is lost, so the caller may try another without those 2.5 s.
            if (self.process.poll() is not None or time.monotonic() > deadline
                    or ADDRESS_IN_USE in self.error_log()):
                self.process.kill()
                self._join()
                raise RuntimeError(f"nginx did not start: {''.join(self._err)}") from None
            time.sleep(0.05)

    def _listens_on(self, port: int) -> bool:
        """Ready when a socket listening on the port is nginx's own (a connect alone would also reach another
        process that took the port while nginx keeps failing to bind it)."""
        listening = set()
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                rows = Path(table).read_text().splitlines()[1:]
            except OSError:
                continue
            for row in rows:
                fields = row.split()
                if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == TCP_LISTEN:
                    listening.add(f"socket:[{fields[9]}]")
        if not listening:
            return False
        try:
            own = {os.readlink(fd) for fd in Path(f"/proc/{self.process.pid}/fd").iterdir()}
        except OSError:
            return False
        return bool(listening & own)

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

    def wait_for_access_line(self, text: str) -> str:
        """The access log once it holds `text`: nginx logs a request after it has answered it, so a client
        can read its answer before the line exists (the bound only stops a test that would hang)."""
        deadline = time.monotonic() + START_SECONDS
        while text not in self.access_log():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"nginx never logged {text!r}; it logged:\n{self.access_log()}")
            time.sleep(0.02)
        return self.access_log()

    def error_log(self) -> str:
        return "".join(self._err)

    def stop(self) -> str:
        """Stops nginx; returns what it wrote to stderr."""
        self.process.terminate()
        self._join()
        return self.error_log()


UPSTREAM_POLL_SECONDS = 0.02


def serve_upstream(server: socketserver.BaseServer) -> None:
    """Serves a fake vLLM behind nginx on a daemon thread. Its shutdown() returns within one poll interval
    (socketserver checks for it between polls, 0.5 s apart by default: CPython Lib/socketserver.py, 3.11)."""
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": UPSTREAM_POLL_SECONDS},
                     daemon=True).start()


def http_client() -> httpx.Client:
    """One client for a module's requests, each on a new connection as `httpx.post` makes it (a pool that
    keeps no idle connection), without the ~80 ms of CPU `httpx.post` spends building a new client's SSL
    context every call. It may be shared between threads (encode/httpx httpx/_client.py, 0.28.1: Client)."""
    return httpx.Client(limits=httpx.Limits(max_connections=None, max_keepalive_connections=0))


START_ATTEMPTS = 5


def start_on_a_free_port(argv: list[str], base: Path, write_config: Callable[[int], None]) -> RunningNginx:
    """A free port can be taken by another process between the check and nginx's bind (a shared machine,
    two xdist workers): then the config is written again for another port, a few times."""
    for attempt in range(START_ATTEMPTS):
        port = free_port()
        write_config(port)
        try:
            return RunningNginx(argv, port, base)
        except RuntimeError as error:
            if ADDRESS_IN_USE not in str(error) or attempt == START_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def raw_request(port: int, request: bytes, *, until_close: bool = True) -> tuple[int, bytes]:
    """Exactly these bytes on the wire: no client library normalises the path first.

    until_close=False: read the answer to the end its Content-Length gives, then hang up. For a request whose
    announced body nginx refused unread (413), nginx keeps reading and discarding that body instead of closing,
    until `lingering_timeout` passes without a byte (nginx/nginx src/http/ngx_http_request.c
    ngx_http_finalize_connection, release-1.22.1); it logs the request once the client hangs up."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        try:
            while chunk := sock.recv(65536):
                data += chunk
                if not until_close and _answer_complete(data):
                    break
        except ConnectionResetError:
            # nginx may reset a connection whose unread body it refused (413), after its answer.
            if not data:
                raise
    return int(data.split(b"\r\n", 1)[0].split()[1]), data


def _answer_complete(data: bytes) -> bool:
    """A whole answer with a Content-Length (nginx's own error pages have one)."""
    head, separator, body = data.partition(b"\r\n\r\n")
    if not separator:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    raise AssertionError(f"an answer without a Content-Length: {head!r}")
