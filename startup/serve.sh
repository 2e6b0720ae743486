#!/usr/bin/env bash
# tpu-vllm serving step, run by pulumi-command over SSH as `sudo bash -s -- ...`.
#
# Its stdin is this file, then one `stage_file PATH <<'TPU_VLLM_FILE' ... TPU_VLLM_FILE` per file the
# stack rendered (the front's nginx.conf and runner, the boot-ready check, the systemd units, the smoke
# test), then `main`. Nothing it receives is a secret: the smoke test reads the API key from the root-only
# file startup.sh wrote, into a request header only.
#
#   serve.sh --status FILE --api-key-file FILE --model ID --port N --upstream-port N
#            --container NAME --front-container NAME --runner FILE --vllm-unit NAME --front-unit NAME
#            --smoke-test FILE [--tpu-devices] [--status-timeout S] [--health-timeout S] [--front-timeout S] [--poll S]
#            [--progress-every S] -- DOCKER_RUN_ARGS...
#
# DOCKER_RUN_ARGS are vLLM's (written to --runner, which the vLLM unit runs); --tpu-devices makes the
# runner pass each TPU device node found at start (/dev/vfio/*, /dev/accel*) instead of --privileged.
#
# main: wait for the boot script, install the files and the runner, (re)start both units (each removes
# its old container and creates a fresh one), wait for vLLM's /health on loopback while printing the
# elapsed time and the latest compile progress line, check the front, smoke-test through the front.
#
# STARTUP_ROOT prefixes the files it reads or writes, so tests run it unprivileged.
#
# Executed (bash -s, as the stack runs it), it parses its flags and makes its scratch directory; sourced
# (tests), it only defines its functions. `main` runs when the stack's stdin calls it, after the files.
set -euo pipefail
umask 077

ROOT="${STARTUP_ROOT:-}"
STATUS_TIMEOUT=900
HEALTH_TIMEOUT=1800
FRONT_TIMEOUT=120
POLL=5
PROGRESS_EVERY=30
TPU_DEVICES=false
STATUS_FILE="" API_KEY_FILE="" MODEL="" PORT="" UPSTREAM_PORT="" CONTAINER="" FRONT_CONTAINER=""
RUNNER="" VLLM_UNIT="" FRONT_UNIT="" SMOKE_TEST=""
VLLM_RUN_ARGS=()
BOOT_ID_FILE="$ROOT/proc/sys/kernel/random/boot_id"
# Lines of vLLM's log that show where a boot is: tpu-inference's precompile steps, then the milestones.
PROGRESS_LINES='Precompile|[Cc]ompil|[Ww]arm-?up|Loading weights|Memory statistics|Init kv-cache|startup complete'
MILESTONES='Memory statistics|Init kv-cache|startup complete'
WORK_DIR=""
# Set by the stack after the staged files (components/vm/serving_step.py): printed last on any failure, so
# pulumi-command's error, which ends with this script's output, says the TPU bills and how to stop it.
FAILURE_NOTE=""
STAGED_PATHS=()

# parse_args "$@": the flags above; exits 2 on anything missing or malformed.
parse_args() {
  while (($#)); do
    case "$1" in
      --status) STATUS_FILE="$ROOT$2"; shift 2 ;;
      --api-key-file) API_KEY_FILE="$ROOT$2"; shift 2 ;;
      --model) MODEL="$2"; shift 2 ;;
      --port) PORT="$2"; shift 2 ;;
      --upstream-port) UPSTREAM_PORT="$2"; shift 2 ;;
      --container) CONTAINER="$2"; shift 2 ;;
      --front-container) FRONT_CONTAINER="$2"; shift 2 ;;
      --runner) RUNNER="$2"; shift 2 ;;
      --vllm-unit) VLLM_UNIT="$2"; shift 2 ;;
      --front-unit) FRONT_UNIT="$2"; shift 2 ;;
      --smoke-test) SMOKE_TEST="$ROOT$2"; shift 2 ;;
      --tpu-devices) TPU_DEVICES=true; shift ;;
      --status-timeout) STATUS_TIMEOUT="$2"; shift 2 ;;
      --health-timeout) HEALTH_TIMEOUT="$2"; shift 2 ;;
      --front-timeout) FRONT_TIMEOUT="$2"; shift 2 ;;
      --poll) POLL="$2"; shift 2 ;;
      --progress-every) PROGRESS_EVERY="$2"; shift 2 ;;
      --) shift; break ;;
      *) echo "serve.sh: unknown argument $1" >&2; exit 2 ;;
    esac
  done
  local required variable number
  for required in STATUS_FILE:status API_KEY_FILE:api-key-file MODEL:model PORT:port UPSTREAM_PORT:upstream-port \
    CONTAINER:container FRONT_CONTAINER:front-container RUNNER:runner VLLM_UNIT:vllm-unit FRONT_UNIT:front-unit \
    SMOKE_TEST:smoke-test; do
    variable="${required%%:*}"
    [[ -n "${!variable}" ]] || { echo "serve.sh: missing --${required#*:}" >&2; exit 2; }
  done
  (($#)) || { echo "serve.sh: no docker run arguments after --" >&2; exit 2; }
  for number in "$STATUS_TIMEOUT" "$HEALTH_TIMEOUT" "$FRONT_TIMEOUT" "$PORT" "$UPSTREAM_PORT" "$PROGRESS_EVERY"; do
    [[ "$number" =~ ^[0-9]+$ ]] || { echo "serve.sh: $number is not a whole number" >&2; exit 2; }
  done
  VLLM_RUN_ARGS=("$@")
  FRONT_URL="http://127.0.0.1:$PORT"
  VLLM_URL="http://127.0.0.1:$UPSTREAM_PORT"
}

say() { printf '[tpu-vllm] %s\n' "$*"; }
die() {
  printf '[tpu-vllm] FAILED: %s\n' "$*" >&2
  exit 1
}
elapsed() { printf '%dm%02ds' $(((SECONDS - $1) / 60)) $(((SECONDS - $1) % 60)); }

# stage_file PATH <<'TPU_VLLM_FILE' ... : keeps one rendered file until main installs it.
stage_file() {
  case "$1" in
    /etc/tpu-vllm/* | /etc/systemd/system/tpu-vllm*.service) ;;
    *) die "refusing to install $1: only files under /etc/tpu-vllm and the tpu-vllm units" ;;
  esac
  cat >"$WORK_DIR/staged.${#STAGED_PATHS[@]}"
  STAGED_PATHS+=("$1")
}

install_file() {
  local source="$1" target="$ROOT$2"
  mkdir -p "$(dirname "$target")"
  install -m 0644 "$source" "$target.tmp"
  mv -f "$target.tmp" "$target"
}

# boot_status -> the boot script's state if this boot wrote it, else nothing (not started on this boot).
boot_status() {
  local state="" stamp="" boot_id
  boot_id="$(cat "$BOOT_ID_FILE" 2>/dev/null)" || return 0
  { read -r state; read -r stamp; } <"$STATUS_FILE" 2>/dev/null || true
  [[ "$stamp" == "boot $boot_id" ]] && printf '%s\n' "$state"
  return 0
}

wait_for_startup() {
  local deadline=$((SECONDS + STATUS_TIMEOUT)) next_note=$SECONDS status=""
  while :; do
    status="$(boot_status)"
    case "$status" in
      ready) say "boot script finished: secret files and cache disk in place"; return 0 ;;
      failed:*) die "the boot script $status (full log: sudo journalctl -u google-startup-scripts)" ;;
    esac
    # Said before the deadline is judged, so even the first poll of a short wait says what it waits for.
    if ((SECONDS >= next_note)); then
      say "waiting for the boot script (${status:-not started on this boot})"
      next_note=$((SECONDS + 30))
    fi
    ((SECONDS >= deadline)) && die "the boot script did not finish in ${STATUS_TIMEOUT}s on this boot (status: ${status:-none}); see sudo journalctl -u google-startup-scripts"
    sleep "$POLL"
  done
}

# The vLLM runner: a foreground `docker run` with exactly this deploy's arguments.
write_vllm_runner() {
  local runner="$WORK_DIR/runner" arg
  {
    printf '#!/bin/bash\n'
    printf '# Run by %s, which removes the previous container first: vLLM in the foreground.\n' "$VLLM_UNIT"
    printf '# Written by the tpu-vllm serving step from the stack'"'"'s settings; no secret inside.\n'
    printf 'set -euo pipefail\n'
    if [[ "$TPU_DEVICES" == true ]]; then
      # shellcheck disable=SC2016 # written for the runner to expand, not now
      printf '%s\n' \
        '# The TPU device nodes present at this start (vfio on v5e, accel on older chips).' \
        'shopt -s nullglob' \
        'tpu_devices=()' \
        'for node in "${STARTUP_ROOT:-}"/dev/vfio/* "${STARTUP_ROOT:-}"/dev/accel*; do' \
        '  tpu_devices+=(--device "${node#"${STARTUP_ROOT:-}"}")' \
        'done' \
        '((${#tpu_devices[@]})) || { echo "tpu-vllm: no TPU device node under /dev/vfio or /dev/accel*" >&2; exit 1; }'
      # shellcheck disable=SC2016 # likewise
      printf 'exec docker run "${tpu_devices[@]}"'
    else
      printf 'exec docker run'
    fi
    for arg in "${VLLM_RUN_ARGS[@]}"; do
      printf ' \\\n  %q' "$arg"
    done
    printf '\n'
  } >"$runner"
  install_file "$runner" "$RUNNER"
}

install_and_start() {
  local index
  ((${#STAGED_PATHS[@]})) || die "no files followed serve.sh on stdin (the stack sends them after it)"
  for index in "${!STAGED_PATHS[@]}"; do
    install_file "$WORK_DIR/staged.$index" "${STAGED_PATHS[$index]}"
  done
  write_vllm_runner
  systemctl daemon-reload
  systemctl enable --quiet "$FRONT_UNIT" "$VLLM_UNIT"
  # A crash loop from an earlier deploy may have hit the start limit: this deploy starts afresh.
  systemctl reset-failed "$FRONT_UNIT" "$VLLM_UNIT" 2>/dev/null || true
  # restart = stop, remove the old container, create a new one from the runner just written.
  systemctl restart "$FRONT_UNIT" "$VLLM_UNIT" ||
    die "systemd could not start $FRONT_UNIT and $VLLM_UNIT; see sudo systemctl status $FRONT_UNIT $VLLM_UNIT"
  say "started $VLLM_UNIT and $FRONT_UNIT (both come back by themselves after a reboot); a cold start takes ~14 min (80% XLA compile), a warm one ~8"
}

read_log() {
  docker logs "$1" >"$WORK_DIR/log" 2>&1 || : >"$WORK_DIR/log"
}

report_milestones() {
  # The three lines the build log says to watch, each printed once.
  local line
  while IFS= read -r line; do
    if ! grep -qxF -- "$line" "$WORK_DIR/seen" 2>/dev/null; then
      printf '%s\n' "$line" >>"$WORK_DIR/seen"
      say "vllm: $line"
    fi
  done < <(grep -E "$MILESTONES" "$WORK_DIR/log" || true)
}

report_progress() {
  local latest
  latest="$(grep -E "$PROGRESS_LINES" "$WORK_DIR/log" | tail -n 1 || true)"
  say "waiting for vLLM /health: $(elapsed "$1") elapsed; ${latest:+latest: }${latest:-no compile progress in its log yet}" | cut -c 1-300
}

vllm_exited() {
  # Stop the unit's restarts: each would recompile for minutes and fail the same way. Stopping keeps the
  # exited container, so its log stays readable.
  systemctl stop "$VLLM_UNIT" 2>/dev/null || true
  local code
  code="$(docker inspect -f '{{.State.ExitCode}}' "$CONTAINER" 2>/dev/null || echo "none: no container was created")"
  printf '[tpu-vllm] vLLM exited (exit code %s) before /health answered; the last lines of its log:\n' "$code" >&2
  docker logs --tail 60 "$CONTAINER" >&2 2>&1 || journalctl -u "$VLLM_UNIT" -n 60 --no-pager >&2 2>&1 || true
  die "vllm exited before it became healthy; its unit is stopped (sudo journalctl -u $VLLM_UNIT, sudo systemctl start $VLLM_UNIT)"
}

wait_for_health() {
  local started=$SECONDS deadline=$((SECONDS + HEALTH_TIMEOUT)) next_progress=$SECONDS code
  while :; do
    code="$(curl -s -o /dev/null --max-time 5 -w '%{http_code}' "$VLLM_URL/health" 2>/dev/null)" || code="000"
    [[ "$code" == 200 ]] && { say "vLLM healthy after $(elapsed "$started")"; return 0; }
    systemctl is-active --quiet "$VLLM_UNIT" || vllm_exited
    read_log "$CONTAINER"
    report_milestones
    if ((SECONDS >= next_progress)); then
      report_progress "$started"
      next_progress=$((SECONDS + PROGRESS_EVERY))
    fi
    if ((SECONDS >= deadline)); then
      docker logs --tail 60 "$CONTAINER" >&2 2>&1 || true
      die "/health did not answer 200 within ${HEALTH_TIMEOUT}s (last: $code); the container is left running for you to inspect: sudo docker logs $CONTAINER"
    fi
    sleep "$POLL"
  done
}

wait_for_front() {
  local deadline=$((SECONDS + FRONT_TIMEOUT)) code
  while :; do
    code="$(curl -s -o /dev/null --max-time 5 -w '%{http_code}' "$FRONT_URL/health" 2>/dev/null)" || code="000"
    [[ "$code" == 200 ]] && { say "front answers on :$PORT"; return 0; }
    if ! systemctl is-active --quiet "$FRONT_UNIT"; then
      docker logs --tail 30 "$FRONT_CONTAINER" >&2 2>&1 || true
      die "the front ($FRONT_UNIT) is not running; see sudo journalctl -u $FRONT_UNIT"
    fi
    ((SECONDS >= deadline)) && die "the front on :$PORT answered $code for /health within ${FRONT_TIMEOUT}s while vLLM is healthy on :$UPSTREAM_PORT; see sudo docker logs $FRONT_CONTAINER"
    sleep "$POLL"
  done
}

# The checks through the front and at vLLM itself: the staged Python program (startup/smoke_test.py). It
# reads the key from its file; nothing secret is in its argv.
smoke_test() {
  python3 "$SMOKE_TEST" --front-url "$FRONT_URL" --vllm-url "$VLLM_URL" --model "$MODEL" \
    --api-key-file "$API_KEY_FILE" || die "the smoke test failed (above)"
}

# Called by the last line of the stack's stdin, after the files are staged.
main() {
  wait_for_startup
  install_and_start
  wait_for_health
  wait_for_front
  smoke_test
  say "ready: $MODEL on port $PORT (through the front; vLLM on 127.0.0.1:$UPSTREAM_PORT)"
}

# on_exit: removes the work directory; on a failure, prints the billing note last.
on_exit() {
  local status=$?
  rm -rf "$WORK_DIR"
  if ((status != 0)) && [[ -n "$FAILURE_NOTE" ]]; then printf '[tpu-vllm] %s\n' "$FAILURE_NOTE" >&2; fi
}

if [[ "${BASH_SOURCE[0]:-$0}" == "$0" ]]; then
  parse_args "$@"
  WORK_DIR="$(mktemp -d)"
  trap on_exit EXIT
fi
