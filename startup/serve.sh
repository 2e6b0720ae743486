#!/usr/bin/env bash
# tpu-vllm serving step, run by pulumi-command over SSH as `sudo bash -s -- ...`
# with this file on stdin. Its arguments carry no secret: the API key is read
# here from the root-only env file that startup.sh wrote.
#
#   serve.sh --status FILE --env-file FILE --container NAME --port N --model ID
#            [--status-timeout S] [--health-timeout S] [--poll S] -- DOCKER_RUN_ARGS...
#
# STARTUP_ROOT prefixes the files it reads or removes, so tests run it unprivileged.
set -euo pipefail
umask 077

ROOT="${STARTUP_ROOT:-}"
STATUS_TIMEOUT=900
HEALTH_TIMEOUT=1800
POLL=5
STATUS_FILE="" ENV_FILE="" CONTAINER="" PORT="" MODEL=""
while (($#)); do
  case "$1" in
    --status) STATUS_FILE="$ROOT$2"; shift 2 ;;
    --env-file) ENV_FILE="$ROOT$2"; shift 2 ;;
    --container) CONTAINER="$2"; shift 2 ;;
    --port) PORT="$2"; shift 2 ;;
    --model) MODEL="$2"; shift 2 ;;
    --status-timeout) STATUS_TIMEOUT="$2"; shift 2 ;;
    --health-timeout) HEALTH_TIMEOUT="$2"; shift 2 ;;
    --poll) POLL="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "serve.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
for required in STATUS_FILE:status ENV_FILE:env-file CONTAINER:container PORT:port MODEL:model; do
  variable="${required%%:*}"
  [[ -n "${!variable}" ]] || { echo "serve.sh: missing --${required#*:}" >&2; exit 2; }
done
(($#)) || { echo "serve.sh: no docker run arguments after --" >&2; exit 2; }
for timeout in "$STATUS_TIMEOUT" "$HEALTH_TIMEOUT" "$PORT"; do
  [[ "$timeout" =~ ^[0-9]+$ ]] || { echo "serve.sh: $timeout is not a whole number" >&2; exit 2; }
done

BASE_URL="http://127.0.0.1:$PORT"
WORK_DIR="$(mktemp -d)"
trap 'rm -rf "$WORK_DIR"' EXIT

say() { printf '[tpu-vllm] %s\n' "$*"; }
die() {
  printf '[tpu-vllm] FAILED: %s\n' "$*" >&2
  exit 1
}

wait_for_startup() {
  local deadline=$((SECONDS + STATUS_TIMEOUT)) next_note=$SECONDS status=""
  while :; do
    status="$(cat "$STATUS_FILE" 2>/dev/null || true)"
    case "$status" in
      ready) say "boot script finished: secrets and cache disk in place"; return 0 ;;
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

start_container() {
  # Replace, never restart: a new command must not inherit an old container's flags.
  docker rm -f "$CONTAINER" >/dev/null 2>&1 || true
  # A crashed run can leave libtpu's lock behind, and the next one then cannot open the chip.
  rm -f "$ROOT/tmp/libtpu_lockfile"
  docker run "$@" >/dev/null
  say "container $CONTAINER started; a cold start takes ~14 min (80% XLA compile), a warm one ~8"
}

container_running() {
  [[ "$(docker inspect -f '{{.State.Running}}' "$CONTAINER" 2>/dev/null || echo false)" == "true" ]]
}

report_progress() {
  # The three lines the build log says to watch, each printed once.
  local line
  while IFS= read -r line; do
    if ! grep -qxF -- "$line" "$WORK_DIR/seen" 2>/dev/null; then
      printf '%s\n' "$line" >>"$WORK_DIR/seen"
      say "vllm: $line"
    fi
  done < <(docker logs "$CONTAINER" 2>&1 | grep -E 'Memory statistics|Init kv-cache|startup complete' || true)
}

wait_for_health() {
  local started=$SECONDS deadline=$((SECONDS + HEALTH_TIMEOUT)) code
  while :; do
    code="$(curl -s -o /dev/null --max-time 5 -w '%{http_code}' "$BASE_URL/health" 2>/dev/null)" || code="000"
    [[ "$code" == 200 ]] && { say "healthy after $((SECONDS - started))s"; return 0; }
    if ! container_running; then
      printf '[tpu-vllm] the container exited; last lines of its log:\n' >&2
      docker logs --tail 60 "$CONTAINER" >&2 2>&1 || true
      die "vllm exited before it became healthy"
    fi
    report_progress
    if ((SECONDS >= deadline)); then
      docker logs --tail 60 "$CONTAINER" >&2 2>&1 || true
      die "/health did not answer 200 within ${HEALTH_TIMEOUT}s (last: $code); the container is left running for you to inspect: sudo docker logs $CONTAINER"
    fi
    sleep "$POLL"
  done
}

write_auth_config() {
  # The key goes from the env file into a curl config file: never argv, never stdout.
  local name value key=""
  while IFS='=' read -r name value; do
    [[ "$name" == VLLM_API_KEY ]] && key="$value"
  done <"$ENV_FILE"
  [[ -n "$key" ]] || die "no VLLM_API_KEY in $ENV_FILE"
  printf 'header = "Authorization: Bearer %s"\n' "$key" >"$WORK_DIR/auth.curlrc"
}

# api METHOD PATH [BODY_FILE] -> response body in $WORK_DIR/response, status in API_CODE
api() {
  local -a extra=()
  [[ -n "${3:-}" ]] && extra=(-H 'Content-Type: application/json' --data-binary "@$3")
  API_CODE="$(curl -s --max-time 300 -K "$WORK_DIR/auth.curlrc" -X "$1" -o "$WORK_DIR/response" \
    -w '%{http_code}' "${extra[@]}" "$BASE_URL$2")" || API_CODE="000"
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
  local anonymous
  anonymous="$(curl -s -o /dev/null --max-time 30 -w '%{http_code}' "$BASE_URL/v1/models")" || anonymous="000"
  [[ "$anonymous" == 401 ]] || die "/v1/models answered $anonymous without the API key; expected 401 (is VLLM_API_KEY set?)"

  api GET /v1/models
  [[ "$API_CODE" == 200 ]] || die "/v1/models answered $API_CODE with the API key"
  [[ "$(json_field '[m["id"] for m in r["data"]]')" == *"'$MODEL'"* ]] || die "/v1/models does not list $MODEL"

  # Chat, never /v1/completions: raw completions return "" on -it models.
  MODEL="$MODEL" python3 -c 'import json, os
print(json.dumps({"model": os.environ["MODEL"], "max_tokens": 64,
  "messages": [{"role": "user", "content": "Say hi in five words."}]}))' >"$WORK_DIR/chat.json"
  api POST /v1/chat/completions "$WORK_DIR/chat.json"
  [[ "$API_CODE" == 200 ]] || die "chat completion answered $API_CODE: $(head -c 300 "$WORK_DIR/response")"
  local reply
  reply="$(json_field 'r["choices"][0]["message"].get("content") or r["choices"][0]["message"].get("reasoning_content")')"
  [[ -n "$reply" ]] || die "chat completion came back empty"
  say "chat ok: ${reply:0:80}"

  MODEL="$MODEL" python3 -c 'import json, os
print(json.dumps({"model": os.environ["MODEL"], "max_tokens": 256, "tool_choice": "auto",
  "messages": [{"role": "user", "content": "What is the weather in Paris? Use the tool."}],
  "tools": [{"type": "function", "function": {"name": "get_weather",
    "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]}))' >"$WORK_DIR/tool.json"
  api POST /v1/chat/completions "$WORK_DIR/tool.json"
  [[ "$API_CODE" == 200 ]] || die "tool-call request answered $API_CODE: $(head -c 300 "$WORK_DIR/response")"
  local tool
  tool="$(json_field 'r["choices"][0]["message"]["tool_calls"][0]["function"]["name"]')"
  [[ "$tool" == get_weather ]] || die "no get_weather tool call came back (got: $(head -c 300 "$WORK_DIR/response"))"
  say "tool call ok: $tool($(json_field 'r["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]'))"
}

wait_for_startup
start_container "$@"
wait_for_health
smoke_test
say "ready: $MODEL on port $PORT"
