"""A fake streaming OpenAI-compatible server with known timing, for testing and benchmarking the bench client.

The first content token comes `ttft` seconds after the request, then one every `tpot` seconds
(tpot 0: as fast as it can, still one chunk per token). Faults: every Nth chat request fails with 500 or
hangs; /tokenize can be switched off to exercise the usage-based calibration.

    python -m dev.fake_openai_server --port 0 --ttft 0 --tpot 0    # prints the port
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time
from dataclasses import dataclass, field

TEMPLATE_OVERHEAD = 7  # tokens the fake chat template adds around the user's words


def count_tokens(messages: list[dict]) -> int:
    return TEMPLATE_OVERHEAD + sum(len(str(m.get("content", "")).split()) for m in messages)


@dataclass
class FakeTiming:
    ttft: float = 0.05
    tpot: float = 0.01
    fail_every: int = 0
    hang_every: int = 0
    tokenize: bool = True
    spaced_json: bool = False
    """Write events as json.dumps does by default (`"usage": {`), valid JSON a client must parse, not match."""
    split_events: bool = False
    """Send each event in three HTTP chunks: cut inside the JSON and before the blank line that ends it."""


@dataclass
class StreamRecord:
    """What the server saw of one streamed chat request, on time.perf_counter's clock."""

    content: str
    received: float
    token_times: list[float] = field(default_factory=list)


class FakeOpenAIServer:
    def __init__(self, timing: FakeTiming | None = None, host: str = "127.0.0.1", port: int = 0):
        self.timing = timing or FakeTiming()
        self.host, self.port = host, port
        self.chat_requests = 0
        self.connections = 0
        self.streams: list[StreamRecord] = []
        self.loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None

    # Lifecycle: in a thread (tests) or as the main program (benchmark).
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
        self._server = await asyncio.start_server(self._connection, self.host, self.port, backlog=512)
        self.port = self._server.sockets[0].getsockname()[1]

    async def serve_forever(self) -> None:
        await self._start()
        print(self.port, flush=True)
        async with self._server:
            await self._server.serve_forever()

    # HTTP/1.1 with keep-alive; streaming responses are chunked.
    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                request_line, *header_lines = head.decode("latin-1").split("\r\n")
                method, path, _ = request_line.split(" ", 2)
                headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines if h)}
                body = await reader.readexactly(int(headers.get("content-length", 0) or 0))
                await self._route(method, path, json.loads(body) if body else {}, writer)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _json(self, writer: asyncio.StreamWriter, status: int, payload: object) -> None:
        data = json.dumps(payload).encode()
        writer.write(f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(data)}"
                     "\r\n\r\n".encode() + data)
        await writer.drain()

    async def _route(self, method: str, path: str, body: dict, writer: asyncio.StreamWriter) -> None:
        if path == "/health":
            await self._json(writer, 200, {})
        elif path == "/tokenize" and self.timing.tokenize:
            await self._json(writer, 200, {"count": count_tokens(body.get("messages", [])),
                                           "max_model_len": 32768, "tokens": []})
        elif path == "/v1/chat/completions" and method == "POST":
            await self._chat(body, writer)
        else:
            await self._json(writer, 404, {"error": f"no route {path}"})

    async def _chat(self, body: dict, writer: asyncio.StreamWriter) -> None:
        self.chat_requests += 1
        number = self.chat_requests
        timing = self.timing
        prompt = count_tokens(body.get("messages", []))
        output = int(body.get("max_tokens", 16))
        if timing.fail_every and number % timing.fail_every == 0:
            await self._json(writer, 500, {"error": "injected failure"})
            return
        if timing.hang_every and number % timing.hang_every == 0:
            await asyncio.sleep(3600)
        usage = {"prompt_tokens": prompt, "completion_tokens": output, "total_tokens": prompt + output}
        if not body.get("stream"):
            await asyncio.sleep(timing.ttft)
            await self._json(writer, 200, {"choices": [{"message": {"content": "x"}}], "usage": usage})
            return

        messages = body.get("messages") or [{}]
        record = StreamRecord(content=str(messages[-1].get("content", "")), received=time.perf_counter())
        self.streams.append(record)
        loop = asyncio.get_running_loop()
        start = loop.time()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        writer.write(self._event({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}))
        token = self._event({"choices": [{"index": 0, "delta": {"content": "tok"}}]})
        if timing.tpot <= 0:
            # As fast as possible, but like a real server: one chunk per token, streams interleaved.
            await asyncio.sleep(timing.ttft)
            for _ in range(output):
                record.token_times.append(time.perf_counter())  # before the bytes leave: a lower bound
                writer.write(token)
                await asyncio.sleep(0)
            await writer.drain()
        else:
            for index in range(output):
                # An absolute schedule, so per-token sleeps do not accumulate drift.
                delay = start + timing.ttft + index * timing.tpot - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                record.token_times.append(time.perf_counter())
                writer.write(token)
                await writer.drain()
        writer.write(self._event({"choices": [], "usage": usage}) + _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        await writer.drain()

    def _event(self, payload: dict) -> bytes:
        """One server-sent event as HTTP chunk(s)."""
        separators = None if self.timing.spaced_json else (",", ":")
        data = b"data: " + json.dumps(payload, separators=separators).encode()
        if not self.timing.split_events:
            return _chunk(data + b"\n\n")
        middle = len(data) // 2
        return _chunk(data[:middle]) + _chunk(data[middle:] + b"\n") + _chunk(b"\n")


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dev.fake_openai_server", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ttft", type=float, default=0.0)
    parser.add_argument("--tpot", type=float, default=0.0)
    args = parser.parse_args(argv)
    server = FakeOpenAIServer(FakeTiming(ttft=args.ttft, tpot=args.tpot), port=args.port)
    try:
        asyncio.run(server.serve_forever())
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
