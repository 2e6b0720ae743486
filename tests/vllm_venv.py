"""The vLLM venv (requirements-vllm.txt, built by scripts/test.sh) from the tests: its python, and a check in it.

`run(args)` returns what `subprocess.run([vllm python, *args], capture_output=True)` returns, for `SCRIPT ARGS...`
or `-c CODE ARGS...`, in a child forked from the session's one process that has imported vLLM
(tests/venv_forks.py, tests/venv_fork_server.py): vLLM's ~18 s import is paid once, not once per file.
TPU_VLLM_TEST_VLLM_FORKS=0 runs every check as a fresh process instead.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests import venv_forks

ROOT = Path(__file__).resolve().parent.parent
# What the checks import (tests/vllm_cli_check.py, tests/test_fakes_answer_as_upstream.py's REAL_VLLM and
# prometheus check, tests/test_bench.py's VLLM_CHUNKS): a child imports anything else itself.
WARM_MODULES = (
    "vllm.config", "vllm.engine.arg_utils", "vllm.entrypoints.cli.serve", "vllm.reasoning", "vllm.tool_parsers",
    "vllm.utils.argparse_utils", "vllm.envs", "fastapi", "starlette.responses", "starlette.testclient",
    "vllm.entrypoints.serve.exception_handling.register", "vllm.entrypoints.serve.middleware.authenticate",
    "vllm.entrypoints.generate.base.protocol", "vllm.entrypoints.openai.chat_completion.protocol",
    "vllm.entrypoints.serve.engine.protocol", "prometheus_client",
)


def vllm_python() -> str:
    """scripts/test.sh builds the venv and says where (then it must exist); a bare pytest run looks for it."""
    told = os.environ.get("TPU_VLLM_VLLM_PYTHON")
    if told:
        assert Path(told).exists(), f"TPU_VLLM_VLLM_PYTHON={told} does not exist; run scripts/test.sh"
        return os.path.abspath(told)  # not resolve(): the venv's python is a link that must stay the venv's
    for candidate in (ROOT / ".venv-vllm" / "bin" / "python", ROOT.parent / ".venv-vllm" / "bin" / "python"):
        if candidate.exists():
            return str(candidate)
    pytest.skip("no vLLM venv: scripts/test.sh builds it (.venv-vllm from requirements-vllm.txt)")


def check_environment() -> dict[str, str]:
    """The environment every check runs under: vLLM as a CPU library (with no accelerator, its platform
    detection finds none and it refuses to build its configs)."""
    return {**os.environ, "VLLM_TARGET_DEVICE": "cpu"}


def run(args: list[str], *, input: str | bytes = b"", env: dict[str, str] | None = None, cwd: str | None = None,
        timeout: float = 300, text: bool = False) -> subprocess.CompletedProcess:
    return venv_forks.run(vllm_python(), args, warm=WARM_MODULES, name="vllm", opt_out="TPU_VLLM_TEST_VLLM_FORKS",
                          env=check_environment() if env is None else env, input=input, cwd=cwd, timeout=timeout,
                          text=text)
