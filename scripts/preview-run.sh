#!/usr/bin/env bash
# The preview job's preview (.github/workflows/preview.yml), runnable from the repo root with the CLI logged in:
#   scripts/preview-run.sh STACK OUTPUT
# Runs `pulumi preview --refresh --diff` with the policy pack, shows it in the log and keeps it, stdout and
# stderr without colour, in OUTPUT: the job's next step posts it on the PR whether the preview passed or failed
# (pulumi/actions comments only after a preview that passed). Exits with the preview's status, so a policy
# violation or an error fails the job.
set -uo pipefail

stack="${1:?usage: scripts/preview-run.sh STACK OUTPUT}"
output="${2:?usage: scripts/preview-run.sh STACK OUTPUT}"
mkdir -p "$(dirname "$output")"
rm -f "$output"

status=0
pulumi preview --stack "$stack" --refresh --diff --policy-pack policy \
  --non-interactive --color never --suppress-progress 2>&1 | tee "$output" || status=$?

# The log masks the job's secrets; a PR comment does not. Pulumi shows its own secrets as [secret]: this keeps the
# backend credentials in this step's environment out of the file itself, should some error repeat one. The comment
# step masks them again in every encoding it knows, with the job's tokens and token shapes (.github/workflows/preview.yml).
for name in PULUMI_ACCESS_TOKEN PULUMI_CONFIG_PASSPHRASE; do
  value="${!name:-}"
  if [[ -n "$value" && -f "$output" ]]; then
    text="$(<"$output")"
    printf '%s\n' "${text//"$value"/[secret]}" >"$output"
  fi
done
exit "$status"
