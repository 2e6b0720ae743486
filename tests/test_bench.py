"""The bench client against a fake streaming server with known timing on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from dev import bench_client_ceiling
from dev.fake_openai_server import FakeOpenAIServer, FakeTiming
from tools import bench

TTFT, TPOT, OUTPUT = 0.1, 0.02, 11  # one request: 0.1 s to the first token + 10 x 0.02 s


@pytest.fixture
def server(request):
    timing = getattr(request, "param", FakeTiming(ttft=TTFT, tpot=TPOT))
    fake = FakeOpenAIServer(timing).start_in_thread()
    yield fake
    fake.stop()


def run_sweep(url: str, options: bench.SweepOptions, timeout: float = 30) -> list[bench.CellResult]:
    async def go():
        async with httpx.AsyncClient() as client:
            endpoint = bench.Endpoint(client, url, "key", "google/gemma-4-E2B-it", options.output_tokens, timeout)
            return await bench.sweep(endpoint, options)
    return asyncio.run(go())


def options(**overrides) -> bench.SweepOptions:
    values = dict(contexts=[128], clients=[1, 4], reps=2, requests_per_client=2, output_tokens=OUTPUT)
    values.update(overrides)
    return bench.SweepOptions(**values)


def test_rep_figures_are_computed_from_the_recorded_timestamps():
    # Two clients, fixed timestamps: the arithmetic alone decides the figures, not the scheduler.
    results = [
        bench.RequestResult(start=10.0, first_token=10.1, end=10.3, prompt_tokens=128, output_tokens=11),
        bench.RequestResult(start=10.0, first_token=10.2, end=10.6, prompt_tokens=128, output_tokens=11),
        bench.RequestResult(start=10.3, end=10.4, error="HTTP 500"),
    ]
    rep = bench.rep_stats(results, started=10.0)
    assert rep.requests == 3 and rep.errors == 1 and rep.timeouts == 0
    assert rep.ttft_ms == pytest.approx([100.0, 200.0])
    assert rep.tpot_ms == pytest.approx([20.0, 40.0])  # (end - first token) / (tokens - 1)
    assert rep.aggregate_tok_s == pytest.approx(22 / 0.6)  # good tokens over the wall time to the last end
    assert rep.prompt_tokens == [128, 128]

    cell = bench.CellResult(context=128, clients=2, reps=[rep, bench.rep_stats(results[:1], started=10.0)])
    assert cell.median_ttft_ms == pytest.approx(100.0)  # pooled over reps: 100, 200, 100
    assert cell.p90_ttft_ms == pytest.approx(200.0)
    assert cell.median_tpot_ms == pytest.approx(20.0)
    assert cell.per_stream_tok_s == pytest.approx(50.0)
    rates = [22 / 0.6, 11 / 0.3]
    assert cell.aggregate_tok_s == pytest.approx(sum(rates) / 2)
    assert cell.cv == pytest.approx(abs(rates[0] - rates[1]) / 2 ** 0.5 / (sum(rates) / 2))


def test_a_rep_where_every_request_failed_reports_no_rate():
    rep = bench.rep_stats([bench.RequestResult(start=1.0, end=2.0, error="timeout")], started=1.0)
    assert (rep.aggregate_tok_s, rep.errors, rep.timeouts, rep.ttft_ms) == (0.0, 1, 1, [])
    assert bench.CellResult(context=128, clients=1, reps=[rep]).aggregate_tok_s is None


def test_measured_timing_is_consistent_with_what_the_server_recorded(server):
    # Only bounds that causality guarantees: a loaded machine can make a request slower, never faster.
    cells = run_sweep(server.url, options())
    request_seconds = TTFT + (OUTPUT - 1) * TPOT
    assert [(c.context, c.clients, c.status, c.errors) for c in cells] == [(128, 1, "ok", 0), (128, 4, "ok", 0)]
    for cell in cells:
        assert len(cell.reps) == 2 and all(rep.requests == cell.clients * 2 for rep in cell.reps)
        assert all(rep.prompt_tokens == [128] * rep.requests for rep in cell.reps)
        assert cell.median_ttft_ms >= TTFT * 1000 - 1  # the server sleeps ttft before the first token
        assert cell.p90_ttft_ms >= cell.median_ttft_ms
        assert cell.aggregate_tok_s <= cell.clients * OUTPUT / request_seconds * 1.01
        assert cell.per_stream_tok_s > 0
    # Against the server's own record of each request (the prompt's unique head is its nonce; 1 is the warm-up).
    records = {record.content.split(" ", 1)[0]: record for record in server.streams}
    measured_heads = {f"[{nonce:08d}]" for nonce in range(2, 2 + 2 * 2 * (1 + 4))}  # reps x requests x clients
    assert set(records) == measured_heads | {"[00000001]"}
    for record in records.values():
        assert len(record.token_times) == OUTPUT
        assert record.token_times[0] - record.received >= TTFT - 0.001
    # The client's clock starts before the server reads a request and stops after its first token leaves.
    client_ttft_s = sum(value for cell in cells for rep in cell.reps for value in rep.ttft_ms) / 1000
    server_ttft_s = sum(records[head].token_times[0] - records[head].received for head in measured_heads)
    assert client_ttft_s >= server_ttft_s


def test_prompts_are_calibrated_to_the_exact_token_count(server):
    [cell] = run_sweep(server.url, options(contexts=[1024], clients=[1], reps=1, requests_per_client=1))
    assert cell.summary()["mean_prompt_tokens"] == 1024


@pytest.mark.parametrize("server", [FakeTiming(ttft=0.01, tpot=0.001, tokenize=False)], indirect=True)
def test_calibration_falls_back_to_reported_usage(server):
    [cell] = run_sweep(server.url, options(contexts=[300], clients=[1], reps=1, requests_per_client=1))
    assert cell.summary()["mean_prompt_tokens"] == 300


@pytest.mark.parametrize("server", [FakeTiming(ttft=0.01, tpot=0.001, fail_every=3)], indirect=True)
def test_errors_are_counted_and_reported_not_dropped(server):
    cells = run_sweep(server.url, options(clients=[4], reps=1, requests_per_client=3))
    [cell] = cells
    assert cell.errors >= 3 and cell.status == "ok"
    assert cell.reps[0].requests == 12
    # The first failure's own words, in the JSON and in the notes.
    assert cell.summary()["first_error"] == 'HTTP 500: {"error": "injected failure"}'
    assert '128 x 4: 4 failed request(s), 0 timeout(s); first: HTTP 500: {"error": "injected failure"}' in (
        bench.render_tables(cells))


@pytest.mark.parametrize("server", [FakeTiming(ttft=0.01, tpot=0.001, fail_every=1)], indirect=True)
def test_a_cell_where_every_request_failed_says_why(server, tmp_path, capsys):
    out = tmp_path / "bench.json"
    code = bench.main(["--base-url", server.url, "--api-key", "k", "--contexts", "128", "--clients", "2",
                       "--reps", "1", "--requests-per-client", "1", "--json", str(out), "--no-plot", "--quiet"])
    assert code == 1
    [cell] = json.loads(out.read_text())["cells"]
    assert cell["status"] == "error" and cell["errors"] == 2
    assert cell["first_error"] == 'HTTP 500: {"error": "injected failure"}'
    assert cell["reason"] == 'every request failed; first: HTTP 500: {"error": "injected failure"}'
    assert '128 x 2: error: every request failed; first: HTTP 500: {"error": "injected failure"}' in (
        capsys.readouterr().out)


@pytest.mark.parametrize("server", [FakeTiming(ttft=0.01, tpot=0.001, spaced_json=True),
                                    FakeTiming(ttft=0.01, tpot=0.001, split_events=True),
                                    FakeTiming(ttft=0.01, tpot=0.001, spaced_json=True, split_events=True)],
                         indirect=True, ids=["spaced-json", "events-split-across-chunks", "both"])
def test_any_valid_json_and_chunking_of_the_stream_is_read(server):
    cells = run_sweep(server.url, options(clients=[2], reps=1, requests_per_client=2))
    [cell] = cells
    assert (cell.status, cell.errors, cell.first_error) == ("ok", 0, None)
    assert cell.reps[0].prompt_tokens == [128] * 4
    assert len(cell.reps[0].ttft_ms) == 4 and len(cell.reps[0].tpot_ms) == 4
    assert cell.aggregate_tok_s > 0


def test_streams_are_read_to_the_end_so_connections_are_reused(server):
    # Closing a response before its last chunk makes httpx drop the connection: a new one per request.
    run_sweep(server.url, options(clients=[2], reps=1, requests_per_client=3))
    assert server.chat_requests == 1 + 2 * 3
    assert server.connections <= 2


def test_server_sent_events_are_split_as_the_format_says():
    lines = [": keep-alive comment", "event: message", 'data:{"a":', 'data: 1}', "", "",
             "data: [DONE]", "", "data: {\"tail\": true}"]
    events = bench.SseEvents()
    dispatched = [data for data in map(events.feed, lines) if data is not None]
    # No space after the colon is valid; several data lines join with a newline; blank lines alone are no event.
    assert dispatched == ['{"a":\n1}', "[DONE]"]
    assert events.flush() == '{"tail": true}'  # a stream that ends without the final blank line
    assert events.flush() is None


def take(*events: str) -> bench.RequestResult:
    result = bench.RequestResult(start=0.0)
    for data in events:
        if not bench._take_event(result, data):
            break
    return result


def test_stream_events_are_read_as_json_whatever_the_spacing():
    result = take('{ "choices" : [ { "delta" : { "content" : "hi" } } ] }',
                  '{\n "choices": [],\n "usage": {"prompt_tokens": 12, "completion_tokens": 34}\n}', "[DONE]",
                  '{"usage": {"prompt_tokens": 0, "completion_tokens": 0}}')
    assert (result.first_token is not None, result.prompt_tokens, result.output_tokens, result.error) == (
        True, 12, 34, None)
    # vLLM's current name for the reasoning stream counts as the first token too.
    assert take('{"choices": [{"delta": {"reasoning": "hm"}}]}').first_token is not None
    assert take('{"choices": [{"delta": {"role": "assistant", "content": ""}}]}').first_token is None


def test_a_broken_stream_event_is_the_requests_error():
    assert take('{"error": {"message": "The model ran out of KV cache", "code": 400}}').error == (
        "error event: The model ran out of KV cache")
    assert take('{"choices": [').error == 'unparseable stream event: {"choices": ['
    assert take("[1, 2]").error == "stream event is not a JSON object: [1, 2]"
    assert len(take("{" + "x" * 1000).error) == bench.ERROR_TEXT_LIMIT


def test_help_shows_the_sweeps_defaults(capsys):
    with pytest.raises(SystemExit):
        bench.parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: 128,1024,8192, the log's)" in text
    assert "(default: 1,4,16,64, the log's)" in text
    assert "repetitions of each cell (default: 3)" in text
    args = bench.parse_args([])
    assert (args.contexts, args.clients, args.reps) == ([128, 1024, 8192], [1, 4, 16, 64], 3)


def test_the_plot_goes_beside_the_json_or_under_an_ignored_folder(tmp_path):
    assert bench.parse_args(["--json", str(tmp_path / "run" / "a.json")]).plot == tmp_path / "run" / "a.png"
    assert bench.parse_args([]).plot == bench.DEFAULT_PLOT
    assert bench.DEFAULT_PLOT.parent.name == "bench-results" and bench.DEFAULT_PLOT.parent.parent == Path(".")
    assert "bench-results/" in (Path(__file__).resolve().parents[1] / ".gitignore").read_text().splitlines()
    assert bench.parse_args(["--plot", str(tmp_path / "p.png")]).plot == tmp_path / "p.png"
    assert bench.parse_args(["--json", "x.json", "--no-plot"]).plot is None


def test_the_default_plot_folder_is_made(server, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert bench.main(["--base-url", server.url, "--api-key", "k", "--contexts", "128", "--clients", "1",
                       "--reps", "1", "--requests-per-client", "1", "--output-tokens", str(OUTPUT),
                       "--quiet"]) == 0
    assert (tmp_path / "bench-results" / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["bench-results"]


@pytest.mark.parametrize("server", [FakeTiming(ttft=0.01, tpot=0.001, hang_every=2)], indirect=True)
def test_timeouts_are_counted(server):
    [cell] = run_sweep(server.url, options(clients=[2], reps=1, requests_per_client=2, warmup=False), timeout=0.5)
    assert cell.timeouts >= 1 and cell.errors >= cell.timeouts


def test_a_cell_over_the_kv_pool_is_refused_and_says_so(server):
    cells = run_sweep(server.url, options(kv_tokens=300, reps=1, requests_per_client=1))
    ran, refused = cells
    assert ran.status == "ok" and refused.status == "skipped"
    assert "KV pool" in refused.reason and "--allow-over-kv" in refused.reason
    assert refused.reps == []
    allowed = run_sweep(server.url, options(kv_tokens=300, reps=1, requests_per_client=1, allow_over_kv=True))
    assert [c.status for c in allowed] == ["ok", "ok"]


def test_the_logs_8k_by_64_cell_exceeds_the_pool_and_the_rest_fit():
    default = options(contexts=[128, 1024, 8192], clients=[1, 4, 16, 64], output_tokens=128)
    assert default.kv_tokens == 321_344
    over = [(c, n) for c in default.contexts for n in default.clients if bench.over_kv(c, n, default)]
    assert over == [(8192, 64)]


def test_every_cell_is_in_the_json_and_the_tables_show_ratios(server, tmp_path):
    out, png = tmp_path / "bench.json", tmp_path / "bench.png"
    code = bench.main(["--base-url", server.url, "--api-key", "k", "--contexts", "128", "--clients", "1,4",
                       "--reps", "1", "--requests-per-client", "1", "--output-tokens", str(OUTPUT),
                       "--json", str(out), "--plot", str(png), "--quiet"])
    assert code == 0
    data = json.loads(out.read_text())
    assert [(c["context"], c["clients"]) for c in data["cells"]] == [(128, 1), (128, 4)]
    first = data["cells"][0]
    assert first["log_reference"] == {"aggregate_tok_s": 123.7, "median_ttft_ms": 15.9, "per_stream_tok_s": 125}
    assert set(first["usd_per_million_output_tokens"]) == {"spot", "flex-start", "on-demand"}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_tables_ratio_and_cost_are_computed_against_the_log():
    rep = bench.RepStats(aggregate_tok_s=1496.5, requests=64, errors=0, timeouts=0,
                         ttft_ms=[247.3], tpot_ms=[40.0], prompt_tokens=[128])
    cell = bench.CellResult(context=128, clients=64, reps=[rep])
    text = bench.render_tables([cell])
    assert "1,496 (1.00x)" in text or "1,496.5 (1.00x)" in text
    assert "247.3 (1.00x)" in text
    assert cell.cost_per_million()["flex-start"] == pytest.approx(0.1114, abs=1e-4)
    assert cell.cost_per_million()["spot"] == pytest.approx(0.1073, abs=1e-4)


def test_an_unreachable_endpoint_exits_2_with_a_hint(capsys):
    assert bench.main(["--base-url", "http://127.0.0.1:9/v1", "--api-key", "k", "--quiet", "--contexts", "128",
                       "--clients", "1"]) == 2
    assert "SSH tunnel" in capsys.readouterr().err


def test_the_client_ceiling_reports_min_median_max_and_the_machine(tmp_path):
    assert bench_client_ceiling.spread([53_717.2, 64_173.0, 60_859.4]) == (
        "min 53,717 / median 60,859 / max 64,173 output tok/s over 3 run(s)")
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Example CPU @ 2.00GHz\nflags\t\t: fpu\n")
    described = bench_client_ceiling.machine(cpuinfo)
    assert "CPU(s), Example CPU @ 2.00GHz, Python 3." in described
    assert "Example" not in bench_client_ceiling.machine(tmp_path / "missing")


def test_the_client_ceiling_runs_each_repetition_against_the_fake_server(server):
    runs = asyncio.run(bench_client_ceiling.measure(server.url, clients=2, output_tokens=OUTPUT,
                                                    requests_per_client=1, runs=3))
    assert [(rep.requests, rep.errors) for rep in runs] == [(2, 0)] * 3
    assert all(rep.aggregate_tok_s > 0 for rep in runs)
