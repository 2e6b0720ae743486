"""PATH shims that record every external command a script runs, then run the real one (or a fake)."""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
from pathlib import Path

RECORDED = ["curl", "python3", "base64", "mkdir", "chmod", "install", "mv", "cat", "rm", "mktemp",
            "sleep", "grep", "head", "date"]


def make_shims(directory: Path, log: Path, fakes: dict[str, str] | None = None) -> dict[str, str]:
    """Returns an environment whose PATH starts with the shims; every argv goes to `log`."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in RECORDED:
        real = _interpreter(name) if name == "python3" else shutil.which(name)
        if real is None:
            continue
        _write(directory / name, f'exec {real} "$@"', log)
    for name, body in (fakes or {}).items():
        _write(directory / name, body, log)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("GCE_", "CLOUDSDK_"))}
    env["PATH"] = f"{directory}:{env['PATH']}"
    return env


def _write(path: Path, body: str, log: Path) -> None:
    path.write_text(
        "#!/usr/bin/env bash\n"
        # One write per line: processes a script starts in the background log at the same time, and two
        # writes (the words, then the newline) interleave under load. Builtins only (no subshell, no
        # basename): a script runs dozens of shimmed commands and each fork costs under load.
        f'printf -v _shim_line "%q " "${{0##*/}}" "$@"; printf "%s\\n" "$_shim_line" >> {log}; unset _shim_line\n'
        f"{body}\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def stdlib_python3() -> dict[str, str]:
    """A `python3` fake for make_shims, for scripts whose Python is the standard library only (startup.sh's
    `python3 -c` steps, smoke_test.py: "the TPU VM image's python3"): the same interpreter, recorded the same
    way, without `site` (-S). What `site` would add is the test machine's own: its site-packages and their .pth
    files, which a script must not need and which can cost ~80 ms a start (an interpreter whose .pth imports
    certifi), several times per script run."""
    real = _interpreter("python3")
    return {"python3": f'exec {real} -S "$@"'} if real else {}


@functools.cache
def _interpreter(name: str) -> str | None:
    """The interpreter `name` on PATH runs: a version manager's launcher (pyenv's shim is a bash script that
    costs ~0.5 s a start under load) resolved once to the executable it would exec, so the scripts run the
    same python3 without paying for the launcher at every `python3 -c`."""
    launcher = shutil.which(name)
    if launcher is None:
        return None
    found = subprocess.run([launcher, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True)
    executable = found.stdout.strip()
    return executable if found.returncode == 0 and executable and os.access(executable, os.X_OK) else launcher
