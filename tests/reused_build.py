"""A clean clone whose from-scratch build is paid once per set of inputs, not once per test session.

tests/test_preview_job.py runs the preview job's steps in a clean clone; the steps build two virtualenvs (the
program's, with pulumi-gcp and the Kubernetes SDK, and the policy pack's): the suite's single most costly
step (~60 s idle, 120 s and more on a shared machine). What that build does depends only on its inputs: the
script, the workflow, the requirements files, the files that say where the venvs go, and the interpreter.
So the clone lives in a cache keyed by a hash of exactly those files; the first session for a given set of
inputs clones from nothing and builds from nothing (the whole proof); later sessions bring the clone's files
back to the working copy's (fetch, hard reset, `git clean` of everything but the built venvs, the uncommitted
patch) and run the same steps again over the venvs that proof left (the script keeps a venv it built while
nothing it was built from changed: scripts/preview-prepare.sh). Any change
to an input is another key, so another build from nothing. TPU_VLLM_TEST_FRESH_BUILD=1 forces one.

The cache is outside the repository (TPU_VLLM_TEST_CACHE, default ~/.cache/tpu-vllm-tests); one clone per
checkout (the key holds its path) and a lock held while a session uses it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILT_MARK = "built-from-scratch"
# Changed when what a cached clone holds changes shape, so no older cache is trusted (2: the runner's Python
# sits beside the clone, not in a session's temp dir that is gone by the next session).
CACHE_FORMAT = "2"
KEEP_ON_REFRESH = ("venv", "policy/venv")


def cache_root() -> Path:
    told = os.environ.get("TPU_VLLM_TEST_CACHE")
    if told:
        return Path(told)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tpu-vllm-tests"


def inputs_key(inputs: list[str]) -> str:
    """The build's inputs: these files of the working copy, and the interpreter the steps' `python3` is."""
    digest = hashlib.sha256(CACHE_FORMAT.encode())
    digest.update(os.path.realpath(getattr(sys, "_base_executable", sys.executable)).encode())
    digest.update(sys.version.encode())
    for name in sorted(inputs):
        digest.update(name.encode() + b"\0" + (ROOT / name).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def working_copy_patch() -> bytes:
    return subprocess.run(["git", "diff", "HEAD", "--binary"], cwd=ROOT, check=True, capture_output=True).stdout


def apply_patch(clone: Path) -> None:
    patch = working_copy_patch()
    if patch:
        subprocess.run(["git", "apply", "--whitespace=nowarn"], cwd=clone, input=patch, check=True,
                       capture_output=True)


def fresh_clone(destination: Path) -> Path:
    """What actions/checkout gives: the committed files, then the working copy's changes to them."""
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(destination)], check=True,
                   capture_output=True)
    apply_patch(destination)
    return destination


def refresh(clone: Path) -> None:
    """The clone's files as a fresh clone of the working copy has them; only the built venvs stay."""
    git = ["git", "-C", str(clone)]
    subprocess.run([*git, "fetch", "--quiet", str(ROOT), "HEAD"], check=True, capture_output=True)
    subprocess.run([*git, "reset", "--quiet", "--hard", "FETCH_HEAD"], check=True, capture_output=True)
    excluded = [argument for path in KEEP_ON_REFRESH for argument in ("-e", f"/{path}/")]
    subprocess.run([*git, "clean", "-ffdxq", *excluded], check=True, capture_output=True)
    apply_patch(clone)


@contextlib.contextmanager
def clone_built_once(name: str, inputs: list[str]) -> Iterator[tuple[Path, bool, Path]]:
    """(the clone, whether a session already built it from scratch, the mark the caller writes once the build
    passed). Held under a lock for as long as the caller uses it."""
    checkout = hashlib.sha256(str(ROOT).encode()).hexdigest()[:8]
    home = cache_root() / name
    home.mkdir(parents=True, exist_ok=True)
    place = home / f"{checkout}-{inputs_key(inputs)}"
    with open(f"{place}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _forget_older_builds(home, checkout, place)
        built = (place / BUILT_MARK).is_file() and not os.environ.get("TPU_VLLM_TEST_FRESH_BUILD")
        clone = place / "repo"
        if built:
            refresh(clone)
        else:
            shutil.rmtree(place, ignore_errors=True)
            place.mkdir(parents=True)
            fresh_clone(clone)
        yield clone, built, place / BUILT_MARK


def _forget_older_builds(home: Path, checkout: str, keep: Path) -> None:
    """This checkout's builds for inputs it no longer has (each is ~1 GB), unless a session holds one."""
    for other in home.glob(f"{checkout}-*"):
        if other == keep or not other.is_dir():
            continue
        with open(f"{other}.lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            shutil.rmtree(other, ignore_errors=True)
