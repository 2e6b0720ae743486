"""The pod's metrics door with the real nginx, in front of a fake vLLM on 127.0.0.1: GET /metrics passes,
nothing else does (the API stays behind the front's key)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from components.gke import metrics_door

NGINX = os.environ.get("TPU_VLLM_NGINX") or shutil.which("nginx") or ("/usr/sbin/nginx"
                                                                      if Path("/usr/sbin/nginx").exists() else None)
pytestmark = pytest.mark.skipif(NGINX is None, reason="run through ./scripts/test.sh, which installs nginx")
METRICS_BODY = b"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"m\"} 3.0\n"


class FakeVllm(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, str]] = []

    def log_message(self, *args):  # quiet
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        FakeVllm.seen.append((self.command, self.path))
        body = METRICS_BODY if self.path == "/metrics" else b'{"ok":true}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = _handle


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def door():
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), FakeVllm)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    base = Path(tempfile.mkdtemp(prefix="tpu-vllm-metrics-"))
    base.chmod(0o755)  # nginx's workers drop privileges and must traverse it
    port = _free_port()
    config = base / metrics_door.CONFIG_KEY
    run_dir = str(base / "run")
    config.write_text(metrics_door.nginx_config(listen_port=port, upstream_port=upstream.server_port,
                                                run_dir=run_dir))
    bin_dir = base / "bin"
    bin_dir.mkdir()
    (bin_dir / "nginx").symlink_to(NGINX)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    process = subprocess.Popen(metrics_door.command(str(config), run_dir), env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"nginx did not start: {process.communicate()[1]}")
            time.sleep(0.05)
    yield port
    process.terminate()
    process.communicate(timeout=10)
    upstream.shutdown()
    shutil.rmtree(base, ignore_errors=True)


def request(port: int, raw: bytes) -> tuple[int, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(raw)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return int(data.split(b"\r\n", 1)[0].split()[1]), data


def test_get_metrics_reaches_vllm_and_returns_the_queue_gauge(door):
    FakeVllm.seen.clear()
    status, data = request(door, b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert status == 200 and data.endswith(METRICS_BODY)
    assert FakeVllm.seen == [("GET", "/metrics")]


@pytest.mark.parametrize("request_line", [
    b"GET /v1/chat/completions HTTP/1.1", b"POST /v1/chat/completions HTTP/1.1", b"GET /invocations HTTP/1.1",
    b"POST /invocations HTTP/1.1", b"GET /metrics/ HTTP/1.1", b"GET /metricsx HTTP/1.1", b"GET /health HTTP/1.1",
    b"GET / HTTP/1.1", b"GET /tokenize HTTP/1.1", b"GET /%6detrics HTTP/1.1"])
def test_every_other_path_is_not_found_and_never_reaches_vllm(door, request_line):
    FakeVllm.seen.clear()
    status, _ = request(door, request_line + b"\r\nHost: x\r\nConnection: close\r\n\r\n")
    expected = 200 if request_line == b"GET /%6detrics HTTP/1.1" else 404  # nginx decodes %6d to m: /metrics
    assert status == expected
    assert FakeVllm.seen == ([("GET", "/metrics")] if expected == 200 else [])


@pytest.mark.parametrize("method", [b"POST", b"PUT", b"DELETE"])
def test_only_get_reads_the_metrics(door, method):
    FakeVllm.seen.clear()
    status, _ = request(door, method + b" /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
                                       b"Connection: close\r\n\r\n{}")
    assert status == 403 and FakeVllm.seen == []


def test_the_config_as_rendered_for_the_pod_parses(tmp_path):
    config = tmp_path / "metrics.conf"
    config.write_text(metrics_door.nginx_config(upstream_port=8001, run_dir=str(tmp_path)))
    checked = subprocess.run([NGINX, "-t", "-e", "stderr", "-c", str(config)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
