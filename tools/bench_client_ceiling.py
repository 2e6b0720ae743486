"""How fast can the bench client itself go? It must never be the bottleneck.

Runs the fake server in its own process (tpot 0: one chunk per token, as fast as it can)
and drives it with the real bench client: 64 closed-loop streams. The build log peaks at
1,496 tok/s; the client should sustain at least 20,000.

    python -m tools.bench_client_ceiling [--clients 64] [--output-tokens 1024] [--requests-per-client 8]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys

import httpx

from tools import bench

TARGET_TOK_S = 20_000


async def measure(base_url: str, clients: int, output_tokens: int, requests_per_client: int) -> bench.RepStats:
    limits = httpx.Limits(max_connections=clients + 8, max_keepalive_connections=clients)
    async with httpx.AsyncClient(limits=limits) as client:
        endpoint = bench.Endpoint(client, base_url, "", "fake", output_tokens, timeout=120)
        words = await endpoint.calibrate(128)
        await bench.run_rep(endpoint, words, clients, 1)  # warm the connection pool
        return await bench.run_rep(endpoint, words, clients, requests_per_client)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_client_ceiling", description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--output-tokens", type=int, default=1024)
    parser.add_argument("--requests-per-client", type=int, default=8)
    args = parser.parse_args(argv)
    server = subprocess.Popen([sys.executable, "-m", "tools.fake_openai_server", "--port", "0"],
                              stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        stats = asyncio.run(measure(f"http://127.0.0.1:{port}/v1", args.clients, args.output_tokens,
                                    args.requests_per_client))
    finally:
        server.terminate()
        server.wait(10)
    print(f"{args.clients} streams x {args.requests_per_client} requests x {args.output_tokens} tokens: "
          f"{stats.aggregate_tok_s:,.0f} output tok/s through the bench client "
          f"({stats.errors} errors; target {TARGET_TOK_S:,}, the build log's peak 1,496.5)")
    return 0 if stats.aggregate_tok_s >= TARGET_TOK_S and not stats.errors else 1


if __name__ == "__main__":
    sys.exit(main())
