"""The real nginx with the rendered front config, in front of a fake vLLM on 127.0.0.1.

The front's own entry script runs too (under /bin/sh), so the path from the key file to nginx's
`map` is the one that runs in the container.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from components.serving import front
from tests.fakes import nginx

CANARY_KEY = "canaryKEY0123456789abcdefghijklmnopqrstuvwxyzAB"  # the stack's shape: 48 alphanumerics
pytestmark = pytest.mark.skipif(nginx.NGINX is None, reason=nginx.SKIP_REASON)


class FakeVllm(BaseHTTPRequestHandler):
    """Records what reached it; streams two SSE events with a gate between them."""

    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, str, str | None]] = []
    gate = threading.Event()
    gate_timed_out = False

    def log_message(self, *args):  # quiet
        pass

    def _reply(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        FakeVllm.seen.append((self.command, self.path, self.headers.get("Authorization")))
        if self.path == "/v1/chat/completions" and b'"stream": true' in body:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for event in (b'data: {"n":1}\n\n', None, b'data: {"n":2}\n\ndata: [DONE]\n\n'):
                if event is None:
                    # The second event waits until the client has seen the first through the proxy; a buffering
                    # proxy holds the first back, so the gate only opens by timing out (and the test fails).
                    FakeVllm.gate_timed_out = not FakeVllm.gate.wait(GATE_SECONDS)
                    continue
                self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            return
        self._reply(200, b'{"ok":true}')

    do_GET = do_POST = do_PUT = do_DELETE = do_OPTIONS = _handle


@pytest.fixture(scope="module")
def proxy():
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), FakeVllm)
    nginx.serve_upstream(upstream)
    base = nginx.workdir("tpu-vllm-front-")
    layout = front.FrontLayout(config_path=str(base / "nginx.conf"), key_file=str(base / "secrets" / "api-key"),
                               run_dir=str(base / "run"))
    (base / "secrets").mkdir(mode=0o700)
    Path(layout.key_file).write_text(CANARY_KEY + "\n")
    Path(layout.key_file).chmod(0o600)
    running = nginx.start_on_a_free_port(front.entry_command(layout), base, lambda port: Path(layout.config_path)
                                         .write_text(front.nginx_config(listen_port=port,
                                                                        upstream_port=upstream.server_port,
                                                                        layout=layout)))
    port = running.port
    with nginx.http_client() as http:
        yield {"url": f"http://127.0.0.1:{port}", "port": port, "layout": layout, "http": http}
    stderr = running.stop()
    upstream.shutdown()
    shutil.rmtree(base, ignore_errors=True)
    assert CANARY_KEY not in stderr


raw_request = nginx.raw_request


GOOD = f"Bearer {CANARY_KEY}"
# Long enough that only a proxy holding the stream back reaches it.
GATE_SECONDS = 30
GUARDED_PATHS = ["/invocations", "/tokenize", "/detokenize", "/metrics", "/openapi.json", "/docs", "/pooling",
                 "/classify", "/score", "/rerank", "/pause", "/resume", "/update_weights", "/v1/models",
                 "/v1/chat/completions", "/v1/completions", "/v2/rerank", "/inference/v1/generate", "/",
                 "/health/", "/HEALTH", "/healthz"]


@pytest.mark.parametrize("path", GUARDED_PATHS)
@pytest.mark.parametrize("authorization", [None, "", "Bearer wrong", f"bearer {CANARY_KEY}",
                                           f"Bearer {CANARY_KEY}x", f"Bearer {CANARY_KEY[:-1]}",
                                           f"Basic {CANARY_KEY}", CANARY_KEY, f"Bearer  {CANARY_KEY}"])
def test_every_path_but_health_is_refused_without_the_exact_key(proxy, path, authorization):
    FakeVllm.seen.clear()
    headers = {} if authorization is None else {"Authorization": authorization}
    response = proxy["http"].post(proxy["url"] + path, headers=headers, json={"messages": []}, timeout=10)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    # Its own body (FakeFront in tests/fakes/vllm.py answers with the same constant).
    assert response.text == front.UNAUTHORIZED_BODY and response.headers["content-type"] == "application/json"
    assert FakeVllm.seen == []  # nothing reached vLLM


@pytest.mark.parametrize("request_line", [
    b"POST /health/../invocations HTTP/1.1",
    b"POST /health/%2e%2e/invocations HTTP/1.1",
    b"POST //invocations HTTP/1.1",
    b"POST /%69nvocations HTTP/1.1",
    b"POST /invocations?api_key=" + CANARY_KEY.encode() + b" HTTP/1.1",
    b"POST /v1/chat/completions HTTP/1.0",
])
def test_spellings_of_a_guarded_path_are_refused(proxy, request_line):
    FakeVllm.seen.clear()
    status, _ = raw_request(proxy["port"], request_line + b"\r\nHost: x\r\nContent-Length: 2\r\n"
                                                          b"Connection: close\r\n\r\n{}")
    assert status == 401 and FakeVllm.seen == []


@pytest.mark.parametrize("request_line", [b"GET /health HTTP/1.1", b"GET /%68ealth HTTP/1.1",
                                          b"GET //health HTTP/1.1", b"GET /v1/../health HTTP/1.1"])
def test_health_is_open_and_reaches_vllm_as_health_only(proxy, request_line):
    FakeVllm.seen.clear()
    status, _ = raw_request(proxy["port"], request_line + b"\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert status == 200
    assert FakeVllm.seen == [("GET", "/health", None)]


@pytest.mark.parametrize("path", ["/invocations", "/tokenize", "/metrics", "/v1/chat/completions"])
def test_the_key_lets_a_request_through_unchanged(proxy, path):
    FakeVllm.seen.clear()
    response = proxy["http"].post(proxy["url"] + path, headers={"Authorization": GOOD}, json={}, timeout=10)
    assert response.status_code == 200 and response.json() == {"ok": True}
    # vLLM's own --api-key check on /v1 still sees the header.
    assert FakeVllm.seen == [("POST", path, GOOD)]


def test_a_stream_passes_event_by_event(proxy):
    FakeVllm.gate.clear()
    FakeVllm.gate_timed_out = False
    with proxy["http"].stream("POST", proxy["url"] + "/v1/chat/completions", headers={"Authorization": GOOD},
                      content=b'{"stream": true}', timeout=GATE_SECONDS * 2) as response:
        assert response.status_code == 200
        lines = response.iter_lines()
        # A buffering proxy would hold the first event until the upstream finished: this read would hang
        # until the gate's timeout, and the upstream never finishes before the gate opens.
        assert next(line for line in lines if line) == 'data: {"n":1}'
        assert not FakeVllm.gate_timed_out, "the first event arrived only after the upstream gave up waiting"
        FakeVllm.gate.set()
        rest = [line for line in lines if line]
    assert rest == ['data: {"n":2}', "data: [DONE]"]


def test_the_rendered_config_and_command_carry_no_key(proxy):
    layout = proxy["layout"]
    assert CANARY_KEY not in Path(layout.config_path).read_text()
    assert CANARY_KEY not in " ".join(front.entry_command(layout))
    key_map = Path(layout.key_map)
    assert key_map.read_text() == f'"~^Bearer {CANARY_KEY}$" 1;\n'
    assert key_map.stat().st_mode & 0o077 == 0  # written under umask 077


def test_nginx_accepts_the_config_as_rendered_for_the_container(tmp_path):
    # The container's own paths (not the test's): nginx -t parses and checks it.
    config = front.nginx_config(listen_port=nginx.free_port(), upstream_port=8001,
                                layout=front.FrontLayout(run_dir=str(tmp_path)))
    (tmp_path / "api-key.map").write_text('"~^Bearer k$" 1;\n')
    (tmp_path / "nginx.conf").write_text(config)
    checked = subprocess.run([nginx.NGINX, "-t", "-e", "stderr", "-c", str(tmp_path / "nginx.conf")],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


@pytest.mark.parametrize("bad_key", ["", "\n", 'abc" 1; default 1; "', "key with space", "k\ney", "a.*", "a|b",
                                     "$x", "a\\"])
def test_the_entry_script_refuses_a_key_that_could_break_the_map(tmp_path, bad_key):
    layout = front.FrontLayout(config_path=str(tmp_path / "nginx.conf"), key_file=str(tmp_path / "key"),
                               run_dir=str(tmp_path / "run"))
    Path(layout.key_file).write_text(bad_key)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nginx").write_text("#!/bin/sh\necho nginx-started\n")
    (bin_dir / "nginx").chmod(0o755)
    completed = subprocess.run(front.entry_command(layout), capture_output=True, text=True,
                               env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert completed.returncode == 1
    assert "nginx-started" not in completed.stdout
    assert "API key file" in completed.stderr
    assert not Path(layout.key_map).exists()


def test_the_config_turns_off_what_can_hold_a_stream_back():
    # nginx 1.22 passes a small stream through even with buffering on (the live test above sees no
    # difference), so the setting itself is what guards long SSE streams on other builds and loads.
    config = front.nginx_config(listen_port=8000, upstream_port=8001)
    guarded = config.split("location / {", 1)[1]
    for directive in ("proxy_buffering off;", "proxy_request_buffering off;", "proxy_cache off;",
                      "proxy_http_version 1.1;", f"proxy_read_timeout {front.STREAM_TIMEOUT_SECONDS}s;"):
        assert directive in guarded, directive
    assert "gzip on" not in config  # compressing text/event-stream would batch the events
