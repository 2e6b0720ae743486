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
pip installs from the package registries (its cache is reused).
"""

from __future__ import annotations

import json
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

ROOT = Path(__file__).resolve().parent.parent
RUNNER_SHELL = ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c"]
STEP_TIMEOUT = 600  # pip installs two environments; from the registry mirror and pip's cache it is far less
ENCRYPTED_TOKEN = {"secure": "v1:AAAABBBBCCCCciphertextOnly0123456789"}
# Only these expressions appear in the preview job's run steps and their env; any other one is a test gap.
VARS_WITH_DEFAULT = re.compile(r"\$\{\{\s*vars\.(\w+)\s*\|\|\s*'([^']*)'\s*\}\}")


def preview_job() -> dict:
    return yaml.safe_load((ROOT / ".github/workflows/preview.yml").read_text())["jobs"]["preview"]


def clean_clone(destination: Path) -> Path:
    """What actions/checkout gives: the committed files, then the working copy's changes to them."""
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(destination)], check=True,
                   capture_output=True)
    patch = subprocess.run(["git", "diff", "HEAD", "--binary"], cwd=ROOT, check=True, capture_output=True).stdout
    if patch:
        subprocess.run(["git", "apply", "--whitespace=nowarn"], cwd=destination, input=patch, check=True,
                       capture_output=True)
    return destination


def resolve(text: str, variables: dict[str, str]) -> str:
    resolved = VARS_WITH_DEFAULT.sub(lambda m: variables.get(m.group(1)) or m.group(2), text)
    assert "${{" not in resolved, f"an expression this test cannot evaluate: {text}"
    return resolved


def runner_path(tmp: Path) -> str:
    """setup-python's Python 3.11 first on PATH (as `python` and `python3`), then the system's tools only."""
    bin_dir = tmp / "setup-python-bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("python", "python3"):
        if not (bin_dir / name).exists():
            (bin_dir / name).symlink_to(getattr(sys, "_base_executable", sys.executable))
    return f"{bin_dir}:/usr/bin:/bin"


def run_job_steps(clone: Path, tmp: Path, variables: dict[str, str]) -> tuple[subprocess.CompletedProcess, dict]:
    """Each `run:` step in order, as the runner runs it; stops at the first failure. The steps' outputs."""
    output_file = tmp / "github_output"
    output_file.write_text("")
    passed = {key: value for key, value in os.environ.items()
              if key.startswith("PIP_") or key in ("HOME", "LANG", "SSL_CERT_FILE", "HTTPS_PROXY", "https_proxy",
                                                     "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy")}
    outputs: dict[str, dict[str, str]] = {}
    result = None
    for step in preview_job()["steps"]:
        if "uses" in step:
            continue  # actions: checkout, setup-python, credentials, gcloud, the Pulumi CLI
        env = {**passed, "PATH": runner_path(tmp), "GITHUB_OUTPUT": str(output_file), "CI": "true",
               **{key: resolve(str(value), variables) for key, value in (step.get("env") or {}).items()}}
        result = subprocess.run([*RUNNER_SHELL, resolve(step["run"], variables)], cwd=clone, env=env,
                                capture_output=True, text=True, timeout=STEP_TIMEOUT)
        lines = output_file.read_text().splitlines()
        outputs[step.get("id", "")] = dict(line.split("=", 1) for line in lines if "=" in line)
        output_file.write_text("")
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


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """The job's run steps in a clean clone of the stack the user committed (dev, with their project)."""
    tmp = tmp_path_factory.mktemp("preview-job")
    clone = clean_clone(tmp / "repo")
    with_user_settings(clone / "Pulumi.dev.yaml", **{"gcp:project": "my-project",
                                                     "tpu-vllm:hfToken": ENCRYPTED_TOKEN})
    result, outputs = run_job_steps(clone, tmp, {"PULUMI_STACK_NAME": "my-org/dev"})
    return clone, tmp, result, outputs


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
    # This stack keeps the token, so its own secret's version is read by a refresh; vm reads the TPU API.
    assert set(preview_iam["secretAccessor"]) == {"tpu-vllm-dev-api-key", "tpu-vllm-dev-hf-token"}
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


def test_the_preview_reaches_a_self_managed_backend_too():
    pulumi = next(s for s in preview_job()["steps"] if s.get("uses", "").startswith("pulumi/actions@"))
    assert pulumi["with"]["cloud-url"] == "${{ vars.PULUMI_BACKEND_URL }}"
    assert pulumi["env"] == {"PULUMI_ACCESS_TOKEN": "${{ secrets.PULUMI_ACCESS_TOKEN }}",
                             "PULUMI_CONFIG_PASSPHRASE": "${{ secrets.PULUMI_CONFIG_PASSPHRASE }}"}
    assert pulumi["with"]["stack-name"] == "${{ vars.PULUMI_STACK_NAME || 'dev' }}"


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
