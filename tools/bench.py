"""Reproduce the build log's 12-cell sweep against an OpenAI-compatible endpoint.

    python -m tools.bench                          # this stack's endpoint, through the SSH tunnel
    python -m tools.bench --base-url http://127.0.0.1:8000/v1 --api-key ... --json out.json

Streaming /v1/chat/completions with prompts of an exact token length (calibrated
with the server's /tokenize, or its reported usage), a fixed output length, a
warm-up, and closed-loop clients. Prints the log's three tables with each cell's
ratio to the log, the cost per million output tokens, and the first error of any
cell with failures; writes a PNG plot beside the JSON (else under bench-results/).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from components import budget

# The build log's sweep, gemma-4-E2B-it on one v5e chip: (context, clients) ->
# (aggregate output tok/s, median TTFT ms, per-stream tok/s).
LOG_REFERENCE: dict[tuple[int, int], tuple[float, float, float]] = {
    (128, 1): (123.7, 15.9, 125), (128, 4): (433.9, 31.8, 112),
    (128, 16): (1152.5, 98.8, 76), (128, 64): (1496.5, 247.3, 25),
    (1024, 1): (120.4, 40.3, 124), (1024, 4): (415.4, 51.5, 109),
    (1024, 16): (991.0, 170.1, 69), (1024, 64): (1258.7, 421.7, 21),
    (8192, 1): (94.2, 289.4, 119), (8192, 4): (254.4, 304.2, 71),
    (8192, 16): (399.6, 594.4, 27), (8192, 64): (324.3, 11734.0, 10),
}
PRICINGS = ("spot", "flex-start", "on-demand")
DEFAULT_CONTEXTS = [128, 1024, 8192]
DEFAULT_CLIENTS = [1, 4, 16, 64]
DEFAULT_REPS = 3
# Without --json the plot goes here, a folder .gitignore keeps out of the repository.
DEFAULT_PLOT = Path("bench-results") / "bench.png"
FILLER = "hello "


@dataclass
class RequestResult:
    start: float
    end: float = 0.0
    first_token: float | None = None
    prompt_tokens: int = 0
    output_tokens: int = 0
    error: str | None = None

    @property
    def ttft(self) -> float | None:
        return None if self.first_token is None else self.first_token - self.start

    @property
    def tpot(self) -> float | None:
        if self.first_token is None or self.output_tokens < 2:
            return None
        return (self.end - self.first_token) / (self.output_tokens - 1)


@dataclass
class RepStats:
    aggregate_tok_s: float
    requests: int
    errors: int
    timeouts: int
    ttft_ms: list[float]
    tpot_ms: list[float]
    prompt_tokens: list[int]
    first_error: str | None = None
    """The first failed request's reason, in the order requests finished."""


@dataclass
class CellResult:
    context: int
    clients: int
    status: str = "ok"
    """ok, error (every request failed) or skipped (with reason)."""
    reason: str = ""
    reps: list[RepStats] = field(default_factory=list)

    def _pooled(self, name: str) -> list[float]:
        return [value for rep in self.reps for value in getattr(rep, name)]

    def _rep_rates(self) -> list[float]:
        """Aggregate rate of each repetition that completed at least one request."""
        return [rep.aggregate_tok_s for rep in self.reps if rep.requests > rep.errors]

    @property
    def aggregate_tok_s(self) -> float | None:
        values = self._rep_rates()
        return statistics.fmean(values) if values else None

    @property
    def cv(self) -> float | None:
        values = self._rep_rates()
        if len(values) < 2 or not statistics.fmean(values):
            return None
        return statistics.stdev(values) / statistics.fmean(values)

    @property
    def median_ttft_ms(self) -> float | None:
        values = self._pooled("ttft_ms")
        return statistics.median(values) if values else None

    @property
    def p90_ttft_ms(self) -> float | None:
        values = sorted(self._pooled("ttft_ms"))
        return values[min(len(values) - 1, math.ceil(0.9 * len(values)) - 1)] if values else None

    @property
    def median_tpot_ms(self) -> float | None:
        values = self._pooled("tpot_ms")
        return statistics.median(values) if values else None

    @property
    def per_stream_tok_s(self) -> float | None:
        tpot = self.median_tpot_ms
        return 1000.0 / tpot if tpot else None

    @property
    def errors(self) -> int:
        return sum(rep.errors for rep in self.reps)

    @property
    def timeouts(self) -> int:
        return sum(rep.timeouts for rep in self.reps)

    @property
    def first_error(self) -> str | None:
        return next((rep.first_error for rep in self.reps if rep.first_error), None)

    def cost_per_million(self) -> dict[str, float | None]:
        rate = self.aggregate_tok_s
        return {p: (budget.usd_per_million_output_tokens(p, rate) if rate else None) for p in PRICINGS}

    def summary(self) -> dict[str, Any]:
        reference = LOG_REFERENCE.get((self.context, self.clients))
        return {
            "context": self.context, "clients": self.clients, "status": self.status, "reason": self.reason,
            "aggregate_tok_s": self.aggregate_tok_s, "cv": self.cv,
            "median_ttft_ms": self.median_ttft_ms, "p90_ttft_ms": self.p90_ttft_ms,
            "median_tpot_ms": self.median_tpot_ms, "per_stream_tok_s": self.per_stream_tok_s,
            "errors": self.errors, "timeouts": self.timeouts, "first_error": self.first_error,
            "mean_prompt_tokens": (statistics.fmean(self._pooled("prompt_tokens"))
                                   if self._pooled("prompt_tokens") else None),
            "usd_per_million_output_tokens": self.cost_per_million(),
            "log_reference": (dict(zip(["aggregate_tok_s", "median_ttft_ms", "per_stream_tok_s"], reference,
                                       strict=True)) if reference else None),
            "reps": [asdict(rep) for rep in self.reps],
        }


class Endpoint:
    """One OpenAI-compatible server: calibrated prompts and streamed, timed requests."""

    def __init__(self, client: httpx.AsyncClient, base_url: str, api_key: str, model: str, output_tokens: int,
                 timeout: float):
        self.client = client
        self.base_url = base_url.rstrip("/")
        self.root_url = self.base_url.removesuffix("/v1")
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.model = model
        self.output_tokens = output_tokens
        self.timeout = timeout
        self.filler_words: dict[int, int] = {}
        self.nonce = 0

    def messages(self, words: int, nonce: int) -> list[dict[str, str]]:
        # A unique head per request, so prefix caching cannot serve one request from another.
        return [{"role": "user", "content": f"[{nonce:08d}] " + FILLER * words}]

    async def count_tokens(self, words: int) -> int:
        """The server's own count: /tokenize with the chat template, else a 1-token request's usage."""
        messages = self.messages(words, 0)
        try:
            response = await self.client.post(
                f"{self.root_url}/tokenize", headers=self.headers, timeout=self.timeout,
                json={"model": self.model, "messages": messages, "add_generation_prompt": True})
            if response.status_code == 200:
                return int(response.json()["count"])
        except httpx.HTTPError:
            pass
        response = await self.client.post(
            f"{self.base_url}/chat/completions", headers=self.headers, timeout=self.timeout,
            json={"model": self.model, "messages": messages, "max_tokens": 1})
        response.raise_for_status()
        return int(response.json()["usage"]["prompt_tokens"])

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

    async def request(self, words: int) -> RequestResult:
        self.nonce += 1
        body = {
            "model": self.model, "messages": self.messages(words, self.nonce), "stream": True,
            "stream_options": {"include_usage": True},
            # A fixed output length: vLLM's own extensions, ignored by servers that lack them.
            "max_tokens": self.output_tokens, "min_tokens": self.output_tokens, "ignore_eos": True,
        }
        result = RequestResult(start=time.perf_counter())
        try:
            async with self.client.stream("POST", f"{self.base_url}/chat/completions", json=body,
                                          headers=self.headers, timeout=self.timeout) as response:
                if response.status_code != 200:
                    text = (await response.aread()).decode("utf-8", "replace")
                    result.error = _short(f"HTTP {response.status_code}: {text.strip()}")
                    return result
                events, reading = SseEvents(), True
                # Read to the end even after [DONE] or an error, so the connection can be reused.
                async for line in response.aiter_lines():
                    data = events.feed(line) if reading else None
                    if data is not None:
                        reading = _take_event(result, data)
                data = events.flush() if reading else None
                if data is not None:
                    _take_event(result, data)
        except httpx.TimeoutException:
            result.error = "timeout"
        except httpx.HTTPError as error:
            result.error = _short(f"{error.__class__.__name__}: {error}")
        finally:
            result.end = time.perf_counter()
        if result.error is None and result.output_tokens == 0:
            result.error = "no usage in the stream (is stream_options.include_usage supported?)"
        return result


ERROR_TEXT_LIMIT = 300


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= ERROR_TEXT_LIMIT else text[:ERROR_TEXT_LIMIT - 3] + "..."


class SseEvents:
    """Server-sent events from a stream's lines: `data:` fields joined, one event per blank line.

    As the WHATWG event-stream format says: the space after the colon is optional, an event may
    carry several data lines, lines starting with a colon are comments.
    """

    def __init__(self) -> None:
        self._data: list[str] = []

    def feed(self, line: str) -> str | None:
        """Take one line; returns an event's data when the line ends it."""
        if not line:
            return self.flush()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if name == "data":
            self._data.append(value[1:] if value.startswith(" ") else value)
        return None

    def flush(self) -> str | None:
        """The pending event, if any (also at the end of a stream that lacks the final blank line)."""
        if not self._data:
            return None
        data, self._data = "\n".join(self._data), []
        return data


def _take_event(result: RequestResult, data: str) -> bool:
    """Record one event's facts on the result; False when the stream is over or broken."""
    if data.strip() == "[DONE]":
        return False
    try:
        event = json.loads(data)
    except json.JSONDecodeError:
        result.error = _short(f"unparseable stream event: {data}")
        return False
    if not isinstance(event, dict):
        result.error = _short(f"stream event is not a JSON object: {data}")
        return False
    if event.get("error"):
        # vLLM reports a failure inside an open stream as an event with an error object.
        error = event["error"]
        result.error = _short(f"error event: {error.get('message', error) if isinstance(error, dict) else error}")
        return False
    if result.first_token is None and _has_token(event):
        result.first_token = time.perf_counter()
    usage = event.get("usage")
    if isinstance(usage, dict):
        result.prompt_tokens = int(usage.get("prompt_tokens") or 0)
        result.output_tokens = int(usage.get("completion_tokens") or 0)
    return True


def _has_token(event: dict[str, Any]) -> bool:
    choices = event.get("choices") or []
    delta = (choices[0].get("delta") or {}) if choices and isinstance(choices[0], dict) else {}
    # `reasoning` is vLLM's current name for the reasoning stream, `reasoning_content` the former one.
    return bool(delta.get("content") or delta.get("reasoning") or delta.get("reasoning_content")
                or delta.get("tool_calls"))


async def run_rep(endpoint: Endpoint, words: int, clients: int, requests_per_client: int,
                  on_done: Any = None) -> RepStats:
    """Closed loop: each client sends its next request when the last one finishes."""
    results: list[RequestResult] = []

    async def client_loop() -> None:
        for _ in range(requests_per_client):
            result = await endpoint.request(words)
            results.append(result)
            if on_done:
                on_done()

    started = time.perf_counter()
    await asyncio.gather(*(client_loop() for _ in range(clients)))
    return rep_stats(results, started)


def rep_stats(results: list[RequestResult], started: float) -> RepStats:
    """One repetition's figures, computed only from the timestamps the requests recorded."""
    good = [r for r in results if r.error is None]
    wall = (max(r.end for r in good) - started) if good else 0.0
    return RepStats(
        aggregate_tok_s=(sum(r.output_tokens for r in good) / wall) if wall > 0 else 0.0,
        requests=len(results),
        errors=len(results) - len(good),
        timeouts=sum(1 for r in results if r.error == "timeout"),
        ttft_ms=[r.ttft * 1000 for r in good if r.ttft is not None],
        tpot_ms=[r.tpot * 1000 for r in good if r.tpot is not None],
        prompt_tokens=[r.prompt_tokens for r in good],
        first_error=next((r.error for r in results if r.error is not None), None),
    )


@dataclass
class SweepOptions:
    contexts: list[int]
    clients: list[int]
    reps: int = 3
    requests_per_client: int = 4
    output_tokens: int = 128
    kv_tokens: int = field(default_factory=lambda: budget.kv_budget(budget.GEMMA_4_E2B_IT, 0.92, 32768).kv_tokens)
    allow_over_kv: bool = False
    warmup: bool = True


def over_kv(context: int, clients: int, options: SweepOptions) -> bool:
    return clients * (context + options.output_tokens) > options.kv_tokens


async def sweep(endpoint: Endpoint, options: SweepOptions, progress: Any = None) -> list[CellResult]:
    cells: list[CellResult] = []
    for context in options.contexts:
        words = await endpoint.calibrate(context)
        if options.warmup:
            await endpoint.request(words)  # compiles/warms this shape; not measured
        for clients in options.clients:
            cell = CellResult(context=context, clients=clients)
            cells.append(cell)
            if over_kv(context, clients, options) and not options.allow_over_kv:
                cell.status = "skipped"
                cell.reason = (f"{clients} x {context + options.output_tokens:,} tokens > the "
                               f"{options.kv_tokens:,}-token KV pool: it queues rather than serves "
                               "(pass --allow-over-kv to run it anyway)")
                if progress:
                    progress.update(options.reps * clients * options.requests_per_client)
                continue
            for _ in range(options.reps):
                cell.reps.append(await run_rep(endpoint, words, clients, options.requests_per_client,
                                               progress.update if progress else None))
            if cell.reps and all(rep.errors == rep.requests for rep in cell.reps):
                cell.status = "error"
                cell.reason = f"every request failed; first: {cell.first_error}"
    return cells


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def render_tables(cells: list[CellResult]) -> str:
    contexts = sorted({c.context for c in cells})
    clients = sorted({c.clients for c in cells})
    by_key = {(c.context, c.clients): c for c in cells}
    tables = [
        ("Aggregate output tokens/sec", lambda c: c.aggregate_tok_s, 0),
        ("Median time-to-first-token (ms)", lambda c: c.median_ttft_ms, 1),
        ("Per-stream tokens/sec (what one user feels)", lambda c: c.per_stream_tok_s, 2),
    ]
    lines: list[str] = []
    for title, metric, ref_index in tables:
        lines += ["", f"{title}  (x = ratio to the build log)",
                  "context \\ clients".ljust(18) + "".join(f"{n:>22}" for n in clients)]
        for context in contexts:
            row = f"{context:<18}"
            for n in clients:
                cell = by_key.get((context, n))
                if cell is None:
                    row += f"{'':>22}"
                    continue
                if cell.status != "ok":
                    row += f"{cell.status:>22}"
                    continue
                value = metric(cell)
                reference = LOG_REFERENCE.get((context, n))
                ratio = f" ({value / reference[ref_index]:.2f}x)" if value and reference else ""
                flags = " !" if cell.errors else ""
                row += f"{_fmt(value) + ratio + flags:>22}"
            lines.append(row)
    lines += ["", "Cost per million output tokens (USD) at the measured aggregate rate",
              "context x clients".ljust(18) + "".join(f"{p:>14}" for p in PRICINGS) + f"{'cv':>8}{'errors':>8}"]
    for cell in cells:
        costs = cell.cost_per_million()
        lines.append(f"{cell.context:>6} x {cell.clients:<9}" + "".join(f"{_fmt(costs[p], 3):>14}" for p in PRICINGS)
                     + f"{_fmt(cell.cv * 100 if cell.cv is not None else None):>7}%{cell.errors:>8}")
    notes = [f"  {c.context} x {c.clients}: {c.status}: {c.reason}" for c in cells if c.status != "ok"]
    notes += [f"  {c.context} x {c.clients}: {c.errors} failed request(s), {c.timeouts} timeout(s); "
              f"first: {c.first_error}" for c in cells if c.status == "ok" and c.errors]
    if notes:
        lines += ["", "Notes:", *notes]
    return "\n".join(lines)


def plot(cells: list[CellResult], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for context in sorted({c.context for c in cells}):
        row = [c for c in cells if c.context == context and c.status == "ok"]
        xs = [c.clients for c in row]
        left.plot(xs, [c.aggregate_tok_s for c in row], marker="o", label=f"{context} ctx")
        right.plot(xs, [c.median_ttft_ms for c in row], marker="o", label=f"{context} ctx")
        reference = sorted((n, v) for (ctx, n), v in LOG_REFERENCE.items() if ctx == context)
        left.plot([n for n, _ in reference], [v[0] for _, v in reference], linestyle="--", alpha=0.4,
                  color=left.lines[-1].get_color())
        right.plot([n for n, _ in reference], [v[1] for _, v in reference], linestyle="--", alpha=0.4,
                   color=right.lines[-1].get_color())
    for axis, label in ((left, "aggregate output tok/s"), (right, "median TTFT (ms)")):
        axis.set_xscale("log", base=2)
        axis.set_xticks(sorted({c.clients for c in cells} | {1, 4, 16, 64}))
        axis.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
        axis.set_xlabel("concurrent clients")
        axis.set_ylabel(label)
        axis.grid(alpha=0.3)
        axis.legend(title="solid: measured, dashed: build log")
    right.set_yscale("log")
    figure.suptitle("tpu-vllm benchmark")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _stack_output(name: str, secret: bool = False) -> str | None:
    if shutil.which("pulumi") is None:
        return None
    command = ["pulumi", "stack", "output", name] + (["--show-secrets"] if secret else [])
    try:
        completed = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return completed.stdout.strip() or None if completed.returncode == 0 else None


def _csv(values: list[int]) -> str:
    return ",".join(str(value) for value in values)


def _ints(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: use comma-separated whole numbers, e.g. 1,4,16") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: use positive whole numbers")
    return values


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tools.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help="default: the stack's localEndpoint (the SSH tunnel), "
                                           "else http://127.0.0.1:8000/v1")
    parser.add_argument("--api-key", help="default: $OPENAI_API_KEY, else the stack's apiKey output")
    parser.add_argument("--model", default="google/gemma-4-E2B-it")
    parser.add_argument("--contexts", type=_ints, default=DEFAULT_CONTEXTS, metavar="N,N,...",
                        help=f"prompt lengths in tokens (default: {_csv(DEFAULT_CONTEXTS)}, the log's)")
    parser.add_argument("--clients", type=_ints, default=DEFAULT_CLIENTS, metavar="N,N,...",
                        help=f"concurrent closed-loop clients (default: {_csv(DEFAULT_CLIENTS)}, the log's)")
    parser.add_argument("--reps", type=int, default=DEFAULT_REPS,
                        help=f"repetitions of each cell (default: {DEFAULT_REPS})")
    parser.add_argument("--requests-per-client", type=int, default=4)
    parser.add_argument("--output-tokens", type=int, default=128)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
    parser.add_argument("--kv-tokens", type=int, default=None, help="KV pool (default: the budget's 321,344)")
    parser.add_argument("--allow-over-kv", action="store_true", help="run cells that exceed the KV pool")
    parser.add_argument("--no-warmup", action="store_true")
    parser.add_argument("--json", type=Path, help="write every cell to this file")
    parser.add_argument("--plot", type=Path,
                        help=f"PNG plot (default: beside --json with a .png suffix, else {DEFAULT_PLOT})")
    parser.add_argument("--no-plot", action="store_true", help="write no plot")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    if args.no_plot:
        args.plot = None
    elif args.plot is None:
        args.plot = args.json.with_suffix(".png") if args.json else DEFAULT_PLOT
    return args


async def _main(args: argparse.Namespace) -> list[CellResult]:
    from tqdm import tqdm

    options = SweepOptions(contexts=args.contexts, clients=args.clients, reps=args.reps,
                           requests_per_client=args.requests_per_client, output_tokens=args.output_tokens,
                           allow_over_kv=args.allow_over_kv, warmup=not args.no_warmup)
    if args.kv_tokens:
        options.kv_tokens = args.kv_tokens
    total = len(options.contexts) * sum(options.clients) * options.reps * options.requests_per_client
    limits = httpx.Limits(max_connections=max(options.clients) + 8, max_keepalive_connections=max(options.clients))
    async with httpx.AsyncClient(limits=limits) as client:
        endpoint = Endpoint(client, args.base_url, args.api_key, args.model, args.output_tokens, args.timeout)
        with tqdm(total=total, unit="req", disable=args.quiet, file=sys.stderr) as progress:
            return await sweep(endpoint, options, progress)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.base_url = args.base_url or _stack_output("localEndpoint") or "http://127.0.0.1:8000/v1"
    args.api_key = args.api_key or os.environ.get("OPENAI_API_KEY") or _stack_output("apiKey", secret=True) or ""
    try:
        cells = asyncio.run(_main(args))
    except httpx.HTTPError as error:
        print(f"error: could not reach {args.base_url}: {error}. Is the SSH tunnel open "
              "($(pulumi stack output sshTunnelCommand))?", file=sys.stderr)
        return 2
    print(render_tables(cells))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"base_url": args.base_url, "model": args.model,
                                         "output_tokens": args.output_tokens,
                                         "cells": [c.summary() for c in cells]}, indent=2))
    if args.plot:
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        plot(cells, args.plot)
        print(f"\nplot: {args.plot}")
    return 1 if any(c.status == "error" for c in cells) else 0


if __name__ == "__main__":
    sys.exit(main())
