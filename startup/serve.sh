#!/usr/bin/env bash
# tpu-vllm serving step, run by pulumi-command over SSH as `sudo bash -s -- ...`.
#
# Its stdin is this file, then one `stage_file PATH <<'TPU_VLLM_FILE' ... TPU_VLLM_FILE` per file the
# stack rendered (the front's nginx.conf and runner, the two systemd units), then `main`. Nothing it
# receives is a secret: the API key is read here from the root-only file startup.sh wrote, and only into
# a curl config file.
#
#   serve.sh --status FILE --api-key-file FILE --model ID --port N --upstream-port N
#            --container NAME --front-container NAME --runner FILE --vllm-unit NAME --front-unit NAME
#            [--tpu-devices] [--status-timeout S] [--health-timeout S] [--front-timeout S] [--poll S]
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
RUNNER="" VLLM_UNIT="" FRONT_UNIT=""
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
for required in STATUS_FILE:status API_KEY_FILE:api-key-file MODEL:model PORT:port UPSTREAM_PORT:upstream-port \
  CONTAINER:container FRONT_CONTAINER:front-container RUNNER:runner VLLM_UNIT:vllm-unit FRONT_UNIT:front-unit; do
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
# Lines of vLLM's log that show where a boot is: tpu-inference's precompile steps, then the milestones.
PROGRESS_LINES='Precompile|[Cc]ompil|[Ww]arm-?up|Loading weights|Memory statistics|Init kv-cache|startup complete'
MILESTONES='Memory statistics|Init kv-cache|startup complete'
WORK_DIR="$(mktemp -d)"
# Set by the stack after the staged files (components/vm/vllm_server.py): printed last on any failure, so
# pulumi-command's error, which ends with this script's output, says the TPU bills and how to stop it.
FAILURE_NOTE=""
on_exit() {
  local status=$?
  rm -rf "$WORK_DIR"
  if ((status != 0)) && [[ -n "$FAILURE_NOTE" ]]; then printf '[tpu-vllm] %s\n' "$FAILURE_NOTE" >&2; fi
}
trap on_exit EXIT
STAGED_PATHS=()

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

wait_for_startup() {
  local deadline=$((SECONDS + STATUS_TIMEOUT)) next_note=$SECONDS status=""
  while :; do
    status="$(cat "$STATUS_FILE" 2>/dev/null || true)"
    case "$status" in
      ready) say "boot script finished: secret files and cache disk in place"; return 0 ;;
      failed:*) die "the boot script $status (full log: sudo journalctl -u google-startup-scripts)" ;;
    esac
    ((SECONDS >= deadline)) && die "the boot script did not finish in ${STATUS_TIMEOUT}s (status: ${status:-none}); see sudo journalctl -u google-startup-scripts"
    if ((SECONDS >= next_note)); then
      say "waiting for the boot script (${status:-not started})"
      next_note=$((SECONDS + 30))
    fi
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

write_auth_config() {
  # The key goes from its file into a curl config file: never argv, never stdout.
  local key
  key="$(cat "$API_KEY_FILE" 2>/dev/null)" || die "cannot read the API key file $API_KEY_FILE"
  [[ -n "$key" ]] || die "the API key file $API_KEY_FILE is empty"
  printf 'header = "Authorization: Bearer %s"\n' "$key" >"$WORK_DIR/auth.curlrc"
}

# api METHOD URL [BODY_FILE] -> response body in $WORK_DIR/response, status in API_CODE (with the key)
api() {
  local -a extra=()
  [[ -n "${3:-}" ]] && extra=(-H 'Content-Type: application/json' --data-binary "@$3")
  API_CODE="$(curl -s --max-time 300 -K "$WORK_DIR/auth.curlrc" -X "$1" -o "$WORK_DIR/response" \
    -w '%{http_code}' "${extra[@]}" "$2")" || API_CODE="000"
}

# expect_refused METHOD URL WHAT: without the key, the answer must be 401.
expect_refused() {
  local code
  code="$(curl -s -o /dev/null --max-time 30 -X "$1" -H 'Content-Type: application/json' --data-binary '{}' \
    -w '%{http_code}' "$2")" || code="000"
  [[ "$code" == 401 ]] || die "$3 answered $code without the API key; expected 401"
}

json_field() {
  # json_field PYTHON_EXPR: evaluates against the last response as `r`.
  python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
value = eval(sys.argv[2], {"r": r})
print(value if value is not None else "")' "$WORK_DIR/response" "$1" 2>/dev/null || true
}

smoke_test() {
  write_auth_config
  # vLLM's --api-key guards only /v1, /v2 and /inference: the front must refuse the rest, /invocations
  # (which chats) first of all; and vLLM itself must have the key (its entry command read the file).
  expect_refused POST "$FRONT_URL/invocations" "the front's /invocations"
  expect_refused GET "$FRONT_URL/v1/models" "the front's /v1/models"
  expect_refused GET "$VLLM_URL/v1/models" "vLLM's own /v1/models on 127.0.0.1:$UPSTREAM_PORT (is VLLM_API_KEY set?)"
  say "refused without the key: /invocations and /v1/models at the front, /v1/models at vLLM itself"

  api GET "$FRONT_URL/v1/models"
  [[ "$API_CODE" == 200 ]] || die "/v1/models answered $API_CODE with the API key"
  [[ "$(json_field '[m["id"] for m in r["data"]]')" == *"'$MODEL'"* ]] || die "/v1/models does not list $MODEL"

  # Chat, never /v1/completions: raw completions return "" on -it models.
  MODEL="$MODEL" python3 -c 'import json, os
print(json.dumps({"model": os.environ["MODEL"], "max_tokens": 64,
  "messages": [{"role": "user", "content": "Say hi in five words."}]}))' >"$WORK_DIR/chat.json"
  api POST "$FRONT_URL/v1/chat/completions" "$WORK_DIR/chat.json"
  [[ "$API_CODE" == 200 ]] || die "chat completion answered $API_CODE: $(head -c 300 "$WORK_DIR/response")"
  local reply
  # A reasoning model may spend the smoke test's tokens thinking: vLLM puts that in `reasoning` (older
  # releases: `reasoning_content`), which still proves the chat path works.
  reply="$(json_field 'next((m.get(k) for m in [r["choices"][0]["message"]] for k in ("content", "reasoning", "reasoning_content") if m.get(k)), None)')"
  [[ -n "$reply" ]] || die "chat completion came back empty"
  say "chat ok: ${reply:0:80}"

  MODEL="$MODEL" python3 -c 'import json, os
print(json.dumps({"model": os.environ["MODEL"], "max_tokens": 256, "tool_choice": "auto",
  "messages": [{"role": "user", "content": "What is the weather in Paris? Use the tool."}],
  "tools": [{"type": "function", "function": {"name": "get_weather",
    "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]}))' >"$WORK_DIR/tool.json"
  api POST "$FRONT_URL/v1/chat/completions" "$WORK_DIR/tool.json"
  [[ "$API_CODE" == 200 ]] || die "tool-call request answered $API_CODE: $(head -c 300 "$WORK_DIR/response")"
  local tool
  tool="$(json_field 'r["choices"][0]["message"]["tool_calls"][0]["function"]["name"]')"
  [[ "$tool" == get_weather ]] || die "no get_weather tool call came back (got: $(head -c 300 "$WORK_DIR/response"))"
  say "tool call ok: $tool($(json_field 'r["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]'))"
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
