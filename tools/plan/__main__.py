"""Offline plan: run the real program under Pulumi mocks with a stack's config file.

No Pulumi CLI, no plugins, no credentials. Reviewers read a change with it:

    python -m tools.plan --stack dev                     # readable
    python -m tools.plan --stack dev --json > base.json  # one JSON object
    python -m tools.plan --stack dev --diff base.json    # what changed since that plan

Both outputs are byte-identical from run to run, so a plan can be diffed and reviewed.
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.plan", description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="dev", help="reads Pulumi.<stack>.yaml (default: dev)")
    shape = parser.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true", help="print one JSON object (keys sorted)")
    shape.add_argument("--diff", type=Path, metavar="BASE.json",
                       help="compare with a plan saved by --json from another commit")
    parser.add_argument("--config-dir", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    from components.settings import SettingsError
    from tools.plan import diff as plan_diff

    try:
        base = plan_diff.load_plan(args.diff) if args.diff else None
        plan = run_plan(args.stack, args.config_dir)
    except SettingsError as error:
        print(error.render(), file=sys.stderr)
        return 2
    except (FileNotFoundError, yaml.YAMLError, plan_diff.PlanFileError, PlanError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if base is not None:
        print(plan_diff.render_diff(base, json.loads(to_json(plan)), base_label=args.diff.name), end="")
    elif args.json:
        print(to_json(plan))
    else:
        print(render_text(plan), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
