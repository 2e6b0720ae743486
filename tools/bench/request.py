"""One OpenAI-compatible endpoint: prompts calibrated to an exact token count, and streamed, timed requests.

What a request records follows `vllm bench serve` 0.33 (vllm/benchmarks/lib/endpoint_request_func.py,
`async_request_openai_chat_completions` and `_choice_has_streamed_output`): the first token is the first
chunk whose delta streams output, including a token that decodes to "" (a `content` key without `role`),
but not the role-only chunk that opens the stream; inter-token latencies are the gaps between such chunks;
the last token is the last such chunk, so a late usage chunk or [DONE] does not stretch TPOT. Unlike it, a
reasoning-only reply counts its `reasoning` tokens, and an error event inside the stream fails the request.

Whatever the server sends, a request ends with a result, never an exception: every body is read to a cap (an
error's to ERROR_BODY_BYTES, a stream's to a size past its max_tokens), a stream is read up to `data: [DONE]` and
not on, every field is checked before it is used (`usage: null`, `choices` as an object, a count that is a string,
Infinity or negative is the request's error), and what the server said is quoted through the project's one
sanitizer (components/settings/text.py), so no byte of it reaches the terminal as a control.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from components.settings.text import one_line
from examples.agent import DROPPED_REASON_HEADER, ERROR_BODY_BYTES, dropped_hint, json_kind
from tools.bench.sse import LineTooLongError, SseParser

FILLER = "hello "
ERROR_TEXT_LIMIT = 300
STREAM_BASE_BYTES = 64 * 1024
STREAM_BYTES_PER_TOKEN = 4096
"""A stream's cap is the base plus this per max_tokens: vLLM's chunk for one token is about 250 bytes."""
EXTRA_CHUNKS = 16
"""Token chunks past max_tokens a stream may carry before it is a runaway (max_tokens is a bound; vLLM sends at
most one chunk per token)."""
AFTER_DONE_BYTES = 4096
AFTER_DONE_SECONDS = 1.0
"""After [DONE] only the body's end may follow: this much, this soon, else the connection is dropped, not read."""
MAX_COUNT = 1 << 31
"""A token count past this is no count a server has."""
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
    return one_line(text, ERROR_TEXT_LIMIT)


class UntrustedFieldError(ValueError):
    """A field of the server's answer is not what an OpenAI-compatible server sends there."""


def _no_constant(name: str) -> None:
    raise UntrustedFieldError(f"a non-finite number ({name})")


def loads(data: bytes) -> Any:
    """JSON from the server: UTF-8, finite numbers, nested within reason; UntrustedFieldError (a ValueError)
    otherwise."""
    try:
        return json.loads(data.decode(), parse_constant=_no_constant)
    except RecursionError:
        raise UntrustedFieldError("JSON nested too deep") from None


def count(value: Any, what: str) -> int | None:
    """A token count from the server: a whole number from 0 to MAX_COUNT, or null."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        shown = json.dumps(value)[:40] if isinstance(value, (int, float, str, bool)) else json_kind(value)
        raise UntrustedFieldError(f"{what} is {shown}, not a token count")
    return value


async def bounded_body(response: aiohttp.ClientResponse, limit: int = ERROR_BODY_BYTES) -> bytes:
    """Up to `limit` bytes of the body; a longer one is cut there and its connection dropped, not read on."""
    parts, size = [], 0
    async for chunk in response.content.iter_chunked(limit):
        parts.append(chunk)
        size += len(chunk)
        if size >= limit:
            response.close()
            break
    return b"".join(parts)[:limit]


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
        event = loads(data)
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError and UntrustedFieldError alike
        why = f" ({error})" if isinstance(error, UntrustedFieldError) else ""
        result.error = short(f"unparseable stream event{why}: {data[:ERROR_TEXT_LIMIT].decode('utf-8', 'replace')}")
        return False
    if not isinstance(event, dict):
        result.error = short(f"stream event is not a JSON object: {data[:ERROR_TEXT_LIMIT].decode('utf-8', 'replace')}")
        return False
    try:
        return _take_fields(result, event, now)
    except UntrustedFieldError as error:
        result.error = short(f"malformed stream event: {error}")
        return False


def _take_fields(result: RequestResult, event: dict[str, Any], now: float) -> bool:
    if event.get("error"):
        # vLLM reports a failure inside an open stream as an event with an error object.
        error = event["error"]
        message = error.get("message", error) if isinstance(error, dict) else error
        result.error = short(f"error event: {message}")
        return False
    choices = event.get("choices")
    if choices is not None and not isinstance(choices, list):
        raise UntrustedFieldError(f"choices is {json_kind(choices)}, not an array")
    if choices and isinstance(choices[0], dict) and streams_output(choices[0].get("delta")):
        if result.last_token is None:
            result.first_token = now
        else:
            result.itl.append(now - result.last_token)
        result.last_token = now
        result.token_chunks += 1
    usage = event.get("usage")
    if usage is not None and not isinstance(usage, dict):
        raise UntrustedFieldError(f"usage is {json_kind(usage)}, not an object")
    if usage:
        result.prompt_tokens = count(usage.get("prompt_tokens"), "usage.prompt_tokens") or 0
        completion = count(usage.get("completion_tokens"), "usage.completion_tokens")
        if completion is not None:
            result.usage_tokens = completion
    return True


def http_error(status: int, body: bytes, headers: Mapping[str, str] | None = None) -> str:
    """An HTTP error in the server's own words: vLLM's {"error": {"message", "type"}} when it is that; a request the
    gateway's picker dropped says its reason (the picker's header, examples/agent.py DROPPED_REASONS) and what to
    do, whatever its body says."""
    text = body[:ERROR_BODY_BYTES].decode("utf-8", "replace").strip()
    try:
        error = loads(text.encode()).get("error")
    except (ValueError, AttributeError):
        error = None
    said = text
    kind = ""
    if isinstance(error, dict) and error.get("message"):
        kind = f" {error['type']}" if error.get("type") else ""
        said = str(error["message"])
    dropped = (headers or {}).get(DROPPED_REASON_HEADER)
    if dropped:
        # The hint comes first: a long body must not cut it off the line.
        return f"HTTP {status}, dropped by the gateway ({one_line(dropped, 80)}): {dropped_hint(dropped)}; " + short(
            f"it said: {said}")
    return short(f"HTTP {status}{kind}: {said}")


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
                    tokens = count(loads(await bounded_body(response))["count"], "count")
                    if tokens is not None:
                        return tokens
        except (aiohttp.ClientResponseError, ValueError, KeyError, TypeError):
            pass
        async with self.session.post(f"{self.base_url}/chat/completions", headers=self.headers,
                                     timeout=self.timeout,
                                     json={"model": self.model, "messages": messages, "max_tokens": 1}) as response:
            body = await bounded_body(response)
            if response.status != 200:
                raise CalibrationError(http_error(response.status, body, response.headers),
                                       dropped=DROPPED_REASON_HEADER in response.headers)
            try:
                usage = loads(body)["usage"]
                tokens = count(usage["prompt_tokens"], "usage.prompt_tokens") if isinstance(usage, dict) else None
            except UntrustedFieldError as error:
                raise CalibrationError(short(f"its answer's {error}")) from None
            except (ValueError, KeyError, TypeError):
                tokens = None
            if tokens is None:
                raise CalibrationError(short("its answer has no usage.prompt_tokens: "
                                             + body[:ERROR_TEXT_LIMIT].decode("utf-8", "replace")))
            return tokens

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
                    result.error = http_error(response.status, await bounded_body(response), response.headers)
                    return result
                if response.content_type == "application/json":
                    said = (await bounded_body(response))[:ERROR_TEXT_LIMIT].decode("utf-8", "replace")
                    result.error = short("the server answered with one JSON body, not a stream (does it support "
                                         f"\"stream\": true?): {said}")
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

    async def _read_stream(self, response: aiohttp.ClientResponse, result: RequestResult) -> None:
        await read_stream(response.content.iter_any(), result, time.perf_counter,
                          limit_bytes=stream_limit(self.output_tokens), max_chunks=self.output_tokens + EXTRA_CHUNKS)
        if not (result.done and await _only_the_end_follows(response)):
            response.close()  # not read on: the connection is dropped, not put back in the pool


def stream_limit(max_tokens: int) -> int:
    """The bytes a stream of max_tokens may take before it is a runaway."""
    return STREAM_BASE_BYTES + STREAM_BYTES_PER_TOKEN * max_tokens


async def _only_the_end_follows(response: aiohttp.ClientResponse) -> bool:
    """After the stream's last event: whether the body ends (a few bytes, at once), so the connection can go back
    to the pool; a server that goes on is not read on."""
    if response.content.at_eof():
        return True
    try:
        rest = await asyncio.wait_for(response.content.read(AFTER_DONE_BYTES + 1), AFTER_DONE_SECONDS)
        return len(rest) <= AFTER_DONE_BYTES and (await asyncio.wait_for(response.content.read(1),
                                                                        AFTER_DONE_SECONDS)) == b""
    except (TimeoutError, aiohttp.ClientError):
        return False


async def read_stream(chunks: AsyncIterator[bytes], result: RequestResult, clock: Callable[[], float],
                      limit_bytes: int | None = None, max_chunks: int | None = None) -> None:
    """A stream's events onto the result, each stamped when its read arrived, up to `data: [DONE]` (or the first
    error) and no further; past `limit_bytes` or `max_chunks` token chunks it is a runaway, and stops."""
    parser, size = SseParser(), 0
    async for chunk in chunks:
        now = clock()
        size += len(chunk)
        if limit_bytes is not None and size > limit_bytes:
            result.error = (f"a runaway stream: over {limit_bytes:,} bytes without data: [DONE] "
                            "(the cap for its max_tokens)")
            return
        try:
            events = parser.feed(chunk)
        except LineTooLongError as error:
            result.error = f"unparseable stream: {error}"
            return
        for data in events:
            if not take_event(result, data, now):
                if result.error is None:
                    result.error = _incomplete(result)
                return
            if max_chunks is not None and result.token_chunks > max_chunks:
                result.error = (f"a runaway stream: more than {max_chunks:,} token chunks "
                                f"(max_tokens {max_chunks - EXTRA_CHUNKS:,})")
                return
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
    """The server refused the requests that measure a prompt's length; `dropped`: the gateway's picker dropped them
    (so the key and the model are not what to check)."""

    def __init__(self, message: str, dropped: bool = False):
        super().__init__(message)
        self.dropped = dropped
