"""How fast can the bench client itself go? It must never be the bottleneck.

Runs the fake server in its own process (tpot 0: one chunk per token, as fast as it can)
and drives it with the real bench client: 64 closed-loop streams, several runs, reported
as min / median / max with the machine they ran on. The build log peaks at 1,496 tok/s;
the client should sustain at least 20,000 (judged on the median run).

    python -m dev.bench_client_ceiling [--runs 3] [--clients 64] [--output-tokens 1024] [--requests-per-client 8]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

import httpx

from tools import bench

TARGET_TOK_S = 20_000


async def measure(base_url: str, clients: int, output_tokens: int, requests_per_client: int,
                  runs: int = 1) -> list[bench.RepStats]:
    """One calibration and pool warm-up, then `runs` closed-loop repetitions."""
    limits = httpx.Limits(max_connections=clients + 8, max_keepalive_connections=clients)
    async with httpx.AsyncClient(limits=limits) as client:
        endpoint = bench.Endpoint(client, base_url, "", "fake", output_tokens, timeout=120)
        words = await endpoint.calibrate(128)
        await bench.run_rep(endpoint, words, clients, 1)  # warm the connection pool
        return [await bench.run_rep(endpoint, words, clients, requests_per_client) for _ in range(runs)]


def spread(rates: list[float]) -> str:
    """min / median / max of the runs' rates, in whole tokens per second."""
    return (f"min {min(rates):,.0f} / median {statistics.median(rates):,.0f} / max {max(rates):,.0f} "
            f"output tok/s over {len(rates)} run(s)")


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dev.bench_client_ceiling", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="repetitions to report min/median/max over (default: 3)")
    parser.add_argument("--clients", type=int, default=64, help="concurrent streams (default: 64)")
    parser.add_argument("--output-tokens", type=int, default=1024, help="tokens per request (default: 1024)")
    parser.add_argument("--requests-per-client", type=int, default=8, help="per run (default: 8)")
    args = parser.parse_args(argv)
    if min(args.runs, args.clients, args.output_tokens, args.requests_per_client) < 1:
        parser.error("--runs, --clients, --output-tokens and --requests-per-client must be at least 1")
    server = subprocess.Popen([sys.executable, "-m", "dev.fake_openai_server", "--port", "0"],
                              stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        runs = asyncio.run(measure(f"http://127.0.0.1:{port}/v1", args.clients, args.output_tokens,
                                   args.requests_per_client, args.runs))
    finally:
        server.terminate()
        server.wait(10)
    print(f"{args.clients} streams x {args.requests_per_client} requests x {args.output_tokens} tokens, "
          f"on {machine()}")
    for number, stats in enumerate(runs, 1):
        print(f"  run {number}: {stats.aggregate_tok_s:,.0f} output tok/s ({stats.errors} errors)")
    rates = [stats.aggregate_tok_s for stats in runs]
    errors = sum(stats.errors for stats in runs)
    print(f"{spread(rates)} through the bench client ({errors} errors; target {TARGET_TOK_S:,} "
          "on the median, the build log's peak 1,496.5)")
    return 0 if statistics.median(rates) >= TARGET_TOK_S and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
