"""Is the bench client ever the limit? Its reading of a server whose rate is known, against that rate.

The fake server runs in its own process, pinned to one CPU, the client pinned to another (so neither steals
the other's core), and streams like vLLM: one token per chunk at a steady pace (`--tpot`) after `--ttft`.
A closed loop of `--clients` streams can then read at most clients x output / (ttft + (output - 1) x tpot)
tokens per second; the tool reports each run's aggregate as a ratio to that, the median TTFT and TPOT as
ratios to the server's settings and to its own record of the run (when it read each request and sent each
token), the client's CPU seconds, and min / median / max over the runs with the machine.
The defaults are the log's short-context shape at 64 clients, each stream at 100 tok/s (4x the log's 25).

    python -m dev.bench_client_ceiling [--runs 3] [--clients 64] [--tpot 0.01] [--ttft 0.05] [--output-tokens 128]

Exit 0 when the median run reads at least 95% of the expected rate and TTFT and TPOT within 2% of the
server's record.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from tools.bench.request import Endpoint
from tools.bench.sweep import run_rep

MIN_RATE_RATIO = 0.95
LATENCY_TOLERANCE = 0.02


@dataclass
class Run:
    aggregate_tok_s: float
    median_ttft_s: float
    median_tpot_s: float
    cpu_s: float
    errors: int
    tokens: int
    server_ttft_s: float
    server_tpot_s: float
    """The server's own record of the same run: when it read each request and sent each token."""


def expected_rate(clients: int, output_tokens: int, ttft: float, tpot: float) -> float:
    """The most a closed loop can read: every client's request back to back, with no time between them."""
    return clients * output_tokens / (ttft + (output_tokens - 1) * tpot)


async def measure(base_url: str, clients: int, output_tokens: int, requests_per_client: int,
                  runs: int = 1) -> list[Run]:
    """One calibration and connection warm-up, then `runs` repetitions, each with its CPU time."""
    connector = aiohttp.TCPConnector(limit=clients + 8)
    async with aiohttp.ClientSession(connector=connector) as session:
        endpoint = Endpoint(session, base_url, "", "fake", output_tokens, timeout=600)
        words = await endpoint.calibrate(128)
        await run_rep(endpoint, words, clients, clients)  # open the connections
        measured = []
        root = endpoint.root_url
        for _ in range(runs):
            async with session.post(f"{root}/fake/reset") as response:
                response.raise_for_status()
            cpu = time.process_time()
            rep = await run_rep(endpoint, words, clients, clients * requests_per_client)
            cpu = time.process_time() - cpu
            async with session.get(f"{root}/fake/stats") as response:
                server = await response.json()
            measured.append(Run(rep.aggregate_tok_s, statistics.median(rep.ttft_ms or [0]) / 1000,
                                statistics.median(rep.tpot_ms or [0]) / 1000, cpu, rep.errors,
                                round(rep.aggregate_tok_s * rep.duration_s),
                                server["median_ttft_s"] or 0.0, server["median_tpot_s"] or 0.0))
        return measured


def spread(values: list[float], unit: str = "output tok/s", digits: int = 0) -> str:
    """min / median / max over the runs."""
    return (f"min {min(values):,.{digits}f} / median {statistics.median(values):,.{digits}f} / "
            f"max {max(values):,.{digits}f} {unit} over {len(values)} run(s)")


def machine(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """What the figure was measured on: a ceiling only means something next to the machine."""
    model = platform.processor() or platform.machine()
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{os.cpu_count()} CPU(s), {model}, Python {platform.python_version()}, "
            f"{platform.system()} {platform.release()}")


def pinning(cpus: set[int]) -> tuple[int, set[int]] | None:
    """The server's CPU and the client's CPUs: apart, or None on a single CPU."""
    if len(cpus) < 2:
        return None
    server, *client = sorted(cpus)
    return server, set(client)


def pinned_to(cpus: set[int] | None):
    """A preexec_fn that pins the child to `cpus` before it runs (what `taskset -c` does, without needing it)."""
    return None if cpus is None else (lambda: os.sched_setaffinity(0, cpus))


def start_server(ttft: float, tpot: float, cpu: int | None) -> tuple[subprocess.Popen, int]:
    command = [sys.executable, "-m", "dev.fake_openai_server", "--port", "0", "--ttft", str(ttft), "--tpot", str(tpot)]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True,
                              preexec_fn=pinned_to(None if cpu is None else {cpu}))
    return server, int(server.stdout.readline())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dev.bench_client_ceiling", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="repetitions to report min/median/max over (default: 3)")
    parser.add_argument("--clients", type=int, default=64, help="concurrent streams (default: 64)")
    parser.add_argument("--tpot", type=float, default=0.01, help="server's seconds per token (default: 0.01)")
    parser.add_argument("--ttft", type=float, default=0.05, help="server's seconds to the first token (default: 0.05)")
    parser.add_argument("--output-tokens", type=int, default=128, help="tokens per request (default: 128)")
    parser.add_argument("--requests-per-client", type=int, default=4, help="per run (default: 4)")
    args = parser.parse_args(argv)
    if min(args.runs, args.clients, args.output_tokens, args.requests_per_client) < 1 or args.tpot <= 0:
        parser.error("--runs, --clients, --output-tokens and --requests-per-client must be at least 1, --tpot above 0")
    placed = pinning(os.sched_getaffinity(0))
    server, port = start_server(args.ttft, args.tpot, placed[0] if placed else None)
    try:
        if placed:
            os.sched_setaffinity(0, placed[1])
        runs = asyncio.run(measure(f"http://127.0.0.1:{port}/v1", args.clients, args.output_tokens,
                                   args.requests_per_client, args.runs))
    finally:
        server.terminate()
        server.wait(10)
    expected = expected_rate(args.clients, args.output_tokens, args.ttft, args.tpot)
    where = (f"server on CPU {placed[0]}, client on CPU(s) {','.join(map(str, sorted(placed[1])))}" if placed
             else "one CPU: server and client share it, so this reads low")
    print(f"{args.clients} streams x {args.requests_per_client} requests x {args.output_tokens} tokens at "
          f"{1 / args.tpot:,.0f} tok/s each after a {args.ttft * 1000:g} ms TTFT ({where}); on {machine()}")
    print(f"expected at most {expected:,.0f} output tok/s")
    for number, run in enumerate(runs, 1):
        print(f"  run {number}: {run.aggregate_tok_s:,.0f} tok/s ({run.aggregate_tok_s / expected:.3f} of expected), "
              f"TTFT {run.median_ttft_s * 1000:.2f} ms ({run.median_ttft_s / args.ttft:.3f}x the setting, "
              f"{run.median_ttft_s / run.server_ttft_s:.3f}x the server's {run.server_ttft_s * 1000:.2f}), "
              f"TPOT {run.median_tpot_s * 1000:.3f} ms ({run.median_tpot_s / args.tpot:.3f}x, "
              f"{run.median_tpot_s / run.server_tpot_s:.3f}x the server's), "
              f"client CPU {run.cpu_s:.2f} s for {run.tokens:,} tokens, {run.errors} errors")
    ratios = [run.aggregate_tok_s / expected for run in runs]
    # Judged against what the server really sent: a server late under a burst is not the client's cost.
    ttft = statistics.median(run.median_ttft_s / run.server_ttft_s for run in runs)
    tpot = statistics.median(run.median_tpot_s / run.server_tpot_s for run in runs)
    print(f"{spread([run.aggregate_tok_s for run in runs])}; ratio to expected {spread(ratios, 'of it', 3)}")
    print(f"client CPU {spread([run.cpu_s for run in runs], 's', 2)}")
    errors = sum(run.errors for run in runs)
    median_ratio = statistics.median(ratios)
    checks = [(f"rate {median_ratio:.3f} of expected (needs {MIN_RATE_RATIO})", median_ratio >= MIN_RATE_RATIO),
              (f"TTFT {ttft:.3f}x the server's record (needs 1 +/- {LATENCY_TOLERANCE})",
               abs(ttft - 1) <= LATENCY_TOLERANCE),
              (f"TPOT {tpot:.3f}x the server's record (needs 1 +/- {LATENCY_TOLERANCE})",
               abs(tpot - 1) <= LATENCY_TOLERANCE),
              (f"{errors} errors", not errors)]
    print("; ".join(f"{text}: {'ok' if passed else 'FAILED'}" for text, passed in checks))
    ok = all(passed for _, passed in checks)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
