"""The sweep: for each context and client count, repetitions of a fixed number of requests at a fixed concurrency.

A repetition draws its requests from one shared queue, as `vllm bench serve --max-concurrency` does: each
client takes the next request as soon as its last one finishes, so a request that fails fast frees its
client for the next one, and the repetition lasts as long as the work, not as the unluckiest client.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from components.basis import chip_memory
from tools.bench.request import Endpoint, RequestResult
from tools.bench.results import CellResult, RepStats, rep_stats

DEFAULT_REQUESTS_PER_CLIENT = 4
DEFAULT_OUTPUT_TOKENS = 128


def default_kv_tokens() -> int:
    return chip_memory.kv_budget(chip_memory.GEMMA_4_E2B_IT, 0.92, 32768).kv_tokens


@dataclass
class SweepOptions:
    contexts: list[int]
    clients: list[int]
    reps: int = 3
    requests_per_client: int = DEFAULT_REQUESTS_PER_CLIENT
    output_tokens: int = DEFAULT_OUTPUT_TOKENS
    kv_tokens: int = field(default_factory=default_kv_tokens)
    skip_over_kv: bool = False
    warmup: bool = True


def over_kv(context: int, clients: int, options: SweepOptions) -> bool:
    return clients * (context + options.output_tokens) > options.kv_tokens


def over_kv_text(context: int, clients: int, options: SweepOptions) -> str:
    wanted = clients * (context + options.output_tokens)
    return (f"{clients} x {context + options.output_tokens:,} = {wanted:,} tokens > the {options.kv_tokens:,}-token "
            "KV pool: it queues rather than serves (the log measured it so: 11.7 s median TTFT)")


async def run_rep(endpoint: Endpoint, words: int, clients: int, requests: int,
                  on_done: Callable[[], object] | None = None) -> RepStats:
    """`requests` requests from one queue, `clients` at a time."""
    results: list[RequestResult] = []
    remaining = requests

    async def client_loop() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1  # taken before the await: one event loop, so no two clients take the same one
            results.append(await endpoint.request(words))
            if on_done:
                on_done()

    started = time.perf_counter()
    await asyncio.gather(*(client_loop() for _ in range(min(clients, requests))))
    return rep_stats(results, started)


async def sweep(endpoint: Endpoint, options: SweepOptions, progress: object | None = None,
                warn: Callable[[str], object] | None = None) -> list[CellResult]:
    cells: list[CellResult] = []
    update = getattr(progress, "update", None)
    for context in options.contexts:
        words = await endpoint.calibrate(context)
        if options.warmup:
            await endpoint.request(words)  # compiles/warms this shape; not measured
        for clients in options.clients:
            cell = CellResult(context=context, clients=clients)
            cells.append(cell)
            total = clients * options.requests_per_client
            if over_kv(context, clients, options):
                if options.skip_over_kv:
                    cell.status, cell.reason = "skipped", over_kv_text(context, clients, options) + " (--skip-over-kv)"
                    if update:
                        update(options.reps * total)
                    continue
                cell.warning = over_kv_text(context, clients, options)
                if warn:
                    warn(f"{context} x {clients}: {cell.warning}")
            for _ in range(options.reps):
                cell.reps.append(await run_rep(endpoint, words, clients, total, update))
            if cell.reps and not any(rep.answered for rep in cell.reps):
                cell.status = "error"
                cell.reason = f"every request failed; first: {cell.first_error}"
    return cells
