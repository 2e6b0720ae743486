"""A fake of the gateway in front of a pool at zero: llm-d-router v0.10.0's endpoint picker with flow control on,
on 127.0.0.1.

It answers as that release's code does (llm-d/llm-d-router v0.10.0, 71f4f099): a request that finds no ready
endpoint waits (pkg/epp/flowcontrol/README.md: "When the pool has no endpoints the queue acts as a scale-from-zero
waiting room"); one still waiting after the TTL is evicted and answered by translateFlowControlOutcome
(pkg/epp/requestcontrol/admission.go): 503 with `x-llm-d-request-dropped-reason: rejected-no-endpoints` while the
pool is empty, 429 with `rejected-ttl-expired` while it has endpoints. A request past the band's maxRequests is
refused before it is queued (controller/internal/processor.go, the capacity check): while the pool has no endpoint
as RejectedNoEndpoints, 503 `rejected-no-endpoints` ("signal genuine unavailability rather than backpressure"),
otherwise as RejectedCapacity, 429 `rejected-saturated`. The body is the error's own text, `inference error:
<Code> - <Msg>` (pkg/common/error/error.go Error.Error, BuildErrResponse), Msg wrapping the flow controller's
errors (pkg/epp/flowcontrol/types/errors.go ErrRejected, ErrQueueAtCapacity, ErrNoEndpoints, ErrEvicted,
ErrTTLExpired; processor.go and controller/internal/item.go join them "%w: %w"). A held request is sent on,
streamed, once the replica is ready.
"""

from __future__ import annotations

import http.client
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

DROPPED_REASON_HEADER = "x-llm-d-request-dropped-reason"
TTL_AT_ZERO_BODY = ("inference error: ServiceUnavailable - request timed out in queue and no endpoints are available: "
                    "request evicted from queue: request TTL expired")
TTL_BUSY_BODY = ("inference error: ResourceExhausted - request timed out in queue: request evicted from queue: "
                 "request TTL expired")
SATURATED_BODY = "inference error: ResourceExhausted - request rejected pre-queue: queue at capacity"
FULL_AT_ZERO_BODY = ("inference error: ServiceUnavailable - no endpoints available: request rejected pre-queue: "
                     "no endpoints available")
_HOP_BY_HOP = {"connection", "transfer-encoding", "content-length", "keep-alive"}


class FlowControlFake:
    """replica_url: the pool's one replica (a fake vLLM); ready_after: seconds from start() until it is ready
    (None: never); ttl_seconds: defaultRequestTTL; max_requests: the default band's bound."""

    def __init__(self, replica_url: str, *, ttl_seconds: float, ready_after: float | None,
                 max_requests: int = 1024):
        self.replica = urlsplit(replica_url)
        self.ttl_seconds, self.ready_after, self.max_requests = ttl_seconds, ready_after, max_requests
        self.ready = threading.Event()
        self.held = 0
        self.held_most = 0
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # one request per connection: the body ends when the connection does

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                fake.handle(self)

            do_GET = do_POST  # noqa: N815

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def start(self) -> FlowControlFake:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        if self.ready_after is not None:
            threading.Timer(self.ready_after, self.ready.set).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        body = request.rfile.read(int(request.headers.get("Content-Length") or 0))
        with self._lock:
            if self.held >= self.max_requests:
                if not self.ready.is_set():  # the pool has no endpoint: unavailability, not backpressure
                    return self._drop(request, 503, FULL_AT_ZERO_BODY, "rejected-no-endpoints")
                return self._drop(request, 429, SATURATED_BODY, "rejected-saturated")
            self.held += 1
            self.held_most = max(self.held_most, self.held)
        try:
            served = self.ready.wait(self.ttl_seconds)
        finally:
            with self._lock:
                self.held -= 1
        if not served:
            return self._drop(request, 503, TTL_AT_ZERO_BODY, "rejected-no-endpoints")
        self._forward(request, body)

    @staticmethod
    def _drop(request: BaseHTTPRequestHandler, status: int, text: str, reason: str) -> None:
        payload = text.encode()
        request.send_response(status)
        request.send_header(DROPPED_REASON_HEADER, reason)
        request.send_header("Content-Length", str(len(payload)))
        request.end_headers()
        request.wfile.write(payload)

    def _forward(self, request: BaseHTTPRequestHandler, body: bytes) -> None:
        upstream = http.client.HTTPConnection(self.replica.hostname, self.replica.port, timeout=30)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP | {"host"}}
        upstream.request(request.command, request.path, body=body, headers=headers)
        answer = upstream.getresponse()
        request.send_response(answer.status)
        for key, value in answer.getheaders():
            if key.lower() not in _HOP_BY_HOP:
                request.send_header(key, value)
        request.end_headers()
        while chunk := answer.read1(65536):
            request.wfile.write(chunk)
            request.wfile.flush()
        upstream.close()


def wait_until(predicate, seconds: float = 10.0) -> bool:
    """Poll for a condition the test then asserts (no assertion rests on the time it took)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()
