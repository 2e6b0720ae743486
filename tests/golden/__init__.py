"""Golden plans: the offline plan of each example stack, checked in as JSON.

They guard every change: `tests/test_golden_plans.py` renders each plan again and fails on any
difference, printing the plan diff. A change that means to change the infrastructure rewrites
them on purpose, and the pull request's diff shows what changed:

    .venv-test/bin/python -m tests.golden --update
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
GOLDEN_DIR = Path(__file__).resolve().parent
VARIANT_STACKS_DIR = GOLDEN_DIR / "stacks"


@dataclass(frozen=True)
class GoldenStack:
    name: str
    config_dir: Path
    """Where Pulumi.<name>.yaml lives: the repository root for the shipped stacks."""
    covers: str

    @property
    def plan_path(self) -> Path:
        return GOLDEN_DIR / f"{self.name}.json"


STACKS = (
    GoldenStack("dev", ROOT, "the shipped vm stack: flex-start, the hand-made hf-token secret"),
    GoldenStack("gke", ROOT, "the shipped gke stack"),
    GoldenStack("spot", VARIANT_STACKS_DIR, "vm on spot (no run duration that stops billing)"),
    GoldenStack("keepcache", VARIANT_STACKS_DIR, "vm whose cache disk outlives destroy (retain_on_delete)"),
    GoldenStack("stacktoken", VARIANT_STACKS_DIR, "vm whose stack keeps the HF token (secure: value)"),
    GoldenStack("arms", VARIANT_STACKS_DIR, "vm with every untested arm and every tpu-inference variable set"),
    GoldenStack("textonly", VARIANT_STACKS_DIR, "vm as the text-only trade (no media, the 2048 bucket)"),
    GoldenStack("gkearms", VARIANT_STACKS_DIR, "gke with tpu-inference variables and n-gram speculative decoding"),
)


def render(stack: GoldenStack) -> subprocess.CompletedProcess:
    """The plan exactly as a reviewer's `python -m tools.plan --json` prints it."""
    return subprocess.run(
        [sys.executable, "-m", "tools.plan", "--stack", stack.name, "--config-dir", str(stack.config_dir), "--json"],
        capture_output=True, text=True, cwd=ROOT, timeout=300)
