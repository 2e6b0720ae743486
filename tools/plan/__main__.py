"""Offline plan: run the real program under Pulumi mocks with a stack's config file.

No Pulumi CLI, no plugins, no credentials. Reviewers read a change with it:

    python -m tools.plan --stack dev                     # readable
    python -m tools.plan --stack dev --json > base.json  # one JSON object
    python -m tools.plan --stack dev --diff base.json    # what changed since that plan

Every form comes from one run of the program: the text (or --json) on stdout, and the JSON and the diff into
files beside it, as CI publishes them (scripts/plan-artifact.sh):

    python -m tools.plan --stack dev --json-out plan.json --diff base.json --diff-out diff.txt > plan.txt

Every form is byte-identical from run to run, so a plan can be diffed and reviewed.
Secrets (and `secure:` values it cannot decrypt) appear only as "[secret]"; what only GCP
knows after deploy (IPs, states) appears as a marked <placeholder>.
An invalid config exits 2 with every problem listed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from tools.plan.model import ROOT, PlanError, run_plan, to_json
from tools.plan.render import render_text

EPILOG = """\
every form from one run of the program, as scripts/plan-artifact.sh publishes them:
  python -m tools.plan --stack dev --json-out plan.json --diff base.json --diff-out diff.txt > plan.txt

stdout carries one form: the text, the JSON with --json, or the diff with --diff (unless --diff-out takes it).
--json-out and --diff-out write the other forms from the same run, each once the plan is computed: a plan that
fails writes no file (and leaves one an earlier run wrote as it was). Exit status: 0, or 2 for an invalid
config, a base plan that cannot be read (with --diff-out, the text and --json-out are written first: the diff
alone is missing) or a file it cannot write."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.plan", description=__doc__.splitlines()[0],
                                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stack", default="dev", help="reads Pulumi.<stack>.yaml (default: dev)")
    parser.add_argument("--json", action="store_true", help="print one JSON object (keys sorted)")
    parser.add_argument("--diff", type=Path, metavar="BASE.json",
                        help="compare with a plan saved by --json (or --json-out) from another commit")
    parser.add_argument("--json-out", type=Path, metavar="FILE",
                        help="also write the JSON (the bytes --json prints) to FILE")
    parser.add_argument("--diff-out", type=Path, metavar="FILE",
                        help="write the --diff to FILE instead of stdout, which then has the text (or --json's)")
    parser.add_argument("--config-dir", type=Path, default=ROOT, help=argparse.SUPPRESS)
    return parser


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.json and args.diff and not args.diff_out:
        parser.error("argument --diff: not allowed with argument --json (both print to stdout; "
                     "add --diff-out FILE to write the diff to a file)")
    if args.diff_out and not args.diff:
        parser.error("argument --diff-out: needs --diff BASE.json (the plan to compare with)")
    # A file written before the base is read must not be the base, nor two forms one file.
    paths = [(name, path.resolve()) for name, path in
             (("--diff", args.diff), ("--json-out", args.json_out), ("--diff-out", args.diff_out)) if path]
    for index, (name, path) in enumerate(paths):
        for other, other_path in paths[index + 1:]:
            if path == other_path or _one_file(path, other_path):
                parser.error(f"argument {other}: {other_path} is also {name}'s file; give each its own")


def _one_file(path: Path, other: Path) -> bool:
    """Two names of one existing file (a hard link: resolve() leaves both names as they are)."""
    try:
        return path.samefile(other)
    except OSError:  # one is not there yet: nothing to share
        return False


class OutputError(Exception):
    """A file the plan was asked to write cannot be written."""


def _write(path: Path, text: str) -> None:
    """Whole or not at all: written beside the file, then renamed over it (a full disk leaves no half plan)."""
    partial = path.with_name(f".{path.name}.partial")
    try:
        partial.write_text(text, encoding="utf-8")
        partial.replace(path)
    except OSError as error:
        partial.unlink(missing_ok=True)
        raise OutputError(f"cannot write {path}: {error.strerror or error}") from None


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    _check(parser, args)

    from components.settings import SettingsError
    from tools.plan import diff as plan_diff

    try:
        # Read first, so a wrong path costs no run of the program; beside --diff-out, once the other forms are out.
        base = plan_diff.load_plan(args.diff) if args.diff and not args.diff_out else None
        plan = run_plan(args.stack, args.config_dir)
        as_json = to_json(plan)
        if args.json_out:
            _write(args.json_out, as_json + "\n")
        if base is not None:
            print(plan_diff.render_diff(base, json.loads(as_json), base_label=args.diff.name), end="")
            return 0
        if args.json:
            print(as_json)
        else:
            print(render_text(plan), end="")
        if args.diff_out:
            base = plan_diff.load_plan(args.diff)
            _write(args.diff_out, plan_diff.render_diff(base, json.loads(as_json), base_label=args.diff.name))
    except SettingsError as error:
        print(error.render(), file=sys.stderr)
        return 2
    except (FileNotFoundError, yaml.YAMLError, plan_diff.PlanFileError, PlanError, OutputError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
