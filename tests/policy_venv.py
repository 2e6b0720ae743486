"""The policy pack's own venv (policy/venv, built by scripts/test.sh) from the tests: the pack's real entry on cases.

`entry_reports(cases, pack)` runs tests/policy_entry_check.py (which runs the pack's `__main__.py`, as
`pulumi preview --policy-pack policy` does) under the pack venv's python, in a child forked from the session's
one process that has imported pulumi-policy (tests/venv_forks.py, tests/venv_fork_server.py): its ~0.8 s import
is paid once per session, not once per check. The pack itself is not imported ahead: each check loads the
`__main__.py` and modules of the pack directory it names, as a fresh process does.
TPU_VLLM_TEST_POLICY_FORKS=0 runs every check as a fresh process instead.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests import venv_forks

ROOT = Path(__file__).resolve().parent.parent
ENTRY_CHECK = ROOT / "tests" / "policy_entry_check.py"
# What tests/policy_entry_check.py and the pack's __main__.py import from outside the pack (pulumi-policy pulls
# in pulumi, grpc and protobuf); the pack's own modules are left to each check.
WARM_MODULES = ("pulumi_policy", "pulumi_policy.policy", "pulumi_policy.proxy")


def policy_python() -> str:
    python = os.environ.get("TPU_VLLM_POLICY_PYTHON")
    if not python:
        pytest.skip("run through ./scripts/test.sh, which builds the policy pack's own venv")
    # A relative path is the test command's, from the repository root; the server starts elsewhere. Not
    # resolve(): the venv's python is a link that must stay the venv's.
    return os.path.join(ROOT, python)


def run_entry_check(request: dict, pack: Path, *, fresh: bool = False) -> subprocess.CompletedProcess:
    """tests/policy_entry_check.py on `request` (its JSON cases) for `pack`; `fresh`: a new process, never forked."""
    args = [str(ENTRY_CHECK), str(pack)]
    if fresh:
        return subprocess.run([policy_python(), *args], input=json.dumps(request), capture_output=True, text=True,
                              timeout=120)
    return venv_forks.run(policy_python(), args, warm=WARM_MODULES, name="policy",
                          opt_out="TPU_VLLM_TEST_POLICY_FORKS", env=dict(os.environ), input=json.dumps(request),
                          timeout=120, text=True)


def entry_reports(cases: dict[str, tuple[list, dict]], pack: Path = ROOT / "policy") -> dict:
    """Each case (resources as (type, props, urn) triples, the pack's config) through the pack's real entry: its
    name, level, each policy's level, and per case what each policy reported."""
    request = {"cases": {name: {"resources": resources, "config": config}
                         for name, (resources, config) in cases.items()}}
    completed = run_entry_check(request, pack)
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)
