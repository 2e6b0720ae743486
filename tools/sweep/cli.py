"""Run a sweep: arms (sets of tpu-vllm: settings over a base stack) deployed one after another in a stack of their
own, each benchmarked with tools.bench's cells, compared in one table; nothing left billing.

    python -m tools.sweep sweeps/log-arms.yaml --dry-run   # order, expected time and spend; no CLI, no credentials
    python -m tools.sweep sweeps/log-arms.yaml             # run it; Ctrl-C cancels, destroys, and says so
    python -m tools.sweep sweeps/log-arms.yaml --resume    # go on after the last finished arm
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tools.sweep import estimate
from tools.sweep.journal import Journal, JournalError
from tools.sweep.sweep_file import SweepFileError, read

PROJECT_DIR = Path(__file__).resolve().parents[2]
DEFAULT_OUT = Path("bench-results") / "sweeps"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.sweep", description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("sweep_file", type=Path, metavar="SWEEP.yaml", help="the sweep file (e.g. sweeps/log-arms.yaml)")
    add("--dry-run", action="store_true",
        help="print the order, each arm's expected time and spend and the totals, and stop (default: off)")
    add("--resume", action="store_true", help="continue after the last finished arm (default: off, start afresh)")
    add("--out", type=Path, default=None, metavar="DIR",
        help=f"where the events, results, plots and comparison go (default: {DEFAULT_OUT}/<sweep file's name>)")
    add("--project-dir", type=Path, default=PROJECT_DIR, metavar="DIR",
        help="the Pulumi project (default: this repository)")
    add("--install-cli", action="store_true",
        help="install the pinned Pulumi CLI under ~/.pulumi/versions/ if it is not there (default: off, the "
             "`pulumi` on PATH, at least the pinned version)")
    return parser


def main(argv: list[str] | None = None, *, pulumi_command: object | None = None,
         tunnel: object | None = None, ticker: object | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = args.out or DEFAULT_OUT / args.sweep_file.stem
    journal = None
    try:
        journal = Journal.load(out / "journal.json") if args.resume else None
        sweep = read(args.sweep_file, args.project_dir, resumed_stack=journal.stack if journal else None)
        planned = estimate.plan(sweep)
    except SweepFileError as error:
        print(f"error: {error.render()}", file=sys.stderr)
        return 2
    except JournalError as error:
        print(f"error: --resume: {error}", file=sys.stderr)
        return 2
    for warning in sweep.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(estimate.render(planned))
    if planned.problems:
        print("\nerror: the sweep is refused before anything starts (see above)", file=sys.stderr)
        return 2
    if args.dry_run:
        return 0
    from tools.sweep import runner

    return runner.run(planned, out, resume=args.resume, install_cli=args.install_cli,
                      pulumi_command=pulumi_command, tunnel=tunnel, ticker=ticker, journal=journal)
