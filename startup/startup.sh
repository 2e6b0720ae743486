#!/usr/bin/env bash
# tpu-vllm boot script: the node's startup-script metadata, run as root at every boot.
#
# Static on purpose: no templating and no secret inside, because instance
# metadata is readable from the instance. It reads the non-secret settings from
# metadata attributes, fetches the secrets itself with the VM's own identity,
# writes them to a root-only env file for `docker run --env-file`, mounts the
# compile-cache disk, starts pulling the image, and writes a status file that
# the deploy waits on.
#
# Test hooks (the variables Google's own clients honour, plus a path prefix):
#   GCE_METADATA_HOST                              metadata server host[:port]
#   CLOUDSDK_API_ENDPOINT_OVERRIDES_SECRETMANAGER  Secret Manager root URL
#   STARTUP_ROOT                                   prefix for every path written
set -euo pipefail
umask 077

ROOT="${STARTUP_ROOT:-}"
METADATA_URL="http://${GCE_METADATA_HOST:-metadata.google.internal}/computeMetadata/v1"
SECRETMANAGER_URL="${CLOUDSDK_API_ENDPOINT_OVERRIDES_SECRETMANAGER:-https://secretmanager.googleapis.com/}"
SECRETMANAGER_URL="${SECRETMANAGER_URL%/}/v1"
ENV_DIR="$ROOT/etc/tpu-vllm"
ENV_FILE="$ENV_DIR/env"
STATUS_DIR="$ROOT/var/lib/tpu-vllm"
STATUS_FILE="$STATUS_DIR/startup-status"
ATTEMPTS="${STARTUP_ATTEMPTS:-8}"
BACKOFF_SECONDS="${STARTUP_BACKOFF_SECONDS:-2}"

WORK_DIR="$(mktemp -d)"
trap 'rm -rf "$WORK_DIR"' EXIT

log() { printf 'tpu-vllm-startup: %s\n' "$*" >&2; }

write_status() {
  mkdir -p "$STATUS_DIR"
  printf '%s\n' "$1" >"$STATUS_FILE.tmp"
  chmod 0644 "$STATUS_FILE.tmp"
  mv -f "$STATUS_FILE.tmp" "$STATUS_FILE"
}

fail() {
  log "FAILED: $*"
  write_status "failed: $*"
  exit 1
}

# http_get URL OUT [HEADER_FILE] -> sets HTTP_CODE; retries connection errors, 429 and 5xx.
# Headers come from a file so no credential is ever on a command line.
http_get() {
  local url="$1" out="$2" header_file="${3:-}" attempt=1 delay="$BACKOFF_SECONDS"
  local -a headers=(-H 'Metadata-Flavor: Google')
  [[ -n "$header_file" ]] && headers=(-H "@$header_file")
  while :; do
    HTTP_CODE="$(curl -sS --max-time 30 -o "$out" -w '%{http_code}' "${headers[@]}" "$url" 2>/dev/null)" || HTTP_CODE="000"
    case "$HTTP_CODE" in
      000 | 429 | 5??) ;;
      *) return 0 ;;
    esac
    if ((attempt >= ATTEMPTS)); then
      return 0
    fi
    log "GET ${url%%\?*}: ${HTTP_CODE/#000/no answer}; retry $attempt/$ATTEMPTS in ${delay}s"
    sleep "$delay"
    attempt=$((attempt + 1))
    delay=$((delay * 2))
  done
}

# metadata_value PATH -> prints the value, or nothing when the server has no such entry.
metadata_value() {
  local out="$WORK_DIR/metadata-value"
  http_get "$METADATA_URL/$1" "$out"
  case "$HTTP_CODE" in
    200) cat "$out" ;;
    404) ;;
    *) fail "metadata server answered ${HTTP_CODE/#000/nothing} for $1 after $ATTEMPTS attempts" ;;
  esac
}

metadata_attribute() { metadata_value "instance/attributes/$1"; }

fetch_access_token() {
  local out="$WORK_DIR/token.json"
  http_get "$METADATA_URL/instance/service-accounts/default/token" "$out"
  [[ "$HTTP_CODE" == 200 ]] || fail "no access token from the metadata server (HTTP $HTTP_CODE); the node needs a service account with the cloud-platform scope"
  # The token goes from JSON to a header file without touching argv or stdout.
  python3 -c 'import json, sys
token = json.load(sys.stdin)["access_token"]
sys.stdout.write("Authorization: Bearer " + token + "\n")' <"$out" >"$WORK_DIR/auth-header"
  rm -f "$out"
}

# append_secret ENV_NAME SECRET_RESOURCE -> appends ENV_NAME=value to the env file being built.
append_secret() {
  local env_name="$1" secret="$2" out="$WORK_DIR/secret.json"
  http_get "$SECRETMANAGER_URL/$secret/versions/latest:access" "$out" "$WORK_DIR/auth-header"
  case "$HTTP_CODE" in
    200) ;;
    403) fail "permission denied reading $secret: grant roles/secretmanager.secretAccessor on that secret to the VM's service account ($SERVICE_ACCOUNT)" ;;
    404) fail "$secret has no enabled version (or does not exist): add one with: printf '%s' \"\$VALUE\" | gcloud secrets versions add ${secret##*/} --data-file=-" ;;
    *) fail "Secret Manager answered $HTTP_CODE for $secret after $ATTEMPTS attempts" ;;
  esac
  ENV_NAME="$env_name" python3 -c 'import base64, json, os, sys
value = base64.b64decode(json.load(sys.stdin)["payload"]["data"]).decode("utf-8").strip()
if not value or "\n" in value:
    sys.exit("the secret must be a single non-empty line")
sys.stdout.write(os.environ["ENV_NAME"] + "=" + value + "\n")' <"$out" >>"$WORK_DIR/env" ||
    fail "$secret does not hold a single-line value"
  rm -f "$out"
  log "read $env_name from $secret"
}

mount_cache_disk() {
  local device_name="$1" mount_point="$2" device
  device="$ROOT/dev/disk/by-id/google-$device_name"
  local waited=0
  until [[ -e "$device" ]]; do
    ((waited >= 60)) && fail "cache disk $device never appeared; is it attached (dataDisks)?"
    sleep 2
    waited=$((waited + 2))
  done
  mkdir -p "$ROOT$mount_point"
  if ! blkid "$device" >/dev/null 2>&1; then
    log "formatting blank cache disk $device"
    mkfs.ext4 -q -m 0 -E lazy_itable_init=0,lazy_journal_init=0,discard "$device"
  fi
  if ! mountpoint -q "$ROOT$mount_point"; then
    mount -o discard,defaults "$device" "$ROOT$mount_point"
  fi
  local uuid fstab="$ROOT/etc/fstab"
  uuid="$(blkid -s UUID -o value "$device")"
  # nofail + a short device timeout: a missing disk must never block boot.
  if ! grep -qs "UUID=$uuid " "$fstab"; then
    printf 'UUID=%s %s ext4 discard,defaults,nofail,x-systemd.device-timeout=10s 0 2\n' \
      "$uuid" "$mount_point" >>"$fstab"
  fi
  log "cache disk mounted at $mount_point"
}

main() {
  write_status "running"
  local hf_secret api_secret device_name mount_point image
  hf_secret="$(metadata_attribute tpu-vllm-hf-token-secret)"
  api_secret="$(metadata_attribute tpu-vllm-api-key-secret)"
  device_name="$(metadata_attribute tpu-vllm-cache-device)"
  mount_point="$(metadata_attribute tpu-vllm-cache-mount)"
  image="$(metadata_attribute tpu-vllm-image)"
  mount_point="${mount_point:-/mnt/tpu-vllm-cache}"
  [[ -n "$hf_secret" ]] || fail "metadata attribute tpu-vllm-hf-token-secret is missing"
  [[ -n "$api_secret" ]] || fail "metadata attribute tpu-vllm-api-key-secret is missing"
  SERVICE_ACCOUNT="$(metadata_value instance/service-accounts/default/email)"
  SERVICE_ACCOUNT="${SERVICE_ACCOUNT:-the node service account}"

  if [[ -n "$device_name" ]]; then
    mount_cache_disk "$device_name" "$mount_point"
  else
    log "no cache disk attribute; the compile cache stays on the boot disk"
    mkdir -p "$ROOT$mount_point"
  fi
  mkdir -p "$ROOT$mount_point/vllm" "$ROOT$mount_point/huggingface"

  if [[ -n "$image" ]] && command -v docker >/dev/null 2>&1; then
    # Start the multi-GB pull now; the deploy's docker run finds it done or joins it.
    log "pulling $image in the background"
    nohup docker pull "$image" >"$STATUS_DIR/image-pull.log" 2>&1 &
  fi

  fetch_access_token
  : >"$WORK_DIR/env"
  append_secret HF_TOKEN "$hf_secret"
  append_secret VLLM_API_KEY "$api_secret"
  rm -f "$WORK_DIR/auth-header"

  mkdir -p "$ENV_DIR"
  chmod 0700 "$ENV_DIR"
  install -m 0600 "$WORK_DIR/env" "$ENV_FILE.tmp"
  mv -f "$ENV_FILE.tmp" "$ENV_FILE"
  write_status "ready"
  log "ready: secrets in $ENV_FILE (root only)"
}

main "$@"
