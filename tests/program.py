"""Helpers to run the program under mocks (in a subprocess) and query what it registered."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests import fork_server, shared_runs
from tools.plan.engine import is_wrapped_secret

ROOT = Path(__file__).resolve().parent.parent
DEV_CONFIG = ROOT / "Pulumi.dev.yaml"
GKE_CONFIG = ROOT / "Pulumi.gke.yaml"


def dev_config(project: str = "my-proj") -> dict[str, str]:
    from tools.plan.stack_file import read_stack_config

    config, _ = read_stack_config(DEV_CONFIG)
    return {**config, "gcp:project": project}


def gke_config(project: str = "my-proj") -> dict[str, str]:
    from tools.plan.stack_file import read_stack_config

    config, _ = read_stack_config(GKE_CONFIG)
    return {**config, "gcp:project": project}


def run(config: dict[str, Any], secret_keys: list[str] | None = None,
        fixed_outputs: dict[str, dict[str, Any]] | None = None,
        failing_calls: dict[str, str] | None = None, stack: str = "dev", preview: bool = False,
        disks: dict[str, dict[str, Any]] | None = None) -> Program:
    """preview: a dry run of a new stack (computed outputs unknown); disks: what gcp.compute.get_disk finds."""
    encoded = {key: value if isinstance(value, str) else json.dumps(value) for key, value in config.items()}
    request = {"config": encoded, "secret_keys": secret_keys or [], "fixed_outputs": fixed_outputs,
               "failing_calls": failing_calls, "stack": stack, "preview": preview, "disks": disks}

    def one_run() -> dict[str, Any]:
        if fork_server.enabled():
            completed = fork_server.run("tests.program_harness", [], json.dumps(request))
        else:
            completed = subprocess.run([sys.executable, "-m", "tests.program_harness"], input=json.dumps(request),
                                       capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert completed.returncode == 0, completed.stderr
        return {"data": json.loads(completed.stdout), "stderr": completed.stderr}

    # The same request gives the same answer (the program is deterministic under mocks): one run per session.
    ran = shared_runs.once("program", request, one_run)
    return Program(ran["data"], ran["stderr"])


def plan(args: list[str], config_dir: Path | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    """`python -m tools.plan ARGS [--config-dir DIR]` from the repository root, as a reviewer runs it; run once
    per session for the same arguments and stack files (tests/shared_runs.py), forked from the fork server
    (tests/fork_server.py). A --diff reads a file the key does not cover: it always runs."""
    if config_dir is not None and Path(config_dir).resolve() == ROOT:
        config_dir = None  # the stack files tools.plan reads by default: one shared run for both spellings
    argv = [sys.executable, "-m", "tools.plan", *args, *(["--config-dir", str(config_dir)] if config_dir else [])]

    def one_run() -> dict[str, Any]:
        if fork_server.enabled():
            completed = fork_server.run("tools.plan", argv[3:], timeout=timeout)
        else:
            completed = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=timeout)
        return {"returncode": completed.returncode, "stdout": completed.stdout, "stderr": completed.stderr}

    if "--diff" in args:
        ran = one_run()
    else:
        stack_files = shared_runs.config_dir_files(config_dir or ROOT)
        ran = shared_runs.once("plan", {"argv": argv[1:], "stack_files": stack_files}, one_run)
    return subprocess.CompletedProcess(argv, ran["returncode"], ran["stdout"], ran["stderr"])


def python_c(code: str, stdin: str = "", timeout: int = 120) -> subprocess.CompletedProcess:
    """`python -c CODE` from the repository root: a child of the fork server in a test session, a fresh
    process otherwise. For a program that needs Pulumi's runtime to itself, not for one about a fresh
    interpreter's start or exit."""
    if fork_server.enabled():
        return fork_server.run_code(code, stdin, timeout=timeout)
    return subprocess.run([sys.executable, "-c", code], input=stdin, capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout)


# The gke example stack's canary secrets (a stack-kept HF token, the generated API key).
GKE_HF_CANARY = "hf_CANARYgkeTOKEN98765432109876543210"
GKE_API_CANARY = "CANARYgkeAPIKEY0123456789abcdefghijklmnopqrstu"


def run_gke_with_canaries() -> Program:
    config = {**gke_config(), "tpu-vllm:hfToken": GKE_HF_CANARY}
    return run(config, secret_keys=["tpu-vllm:hfToken"], stack="gke",
               fixed_outputs={"random:index/randomPassword:RandomPassword": {"result": GKE_API_CANARY}})


def with_section(config: dict[str, str], section: str, **values: Any) -> dict[str, str]:
    key = f"tpu-vllm:{section}"
    merged = {**json.loads(config.get(key, "{}")), **values}
    return {**config, key: json.dumps(merged)}


class Program:
    def __init__(self, data: dict[str, Any], stderr: str):
        self.data = data
        self.stderr = stderr
        self.registrations = data["registrations"]
        self.problems = data.get("problems")
        self.logged_warnings: list[str] = data.get("logged_warnings", [])

    def of_type(self, type_: str) -> list[dict[str, Any]]:
        return [r for r in self.registrations if r["type"] == type_]

    def one(self, type_: str) -> dict[str, Any]:
        found = self.of_type(type_)
        assert len(found) == 1, [r["name"] for r in found]
        return found[0]

    def named(self, name: str) -> dict[str, Any]:
        return next(r for r in self.registrations if r["name"] == name)

    def output(self, name: str) -> dict[str, Any]:
        return self.data["outputs"][name]


def plain_occurrences(value: Any, needle: str, path: str = "") -> list[str]:
    """Paths where `needle` appears outside a Pulumi secret."""
    if is_wrapped_secret(value):
        return []
    if isinstance(value, dict):
        return [hit for key, item in value.items() for hit in plain_occurrences(item, needle, f"{path}.{key}")]
    if isinstance(value, list):
        return [hit for index, item in enumerate(value) for hit in plain_occurrences(item, needle, f"{path}[{index}]")]
    return [path] if isinstance(value, str) and needle in value else []
