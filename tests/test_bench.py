"""The bench client against a fake streaming server with known timing on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from tools import bench
from tools.fake_openai_server import FakeOpenAIServer, FakeTiming

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
    assert "failed request(s)" in bench.render_tables(cells)


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
