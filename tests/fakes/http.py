"""A threaded loopback HTTP server whose responses come from one `handle` method."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


class Request:
    def __init__(self, method: str, raw_path: str, headers: Any, body: bytes):
        parts = urlsplit(raw_path)
        self.method = method
        self.path = parts.path
        self.query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body or b"{}")


class Response:
    def __init__(self, status: int = 200, body: Any = None, headers: dict[str, str] | None = None,
                 raw: bytes | None = None, hold: threading.Event | None = None):
        self.status = status
        self.headers = headers or {}
        self.hold = hold
        """Sent only once this is set (a server that hangs); other requests are served meanwhile."""
        if raw is not None:
            self.data = raw
        else:
            self.data = json.dumps(body if body is not None else {}).encode()
            self.headers.setdefault("Content-Type", "application/json")


class _ThreadingHTTPServer6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


class LoopbackServer:
    """A threaded HTTP server on 127.0.0.1 (or `host`, in a test's own network namespace), started by `with`
    and stopped at its end."""

    def listen(self, handler: type[BaseHTTPRequestHandler], port: int = 0, host: str = "127.0.0.1") -> None:
        server = _ThreadingHTTPServer6 if ":" in host else ThreadingHTTPServer
        self.httpd = server((host, port), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://{f'[{host}]' if ':' in host else host}:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class FakeServer(LoopbackServer):
    """Subclass and implement handle(request) -> Response."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1") -> None:
        fake = self
        self.requests: list[Request] = []
        self.lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes; without this each reply waits ~40 ms for a delayed ACK.
            disable_nagle_algorithm = True

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                request = Request(self.command, self.path, self.headers, self.rfile.read(length))
                with fake.lock:
                    fake.requests.append(request)
                    response = fake.handle(request)
                if response is None:  # drop the connection, like a reset
                    self.close_connection = True
                    return
                if response.hold is not None:
                    response.hold.wait()
                self.send_response(response.status)
                for key, value in response.headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(response.data)))
                self.end_headers()
                self.wfile.write(response.data)

            do_GET = do_POST = do_DELETE = do_PATCH = _serve  # noqa: N815

            def do_HEAD(self) -> None:  # noqa: N802 - http.server's name
                # As HTTP says: the GET's status and headers, no body.
                request = Request(self.command, self.path, self.headers, b"")
                with fake.lock:
                    fake.requests.append(request)
                    response = fake.handle(request)
                if response is None:
                    self.close_connection = True
                    return
                self.send_response(response.status)
                for key, value in response.headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(response.data)))
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.listen(Handler, port, host)

    def handle(self, request: Request) -> Response | None:
        raise NotImplementedError
