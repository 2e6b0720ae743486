"""tools.status against fakes: a fake `pulumi` and `ssh` on PATH, the fake TPU API, and a fake node.

The fake ssh runs the real remote command and probe script under bash on this machine, where a
fake `sudo`, `docker` and `curl` answer from files the test writes (the node's status file sits
under STARTUP_ROOT, as in the startup-script tests). Canary secrets must never be printed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import google.auth
import pytest
from google.auth import exceptions as auth_exceptions
from google.auth.credentials import AnonymousCredentials

from components.vm import boot_contract, container, tpu_api, tpu_request
from tests.fakes.tpu_api import FakeTpuApi, Fault
from tests.shims import make_shims
from tools import status, status_node, status_report

CANARY_API_KEY = "canary-api-key-7d0c5e1b9a"
CANARY_SSH_KEY = ("-----BEGIN OPENSSH PRIVATE KEY-----\ncanary-ssh-key-line-one-0f3a9c2e7b\n"
                  "canary-ssh-key-line-two-5e8d1b4a6c\n-----END OPENSSH PRIVATE KEY-----\n")
CANARIES = (CANARY_API_KEY, "canary-ssh-key-line-one-0f3a9c2e7b", "canary-ssh-key-line-two-5e8d1b4a6c")
PARENT = "projects/proj/locations/us-west4-a"
QR_NAME = f"{PARENT}/queuedResources/tpu-vllm-dev"
NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
LIVE_IP = "34.0.0.7"  # what the fake TPU API reports for the node
OUTPUTS = {
    "queuedResourceName": QR_NAME,
    "queuedResourceState": "ACTIVE",
    "runEndsAt": "2026-11-29T13:00:00Z",
    "nodeName": f"{PARENT}/nodes/tpu-vllm-dev",
    # The last deploy's address: a re-queued node has another, and the tool must use the live one.
    "sshCommand": "ssh -i ~/.ssh/tpu-vllm-dev tpu-vllm@34.0.0.99",
    "sshKnownHosts": "tpu-vllm-dev ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIstackhostkey\n",
    "sshTunnelCommand": "ssh -i ~/.ssh/tpu-vllm-dev -N -L 8000:127.0.0.1:8000 tpu-vllm@34.0.0.99",
    "localEndpoint": "http://127.0.0.1:8000/v1",
    "internalEndpoint": "http://10.164.0.7:8000/v1",
    "apiKey": CANARY_API_KEY,
    "sshPrivateKey": CANARY_SSH_KEY,
}
STATE_FORMAT = "{{.State.Status}} {{.State.ExitCode}} {{.State.StartedAt}}"

FAKE_PULUMI = r"""
readlink /proc/self/fd/0 >"$FAKE_NODE/pulumi-stdin"
if [[ -f "$FAKE_NODE/pulumi-error" ]]; then cat "$FAKE_NODE/pulumi-error" >&2; exit 255; fi
[[ "$1 $2 $3 $4" == "stack output --json --show-secrets" ]] || { echo "fake pulumi: unexpected $*" >&2; exit 3; }
cat "$FAKE_NODE/outputs.json"
"""
FAKE_SSH = r"""
key="" options=()
while (($#)); do
  case "$1" in
    -i) key="$2"; shift 2 ;;
    -o) options+=("$2"); shift 2 ;;
    -F) printf '%s\n' "$2" >"$FAKE_NODE/config-file"; shift 2 ;;
    -p) shift 2 ;;
    --) shift; break ;;
    -*) echo "fake ssh: unknown option $1" >&2; exit 3 ;;
    *) echo "fake ssh: the destination must follow --" >&2; exit 3 ;;
  esac
done
target="$1"; shift
stat -c %a "$key" >"$FAKE_NODE/key-mode"
cp "$key" "$FAKE_NODE/key-seen"
printf '%s\n' "$key" >"$FAKE_NODE/key-path"
printf '%s\n' "$target" >"$FAKE_NODE/target"
printf '%s\n' "${options[@]}" >"$FAKE_NODE/options"
printf '%s' "$*" >"$FAKE_NODE/remote-command"
case "$(cat "$FAKE_NODE/ssh-mode" 2>/dev/null)" in
  refused) echo "tpu-vllm@$target: Permission denied (publickey)." >&2; exit 255 ;;
  impostor) printf '%s\n' "@@@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @@@" \
    "Host key verification failed." >&2; exit 255 ;;
  unreachable) echo "ssh: connect to host ${target#*@} port 22: Connection timed out" >&2; exit 255 ;;
esac
exec bash -c "$*"
"""
FAKE_SUDO = r"""
[[ "$1" == -n ]] || { echo "fake sudo: expected -n (never prompt)" >&2; exit 1; }
shift
exec "$@"
"""
FAKE_DOCKER = r"""
case "$1" in
  inspect)
    [[ "$2 $3" == "-f $STATE_FORMAT" && "$4" == "$(cat "$FAKE_NODE/container-name")" ]] || exit 1
    [[ -f "$FAKE_NODE/container" ]] || { echo "Error: No such object: $4" >&2; exit 1; }
    cat "$FAKE_NODE/container" ;;
  logs)
    [[ "$2" == --tail && "$4" == "$(cat "$FAKE_NODE/container-name")" && -f "$FAKE_NODE/docker.log" ]] || exit 1
    tail -n "$3" "$FAKE_NODE/docker.log" ;;
  *) echo "fake docker: the probe may only read (got $1)" >&2; exit 1 ;;
esac
"""
FAKE_CURL = r"""
url="${*: -1}"
if [[ "$url" == "http://127.0.0.1:8000/health" && -f "$FAKE_NODE/health" ]]; then
  cat "$FAKE_NODE/health"
else
  printf '000'; exit 7
fi
"""


class Stack:
    """The outputs the fake pulumi prints and the node the fake ssh reaches."""

    def __init__(self, root: Path, api: FakeTpuApi):
        self.root = root
        self.api = api
        self.node = root / "node"
        self.node.mkdir()
        (self.node / "container-name").write_text(container.CONTAINER_NAME)
        self.log = root / "argv.log"
        self.env = make_shims(root / "bin", self.log, {
            "pulumi": FAKE_PULUMI, "ssh": FAKE_SSH, "sudo": FAKE_SUDO, "docker": FAKE_DOCKER, "curl": FAKE_CURL,
        })
        self.outputs(OUTPUTS)

    def outputs(self, values: dict) -> None:
        (self.node / "outputs.json").write_text(json.dumps(values))

    def queued(self, state: str, **fields) -> None:
        self.api.put(QR_NAME, request_body(), state, **fields)

    def active(self, **fields) -> None:
        self.queued("ACTIVE", runDuration={"maxRunDuration": "14400s",
                                           "terminationTime": "2026-11-29T13:00:00Z"}, **fields)

    def boot_status(self, text: str) -> None:
        path = self.node / boot_contract.STATUS_FILE.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")

    def container(self, state: str, log: str = "") -> None:
        (self.node / "container").write_text(state + "\n")
        (self.node / "docker.log").write_text(log)

    def health(self, code: str) -> None:
        (self.node / "health").write_text(code)

    def ssh_mode(self, mode: str) -> None:
        (self.node / "ssh-mode").write_text(mode)

    def fake(self, name: str) -> str:
        return (self.node / name).read_text()


def request_body() -> dict:
    return tpu_request.queued_resource_body(
        project="proj", zone="us-west4-a", node_id="tpu-vllm-dev", accelerator_type="v5litepod-1",
        runtime_version="v2-alpha-tpuv5-lite", provisioning_model="flex-start", run_seconds=14400,
        queue_seconds=3600, network="default", subnetwork=None,
        service_account_email="vm@proj.iam.gserviceaccount.com", metadata={}, data_disks=[],
        tags=["tpu-vllm-dev"], labels={"app": "tpu-vllm"})


@pytest.fixture
def stack(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(google.auth, "default", lambda scopes=None: (AnonymousCredentials(), None))
    with FakeTpuApi() as api:
        made = Stack(tmp_path, api)
        monkeypatch.setenv(tpu_api.ENDPOINT_ENV, api.url + "/")
        monkeypatch.setenv("PATH", made.env["PATH"])
        monkeypatch.setenv("FAKE_NODE", str(made.node))
        monkeypatch.setenv("STARTUP_ROOT", str(made.node))
        monkeypatch.setenv("STATE_FORMAT", STATE_FORMAT)
        yield made
    printed = capsys.readouterr()
    argv = made.log.read_text() if made.log.exists() else ""
    for canary in CANARIES:
        assert canary not in printed.out + printed.err, "a secret was printed"
        assert canary not in argv, "a secret reached a command line"


def run(stack: Stack, *argv: str) -> int:
    api = tpu_api.TpuApi(retry_base_seconds=0, max_attempts=2, sleep=lambda seconds: None)
    return status.main(["--stack", "dev", *argv], api=api, clock=lambda: NOW)


def shown(capsys) -> str:
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return captured.out + captured.err


# ---- one test per state ----

def test_no_such_stack_is_not_deployed(stack, capsys):
    (stack.node / "pulumi-error").write_text("error: no stack named 'dev' found\n")
    assert run(stack) == status_report.EXIT_NOT_READY
    text = shown(capsys)
    assert "stack dev: NOT DEPLOYED" in text and "there is no stack dev" in text
    assert "next: create it: `pulumi stack select --create NAME`" in text


def test_a_stack_without_outputs_is_not_deployed(stack, capsys):
    stack.outputs({})
    assert run(stack) == status_report.EXIT_NOT_READY
    text = shown(capsys)
    assert "NOT DEPLOYED" in text and "next: `pulumi up`" in text
    assert "stack output --json --show-secrets --stack dev" in stack.log.read_text()


def test_a_request_that_no_longer_exists_is_not_deployed(stack, capsys):
    assert run(stack) == status_report.EXIT_NOT_READY
    text = shown(capsys)
    assert "NOT DEPLOYED" in text and "the queued resource tpu-vllm-dev no longer exists" in text
    assert "next: `pulumi up` requests a new one" in text


def test_queued_says_how_long_it_has_waited(stack, capsys):
    stack.queued("WAITING_FOR_RESOURCES", createTime="2026-11-29T09:47:30.123456Z",  # fractions dropped
                 queueingPolicy={"validUntilDuration": "3600s"})
    assert run(stack) == status_report.EXIT_NOT_READY
    text = shown(capsys)
    assert "stack dev: QUEUED" in text and "waiting for TPU capacity" in text
    assert "tpu-vllm-dev in us-west4-a: WAITING_FOR_RESOURCES" in text
    assert "12m 30s since the request" in text
    assert "3600s after the request (tpu-vllm:tpu.queueTimeout)" in text
    assert "keep `pulumi up` running" in text
    assert not (stack.node / "target").exists()  # no node yet: no SSH


@pytest.mark.parametrize("state", ["ACCEPTED", "CREATING"])
def test_other_waiting_states_are_queued(stack, capsys, state):
    stack.queued(state)
    assert run(stack) == status_report.EXIT_NOT_READY
    assert "QUEUED" in shown(capsys)


def test_provisioning(stack, capsys):
    stack.queued("PROVISIONING")
    assert run(stack) == status_report.EXIT_NOT_READY
    assert "stack dev: PROVISIONING" in shown(capsys)


def test_an_active_request_whose_node_is_still_creating_is_provisioning(stack, capsys):
    stack.active()
    stack.api.node_state = "CREATING"
    assert run(stack) == status_report.EXIT_NOT_READY
    text = shown(capsys)
    assert "PROVISIONING" in text and "node             CREATING" in text
    assert not (stack.node / "target").exists()


def test_a_node_that_is_down_says_how_to_start_over(stack, capsys):
    stack.active()
    stack.api.node_state = "PREEMPTED"
    assert run(stack) == status_report.EXIT_NOT_READY
    text = shown(capsys)
    assert "NODE LOST" in text and "the node is PREEMPTED" in text
    assert "gcloud alpha compute tpus queued-resources delete tpu-vllm-dev --zone=us-west4-a --force" in text


def test_booting_while_ssh_does_not_answer(stack, capsys):
    stack.active()
    stack.ssh_mode("unreachable")
    assert run(stack) == status_report.EXIT_NOT_READY
    text = shown(capsys)
    assert "stack dev: BOOTING" in text and "SSH does not answer yet" in text and "Connection timed out" in text
    assert "tpu-vllm:access.sshSourceRanges" in text


def test_a_refused_key_says_what_overrides_it(stack, capsys):
    stack.active()
    stack.ssh_mode("refused")
    assert run(stack) == status_report.EXIT_NOT_READY
    text = shown(capsys)
    assert "SSH REFUSED" in text and "Permission denied (publickey)" in text and "OS Login" in text


def test_a_node_answering_with_another_host_key_is_not_read_and_says_why(stack, capsys):
    stack.active()
    stack.ssh_mode("impostor")
    assert run(stack) == status_report.EXIT_NOT_READY
    text = shown(capsys)
    assert "stack dev: BOOTING" in text and "another host key" in text and "not the stack's" in text
    assert "installs the stack's key" in text


def test_a_stack_without_the_known_hosts_output_asks_for_an_up_before_dialling(stack, capsys):
    stack.active()
    stack.outputs({key: value for key, value in OUTPUTS.items() if key != "sshKnownHosts"})
    assert run(stack) == status_report.EXIT_ERROR
    assert "no sshKnownHosts output" in shown(capsys)
    assert not (stack.node / "target").exists()  # no ssh was run


@pytest.mark.parametrize("boot_status", [None, "running"])
def test_booting_while_the_boot_script_runs(stack, capsys, boot_status):
    stack.active()
    if boot_status:
        stack.boot_status(boot_status)
    assert run(stack) == status_report.EXIT_NOT_READY
    text = shown(capsys)
    assert "stack dev: BOOTING" in text and f"boot script      {boot_status or 'not started'}" in text


def test_a_failed_boot_script_shows_its_reason_and_where_to_read_more(stack, capsys):
    stack.active()
    stack.boot_status("failed: permission denied reading projects/proj/secrets/hf-token: grant "
                      "roles/secretmanager.secretAccessor")
    assert run(stack) == status_report.EXIT_NOT_READY
    text = shown(capsys)
    assert "BOOTING" in text
    assert "boot script      failed: permission denied reading projects/proj/secrets/hf-token: grant" in text
    assert f"ssh -i ~/.ssh/tpu-vllm-dev tpu-vllm@{LIVE_IP} sudo journalctl -u google-startup-scripts" in text


def test_booted_but_no_container_yet(stack, capsys):
    stack.active()
    stack.boot_status("ready")
    assert run(stack) == status_report.EXIT_NOT_READY
    text = shown(capsys)
    assert "BOOTING" in text and f"{container.CONTAINER_NAME}: not created" in text
    assert "`pulumi up` runs the serving step" in text


def test_a_stopped_container_shows_its_last_words(stack, capsys):
    stack.active()
    stack.boot_status("ready")
    stack.container("exited 1 2026-11-29T09:40:00.5Z",
                    "INFO loading\nRuntimeError: Attempting to reserve 384.11M; 346.77M free\n")
    assert run(stack) == status_report.EXIT_NOT_READY
    text = shown(capsys)
    assert "CONTAINER STOPPED" in text and "not running (exited)" in text and "exited (exit code 1)" in text
    assert "last log line    RuntimeError: Attempting to reserve 384.11M; 346.77M free" in text
    assert f"sudo docker logs --tail 100 {container.CONTAINER_NAME}" in text


def test_compiling_shows_the_latest_progress_line(stack, capsys):
    stack.active()
    stack.boot_status("ready")
    stack.container("running 0 2026-11-29T09:51:02.123456789Z", "\n".join([
        "INFO Memory statistics | total_hbm_limit_gb=15.75GiB",
        "INFO Precompile worker0 backbone --> {'num_tokens': 16}",
        "INFO Compilation finished in 3.12 [secs].",
        "INFO Precompile worker0 backbone --> {'num_tokens': 32}",
        "INFO Compilation finished in 2.90 [secs].",
    ]) + "\n")
    stack.health("503")
    assert run(stack) == status_report.EXIT_NOT_READY
    text = shown(capsys)
    assert "stack dev: COMPILING" in text
    assert "progress         INFO Precompile worker0 backbone --> {'num_tokens': 32}" in text
    assert "running for 8m 58s (since 09:51:02 UTC)" in text and "/health on :8000 answered 503" in text
    assert "run ends         2026-11-29 13:00 UTC (3h 00m left)" in text
    assert "cold start takes ~14 min" in text
    assert 'the key file, once: eval "$(pulumi stack output sshPrivateKeySetup)"' in text


def test_compiling_before_any_progress_line_shows_the_last_log_line(stack, capsys):
    stack.active()
    stack.boot_status("ready")
    stack.container("running 0 2026-11-29T09:59:00Z", "INFO Downloading weights\n")
    assert run(stack) == status_report.EXIT_NOT_READY
    text = shown(capsys)
    assert "COMPILING" in text and "progress         INFO Downloading weights" in text
    assert "answered nothing (not listening yet)" in text  # curl printed 000: no connection


def test_ready(stack, capsys):
    stack.active()
    stack.boot_status("ready")
    stack.container("running 0 2026-11-29T09:40:00Z", "INFO Application startup complete.\n")
    stack.health("200")
    assert run(stack) == status_report.EXIT_READY
    text = shown(capsys)
    assert "stack dev: READY" in text and "vLLM is serving on port 8000" in text
    assert "next: open the tunnel: $(pulumi stack output sshTunnelCommand) &" in text


def test_ssh_uses_the_live_address_a_private_key_file_and_no_prompts(stack, capsys):
    stack.active()
    stack.boot_status("ready")
    stack.container("running 0 2026-11-29T09:40:00Z")
    stack.health("200")
    assert run(stack) == status_report.EXIT_READY
    assert stack.fake("target").strip() == f"tpu-vllm@{LIVE_IP}"
    assert stack.fake("key-mode").strip() == "600"
    assert stack.fake("key-seen") == CANARY_SSH_KEY
    assert not Path(stack.fake("key-path").strip()).exists()  # removed after use
    options = stack.fake("options").split()
    assert {"BatchMode=yes", "IdentitiesOnly=yes", f"ConnectTimeout={status_node.SSH_CONNECT_TIMEOUT_SECONDS}"} <= set(
        options)
    # Only the stack's host key, from its sshKnownHosts output (the real ssh: tests/test_host_key.py).
    assert {"StrictHostKeyChecking=yes", "HostKeyAlias=tpu-vllm-dev", "GlobalKnownHostsFile=/dev/null"} <= set(options)
    assert not any(option.startswith("StrictHostKeyChecking=no") or option == "UserKnownHostsFile=/dev/null"
                   for option in options)
    # No ssh_config of the user's can vouch for another key (the real ssh: tests/test_host_key.py).
    assert stack.fake("config-file") == "none\n"  # -F none: ssh reads no config file
    assert stack.fake("remote-command") == (
        f"sudo -n bash -s -- {boot_contract.STATUS_FILE} {container.CONTAINER_NAME} 8000 "
        f"'{status_node.PROGRESS_PATTERN}'")


def test_a_renamed_container_is_followed_from_its_one_definition(stack, capsys, monkeypatch):
    monkeypatch.setattr(container, "CONTAINER_NAME", "vllm-renamed")
    (stack.node / "container-name").write_text("vllm-renamed")
    stack.active()
    stack.boot_status("ready")
    stack.container("running 0 2026-11-29T09:40:00Z")
    stack.health("200")
    assert run(stack) == status_report.EXIT_READY
    assert " vllm-renamed 8000 " in stack.fake("remote-command")


def test_run_ended(stack, capsys):
    stack.queued("SUSPENDED", runDuration={"maxRunDuration": "14400s", "terminationTime": "2026-11-29T09:00:00Z"})
    assert run(stack) == status_report.EXIT_NOT_READY
    text = shown(capsys)
    assert "stack dev: RUN ENDED" in text and "billing stopped" in text
    assert "run ends         2026-11-29 09:00 UTC (ended 1h 00m ago)" in text
    assert "next: `pulumi up` to re-queue" in text


def test_a_failed_request_shows_the_apis_reason(stack, capsys):
    stack.api.failed_message = "Insufficient capacity for v5litepod-1 in us-west4-a"
    stack.queued("FAILED")
    assert run(stack) == status_report.EXIT_NOT_READY
    text = shown(capsys)
    assert "FAILED" in text and "Insufficient capacity for v5litepod-1 in us-west4-a" in text
    assert "then `pulumi up` queues a fresh one" in text


# ---- errors: exit 2, a message, no traceback ----

def test_no_pulumi_cli_is_an_error(stack, capsys, monkeypatch, tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert run(stack) == status_report.EXIT_ERROR
    assert "error: the Pulumi CLI is not on PATH" in shown(capsys)


def test_pulumi_gets_no_stdin_so_a_passphrase_prompt_fails_at_once(stack, capsys):
    (stack.node / "pulumi-error").write_text(
        "error: passphrase must be set with PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE\n")
    # Our own stdin is an open pipe, as a terminal would be: pulumi must not inherit it.
    read_end, write_end = os.pipe()
    saved = os.dup(0)
    os.dup2(read_end, 0)
    try:
        assert run(stack) == status_report.EXIT_ERROR
    finally:
        os.dup2(saved, 0)
        for descriptor in (saved, read_end, write_end):
            os.close(descriptor)
    assert stack.fake("pulumi-stdin").strip() == "/dev/null"
    assert "error: `pulumi stack output` failed: error: passphrase must be set" in shown(capsys)


def test_a_pulumi_failure_is_an_error_with_its_message(stack, capsys):
    (stack.node / "pulumi-error").write_text("error: no stack selected; please use `pulumi stack select`\n")
    assert run(stack) == status_report.EXIT_ERROR
    assert "`pulumi stack output` failed: error: no stack selected" in shown(capsys)


def test_outputs_from_an_older_deploy_say_to_run_up(stack, capsys):
    stack.outputs({key: value for key, value in OUTPUTS.items() if key != "queuedResourceName"})
    assert run(stack) == status_report.EXIT_ERROR
    assert "has no queuedResourceName output" in shown(capsys)


def test_a_tpu_api_refusal_is_an_error(stack, capsys):
    stack.api.inject(Fault("GET", "queuedResources", 403))
    assert run(stack) == status_report.EXIT_ERROR
    assert "error: TPU API refused queuedResources.get (403" in shown(capsys)


def test_missing_google_credentials_is_an_error_with_the_login_command(stack, capsys, monkeypatch):
    def no_credentials(scopes=None):
        raise auth_exceptions.DefaultCredentialsError("Your default credentials were not found.")

    monkeypatch.setattr(google.auth, "default", no_credentials)
    assert run(stack) == status_report.EXIT_ERROR
    assert "gcloud auth application-default login" in shown(capsys)


# ---- secrets ----

def test_a_secret_in_the_containers_log_is_not_printed(stack, capsys):
    stack.active()
    stack.boot_status("ready")
    stack.container("exited 1 2026-11-29T09:40:00Z", f"error: bad key {CANARY_API_KEY}\n")
    assert run(stack) == status_report.EXIT_NOT_READY
    assert "last log line    error: bad key [secret]" in shown(capsys)


def test_redaction_covers_each_line_of_a_multi_line_secret():
    redact = status.Redactor({"sshPrivateKey": CANARY_SSH_KEY, "apiKey": CANARY_API_KEY, "other": "visible"})
    assert redact(f"a {CANARY_API_KEY} b canary-ssh-key-line-two-5e8d1b4a6c visible") == (
        "a [secret] b [secret] visible")


# ---- pieces ----

def test_the_probe_script_passes_shellcheck(tmp_path):
    script = tmp_path / "probe.sh"
    script.write_text("#!/usr/bin/env bash\n" + status_node.PROBE_SCRIPT)
    shellcheck = Path(sys.executable).parent / "shellcheck"
    completed = subprocess.run([str(shellcheck), "-S", "style", str(script)], capture_output=True, text=True)
    assert completed.returncode == 0, completed.stdout


def test_times_as_the_tpu_api_and_docker_write_them():
    assert status_report.parse_time("2026-11-29T09:51:02.123456789Z") == datetime(2026, 11, 29, 9, 51, 2, tzinfo=UTC)
    assert status_report.parse_time("2026-11-29T09:51:02+01:00") == datetime(2026, 11, 29, 8, 51, 2, tzinfo=UTC)
    assert status_report.parse_time("0001-01-01T00:00:00Z") is None  # docker's never-started
    assert status_report.parse_time("") is None and status_report.parse_time("soon") is None
    assert [status_report.span(s) for s in (5, 65, 3600 * 3 + 59, -61)] == ["5s", "1m 05s", "3h 00m", "1m 01s"]


def test_node_facts_ignore_unknown_lines():
    facts = status.NodeFacts.parse("startup_status=ready\nhealth=200\nnoise\nother=1\nprogress=a=b\n")
    assert (facts.startup_status, facts.health, facts.progress, facts.container) == ("ready", "200", "a=b", "")


def test_the_program_exports_what_the_status_tool_reads():
    from tests import program

    deployed = program.run(program.dev_config())
    queued = deployed.one("pulumi-python:dynamic/tpu-vllm:QueuedResource")["inputs"]
    name = deployed.output("queuedResourceName")["value"]
    # The name the provider creates, and one the tool can take apart.
    assert name == f"{queued['parent']}/queuedResources/{queued['queuedResourceId']}"
    assert status.QUEUED_RESOURCE_NAME.match(name).groups() == ("us-west4-a", "tpu-vllm-dev")
    assert status.serving_port(
        {"localEndpoint": deployed.output("localEndpoint")["value"]}, "stack dev") == 8000
    ssh = status.ssh_target({"sshCommand": deployed.output("sshCommand")["value"], "sshPrivateKey": "k",
                             "sshKnownHosts": deployed.output("sshKnownHosts")["value"]},
                            LIVE_IP, "stack dev")
    assert ssh.user == "tpu-vllm"
    assert ssh.command_hint.startswith(
        "ssh -i ~/.ssh/tpu-vllm-dev -F none -o UserKnownHostsFile=~/.ssh/tpu-vllm-dev.known_hosts")
    assert ssh.command_hint.endswith(f"-o StrictHostKeyChecking=yes -o HostKeyAlias=tpu-vllm-dev "
                                     f"-o GlobalKnownHostsFile=/dev/null tpu-vllm@{LIVE_IP}")
    assert deployed.output("sshPrivateKey")["secret"] is True and deployed.output("apiKey")["secret"] is True


# ---- a request the stack does not track (an interrupted first `pulumi up`) ----

SETTINGS_QR_NAME = "projects/my-proj/locations/us-west4-a/queuedResources/tpu-vllm-dev"


def stack_file_in(directory, monkeypatch) -> None:
    """The user's Pulumi.dev.yaml with the project set, in the directory the tool runs from."""
    text = (Path(__file__).resolve().parent.parent / "Pulumi.dev.yaml").read_text()
    (directory / "Pulumi.dev.yaml").write_text(text.replace("config:", "config:\n  gcp:project: my-proj", 1))
    monkeypatch.chdir(directory)


@pytest.mark.parametrize("outputs", [None, {}], ids=["no state", "no outputs"])
@pytest.mark.parametrize("state", ["WAITING_FOR_RESOURCES", "ACTIVE"])
def test_a_request_left_by_an_interrupted_first_up_is_found_from_the_settings(stack, capsys, monkeypatch,
                                                                             tmp_path, outputs, state):
    stack_file_in(tmp_path, monkeypatch)
    if outputs is None:
        (stack.node / "pulumi-error").write_text("error: no stack named 'dev' found\n")
    else:
        stack.outputs(outputs)
    stack.api.put(SETTINGS_QR_NAME, request_body(), state)
    assert run(stack) == status_report.EXIT_NOT_READY
    text = shown(capsys)
    assert "stack dev: UNTRACKED" in text
    assert f"the queued resource tpu-vllm-dev exists ({state}) but stack dev does not track it" in text
    assert ("it bills now" if state == "ACTIVE" else "it bills once it goes ACTIVE") in text
    assert ("delete it: gcloud alpha compute tpus queued-resources delete tpu-vllm-dev --project=my-proj "
            "--zone=us-west4-a --force --quiet") in text
    assert "pulumi refresh --clear-pending-creates" in text


def test_without_such_a_request_a_stack_without_outputs_is_still_not_deployed(stack, capsys, monkeypatch, tmp_path):
    stack_file_in(tmp_path, monkeypatch)
    stack.outputs({})
    assert run(stack) == status_report.EXIT_NOT_READY
    assert "NOT DEPLOYED" in shown(capsys)
