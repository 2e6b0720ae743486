#!/usr/bin/env bash
# The one test command: makes its own virtualenv, installs the pinned
# requirements, lints (ruff, shellcheck) and runs pytest. Offline apart from
# the package index.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${TPU_VLLM_TEST_VENV:-.venv-test}"
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
if [[ ! -x "$VENV/bin/python" ]]; then
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
"$VENV/bin/ruff" check .
"$VENV/bin/shellcheck" -S style startup/*.sh scripts/*.sh .ci/run
exec "$VENV/bin/python" -m pytest "$@"
