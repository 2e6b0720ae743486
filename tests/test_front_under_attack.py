"""The real nginx with the rendered front config, attacked: the key never reaches a log, keyless clients
cannot starve keyed ones, /health takes no body, and what keyed clients need (long prompts, big images,
SSE, WebSockets) still passes.

Every connection is on loopback; the attacker speaks from 127.0.0.2 (Linux routes all of 127/8 to lo), the
keyed client from 127.0.0.1, so per-address limits apply as they would to two hosts.
"""

from __future__ import annotations

import base64
import contextlib
import shutil
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from components.gke import metrics_door
from components.serving import front
from tests.fakes import nginx

KEY = "canaryKEY0123456789abcdefghijklmnopqrstuvwxyzAB"
GOOD = f"Bearer {KEY}"
ATTACKER = "127.0.0.2"
# How long a keyed request may take while the front is under attack. Generous: it fails only when the
# request is never served while the attack connections are held open (nginx's default header timeout,
# which held them before, is 60 s).
KEYED_WAIT_SECONDS = 8
# Stalled connections held from one address: more than the 1,024 one worker accepted before.
IDLE_CONNECTIONS = 1100
TRICKLING_CONNECTIONS = 60
CONCURRENT_KEYED = 64
pytestmark = pytest.mark.skipif(nginx.NGINX is None, reason=nginx.SKIP_REASON)


class Upstream(BaseHTTPRequestHandler):
    """A fake vLLM: reports the body size it received, holds /v1/concurrent until 64 are in flight at once,
    and answers a WebSocket upgrade on /v1/realtime (as vLLM's realtime router does) by echoing one line."""

    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, str, int]] = []
    barrier = threading.Barrier(CONCURRENT_KEYED, timeout=30)

    def log_message(self, *args):  # quiet
        pass

    def _reply(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":  # as HTTP says: a body here would be read as the next response
            self.wfile.write(body)

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        Upstream.seen.append((self.command, self.path, len(body)))
        if self.path == "/v1/realtime":
            if (self.headers.get("Upgrade", "").lower() != "websocket"
                    or "upgrade" not in self.headers.get("Connection", "").lower()):
                return self._reply(400, b'{"error":"expected a websocket upgrade"}')
            self.send_response(101)
            self.send_header("Upgrade", "websocket")
            self.send_header("Connection", "Upgrade")
            self.send_header("Sec-WebSocket-Accept", "fake")
            self.end_headers()
            self.wfile.flush()
            line = self.rfile.readline()
            self.wfile.write(b"echo " + line)
            self.wfile.flush()
            self.close_connection = True
            return
        if self.path == "/v1/concurrent":
            try:
                Upstream.barrier.wait()
            except threading.BrokenBarrierError:
                return self._reply(504, b'{"error":"fewer than 64 requests arrived together"}')
        self._reply(200, b'{"bytes":%d}' % len(body))

    do_GET = do_POST = do_PUT = do_DELETE = do_OPTIONS = do_HEAD = _handle


class UpstreamServer(ThreadingHTTPServer):
    # A backlog for 64 connections at once (socketserver's default is 5: the rest would wait on SYN retries).
    request_queue_size = 256
    daemon_threads = True


def _start_front(upstream_port: int):
    base = nginx.workdir("tpu-vllm-attack-")
    layout = front.FrontLayout(config_path=str(base / "nginx.conf"), key_file=str(base / "secrets" / "api-key"),
                               run_dir=str(base / "run"))
    (base / "secrets").mkdir(mode=0o700)
    Path(layout.key_file).write_text(KEY + "\n")
    running = nginx.start_on_a_free_port(front.entry_command(layout), base, lambda port: Path(layout.config_path)
                                         .write_text(front.nginx_config(listen_port=port, upstream_port=upstream_port,
                                                                        layout=layout)))
    return running, base


@pytest.fixture(scope="module")
def proxy():
    upstream = UpstreamServer(("127.0.0.1", 0), Upstream)
    nginx.serve_upstream(upstream)
    running, base = _start_front(upstream.server_port)
    yield running
    running.stop()
    upstream.shutdown()
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def http():
    with nginx.http_client() as client:
        yield client


@pytest.fixture
def dead_upstream_proxy():
    """A front whose vLLM is not listening (a booting node): every proxied request fails with 502."""
    running, base = _start_front(nginx.free_port())
    yield running
    running.stop()
    shutil.rmtree(base, ignore_errors=True)


def _connect(port: int, source: str = ATTACKER, timeout: float = 10) -> socket.socket:
    sock = socket.socket()
    sock.settimeout(timeout)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    return sock


def _hold(port: int) -> socket.socket:
    """A keyless connection that has started its request and never finishes the header. (One that sends
    nothing at all nginx closes by itself when it runs short of connections; this one it cannot.)"""
    sock = _connect(port)
    sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n")
    return sock


def _read_status(sock: socket.socket) -> int:
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return int(data.split(b"\r\n", 1)[0].split()[1])


def _read_to_eof(sock: socket.socket) -> bytes:
    """Everything until the front closes the connection (a reset counts: it closed it too)."""
    data = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            data += chunk
    return data


# ---- 1. the key reaches no log line ----

WRONG_WAYS = [
    b"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Basic " + base64.b64encode(KEY.encode() + b":") + b"\r\n",
    b"GET /v1/models?api_key=" + KEY.encode() + b" HTTP/1.1\r\nHost: x\r\n",
    b"GET /health?api_key=" + KEY.encode() + b" HTTP/1.1\r\nHost: x\r\n",
    b"GET /v1/models HTTP/1.1\r\nHost: x\r\nReferer: https://app.example/?key=" + KEY.encode() + b"\r\n",
    b"GET /health HTTP/1.1\r\nHost: x\r\nReferer: https://app.example/?key=" + KEY.encode() + b"\r\n",
    b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Api-Key: " + KEY.encode() + b"\r\n",
    b"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer  " + KEY.encode() + b"\r\n",
    b"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: " + KEY.encode() + b"\r\n",
    b"GET /v1/models HTTP/1.1\r\nHost: x\r\nUser-Agent: " + KEY.encode() + b"\r\n",
    # The right header and the key in the query as well: passes, and the query is still not logged.
    b"GET /v1/models?api_key=" + KEY.encode() + b" HTTP/1.1\r\nHost: x\r\nAuthorization: " + GOOD.encode() + b"\r\n",
]


def test_a_key_sent_the_wrong_way_reaches_no_access_or_error_log_line(proxy, dead_upstream_proxy):
    for running in (proxy, dead_upstream_proxy):
        for request in WRONG_WAYS:
            status, _ = nginx.raw_request(running.port, request + b"Connection: close\r\n\r\n")
            assert status in (200, 401, 502)
        # An error nginx logs at `error` level with the request line: a body over the limit, key in the query.
        # (Its answer read, the client hangs up: nginx would wait for the announced body before closing.)
        status, _ = nginx.raw_request(running.port, b"POST /v1/chat/completions?api_key=" + KEY.encode()
                                      + b" HTTP/1.1\r\nHost: x\r\nAuthorization: " + GOOD.encode()
                                      + b"\r\nContent-Length: 999999999\r\nConnection: close\r\n\r\n",
                                      until_close=False)
        assert status == 413
    for running in (proxy, dead_upstream_proxy):
        # The last request's line is there, so every earlier one is too.
        access, errors = running.wait_for_access_line('"POST /v1/chat/completions" 413'), running.error_log()
        assert KEY not in access and KEY not in errors
        assert base64.b64encode(KEY.encode() + b":").decode() not in access + errors
    # The log still says what happened: method, path without the query, status, upstream status.
    assert '"GET /v1/models" 401' in proxy.access_log()
    assert '"GET /health" 200' in proxy.access_log()
    assert '"GET /health" 502' in dead_upstream_proxy.access_log()
    assert '"POST /v1/chat/completions" 413' in dead_upstream_proxy.access_log()


def test_the_metrics_door_logs_the_same_credential_free_format(tmp_path):
    config = metrics_door.nginx_config(listen_port=9090, upstream_port=8001)
    assert f"access_log /dev/stdout {front.LOG_FORMAT_NAME};" in config
    assert f"log_format {front.LOG_FORMAT_NAME} " in config
    assert f"error_log stderr {front.ERROR_LOG_LEVEL};" in config
    for leaky in ("$request ", "$request\"", "$request_uri", "$args", "$query_string", "$http_", "$remote_user"):
        assert leaky not in front.LOG_FORMAT
    # The door's nginx, its vLLM down: a scrape with a key in the query fails (502) and leaves no trace of it.
    base = nginx.workdir("tpu-vllm-door-")
    dead_upstream = nginx.free_port()
    running = nginx.start_on_a_free_port(
        metrics_door.command(str(tmp_path / "metrics.conf"), str(tmp_path / "run")), base,
        lambda port: (tmp_path / "metrics.conf").write_text(metrics_door.nginx_config(
            listen_port=port, upstream_port=dead_upstream, run_dir=str(tmp_path / "run"))))
    port = running.port
    try:
        status, _ = nginx.raw_request(port, b"GET /metrics?token=" + KEY.encode() + b" HTTP/1.1\r\nHost: x\r\n"
                                      b"Referer: " + KEY.encode() + b"\r\nConnection: close\r\n\r\n")
        assert status == 502
    finally:
        errors = running.stop()
        shutil.rmtree(base, ignore_errors=True)
    assert KEY not in running.access_log() + errors
    assert '"GET /metrics" 502' in running.access_log()


# ---- 2. keyless clients cannot lock keyed clients out ----

def test_a_keyed_client_is_served_while_a_thousand_keyless_connections_idle_or_trickle(proxy, http):
    held: list[socket.socket] = []
    try:
        for _ in range(IDLE_CONNECTIONS):
            held.append(_hold(proxy.port))
        for index in range(TRICKLING_CONNECTIONS):
            sock = _connect(proxy.port)
            path = b"/health" if index % 2 else b"/v1/chat/completions"
            sock.sendall(b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{")
            held.append(sock)
        # Queued behind every attack connection (accept is first come, first served).
        response = http.get(f"http://127.0.0.1:{proxy.port}/v1/models", headers={"Authorization": GOOD},
                             timeout=KEYED_WAIT_SECONDS)
        assert response.status_code == 200
    finally:
        for sock in held:
            sock.close()


def test_a_keyless_body_trickled_one_byte_at_a_time_is_answered_and_cut_off(proxy):
    def trickle(path: bytes) -> int:
        with _connect(proxy.port, timeout=30) as sock:
            sock.sendall(b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{")
            status = _read_status(sock)
            # The front stops waiting for the rest of the body on its own: the read ends in EOF, not in
            # this socket's 30 s timeout (the old front kept such a connection for 200 s and more).
            _read_to_eof(sock)
            return status

    # The three paths side by side (each waits out the front's lingering close): a timeout in any one fails.
    paths = (b"/health", b"/v1/chat/completions", b"/invocations")
    with ThreadPoolExecutor(len(paths)) as pool:
        statuses = list(pool.map(trickle, paths))
    assert all(status in (401, 405) for status in statuses), statuses


@pytest.mark.parametrize("request_head", [
    b"POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
    b"PUT /health HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
    b"DELETE /health HTTP/1.1\r\nHost: x\r\n\r\n",
    b"OPTIONS /health HTTP/1.1\r\nHost: x\r\n\r\n",
    b"PATCH /health HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
    b"GET /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    b"POST //health HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
])
def test_health_takes_get_or_head_without_a_body_and_nothing_else_reaches_vllm(proxy, request_head):
    Upstream.seen.clear()
    with _connect(proxy.port) as sock:
        sock.sendall(request_head)
        status = _read_status(sock)
    assert status in (400, 405)
    assert Upstream.seen == []


@pytest.mark.parametrize("method", [b"GET", b"HEAD"])
def test_health_still_answers_get_and_head(proxy, method):
    Upstream.seen.clear()
    with _connect(proxy.port) as sock:
        sock.sendall(method + b" /health HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        assert _read_status(sock) == 200
    assert Upstream.seen == [(method.decode(), "/health", 0)]


@pytest.mark.parametrize("path", ["/health", "/v1/models"])
def test_a_keyless_client_gets_no_connection_to_keep(proxy, path):
    # HTTP/1.1 keeps a connection by default; the front closes it after the answer instead.
    with _connect(proxy.port, timeout=30) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        data = _read_to_eof(sock)
    assert b"\r\nConnection: close\r\n" in data


def test_a_keyed_client_keeps_its_connection(proxy):
    with _connect(proxy.port, source="127.0.0.1") as sock:
        for _ in range(3):
            sock.sendall(f"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: {GOOD}\r\n\r\n".encode())
            data = b""
            while not data.endswith(b'{"bytes":0}'):
                data += sock.recv(65536)
            assert data.startswith(b"HTTP/1.1 200") and b"Connection: close" not in data


def test_sixty_four_keyed_clients_on_one_address_are_in_flight_together_under_attack(proxy, http):
    # The upstream answers none until all 64 are inside it at once: a per-client limit below 64 fails this.
    Upstream.barrier.reset()
    held = [_hold(proxy.port) for _ in range(200)]
    results: list[int] = []

    def one() -> None:
        results.append(http.post(f"http://127.0.0.1:{proxy.port}/v1/concurrent", json={},
                                  headers={"Authorization": GOOD}, timeout=60).status_code)

    try:
        threads = [threading.Thread(target=one) for _ in range(CONCURRENT_KEYED)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for sock in held:
            sock.close()
    assert results == [200] * CONCURRENT_KEYED


def test_a_long_prompt_and_a_five_mib_image_still_pass_with_the_key(proxy, http):
    prompt = "word " * 26_000  # ~26k tokens of text
    image = base64.b64encode(b"\x89PNG" + b"\0" * (5 * 1024 * 1024)).decode()
    for body in ({"messages": [{"role": "user", "content": prompt}]},
                 {"messages": [{"role": "user", "content": [
                     {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image}"}}]}]}):
        content = httpx.Request("POST", "http://x", json=body).read()
        response = http.post(f"http://127.0.0.1:{proxy.port}/v1/chat/completions", content=content,
                              headers={"Authorization": GOOD, "Content-Type": "application/json"}, timeout=60)
        assert response.status_code == 200 and response.json() == {"bytes": len(content)}


# ---- WebSockets: vLLM's /v1/realtime (vllm/entrypoints/openai/realtime/api_router.py) ----

UPGRADE = (b"GET /v1/realtime HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n")


def test_a_keyed_websocket_upgrade_reaches_vllm_and_carries_data_both_ways(proxy):
    with _connect(proxy.port, source="127.0.0.1") as sock:
        sock.sendall(UPGRADE + b"Authorization: " + GOOD.encode() + b"\r\n\r\n")
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(4096)
        assert head.startswith(b"HTTP/1.1 101")
        rest = head.split(b"\r\n\r\n", 1)[1]
        sock.sendall(b"ping\n")
        with contextlib.suppress(TimeoutError):
            while not rest.endswith(b"\n"):
                rest += sock.recv(4096)
    assert rest == b"echo ping\n"


@pytest.mark.parametrize("authorization", [b"", b"Authorization: Bearer wrong\r\n",
                                           b"Authorization: Basic " + base64.b64encode(KEY.encode()) + b"\r\n"])
def test_a_websocket_upgrade_without_the_key_is_refused(proxy, authorization):
    Upstream.seen.clear()
    status, _ = nginx.raw_request(proxy.port, UPGRADE + authorization + b"\r\n")
    assert status == 401 and Upstream.seen == []
