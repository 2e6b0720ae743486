"""What a sweep prints and plots: costs, notes, the run beside the build log, and beside another run.

A run is compared as the log compares configurations: the whole configuration measured, cell by cell, each
ratio judged against a spread. Against the log the spread is the log's own coefficient of variation
(reference.CV); between two runs it is the larger of their two measured ones, else the log's.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from components.reading import bounded
from tools.bench import reference
from tools.bench.results import PRICINGS, CellResult

WIDTH = 29  # one metric's three columns
KEY_WIDTH = 18


class RunCell(BaseModel):
    """One cell as a run's JSON holds it: the figures a comparison needs."""

    model_config = ConfigDict(extra="ignore")
    context: int
    clients: int
    status: str = "ok"
    aggregate_tok_s: float | None = None
    median_ttft_ms: float | None = None
    per_stream_tok_s: float | None = None
    cv: float | None = None
    ttft_cv: float | None = None
    per_stream_cv: float | None = None
    errors: int = 0

    def figure(self, metric: str) -> float | None:
        return getattr(self, metric) if self.status == "ok" else None

    def spread(self, metric: str) -> float | None:
        return {"aggregate_tok_s": self.cv, "median_ttft_ms": self.ttft_cv,
                "per_stream_tok_s": self.per_stream_cv}[metric]


class RunFile(BaseModel):
    model_config = ConfigDict(extra="ignore")
    label: str | None = None
    cells: list[RunCell]


class CompareFileError(Exception):
    pass


MAX_RUN_BYTES = 16 * bounded.MIB
"""A run of the log's 12 cells writes ~100 KB; 16 MB is no bench run."""


def load_run(path: Path) -> tuple[str, list[RunCell]]:
    """Another run's JSON (written by --json), or a clear error naming --compare, the file and the fix."""
    fix = "pass a file written by `python -m tools.bench --json FILE`"
    try:
        run = RunFile.model_validate(bounded.read_json(path, MAX_RUN_BYTES, "bench run"))
    except bounded.ReadError as error:
        raise CompareFileError(f"--compare {error}; {fix}") from None
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise CompareFileError(f"--compare {path}: not a bench run ({where}: {first['msg']}); {fix}") from None
    return run.label or path.stem, run.cells


def run_cells(cells: Iterable[CellResult]) -> list[RunCell]:
    return [RunCell.model_validate(cell.summary()) for cell in cells]


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _digits(metric: str) -> int:
    return 0 if metric == "per_stream_tok_s" else 1


def _triple(before: float | None, after: float | None, yardstick: float | None, metric: str) -> str:
    ratio = after / before if after is not None and before else None
    judged = f"{ratio:.2f}x{reference.verdict(ratio, yardstick) or ' '}" if ratio is not None else "-"
    digits = _digits(metric)
    return f"{_fmt(before, digits):>10}{_fmt(after, digits):>10}{judged:>9}"


def _header(before: str, after: str) -> list[str]:
    first = "".ljust(KEY_WIDTH) + "".join(f"{reference.TITLES[m]:^{WIDTH}}" for m in reference.METRICS)
    second = "context x clients".ljust(KEY_WIDTH) + "".join(
        f"{before[:9]:>10}{after[:9]:>10}{'ratio':>9}" for _ in reference.METRICS)
    return [first, second]


def against_log(cells: list[RunCell]) -> str:
    by_key = {(c.context, c.clients): c for c in cells}
    keys = sorted(set(reference.LOG) | set(by_key))
    lines = ["", "The build log beside this run (ratio = this run / log; '=' within the log's coefficient of "
                 f"variation of {reference.CV:.1%}",
             "(56% for the 128 x 16 TTFT it marks), '+' above it, '-' below; cv = this run's across repetitions)",
             *_header("log", "measured")]
    lines[-1] += f"{'cv':>7}{'errors':>8}"
    for context, clients in keys:
        logged, cell = reference.LOG.get((context, clients)), by_key.get((context, clients))
        row = f"{context:>6} x {clients:<9}"
        for metric in reference.METRICS:
            before = getattr(logged, metric) if logged else None
            after = cell.figure(metric) if cell else None
            row += _triple(before, after, reference.log_cv(context, clients, metric), metric)
        if cell:
            row += f"{_fmt(cell.cv * 100 if cell.cv is not None else None):>6}%{cell.errors:>8}"
            row += "" if cell.status == "ok" else f"  {cell.status}"
        else:
            row += "  not run"
        lines.append(row)
    return "\n".join(lines)


def against_run(cells: list[RunCell], other_label: str, other: list[RunCell], label: str) -> str:
    mine = {(c.context, c.clients): c for c in cells}
    theirs = {(c.context, c.clients): c for c in other}
    lines = ["", f"{label} beside {other_label} (ratio = {label} / {other_label}; '=' within the larger of the "
                 "two runs' coefficients of variation, else the log's)", *_header(other_label, label)]
    for key in sorted(set(mine) | set(theirs)):
        a, b = theirs.get(key), mine.get(key)
        row = f"{key[0]:>6} x {key[1]:<9}"
        for metric in reference.METRICS:
            spreads = [s for s in (a.spread(metric) if a else None, b.spread(metric) if b else None) if s is not None]
            yardstick = max(spreads) if spreads else reference.log_cv(key[0], key[1], metric)
            row += _triple(a.figure(metric) if a else None, b.figure(metric) if b else None, yardstick, metric)
        lines.append(row)
    return "\n".join(lines)


def costs(cells: list[CellResult]) -> str:
    lines = ["", "Cost per million output tokens (USD) at the measured aggregate rate",
             "context x clients".ljust(18) + "".join(f"{p:>14}" for p in PRICINGS)]
    for cell in cells:
        prices = cell.cost_per_million()
        lines.append(f"{cell.context:>6} x {cell.clients:<9}" + "".join(f"{_fmt(prices[p], 3):>14}" for p in PRICINGS))
    return "\n".join(lines)


def notes(cells: list[CellResult]) -> str:
    found = [f"  {c.context} x {c.clients}: {c.status}: {c.reason}" for c in cells if c.status != "ok"]
    found += [f"  {c.context} x {c.clients}: warning: {c.warning}" for c in cells if c.warning]
    found += [f"  {c.context} x {c.clients}: {c.errors} failed request(s), {c.timeouts} timeout(s); "
              f"first: {c.first_error}" for c in cells if c.status == "ok" and c.errors]
    found += [f"  {c.context} x {c.clients}: {c.counted_from_chunks} request(s) streamed no usage: their output "
              "tokens are their token chunks (one token per chunk, as vLLM streams)"
              for c in cells if c.counted_from_chunks]
    return "\n".join(["", "Notes:", *found]) if found else ""


def render(cells: list[CellResult], compare: tuple[str, list[RunCell]] | None = None,
           label: str = "this run") -> str:
    measured = run_cells(cells)
    parts = [costs(cells), notes(cells), against_log(measured)]
    if compare:
        parts.append(against_run(measured, compare[0], compare[1], label))
    return "\n".join(part for part in parts if part)


def plot(cells: list[CellResult], path: Path, compare: tuple[str, list[RunCell]] | None = None,
         label: str = "this run") -> None:
    import matplotlib.pyplot as plt

    figure = build_figure(cells, compare, label)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def build_figure(cells: list[CellResult], compare: tuple[str, list[RunCell]] | None = None,
                 label: str = "this run"):
    """Three panels, one per log table: solid this run, dashed the log, dotted the compared run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    measured = run_cells(cells)
    figure, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    runs = [(label, measured, "-", 1.0)]
    if compare:
        runs.append((compare[0], compare[1], ":", 0.8))
    contexts = sorted({c.context for c in measured} | {c for c, _ in reference.LOG})
    colors = {context: f"C{index}" for index, context in enumerate(contexts)}
    for axis, metric in zip(axes, reference.METRICS, strict=True):
        for context in contexts:
            logged = sorted((n, getattr(v, metric)) for (ctx, n), v in reference.LOG.items() if ctx == context)
            axis.plot([n for n, _ in logged], [v for _, v in logged], "--", color=colors[context], alpha=0.45,
                      gid="build log")
            for name, run, style, alpha in runs:
                row = sorted((c.clients, c.figure(metric)) for c in run
                             if c.context == context and c.figure(metric) is not None)
                axis.plot([n for n, _ in row], [v for _, v in row], style, marker="o", color=colors[context],
                          alpha=alpha, label=f"{context} ctx" if style == "-" else None, gid=name)
        axis.set_xscale("log", base=2)
        axis.set_xticks(sorted({c.clients for c in measured} | set(reference.CLIENTS)))
        axis.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
        axis.set_xlabel("concurrent clients")
        axis.set_title(reference.TITLES[metric])
        axis.grid(alpha=0.3)
    axes[1].set_yscale("log")
    styles = f"solid: {label}, dashed: build log" + (f", dotted: {compare[0]}" if compare else "")
    axes[0].legend(title=styles, fontsize=8, title_fontsize=8)
    figure.suptitle("tpu-vllm benchmark against the build log")
    figure.tight_layout()
    return figure
