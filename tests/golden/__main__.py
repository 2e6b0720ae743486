"""Rewrite (or check) the golden plans: python -m tests.golden [--update]."""

from __future__ import annotations

import argparse
import sys

from tests.golden import STACKS, render
from tests.golden.urns import record_urns


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.golden", description=__doc__)
    parser.add_argument("--update", action="store_true",
                        help="rewrite the golden plans that differ (default: only report them)")
    parser.add_argument("--record-urns", action="store_true",
                        help="record tests/golden/urns/<stack>.json for each stack that has none (never rewrites one)")
    args = parser.parse_args(argv)
    if args.record_urns:
        return record_urns()
    differing = []
    for stack in STACKS:
        completed = render(stack)
        if completed.returncode != 0:
            print(f"{stack.name}: the plan failed:\n{completed.stderr}", file=sys.stderr)
            return 2
        old = stack.plan_path.read_text(encoding="utf-8") if stack.plan_path.exists() else None
        if old == completed.stdout:
            print(f"{stack.name}: unchanged")
            continue
        differing.append(stack.name)
        if args.update:
            stack.plan_path.write_text(completed.stdout, encoding="utf-8")
            print(f"{stack.name}: rewritten ({stack.plan_path.relative_to(stack.plan_path.parents[2])})")
        else:
            print(f"{stack.name}: differs (run with --update to rewrite it)")
    return 1 if differing and not args.update else 0


if __name__ == "__main__":
    sys.exit(main())
