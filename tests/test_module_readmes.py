"""Each module README (components/vm, components/gke, policy, startup) says what the module is for and where
a change goes, and its example commands work: every ```bash block after a `<!-- runnable -->` line runs with
bash in a copy of the repository (the test and policy venvs linked where the READMEs name them)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import fork_server

ROOT = Path(__file__).resolve().parent.parent
MODULE_READMES = ["components/README.md", "components/vm/README.md", "components/gke/README.md", "policy/README.md",
                  "startup/README.md"]
RUNNABLE = re.compile(r"^<!-- runnable -->\n```bash\n(.*?)^```$", re.S | re.M)
TEST_VENV = Path(os.environ.get("TPU_VLLM_TEST_VENV", ROOT / ".venv-test"))
POLICY_VENV = Path(os.environ.get("TPU_VLLM_POLICY_VENV", ROOT / "policy" / "venv"))


# `-m tools.plan ARGS` from the copy's root: run the first time (the copy's modules, forked from the worker's
# warm server: tests/fork_client.py), its output and status replayed after.
PLAN_ONCE = """#!/bin/bash
if [ "$1 $2" = "-m tools.plan" ] && [ "$PWD" = "COPY" ]; then
  run="RUNS/$(printf '%s\\0' "$@" | sha256sum | cut -c1-32)"
  if [ ! -f "$run.status" ]; then
    status=0
    FORKED "$@" >"$run.out" 2>"$run.err" || status=$?
    echo "$status" >"$run.status"
  fi
  cat "$run.out"
  cat "$run.err" >&2
  exit "$(cat "$run.status")"
fi
exec "REAL" "$@"
"""


def runnable_blocks(readme: str) -> list[str]:
    return RUNNABLE.findall((ROOT / readme).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def repo_copy(tmp_path_factory) -> Path:
    """The tracked files only (as a fresh clone has them), with the venvs where the READMEs look."""
    copy = tmp_path_factory.mktemp("repo")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file() and not source.is_symlink():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    (copy / "policy" / "venv").symlink_to(POLICY_VENV)
    # The test venv where the READMEs name it: every program in it, its python behind a wrapper that runs one
    # plan per argument list (several READMEs show the same plan, which is byte-identical from run to run:
    # tests/test_plan.py::test_the_plan_is_byte_identical_across_fresh_runs).
    bin_dir = copy / ".venv-test" / "bin"
    bin_dir.mkdir(parents=True)
    for program in (TEST_VENV / "bin").iterdir():
        if program.name != "python":
            (bin_dir / program.name).symlink_to(program)
    runs = tmp_path_factory.mktemp("plan-runs")
    # Forked only where the worker's interpreter is the venv's the READMEs name (the fork's interpreter is its).
    same_python = os.path.abspath(sys.executable) == os.path.abspath(TEST_VENV / "bin" / "python")
    forked = " ".join(shlex.quote(part) for part in fork_server.client_command()) if same_python else '"REAL"'
    (bin_dir / "python").write_text(PLAN_ONCE.replace("COPY", str(copy)).replace("RUNS", str(runs))
                                    .replace("FORKED", forked).replace("REAL", str(TEST_VENV / "bin" / "python")))
    (bin_dir / "python").chmod(0o755)
    return copy


@pytest.mark.parametrize("readme", MODULE_READMES)
def test_each_module_readme_says_where_a_change_goes_and_has_a_runnable_example(readme):
    text = (ROOT / readme).read_text(encoding="utf-8")
    assert "Where a change goes" in text or "| file |" in text, readme
    assert runnable_blocks(readme), f"{readme}: no ```bash block after <!-- runnable -->"
    # Every file a README's table names is there.
    module = (ROOT / readme).parent
    for name in re.findall(r"^\| `([\w./]+\.(?:py|sh|yaml))`", text, re.M):
        assert (module / name).exists() or (ROOT / name).exists(), f"{readme} names {name}, which is not there"


@pytest.mark.parametrize("readme", MODULE_READMES)
def test_the_runnable_examples_run(readme, repo_copy):
    for block in runnable_blocks(readme):
        completed = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=repo_copy, capture_output=True,
                                   text=True, timeout=300)
        assert completed.returncode == 0, (
            f"{readme}:\n{block}\nstdout:\n{completed.stdout}\nstderr:\n{completed.stderr}")
        assert completed.stdout.strip(), f"{readme}: the example printed nothing:\n{block}"


def test_a_failing_example_fails_the_run(repo_copy):
    completed = subprocess.run(["bash", "-euo", "pipefail", "-c", "false | grep x\necho after"], cwd=repo_copy,
                               capture_output=True, text=True)
    assert completed.returncode != 0 and "after" not in completed.stdout


def test_the_copys_python_is_the_test_venvs_and_a_repeated_plan_says_and_exits_as_the_first(repo_copy):
    def bash(command: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", command], cwd=repo_copy, capture_output=True, text=True, timeout=300)

    helped, helped_again = (bash(".venv-test/bin/python -m tools.plan --help") for _ in range(2))
    assert helped.returncode == 0 and helped.stdout.startswith("usage: python -m tools.plan")
    assert (helped_again.returncode, helped_again.stdout, helped_again.stderr) == (0, helped.stdout, helped.stderr)
    # Another argument list is its own run; a failure replays its status and error.
    failed, failed_again = (bash(".venv-test/bin/python -m tools.plan --stack nope") for _ in range(2))
    assert failed.returncode == failed_again.returncode == 2 and "Pulumi.nope.yaml" in failed.stderr
    assert (failed_again.stdout, failed_again.stderr) == (failed.stdout, failed.stderr)
    prefix = bash(".venv-test/bin/python -c 'import sys, yaml; print(sys.prefix)'")
    assert prefix.returncode == 0 and Path(prefix.stdout.strip()).resolve() == TEST_VENV.resolve()
