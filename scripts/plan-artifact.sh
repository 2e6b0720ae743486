#!/usr/bin/env bash
# The offline plan as CI publishes it: text and JSON for a stack, into a directory; with a checkout
# of the base branch, also the base's plan and the diff a reviewer reads (posted on the PR).
#   scripts/plan-artifact.sh [STACK] [OUT_DIR] [BASE_CHECKOUT]   (uses the venv scripts/test.sh made)
# Writes plan-STACK.txt, plan-STACK.json and, with a base, plan-STACK.base.json and plan-STACK.diff.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
stack="${1:-dev}"
out="${2:-plan}"
base="${3:-}"
python="${PLAN_PYTHON:-.venv-test/bin/python}"
# The base's plan runs from its own directory: a relative interpreter path must still resolve.
case "$python" in
  /*) ;;
  */*) python="$PWD/$python" ;;
esac
mkdir -p "$out"
out="$(cd "$out" && pwd)"
diff="$out/plan-$stack.diff.txt"
base_plan="$out/plan-$stack.base.json"
# Independent runs, side by side; `wait PID` returns each one's status, so a failing plan fails this script.
"$python" -m tools.plan --stack "$stack" >"$out/plan-$stack.txt" &
text_pid=$!
"$python" -m tools.plan --stack "$stack" --json >"$out/plan-$stack.json" &
json_pid=$!
if [[ -n "$base" ]]; then
  (cd "$base" && "$python" -m tools.plan --stack "$stack" --json) >"$base_plan" 2>"$out/base-plan.err" &
  base_pid=$!
fi
wait "$text_pid"
wait "$json_pid"
echo "offline plan for stack $stack written to $out/"
[[ -n "$base" ]] || exit 0

if wait "$base_pid"; then
  # A diff that fails must fail this script and say so in the diff itself: the comment job posts that file.
  if ! "$python" -m tools.plan --stack "$stack" --diff "$base_plan" >"$diff" 2>"$out/diff.err" || [[ ! -s "$diff" ]]; then
    {
      echo "offline plan diff, stack $stack: FAILED: the diff against the base branch's plan could not be made."
      echo "Its error (first 40 lines):"
      head -n 40 "$out/diff.err"
    } >"$diff"
    echo "plan-artifact.sh: the plan diff of stack $stack against $base failed; see $diff:" >&2
    cat "$out/diff.err" >&2
    rm -f "$out/diff.err" "$out/base-plan.err"
    exit 1
  fi
  rm -f "$out/diff.err"
else
  # The base may predate the plan, or its config may not validate: say so instead of failing the PR.
  {
    echo "offline plan diff, stack $stack: the base branch's plan could not be computed, so there is nothing to compare."
    echo "Its error (first 40 lines):"
    head -n 40 "$out/base-plan.err"
  } >"$diff"
fi
rm -f "$out/base-plan.err"
echo "plan diff against $base written to $diff"
