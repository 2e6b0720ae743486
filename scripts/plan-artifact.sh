#!/usr/bin/env bash
# The offline plan as CI publishes it: text and JSON for a stack, into a directory; with a checkout
# of the base branch, also the base's plan and the diff a reviewer reads (posted on the PR).
#   scripts/plan-artifact.sh [STACK] [OUT_DIR] [BASE_CHECKOUT]   (uses the venv scripts/test.sh made)
# Writes plan-STACK.txt, plan-STACK.json and, with a base, plan-STACK.base.json and plan-STACK.diff.txt.
# Each commit's plan is computed once: the base's first (its own code, so only options every version has), then
# this commit's, which writes the text, the JSON and the diff from one run of the program.
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
text="$out/plan-$stack.txt"
json="$out/plan-$stack.json"
diff="$out/plan-$stack.diff.txt"
base_plan="$out/plan-$stack.base.json"
# The JSON is there only if this run computed the plan (below): nothing from an earlier run may stand in for it.
rm -f "$json" "$diff"
base_ok=false
if [[ -n "$base" ]] && (cd "$base" && "$python" -m tools.plan --stack "$stack" --json) >"$base_plan" \
  2>"$out/base-plan.err"; then
  base_ok=true
fi
outputs=(--json-out "$json")
"$base_ok" && outputs+=(--diff "$base_plan" --diff-out "$diff")
plan_status=0
"$python" -m tools.plan --stack "$stack" "${outputs[@]}" >"$text" 2>"$out/plan.err" || plan_status=$?
# One run: its warnings (or its error), once.
cat "$out/plan.err" >&2
if [[ "$plan_status" != 0 && ( ! -s "$json" || "$base_ok" == false ) ]]; then
  # This commit's own plan failed: on a pull request the diff file says so with the error's end (a traceback
  # ends with the exception), since the comment job posts that file, forks' pull requests included.
  if [[ -n "$base" ]]; then
    {
      echo "offline plan, stack $stack: FAILED: this commit's plan could not be computed (exit status $plan_status)."
      echo "Its error (last 40 lines):"
      tail -n 40 "$out/plan.err"
    } >"$diff"
  fi
  echo "plan-artifact.sh: the offline plan of stack $stack failed (exit status $plan_status)" >&2
  rm -f "$out/plan.err" "$out/base-plan.err"
  exit 1
fi
echo "offline plan for stack $stack written to $out/"
if [[ -z "$base" ]]; then
  rm -f "$out/plan.err"
  exit 0
fi

if "$base_ok"; then
  # The plan was written, the diff was not (a base it cannot read): fail, and say so in the diff itself, since
  # the comment job posts that file.
  if [[ "$plan_status" != 0 || ! -s "$diff" ]]; then
    {
      # The run wrote this commit's JSON and then failed (exit status 0 with no diff cannot happen, but is told
      # the same way): its own error says whether the base or something after the JSON failed.
      echo "offline plan diff, stack $stack: FAILED: the diff against the base branch's plan could not be made" \
        "(this commit's plan run ended with exit status $plan_status after writing its JSON)."
      echo "Its error (last 40 lines):"
      tail -n 40 "$out/plan.err"
    } >"$diff"
    echo "plan-artifact.sh: the plan diff of stack $stack against $base failed; see $diff" >&2
    rm -f "$out/plan.err" "$out/base-plan.err"
    exit 1
  fi
else
  # The base may predate the plan, or its config may not validate: say so instead of failing the PR.
  {
    echo "offline plan diff, stack $stack: the base branch's plan could not be computed, so there is nothing to compare."
    echo "Its error (first 40 lines):"
    head -n 40 "$out/base-plan.err"
  } >"$diff"
fi
rm -f "$out/plan.err" "$out/base-plan.err"
echo "plan diff against $base written to $diff"
