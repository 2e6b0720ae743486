"""The pod's metrics door with the real nginx, in front of a fake vLLM on 127.0.0.1: GET /metrics passes,
nothing else does (the API stays behind the front's key)."""

from __future__ import annotations

import select
import shutil
import socket
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from components.gke import metrics_door
from tests.fakes import nginx

pytestmark = pytest.mark.skipif(nginx.NGINX is None, reason=nginx.SKIP_REASON)
# What vLLM 0.33.0 serves for its queue gauge: v1/metrics/loggers.py declares it with labelnames
# ["model_name", "engine"], and prometheus_client 0.26.0 (its pin) writes HELP, TYPE, then the labels sorted by name.
METRICS_BODY = (b"# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n"
                b"# TYPE vllm:num_requests_waiting gauge\n"
                b'vllm:num_requests_waiting{engine="0",model_name="m"} 3.0\n')
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # prometheus_client exposition.py, no Accept


class FakeVllm(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, str]] = []
    held = threading.Event()
    """While clear, /metrics answers wait for it (scrapes held in flight); set: answered at once."""

    def log_message(self, *args):  # quiet
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        FakeVllm.seen.append((self.command, self.path))
        if self.path == "/metrics":
            FakeVllm.held.wait(30)
        body = METRICS_BODY if self.path == "/metrics" else b'{"ok":true}'
        self.send_response(200)
        self.send_header("Content-Type", METRICS_CONTENT_TYPE if self.path == "/metrics" else "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = _handle


FakeVllm.held.set()


@pytest.fixture(scope="module")
def door():
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), FakeVllm)
    nginx.serve_upstream(upstream)
    base = nginx.workdir("tpu-vllm-metrics-")
    config = base / metrics_door.CONFIG_KEY
    run_dir = str(base / "run")
    running = nginx.start_on_a_free_port(metrics_door.command(str(config), run_dir), base, lambda port: config
                                         .write_text(metrics_door.nginx_config(listen_port=port,
                                                                               upstream_port=upstream.server_port,
                                                                               run_dir=run_dir)))
    yield running.port
    running.stop()
    upstream.shutdown()
    shutil.rmtree(base, ignore_errors=True)


request = nginx.raw_request


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
    checked = subprocess.run([nginx.NGINX, "-t", "-e", "stderr", "-c", str(config)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


# ---- held to the front's standard: a flood from one address does not stop a scrape from another ----
ATTACKER = "127.0.0.2"  # Linux routes all of 127.0.0.0/8 to loopback: a second client address on this machine
IDLE_CONNECTIONS = 1100  # more than the 64 worker connections that starved the door before
SCRAPE_WAIT_SECONDS = 8  # a bound for failure only: nginx's default header timeout held idle connections 60 s
PER_ADDRESS = metrics_door.REQUESTS_PER_CLIENT


def _from_attacker(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(ATTACKER, 0))


def test_a_scrape_is_served_while_another_address_holds_a_thousand_idle_connections(door):
    held: list[socket.socket] = []
    try:
        for index in range(IDLE_CONNECTIONS):
            sock = _from_attacker(door)
            if index % 2:
                sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # a header never finished
            held.append(sock)
        with socket.create_connection(("127.0.0.1", door), timeout=SCRAPE_WAIT_SECONDS) as scrape:
            scrape.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := scrape.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 200") and b"vllm:num_requests_waiting" in answer
    finally:
        for sock in held:
            sock.close()


def test_one_address_gets_only_its_share_of_scrapes_in_flight(door):
    FakeVllm.held.clear()
    sockets = [_from_attacker(door) for _ in range(PER_ADDRESS + 3)]
    try:
        for sock in sockets:
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        # Over the share: answered 429 while the share still waits on vLLM (nothing else can answer yet).
        answered: set[socket.socket] = set()
        while len(answered) < 3:
            readable, _, _ = select.select([s for s in sockets if s not in answered], [], [], SCRAPE_WAIT_SECONDS)
            assert readable, f"only {len(answered)} answered while vLLM held the rest"
            answered.update(readable)
        assert all(sock.recv(64).startswith(b"HTTP/1.1 429") for sock in answered)
        # Another address is not counted against it.
        FakeVllm.held.set()
        status, _ = request(door, b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert status == 200
    finally:
        FakeVllm.held.set()
        for sock in sockets:
            sock.close()
