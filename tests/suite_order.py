"""Test files in the order that lets two workers finish together: the costliest first.

xdist's `--dist loadfile` hands each worker one file at a time, in the collection's order when
`--no-loadscope-reorder` is given (pytest-xdist 3.8.0, xdist/scheduler/loadscope.py: otherwise it sorts
files by their number of tests, which sends a one-test file that imports vLLM for 20 s to the very end).
Handing out the longest jobs first is the classic greedy schedule for two machines (longest processing
time first): the short files fill in at the end. The costs are the measured seconds per file, kept in
tests/suite_weights.json and rewritten from a run with `--record-suite-weights tests/suite_weights.json`.
A file not in it yet counts as the median file. Only the order changes: every test still runs.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path

WEIGHTS = Path(__file__).with_name("suite_weights.json")


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def load_weights(path: Path = WEIGHTS) -> dict[str, float]:
    try:
        weights = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    return {name: float(seconds) for name, seconds in weights.items()}


def ordered(items: list, weights: dict[str, float]) -> list:
    """The items, whole files together, costliest file first; the order within a file and between files of
    equal cost is kept (a stable sort), so every worker collects the same order, as xdist requires."""
    unknown = statistics.median(weights.values()) if weights else 0.0
    first_seen: dict[str, int] = {}
    for item in items:
        first_seen.setdefault(file_of(item.nodeid), len(first_seen))

    def cost(item) -> tuple[float, int]:
        name = file_of(item.nodeid)
        return -weights.get(name, unknown), first_seen[name]

    return sorted(items, key=cost)


class WeightRecorder:
    """Sums each file's setup, call and teardown seconds, as `--durations` reports them, and writes them at
    the end of the session. Registered in the controlling process only: under xdist every report reaches it."""

    def __init__(self, path: Path):
        self.path = path
        self.seconds: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report) -> None:
        self.seconds[file_of(report.nodeid)] += report.duration

    def pytest_sessionfinish(self, session, exitstatus) -> None:
        rounded = {name: round(seconds, 1) for name, seconds in sorted(self.seconds.items())}
        self.path.write_text(json.dumps(rounded, indent=1) + "\n")
