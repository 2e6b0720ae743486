"""PATH shims that record every external command a script runs, then run the real one (or a fake)."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

RECORDED = ["curl", "python3", "base64", "mkdir", "chmod", "install", "mv", "cat", "rm", "mktemp",
            "sleep", "grep", "head", "date"]


def make_shims(directory: Path, log: Path, fakes: dict[str, str] | None = None) -> dict[str, str]:
    """Returns an environment whose PATH starts with the shims; every argv goes to `log`."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in RECORDED:
        real = shutil.which(name)
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
        # writes (the words, then the newline) interleave under load.
        f'printf "%s\\n" "$(printf "%q " "$(basename "$0")" "$@")" >> {log}\n'
        f"{body}\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
