"""The arms side by side: per arm and cell, output tok/s, TTFT and TPOT p50 and p99, $ per million output tokens;
and the winner against the log's best cell (1,496.5 tok/s at 128 x 64) at equal TTFT.

Every figure is computed from the bench's own JSON (tools.bench `--json`: each repetition's TTFTs and TPOTs), with
the bench's definitions (tools/bench/results.py): output tok/s is the mean over repetitions of the aggregate rate,
p50 the median and p99 the nearest-rank percentile of every request of every repetition. $ per million output
tokens is the arm's hourly price (the catalog's, as the plan shows) over the tokens an hour at that rate.
"At equal TTFT": a cell counts against the log's best only if its median TTFT is no worse than that cell's
(247.3 ms); the winner is the fastest such cell of any arm.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

from components.reading import bounded
from tools.bench import reference
from tools.bench.results import percentile

BEST_CELL = (128, 64)
BEST = reference.LOG[BEST_CELL]


@dataclass(frozen=True)
class Row:
    arm: str
    context: int
    clients: int
    output_tok_s: float | None
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    tpot_p50_ms: float | None
    tpot_p99_ms: float | None
    usd_per_million: float | None


MAX_BENCH_JSON_BYTES = 16 * bounded.MIB


def rows_of(arm: str, bench_json: Path, usd_per_hour: float) -> list[Row]:
    """One arm's rows from the bench JSON the sweep wrote (read with bounds: a journal names the file)."""
    data = bounded.read_json(bench_json, MAX_BENCH_JSON_BYTES, "bench result")
    rows = []
    for cell in data["cells"]:
        reps = cell.get("reps") or []
        ttft = [value for rep in reps for value in rep.get("ttft_ms", [])]
        tpot = [value for rep in reps for value in rep.get("tpot_ms", [])]
        rate = cell.get("aggregate_tok_s") if cell.get("status", "ok") == "ok" else None
        rows.append(Row(
            arm=arm, context=cell["context"], clients=cell["clients"], output_tok_s=rate,
            ttft_p50_ms=statistics.median(ttft) if ttft else None, ttft_p99_ms=percentile(ttft, 0.99),
            tpot_p50_ms=statistics.median(tpot) if tpot else None, tpot_p99_ms=percentile(tpot, 0.99),
            usd_per_million=usd_per_hour / (rate * 3600) * 1_000_000 if rate else None))
    return rows


def winner(rows: list[Row]) -> Row | None:
    """The fastest cell whose median TTFT is no worse than the log's best cell's."""
    fair = [row for row in rows if row.output_tok_s and row.ttft_p50_ms is not None
            and row.ttft_p50_ms <= BEST.median_ttft_ms]
    return max(fair, key=lambda row: row.output_tok_s or 0.0, default=None)


def _f(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def verdict(rows: list[Row]) -> str:
    best = winner(rows)
    log = (f"the log's best cell: {BEST.aggregate_tok_s:,.1f} tok/s at {BEST_CELL[0]} x {BEST_CELL[1]}, median TTFT "
           f"{BEST.median_ttft_ms:,.1f} ms (measured, the build log)")
    if best is None:
        return f"no cell of any arm had a median TTFT within {BEST.median_ttft_ms:,.1f} ms; {log}"
    ratio = (best.output_tok_s or 0.0) / BEST.aggregate_tok_s
    return (f"winner at equal TTFT: {best.arm}, {best.context} x {best.clients}: {_f(best.output_tok_s)} tok/s, "
            f"median TTFT {_f(best.ttft_p50_ms)} ms (measured here) = {ratio:.2f}x {log}")


def markdown(rows: list[Row]) -> str:
    lines = ["| arm | context x clients | output tok/s | TTFT p50 ms | TTFT p99 ms | TPOT p50 ms | TPOT p99 ms "
             "| $ / M output tokens |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        lines.append(f"| {row.arm} | {row.context} x {row.clients} | {_f(row.output_tok_s)} | {_f(row.ttft_p50_ms)} "
                     f"| {_f(row.ttft_p99_ms)} | {_f(row.tpot_p50_ms, 2)} | {_f(row.tpot_p99_ms, 2)} "
                     f"| {_f(row.usd_per_million, 3)} |")
    lines += ["", verdict(rows), "",
              "Measured by tools.bench against each arm's node; $ / M computed from the arm's hourly price."]
    return "\n".join(lines)


def write(rows: list[Row], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    best = winner(rows)
    (out / "comparison.md").write_text(markdown(rows) + "\n")
    (out / "comparison.json").write_text(json.dumps({
        "rows": [asdict(row) for row in rows], "winner": asdict(best) if best else None,
        "log_best": {"context": BEST_CELL[0], "clients": BEST_CELL[1], **BEST.as_dict()},
        "verdict": verdict(rows)}, indent=2))
    return [out / "comparison.md", out / "comparison.json", *_plot(rows, out)]


def _plot(rows: list[Row], out: Path) -> list[Path]:
    """Every cell at its median TTFT and rate, one colour per arm, the log's best cell as a star."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    figure, axis = plt.subplots(figsize=(8, 5))
    for arm in dict.fromkeys(row.arm for row in rows):
        own = [row for row in rows if row.arm == arm and row.output_tok_s and row.ttft_p50_ms is not None]
        axis.scatter([row.ttft_p50_ms for row in own], [row.output_tok_s for row in own], label=arm)
    axis.scatter([BEST.median_ttft_ms], [BEST.aggregate_tok_s], marker="*", s=200, color="black",
                 label="the log's best (128 x 64)")
    axis.axvline(BEST.median_ttft_ms, color="grey", linestyle=":")
    axis.set_xscale("log")
    axis.set_xlabel("median TTFT (ms)")
    axis.set_ylabel("output tokens/sec")
    axis.legend()
    figure.tight_layout()
    figure.savefig(out / "comparison.png")
    plt.close(figure)
    return [out / "comparison.png"]
