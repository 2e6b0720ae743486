"""The pull-request preview job's shell steps, run for real in a clean clone.

The job's `run:` steps come out of .github/workflows/preview.yml and run with bash as the runner does
(`bash --noprofile --norc -eo pipefail`), in a `git clone` of this repository (plus uncommitted changes to
tracked files, so the test checks the working copy). Only `uses:` steps are left out (checkout,
setup-python, Google auth, setup-gcloud, pulumi/actions: the CLI and the cloud). Then every virtualenv
that Pulumi.yaml and policy/PulumiPolicy.yaml name must exist where the Python language host looks
(resolved in each file's own directory) and hold what it needs: the program's pinned requirements and the
program itself (the offline plan of the stack runs in it), and the policy pack's analyzer started the way
RunPlugin starts it (`<venv>/bin/python policy/ ENGINE`, pulumi/pulumi
sdk/python/cmd/pulumi-language-python/main.go), answering GetAnalyzerInfo with the pack's policies.
pip installs from the package registries (its cache is reused). The build from nothing is paid once per
set of build inputs (the script, the workflow, the requirements, the interpreter: tests/reused_build.py); a
later session runs the same steps over the venvs it left, and every check after the build runs every time.
"""

from __future__ import annotations

import base64
import json
import operator
import os
import re
import select
import shutil
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
import yaml
from google.protobuf import empty_pb2
from pulumi.runtime.proto import analyzer_pb2_grpc

from tests import reused_build
from tests.github_script import INNOCENT, TOKENS, fenced, hostile_output, leaks, pull_request, run_github_script, writes

ROOT = Path(__file__).resolve().parent.parent
RUNNER_SHELL = ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c"]
STEP_TIMEOUT = 600  # pip installs two environments; from the registry mirror and pip's cache it is far less
ENCRYPTED_TOKEN = {"secure": "v1:AAAABBBBCCCCciphertextOnly0123456789"}
# Only these expressions appear in the preview job's run steps and their env; any other one is a test gap.
VARS_WITH_DEFAULT = re.compile(r"\$\{\{\s*vars\.(\w+)\s*\|\|\s*'([^']*)'\s*\}\}")
VARIABLE_OR_SECRET = re.compile(r"\$\{\{\s*(vars|secrets)\.(\w+)\s*\}\}")
# The Pulumi CLI as the preview step finds it on PATH (pulumi/actions installs the real one): it records its
# arguments and its PULUMI_* environment, prints the output it was given (stdout, then stderr) and exits with
# the status it was given.
FAKE_PULUMI = """#!/bin/bash
here="$(dirname "$0")"
printf '%s\\n' "$@" > "$here/args"
env | grep '^PULUMI_' | sort > "$here/env"
cat "$here/stdout"
cat "$here/stderr" >&2
exit "$(cat "$here/status")"
"""
# A preview that passed, as `pulumi preview --diff --color never` ends one.
PASSING_PREVIEW = ("Previewing update (my-org/dev)\n\n    pulumi:pulumi:Stack: (same)\n"
                   "        [urn=urn:pulumi:dev::tpu-vllm::pulumi:pulumi:Stack::tpu-vllm-dev]\n"
                   "Resources:\n    31 unchanged\n")


def preview_job() -> dict:
    return yaml.safe_load((ROOT / ".github/workflows/preview.yml").read_text())["jobs"]["preview"]


def resolve(text: str, variables: dict[str, str], secrets: dict[str, str] | None = None) -> str:
    resolved = VARS_WITH_DEFAULT.sub(lambda m: variables.get(m.group(1)) or m.group(2), text)
    # An unset variable or secret is the empty string.
    resolved = VARIABLE_OR_SECRET.sub(
        lambda m: (variables if m.group(1) == "vars" else secrets or {}).get(m.group(2), ""), resolved)
    assert "${{" not in resolved, f"an expression this test cannot evaluate: {text}"
    return resolved


def runner_path(tmp: Path, clone: Path) -> str:
    """setup-python's Python 3.11 first on PATH (as `python` and `python3`), the CLI pulumi/actions installed,
    then the system's tools only. The Python sits beside the clone, where it stays as long as the clone does:
    the venvs the job builds link to it (a reused clone's venvs too, tests/reused_build.py)."""
    bin_dir = clone.parent / "setup-python-bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("python", "python3"):
        if not (bin_dir / name).exists():
            (bin_dir / name).symlink_to(getattr(sys, "_base_executable", sys.executable))
    return f"{bin_dir}:{tmp / 'pulumi-bin'}:/usr/bin:/bin"


def fake_pulumi(tmp: Path, stdout: str = PASSING_PREVIEW, stderr: str = "", status: int = 0) -> Path:
    """The CLI the next preview step runs; returns its directory (its `args` and `env` files, once it ran)."""
    bin_dir = tmp / "pulumi-bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "pulumi").write_text(FAKE_PULUMI)
    (bin_dir / "pulumi").chmod(0o755)
    for name, text in (("stdout", stdout), ("stderr", stderr), ("status", str(status)), ("args", ""), ("env", "")):
        (bin_dir / name).write_text(text)
    return bin_dir


def run_step(step: dict, clone: Path, tmp: Path, variables: dict[str, str],
             secrets: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    """One `run:` step as the runner runs it; the outputs it wrote to $GITHUB_OUTPUT."""
    output_file = tmp / "github_output"
    output_file.write_text("")
    runner_temp = tmp / "runner-temp"
    runner_temp.mkdir(exist_ok=True)
    passed = {key: value for key, value in os.environ.items()
              if key.startswith("PIP_") or key in ("HOME", "LANG", "SSL_CERT_FILE", "HTTPS_PROXY", "https_proxy",
                                                     "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy")}
    env = {**passed, "PATH": runner_path(tmp, clone), "GITHUB_OUTPUT": str(output_file),
           "RUNNER_TEMP": str(runner_temp), "CI": "true",
           **{key: resolve(str(value), variables, secrets) for key, value in (step.get("env") or {}).items()}}
    result = subprocess.run([*RUNNER_SHELL, resolve(step["run"], variables, secrets)], cwd=clone, env=env,
                            capture_output=True, text=True, timeout=STEP_TIMEOUT)
    lines = output_file.read_text().splitlines()
    return result, dict(line.split("=", 1) for line in lines if "=" in line)


def run_job_steps(clone: Path, tmp: Path, variables: dict[str, str]) -> tuple[subprocess.CompletedProcess, dict]:
    """Each `run:` step in order, as the runner runs it; stops at the first failure. The steps' outputs."""
    outputs: dict[str, dict[str, str]] = {}
    result = None
    for step in preview_job()["steps"]:
        if "uses" in step:
            continue  # actions: checkout, setup-python, credentials, gcloud, the Pulumi CLI, the PR comment
        result, outputs[step.get("id", "")] = run_step(step, clone, tmp, variables)
        if result.returncode != 0:
            break
    assert result is not None, "the preview job has no run: step"
    return result, outputs


def language_host_venv(project_file: Path) -> Path:
    """Where the Python language host looks: `virtualenv`, relative to the file's own directory."""
    options = yaml.safe_load(project_file.read_text())["runtime"]["options"]
    return project_file.parent / options.get("virtualenv", "venv")


def pins(requirements: Path) -> dict[str, str]:
    found = {}
    for line in requirements.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            found[name.strip().lower()] = version.strip()
    return found


INSTALLED = """
import importlib.metadata as metadata, json, sys
wanted = json.loads(sys.argv[1])
print(json.dumps({name: metadata.version(name) for name in wanted}))
"""


def installed_versions(python: Path, wanted: dict[str, str]) -> dict[str, str]:
    result = subprocess.run([str(python), "-c", INSTALLED, json.dumps(sorted(wanted))], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def analyzer_info(python: Path, clone: Path) -> object:
    """Start the pack as RunPlugin does and ask it what it is, over the Analyzer gRPC service."""
    process = subprocess.Popen([str(python), str(clone / "policy"), "127.0.0.1:1"], cwd=clone,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                               # Unbuffered, so the port line crosses the pipe before the pack waits for calls.
                               env={"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp"),
                                    "PYTHONUNBUFFERED": "1"})
    try:
        ready, _, _ = select.select([process.stdout], [], [], 120)
        assert ready, "the policy pack did not print its port"
        line = process.stdout.readline().decode().strip()
        assert line.isdigit(), f"no port from the pack: {line!r} {process.stderr.read1().decode()}"
        with grpc.insecure_channel(f"127.0.0.1:{line}", options=[("grpc.enable_http_proxy", 0)]) as channel:
            grpc.channel_ready_future(channel).result(timeout=60)
            return analyzer_pb2_grpc.AnalyzerStub(channel).GetAnalyzerInfo(empty_pb2.Empty(), timeout=60)
    finally:
        process.kill()
        process.wait(timeout=30)
        process.stdout.close()
        process.stderr.close()


def with_user_settings(stack_file: Path, **config) -> None:
    """What the user commits: their project and the encrypted token (`pulumi config set --secret`)."""
    document = yaml.safe_load(stack_file.read_text())
    document["config"].update(config)
    stack_file.write_text(yaml.safe_dump(document, sort_keys=False))


# What the prepare step's build depends on (tests/reused_build.py): a change to any of them builds from nothing.
BUILD_INPUTS = ["scripts/preview-prepare.sh", ".github/workflows/preview.yml", "requirements.txt",
                "policy/requirements.txt", "Pulumi.yaml", "policy/PulumiPolicy.yaml"]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """The job's run steps in a clean clone of the stack the user committed (dev, with their project).

    The clone is built from nothing once per set of build inputs (tests/reused_build.py); later sessions run
    the same steps in a clone brought back to the working copy, over the venvs that first build left."""
    tmp = tmp_path_factory.mktemp("preview-job")
    with reused_build.clone_built_once("preview-job", BUILD_INPUTS) as (clone, _, built_mark):
        fake_pulumi(tmp)
        with_user_settings(clone / "Pulumi.dev.yaml", **{"gcp:project": "my-project",
                                                         "tpu-vllm:hfToken": ENCRYPTED_TOKEN})
        result, outputs = run_job_steps(clone, tmp, {"PULUMI_STACK_NAME": "my-org/dev"})
        if result.returncode == 0:
            built_mark.write_text("the preview job's prepare step built both venvs in this clone\n")
        yield clone, tmp, result, outputs


def test_the_preview_job_builds_every_venv_the_language_host_runs(prepared):
    clone, _, result, outputs = prepared
    assert result.returncode == 0, result.stderr + result.stdout
    assert outputs["prepare"] == {"platform": "vm"}

    program_venv = language_host_venv(clone / "Pulumi.yaml")
    pack_venv = language_host_venv(clone / "policy/PulumiPolicy.yaml")
    assert pack_venv == clone / "policy/venv"  # inside policy/, not the program's venv/
    for venv, requirements in ((program_venv, clone / "requirements.txt"),
                               (pack_venv, clone / "policy/requirements.txt")):
        assert (venv / "pyvenv.cfg").is_file() and (venv / "bin/python").exists(), venv
        wanted = pins(requirements)
        assert installed_versions(venv / "bin/python", wanted) == wanted

    # The program runs in its venv: the offline plan imports __main__.py and every module it uses.
    plan = subprocess.run([str(program_venv / "bin/python"), "-m", "tools.plan", "--stack", "dev", "--json"],
                          cwd=clone, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")})
    assert plan.returncode == 0, plan.stderr
    preview_iam = json.loads(plan.stdout)["outputs"]["previewIam"]
    # This stack keeps the token, so its own secret's version is read by a refresh, as are the API key's and
    # the node's SSH host key's; vm reads the TPU API.
    assert set(preview_iam["secretAccessor"]) == {"tpu-vllm-dev-api-key", "tpu-vllm-dev-hf-token",
                                                  "tpu-vllm-dev-ssh-host-key"}
    assert "roles/tpu.viewer" in preview_iam["projectRoles"]
    program_import = subprocess.run([str(program_venv / "bin/python"), "-c",
                                     "import pulumi.dynamic, components.vm.deployment, components.gke.deployment"],
                                    cwd=clone, capture_output=True, text=True, timeout=120)
    assert program_import.returncode == 0, program_import.stderr

    # The pack through its real entry, in its own venv, as `pulumi preview --policy-pack policy` starts it.
    info = analyzer_info(pack_venv / "bin/python", clone)
    names = {policy.name for policy in info.policies}
    assert info.name == "tpu-vllm"
    assert {"tpu-billing-stops", "metadata-has-no-secrets", "firewall-not-open-to-the-world",
            "gke-tpu-pool-run-ends"} <= names


def test_a_gke_stack_gets_the_auth_plugin_step(prepared):
    clone, tmp, _, _ = prepared
    with_user_settings(clone / "Pulumi.gke.yaml", **{"gcp:project": "my-project"})
    result, outputs = run_job_steps(clone, tmp, {"PULUMI_STACK_NAME": "my-org/gke"})
    assert result.returncode == 0, result.stderr
    assert outputs["prepare"] == {"platform": "gke"}
    step = next(s for s in preview_job()["steps"]
                if s.get("uses", "").startswith("google-github-actions/setup-gcloud@"))
    assert step["if"] == "steps.prepare.outputs.platform == 'gke'"
    assert step["with"]["install_components"] == "gke-gcloud-auth-plugin"
    steps = preview_job()["steps"]
    auth = next(i for i, s in enumerate(steps) if s.get("uses", "").startswith("google-github-actions/auth@"))
    assert auth < steps.index(step)  # gcloud (and the plugin) use the federated credentials


@pytest.mark.parametrize(("stack", "edit", "says"), [
    ("prod", None, "Pulumi.prod.yaml is not in this commit (PULUMI_STACK_NAME=prod)"),
    ("dev", {"gcp:project": None}, "gcp:project is not set: pulumi config set gcp:project YOUR_PROJECT"),
    ("dev", {"tpu-vllm:hfToken": "hf_plaintextCANARY"}, "tpu-vllm:hfToken is in plaintext"),
])
def test_a_stack_file_the_preview_cannot_use_stops_the_job_with_the_fix(prepared, stack, edit, says):
    clone, tmp, _, _ = prepared
    original = (clone / "Pulumi.dev.yaml").read_text()
    try:
        if edit:
            with_user_settings(clone / "Pulumi.dev.yaml", **edit)
        result, outputs = run_job_steps(clone, tmp, {"PULUMI_STACK_NAME": stack})
    finally:
        (clone / "Pulumi.dev.yaml").write_text(original)
    assert result.returncode == 1 and says in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and "hf_plaintextCANARY" not in result.stderr + result.stdout
    assert outputs["prepare"] == {}


def step_named(prefix: str) -> dict:
    return next(s for s in preview_job()["steps"] if s.get("id") == prefix or s.get("uses", "").startswith(prefix))


def run_preview(prepared, tmp: Path, variables: dict[str, str] | None = None, secrets: dict[str, str] | None = None,
                **cli) -> tuple[subprocess.CompletedProcess, Path, Path]:
    """The job's preview step, in the prepared clone, against a fake CLI that prints `cli`'s output.

    Returns the step's result, the fake CLI's directory and the output file the comment step reads."""
    clone, job_tmp, _, _ = prepared
    pulumi = fake_pulumi(job_tmp, **cli)
    result, _ = run_step(step_named("preview"), clone, job_tmp, variables or {"PULUMI_STACK_NAME": "my-org/dev"},
                         secrets)
    output = Path(resolve(comment_step()["env"]["PREVIEW_OUTPUT"].replace("${{ runner.temp }}",
                                                                          str(job_tmp / "runner-temp")), {}))
    return result, pulumi, output


def test_the_preview_reaches_a_self_managed_backend_too(prepared, tmp_path):
    result, pulumi, _ = run_preview(prepared, tmp_path, {"PULUMI_STACK_NAME": "organization/tpu-vllm/dev",
                                                         "PULUMI_BACKEND_URL": "gs://my-state"},
                                    {"PULUMI_CONFIG_PASSPHRASE": "correct horse battery staple"})
    assert result.returncode == 0, result.stderr
    # The CLI takes its backend from PULUMI_BACKEND_URL before any stored login (pulumi/pulumi
    # pkg/workspace/creds.go, GetCurrentCloudURLWithSource, v3.259.0).
    seen = dict(line.split("=", 1) for line in (pulumi / "env").read_text().splitlines())
    assert seen == {"PULUMI_BACKEND_URL": "gs://my-state", "PULUMI_ACCESS_TOKEN": "",
                    "PULUMI_CONFIG_PASSPHRASE": "correct horse battery staple",
                    "PULUMI_STACK_NAME": "organization/tpu-vllm/dev"}  # the CLI reads no PULUMI_STACK_NAME
    assert (pulumi / "args").read_text().split("\n")[:3] == ["preview", "--stack", "organization/tpu-vllm/dev"]


# --- The preview's outcome on the PR, passed or failed ------------------------------------------------------

MARKER = "<!-- tpu-vllm pulumi preview -->"
HEAD = "89abcdef0123456789abcdef0123456789abcdef"
PULL_REQUEST = {"pull_request": {"number": 12, "head": {"sha": HEAD}}}
RUN_URL = "https://github.com/owner/repo/actions/runs/42"
# A mandatory violation as `pulumi preview --diff` prints it, colours off: the pack and version, the level, the
# policy, the resource's type and name, then the message, which pulumi-policy makes "description\nmessage"
# (pulumi/pulumi pkg/backend/display/diff.go renderDiffPolicyViolationEvent with no prefix, golden output
# pkg/engine/lifecycletest/testdata/output/TestSimpleAnalyzeResourceMultipleViolations/diff.stdout.txt, v3.259.0;
# pulumi-policy 1.21.0 pulumi_policy/policy.py, report_violation).
VIOLATION = ("    tpu-vllm@v0.1.0 [mandatory]  firewall-not-open-to-the-world  (gcp:compute:Firewall: "
             "tpu-vllm-dev-ssh)Ingress rules must not open SSH or a serving port to the internet.\n"
             "port 22 is open to 0.0.0.0/0 (allowOpenSsh is false)\n")
FAILED_BY_POLICY = (
    "Previewing update (my-org/dev)\n\n"
    "    gcp:compute:Firewall: (create)\n        [urn=urn:pulumi:dev::tpu-vllm::gcp:compute/firewall:Firewall::"
    "tpu-vllm-dev-ssh]\n        sourceRanges: [\n            [0]: \"0.0.0.0/0\"\n        ]\n"
    + VIOLATION +
    "Resources:\n    + 1 to create\n    30 unchanged\n\nPolicy Packs run:\n    Name      Version\n"
    "    tpu-vllm  0.1.0\n\n")
# A program that stopped: the diagnostic's "error: " prefix (pkg/backend/display/diff.go renderDiffDiagEvent).
PROGRAM_ERROR = ("error: cache disk tpu-vllm-dev-cache already exists in us-west4-a and is not this stack's "
                 "(its labels: none; this stack's: app=tpu-vllm,stack=dev)\n")


def comment_step() -> dict:
    return next(s for s in preview_job()["steps"] if "createComment" in s.get("with", {}).get("script", ""))


def post_outcome(tmp_path: Path, outcome: str, output: Path, comments: list | None = None, *,
                 secrets: dict[str, str] | None = None, runner_env: dict[str, str] | None = None,
                 pr: dict | None = None) -> list:
    """The comment step's own script under node, against a fake GitHub whose PR is at `pr` (this run's head unless
    given); `runner_env` is what the runner and the action add to the step's env. The calls it made."""
    step = comment_step()
    env = {key: resolve(value.replace("${{ runner.temp }}", str(output.parent)).replace(
        "${{ steps.preview.outcome }}", outcome), {"PULUMI_STACK_NAME": "my-org/dev"}, secrets)
        for key, value in step["env"].items()}
    assert Path(env["PREVIEW_OUTPUT"]) == output
    return run_github_script(tmp_path, step["with"]["script"], payload=PULL_REQUEST, env={**env, **(runner_env or {})},
                             comments=comments, pr=pr or pull_request(HEAD))


def test_the_job_installs_the_cli_then_runs_the_preview_and_posts_its_outcome_whatever_it_was():
    steps = preview_job()["steps"]
    cli = step_named("pulumi/actions@")
    assert set(cli["with"]) == {"pulumi-version"}  # no `command`: install only (src/main.ts, installOnly)
    preview, comment = step_named("preview"), comment_step()
    assert steps.index(cli) < steps.index(preview) < steps.index(comment)
    assert preview["run"] == './scripts/preview-run.sh "$PULUMI_STACK_NAME" "$RUNNER_TEMP/pulumi-preview.txt"'
    assert comment["if"] == "${{ !cancelled() }}"  # after a failure too, not after a cancelled run
    assert comment["env"] == {"PREVIEW_OUTCOME": "${{ steps.preview.outcome }}",
                              "PREVIEW_OUTPUT": "${{ runner.temp }}/pulumi-preview.txt",
                              "PULUMI_STACK_NAME": "${{ vars.PULUMI_STACK_NAME || 'dev' }}",
                              # only to be masked: the preview step's backend credentials
                              "PULUMI_ACCESS_TOKEN": "${{ secrets.PULUMI_ACCESS_TOKEN }}",
                              "PULUMI_CONFIG_PASSPHRASE": "${{ secrets.PULUMI_CONFIG_PASSPHRASE }}"}
    assert "${{" not in comment["with"]["script"]
    # The PR's own code runs in this job: the checkout leaves it no token to find in .git/config.
    assert step_named("actions/checkout@")["with"] == {"persist-credentials": False}


def test_the_preview_runs_with_the_refresh_the_diff_and_the_policy_pack(prepared, tmp_path):
    assert prepared[2].returncode == 0  # the whole job's run steps, this one included
    result, pulumi, output = run_preview(prepared, tmp_path)
    assert result.returncode == 0 and result.stdout == PASSING_PREVIEW  # the log shows it
    args = (pulumi / "args").read_text().splitlines()
    assert args == ["preview", "--stack", "my-org/dev", "--refresh", "--diff", "--policy-pack", "policy",
                    "--non-interactive", "--color", "never", "--suppress-progress"]
    assert output.read_text() == PASSING_PREVIEW


def test_a_policy_violation_fails_the_job_and_the_pr_gets_it(prepared, tmp_path):
    result, _, output = run_preview(prepared, tmp_path, stdout=FAILED_BY_POLICY, status=255)
    assert result.returncode == 255  # the job fails
    assert VIOLATION in result.stdout  # and the log shows it
    calls = post_outcome(tmp_path, "failure", output)
    [(kind, args)] = writes(calls)
    assert kind == "createComment" and args["issue_number"] == 12
    assert args["body"].startswith(
        f"{MARKER}\n### `pulumi preview` of stack my-org/dev for 89abcde: **FAILED: policy violations**")
    assert fenced(args["body"]) == FAILED_BY_POLICY.rstrip()

    # The next push passes: the same comment says so.
    ours = {"id": 77, "user": {"login": "github-actions[bot]"}, "body": args["body"]}
    forged = {"id": 5, "user": {"login": "someone"}, "body": MARKER}
    result, _, output = run_preview(prepared, tmp_path)
    assert result.returncode == 0
    [(kind, args)] = writes(post_outcome(tmp_path, "success", output, comments=[forged, ours]))
    assert kind == "updateComment" and args["comment_id"] == 77
    assert ": passed\n" in args["body"] and fenced(args["body"]) == PASSING_PREVIEW.rstrip()


def test_an_error_fails_the_job_and_the_pr_gets_its_text(prepared, tmp_path):
    result, _, output = run_preview(prepared, tmp_path, stdout="Previewing update (my-org/dev)\n\n",
                                    stderr=PROGRAM_ERROR, status=255)
    assert result.returncode == 255
    [(_, args)] = writes(post_outcome(tmp_path, "failure", output))
    assert "for 89abcde: **FAILED** (the error is at the end below)" in args["body"]
    assert fenced(args["body"]).endswith(PROGRAM_ERROR.rstrip())  # stderr is kept too


def test_a_job_that_stopped_before_the_preview_says_so(tmp_path):
    never_written = tmp_path / "pulumi-preview.txt"
    [(_, args)] = writes(post_outcome(tmp_path, "skipped", never_written))
    assert "**did not run**: a step before it failed" in args["body"] and "```" not in args["body"]
    never_written.write_text("stale output of another run\n")  # not read: this run's preview did not run
    [(_, args)] = writes(post_outcome(tmp_path, "skipped", never_written))
    assert "stale" not in args["body"]


def test_the_output_cannot_close_the_fence_and_its_end_is_kept(prepared, tmp_path):
    # The program prints what it likes (pulumi.log): here a fence of its own and a heading after it.
    noisy = "x" * 100 + "\n" + ("a line of the diff\n" * 4000) + "````\n# not a heading\n" + VIOLATION
    result, _, output = run_preview(prepared, tmp_path, stdout=noisy, status=255)
    assert result.returncode == 255
    [(_, args)] = writes(post_outcome(tmp_path, "failure", output))
    text = fenced(args["body"])  # the fence holds
    assert len(args["body"].encode()) <= 65_536
    assert (f"Only the output's last {len(text)} characters are shown, to fit a comment: the whole output is in "
            f"[the job log]({RUN_URL}).") in args["body"]
    assert text.endswith("````\n# not a heading\n" + VIOLATION.rstrip()) and "x" * 100 not in text


@pytest.mark.parametrize("output", [
    "`" * 70_000 + "\n" + VIOLATION,  # one backtick run longer than a comment: its fence alone would not fit
    "``\n" * 40_000 + VIOLATION,  # tens of thousands of runs
    ("ä`" * 30_000 + "\n") * 3 + VIOLATION,  # two bytes a character
    "x\n" * 600_000 + VIOLATION,  # more than the script reads (1 MiB)
], ids=["one-backtick-run", "many-backtick-runs", "multibyte", "past-the-read"])
def test_a_huge_backtick_laden_output_is_cut_to_fit_with_its_end_kept(tmp_path, output):
    file = tmp_path / "pulumi-preview.txt"
    file.write_text(output)
    [(_, args)] = writes(post_outcome(tmp_path, "failure", file))
    body = args["body"]
    assert len(body.encode()) <= 65_536  # GitHub's limit is 65,536 characters: bytes are never fewer
    text = fenced(body)
    assert output.rstrip().endswith(text) and text.endswith(VIOLATION.rstrip())
    assert ": **FAILED: policy violations**" in body
    assert f"Only the output's last {len(text)} characters are shown" in body


def test_a_run_whose_commit_is_no_longer_the_prs_head_posts_nothing(tmp_path):
    """Runs are grouped per commit (an older commit's re-run cannot cancel the newest's), so an older commit's run
    can end last: it must not overwrite the newer comment."""
    output = tmp_path / "pulumi-preview.txt"
    output.write_text(PASSING_PREVIEW)
    calls = post_outcome(tmp_path, "success", output, pr=pull_request("f" * 40))
    assert not writes(calls)
    assert calls[-1] == ["notice", f"PR #12 is at {'f' * 40}, this run previewed {HEAD}: not posting"]
    assert writes(post_outcome(tmp_path, "success", output))  # the head's own run posts


# The secrets the comment step is given and what the runner and the action add to every step of this job.
BACKEND_SECRETS = {"PULUMI_ACCESS_TOKEN": "pul-" + "c0ffee42" * 5,
                   # over 57 bytes: base64.encodebytes wraps it
                   "PULUMI_CONFIG_PASSPHRASE": 'CANARY pass "phrase" back\\slash/&<tag> stäple Zq8Wx, long to wrap'}
JOB_CREDENTIALS = {"ACTIONS_ID_TOKEN_REQUEST_TOKEN": "CANARYidTokenRequestMv3Nb7Vc1Xz5Lk9Jh2Gf6Ds",
                   "ACTIONS_RUNTIME_TOKEN": "CANARYruntimeTokenAq4Sw8De2Fr6Gt0Hy",
                   "INPUT_GITHUB-TOKEN": "ghs_CANARYjobTokenPo9Iu8Yt7Re6Wq5As4Df3"}


def test_no_credential_in_any_form_reaches_the_preview_comment(tmp_path):
    text, forms = hostile_output({**BACKEND_SECRETS, **JOB_CREDENTIALS})
    output = tmp_path / "pulumi-preview.txt"
    output.write_text(text)
    calls = post_outcome(tmp_path, "failure", output, secrets=BACKEND_SECRETS, runner_env=JOB_CREDENTIALS)
    [(_, args)] = writes(calls)
    assert leaks(args["body"], forms) == []
    shown = fenced(args["body"])
    for line in INNOCENT:
        assert line in shown  # what is no credential gets through
    assert ["setSecret", TOKENS["jwt"]] in calls  # and the log masks a minted token from then on


def comment_shows(tmp_path: Path, text: str, secrets: dict[str, str] | None = None) -> str:
    output = tmp_path / "pulumi-preview.txt"
    output.write_text(text)
    [(_, args)] = writes(post_outcome(tmp_path, "failure", output, secrets=secrets))
    return fenced(args["body"])


def test_a_wrapped_token_as_python_and_json_print_it_is_masked(tmp_path):
    """repr() and json.dumps of a wrapped string escape the wrap and keep its indentation or its CR: the masking
    took only a bare escaped `\\n`, so everything after such a wrap reached the comment (second reader, row 10)."""
    token = "pul-" + "0123456789abcdef" * 2 + "01234567"
    indented, crlf = token[:20] + "\n    " + token[20:], token[:20] + "\r\n" + token[20:]
    shown = comment_shows(tmp_path, f"error: {indented!r}\nerror: {json.dumps(crlf)}\n"
                          "kept: 'not-a-secret\\n    next line'\n", {"PULUMI_ACCESS_TOKEN": token})
    assert shown == "error: '[secret]'\nerror: \"[secret]\"\nkept: 'not-a-secret\\n    next line'"


def test_a_pretty_printed_key_file_and_a_pem_key_in_base64_are_masked(tmp_path):
    """`eyJ` is only the compact JSON's opening; a pretty-printed key file base64'd starts `ewog`, and a PEM key
    `LS0tLS1CRUdJTi`: both reached the comment whole (second reader, row 11). A certificate's base64 gets through."""
    key_file = json.dumps({"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\nMIIE\n"
                           "-----END PRIVATE KEY-----\n"}, indent=2)
    pem = b"-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAcanary\n-----END RSA PRIVATE KEY-----\n"
    certificate = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIBkTCB+wIJAKHBfpeg\n-----END CERTIFICATE-----\n")
    shown = comment_shows(tmp_path, f"data: {base64.b64encode(key_file.encode()).decode()}\n"
                          f"key: {base64.encodebytes(pem).decode()}ca: {certificate.decode()}\n")
    assert shown == f"data: [secret]\nkey: [secret]\nca: {certificate.decode()}"


def test_the_backend_credentials_in_the_output_never_reach_the_comment(prepared, tmp_path):
    secrets = {"PULUMI_ACCESS_TOKEN": "pul-0123456789abcdef0123456789abcdef01234567",
               "PULUMI_CONFIG_PASSPHRASE": "correct horse battery staple"}
    said = (f"error: something echoed {secrets['PULUMI_ACCESS_TOKEN']} and "
            f"{secrets['PULUMI_CONFIG_PASSPHRASE']} back\n")
    result, _, output = run_preview(prepared, tmp_path, secrets=secrets, stderr=said, status=1)
    assert result.returncode == 1
    [(_, args)] = writes(post_outcome(tmp_path, "failure", output))
    assert "error: something echoed [secret] and [secret] back" in args["body"]
    assert not any(value in output.read_text() + args["body"] for value in secrets.values())


def test_a_link_in_place_of_the_output_is_not_followed(tmp_path):
    output = tmp_path / "pulumi-preview.txt"
    output.symlink_to("/etc/hostname")
    [(_, args)] = writes(post_outcome(tmp_path, "failure", output))
    assert "not a regular file: not read" in args["body"]


# --- The Pulumi CLI's version ------------------------------------------------------------------------------

def test_the_preview_job_runs_the_cli_version_requirements_txt_pins_for_the_sdk():
    # pulumi/actions v6.0.0 src/libs/pulumi-cli.ts downloadCli: an exact version is a range only it satisfies.
    assert step_named("pulumi/actions@")["with"]["pulumi-version"] == pins(ROOT / "requirements.txt")["pulumi"]


SEMVER = re.compile(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)")
COMPARATORS = {"": operator.eq, "=": operator.eq, "==": operator.eq, "!": operator.ne, "!=": operator.ne,
               ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}


def version_range(text: str):
    """A blang/semver range as the CLI reads requiredPulumiVersion (pulumi/pulumi sdk/go/common/resource/plugin/
    plugin.go ValidatePulumiVersionRange -> semver.ParseRange, blang/semver v3.5.1 range.go): comparators
    AND-ed by spaces, OR-ed by `||`, each a full MAJOR.MINOR.PATCH. Release versions only, no `x` wildcards:
    a subset of what it accepts, enough for a floor. Returns a predicate on (major, minor, patch)."""
    alternatives = []
    for alternative in text.split("||"):
        terms = []
        for term in alternative.split():
            match = re.fullmatch(r"(>=|<=|!=|==|[<>=!]?)(.+)", term)
            version = SEMVER.fullmatch(match.group(2))
            assert version, f"{term!r} in {text!r} is not a comparator and a full version"
            terms.append((COMPARATORS[match.group(1)], tuple(map(int, version.groups()))))
        assert terms, f"an empty alternative in {text!r}"
        alternatives.append(terms)
    return lambda v: any(all(compare(v, bound) for compare, bound in terms) for terms in alternatives)


def test_the_stated_minimum_cli_version_is_the_one_pulumi_yaml_requires():
    required = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["requiredPulumiVersion"]
    stated = re.search(r"^- Pulumi CLI (\d+\.\d+\.\d+) or later", (ROOT / "README.md").read_text(), re.M)
    assert stated, "README.md's Prerequisites state the Pulumi CLI's minimum version"
    floor = tuple(map(int, stated.group(1).split(".")))
    admits = version_range(required)
    just_below = (floor[0], floor[1], floor[2] - 1) if floor[2] else (floor[0], floor[1] - 1, 999)
    assert admits(floor) and not admits(just_below)
    # The import option as the cache disk's adoption uses it: pulumi/pulumi CHANGELOG.md 3.174.0, #19339.
    assert floor >= (3, 174, 0)
    pinned = tuple(map(int, pins(ROOT / "requirements.txt")["pulumi"].split(".")))
    assert admits(pinned)  # the preview job's CLI and the SDK


@pytest.mark.parametrize(("text", "admitted", "refused"), [
    (">=3.174.0", [(3, 174, 0), (3, 272, 0), (4, 0, 0)], [(3, 173, 9), (2, 999, 0)]),
    (">=3.5.0 !3.7.7", [(3, 5, 0), (3, 7, 8)], [(3, 7, 7), (3, 4, 9)]),
    ("<3.4.0 || >3.8.0", [(3, 3, 0), (3, 9, 0)], [(3, 5, 0), (3, 8, 0)]),
])
def test_the_range_reader_reads_the_examples_pulumi_documents(text, admitted, refused):
    # The examples in project.go's RequiredPulumiVersion comment (pulumi/pulumi v3.259.0).
    admits = version_range(text)
    assert all(admits(v) for v in admitted) and not any(admits(v) for v in refused)


@pytest.mark.parametrize("text", [">=3.174", "3.174.x", ">=v3.174.0", ">= 3.174.0 ||", "~3.174.0"])
def test_the_range_reader_refuses_what_would_not_parse_or_we_do_not_read(text):
    with pytest.raises(AssertionError):
        version_range(text)


def prepare_with_a_python_that_records(tmp_path: Path, stack_file: str) -> tuple[subprocess.CompletedProcess, Path]:
    """preview-prepare.sh on a stack file, with a `python` that only records that it ran (no venv is built)."""
    shutil.copytree(ROOT / "scripts", tmp_path / "scripts")
    (tmp_path / "Pulumi.dev.yaml").write_text(stack_file)
    marker, shim = tmp_path / "python-ran", tmp_path / "python-shim"
    shim.write_text(f"#!/bin/sh\ntouch '{marker}'\nexit 1\n")
    shim.chmod(0o755)
    result = subprocess.run(["bash", "scripts/preview-prepare.sh", "dev"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "PREVIEW_PYTHON": str(shim)})
    return result, marker


@pytest.mark.parametrize("project_line", [None, "  gcp:project: null", "  gcp:project: ''", "  gcp:project:"])
def test_an_unset_project_is_said_before_any_venv_is_built(tmp_path, project_line):
    """preview-prepare.sh built both venvs (~80 s) before saying `gcp:project is not set` (issue 29)."""
    lines = ["config:", "  tpu-vllm:platform: vm"] + ([project_line] if project_line else [])
    result, marker = prepare_with_a_python_that_records(tmp_path, "\n".join(lines) + "\n")
    assert result.returncode == 1 and "gcp:project is not set: pulumi config set gcp:project" in result.stderr
    assert not marker.exists() and not (tmp_path / "venv").exists()


def test_a_set_project_passes_the_cheap_check_and_goes_on_to_the_venvs(tmp_path):
    result, marker = prepare_with_a_python_that_records(tmp_path, "config:\n  gcp:project: my-project\n")
    assert marker.exists() and "gcp:project is not set" not in result.stderr


# --- A venv the prepare step built is kept while nothing it was built from changed --------------------------

# The runner's Python as preview-prepare.sh uses it: `-VV` says which one it is (VERSION), `-m venv DIR` makes a
# venv whose own python logs each pip install and lays out one dist-info per pin, as pip would; its only other use,
# the step's stack-file check (tested above over the real venvs), answers platform vm.
RUNNER_PYTHON = """#!/bin/bash
here="$(dirname "$0")"
if [ "$1" = -VV ]; then cat "$here/VERSION"; exit 0; fi
if [ "$1 $2" = "-m venv" ]; then
  echo "venv $3" >>"$here/log"
  mkdir -p "$3/bin" "$3/lib/python3.11/site-packages"
  cp "$here/venv-python" "$3/bin/python"
  exit 0
fi
exit 1
"""
VENV_PYTHON = """#!/bin/bash
venv="$(cd "$(dirname "$0")/.." && pwd)"
if [ "$1 $2 $3" = "-m pip install" ]; then
  requirements="${!#}"
  echo "pip $requirements" >>"HERE/log"
  [ ! -f "HERE/pip-fails" ] || exit 1
  sed -n 's/^\\([A-Za-z0-9_.-]*\\)==\\(.*\\)$/\\1-\\2.dist-info/p' "$requirements" |
    while read -r name; do mkdir -p "$venv/lib/python3.11/site-packages/$name"; done
  exit 0
fi
cat >/dev/null
echo vm
"""


def test_a_venv_the_script_built_is_kept_until_its_requirements_interpreter_or_packages_change(tmp_path):
    work, shims = tmp_path / "work", tmp_path / "shims"
    shutil.copytree(ROOT / "scripts", work / "scripts")
    (work / "policy").mkdir()
    (work / "Pulumi.dev.yaml").write_text("config:\n  gcp:project: my-project\n")
    (work / "requirements.txt").write_text("pyyaml==6.0.2\npulumi==3.200.0\n")
    (work / "policy/requirements.txt").write_text("pulumi-policy==1.21.0\n")
    shims.mkdir()
    (shims / "VERSION").write_text("Python 3.11.9 (main)\n")
    (shims / "python").write_text(RUNNER_PYTHON)
    (shims / "venv-python").write_text(VENV_PYTHON.replace("HERE", str(shims)))
    for shim in ("python", "venv-python"):
        (shims / shim).chmod(0o755)

    def run_prepare() -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "scripts/preview-prepare.sh", "dev"], cwd=work, capture_output=True, text=True,
                              timeout=60, env={"PATH": "/usr/bin:/bin", "PREVIEW_PYTHON": str(shims / "python")})

    def prepare() -> list[str]:
        """The venv and pip runs of one preparation (it must pass)."""
        (shims / "log").write_text("")
        result = run_prepare()
        assert result.returncode == 0 and "platform=vm" in result.stdout, result.stderr
        return (shims / "log").read_text().splitlines()

    program = ["venv venv", "pip requirements.txt"]
    pack = ["venv policy/venv", "pip policy/requirements.txt"]
    assert prepare() == program + pack
    assert prepare() == []  # nothing changed: both kept, no pip
    (work / "requirements.txt").write_text("pyyaml==6.0.2\npulumi==3.201.0\n")
    assert prepare() == program  # a changed pin builds that venv again, only that one
    assert prepare() == []
    site = work / "policy/venv/lib/python3.11/site-packages"
    (site / "pulumi-policy-1.21.0.dist-info").rename(site / "pulumi-policy-1.22.0.dist-info")
    assert prepare() == pack  # upgraded since by hand: the pack's venv no longer holds its pins
    (work / "venv/lib/python3.11/site-packages/extra-1.0.dist-info").mkdir()
    assert prepare() == program  # installed since by hand
    shutil.rmtree(site / "pulumi-policy-1.22.0.dist-info")
    assert prepare() == pack  # removed since
    (shims / "VERSION").write_text("Python 3.12.1 (main)\n")
    assert prepare() == program + pack  # another interpreter
    assert prepare() == []

    # A build that failed is not marked built: the next run builds again.
    (work / "policy/requirements.txt").write_text("pulumi-policy==1.22.0\n")
    (shims / "pip-fails").write_text("")
    assert run_prepare().returncode != 0
    (shims / "pip-fails").unlink()
    assert prepare() == pack
