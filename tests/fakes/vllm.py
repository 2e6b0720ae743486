"""A fake OpenAI-compatible vLLM server: health sequence, API key, chat and tool calls."""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.fakes.http import FakeServer, Request, Response


class FakeVllm(FakeServer):
    def __init__(self, api_key: str | None, model: str, unhealthy_first: int = 0, tool_calls_work: bool = True,
                 port: int = 0, ready_when: Callable[[], bool] | None = None, reply_field: str = "content"):
        super().__init__(port)
        self.api_key = api_key
        """None: a server started without a key, which answers everyone."""
        self.model = model
        self.unhealthy_first = unhealthy_first
        self.tool_calls_work = tool_calls_work
        self.ready_when = ready_when
        """/health answers 503 until this says yes (then unhealthy_first counts down)."""
        self.reply_field = reply_field
        """Where a chat reply's text goes: content, or (a reasoning model that has not answered yet) reasoning
        (current vLLM) or reasoning_content (older vLLM)."""

    def handle(self, request: Request) -> Response:
        if request.path == "/health":
            if self.ready_when is not None and not self.ready_when():
                return Response(503, raw=b"")
            if self.unhealthy_first > 0:
                self.unhealthy_first -= 1
                return Response(503, raw=b"")
            return Response(200, raw=b"")
        if self.api_key is not None and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return Response(401, {"error": "Unauthorized"})
        if request.path == "/v1/models":
            return Response(200, {"object": "list", "data": [{"id": self.model, "object": "model"}]})
        if request.path in ("/v1/chat/completions", "/invocations"):
            body = request.json()
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
        return Response(404, {"error": "not found"})
