#!/usr/bin/env bash
# The offline plan as CI publishes it: text and JSON for a stack, into a directory.
#   scripts/plan-artifact.sh [STACK] [OUT_DIR]   (uses the venv scripts/test.sh made)
set -euo pipefail
cd "$(dirname "$0")/.."
stack="${1:-dev}"
out="${2:-plan}"
python="${PLAN_PYTHON:-.venv-test/bin/python}"
mkdir -p "$out"
"$python" -m tools.plan --stack "$stack" >"$out/plan-$stack.txt"
"$python" -m tools.plan --stack "$stack" --json >"$out/plan-$stack.json"
echo "offline plan for stack $stack written to $out/"
