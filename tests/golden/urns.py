"""Record each golden stack's URNs once: the state a stack deployed from this commit holds.

Never rewritten to match the code: a later change must keep finding every recorded URN (tests/test_urns.py),
so a refactor that would replace a live resource fails instead of silently re-recording. A resource removed
on purpose is removed from its file by hand, in the same commit, where the review sees it.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.golden import ROOT, STACKS, render


def current_commit() -> str:
    completed = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT, check=False)
    return completed.stdout.strip() or "unknown"


def record_urns() -> int:
    for stack in STACKS:
        if stack.urns_path.exists():
            print(f"{stack.name}: already recorded ({stack.urns_path.name}); left as it is")
            continue
        completed = render(stack)
        if completed.returncode != 0:
            print(f"{stack.name}: the plan failed:\n{completed.stderr}", file=sys.stderr)
            return 2
        urns = sorted(resource["urn"] for resource in json.loads(completed.stdout)["resources"])
        stack.urns_path.parent.mkdir(exist_ok=True)
        stack.urns_path.write_text(json.dumps({"recorded_at_commit": current_commit(), "urns": urns}, indent=2) + "\n",
                                   encoding="utf-8")
        print(f"{stack.name}: recorded {len(urns)} URNs")
    return 0


def recorded_urns(stack) -> list[str]:
    return json.loads(stack.urns_path.read_text(encoding="utf-8"))["urns"]
