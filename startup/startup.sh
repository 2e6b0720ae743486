#!/usr/bin/env bash
# tpu-vllm boot script: the node's startup-script metadata, run as root at every boot.
#
# Static on purpose: no templating and no secret inside, because instance
# metadata is readable from the instance. It reads the non-secret settings from
# metadata attributes, fetches the secrets itself with the VM's own identity,
# writes each to its own root-only file (mounted read-only into the containers),
# mounts the compile-cache disk (formatting it only if it is blank everywhere a
# filesystem keeps a signature), starts pulling the image, and writes a status
# file that the deploy and the containers' units wait on: `ready`, or
# `failed: <what> (line N)` for any exit, expected or not, a stop included;
# kept under /run and stamped with this boot's id, so no boot inherits another's.
#
# One run at a time, and a stop always ends in a status. The guest agent's unit
# (google-startup-scripts.service) is Type=oneshot with KillMode=process: a stop
# signals only the unit's main process, and the runner that started this script
# forwards nothing. So a run holds a lock for its life (a second run waits for it,
# then runs alone), and a watcher stops the run when a process that started it
# is gone, or writes the status itself when the run was killed outright.
#
# Test hooks (the variables Google's own clients honour, plus a path prefix):
#   GCE_METADATA_HOST                              metadata server host[:port]
#   CLOUDSDK_API_ENDPOINT_OVERRIDES_SECRETMANAGER  Secret Manager root URL
#   STARTUP_ROOT                                   prefix for every path read or written
#   STARTUP_LOCK_WAIT_SECONDS, STARTUP_WATCH_SECONDS  how long a second run waits, how often the watcher looks
#
# Executed, it runs `main`; sourced (tests), it only defines its functions and settings.
set -Eeuo pipefail
umask 077

ROOT="${STARTUP_ROOT:-}"
METADATA_URL="http://${GCE_METADATA_HOST:-metadata.google.internal}/computeMetadata/v1"
SECRETMANAGER_URL="${CLOUDSDK_API_ENDPOINT_OVERRIDES_SECRETMANAGER:-https://secretmanager.googleapis.com/}"
SECRETMANAGER_URL="${SECRETMANAGER_URL%/}/v1"
SECRETS_DIR="$ROOT/etc/tpu-vllm/secrets"
LEGACY_ENV_FILE="$ROOT/etc/tpu-vllm/env"
# Under /run (a tmpfs, empty at every boot) and stamped with this boot's id: a status can never outlive
# the boot that wrote it, so a boot whose script dies early (or never runs) cannot look ready.
STATUS_DIR="$ROOT/run/tpu-vllm"
STATUS_FILE="$STATUS_DIR/startup-status"
# Where earlier versions kept it (it survived reboots); removed so nothing reads a stale `ready`.
LEGACY_STATUS_FILE="$ROOT/var/lib/tpu-vllm/startup-status"
BOOT_ID_FILE="$ROOT/proc/sys/kernel/random/boot_id"
# Held (flock) by the run that owns the status; it says which pid that is.
LOCK_FILE="$STATUS_DIR/startup.lock"
# A restart of the unit stops the old run at once (run_step), but a mkfs.ext4 is let finish, so no disk is left
# half formatted; the new run waits that long, and more, before it gives up.
LOCK_WAIT_SECONDS="${STARTUP_LOCK_WAIT_SECONDS:-600}"
WATCH_SECONDS="${STARTUP_WATCH_SECONDS:-1}"
RERUN="rerun with: sudo systemctl restart google-startup-scripts"
ATTEMPTS="${STARTUP_ATTEMPTS:-8}"
BACKOFF_SECONDS="${STARTUP_BACKOFF_SECONDS:-2}"
# Blank-disk check: how much of each place a filesystem or partition table keeps its signature is read.
BLANK_START_BYTES=$((4 << 20))
BLANK_END_BYTES=$((1 << 20))
BLANK_BACKUP_BYTES=4096
# Google's repository script for the Ops Agent (cloud.google.com/stackdriver/docs/solutions/agents/ops-agent/
# installation: `add-google-cloud-ops-agent-repo.sh --also-install`).
OPS_AGENT_REPO_SCRIPT_URL="https://dl.google.com/cloudagents/add-google-cloud-ops-agent-repo.sh"
OPS_AGENT_CONFIG="$ROOT/etc/google-cloud-ops-agent/config.yaml"
# What the script is doing, for the status line of an unexpected failure.
STEP="starting"
BOOT_ID=""
WORK_DIR=""
PAUSE_PID=""
# The step run_step is waiting on (its process group's id), and whether a stop lets it finish; the image pull's.
STEP_PID=""
STEP_FINISHES=""
PULL_PID=""
LOCK_FD=""
LOCK_HELD=""
WATCHER_PID=""
MAIN_PID="$$"
# The processes that started this run (record_ancestors): pid, start time, name.
ANCESTOR_PIDS=()
ANCESTOR_STARTS=()
ANCESTOR_NAMES=()

# A log line that cannot be written (its reader, the runner, is gone) is not the step failing: the PIPE trap
# reports the stop instead.
say() { printf 'tpu-vllm-startup: %s\n' "$*" >&2 || true; }

# write_status STATE: STATE, then `boot <id>` (the boot-ready check and serve.sh compare it with theirs).
# Only the run that holds the lock writes: a second run never overwrites the first's status.
write_status() {
  [[ -n "$LOCK_HELD" ]] || return 0
  mkdir -p "$STATUS_DIR"
  printf '%s\nboot %s\n' "$1" "$BOOT_ID" >"$STATUS_FILE.tmp"
  chmod 0644 "$STATUS_FILE.tmp"
  mv -f "$STATUS_FILE.tmp" "$STATUS_FILE"
}

already_failed() { [[ "$(head -n 1 "$STATUS_FILE" 2>/dev/null || true)" == failed:* ]]; }

die() {
  say "FAILED: $*"
  # The first failure is the precise one; a caller that sees it fail must not overwrite it.
  already_failed || write_status "failed: $*"
  exit 1
}

# Any command that fails where `set -e` would stop the script lands here, so the deploy never waits
# 15 minutes on a status that still says `running`. The command text is the script's own source
# (unexpanded), so it carries no secret.
on_error() {
  local code="$1" line="$2" command="$3" source_line
  # A child killed by the same stop (a signal to the whole group) fails with 128+15, one writing to the log of a
  # runner that is gone with 128+13: report the stop. So does a command that ended after the watcher asked.
  ((code != 143)) || on_signal TERM
  ((code != 141)) || on_signal PIPE
  [[ -z "$WORK_DIR" || ! -s "$WORK_DIR/stop-reason" ]] || on_signal TERM
  trap - ERR
  # A step run_step ran failed: bash names run_step's return, so the caller's own line (the script's source,
  # unexpanded) names the command.
  # shellcheck disable=SC2016 # run_step's return statement, as bash shows it: not to be expanded
  if [[ "$command" == 'return "$step_code"' ]] &&
    mapfile -t -s $((line - 1)) -n 1 source_line <"${BASH_SOURCE[0]}" 2>/dev/null && ((${#source_line[@]})); then
    command="${source_line[0]#"${source_line[0]%%[![:space:]]*}"}"
    command="${command#run_step }"
    command="${command#--let-finish }"
  fi
  command="${command%%$'\n'*}"
  already_failed || write_status "failed: $STEP: \`${command:0:160}\` exited $code (line $line)"
  say "FAILED: $STEP: \`${command:0:160}\` exited $code (line $line)"
  exit "$code"
}

# A stop: SIGTERM from the watcher (a process that started the run is gone), from systemd or by hand, SIGHUP
# or Ctrl-C, or SIGPIPE (the runner that read the log is gone). The deploy must see `failed:` at once, not wait
# its whole timeout on `running`. Further signals are ignored while the status is written, and a log line
# that cannot be written fails quietly.
on_signal() {
  trap '' TERM INT HUP PIPE
  trap - ERR
  [[ -z "$PAUSE_PID" ]] || kill "$PAUSE_PID" 2>/dev/null || true
  # The step's processes end with the run (all of its group: a curl, a blkid, a function's pipeline), and so does
  # an image pull a run that never got to `ready` started; a --let-finish step goes on (run_step).
  [[ -z "$STEP_PID" || -n "$STEP_FINISHES" ]] || kill -TERM -- "-$STEP_PID" 2>/dev/null || true
  [[ -z "$PULL_PID" ]] || kill -TERM -- "-$PULL_PID" 2>/dev/null || true
  local why="stopped by SIG$1 (a systemd stop or timeout?)"
  [[ "$1" != PIPE ]] || why="stopped by SIGPIPE: the runner that read its log is gone"
  if [[ -n "$WORK_DIR" && -s "$WORK_DIR/stop-reason" ]]; then
    why="stopped: $(<"$WORK_DIR/stop-reason")"
  fi
  already_failed || write_status "failed: $STEP: $why; $RERUN"
  say "FAILED: $STEP: $why"
  exit 143
}

cleanup() {
  # The watcher has nothing left to do once the script itself ends (it only acts while the script lives, or
  # after it was killed outright, when this never runs).
  # Reaped here, so bash (job control was on for run_step's `&`) reports nothing of its end.
  [[ -z "$WATCHER_PID" ]] || { kill -KILL "$WATCHER_PID" && wait "$WATCHER_PID"; } 2>/dev/null || true
  [[ -z "$WORK_DIR" ]] || rm -rf "$WORK_DIR"
}

# proc_stat PID: sets PROC_NAME, PROC_STATE, PROC_PPID, PROC_SESSION and PROC_START from /proc/PID/stat
# (proc(5): fields 2, 3, 4, 6 and 22; the fields after the name are counted from its last `)`, since a name may
# hold spaces); fails when there is no such process. Builtins only: the watcher calls it every second.
proc_stat() {
  local line
  local -a fields
  { read -r line <"/proc/$1/stat"; } 2>/dev/null || return 1
  read -r -a fields <<<"${line##*) }"
  PROC_NAME="${line#*(}" PROC_NAME="${PROC_NAME%)*}"
  PROC_STATE="${fields[0]}" PROC_PPID="${fields[1]}" PROC_SESSION="${fields[3]}" PROC_START="${fields[19]}"
}

# record_ancestors: the processes that started this run, within its own session: the script runner
# (google_metadata_script_runner, which runs the script with exec.Command: same session, same process group)
# and whatever started the runner up to the session's leader, which systemd makes of a unit's main process
# (the runner itself, or since guest-agent 20250324.00 a shell that runs it). Kept with their start times, so
# a pid used again is not taken for the one that is gone. A run that leads its own session (setsid) follows
# nothing. A parent already gone is recorded as one that can never be found.
record_ancestors() {
  local pid="$PPID" session
  proc_stat "$MAIN_PID" || return 0
  session="$PROC_SESSION"
  ((session != MAIN_PID)) || return 0
  if ! proc_stat "$pid"; then
    ANCESTOR_PIDS+=("$pid") ANCESTOR_STARTS+=("gone") ANCESTOR_NAMES+=("its parent")
    return 0
  fi
  while ((pid > 1)) && proc_stat "$pid" && ((PROC_SESSION == session)); do
    ANCESTOR_PIDS+=("$pid") ANCESTOR_STARTS+=("$PROC_START") ANCESTOR_NAMES+=("$PROC_NAME")
    ((pid != session)) || break
    pid="$PROC_PPID"
  done
}

# alive PID START: the process is there, not a zombie, and started when it was recorded.
alive() { proc_stat "$1" && [[ "$PROC_STATE" != Z && "$PROC_START" == "$2" ]]; }

# watch_run: in the background for the run's life, holding its lock. When a process that started the run is gone
# (the unit stopped, or the runner killed), it asks the script to stop (SIGTERM: its trap writes the status at
# once, since the step then running is waited on in the background: run_step); when the script itself is gone
# without a last status (SIGKILL), it writes one. Until then no second run can start. It writes nothing to the runner's pipe, which the runner reads to
# its end before it exits.
watch_run() {
  trap '' TERM INT HUP PIPE
  trap - ERR EXIT
  set +eE
  exec </dev/null >/dev/null 2>&1
  local main_start index asked="" idle state="" stamp=""
  proc_stat "$MAIN_PID" || exit 0
  main_start="$PROC_START"
  exec {idle}<> <(:)  # a pipe nobody writes to: `read -t` on it is a sleep without a process
  while alive "$MAIN_PID" "$main_start"; do
    for ((index = 0; index < ${#ANCESTOR_PIDS[@]} && !asked; index++)); do
      alive "${ANCESTOR_PIDS[index]}" "${ANCESTOR_STARTS[index]}" && continue
      printf '%s (pid %s), which started it, is gone: its unit was stopped or its runner killed\n' \
        "${ANCESTOR_NAMES[index]}" "${ANCESTOR_PIDS[index]}" >"$WORK_DIR/stop-reason"
      kill -TERM "$MAIN_PID"
      asked=1
    done
    read -r -t "$WATCH_SECONDS" -u "$idle"
  done
  { read -r state && read -r stamp; } <"$STATUS_FILE" 2>/dev/null
  if [[ "$state" == running && "$stamp" == "boot $BOOT_ID" ]]; then
    write_status "failed: stopped: the boot script (pid $MAIN_PID) was killed before it could write its status (SIGKILL?); $RERUN"
  fi
}

# take_lock: one run at a time. A second run (the unit restarted while a run it no longer tracks goes on, or the
# runner started by hand) waits for the first to end, then runs alone; it never writes the status or touches
# the disk beside it. flock(1) locks the open file, so the lock lasts while any process holding it lives: the
# script, its watcher, the command it runs (closed for what it leaves running in the background).
take_lock() {
  local holder=""
  mkdir -p "$STATUS_DIR"
  exec {LOCK_FD}<>"$LOCK_FILE"
  if ! flock -n "$LOCK_FD"; then
    read -r holder <"$LOCK_FILE" || true
    say "another run of the boot script (${holder:-pid unknown}) is still going: waiting up to ${LOCK_WAIT_SECONDS}s for it to end"
    # flock(1) locks the open file this shell shares with it, so the lock stays the script's when flock exits.
    if ! run_step flock -w "$LOCK_WAIT_SECONDS" "$LOCK_FD"; then
      holder="${holder#pid }"
      say "FAILED: another run of the boot script (pid ${holder:-unknown}) still holds ${LOCK_FILE#"$ROOT"} after ${LOCK_WAIT_SECONDS}s; not running beside it (its status is its own). Wait for it to end, or stop it (sudo kill ${holder:-PID}, the pid in that file), then $RERUN"
      exit 75
    fi
  fi
  LOCK_HELD=1
  printf 'pid %s\n' "$MAIN_PID" >"$LOCK_FILE"
}

# run_step [--let-finish] COMMAND...: COMMAND (a program, or a function of this script) in the background, in a
# process group of its own (job control on for the one `&`), waited on; its exit code is COMMAND's. Bash runs a
# trap only when the foreground command ends ("If Bash is waiting for a command to complete and receives a signal
# for which a trap has been set, the trap will not be executed until the command completes", the bash manual,
# Signals), and `wait` ends at once at a trapped signal: so a stop lands within a moment whatever COMMAND is doing,
# and ends COMMAND's whole group (on_signal). A --let-finish COMMAND (mkfs.ext4: a disk left half formatted is one
# the next boot's blank check refuses) goes on after the stop, holding the run's lock, so the restart the status
# advises waits for it. A function runs in a subshell: what it sets stays there (it prints, the caller reads).
run_step() {
  local step_code=0 finish=""
  [[ "$1" != --let-finish ]] || { finish=1; shift; }
  set -m
  { trap - ERR; "$@"; } &
  STEP_PID=$!
  set +m
  STEP_FINISHES="$finish"
  wait "$STEP_PID" || step_code=$?
  STEP_PID=""
  return "$step_code"
}

# A sleep the traps can interrupt: bash runs a trap only between commands, and `wait` is one. The sleep does
# not hold the lock.
pause() {
  sleep "$1" {LOCK_FD}>&- &
  PAUSE_PID=$!
  wait "$PAUSE_PID"
  PAUSE_PID=""
}

# The first thing main does, so nothing can fail before a trap is set: the traps, what started this run, the
# lock, this boot's id, the first status write, the scratch directory, then the watcher.
start_boot() {
  trap 'on_error "$?" "$LINENO" "$BASH_COMMAND"' ERR
  trap 'on_signal TERM' TERM
  trap 'on_signal INT' INT
  trap 'on_signal HUP' HUP
  trap 'on_signal PIPE' PIPE
  trap cleanup EXIT
  record_ancestors
  STEP="waiting for any other run of the boot script"
  take_lock
  STEP="reading this boot's id"
  BOOT_ID="$(cat "$BOOT_ID_FILE")"
  [[ "$BOOT_ID" =~ ^[0-9a-f-]+$ ]] || die "this boot's id ($BOOT_ID_FILE) is empty or malformed"
  write_status "running"
  rm -f "$LEGACY_STATUS_FILE"
  STEP="starting"
  WORK_DIR="$(mktemp -d)"
  watch_run &
  WATCHER_PID=$!
}

# http_get URL OUT [HEADER_FILE [WHAT]] -> sets HTTP_CODE, and HTTP_TRIES (how many requests it made); retries
# connection errors, 429 and 5xx. Headers come from a file so no credential is ever on a command line. WHAT
# names the request in the log instead of its URL (a secret's URL carries its name, which may be private).
http_get() {
  local url="$1" out="$2" header_file="${3:-}" attempt=1 delay="$BACKOFF_SECONDS"
  local what="${4:-GET ${url%%\?*}}"
  local -a headers=(-H 'Metadata-Flavor: Google')
  [[ -n "$header_file" ]] && headers=(-H "@$header_file")
  while :; do
    HTTP_CODE=""
    # -w writes the code without a newline: read sets it, and fails at the end of the file.
    if run_step curl -sS --max-time 30 -o "$out" -w '%{http_code}' "${headers[@]}" "$url" >"$WORK_DIR/http-code" \
      2>/dev/null; then
      read -r HTTP_CODE <"$WORK_DIR/http-code" || true
    fi
    [[ "$HTTP_CODE" =~ ^[0-9]{3}$ ]] || HTTP_CODE="000"
    case "$HTTP_CODE" in
      000 | 429 | 5??) ;;
      *) break ;;
    esac
    if ((attempt >= ATTEMPTS)); then
      break
    fi
    say "$what: ${HTTP_CODE/#000/no answer}; retry $attempt/$ATTEMPTS in ${delay}s"
    pause "$delay"
    attempt=$((attempt + 1))
    delay=$((delay * 2))
  done
  HTTP_TRIES=$attempt
}

# tries_note -> " after N attempts" when the last http_get retried, " (not retried)" otherwise: a failure
# must not claim retries that were never made.
tries_note() {
  if ((HTTP_TRIES > 1)); then printf ' after %s attempts' "$HTTP_TRIES"; else printf ' (not retried)'; fi
}

# metadata_value PATH VAR -> sets VAR to the value, or to nothing when the server has no such entry. It sets a
# variable instead of printing: in a command substitution its retries would pause in a subshell, which holds the
# script (and the stop the watcher asks for) until every retry is done.
metadata_value() {
  local out="$WORK_DIR/metadata-value"
  http_get "$METADATA_URL/$1" "$out"
  case "$HTTP_CODE" in
    200) printf -v "$2" '%s' "$(<"$out")" ;;
    404) printf -v "$2" '%s' "" ;;
    *) die "metadata server answered ${HTTP_CODE/#000/nothing} for $1$(tries_note)" ;;
  esac
}

metadata_attribute() { metadata_value "instance/attributes/$1" "$2"; }

fetch_access_token() {
  local out="$WORK_DIR/token.json"
  http_get "$METADATA_URL/instance/service-accounts/default/token" "$out"
  [[ "$HTTP_CODE" == 200 ]] || die "no access token from the metadata server (HTTP $HTTP_CODE); the node needs a service account with the cloud-platform scope"
  # The token goes from JSON to a header file without touching argv or stdout; a reply that is not the
  # expected JSON says so (its text is not printed: it could hold the token).
  python3 -c 'import json, sys
token = json.load(sys.stdin)["access_token"]
if not isinstance(token, str) or not token or "\n" in token:
    raise ValueError("bad token")
sys.stdout.write("Authorization: Bearer " + token + "\n")' <"$out" >"$WORK_DIR/auth-header" 2>/dev/null ||
    die "the metadata server's token reply (HTTP 200) is not JSON with an access_token; is something intercepting metadata.google.internal?"
  rm -f "$out"
}

# not_enabled_version ERROR_JSON -> "N STATE" when Secret Manager's 400 says the latest version (N) is DISABLED
# or DESTROYED; fails otherwise. Only those two tokens are printed, never the body.
not_enabled_version() {
  python3 -c 'import json, re, sys
error = json.load(sys.stdin)["error"]
match = re.fullmatch(r"Secret Version \[projects/[^/]+/secrets/[^/]+/versions/([0-9]+)\] is in (DISABLED|DESTROYED) state\.",
                     error["message"])
if error.get("status") != "FAILED_PRECONDITION" or not match:
    sys.exit(1)
print(match.group(1), match.group(2))' <"$1" 2>/dev/null
}

# fetch_secret FILE_NAME SECRET_RESOURCE WHAT WHICH -> the value, alone, in $WORK_DIR/secrets/FILE_NAME.
# Its log lines and status say WHAT ("the HF token secret") and WHICH setting names it, never the resource:
# a secret's id may itself be private (tpu-vllm:hfTokenSecret set with --secret), and the status reaches the CLI.
fetch_secret() {
  local name="$1" secret="$2" what="$3" which="$4" out="$WORK_DIR/secret.json" version state add
  add="add a new version: printf '%s' \"\$VALUE\" | gcloud secrets versions add SECRET_ID --data-file=- (SECRET_ID: $which)"
  http_get "$SECRETMANAGER_URL/$secret/versions/latest:access" "$out" "$WORK_DIR/auth-header" "reading $what"
  case "$HTTP_CODE" in
    200) ;;
    403) die "permission denied reading $what: grant roles/secretmanager.secretAccessor on it to the VM's service account ($SERVICE_ACCOUNT); pulumi up makes that grant" ;;
    404) die "$what has no version (or does not exist): $add" ;;
    400)
      # `latest` is the newest version whatever its state; the boot reads nothing older.
      read -r version state < <(not_enabled_version "$out") ||
        die "Secret Manager refused to read $what (HTTP 400, not retried)"
      if [[ "$state" == DISABLED ]]; then
        die "the latest version ($version) of $what is DISABLED: enable it: gcloud secrets versions enable $version --secret=SECRET_ID; or $add"
      fi
      die "the latest version ($version) of $what is DESTROYED; its value is gone: $add"
      ;;
    *) die "Secret Manager answered ${HTTP_CODE/#000/nothing} for $what$(tries_note)" ;;
  esac
  mkdir -p "$WORK_DIR/secrets"
  python3 -c 'import base64, json, sys
value = base64.b64decode(json.load(sys.stdin)["payload"]["data"]).decode("utf-8").strip()
if not value or "\n" in value:
    sys.exit("the secret must be a single non-empty line")
sys.stdout.write(value + "\n")' <"$out" >"$WORK_DIR/secrets/$name" 2>/dev/null ||
    die "$what does not hold a single-line value"
  rm -f "$out"
  say "read $what"
}

install_secrets() {
  mkdir -p "$SECRETS_DIR"
  chmod 0700 "$ROOT/etc/tpu-vllm" "$SECRETS_DIR"
  local name
  for name in hf-token api-key; do
    # Replace, never rewrite in place: a container started earlier keeps the file it mounted.
    install -m 0600 "$WORK_DIR/secrets/$name" "$SECRETS_DIR/$name.tmp"
    mv -f "$SECRETS_DIR/$name.tmp" "$SECRETS_DIR/$name"
  done
  # Earlier versions kept both secrets in one env file for `docker run --env-file`.
  rm -f "$LEGACY_ENV_FILE"
}

# A mount point the stack would never send (settings refuse it) is refused here too: metadata can be
# edited by hand, and a disk mounted on /usr or /var would hide the system.
check_mount_point() {
  local mount_point="$1" first
  [[ "$mount_point" =~ ^(/[A-Za-z0-9._-]+)+$ && "/$mount_point/" != */./* && "/$mount_point/" != */../* ]] ||
    die "cache mount point '$mount_point' is not a plain absolute path (e.g. /mnt/tpu-vllm-cache)"
  first="${mount_point#/}"
  first="/${first%%/*}"
  case "$first" in
    /etc | /usr | /var | /root | /home | /boot | /bin | /sbin | /lib | /lib32 | /lib64 | /libx32 | /opt | \
      /proc | /sys | /dev | /run | /tmp | /snap)
      die "cache mount point $mount_point is a system directory; use a path under /mnt" ;;
  esac
}

# probe_disk DEVICE -> sets DISK_TYPE (filesystem type), DISK_PTTYPE (partition table), DISK_UUID,
# and returns blkid's exit code: 0 found something, 2 found nothing, anything else is a probe error.
probe_disk() {
  local device="$1" code=0 key value
  DISK_TYPE="" DISK_PTTYPE="" DISK_UUID=""
  # -p probes the device itself (no cache): a stale cache must never make a used disk look blank.
  run_step blkid -p -o export "$device" >"$WORK_DIR/blkid" 2>"$WORK_DIR/blkid.err" || code=$?
  while IFS='=' read -r key value; do
    case "$key" in
      TYPE) DISK_TYPE="$value" ;;
      PTTYPE) DISK_PTTYPE="$value" ;;
      UUID) DISK_UUID="$value" ;;
    esac
  done <"$WORK_DIR/blkid"
  return "$code"
}

# device_size DEVICE -> its size in bytes (a block device's, or an image file's in tests).
device_size() {
  if [[ -b "$1" ]]; then
    blockdev --getsize64 "$1"
  else
    stat -L -c %s "$1"
  fi
}

# reads_as_zeros DEVICE OFFSET LENGTH: true only if all LENGTH bytes there could be read and are zero.
reads_as_zeros() {
  local device="$1" offset="$2" length="$3"
  dd if="$device" iflag=skip_bytes,count_bytes skip="$offset" count="$length" bs=65536 status=none 2>/dev/null |
    cmp -s -n "$length" - /dev/zero
}

# The ext4 groups that hold a backup superblock (sparse_super: 1 and the powers of 3, 5 and 7).
backup_groups() {
  local limit="$1" base group
  for base in 3 5 7; do
    for ((group = base; group < limit; group *= base)); do
      printf '%s\n' "$group"
    done
  done
  ((limit > 1)) && printf '1\n'
  return 0
}

# blank_disk_check DEVICE -> prints nothing and succeeds only if every place a filesystem or partition
# table keeps its signature or backup reads as zeros: the first 4 MiB (MBR, GPT, the superblocks of ext4,
# XFS, btrfs, LVM, of a filesystem in a first partition at 1 MiB too), the ext4 backup superblocks for
# 1k, 2k and 4k blocks (groups of 8, 32, 128 MiB; from the start and from 1 MiB), and the last MiB (GPT's
# backup header, md and ZFS labels). Otherwise prints the first place that holds data, and fails.
# `blkid -p` finds nothing on a disk whose start was zeroed, so "no filesystem" alone never formats.
blank_disk_check() {
  local device="$1" size group_bytes partition group offset
  size="$(device_size "$device" 2>/dev/null)" || { echo "its size cannot be read"; return 1; }
  if ! [[ "$size" =~ ^[0-9]+$ ]] || ((size < BLANK_START_BYTES)); then
    echo "it is smaller than 4 MiB (or cannot be read)"
    return 1
  fi
  reads_as_zeros "$device" 0 "$BLANK_START_BYTES" || { echo "its first 4 MiB hold data"; return 1; }
  reads_as_zeros "$device" $((size - BLANK_END_BYTES)) "$BLANK_END_BYTES" ||
    { echo "its last MiB holds data (where GPT keeps its backup header)"; return 1; }
  for group_bytes in $((8 << 20)) $((32 << 20)) $((128 << 20)); do
    for partition in 0 $((1 << 20)); do
      while read -r group; do
        offset=$((partition + group * group_bytes))
        ((offset + BLANK_BACKUP_BYTES <= size)) || continue
        reads_as_zeros "$device" "$offset" "$BLANK_BACKUP_BYTES" ||
          { echo "it holds data at byte $offset, where an ext4 keeps a backup superblock"; return 1; }
      done < <(backup_groups $(((size - partition) / group_bytes + 1)))
    done
  done
}

write_fstab_line() {
  local uuid="$1" mount_point="$2" fstab="$ROOT/etc/fstab" line
  [[ "$uuid" =~ ^[0-9A-Fa-f-]+$ ]] || die "the cache disk's UUID '$uuid' is empty or malformed; not writing /etc/fstab"
  # nofail + a short device timeout: a missing disk must never block boot.
  line="UUID=$uuid $mount_point ext4 discard,defaults,nofail,x-systemd.device-timeout=10s 0 2"
  grep -qsxF -- "$line" "$fstab" && return 0
  # One line per mount point: a replaced disk (new UUID) must not leave the old line behind.
  touch "$fstab"
  awk -v mp="$mount_point" '$2 != mp' "$fstab" >"$WORK_DIR/fstab"
  printf '%s\n' "$line" >>"$WORK_DIR/fstab"
  install -m 0644 "$WORK_DIR/fstab" "$fstab.tmp"
  mv -f "$fstab.tmp" "$fstab"
}

# find_cache_disk NAME SIZE_GB -> sets CACHE_DEVICE to the stack's cache disk (a /dev/disk/by-id path), or leaves
# it empty and says why in CACHE_DEVICE_WHY. Nothing documents that the TPU service names the first data disk
# persistent-disk-1 (the google-NAME link); what the stack controls is the disk's size: the one whole disk of
# exactly SIZE_GB GiB (Compute Engine's GB) under any of /dev/disk/by-id's names (google-*, scsi-0Google_*, nvme-*),
# not partitioned (a boot disk is), is the cache disk; google-NAME is preferred when it is one of that size, and a
# disk of another size is never taken. Without SIZE_GB (metadata written by an older stack), google-NAME alone.
find_cache_disk() {
  local name="$1" size_gb="$2" named="$ROOT/dev/disk/by-id/google-$1" link real size want named_real=""
  local -A partitioned=() seen=()
  local -a matches=() others=()
  CACHE_DEVICE="" CACHE_DEVICE_WHY=""
  if [[ -z "$size_gb" ]]; then
    if [[ -e "$named" ]]; then CACHE_DEVICE="$named"; else CACHE_DEVICE_WHY="$named does not exist"; fi
    return 0
  fi
  [[ "$size_gb" =~ ^[1-9][0-9]{0,5}$ ]] || die "metadata attribute tpu-vllm-cache-size-gb '$size_gb' is not a size in GB"
  want=$((size_gb << 30))
  for link in "$ROOT"/dev/disk/by-id/*; do
    [[ "$link" =~ -part[0-9]+$ && -e "${link%-part*}" ]] && partitioned["$(readlink -f "${link%-part*}")"]=1
  done
  [[ -e "$named" ]] && named_real="$(readlink -f "$named")"
  for link in "$ROOT"/dev/disk/by-id/*; do
    [[ -e "$link" && ! "$link" =~ -part[0-9]+$ ]] || continue
    real="$(readlink -f "$link")"
    [[ -z "${seen[$real]:-}" && -z "${partitioned[$real]:-}" ]] || continue
    seen["$real"]=1
    size="$(device_size "$real" 2>/dev/null)" || continue
    if ((size == want)); then
      [[ "$real" == "$named_real" ]] && link="$named"
      matches+=("$link")
    else
      others+=("${link#"$ROOT"} ($size bytes)")
    fi
  done
  if ((${#matches[@]} == 1)); then
    CACHE_DEVICE="${matches[0]}"
  elif ((${#matches[@]} > 1)) && [[ -n "$named_real" && " ${matches[*]} " == *" $named "* ]]; then
    CACHE_DEVICE="$named"
  elif ((${#matches[@]} > 1)); then
    CACHE_DEVICE_WHY="several unpartitioned disks are $size_gb GiB (${matches[*]#"$ROOT"}), and none is google-$name: set tpu-vllm:cache.deviceName to the one to use"
  else
    CACHE_DEVICE_WHY="no unpartitioned disk of $size_gb GiB ($want bytes) under /dev/disk/by-id; others: ${others[*]:-none}"
  fi
  return 0
}

mount_cache_disk() {
  local device_name="$1" mount_point="$2" size_gb="$3" device code=0
  STEP="waiting for the cache disk${size_gb:+ ($size_gb GiB)}"
  local waited=0
  until find_cache_disk "$device_name" "$size_gb" && [[ -n "$CACHE_DEVICE" ]]; do
    # A Hyperdisk (v6e) attaches as NVMe: its google-<name> link needs guest-configs' NVMe persistent-disk udev
    # rule, which older images lack (GoogleCloudPlatform/guest-configs 65-gce-disk-naming.rules).
    ((waited >= 60)) && die "cache disk never appeared: $CACHE_DEVICE_WHY; is it attached (dataDisks)? On v6e the" \
      "Hyperdisk attaches as NVMe and its google-$device_name link comes from the image's udev rules: ls -l" \
      "/dev/disk/by-id shows what the node named it"
    [[ "$CACHE_DEVICE_WHY" != several* ]] || die "cache disk: $CACHE_DEVICE_WHY"
    pause 2
    waited=$((waited + 2))
  done
  device="$CACHE_DEVICE"
  STEP="probing the cache disk $device"
  probe_disk "$device" || code=$?
  case "$code" in
    0) ;;
    2)
      local not_blank
      if ! run_step blank_disk_check "$device" >"$WORK_DIR/not-blank"; then
        not_blank="$(<"$WORK_DIR/not-blank")"
        die "blkid -p found no filesystem on $device, but it is not blank: $not_blank; not formatting a disk that may hold data. If it is an ext4 whose start was damaged, recover it (sudo e2fsck -b 32768 $device); if its data is not needed, format it yourself and rerun the boot script: sudo mkfs.ext4 -m 0 $device && sudo systemctl restart google-startup-scripts"
      fi
      STEP="formatting the blank cache disk $device"
      say "no filesystem or partition table on $device, and it reads as zeros everywhere one would be: formatting it (ext4)"
      run_step --let-finish mkfs.ext4 -q -m 0 -E lazy_itable_init=0,lazy_journal_init=0,discard "$device"
      probe_disk "$device" || die "blkid -p cannot read $device right after mkfs.ext4 (exit $?)"
      ;;
    *) die "blkid -p could not probe $device (exit $code: $(head -c 200 "$WORK_DIR/blkid.err")); not formatting a disk that may hold the compile cache" ;;
  esac
  [[ -z "$DISK_PTTYPE" ]] ||
    die "cache disk $device has a $DISK_PTTYPE partition table; the stack uses the whole disk as ext4 and will not format it: attach a blank disk, or wipe this one yourself (wipefs -a) if its data is not needed"
  [[ "$DISK_TYPE" == ext4 ]] ||
    die "cache disk $device holds a ${DISK_TYPE:-unrecognised} filesystem, not ext4; refusing to format it: attach a blank disk, or wipe this one yourself (wipefs -a) if its data is not needed"
  STEP="mounting the cache disk $device on $mount_point"
  mkdir -p "$ROOT$mount_point"
  if ! mountpoint -q "$ROOT$mount_point"; then
    run_step mount -o discard,defaults "$device" "$ROOT$mount_point"
  fi
  STEP="listing the cache disk in /etc/fstab"
  write_fstab_line "$DISK_UUID" "$mount_point"
  say "cache disk mounted at $mount_point"
}

# install_host_key: the stack's SSH host key (components/vm/host_key.py), before the deploy
# dials. Read like the other secrets (the VM's identity; base64 of the OpenSSH private key, one line), checked
# (an ED25519 private key ssh-keygen can read), written root-only to its own directory (google-guest-agent
# rewrites /etc/ssh/ssh_host_*_key on a new instance), made sshd's only HostKey by a drop-in that
# Ubuntu's sshd_config includes first, then sshd reloaded: ssh.service on Ubuntu 22.04 (socket activation
# only from 22.10; a unit not running reads the drop-in when it starts). Until then sshd offers the image's
# keys, which every pinned client refuses.
install_host_key() {
  local secret key_dir="$ROOT/etc/ssh/tpu-vllm" drop_in="$ROOT/etc/ssh/sshd_config.d/00-tpu-vllm-host-key.conf"
  local key_file="$key_dir/ssh_host_ed25519_key" public
  metadata_attribute tpu-vllm-ssh-host-key-secret secret
  if [[ -z "$secret" ]]; then
    say "metadata attribute tpu-vllm-ssh-host-key-secret is missing: sshd keeps the image's host keys, which the stack's clients refuse"
    return 0
  fi
  STEP="reading the SSH host key"
  fetch_access_token
  fetch_secret ssh-host-key "$secret" "the SSH host key secret" "tpu-vllm-STACK-ssh-host-key, the stack's own"
  rm -f "$WORK_DIR/auth-header"
  STEP="installing the SSH host key"
  base64 -d <"$WORK_DIR/secrets/ssh-host-key" >"$WORK_DIR/host-key" 2>/dev/null ||
    die "the SSH host key secret is not base64 (the stack writes base64 of an OpenSSH private key)"
  rm -f "$WORK_DIR/secrets/ssh-host-key"
  public="$(ssh-keygen -y -P '' -f "$WORK_DIR/host-key" 2>/dev/null)" ||
    die "the SSH host key secret does not hold an OpenSSH private key ssh-keygen can read"
  [[ "$public" == "ssh-ed25519 "* ]] || die "the SSH host key secret holds a ${public%% *} key, not ssh-ed25519"
  mkdir -p "$key_dir" "${drop_in%/*}"
  chmod 0755 "$key_dir"
  # Replace, never rewrite in place: sshd reads the whole file or the old one.
  install -m 0600 "$WORK_DIR/host-key" "$key_file.tmp"
  mv -f "$key_file.tmp" "$key_file"
  rm -f "$WORK_DIR/host-key"
  printf '%s\n' "$public" >"$key_file.pub.tmp"
  chmod 0644 "$key_file.pub.tmp"
  mv -f "$key_file.pub.tmp" "$key_file.pub"
  printf '# tpu-vllm: the stack'"'"'s host key, the only one sshd offers (written by the boot script).\nHostKey %s\n' \
    "${key_file#"$ROOT"}" >"$drop_in.tmp"
  chmod 0644 "$drop_in.tmp"
  mv -f "$drop_in.tmp" "$drop_in"
  # ssh.service's ExecReload runs `sshd -t` first: a config sshd would refuse fails here, not at the next boot.
  run_step systemctl try-reload-or-restart ssh.service ||
    die "sshd did not reload with the stack's host key (sudo sshd -t says why)"
  say "SSH host key installed: ${public%% *} $(ssh-keygen -l -f "$key_file.pub" | cut -d ' ' -f 2)"
}

# start_metrics_agent CONFIG: writes the Ops Agent's config, then installs the agent (first boot only) and
# restarts it in a process of its own, after `ready`: a failure costs the dashboard's data, never the boot.
start_metrics_agent() {
  mkdir -p "${OPS_AGENT_CONFIG%/*}"
  printf '%s\n' "$1" >"$OPS_AGENT_CONFIG"
  chmod 0644 "$OPS_AGENT_CONFIG"
  say "metrics: the Ops Agent scrapes vLLM on loopback (log: ${STATUS_DIR#"$ROOT"}/ops-agent.log)"
  # shellcheck disable=SC2016 # expanded by the inner bash: $1 is its first argument
  nohup bash -c 'set -u
    if ! systemctl cat google-cloud-ops-agent.service >/dev/null 2>&1; then
      dir="$(mktemp -d)" && curl -fsS --max-time 60 -o "$dir/repo.sh" "$1" && bash "$dir/repo.sh" --also-install ||
        { echo "tpu-vllm-startup: could not install the Ops Agent; the dashboard will have no data" >&2; exit 1; }
    fi
    systemctl restart google-cloud-ops-agent' ops-agent "$OPS_AGENT_REPO_SCRIPT_URL" \
    >"$STATUS_DIR/ops-agent.log" 2>&1 </dev/null {LOCK_FD}>&- &
}

main() {
  start_boot
  local hf_secret api_secret device_name cache_size_gb mount_point image metrics_config
  STEP="reading the metadata"
  metadata_attribute tpu-vllm-hf-token-secret hf_secret
  metadata_attribute tpu-vllm-api-key-secret api_secret
  metadata_attribute tpu-vllm-cache-device device_name
  metadata_attribute tpu-vllm-cache-size-gb cache_size_gb
  metadata_attribute tpu-vllm-cache-mount mount_point
  metadata_attribute tpu-vllm-image image
  metadata_attribute tpu-vllm-ops-agent-config metrics_config
  mount_point="${mount_point:-/mnt/tpu-vllm-cache}"
  [[ -n "$hf_secret" ]] || die "metadata attribute tpu-vllm-hf-token-secret is missing"
  [[ -n "$api_secret" ]] || die "metadata attribute tpu-vllm-api-key-secret is missing"
  metadata_value instance/service-accounts/default/email SERVICE_ACCOUNT
  SERVICE_ACCOUNT="${SERVICE_ACCOUNT:-the node service account}"
  check_mount_point "$mount_point"
  install_host_key

  if [[ -n "$device_name" ]]; then
    mount_cache_disk "$device_name" "$mount_point" "$cache_size_gb"
  else
    say "no cache disk attribute; the compile cache stays on the boot disk"
    mkdir -p "$ROOT$mount_point"
  fi
  STEP="preparing the cache directories"
  mkdir -p "$ROOT$mount_point/vllm" "$ROOT$mount_point/huggingface"

  if [[ -n "$image" ]] && command -v docker >/dev/null 2>&1; then
    # Start the multi-GB pull now; the deploy's docker run finds it done or joins it.
    say "pulling $image in the background"
    set -m  # a process group of its own: a stop before `ready` ends it (on_signal); after `ready` it goes on
    nohup docker pull "$image" >"$STATUS_DIR/image-pull.log" 2>&1 {LOCK_FD}>&- &
    PULL_PID=$!
    set +m
  fi

  STEP="reading the secrets"
  fetch_access_token
  fetch_secret hf-token "$hf_secret" "the HF token secret" \
    "the id set as tpu-vllm:hfTokenSecret, or tpu-vllm-STACK-hf-token when the stack keeps tpu-vllm:hfToken"
  fetch_secret api-key "$api_secret" "the API key secret" "tpu-vllm-STACK-api-key, the stack's own"
  rm -f "$WORK_DIR/auth-header"

  STEP="writing the secret files"
  install_secrets
  write_status "ready"
  PULL_PID=""
  say "ready: secrets in ${SECRETS_DIR#"$ROOT"} (root only, one file each)"
  if [[ -n "$metrics_config" ]]; then start_metrics_agent "$metrics_config"; fi
}

# Only when executed (the guest agent runs the file); sourcing it defines the functions and nothing else.
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  main "$@"
fi
