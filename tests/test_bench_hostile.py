"""tools.bench's readers against servers that attack their client (dev/fake_openai_server.py HOSTILE_ANSWERS, each a
real HTTP server on 127.0.0.1, and Hypothesis-made streams and bodies): every request ends with a result, never an
exception; a body is read to its cap, a stream up to `data: [DONE]` and not on; a field that is not what an
OpenAI-compatible server sends (`choices` an object, a count that is Infinity, a string or negative) is the
request's error in one inert line; `usage: null` is tolerated."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.settings.text import unprintable
from dev.fake_openai_server import FakeOpenAIServer
from tests.test_agent_example import serve  # noqa: F401 - the fixture: serve(**FakeTiming fields)
from tools.bench import cli, fleet
from tools.bench.request import (
    EXTRA_CHUNKS,
    Endpoint,
    RequestResult,
    http_error,
    read_stream,
    stream_limit,
    take_event,
)

# What a terminal obeys or shows reordered: any control, format or separator character but the space.
HOSTILE_TEXT = "\x1b]0;owned\x07\x1b[2J\r\x00\u202etxt.exe\u2066\u200b\u2028\ud800\x9b"


def inert(text: str | None) -> bool:
    return text is None or unprintable(text) is None


def ask(server: FakeOpenAIServer, output_tokens: int = 4, timeout: float = 30) -> RequestResult:
    async def one() -> RequestResult:
        async with aiohttp.ClientSession() as session:
            return await Endpoint(session, server.url, "k", "m", output_tokens, timeout).request(1)
    return asyncio.run(one())


@pytest.mark.parametrize(("attack", "said"), [
    ("choices_object", "malformed stream event: choices is an object, not an array"),
    ("usage_infinity", "unparseable stream event (a non-finite number (Infinity))"),
    ("usage_string", 'malformed stream event: usage.prompt_tokens is "many", not a token count'),
    ("usage_negative", "malformed stream event: usage.completion_tokens is -5, not a token count"),
])
def test_a_field_no_server_sends_so_is_the_requests_error_in_one_line(serve, attack, said):  # noqa: F811
    result = ask(serve(hostile=attack))
    assert result.error is not None and result.error.startswith(said), result.error
    assert inert(result.error)


def test_a_null_usage_is_no_usage():
    result = RequestResult(start=0)
    assert take_event(result, b'{"choices":[{"delta":{"content":"x"}}],"usage":null}', 1.0)
    assert result.usage_tokens is None and result.token_chunks == 1 and result.error is None


def test_a_2_gib_error_body_is_read_to_its_cap(serve):  # noqa: F811
    result = ask(serve(hostile="huge_error"))
    assert result.error is not None and result.error.startswith("HTTP 503: \\x1b]0;owned\\x07xxx"), result.error
    assert len(result.error) <= 300


def test_a_stream_that_goes_on_after_done_is_not_read_on(serve):  # noqa: F811
    result = ask(serve(hostile="after_done"))
    assert result.done and result.error is None and result.token_chunks == 1


def test_a_stream_past_its_cap_is_a_runaway_not_read_to_the_timeout(serve):  # noqa: F811
    result = ask(serve(hostile="comments"))
    assert result.error == (f"a runaway stream: over {stream_limit(4):,} bytes without data: [DONE] "
                            "(the cap for its max_tokens)")


def test_more_token_chunks_than_max_tokens_is_a_runaway():
    async def chunks():
        for _ in range(100):
            yield b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n'

    result = RequestResult(start=0)
    asyncio.run(read_stream(chunks(), result, lambda: 1.0, max_chunks=4 + EXTRA_CHUNKS))
    assert result.error == f"a runaway stream: more than {4 + EXTRA_CHUNKS} token chunks (max_tokens 4)"


def test_reading_stops_at_done():
    read = []

    async def chunks():
        for index in range(1000):
            read.append(index)
            first = b'data: {"choices":[{"delta":{"content":"x"}}]}\n\ndata: [DONE]\n\n'
            yield first if index == 0 else b"data: {}\n\n"

    result = RequestResult(start=0)
    asyncio.run(read_stream(chunks(), result, lambda: 1.0))
    assert result.done and result.error is None and read == [0]


def test_a_gateway_drop_says_its_reason_and_what_to_do_whatever_its_body():
    said = http_error(503, b"anything at all\x1b[2J", {"x-llm-d-request-dropped-reason": "rejected-no-endpoints"})
    assert said.startswith("HTTP 503, dropped by the gateway (rejected-no-endpoints): no replica was ready: the "
                           "gateway held it")
    assert said.endswith("it said: anything at all\\x1b[2J")
    odd = http_error(429, b"", {"x-llm-d-request-dropped-reason": "\x1b]0;owned\x07"})
    assert "the gateway dropped it (\\x1b]0;owned\\x07)" in odd and inert(odd)


def test_the_fleet_says_each_endpoints_first_failure_in_one_inert_line():
    failed = RequestResult(start=0, error=http_error(503, b"held too long", {
        "x-llm-d-request-dropped-reason": "rejected-no-endpoints"}))
    fine = RequestResult(start=0, first_token=0.1, done=True, token_chunks=3)
    result = fleet.FleetResult(f"gateway{HOSTILE_TEXT}", "http://x/v1", [(0, 1, fine), (0, 0, failed), (1, 0, fine)])
    shown = fleet.render([result], fleet.FleetOptions(agents=2, turns=2))
    [line] = [line for line in shown.splitlines() if "failed" in line]
    assert "1 of 3 call(s) failed; the first: HTTP 503, dropped by the gateway (rejected-no-endpoints)" in line
    assert all(inert(each) for each in shown.splitlines())


# Hypothesis: any bytes a server may send, in any reads, and JSON events of every shape where chunks go.
_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                    max_size=4), max_leaves=12)
_EVENT = st.fixed_dictionaries({}, optional={"choices": _JSON | st.lists(st.fixed_dictionaries(
    {"delta": _JSON | st.fixed_dictionaries({}, optional={"content": _JSON, "role": _JSON})})),
    "usage": _JSON | st.fixed_dictionaries({}, optional={"prompt_tokens": _JSON, "completion_tokens": _JSON}),
    "error": _JSON})


def _encoded(event: dict) -> bytes:
    return b"data: " + json.dumps(event).encode() + b"\n\n"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reads=st.lists(st.binary(max_size=200) | _EVENT.map(_encoded) | st.sampled_from(
    [b"data: [DONE]\n\n", b"\r", b"\n", b"data: {\n", b": comment\n", f"data: {HOSTILE_TEXT}\n\n".encode(
        "utf-8", "surrogatepass")]), max_size=12))
def test_no_stream_raises_and_every_error_is_one_inert_line(reads):
    async def chunks():
        for read in reads:
            yield read

    result = RequestResult(start=0)
    asyncio.run(read_stream(chunks(), result, lambda: 1.0, limit_bytes=2000, max_chunks=8))
    assert result.error is not None or (result.done and result.token_chunks > 0)
    assert inert(result.error) and "\n" not in (result.error or "")
    assert result.usage_tokens is None or 0 <= result.usage_tokens <= 1 << 31


@settings(max_examples=150, deadline=None)
@given(status=st.integers(100, 599), body=st.binary(max_size=300) | _JSON.map(lambda v: json.dumps(v).encode()) |
       st.builds(lambda e: json.dumps({"error": e}).encode(), _JSON),
       reason=st.none() | st.text(max_size=30))
def test_no_error_body_raises_and_each_is_one_inert_line(status, body, reason):
    said = http_error(status, body, {} if reason is None else {"x-llm-d-request-dropped-reason": reason})
    assert inert(said) and said.startswith(f"HTTP {status}")


def test_at_zero_past_the_ttl_the_fleet_says_the_pickers_reason_in_one_line(serve, capsys):  # noqa: F811
    from tests.flow_control_fake import FlowControlFake

    picker = FlowControlFake(serve().url, ttl_seconds=0.2, ready_after=None).start()
    try:
        code = cli.main(["--agent-fleet", "--base-url", picker.url, "--api-key", "k", "--agents", "1", "--turns", "1",
                         "--system-tokens", "16", "--tools", "1", "--output-tokens", "2", "--timeout", "30"])
    finally:
        picker.stop()
    printed = capsys.readouterr()
    assert code == 2 and "Traceback" not in printed.err
    [line] = printed.err.strip().splitlines()
    assert line.startswith(f"error: {picker.url} refused the requests that size the prompts: HTTP 503, dropped by "
                           "the gateway (rejected-no-endpoints): no replica was ready: the gateway held it")
    assert "Check --api-key" not in line  # the key is not what to check
