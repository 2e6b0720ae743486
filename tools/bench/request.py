"""One OpenAI-compatible endpoint: prompts calibrated to an exact token count, and streamed, timed requests.

What a request records follows `vllm bench serve` 0.33 (vllm/benchmarks/lib/endpoint_request_func.py,
`async_request_openai_chat_completions` and `_choice_has_streamed_output`): the first token is the first
chunk whose delta streams output, including a token that decodes to "" (a `content` key without `role`),
but not the role-only chunk that opens the stream; inter-token latencies are the gaps between such chunks;
the last token is the last such chunk, so a late usage chunk or [DONE] does not stretch TPOT. Unlike it, a
reasoning-only reply counts its `reasoning` tokens, and an error event inside the stream fails the request.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from tools.bench.sse import LineTooLongError, SseParser

FILLER = "hello "
ERROR_TEXT_LIMIT = 300
STREAMED_KEYS = ("content", "reasoning", "reasoning_content", "tool_calls", "function_call")


@dataclass
class RequestResult:
    start: float
    """When the client began the request: the repetition's clock and the end-to-end latency start here."""
    sent: float | None = None
    """When its bytes went to the socket: TTFT starts here (see StampedBody)."""
    end: float = 0.0
    first_token: float | None = None
    last_token: float | None = None
    token_chunks: int = 0
    prompt_tokens: int = 0
    usage_tokens: int | None = None
    """completion_tokens from the stream's usage; None when the stream had none."""
    itl: list[float] = field(default_factory=list)
    done: bool = False
    """The stream ended with data: [DONE]."""
    error: str | None = None

    @property
    def output_tokens(self) -> int:
        # Without usage, one token per chunk that streams output: what vLLM's server sends.
        return self.usage_tokens if self.usage_tokens is not None else self.token_chunks

    @property
    def ttft(self) -> float | None:
        return None if self.first_token is None else self.first_token - (self.sent or self.start)

    @property
    def tpot(self) -> float | None:
        if self.first_token is None or self.last_token is None or self.output_tokens < 2:
            return None
        return (self.last_token - self.first_token) / (self.output_tokens - 1)


class StampedBody(aiohttp.BytesPayload):
    """A JSON request body that notes on its request when it is written, just before the write.

    On Python 3.11 aiohttp holds a request's headers back to send them with its body, and writes the body
    from a task that waits behind every task already ready (Python 3.12 starts it eagerly): in a burst of 64
    requests that wait measured 18-23 ms here, the client's queue, not the server's latency, so TTFT counts
    from this write. `vllm bench serve` starts its clock before building the request, and so counts it.
    """

    def __init__(self, value: bytes, result: RequestResult):
        super().__init__(value, content_type="application/json")
        self._result = result

    async def write_with_length(self, writer: Any, content_length: int | None) -> None:
        self._result.sent = time.perf_counter()  # before the bytes can reach the server: a causal lower bound
        await super().write_with_length(writer, content_length)


def short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= ERROR_TEXT_LIMIT else text[:ERROR_TEXT_LIMIT - 3] + "..."


def streams_output(delta: Any) -> bool:
    """A delta that carries a generated token (vLLM 0.33's `_choice_has_streamed_output`, plus `reasoning_content`)."""
    if not isinstance(delta, dict):
        return False
    if "role" in delta:
        return any(delta.get(key) for key in STREAMED_KEYS)
    return any(key in delta for key in STREAMED_KEYS)


def take_event(result: RequestResult, data: bytes, now: float) -> bool:
    """Record one event on the result; False when the stream is over or broken."""
    if len(data) < 16 and data.strip() == b"[DONE]":
        result.done = True
        return False
    try:
        # Decoded here: json.loads on bytes first sniffs their encoding, per chunk, for nothing.
        event = json.loads(data.decode())
    except ValueError:  # JSONDecodeError and UnicodeDecodeError alike
        result.error = short(f"unparseable stream event: {data.decode('utf-8', 'replace')}")
        return False
    if not isinstance(event, dict):
        result.error = short(f"stream event is not a JSON object: {data.decode('utf-8', 'replace')}")
        return False
    if event.get("error"):
        # vLLM reports a failure inside an open stream as an event with an error object.
        error = event["error"]
        message = error.get("message", error) if isinstance(error, dict) else error
        result.error = short(f"error event: {message}")
        return False
    choices = event.get("choices")
    if choices and isinstance(choices[0], dict) and streams_output(choices[0].get("delta")):
        if result.last_token is None:
            result.first_token = now
        else:
            result.itl.append(now - result.last_token)
        result.last_token = now
        result.token_chunks += 1
    usage = event.get("usage")
    if isinstance(usage, dict):
        result.prompt_tokens = int(usage.get("prompt_tokens") or 0)
        if usage.get("completion_tokens") is not None:
            result.usage_tokens = int(usage["completion_tokens"])
    return True


def http_error(status: int, body: bytes) -> str:
    """An HTTP error in the server's own words: vLLM's {"error": {"message", "type"}} when it is that."""
    text = body.decode("utf-8", "replace").strip()
    try:
        error = json.loads(text).get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict) and error.get("message"):
        kind = f" {error['type']}" if error.get("type") else ""
        return short(f"HTTP {status}{kind}: {error['message']}")
    return short(f"HTTP {status}: {text}")


class Endpoint:
    """One OpenAI-compatible server, reached through one aiohttp session."""

    def __init__(self, session: aiohttp.ClientSession, base_url: str, api_key: str, model: str,
                 output_tokens: int, timeout: float):
        self.session = session
        self.base_url = base_url.rstrip("/")
        self.root_url = self.base_url.removesuffix("/v1")
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.model = model
        self.output_tokens = output_tokens
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self.filler_words: dict[int, int] = {}
        self.nonce = 0

    def messages(self, words: int, nonce: int) -> list[dict[str, str]]:
        # A unique head per request, so prefix caching cannot serve one request from another.
        return [{"role": "user", "content": f"[{nonce:08d}] " + FILLER * words}]

    async def count_tokens(self, words: int) -> int:
        """The server's own count: /tokenize with the chat template, else a 1-token request's usage."""
        messages = self.messages(words, 0)
        try:
            async with self.session.post(f"{self.root_url}/tokenize", headers=self.headers, timeout=self.timeout,
                                         json={"model": self.model, "messages": messages,
                                               "add_generation_prompt": True}) as response:
                if response.status == 200:
                    return int((await response.json(content_type=None))["count"])
        except (aiohttp.ClientResponseError, ValueError, KeyError, TypeError):
            pass
        async with self.session.post(f"{self.base_url}/chat/completions", headers=self.headers,
                                     timeout=self.timeout,
                                     json={"model": self.model, "messages": messages, "max_tokens": 1}) as response:
            if response.status != 200:
                raise CalibrationError(http_error(response.status, await response.read()))
            return int((await response.json(content_type=None))["usage"]["prompt_tokens"])

    async def calibrate(self, context: int) -> int:
        """Filler words that make a prompt of exactly `context` tokens (to the tokenizer's granularity)."""
        if context in self.filler_words:
            return self.filler_words[context]
        base = await self.count_tokens(0)
        probe = max(1, context - base)
        per_word = (await self.count_tokens(probe) - base) / probe or 1.0
        words = max(0, round((context - base) / per_word))
        for _ in range(8):  # walk to the exact count; tokenizers are not quite linear
            count = await self.count_tokens(words)
            if count == context or words == 0:
                break
            step = max(1, round(abs(context - count) / per_word))
            words = max(0, words + step if count < context else words - step)
        self.filler_words[context] = words
        return words

    async def request(self, words: int, messages: list[dict[str, str]] | None = None,
                      tools: list[dict[str, Any]] | None = None) -> RequestResult:
        """One timed stream: `words` filler words under a unique head, or the given messages (and tools), as an
        agent sends them (tools/bench/fleet.py)."""
        self.nonce += 1
        body = {
            "model": self.model, "messages": messages or self.messages(words, self.nonce), "stream": True,
            **({"tools": tools} if tools else {}),
            "stream_options": {"include_usage": True},
            # A fixed output length: vLLM's own extensions, ignored by servers that lack them.
            "max_tokens": self.output_tokens, "min_tokens": self.output_tokens, "ignore_eos": True,
        }
        result = RequestResult(start=time.perf_counter())
        try:
            async with self.session.post(f"{self.base_url}/chat/completions", headers=self.headers,
                                         data=StampedBody(json.dumps(body).encode(), result),
                                         timeout=self.timeout) as response:
                if response.status != 200:
                    result.error = http_error(response.status, await response.read())
                    return result
                if response.content_type == "application/json":
                    result.error = short("the server answered with one JSON body, not a stream (does it support "
                                         f"\"stream\": true?): {(await response.read()).decode('utf-8', 'replace')}")
                    return result
                await self._read_stream(response, result)
        except TimeoutError:
            result.error = "timeout"
        except aiohttp.ClientPayloadError as error:
            result.error = short(f"connection broken mid-stream after {result.token_chunks} token(s): {error}")
        except aiohttp.ClientError as error:
            where = f" after {result.token_chunks} token(s)" if result.token_chunks else ""
            result.error = short(f"connection failed{where}: {error.__class__.__name__}: {error}")
        finally:
            result.end = time.perf_counter()
        return result

    @staticmethod
    async def _read_stream(response: aiohttp.ClientResponse, result: RequestResult) -> None:
        await read_stream(response.content.iter_any(), result, time.perf_counter)


async def read_stream(chunks: AsyncIterator[bytes], result: RequestResult, clock: Callable[[], float]) -> None:
    """Every event of a stream's reads onto the result, each stamped when its read arrived."""
    parser, reading = SseParser(), True
    # Read to the end even after [DONE] or an error, so the connection goes back to the pool.
    async for chunk in chunks:
        if reading:
            now = clock()
            try:
                events = parser.feed(chunk)
            except LineTooLongError as error:
                result.error, reading = f"unparseable stream: {error}", False
                continue
            for data in events:
                if not take_event(result, data, now):
                    reading = False
                    break
    if reading:
        data = parser.close()
        if data is not None:
            take_event(result, data, clock())
    if result.error is None:
        result.error = _incomplete(result)


def _incomplete(result: RequestResult) -> str | None:
    """Why a stream that raised nothing is still no answer: cut short, or empty."""
    if not result.done:
        return (f"truncated stream: it ended after {result.token_chunks} token(s) "
                "without data: [DONE] (the server or a proxy closed it early)")
    if result.token_chunks == 0:
        return "no token in the stream: it ended with data: [DONE] before any chunk carried output"
    return None


class CalibrationError(Exception):
    """The server refused the requests that measure a prompt's length."""
