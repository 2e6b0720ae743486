"""Runs one pytest session shares: the first test that asks for a run computes it, every later asker in any
xdist worker reads the result back from disk.

A run of the program under mocks, or of `python -m tools.plan`, takes 4-10 s and prints the same for the same
inputs (tests/test_plan.py::test_the_plan_is_byte_identical_across_fresh_runs holds the plan to that), yet many
tests ask for the same one (the shipped dev and gke stacks above all). Each result is keyed by a hash of
everything the run reads: the request (its config, stack and fakes), the files the program and the plan tool
import and the stack files, the interpreter and the environment variables that reach the program. The store is
this session's own temp dir (xdist's workers share their base temp's parent), so nothing outlives the session;
a per-key lock (fcntl) makes the second asker wait for the first instead of computing the same thing twice, and
each result is written to a temp file and renamed into place, so a reader never sees half of one.

Outside a pytest session (`python -m tests.golden --update`) nothing is shared: every call computes.
A test that needs a fresh process (e.g. two runs compared byte for byte) starts its own, never through here.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# What a program or plan run reads from the checkout: the program, its components, the plan tool, the harness,
# the project and stack files, the golden variant stacks.
SOURCE_GLOBS = ("__main__.py", "Pulumi*.yaml", "components/**/*.py", "tools/**/*.py", "tests/program_harness.py",
                "tests/golden/stacks/*.yaml", "requirements.txt")
# Environment variables that reach the program or the engine and could change what it prints.
ENV_PREFIXES = ("PULUMI_", "TPU_VLLM_", "PYTHON", "GOOGLE_", "CLOUDSDK_")

_directory: Path | None = None


def use_directory(directory: Path | None) -> None:
    """Set by tests/conftest.py for the session (None: share nothing)."""
    global _directory
    _directory = directory
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)


def source_digest() -> str:
    """The sources as they are now, read at every ask (~15 ms): a file edited during the session is a new key,
    and tests/fork_server.py restarts its server on it."""
    digest = hashlib.sha256()
    for pattern in SOURCE_GLOBS:
        for path in sorted(ROOT.glob(pattern)):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def environment_digest() -> str:
    relevant = sorted((key, value) for key, value in os.environ.items()
                      if key.startswith(ENV_PREFIXES) and key != "PYTEST_XDIST_WORKER")
    return hashlib.sha256(json.dumps([sys.executable, relevant]).encode()).hexdigest()


def key_of(kind: str, request: object) -> str:
    text = json.dumps([kind, request, source_digest(), environment_digest()], sort_keys=True, default=str)
    return f"{kind}-{hashlib.sha256(text.encode()).hexdigest()[:24]}"


def once(kind: str, request: object, compute: Callable[[], object]) -> object:
    """compute()'s JSON-able result, computed once per session for this request and these sources."""
    if _directory is None:
        return compute()
    key = key_of(kind, request)
    path = _directory / f"{key}.json"
    with open(f"{path}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():
            _note("shared", key)
            return json.loads(path.read_text())
        result = compute()
        _note("computed", key)
        handle, temporary = tempfile.mkstemp(dir=_directory, prefix=".writing-")
        with os.fdopen(handle, "w") as file:
            json.dump(result, file)
        os.replace(temporary, path)
        return result


def _note(outcome: str, key: str) -> None:
    """One line per ask in runs.log (what docs/development.md counts): computed or shared, key, test."""
    test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
    with open(_directory / "runs.log", "a") as log:
        log.write(f"{outcome} {key} {test}\n")


def config_dir_files(directory: Path) -> dict[str, str]:
    """The stack files a plan run with --config-dir reads, by name and content's hash."""
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(directory.glob("*")) if path.is_file()}
