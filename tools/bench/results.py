"""A sweep's figures, computed only from the timestamps the requests recorded.

Definitions, as `vllm bench serve` 0.33 computes them (vllm/benchmarks/serve.py, `calculate_metrics`), in
the build log's words where it has one:
- aggregate output tokens/sec (vLLM: output token throughput): the successful requests' output tokens over
  the repetition's duration, from its start to the end of its last request; the cell's figure is the mean
  over repetitions;
- TTFT: request sent to the first chunk that streams a token; median (and p90) pooled over repetitions;
- TPOT: (last token - first token) / (output tokens - 1) per request; median pooled;
- per-stream tokens/sec ("what one user feels"): 1,000 / median TPOT (ms);
- ITL: the gaps between successive token chunks, pooled.
Output tokens are the stream's usage.completion_tokens; a stream without usage counts its token chunks
(vLLM sends one token per chunk), and the cell says how many requests were counted so.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from components.basis import spending
from tools.bench import reference
from tools.bench.request import RequestResult

PRICINGS = ("spot", "flex-start", "on-demand")


def percentile(values: list[float], fraction: float) -> float | None:
    """The nearest-rank percentile: a value some request really had."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


def cv(values: list[float]) -> float | None:
    """Coefficient of variation (sample stdev / mean), the log's yardstick; None under two values."""
    if len(values) < 2 or not statistics.fmean(values):
        return None
    return statistics.stdev(values) / statistics.fmean(values)


@dataclass
class RepStats:
    aggregate_tok_s: float
    duration_s: float
    requests: int
    errors: int
    timeouts: int
    ttft_ms: list[float]
    tpot_ms: list[float]
    prompt_tokens: list[int]
    itl_ms: list[float] = field(default_factory=list)
    counted_from_chunks: int = 0
    """Successful requests whose stream had no usage, so their tokens are their token chunks."""
    first_error: str | None = None
    """The first failed request's reason, in the order requests finished."""

    @property
    def answered(self) -> bool:
        return self.requests > self.errors

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        # Every gap of every request would make the file tens of megabytes: its summary instead.
        itl = data.pop("itl_ms")
        data["itl"] = {"count": len(itl), "median_ms": statistics.median(itl) if itl else None,
                       "p90_ms": percentile(itl, 0.9), "p99_ms": percentile(itl, 0.99)}
        return data


def rep_stats(results: list[RequestResult], started: float) -> RepStats:
    good = [r for r in results if r.error is None]
    duration = (max(r.end for r in results) - started) if results else 0.0
    return RepStats(
        aggregate_tok_s=(sum(r.output_tokens for r in good) / duration) if good and duration > 0 else 0.0,
        duration_s=duration,
        requests=len(results),
        errors=len(results) - len(good),
        timeouts=sum(1 for r in results if r.error == "timeout"),
        ttft_ms=[r.ttft * 1000 for r in good if r.ttft is not None],
        tpot_ms=[r.tpot * 1000 for r in good if r.tpot is not None],
        prompt_tokens=[r.prompt_tokens for r in good],
        itl_ms=[gap * 1000 for r in good for gap in r.itl],
        counted_from_chunks=sum(1 for r in good if r.usage_tokens is None),
        first_error=next((r.error for r in results if r.error is not None), None),
    )


@dataclass
class CellResult:
    context: int
    clients: int
    status: str = "ok"
    """ok, or error (every request failed), or skipped (with reason)."""
    reason: str = ""
    warning: str = ""
    """Said beside the figures, e.g. a cell over the KV pool that queues rather than serves."""
    reps: list[RepStats] = field(default_factory=list)

    def _answered(self) -> list[RepStats]:
        return [rep for rep in self.reps if rep.answered]

    def _pooled(self, name: str) -> list[float]:
        return [value for rep in self.reps for value in getattr(rep, name)]

    def _per_rep(self, figure: Callable[[RepStats], float | None]) -> list[float]:
        return [value for rep in self._answered() if (value := figure(rep)) is not None]

    @property
    def aggregate_tok_s(self) -> float | None:
        values = self._per_rep(lambda rep: rep.aggregate_tok_s)
        return statistics.fmean(values) if values else None

    @property
    def cv(self) -> float | None:
        return cv(self._per_rep(lambda rep: rep.aggregate_tok_s))

    @property
    def ttft_cv(self) -> float | None:
        return cv(self._per_rep(lambda rep: statistics.median(rep.ttft_ms) if rep.ttft_ms else None))

    @property
    def per_stream_cv(self) -> float | None:
        # A median of 0 ms per token (a client that read every token in one read) measures no per-stream rate.
        return cv(self._per_rep(lambda rep: 1000 / median if rep.tpot_ms and (median := statistics.median(
            rep.tpot_ms)) > 0 else None))

    @property
    def median_ttft_ms(self) -> float | None:
        values = self._pooled("ttft_ms")
        return statistics.median(values) if values else None

    @property
    def p90_ttft_ms(self) -> float | None:
        return percentile(self._pooled("ttft_ms"), 0.9)

    @property
    def median_tpot_ms(self) -> float | None:
        values = self._pooled("tpot_ms")
        return statistics.median(values) if values else None

    @property
    def median_itl_ms(self) -> float | None:
        values = self._pooled("itl_ms")
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
    def counted_from_chunks(self) -> int:
        return sum(rep.counted_from_chunks for rep in self.reps)

    @property
    def first_error(self) -> str | None:
        return next((rep.first_error for rep in self.reps if rep.first_error), None)

    def cost_per_million(self) -> dict[str, float | None]:
        rate = self.aggregate_tok_s
        return {p: (spending.usd_per_million_output_tokens(p, rate) if rate else None) for p in PRICINGS}

    def summary(self) -> dict[str, Any]:
        prompt_tokens = self._pooled("prompt_tokens")
        logged = reference.LOG.get((self.context, self.clients))
        return {
            "context": self.context, "clients": self.clients, "status": self.status, "reason": self.reason,
            "warning": self.warning,
            "aggregate_tok_s": self.aggregate_tok_s, "cv": self.cv, "ttft_cv": self.ttft_cv,
            "per_stream_cv": self.per_stream_cv,
            "median_ttft_ms": self.median_ttft_ms, "p90_ttft_ms": self.p90_ttft_ms,
            "median_tpot_ms": self.median_tpot_ms, "median_itl_ms": self.median_itl_ms,
            "per_stream_tok_s": self.per_stream_tok_s,
            "errors": self.errors, "timeouts": self.timeouts, "first_error": self.first_error,
            "counted_from_chunks": self.counted_from_chunks,
            "mean_prompt_tokens": statistics.fmean(prompt_tokens) if prompt_tokens else None,
            "usd_per_million_output_tokens": self.cost_per_million(),
            "log_reference": logged.as_dict() if logged else None,
            "reps": [rep.to_json() for rep in self.reps],
        }
