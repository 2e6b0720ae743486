"""The build log's 12-cell sweep, the figures a deployment is judged against.

Source: the build log (shared/reference/build-log.txt, the three tables after "Provenance."): gemma-4-E2B-it
on one v5e chip, contexts 128 / 1,024 / 8,192 tokens x 1 / 4 / 16 / 64 closed-loop clients, 3 repetitions
each. Its tables are "Aggregate output tokens/sec", "Median time-to-first-token (ms)" and "Per-stream
tokens/sec (what one user feels)".

Its yardstick, in its words: "Throughput is stable - coefficient of variation <=3.4%, most <=1%. The one
exception is marked: 128-ctx/16-client TTFT has cv 56% across reps, so no point value should be trusted
there." The log states no other spread, so every figure of every other cell is held to 3.4%: a ratio to the
log inside 1 +/- 3.4% is within the log's own repeatability, one outside it is a difference.
"""

from __future__ import annotations

from dataclasses import dataclass

CV = 0.034
"""The log's largest coefficient of variation across repetitions (throughput, all cells)."""
CV_EXCEPTIONS = {((128, 16), "median_ttft_ms"): 0.56}
"""The one figure the log marks as unstable (its asterisk)."""
CONTEXTS = (128, 1024, 8192)
CLIENTS = (1, 4, 16, 64)
METRICS = ("aggregate_tok_s", "median_ttft_ms", "per_stream_tok_s")
TITLES = {"aggregate_tok_s": "aggregate output tokens/sec", "median_ttft_ms": "median TTFT (ms)",
          "per_stream_tok_s": "per-stream tokens/sec"}


@dataclass(frozen=True)
class LoggedCell:
    aggregate_tok_s: float
    median_ttft_ms: float
    per_stream_tok_s: float

    def as_dict(self) -> dict[str, float]:
        return {metric: getattr(self, metric) for metric in METRICS}


LOG: dict[tuple[int, int], LoggedCell] = {
    (128, 1): LoggedCell(123.7, 15.9, 125), (128, 4): LoggedCell(433.9, 31.8, 112),
    (128, 16): LoggedCell(1152.5, 98.8, 76), (128, 64): LoggedCell(1496.5, 247.3, 25),
    (1024, 1): LoggedCell(120.4, 40.3, 124), (1024, 4): LoggedCell(415.4, 51.5, 109),
    (1024, 16): LoggedCell(991.0, 170.1, 69), (1024, 64): LoggedCell(1258.7, 421.7, 21),
    (8192, 1): LoggedCell(94.2, 289.4, 119), (8192, 4): LoggedCell(254.4, 304.2, 71),
    (8192, 16): LoggedCell(399.6, 594.4, 27), (8192, 64): LoggedCell(324.3, 11734.0, 10),
}


def log_cv(context: int, clients: int, metric: str) -> float:
    return CV_EXCEPTIONS.get(((context, clients), metric), CV)


def verdict(ratio: float | None, yardstick: float | None) -> str:
    """'=' inside 1 +/- yardstick, '+' above, '-' below; '' when there is nothing to judge."""
    if ratio is None or yardstick is None:
        return ""
    if abs(ratio - 1) <= yardstick:
        return "="
    return "+" if ratio > 1 else "-"
