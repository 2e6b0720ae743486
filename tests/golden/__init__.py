"""Golden plans: the offline plan of each example stack, checked in as JSON.

They guard every change: `tests/test_golden_plans.py` renders each plan again and fails on any
difference, printing the plan diff. A change that means to change the infrastructure rewrites
them on purpose, and the pull request's diff shows what changed:

    .venv-test/bin/python -m tests.golden --update

Beside them, tests/golden/urns/ holds each stack's URNs as recorded from an earlier commit, the state a
live stack has; `python -m tests.golden --record-urns` records a stack that has none yet.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
GOLDEN_DIR = Path(__file__).resolve().parent
VARIANT_STACKS_DIR = GOLDEN_DIR / "stacks"
URNS_DIR = GOLDEN_DIR / "urns"
"""Each stack's URNs as a live stack's state holds them: recorded once, never rewritten to match the code
(tests/test_urns.py proves the program still finds every one, itself or through an alias)."""


@dataclass(frozen=True)
class GoldenStack:
    name: str
    config_dir: Path
    """Where Pulumi.<name>.yaml lives: the repository root for the shipped stacks."""
    covers: str

    @property
    def plan_path(self) -> Path:
        return GOLDEN_DIR / f"{self.name}.json"

    @property
    def urns_path(self) -> Path:
        return URNS_DIR / f"{self.name}.json"


STACKS = (
    GoldenStack("dev", ROOT, "the shipped vm stack: flex-start, the hand-made hf-token secret"),
    GoldenStack("gke", ROOT, "the shipped gke stack"),
    GoldenStack("spot", VARIANT_STACKS_DIR, "vm on spot (no run duration that stops billing)"),
    GoldenStack("keepcache", VARIANT_STACKS_DIR, "vm whose cache disk outlives destroy (retain_on_delete)"),
    GoldenStack("stacktoken", VARIANT_STACKS_DIR, "vm whose stack keeps the HF token (secure: value)"),
    GoldenStack("arms", VARIANT_STACKS_DIR, "vm with every untested arm and every tpu-inference variable set"),
    GoldenStack("textonly", VARIANT_STACKS_DIR, "vm as the text-only trade (no media, the 2048 bucket)"),
    GoldenStack("gkearms", VARIANT_STACKS_DIR, "gke with tpu-inference variables and n-gram speculative decoding"),
    GoldenStack("qwenv6e", VARIANT_STACKS_DIR, "vm: Qwen3-8B on v6e-1 in us-east5-a (v6e runtime, Hyperdisk, parsers)"),
    GoldenStack("qwenv6egke", VARIANT_STACKS_DIR, "gke: Qwen3-8B on v6e-1 (ct6e-standard-1t, tpu-v6e-slice)"),
    GoldenStack("gkegateway", VARIANT_STACKS_DIR, "gke with the opt-in inference gateway (Gateway, pool, picker)"),
    GoldenStack("dpv5e8", VARIANT_STACKS_DIR, "vm: the log's model on v5litepod-8 at the planned layout"),
    GoldenStack("dpv5e8gke", VARIANT_STACKS_DIR, "gke: the log's model on v5litepod-8, dataParallelSize 8 in one pod"),
    GoldenStack("v6ecompute", VARIANT_STACKS_DIR, "vm: v6e-1 through Compute Engine (tpu.api: compute, "
                "ct6e-standard-1t, flex-start)"),
    GoldenStack("tpu7xflex", VARIANT_STACKS_DIR, "vm: issue 43's Done-when, tpu7x-standard-4t flex-start for 7 days "
                "through Compute Engine"),
    GoldenStack("tpu7xgke", VARIANT_STACKS_DIR, "gke: the log's model on tpu7x-standard-4t (tpu7x, 2x2x1, four "
                "chips a replica)"),
    GoldenStack("gkezero", VARIANT_STACKS_DIR, "the gateway stack at gke.minReplicas 0 (flow control, the picker's "
                "queue to the HPA)"),
)


def render(stack: GoldenStack) -> subprocess.CompletedProcess:
    """The plan exactly as a reviewer's `python -m tools.plan --json` prints it (in a pytest session, once per
    session: tests/shared_runs.py)."""
    from tests import program

    return program.plan(["--stack", stack.name, "--json"], config_dir=stack.config_dir)
