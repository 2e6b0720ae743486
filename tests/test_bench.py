"""The bench against a vLLM-like streaming server with known timings on 127.0.0.1.

Timing assertions are causal bounds only: a loaded machine can make a reply later, never earlier, so the
client's clock (started before the server reads a request, stopped after a chunk arrives) bounds the
server's own record from above. Definitions are checked exactly on replayed streams with given timestamps.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from dev import bench_client_ceiling
from dev import fake_openai_server as fake_server
from dev.fake_openai_server import FakeOpenAIServer, FakeTiming
from tests import vllm_venv
from tools.bench import cli, reference, report, results
from tools.bench.request import Endpoint, RequestResult, read_stream, take_event
from tools.bench.results import CellResult, RepStats, rep_stats
from tools.bench.sse import SseParser
from tools.bench.sweep import SweepOptions, over_kv, run_rep, sweep

# One request: 20 ms to the first token + 10 x 4 ms. Every bound below is causal (the server sleeps at least
# this long, the client reads no earlier), so it holds for any timing; short ones only make the runs quick.
TTFT, TPOT, OUTPUT = 0.02, 0.004, 11


@pytest.fixture
def server(request):
    timing = getattr(request, "param", FakeTiming(ttft=TTFT, tpot=TPOT))
    fake = FakeOpenAIServer(timing).start_in_thread()
    yield fake
    fake.stop()


async def _with_endpoint(url: str, work, timeout: float = 30, output: int = OUTPUT):
    async with aiohttp.ClientSession() as session:
        return await work(Endpoint(session, url, "key", "google/gemma-4-E2B-it", output, timeout))


def run_sweep(url: str, options: SweepOptions, timeout: float = 30) -> list[CellResult]:
    return asyncio.run(_with_endpoint(url, lambda endpoint: sweep(endpoint, options), timeout,
                                      options.output_tokens))


def one_request(url: str, timeout: float = 30) -> RequestResult:
    async def work(endpoint):
        return await endpoint.request(await endpoint.calibrate(128))
    return asyncio.run(_with_endpoint(url, work, timeout))


def options(**overrides) -> SweepOptions:
    values = dict(contexts=[128], clients=[1, 4], reps=2, requests_per_client=2, output_tokens=OUTPUT)
    values.update(overrides)
    return SweepOptions(**values)


def replay(*reads: tuple[float, bytes], start: float = 0.0) -> RequestResult:
    """A stream's reads, each arriving at the given time: the request's figures follow from them alone."""
    result = RequestResult(start=start)
    times = iter([t for t, _ in reads] + [reads[-1][0]] * 2)

    async def chunks():
        for _, data in reads:
            yield data

    asyncio.run(read_stream(chunks(), result, lambda: next(times)))
    return result


def event(payload: dict | str) -> bytes:
    return b"data: " + (payload if isinstance(payload, str) else json.dumps(payload)).encode() + b"\n\n"


ROLE = event({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
DONE = event("[DONE]")


def token(text: str, **extra) -> bytes:
    return event({"choices": [{"index": 0, "delta": {"content": text, **extra}}]})


def usage(completion: int, prompt: int = 12) -> bytes:
    return event({"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion}})


# --- metric definitions, on replayed streams --------------------------------------------------------------

def test_tpot_runs_from_the_first_to_the_last_token_not_to_a_late_usage_chunk():
    # 11 tokens 10 ms apart from t=1.0; usage 200 ms after the last token, [DONE] later still.
    reads = [(1.0, ROLE + token("a"))] + [(1.0 + 0.01 * i, token("b")) for i in range(1, 11)]
    result = replay(*reads, (1.3, usage(11)), (1.31, DONE))
    assert result.error is None and result.output_tokens == 11
    assert result.tpot == pytest.approx(0.010)
    assert result.ttft == pytest.approx(1.0)
    assert result.itl == pytest.approx([0.01] * 10)


def test_a_first_token_that_decodes_to_nothing_is_the_first_token():
    # vLLM sends the role chunk with the first token; that token decodes to "" here (a special token).
    result = replay((0.5, ROLE + token("")), (0.6, token("x")), (0.7, usage(2) + DONE))
    assert result.ttft == pytest.approx(0.5)
    assert (result.token_chunks, result.output_tokens, result.error) == (2, 2, None)


def test_a_role_chunk_sent_before_any_token_is_not_the_first_token():
    # Some proxies send the role at once: the first token is still the first chunk that streams output.
    result = replay((0.01, ROLE), (0.4, token("a")), (0.5, token("b")), (0.6, usage(2) + DONE))
    assert result.ttft == pytest.approx(0.4) and result.token_chunks == 2


def test_a_reasoning_only_reply_counts_its_tokens():
    thinking = event({"choices": [{"delta": {"reasoning": "hm"}}]})
    result = replay((0.2, ROLE + thinking), (0.3, thinking), (0.4, usage(2) + DONE))
    assert (result.error, result.ttft, result.output_tokens) == (None, pytest.approx(0.2), 2)
    assert replay((0.2, event({"choices": [{"delta": {"reasoning_content": "x"}}]}) + DONE)).token_chunks == 1


def test_an_empty_delta_or_usage_chunk_is_not_a_token():
    finish = event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    result = replay((0.1, ROLE + token("a")), (0.2, token("b")), (0.9, finish + usage(2) + DONE))
    assert result.token_chunks == 2 and result.tpot == pytest.approx(0.1)


def test_a_stream_without_usage_counts_its_token_chunks():
    result = replay((0.1, ROLE + token("a")), (0.2, token("b")), (0.3, token("c") + DONE))
    assert (result.error, result.usage_tokens, result.output_tokens) == (None, None, 3)
    assert result.tpot == pytest.approx(0.1)


def test_a_stream_cut_short_is_named_truncated():
    result = replay((0.1, ROLE + token("a")), (0.2, token("b")))
    assert result.error.startswith("truncated stream: it ended after 2 token(s) without data: [DONE]")
    assert "usage" not in result.error


def test_an_in_stream_error_fails_the_request():
    error = event('{"error": {"message": "The model ran out of KV cache", "type": "BadRequestError", '
                  '"param": null, "code": 400}}')
    result = replay((0.1, ROLE + token("a")), (0.2, error + DONE))
    assert result.error == "error event: The model ran out of KV cache"


def test_a_done_with_spaces_still_ends_the_stream():
    assert replay((0.1, ROLE + token("a")), (0.2, usage(1) + event(" [DONE] "))).error is None


def test_an_endless_line_stops_the_read_instead_of_filling_memory():
    result = replay((0.1, ROLE + token("a")), (0.2, b"data: " + b"x" * (1 << 20)), (0.3, b"y" * 10))
    assert result.error == "unparseable stream: a stream line over 1,048,576 bytes without a line end"


def test_a_stream_with_no_token_is_an_error():
    assert replay((0.1, ROLE + usage(0) + DONE)).error.startswith("no token in the stream")


def test_broken_events_are_the_requests_error():
    result = RequestResult(start=0.0)
    assert not take_event(result, b'{"choices": [', 1.0)
    assert result.error == 'unparseable stream event: {"choices": ['
    result = RequestResult(start=0.0)
    assert not take_event(result, b"[1, 2]", 1.0) and result.error == "stream event is not a JSON object: [1, 2]"
    result = RequestResult(start=0.0)
    assert not take_event(result, b'{"a": "\xff"}', 1.0)  # not UTF-8: an error, never a traceback
    assert result.error.startswith("unparseable stream event: {")
    result = RequestResult(start=0.0)
    take_event(result, b"{" + b"x" * 1000, 1.0)
    assert len(result.error) == 300


# --- the event-stream format ------------------------------------------------------------------------------

@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\u0085", "\x0b", "\x0c", "\x1c"])
def test_unicode_line_separators_inside_a_token_are_not_line_ends(separator):
    # str.splitlines (and so httpx's aiter_lines) ends a line at each of these; the SSE format does not.
    payload = json.dumps({"choices": [{"delta": {"content": f"a{separator}b"}}]}, ensure_ascii=False)
    parser = SseParser()
    [data] = parser.feed(f"data: {payload}\n\n".encode())
    assert json.loads(data)["choices"][0]["delta"]["content"] == f"a{separator}b"


@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r"], ids=["LF", "CRLF", "CR"])
def test_lines_end_at_cr_lf_or_crlf_however_the_reads_cut_them(ending):
    stream = f": ping{ending}event: message{ending}data:{{\"a\":{ending}data: 1}}{ending}{ending}" \
             f"data: [DONE]{ending}{ending}data: tail".encode()
    for cut in range(1, len(stream)):  # every place a read can end, including between CR and LF
        parser = SseParser()
        events = parser.feed(stream[:cut]) + parser.feed(stream[cut:])
        assert events == [b'{"a":\n1}', b"[DONE]"], cut
        assert parser.close() == b"tail"  # a stream that ends without the final blank line
        assert parser.close() is None


@pytest.mark.parametrize("read", [b"data: {}\n\n", b"data: a\n\ndata: b\n\n", b"data: a\r\n\r\n",
                                  b"data: a\ndata: b\n\n", b"data:  two spaces\n\n", b": comment\n\n",
                                  b"data: a\n\n\n"])
def test_a_whole_event_in_one_read_parses_as_it_does_byte_by_byte(read):
    whole, byte_by_byte = SseParser(), SseParser()
    assert whole.feed(read) == [event for i in range(len(read)) for event in byte_by_byte.feed(read[i:i + 1])]
    assert whole.close() == byte_by_byte.close()


def test_a_cr_then_an_lf_in_the_next_read_is_one_line_end_not_two():
    parser = SseParser()
    assert parser.feed(b"data: a\r") == []
    assert parser.feed(b"\n") == []  # the LF of the CRLF: no blank line, so no event yet
    assert parser.feed(b"\r\n") == [b"a"]


# --- against the vLLM-like server --------------------------------------------------------------------------

def test_measured_timing_is_consistent_with_what_the_server_recorded(server):
    cells = run_sweep(server.url, options())
    assert [(c.context, c.clients, c.status, c.errors) for c in cells] == [(128, 1, "ok", 0), (128, 4, "ok", 0)]
    request_seconds = TTFT + (OUTPUT - 1) * TPOT
    for cell in cells:
        assert len(cell.reps) == 2 and all(rep.requests == cell.clients * 2 for rep in cell.reps)
        assert all(rep.prompt_tokens == [128] * rep.requests for rep in cell.reps)
        assert cell.median_ttft_ms >= TTFT * 1000  # the server sleeps ttft before the first token
        assert cell.p90_ttft_ms >= cell.median_ttft_ms
        assert cell.aggregate_tok_s <= cell.clients * OUTPUT / request_seconds
        assert all(len(rep.itl_ms) == rep.requests * (OUTPUT - 1) for rep in cell.reps)
    # Against the server's own record of each request (the prompt's unique head is its nonce; 1 is the warm-up).
    records = {record.content.split(" ", 1)[0]: record for record in server.streams}
    measured_heads = {f"[{nonce:08d}]" for nonce in range(2, 2 + 2 * 2 * (1 + 4))}
    assert set(records) == measured_heads | {"[00000001]"}
    for record in records.values():
        assert len(record.token_times) == OUTPUT
        assert record.token_times[0] - record.received >= TTFT
    client_ttft_s = sum(value for cell in cells for rep in cell.reps for value in rep.ttft_ms) / 1000
    server_ttft_s = sum(records[head].token_times[0] - records[head].received for head in measured_heads)
    assert client_ttft_s >= server_ttft_s
    # A repetition lasts at least as long as its requests, one after another on each client, took the server.
    for cell in cells:
        for rep in cell.reps:
            assert rep.duration_s >= request_seconds * rep.requests / cell.clients


@pytest.mark.parametrize("server", [FakeTiming(ttft=0.01, tpot=0.001, tokens=("a\u2028b", "\u2029", "\u0085", "c"))],
                         indirect=True)
def test_tokens_with_unicode_line_separators_stream_whole(server):
    result = one_request(server.url)
    assert (result.error, result.token_chunks, result.output_tokens) == (None, OUTPUT, OUTPUT)


def test_the_server_writes_vllms_json_raw_utf8_one_token_per_chunk():
    # model_dump_json: compact, U+2028 as its three UTF-8 bytes, never the \u2028 escape json.dumps writes.
    fake = FakeOpenAIServer(FakeTiming(ttft=0, tpot=0, tokens=("a\u2028b",))).start_in_thread()
    try:
        async def raw():
            async with aiohttp.ClientSession() as session, session.post(
                    f"{fake.url}/chat/completions", json={"messages": [{"content": "hi"}], "stream": True,
                                                           "max_completion_tokens": 2,
                                                           "stream_options": {"include_usage": True}}) as response:
                return await response.read()
        body = asyncio.run(raw())
    finally:
        fake.stop()
    events = [line for line in body.split(b"\n\n") if line]
    assert "a\u2028b".encode() in body and b"\\u2028" not in body
    assert [json.loads(e[6:])["choices"][0]["delta"] for e in events[:3]] == [
        {"role": "assistant", "content": ""}, {"content": "a\u2028b"}, {"content": "a\u2028b"}]
    assert json.loads(events[3][6:])["choices"] == [] and json.loads(events[3][6:])["usage"]["completion_tokens"] == 2
    assert events[-1] == b"data: [DONE]"
    assert b'"choices":[{"index":0,"delta":{"content":"a' in body  # compact separators


def test_ttft_starts_when_the_request_goes_to_the_socket_before_the_server_reads_it(server):
    result = one_request(server.url)
    record = server.streams[-1]
    # Stamped just before the write, so it precedes the server's read: the bound stays causal.
    assert result.start <= result.sent <= record.received
    assert result.ttft == result.first_token - result.sent >= record.token_times[0] - record.received


VLLM_CHUNKS = """
from vllm.entrypoints.generate.base.protocol import DeltaMessage
from vllm.entrypoints.openai.chat_completion.protocol import (ChatCompletionResponseStreamChoice as Choice,
                                                              ChatCompletionStreamResponse as Response)
from vllm.entrypoints.serve.engine.protocol import UsageInfo
def chunk(choices, usage=None):
    response = Response(id="chatcmpl-1", object="chat.completion.chunk", created=1, model="m", choices=choices)
    if usage:
        response.usage = usage
    return response.model_dump_json(exclude_unset=True, exclude_none=not response.choices)
print(chunk([Choice(index=0, delta=DeltaMessage(role="assistant", content=""), logprobs=None, finish_reason=None)]))
print(chunk([Choice(index=0, delta=DeltaMessage(content="a\u2028b"), logprobs=None, finish_reason=None,
                    token_ids=None)]))
print(chunk([], UsageInfo(prompt_tokens=3, completion_tokens=1, total_tokens=4)))
"""


def test_the_servers_chunks_are_byte_for_byte_vllms_own():
    # vLLM 0.33's protocol models and the serializer call of its chat stream (chat_completion/serving.py),
    # in the vLLM venv (tests/vllm_venv.py: skipped where scripts/test.sh has not built it).
    completed = vllm_venv.run(["-c", VLLM_CHUNKS], timeout=300)
    assert completed.returncode == 0, completed.stderr.decode()[-2000:]
    theirs = completed.stdout.decode().split("\n")[:-1]  # not splitlines(): it would split at the U+2028
    chunker = fake_server._Chunker(FakeTiming(tokens=("a\u2028b",)), "chatcmpl-1", "m")
    chunker.created = 1
    ours = [chunker._response([fake_server.StreamChoice(index=0, delta=fake_server.DeltaMessage(
                role="assistant", content=""), logprobs=None, finish_reason=None)]),
            chunker.token(0, last=False), chunker.usage(fake_server.UsageInfo(prompt_tokens=3, completion_tokens=1,
                                                                               total_tokens=4))]
    ours = [ours[0].decode()] + [frame.split(b"data: ", 1)[1].split(b"\n\n", 1)[0].decode() for frame in ours[1:]]
    assert ours == theirs
    # And the bench reads vLLM's own bytes: the U+2028 inside the token stays in its line.
    result = replay((0.1, "".join(f"data: {line}\n\n" for line in theirs).encode() + DONE))
    assert (result.error, result.token_chunks, result.output_tokens) == (None, 1, 1)


@pytest.mark.parametrize("server", [FakeTiming(ttft=0.01, tpot=0.001, prefill_per_token=0.0005,
                                               tpot_per_stream=0.5)], indirect=True)
def test_the_servers_first_token_waits_for_its_prefill(server):
    result = one_request(server.url)
    record = server.streams[-1]
    assert record.token_times[0] - record.received >= 0.01 + 128 * 0.0005  # the calibrated 128-token prompt
    assert result.ttft >= record.token_times[0] - record.received
    assert server.open_streams == 0  # the count that slows streams by each other is given back


@pytest.mark.parametrize("server", [FakeTiming(ttft=0.01, tpot=0.001, tokens=("", "tok"))], indirect=True)
def test_a_first_token_that_decodes_to_nothing_is_counted_against_the_server(server):
    result = one_request(server.url)
    assert (result.error, result.token_chunks, result.output_tokens) == (None, OUTPUT, OUTPUT)
    record = server.streams[-1]
    assert result.ttft >= record.token_times[0] - record.received


@pytest.mark.parametrize("server", [FakeTiming(ttft=0.2, tpot=0.001, role_at_once=True)], indirect=True)
def test_a_role_sent_at_once_does_not_make_the_first_token_early(server):
    result = one_request(server.url)
    assert result.error is None and result.ttft >= 0.2


@pytest.mark.parametrize("server", [FakeTiming(ttft=0.01, tpot=0.001, reasoning_only=True)], indirect=True)
def test_a_reasoning_only_reply_is_a_success_against_the_server(server):
    result = one_request(server.url)
    assert (result.error, result.output_tokens) == (None, OUTPUT) and result.ttft is not None


@pytest.mark.parametrize("server", [FakeTiming(ttft=0.01, tpot=0.001, usage=False)], indirect=True)
def test_a_server_that_sends_no_usage_is_counted_by_chunks_and_says_so(server):
    cells = run_sweep(server.url, options(clients=[2], reps=1, requests_per_client=2))
    [cell] = cells
    assert (cell.status, cell.errors, cell.counted_from_chunks) == ("ok", 0, 4)
    assert cell.reps[0].aggregate_tok_s > 0 and len(cell.reps[0].tpot_ms) == 4
    assert "4 request(s) streamed no usage: their output tokens are their token chunks" in report.notes(cells)


@pytest.mark.parametrize("server", [FakeTiming(ttft=0.01, tpot=0.001, truncate_every=1, cut_after=3)],
                         indirect=True)
def test_a_stream_the_server_ends_early_is_reported_truncated(server):
    result = one_request(server.url)
    assert result.error.startswith("truncated stream: it ended after 3 token(s) without data: [DONE]")


@pytest.mark.parametrize("server", [FakeTiming(ttft=0.01, tpot=0.001, ignore_stream=True)], indirect=True)
def test_a_server_that_does_not_stream_is_named_so(server):
    error = one_request(server.url).error
    assert error.startswith('the server answered with one JSON body, not a stream (does it support "stream": true?)')


@pytest.mark.parametrize("server", [FakeTiming(ttft=0.01, tpot=0.001, error_event_every=1)], indirect=True)
def test_an_error_event_from_the_server_fails_the_request(server):
    assert one_request(server.url).error == "error event: The model ran out of KV cache"


@pytest.mark.parametrize("server", [FakeTiming(ttft=0.01, tpot=0.001, usage_delay=0.05)], indirect=True)
def test_a_late_usage_chunk_is_outside_the_last_token(server):
    result = one_request(server.url)
    record = server.streams[-1]
    assert result.error is None and record.usage_time - record.token_times[-1] >= 0.05
    # The request ends after the usage left the server; the last token is stamped before the request's end.
    assert result.end - result.start >= record.usage_time - record.received
    assert result.last_token < result.end


@pytest.mark.parametrize("server", [FakeTiming(ttft=0.01, tpot=0.001, fail_every=2, fail_status=400)],
                         indirect=True)
def test_http_errors_are_counted_in_vllms_words(server):
    [cell] = run_sweep(server.url, options(clients=[4], reps=1, requests_per_client=3, warmup=False))
    assert cell.reps[0].requests == 12 and cell.errors == 6 and cell.status == "ok"
    assert cell.first_error == "HTTP 400 BadRequestError: injected failure"
    assert "128 x 4: 6 failed request(s), 0 timeout(s); first: HTTP 400 BadRequestError: injected failure" in (
        report.notes([cell]))


@pytest.mark.parametrize("server", [FakeTiming(ttft=0.01, tpot=0.001, reset_every=2, cut_after=3)], indirect=True)
def test_a_connection_reset_mid_stream_fails_that_request_only(server):
    [cell] = run_sweep(server.url, options(clients=[2], reps=1, requests_per_client=3, warmup=False))
    assert cell.reps[0].requests == 6 and cell.errors == 3
    assert cell.first_error.startswith("connection broken mid-stream after 3 token(s)")
    assert len(cell.reps[0].ttft_ms) == 3


def test_requests_come_from_one_queue_so_a_slow_request_does_not_hold_back_the_rest():
    # The first request waits until all the others are done: with one shared queue the other client does
    # them all meanwhile, so nothing starts after it. A fixed count per client would leave two requests
    # for after it.
    order: list[str] = []

    class Endpoint:
        calls = 0

        async def request(self, words):
            Endpoint.calls += 1
            number = Endpoint.calls
            order.append(f"start {number}")
            if number == 1:
                while sum(1 for entry in order if entry.startswith("end")) < 5:
                    await asyncio.sleep(0)
            else:
                await asyncio.sleep(0)
            order.append(f"end {number}")
            return RequestResult(start=0.0, end=1.0, first_token=0.5, last_token=0.9, usage_tokens=3, done=True,
                                 token_chunks=3)

    rep = asyncio.run(run_rep(Endpoint(), 0, clients=2, requests=6))
    assert rep.requests == 6 and order[-1] == "end 1"
    assert "start" not in " ".join(order[order.index("end 1"):])


def test_streams_are_read_to_the_end_so_connections_are_reused(server):
    run_sweep(server.url, options(clients=[2], reps=1, requests_per_client=3))
    assert server.chat_requests == 1 + 2 * 3
    assert server.connections <= 3  # the two clients' connections, and one the warm-up may have left


@pytest.mark.parametrize("server", [FakeTiming(ttft=0.01, tpot=0.001, spaced_json=True),
                                    FakeTiming(ttft=0.01, tpot=0.001, split_events=True),
                                    FakeTiming(ttft=0.01, tpot=0.001, line_ending="\r\n", split_events=True),
                                    FakeTiming(ttft=0.01, tpot=0.001, line_ending="\r")],
                         indirect=True, ids=["spaced-json", "events-split-across-chunks", "crlf-split", "cr"])
def test_any_valid_json_chunking_and_line_ending_of_the_stream_is_read(server):
    [cell] = run_sweep(server.url, options(clients=[2], reps=1, requests_per_client=2))
    assert (cell.status, cell.errors, cell.first_error) == ("ok", 0, None)
    assert cell.reps[0].prompt_tokens == [128] * 4
    assert len(cell.reps[0].ttft_ms) == 4 and len(cell.reps[0].tpot_ms) == 4


def test_prompts_are_calibrated_to_the_exact_token_count(server):
    [cell] = run_sweep(server.url, options(contexts=[1024], clients=[1], reps=1, requests_per_client=1))
    assert cell.summary()["mean_prompt_tokens"] == 1024


@pytest.mark.parametrize("server", [FakeTiming(ttft=0.01, tpot=0.001, tokenize=False)], indirect=True)
def test_calibration_falls_back_to_reported_usage(server):
    [cell] = run_sweep(server.url, options(contexts=[300], clients=[1], reps=1, requests_per_client=1))
    assert cell.summary()["mean_prompt_tokens"] == 300


@pytest.mark.parametrize("server", [FakeTiming(ttft=0.01, tpot=0.001, hang_every=2)], indirect=True)
def test_timeouts_are_counted(server):
    [cell] = run_sweep(server.url, options(clients=[2], reps=1, requests_per_client=2, warmup=False), timeout=0.5)
    assert cell.timeouts >= 1 and cell.errors >= cell.timeouts


# --- figures -----------------------------------------------------------------------------------------------

def test_rep_figures_are_computed_from_the_recorded_timestamps():
    results = [
        RequestResult(start=10.0, first_token=10.1, last_token=10.3, end=10.35, prompt_tokens=128, usage_tokens=11,
                      itl=[0.02] * 10, done=True),
        RequestResult(start=10.0, first_token=10.2, last_token=10.6, end=10.6, prompt_tokens=128, usage_tokens=11,
                      itl=[0.04] * 10, done=True),
        RequestResult(start=10.3, end=10.8, error="HTTP 500"),
    ]
    rep = rep_stats(results, started=10.0)
    assert rep.requests == 3 and rep.errors == 1 and rep.timeouts == 0
    assert rep.ttft_ms == pytest.approx([100.0, 200.0])
    assert rep.tpot_ms == pytest.approx([20.0, 40.0])  # (last token - first token) / (tokens - 1)
    # Good tokens over the repetition's duration, to the end of its last request, a failed one included.
    assert rep.duration_s == pytest.approx(0.8) and rep.aggregate_tok_s == pytest.approx(22 / 0.8)
    assert len(rep.itl_ms) == 20 and rep.to_json()["itl"]["count"] == 20 and "itl_ms" not in rep.to_json()

    cell = CellResult(context=128, clients=2, reps=[rep, rep_stats(results[:1], started=10.0)])
    assert cell.median_ttft_ms == pytest.approx(100.0)  # pooled over reps: 100, 200, 100
    assert cell.p90_ttft_ms == pytest.approx(200.0)
    assert cell.median_tpot_ms == pytest.approx(20.0)
    assert cell.per_stream_tok_s == pytest.approx(50.0)
    assert cell.median_itl_ms == pytest.approx(20.0)
    rates = [22 / 0.8, 11 / 0.35]
    assert cell.aggregate_tok_s == pytest.approx(sum(rates) / 2)
    assert cell.cv == pytest.approx(abs(rates[0] - rates[1]) / 2 ** 0.5 / (sum(rates) / 2))


def test_a_rep_where_every_request_failed_reports_no_rate():
    rep = rep_stats([RequestResult(start=1.0, end=2.0, error="timeout")], started=1.0)
    assert (rep.aggregate_tok_s, rep.errors, rep.timeouts, rep.ttft_ms) == (0.0, 1, 1, [])
    assert CellResult(context=128, clients=1, reps=[rep]).aggregate_tok_s is None


def _cell(context: int, clients: int, rate: float, ttft: float, tpot: float, reps: int = 1) -> CellResult:
    rep = RepStats(aggregate_tok_s=rate, duration_s=1.0, requests=clients, errors=0, timeouts=0,
                   ttft_ms=[ttft], tpot_ms=[tpot], prompt_tokens=[context])
    return CellResult(context=context, clients=clients, reps=[rep] * reps)


def test_a_rep_read_in_one_go_gives_no_per_stream_rate_instead_of_dividing_by_zero():
    # A loaded client can read every token of a stream in one read: 0 ms per token, no rate to divide.
    cell = _cell(128, 1, 100.0, 50.0, 0.0)
    cell.reps += _cell(128, 1, 100.0, 50.0, 10.0).reps + _cell(128, 1, 100.0, 50.0, 12.5).reps
    assert cell.per_stream_cv == pytest.approx(results.cv([100.0, 80.0]))
    assert _cell(128, 1, 100.0, 50.0, 0.0).per_stream_cv is None
    assert "128 x 1" in report.render([cell])


def test_the_run_ends_with_the_logs_twelve_cells_beside_it_judged_by_the_logs_cv():
    cells = [_cell(128, 64, 1496.5, 247.3, 40.0),  # the log to the digit
             _cell(128, 16, 1152.5 * 0.95, 98.8 * 1.3, 1000 / 76),  # 5% slow; TTFT 30% off its 56% cv
             _cell(1024, 4, 415.4 * 1.02, 51.5, 1000 / 109)]  # 2% fast: inside 3.4%
    text = report.render(cells)
    table = text[text.index("The build log beside this run"):]
    rows = {tuple(map(int, m.groups()[:2])): m.group(3)
            for m in re.finditer(r"^ *(\d+) x (\d+) +(.*)$", table, re.MULTILINE)}
    assert set(rows) == set(reference.LOG)  # all twelve, run or not
    assert re.search(r"1,496\.5 +1,496\.5 +1\.00x=", rows[(128, 64)])
    assert re.search(r"1,152\.5 +1,094\.9 +0\.95x-", rows[(128, 16)])
    assert re.search(r"98\.8 +128\.4 +1\.30x=", rows[(128, 16)])  # the marked cell's own 56%
    assert "1.02x=" in rows[(1024, 4)]
    assert rows[(8192, 64)].endswith("not run")
    assert text.rstrip().endswith(rows[(8192, 64)])  # the default run ends with it
    assert "3.4%" in table and "56%" in table


def test_the_log_table_is_the_build_logs():
    # shared/ sits beside the checkout (or beside the worktrees' folder): the log's own text, when it is here.
    root = Path(__file__).resolve().parents[1]
    candidates = [folder / "shared" / "reference" / "build-log.txt" for folder in (root.parent, root.parent.parent)]
    log = next((path for path in candidates if path.exists()), None)
    if log is None:
        pytest.skip(f"the build log is not beside this checkout (looked at {', '.join(map(str, candidates))})")
    text = log.read_text()
    tables = [text.index(title) for title in ("Aggregate output tokens/sec:", "Median time-to-first-token (ms):",
                                              "Per-stream tokens/sec (what one user feels):")]
    for start, metric in zip(tables, reference.METRICS, strict=True):
        rows = re.findall(r"^([\d,]+)\t(.*)$", text[start:start + 400], re.MULTILINE)[:3]
        for context_text, values in rows:
            figures = [float(v.strip("*").replace(",", "")) for v in values.split("\t")]
            context = int(context_text.replace(",", ""))
            assert [getattr(reference.LOG[(context, n)], metric) for n in reference.CLIENTS] == figures
    assert "coefficient of variation ≤3.4%" in text and "cv 56%" in text


def test_the_logs_8k_by_64_cell_runs_by_default_with_its_warning(server):
    default = options(contexts=[128, 1024, 8192], clients=[1, 4, 16, 64], output_tokens=128)
    assert default.kv_tokens == 321_344
    assert [(c, n) for c in default.contexts for n in default.clients if over_kv(c, n, default)] == [(8192, 64)]
    warnings: list[str] = []
    cells = asyncio.run(_with_endpoint(server.url, lambda endpoint: sweep(
        endpoint, options(kv_tokens=300, reps=1, requests_per_client=1), warn=warnings.append)))
    ran, over = cells
    assert (ran.status, ran.warning, over.status) == ("ok", "", "ok")
    assert over.reps and "4 x 139 = 556 tokens > the 300-token KV pool: it queues rather than serves" in over.warning
    assert warnings == [f"128 x 4: {over.warning}"]
    assert f"128 x 4: warning: {over.warning}" in report.notes(cells)
    skipped = run_sweep(server.url, options(kv_tokens=300, reps=1, requests_per_client=1, skip_over_kv=True))
    assert [c.status for c in skipped] == ["ok", "skipped"] and skipped[1].reps == []


def test_costs_are_computed_at_the_measured_rate():
    cell = _cell(128, 64, 1496.5, 247.3, 40.0)
    assert cell.cost_per_million()["flex-start"] == pytest.approx(0.1114, abs=1e-4)
    assert cell.cost_per_million()["spot"] == pytest.approx(0.1073, abs=1e-4)


# --- the command -------------------------------------------------------------------------------------------

def test_help_shows_every_default(capsys):
    parser = cli.build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for action in parser._actions:
        if action.dest != "help":
            assert action.help and "(default: " in action.help, action.option_strings
    assert "(default: 128,1024,8192, the log's)" in text and "(default: 1,4,16,64, the log's)" in text
    assert "(default: 3, the log's)" in text and "(default: google/gemma-4-E2B-it)" in text
    assert "(default: 321,344, the log's configuration)" in text and "(default: 128)" in text
    args = cli.parse_args([])
    assert (args.contexts, args.clients, args.reps) == ([128, 1024, 8192], [1, 4, 16, 64], 3)


@pytest.mark.parametrize("argv, named", [(["--reps", "0"], "--reps"), (["--clients", "4,x"], "--clients"),
                                         (["--timeout", "-1"], "--timeout")])
def test_bad_numbers_are_refused_naming_the_option(argv, named, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.parse_args(argv)
    assert exit_.value.code == 2 and named in capsys.readouterr().err


def test_the_plot_goes_beside_the_json_or_under_an_ignored_folder(tmp_path):
    assert cli.parse_args(["--json", str(tmp_path / "run" / "a.json")]).plot == tmp_path / "run" / "a.png"
    assert cli.parse_args([]).plot == cli.DEFAULT_PLOT
    assert cli.DEFAULT_PLOT.parent.name == "bench-results" and cli.DEFAULT_PLOT.parent.parent == Path(".")
    assert "bench-results/" in (Path(__file__).resolve().parents[1] / ".gitignore").read_text().splitlines()
    assert cli.parse_args(["--json", "x.json", "--no-plot"]).plot is None


def test_the_default_plot_folder_is_made(server, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["--base-url", server.url, "--api-key", "k", "--contexts", "128", "--clients", "1",
                     "--reps", "1", "--requests-per-client", "1", "--output-tokens", str(OUTPUT), "--quiet"]) == 0
    assert (tmp_path / "bench-results" / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["bench-results"]


def test_two_runs_are_compared_cell_by_cell_in_the_table_and_the_plot(server, tmp_path, capsys, monkeypatch):
    base = ["--base-url", server.url, "--api-key", "k", "--contexts", "128", "--clients", "1,4", "--reps", "2",
            "--requests-per-client", "1", "--output-tokens", str(OUTPUT), "--quiet"]
    assert cli.main([*base, "--json", str(tmp_path / "baseline.json"), "--no-plot"]) == 0  # the tuned run plots
    capsys.readouterr()
    plotted = []  # the figure the tuned run writes to tuned.png, read below (drawing one costs a second of CPU)
    build_figure = report.build_figure

    def kept(*args, **kwargs):
        plotted.append(build_figure(*args, **kwargs))
        return plotted[-1]

    monkeypatch.setattr(report, "build_figure", kept)
    assert cli.main([*base, "--json", str(tmp_path / "tuned.json"), "--compare", str(tmp_path / "baseline.json")]) == 0
    text = capsys.readouterr().out
    table = text[text.index("tuned beside baseline"):]
    rows = re.findall(r"^ +128 x (\d+) +(.*)$", table, re.MULTILINE)
    assert [n for n, _ in rows] == ["1", "4"] and all(len(re.findall(r"\d\.\d\dx", row)) == 3 for _, row in rows)
    baseline = json.loads((tmp_path / "baseline.json").read_text())
    assert baseline["label"] == "baseline" and baseline["cells"][0]["log_reference"]["aggregate_tok_s"] == 123.7
    # The plot: per panel, dashed for the log, solid for this run, dotted for the compared one.
    [figure] = plotted
    assert (tmp_path / "tuned.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for axis in figure.axes:
        styles = {(line.get_gid(), line.get_linestyle()) for line in axis.lines}
        assert {("build log", "--"), ("tuned", "-"), ("baseline", ":")} <= styles


@pytest.mark.parametrize("content, says", [(None, ": cannot read it"), ("{", ", line 1, column 2: is not JSON"),
                                           ('{"cells": [{"clients": 4}]}', ": not a bench run (cells.0.context")])
def test_a_bad_compare_file_is_refused_before_any_request(content, says, tmp_path, capsys):
    path = tmp_path / "other.json"
    if content is not None:
        path.write_text(content)
    assert cli.main(["--base-url", "http://127.0.0.1:9/v1", "--compare", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err
    # The bounded reader (components/reading/bounded.py) says where in the file, as every file reader does.
    assert f"--compare {path}{says}" in err and "python -m tools.bench --json FILE" in err
    assert "SSH tunnel" not in err  # refused before reaching for the endpoint


@pytest.mark.parametrize("server", [FakeTiming(ttft=0.01, tpot=0.001, fail_every=1)], indirect=True)
def test_a_cell_where_every_request_failed_says_why(server, tmp_path, capsys):
    out = tmp_path / "bench.json"
    code = cli.main(["--base-url", server.url, "--api-key", "k", "--contexts", "128", "--clients", "2",
                     "--reps", "1", "--requests-per-client", "1", "--json", str(out), "--no-plot", "--quiet",
                     "--no-warmup", "--kv-tokens", "100000"])
    # /tokenize still answers, so calibration works and every chat request fails.
    assert code == 1
    [cell] = json.loads(out.read_text())["cells"]
    assert cell["status"] == "error" and cell["errors"] == 2
    assert cell["reason"] == "every request failed; first: HTTP 500 InternalServerError: injected failure"
    assert "128 x 2: error: every request failed; first: HTTP 500 InternalServerError" in capsys.readouterr().out


def test_the_api_key_reaches_the_server_and_nothing_else(server, tmp_path, capsys, monkeypatch):
    canary = "sk-canary-7f3a9c"
    code = cli.main(["--base-url", server.url, "--api-key", canary, "--contexts", "128", "--clients", "1",
                     "--reps", "1", "--requests-per-client", "1", "--output-tokens", str(OUTPUT),
                     "--json", str(tmp_path / "run.json"), "--plot", str(tmp_path / "run.png")])
    assert code == 0
    out, err = capsys.readouterr()
    written = (tmp_path / "run.json").read_bytes() + (tmp_path / "run.png").read_bytes()
    assert canary not in out and canary not in err and canary.encode() not in written
    assert server.last_headers["authorization"] == f"Bearer {canary}"  # sent, as a header only
    monkeypatch.setenv("OPENAI_API_KEY", canary)
    assert cli.main(["--base-url", "http://127.0.0.1:9/v1", "--quiet", "--contexts", "128", "--clients", "1"]) == 2
    assert canary not in "".join(capsys.readouterr())


def test_an_unreachable_endpoint_exits_2_with_a_hint(capsys):
    assert cli.main(["--base-url", "http://127.0.0.1:9/v1", "--api-key", "k", "--quiet", "--contexts", "128",
                     "--clients", "1"]) == 2
    assert "SSH tunnel" in capsys.readouterr().err


# --- the ceiling check (a developer's tool) ----------------------------------------------------------------

def test_the_ceiling_expects_a_closed_loops_most_and_pins_server_and_client_apart():
    assert bench_client_ceiling.expected_rate(64, 128, 0.05, 0.01) == pytest.approx(64 * 128 / 1.32)
    assert bench_client_ceiling.pinning({0, 1}) == (0, {1})
    assert bench_client_ceiling.pinning({2, 3, 5}) == (2, {3, 5})
    assert bench_client_ceiling.pinning({0}) is None
    assert bench_client_ceiling.spread([53_717.2, 64_173.0, 60_859.4]) == (
        "min 53,717 / median 60,859 / max 64,173 output tok/s over 3 run(s)")


def test_the_ceiling_pins_its_children_to_the_cpus_it_names():
    cpu = min(os.sched_getaffinity(0))
    child = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                           capture_output=True, text=True, check=True, preexec_fn=bench_client_ceiling.pinned_to({cpu}))
    assert child.stdout.strip() == f"[{cpu}]"
    assert bench_client_ceiling.pinned_to(None) is None


def test_the_ceiling_reads_each_run_beside_the_servers_own_record():
    fake = FakeOpenAIServer(FakeTiming(ttft=0.02, tpot=0.005)).start_in_thread()
    try:
        runs = asyncio.run(bench_client_ceiling.measure(fake.url, clients=2, output_tokens=OUTPUT,
                                                        requests_per_client=2, runs=2))
    finally:
        fake.stop()
    assert [(run.errors, run.tokens) for run in runs] == [(0, 4 * OUTPUT)] * 2
    for run in runs:
        # The server's record covers that run only (reset before it), and the client can only read later.
        assert run.server_ttft_s >= 0.02 and run.median_ttft_s >= run.server_ttft_s
        # (No bound on the server's TPOT: its schedule is absolute, so a late first token is caught up on.)
        assert run.server_tpot_s > 0 and run.median_tpot_s > 0
        assert run.aggregate_tok_s <= bench_client_ceiling.expected_rate(2, OUTPUT, 0.02, 0.005)
