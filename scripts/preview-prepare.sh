#!/usr/bin/env bash
# The preview job's preparation (.github/workflows/preview.yml), runnable anywhere from the repo root:
#   scripts/preview-prepare.sh STACK        (STACK as the job names it: dev, org/dev or org/project/dev)
# 1. the committed stack file must be there, with gcp:project and any hfToken encrypted;
# 2. the program's venv/ and the policy pack's policy/venv/, where the Python language host looks
#    (Pulumi.yaml and policy/PulumiPolicy.yaml say `virtualenv: venv`, resolved in each one's own
#    directory; the host never creates a policy pack's venv itself: pulumi/pulumi
#    sdk/python/cmd/pulumi-language-python/main.go, RunPlugin only runs `<venv>/bin/python policy/`);
# 3. prints platform=vm|gke (to $GITHUB_OUTPUT when set): gke needs gke-gcloud-auth-plugin in the job.
set -euo pipefail

stack_name="${1:?usage: scripts/preview-prepare.sh STACK (the PULUMI_STACK_NAME variable, default dev)}"
stack="${stack_name##*/}"   # org/dev -> dev: the stack file is named after the stack alone
stack_file="Pulumi.${stack}.yaml"
python="${PREVIEW_PYTHON:-python3}"

if [ ! -f "$stack_file" ]; then
  echo "preview: $stack_file is not in this commit (PULUMI_STACK_NAME=$stack_name). The job previews the" \
       "committed stack file: commit it (its secrets are ciphertext), or set the PULUMI_STACK_NAME variable" \
       "to a stack whose file is committed (docs/review.md, preview set-up)." >&2
  exit 1
fi

# Cheap checks before the ~80 s of venvs (issue 29): an unset project is said now; the full check is below.
project="$(sed -n 's/^[[:space:]]*gcp:project:[[:space:]]*//p' "$stack_file" | head -n 1 | tr -d "\"' ")"
if [ -z "$project" ] || [ "$project" = null ] || [ "$project" = "~" ]; then
  echo "preview: $stack_file: gcp:project is not set: pulumi config set gcp:project YOUR_PROJECT, then commit the" \
       "file" >&2
  exit 1
fi

# What a venv was built from and what it holds: the requirements file, the interpreter, and the distributions
# installed in it (one *.dist-info or *.egg-info per distribution, named after its version).
venv_state() {  # venv_state DIR REQUIREMENTS
  {
    sha256sum <"$2"
    "$python" -VV
    readlink -f "$(command -v "$python")"
    [[ ! -d "$1/lib" ]] || find "$1/lib" -mindepth 3 -maxdepth 3 -path '*/site-packages/*' \
      \( -name '*.dist-info' -o -name '*.egg-info' \) -printf '%P\n' | LC_ALL=C sort
  } | sha256sum | cut -d' ' -f1
}
# A venv this script built from the same requirements and interpreter, holding exactly what that build left, is
# kept as it is (a local re-run; pip over a complete venv still costs seconds). A changed requirements file or
# interpreter, or a package installed, upgraded or removed since, builds it again; a failed build leaves no stamp.
build_venv() {  # build_venv DIR REQUIREMENTS
  local stamp="$1/.preview-prepare-built"
  if [[ -x "$1/bin/python" && -f "$stamp" && "$(<"$stamp")" == "$(venv_state "$1" "$2")" ]]; then
    echo "preview: $1 is as this script built it from $2: kept"
    return
  fi
  rm -f "$stamp"
  "$python" -m venv "$1"
  "$1/bin/python" -m pip install --disable-pip-version-check --quiet -r "$2"
  venv_state "$1" "$2" >"$stamp"
}
build_venv venv requirements.txt
build_venv policy/venv policy/requirements.txt

# The program's venv has PyYAML (requirements.txt); the runner's Python may not.
platform="$(venv/bin/python - "$stack_file" <<'PY'
import sys

import yaml

path = sys.argv[1]
config = (yaml.safe_load(open(path, encoding="utf-8")) or {}).get("config") or {}
problems = []
if not config.get("gcp:project"):
    problems.append("gcp:project is not set: pulumi config set gcp:project YOUR_PROJECT, then commit the file")
token = config.get("tpu-vllm:hfToken")
if token is not None and not (isinstance(token, dict) and "secure" in token):
    problems.append("tpu-vllm:hfToken is in plaintext: pulumi config set --secret tpu-vllm:hfToken, rotate the "
                    "token (it is in the history), then commit the file")
for problem in problems:
    print(f"preview: {path}: {problem}", file=sys.stderr)
if problems:
    sys.exit(1)
print(config.get("tpu-vllm:platform") or "vm")
PY
)"
echo "preview: stack $stack_name ($stack_file), platform $platform; venv/ and policy/venv/ ready"
echo "platform=$platform" >> "${GITHUB_OUTPUT:-/dev/stdout}"
