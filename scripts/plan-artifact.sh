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
"$python" -m tools.plan --stack "$stack" >"$out/plan-$stack.txt" 2>"$out/plan.err" &
text_pid=$!
"$python" -m tools.plan --stack "$stack" --json >"$out/plan-$stack.json" 2>"$out/plan-json.err" &
json_pid=$!
base_ok=false
if [[ -n "$base" ]]; then
  (cd "$base" && "$python" -m tools.plan --stack "$stack" --json) >"$base_plan" 2>"$out/base-plan.err" &
  base_pid=$!
fi
plan_status=0
wait "$text_pid" || plan_status=$?
wait "$json_pid" || plan_status=$?
if [[ -n "$base" ]] && wait "$base_pid"; then
  base_ok=true
fi
# Both runs report the same warnings or error: show them once.
cat "$out/plan.err" >&2
cmp -s "$out/plan.err" "$out/plan-json.err" || cat "$out/plan-json.err" >&2
if [[ "$plan_status" != 0 ]]; then
  # This commit's own plan failed: on a pull request the diff file says so with the error's end (a traceback
  # ends with the exception), since the comment job posts that file, forks' pull requests included.
  if [[ -n "$base" ]]; then
    failed="$out/plan.err"
    [[ -s "$failed" ]] || failed="$out/plan-json.err"
    {
      echo "offline plan, stack $stack: FAILED: this commit's plan could not be computed (exit status $plan_status)."
      echo "Its error (last 40 lines):"
      tail -n 40 "$failed"
    } >"$diff"
  fi
  echo "plan-artifact.sh: the offline plan of stack $stack failed (exit status $plan_status)" >&2
  rm -f "$out/plan.err" "$out/plan-json.err" "$out/base-plan.err"
  exit 1
fi
rm -f "$out/plan.err" "$out/plan-json.err"
echo "offline plan for stack $stack written to $out/"
[[ -n "$base" ]] || exit 0

if "$base_ok"; then
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
