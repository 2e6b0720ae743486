"""Fakes of vLLM's OpenAI-compatible server and of the front (nginx) before it, as the deploy's checks see them.

FakeVllm answers as vLLM 0.33.0 does (the wheel in .venv-vllm, the version requirements-vllm.txt pins):
- until the engine is up nothing answers HTTP: `setup_server` binds the port before the engine starts and uvicorn
  listens only once it is built (vllm/entrypoints/launchers/launcher.py setup_server, launchers/api_server/entry.py
  run_server_worker), so a client sees no HTTP answer (curl's %{http_code} 000). Modelled as a connection closed
  without a reply, so a test can still count the polls;
- /health: 200 with an empty body (entrypoints/serve/instrumentator/health.py; 503 only for a dead engine);
- the API key guards only the paths under GUARDED_PREFIX, and its refusal is 401 {"error": "Unauthorized"}
  (entrypoints/serve/middleware/authenticate.py); /invocations, /metrics, /ping answer without it;
- an unknown path: FastAPI's 404 {"detail": "Not Found"} (fastapi 0.136.3's default handler: vLLM's own
  HTTPException handler, serve/exception_handling/register.py, is not reached by the router's 404, as running
  vLLM 0.33.0's init_exception_handler on a bare app shows).

FakeFront answers as components/serving/front.py's nginx does: /health passes through, every other path needs
`Authorization: Bearer <key>` and is refused with the front's own 401 body.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from components.serving import front
from tests.fakes.http import FakeServer, Request, Response

# authenticate.py GUARDED_PREFIX (a plain startswith, so /v1x is guarded too).
GUARDED_PREFIX = ("/v1", "/v2", "/inference", "/cohere")


class FakeVllm(FakeServer):
    def __init__(self, api_key: str | None, model: str, loading_polls: int = 0, tool_calls_work: bool = True,
                 port: int = 0, ready_when: Callable[[], bool] | None = None, reply_field: str = "content",
                 thinking_tokens: int = 0):
        super().__init__(port)
        self.api_key = api_key
        """None: a server started without a key, which answers everyone."""
        self.model = model
        self.loading_polls = loading_polls
        """How many requests get no HTTP answer first (the engine still loading)."""
        self.tool_calls_work = tool_calls_work
        self.ready_when = ready_when
        """No HTTP answer until this says yes (then loading_polls counts down)."""
        self.reply_field = reply_field
        """Where a chat reply's text goes: content, or (a reasoning model that has not answered yet) reasoning
        (current vLLM) or reasoning_content (older vLLM)."""
        self.thinking_tokens = thinking_tokens
        """A reasoning model: how many tokens it thinks before a tool call. A request whose max_tokens runs out
        first gets vLLM 0.33.0's cut-off reply: finish_reason "length", the thinking in `reasoning`, and
        `tool_calls` [] (chat_completion/protocol.py ChatMessage: tool_calls defaults to an empty list)."""
        self.unanswered = 0
        """How many requests got no HTTP answer (loading)."""

    def loading(self) -> bool:
        if self.ready_when is not None and not self.ready_when():
            self.unanswered += 1
            return True
        if self.loading_polls > 0:
            self.loading_polls -= 1
            self.unanswered += 1
            return True
        return False

    def keyed(self, request: Request) -> bool:
        # authenticate.py verify_token: the scheme is matched without case, the token exactly.
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        return scheme.lower() == "bearer" and token == self.api_key

    def handle(self, request: Request) -> Response | None:
        if self.loading():
            return None
        if request.path == "/health":
            return Response(200, raw=b"")
        if self.api_key is not None and request.path.startswith(GUARDED_PREFIX) and not self.keyed(request):
            return Response(401, {"error": "Unauthorized"})
        return self.route(request)

    def route(self, request: Request) -> Response:
        if request.path == "/v1/models":
            return Response(200, {"object": "list", "data": [{"id": self.model, "object": "model"}]})
        if request.path in ("/v1/chat/completions", "/invocations"):
            body = request.json()
            if body.get("tools") and self.thinking_tokens >= body.get("max_tokens", 16):
                message = {"role": "assistant", "content": None, "tool_calls": [],
                           "reasoning": "Okay, the user wants the weather in Paris."}
                return Response(200, {"id": "chatcmpl-1", "model": self.model,
                                      "choices": [{"index": 0, "message": message, "finish_reason": "length"}]})
            if body.get("tools") and self.tool_calls_work:
                message = {"role": "assistant", "content": None, "tool_calls": [{
                    "id": "call_1", "type": "function",
                    "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}]}
            else:
                message = {"role": "assistant", "content": None, self.reply_field: "Hi there, lovely to meet you."}
            return Response(200, {"id": "chatcmpl-1", "model": self.model,
                                  "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})
        if request.path == "/v1/completions":
            return Response(200, {"choices": [{"text": ""}]})  # what -it models really return
        return Response(404, {"detail": "Not Found"})


class FakeFront(FakeVllm):
    """The front on the serving port, answering for the vLLM behind it once a request has the key."""

    def handle(self, request: Request) -> Response | None:
        if request.path == "/health":
            return Response(200, raw=b"")
        # front.py: `map $http_authorization` on "~^Bearer <key>$" (exact, case-sensitive), then
        # `return 401` with its own JSON, WWW-Authenticate: Bearer, and the connection closed.
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return Response(401, raw=front.UNAUTHORIZED_BODY.encode(),
                            headers={"Content-Type": "application/json", "WWW-Authenticate": "Bearer",
                                     "Connection": "close"})
        return self.route(request)
