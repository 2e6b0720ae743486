"""A streaming OpenAI-compatible server that behaves like vLLM's, with known timings and faults on demand.

What it copies from vLLM's chat stream (vllm/entrypoints/openai/chat_completion/serving.py,
`chat_completion_stream_generator`): one chunk per generated token; a role chunk
(`{"role": "assistant", "content": ""}`) sent in the same step as the first token; chunks serialized by
pydantic's `model_dump_json(exclude_unset=True)` (compact, raw UTF-8: a U+2028 in a token stays U+2028,
never `\\u2028`); `finish_reason` on the last token's chunk; usage in a chunk of its own with `choices: []`
when `stream_options.include_usage` asks for it; `data: [DONE]` last. Errors as vLLM sends them: an HTTP
error is `{"error": {"message", "type", "param", "code"}}`, an error inside an open stream is that object as
an event (`json.dumps`, so spaced and ASCII-escaped) followed by `[DONE]`.

Token i of a stream leaves at request + ttft + i x tpot (an absolute schedule, so sleeps do not drift;
`tpot_per_stream` and `prefill_per_token` make it slow with load and context as a real server does), and
the server records when it read each request and sent each token, for tests that check the client's
figures against them by causality.

`hostile` makes it a server that attacks its client instead (HOSTILE_ANSWERS: terminal control sequences,
streams that never end, runaway replies, malformed events, silence, a hang-up), for examples/agent.py's tests.

    python -m dev.fake_openai_server --port 0 --ttft 0.05 --tpot 0.01    # prints the port, then serves
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import struct
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from pydantic import BaseModel

from components.serving.front import UNAUTHORIZED_BODY

TEMPLATE_OVERHEAD = 7  # tokens the fake chat template adds around the user's words
MODEL = "google/gemma-4-E2B-it"


def count_tokens(messages: list[dict]) -> int:
    return TEMPLATE_OVERHEAD + sum(len(_text(m.get("content", "")).split()) for m in messages)


def _text(content: object) -> str:
    """A message's text: a string, or the text parts of a content list (what `vllm bench serve` sends)."""
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


# The stream's shapes, as vLLM's protocol models name them; exclude_unset keeps only the fields set.
class DeltaMessage(BaseModel):
    role: str | None = None
    content: str | None = None
    reasoning: str | None = None
    tool_calls: list[dict] | None = None
    """vLLM's DeltaToolCall list (vllm/entrypoints/generate/base/protocol.py, 0.33.0): `id`, `type` and the
    function's `name` in the first delta of a call, then `function.arguments` in pieces, each with its `index`."""


class StreamChoice(BaseModel):
    index: int = 0
    delta: DeltaMessage
    logprobs: None = None
    finish_reason: str | None = None
    token_ids: list[int] | None = None


class UsageInfo(BaseModel):
    prompt_tokens: int
    total_tokens: int
    completion_tokens: int


class ChatCompletionStreamResponse(BaseModel):
    id: str
    object: str = "chat.completion.chunk"
    created: int
    model: str
    choices: list[StreamChoice]
    usage: UsageInfo | None = None


@dataclass
class FakeTiming:
    ttft: float = 0.05
    tpot: float = 0.01
    tpot_per_stream: float = 0.0
    """Seconds each other open stream adds to a token's interval: streams sharing one decoder, as a batch does."""
    prefill_per_token: float = 0.0
    """Seconds each prompt token adds to the first token: prefill that grows with the context."""
    tokens: tuple[str, ...] = ("tok",)
    """Token texts, cycled: put U+2028 or "" here to send what a real tokenizer can emit."""
    reasoning_only: bool = False
    """Every token in `delta.reasoning` (a reasoning model still thinking), none in `content`."""
    role_at_once: bool = False
    """Send the role chunk when the response starts, as some proxies do, instead of with the first token."""
    usage: bool = True
    """Honour stream_options.include_usage; False: a server that never sends usage."""
    usage_delay: float = 0.0
    """Seconds between the last token and the usage chunk."""
    fail_every: int = 0
    fail_status: int = 500
    """A 401 is refused with the front's body, as the VM's nginx does (components/serving/front.py); any other status
    with vLLM's error object."""
    fail_message: str = "injected failure"
    hang_every: int = 0
    error_event_every: int = 0
    """Every Nth stream ends after `cut_after` tokens with an error event, as vLLM reports a failure mid-stream."""
    truncate_every: int = 0
    """Every Nth stream ends cleanly (the chunked body's last chunk) after `cut_after` tokens: no usage, no [DONE]."""
    reset_every: int = 0
    """Every Nth stream's connection is reset (RST) after `cut_after` tokens."""
    cut_after: int = 3
    tokenize: bool = True
    ignore_stream: bool = False
    """Answer a streaming request with one JSON body, as a server without streaming does."""
    spaced_json: bool = False
    """Write events as json.dumps does by default (`"usage": {`): valid JSON a client must parse, not match."""
    split_events: bool = False
    """Send each event in three HTTP chunks: cut inside the JSON and before the blank line that ends it."""
    line_ending: str = "\n"
    """The SSE line ending: "\\n", "\\r\\n" or "\\r" are all valid."""
    tool_call_arguments: dict | str | None = None
    """A streamed request with `tools` whose last message is the user's gets a call of its first tool with these
    arguments (a string: sent as it is, JSON or not); one whose last message is a tool result gets an answer quoting
    that result (an agent's round trip)."""
    reasoning_text: str = ""
    """Sent before a tool turn's call or answer in `delta.reasoning`, as the gemma4 reasoning parser's thinking."""
    hostile: str = ""
    """Answer every chat request as one of HOSTILE_ANSWERS instead: a server attacking its client."""


@dataclass
class StreamRecord:
    """What the server saw of one streamed chat request, on time.perf_counter's clock."""

    content: str
    received: float
    token_times: list[float] = field(default_factory=list)
    usage_time: float | None = None


def _every(every: int, number: int) -> bool:
    return bool(every) and number % every == 0


class FakeOpenAIServer:
    def __init__(self, timing: FakeTiming | None = None, host: str = "127.0.0.1", port: int = 0):
        self.timing = timing or FakeTiming()
        self.host, self.port = host, port
        self.chat_requests = 0
        self.connections = 0
        self.open_streams = 0
        self.chat_bodies: list[dict] = []
        self.last_headers: dict[str, str] = {}
        self.streams: list[StreamRecord] = []
        self.loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None

    # Lifecycle: in a thread (tests) or as the main program (benchmarks).
    def start_in_thread(self) -> FakeOpenAIServer:
        ready = threading.Event()

        def run() -> None:
            self.loop = asyncio.new_event_loop()
            self.loop.run_until_complete(self._start())
            ready.set()
            self.loop.run_forever()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self.loop and self._server:
            async def close() -> None:
                self._server.close()
                for task in asyncio.all_tasks():
                    if task is not asyncio.current_task():
                        task.cancel()

            asyncio.run_coroutine_threadsafe(close(), self.loop).result(5)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(5)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._connection, self.host, self.port, backlog=1024)
        self.port = self._server.sockets[0].getsockname()[1]

    async def serve_forever(self) -> None:
        await self._start()
        print(self.port, flush=True)
        async with self._server:
            await self._server.serve_forever()

    # HTTP/1.1 with keep-alive; streaming responses are chunked, one HTTP chunk per event as uvicorn sends them.
    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                request_line, *header_lines = head.decode("latin-1").split("\r\n")
                method, path, _ = request_line.split(" ", 2)
                headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines if h)}
                body = await reader.readexactly(int(headers.get("content-length", 0) or 0))
                self.last_headers = headers
                if not await self._route(method, path, json.loads(body) if body else {}, writer):
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _json(self, writer: asyncio.StreamWriter, status: int, payload: object) -> None:
        # Starlette's JSONResponse, which vLLM's HTTP errors go through: compact, raw UTF-8.
        data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
        writer.write(f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(data)}"
                     "\r\n\r\n".encode() + data)
        await writer.drain()

    async def _route(self, method: str, path: str, body: dict, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False when the connection must end."""
        if path == "/health":
            await self._json(writer, 200, {})
        elif path == "/v1/models":
            await self._json(writer, 200, {"object": "list", "data": [{"id": body.get("model") or MODEL,
                                                                         "object": "model", "root": MODEL}]})
        elif path == "/tokenize" and self.timing.tokenize:
            count = (count_tokens(body["messages"]) if "messages" in body
                     else len(str(body.get("prompt", "")).split()))
            await self._json(writer, 200, {"count": count, "max_model_len": 32768, "tokens": list(range(count))})
        elif path == "/v1/chat/completions" and method == "POST":
            return await self._chat(body, writer)
        elif path == "/fake/stats":
            await self._json(writer, 200, self.stats())
        elif path == "/fake/records":
            await self._json(writer, 200, [{"head": r.content.split(" ", 1)[0], "received": r.received,
                                            "token_times": r.token_times} for r in self.streams])
        elif path == "/fake/reset" and method == "POST":
            self.streams.clear()
            await self._json(writer, 200, {})
        else:
            await self._json(writer, 404, vllm_error(f"no route {path}", "NotFoundError", 404))
        return True

    def stats(self) -> dict:
        """The server's own record of the streams it finished: when their tokens left, not when they arrived."""
        done = [r for r in self.streams if len(r.token_times) >= 2]
        ttft = [r.token_times[0] - r.received for r in done]
        tpot = [(r.token_times[-1] - r.token_times[0]) / (len(r.token_times) - 1) for r in done]
        return {"streams": len(done), "median_ttft_s": statistics.median(ttft) if ttft else None,
                "median_tpot_s": statistics.median(tpot) if tpot else None}

    async def _chat(self, body: dict, writer: asyncio.StreamWriter) -> bool:
        self.chat_requests += 1
        number = self.chat_requests
        timing = self.timing
        prompt = count_tokens(body.get("messages", []))
        output = int(body.get("max_completion_tokens") or body.get("max_tokens") or 16)
        if timing.hostile:
            self.chat_bodies.append(body)
            return await HOSTILE_ANSWERS[timing.hostile](_Chunker(timing, f"chatcmpl-{number}", MODEL), body, writer)
        if _every(timing.fail_every, number):
            if timing.fail_status == 401:
                await self._json(writer, 401, json.loads(UNAUTHORIZED_BODY))
                return True
            kind = "BadRequestError" if timing.fail_status < 500 else "InternalServerError"
            await self._json(writer, timing.fail_status, vllm_error(timing.fail_message, kind, timing.fail_status))
            return True
        if _every(timing.hang_every, number):
            await asyncio.sleep(3600)
        usage = UsageInfo(prompt_tokens=prompt, completion_tokens=output, total_tokens=prompt + output)
        if not body.get("stream") or timing.ignore_stream:
            await asyncio.sleep(timing.ttft)
            await self._json(writer, 200, {"choices": [{"message": {"content": "x"}}], "usage": usage.model_dump()})
            return True

        messages = body.get("messages") or [{}]
        if timing.tool_call_arguments is not None and body.get("tools"):
            return await self._tool_turn(body, messages, _Chunker(timing, f"chatcmpl-{number}", str(
                body.get("model") or MODEL)), writer)
        record = StreamRecord(content=_text(messages[-1].get("content", "")), received=time.perf_counter())
        self.streams.append(record)
        chunk = _Chunker(timing, f"chatcmpl-{number}", str(body.get("model") or MODEL))
        loop = asyncio.get_running_loop()
        start = loop.time()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        if timing.role_at_once:
            writer.write(chunk.role())
        cut = next((kind for kind, every in (("error", timing.error_event_every), ("truncate", timing.truncate_every),
                                              ("reset", timing.reset_every)) if _every(every, number)), None)
        # An absolute schedule (each token's time from the last one's due time), so sleeps do not drift.
        due = start + timing.ttft + prompt * timing.prefill_per_token
        self.open_streams += 1
        try:
            for index in range(output):
                if cut and index == timing.cut_after:
                    return await self._cut(cut, chunk, writer)
                delay = due - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                data = chunk.role() if index == 0 and not timing.role_at_once else b""
                record.token_times.append(time.perf_counter())  # before the bytes leave: a lower bound
                writer.write(data + chunk.token(index, last=index == output - 1))
                await writer.drain()
                due += timing.tpot + timing.tpot_per_stream * (self.open_streams - 1)
        finally:
            self.open_streams -= 1
        if timing.usage_delay:
            await asyncio.sleep(timing.usage_delay)
        include_usage = (body.get("stream_options") or {}).get("include_usage")
        if include_usage and timing.usage:
            record.usage_time = time.perf_counter()
            writer.write(chunk.usage(usage))
        writer.write(chunk.done() + b"0\r\n\r\n")
        await writer.drain()
        return True

    async def _tool_turn(self, body: dict, messages: list[dict], chunk: _Chunker,
                         writer: asyncio.StreamWriter) -> bool:
        """One turn of a tool-calling agent, in vLLM 0.33.0's stream shapes (chat_completion/serving.py,
        chat_completion_stream_generator): a call's id (make_tool_call_id: `chatcmpl-tool-<uuid>`), type and name
        first, its arguments after, finish_reason `tool_calls` (tool_calls_utils.resolve_finish_reason); an answer
        token by token, finish_reason `stop`."""
        self.chat_bodies.append(body)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        writer.write(chunk.role())
        if self.timing.reasoning_text:
            writer.write(chunk.delta(DeltaMessage(reasoning=self.timing.reasoning_text)))
        if messages[-1].get("role") == "tool":
            words = f"The tool answered: {_text(messages[-1].get('content', ''))}".split(" ")
            for index, word in enumerate(words):
                writer.write(chunk.delta(DeltaMessage(content=word if index == 0 else " " + word),
                                         "stop" if index == len(words) - 1 else None))
        else:
            function = body["tools"][0]["function"]
            call_id = f"chatcmpl-tool-{uuid.uuid4().hex}"
            arguments = self.timing.tool_call_arguments
            arguments = arguments if isinstance(arguments, str) else json.dumps(arguments)
            middle = len(arguments) // 2
            writer.write(chunk.delta(DeltaMessage(tool_calls=[
                {"id": call_id, "type": "function", "index": 0, "function": {"name": function["name"]}}])))
            for piece in (arguments[:middle], arguments[middle:]):
                writer.write(chunk.delta(DeltaMessage(tool_calls=[{"index": 0, "function": {"arguments": piece}}])))
            writer.write(chunk.delta(DeltaMessage(content=""), "tool_calls"))
        writer.write(chunk.done() + b"0\r\n\r\n")
        await writer.drain()
        return True

    async def _cut(self, kind: str, chunk: _Chunker, writer: asyncio.StreamWriter) -> bool:
        if kind == "error":
            writer.write(chunk.error_event("The model ran out of KV cache") + chunk.done() + b"0\r\n\r\n")
        elif kind == "truncate":
            writer.write(b"0\r\n\r\n")
        else:
            sock = writer.get_extra_info("socket")
            # Linger 0: close() sends RST instead of FIN, a connection reset as the client sees one.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return False
        await writer.drain()
        return True


# --- Hostile answers: what a server that attacks its client (examples/agent.py) could send, each well-formed HTTP.
# The text a terminal obeys: a window title, an OSC 52 clipboard write, a screen clear and home, C1's CSI, a DCS
# string, a full reset, a carriage return, a backspace, NUL, DEL.
ESCAPES = "\x1b]0;owned\x07\x1b]52;c;b3duZWQ=\x07\x1b[2J\x1b[H\x9b2J\x1bP+q544e\x1b\\\x1bc\r\x08\x00\x7f"
SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


async def _send(writer: asyncio.StreamWriter, *events: bytes) -> bool:
    """A whole stream: these events (each its HTTP chunk), `[DONE]`, the body's end."""
    writer.write(SSE_HEAD + b"".join(events) + _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
    await writer.drain()
    return True


async def _escapes(chunk: _Chunker, body: dict, writer: asyncio.StreamWriter) -> bool:
    """Control sequences in the reasoning, the answer, a tool's name and its arguments; the second turn answers."""
    thinking = chunk.delta(DeltaMessage(reasoning=f"{ESCAPES}thinking{ESCAPES}"))
    if body["messages"][-1].get("role") == "tool":
        return await _send(writer, chunk.role(), thinking,
                           chunk.delta(DeltaMessage(content=f"{ESCAPES}answer{ESCAPES}"), "stop"))
    calls = [{"id": "chatcmpl-tool-0", "type": "function", "index": 0,
              "function": {"name": "current_time", "arguments": json.dumps({"zone": f"{ESCAPES}Asia/Tokyo"})}},
             {"id": "chatcmpl-tool-1", "type": "function", "index": 1,
              "function": {"name": f"{ESCAPES}clock", "arguments": ESCAPES}}]
    return await _send(writer, chunk.role(), thinking,
                       chunk.delta(DeltaMessage(content=f"calling{ESCAPES}", tool_calls=calls), "tool_calls"))


async def _endless(chunk: _Chunker, body: dict, writer: asyncio.StreamWriter) -> bool:
    """Empty deltas forever: a stream that never finishes and never says anything."""
    writer.write(SSE_HEAD + chunk.role())
    while True:
        writer.write(chunk.delta(DeltaMessage(content="")))
        await writer.drain()
        await asyncio.sleep(0.005)


async def _trickle(chunk: _Chunker, body: dict, writer: asyncio.StreamWriter) -> bool:
    """One event that never ends: a byte at a time, never a newline, so no read ever times out."""
    writer.write(SSE_HEAD + _chunk(b'data: {"choices": ['))
    while True:
        writer.write(_chunk(b" "))
        await writer.drain()
        await asyncio.sleep(0.005)


async def _flood(chunk: _Chunker, body: dict, writer: asyncio.StreamWriter) -> bool:
    """Answer text far beyond the request's max_completion_tokens, for as long as the client reads."""
    writer.write(SSE_HEAD + chunk.role())
    while True:
        writer.write(chunk.delta(DeltaMessage(content="flood " * 2000)))
        await writer.drain()


async def _huge_arguments(chunk: _Chunker, body: dict, writer: asyncio.StreamWriter) -> bool:
    """One tool call's arguments in 1,000-character pieces, for as long as the client reads."""
    writer.write(SSE_HEAD + chunk.role() + chunk.delta(DeltaMessage(tool_calls=[
        {"id": "chatcmpl-tool-0", "type": "function", "index": 0, "function": {"name": "current_time"}}])))
    writer.write(chunk.delta(DeltaMessage(tool_calls=[{"index": 0, "function": {"arguments": '{"zone": "'}}])))
    while True:
        writer.write(chunk.delta(DeltaMessage(tool_calls=[{"index": 0, "function": {"arguments": "A" * 1000}}])))
        await writer.drain()


async def _many_calls(chunk: _Chunker, body: dict, writer: asyncio.StreamWriter) -> bool:
    """A hundred tool calls in one turn."""
    calls = [{"id": f"chatcmpl-tool-{index}", "type": "function", "index": index,
              "function": {"name": "current_time", "arguments": '{"zone": "Asia/Tokyo"}'}} for index in range(100)]
    return await _send(writer, chunk.role(), chunk.delta(DeltaMessage(tool_calls=calls), "tool_calls"))


def _malformed(data: bytes) -> Callable[[_Chunker, dict, asyncio.StreamWriter], Awaitable[bool]]:
    """One event of this data: what no OpenAI-compatible server sends."""
    async def answer(chunk: _Chunker, body: dict, writer: asyncio.StreamWriter) -> bool:
        return await _send(writer, _chunk(b"data: " + data + b"\n\n"))
    return answer


async def _silent(chunk: _Chunker, body: dict, writer: asyncio.StreamWriter) -> bool:
    """The request read, never an answer."""
    await asyncio.sleep(3600)
    return False


async def _hang_up(chunk: _Chunker, body: dict, writer: asyncio.StreamWriter) -> bool:
    """The connection closed without an answer, as an SSH tunnel does when nothing listens at its far end."""
    return False


async def _retry_later(chunk: _Chunker, body: dict, writer: asyncio.StreamWriter) -> bool:
    """503 with the longest Retry-After the openai SDK honours (openai/_constants.py MAX_RETRY_AFTER_DELAY, 3.57.0)."""
    data = json.dumps(vllm_error("try later", "ServiceUnavailableError", 503)).encode()
    writer.write(f"HTTP/1.1 503 X\r\nContent-Type: application/json\r\nRetry-After: 120\r\n"
                 f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
    await writer.drain()
    return True


async def _after_done(chunk: _Chunker, body: dict, writer: asyncio.StreamWriter) -> bool:
    """A whole answer and `[DONE]`, then events forever on the same stream: a client that reads on never ends."""
    writer.write(SSE_HEAD + chunk.role() + chunk.delta(DeltaMessage(content="x"), "stop") + chunk.done())
    while True:
        writer.write(chunk.delta(DeltaMessage(content="after")))
        await writer.drain()
        await asyncio.sleep(0.001)


async def _comments(chunk: _Chunker, body: dict, writer: asyncio.StreamWriter) -> bool:
    """SSE comment lines as fast as the client reads: bytes without one event, so no text cap is ever reached."""
    writer.write(SSE_HEAD + chunk.role())
    while True:
        writer.write(_chunk(b": " + b"padding " * 8000 + b"\n"))
        await writer.drain()


async def _huge_error(chunk: _Chunker, body: dict, writer: asyncio.StreamWriter) -> bool:
    """A 503 whose body says it is 2 GiB, sent for as long as the client reads."""
    writer.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
                 b"Content-Length: 2147483648\r\n\r\n\x1b]0;owned\x07")
    while True:
        writer.write(b"x" * 65536)
        await writer.drain()


def _gzip(status: bytes, content_type: bytes):
    """A small gzip body that decodes to 64 MiB, sent whatever the client's Accept-Encoding asked for."""
    async def answer(chunk: _Chunker, body: dict, writer: asyncio.StreamWriter) -> bool:
        import gzip
        data = gzip.compress(b"x" * (64 << 20), compresslevel=9)
        writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Type: " + content_type + b"\r\nContent-Encoding: gzip"
                     b"\r\nContent-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
        await writer.drain()
        return True
    return answer


_CHUNK_HEAD = b'{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":'
HOSTILE_ANSWERS: dict[str, Callable[[_Chunker, dict, asyncio.StreamWriter], Awaitable[bool]]] = {
    "escapes": _escapes, "endless": _endless, "trickle": _trickle, "flood": _flood,
    "huge_arguments": _huge_arguments, "many_calls": _many_calls, "silent": _silent, "hang_up": _hang_up,
    "retry_later": _retry_later, "after_done": _after_done, "huge_error": _huge_error,
    "comments": _comments,
    "gzip_error": _gzip(b"400 Bad Request", b"application/json"),
    "gzip_stream": _gzip(b"200 OK", b"text/event-stream"),
    # Fields no OpenAI-compatible server sends so: a null usage (tolerated), choices as an object, a count that is
    # Infinity (Python's json writes it), a string, negative.
    "usage_null": _malformed(_CHUNK_HEAD + b'[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}],'
                             b'"usage":null}'),
    "choices_object": _malformed(_CHUNK_HEAD + b'{"0":{"index":0,"delta":{"content":"x"}}}}'),
    "usage_infinity": _malformed(_CHUNK_HEAD + b'[],"usage":{"prompt_tokens":1,"completion_tokens":Infinity}}'),
    "usage_string": _malformed(_CHUNK_HEAD + b'[],"usage":{"prompt_tokens":"many","completion_tokens":1}}'),
    "usage_negative": _malformed(_CHUNK_HEAD + b'[],"usage":{"prompt_tokens":1,"completion_tokens":-5}}'),
    "index_null": _malformed(_CHUNK_HEAD + b'[{"index":0,"delta":{"tool_calls":[{"index":null,"id":"c",'
                             b'"type":"function","function":{"name":"current_time","arguments":"{}"}}]}}]}'),
    "arguments_object": _malformed(_CHUNK_HEAD + b'[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c",'
                                   b'"type":"function","function":{"name":"current_time",'
                                   b'"arguments":{"zone":"Asia/Tokyo"}}}]}}]}'),
    "delta_null": _malformed(_CHUNK_HEAD + b'[{"index":0,"delta":null}]}'),
    "not_json": _malformed(b"<html>502 Bad Gateway</html>"),
    "not_utf8": _malformed(b"\xff\xfe"),
    "not_an_object": _malformed(b"42"),
    # Bidi overrides and isolates, a zero-width space and a line separator: a terminal shows the text reordered
    # or hidden, though no byte of it is a C0 or C1 control.
    "bidi": _malformed(_CHUNK_HEAD + b'[{"index":0,"delta":{"content":"run \\u202etxt.exe\\u202c \\u2066x\\u2069'
                       b'\\u200b\\u2028end"},"finish_reason":"stop"}]}'),
    # Valid JSON, but a lone surrogate half that no encoding can print.
    "surrogate": _malformed(_CHUNK_HEAD + b'[{"index":0,"delta":{"content":"lone \\ud800 half"},'
                            b'"finish_reason":"stop"}]}'),
}


def vllm_error(message: str, kind: str, code: int) -> dict:
    """vLLM's ErrorResponse(error=ErrorInfo(...)), as its model_dump() gives it."""
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


class _Chunker:
    """The bytes of one stream's events, each as its own HTTP chunk(s)."""

    def __init__(self, timing: FakeTiming, request_id: str, model: str):
        self.timing, self.request_id, self.model = timing, request_id, model
        self.created = int(time.time())

    def _response(self, choices: list[StreamChoice], usage: UsageInfo | None = None) -> bytes:
        # vLLM 0.33: model_dump_json(exclude_unset=True, exclude_none=not chunk.choices).
        # Every field vLLM passes to the constructor is "set", so exclude_unset keeps it.
        response = ChatCompletionStreamResponse(id=self.request_id, object="chat.completion.chunk",
                                                created=self.created, model=self.model, choices=choices)
        if usage is not None:
            response.usage = usage
        if self.timing.spaced_json:
            return json.dumps(response.model_dump(mode="json", exclude_unset=True)).encode()
        return response.model_dump_json(exclude_unset=True, exclude_none=not choices).encode()

    def role(self) -> bytes:
        delta = DeltaMessage(role="assistant", content="")
        return self._event(self._response([StreamChoice(index=0, delta=delta, logprobs=None, finish_reason=None)]))

    def token(self, index: int, last: bool) -> bytes:
        text = self.timing.tokens[index % len(self.timing.tokens)]
        delta = DeltaMessage(reasoning=text) if self.timing.reasoning_only else DeltaMessage(content=text)
        choice = StreamChoice(index=0, delta=delta, logprobs=None, finish_reason="length" if last else None,
                              token_ids=None)
        return self._event(self._response([choice]))

    def delta(self, delta: DeltaMessage, finish_reason: str | None = None) -> bytes:
        return self._event(self._response([StreamChoice(index=0, delta=delta, logprobs=None,
                                                         finish_reason=finish_reason)]))

    def usage(self, usage: UsageInfo) -> bytes:
        return self._event(self._response([], usage))

    def error_event(self, message: str) -> bytes:
        return self._event(json.dumps(vllm_error(message, "BadRequestError", 400)).encode())

    def done(self) -> bytes:
        return self._event(b"[DONE]")

    def _event(self, data: bytes) -> bytes:
        end = self.timing.line_ending.encode()
        event = b"data: " + data + end + end
        if not self.timing.split_events:
            return _chunk(event)
        middle = len(data) // 2
        return _chunk(event[:6 + middle]) + _chunk(event[6 + middle:-len(end)]) + _chunk(end)


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dev.fake_openai_server", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="(default: 0, any free port; printed on stdout)")
    parser.add_argument("--ttft", type=float, default=0.0, help="seconds to the first token (default: 0)")
    parser.add_argument("--tpot", type=float, default=0.0, help="seconds between tokens (default: 0)")
    parser.add_argument("--tpot-per-stream", type=float, default=0.0,
                        help="seconds each other open stream adds between tokens (default: 0)")
    parser.add_argument("--prefill-per-token", type=float, default=0.0,
                        help="seconds each prompt token adds to the first token (default: 0)")
    args = parser.parse_args(argv)
    timing = FakeTiming(ttft=args.ttft, tpot=args.tpot, tpot_per_stream=args.tpot_per_stream,
                        prefill_per_token=args.prefill_per_token)
    server = FakeOpenAIServer(timing, port=args.port)
    try:
        asyncio.run(server.serve_forever())
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
