"""tools.status: the vm wing's node, read over SSH with the stack's own key and pinned host key: the boot script's
status file, the vLLM container and its /health, by a read-only probe that arrives on stdin."""

from __future__ import annotations

import ipaddress
import os
import re
import shlex
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.settings.text import escaped
from components.vm import boot_contract, container
from components.vm.host_key import pinned_ssh_options
from tools.status_outputs import last_line, required
from tools.status_report import StatusError

SSH_CONNECT_TIMEOUT_SECONDS = 10
SSH_TIMEOUT_SECONDS = 60
# Lines worth showing while vLLM starts: tpu-inference's "Precompile <graph> --> {shapes}"
# (tpu_inference/runner/compilation_manager.py) and the three lines the build log watches.
PROGRESS_PATTERN = "Precompile |Memory statistics|Init kv-cache|startup complete"
LOG_TAIL_LINES = 2000
FACT_LIMIT = 300


# Runs on the node as root, reads only. Arguments: status file, container, port, progress pattern.
# STARTUP_ROOT prefixes the status file as in startup.sh (tests); ssh and sudo never pass it on.
PROBE_SCRIPT = r"""set -u
status_file="${STARTUP_ROOT:-}$1" container="$2" port="$3" pattern="$4"
limit=@FACT_LIMIT@ tail_lines=@LOG_TAIL_LINES@
fact() { printf '%s=%s\n' "$1" "$(printf '%s' "$2" | tr '\r\n' '  ' | cut -c "1-$limit")"; }
fact startup_status "$(head -n 1 "$status_file" 2>/dev/null)"
state_format='{{.State.Status}} {{.State.ExitCode}} {{.State.StartedAt}}'
fact container "$(docker inspect -f "$state_format" "$container" 2>/dev/null)"
fact progress "$(docker logs --tail "$tail_lines" "$container" 2>&1 | grep -E -- "$pattern" | tail -n 1)"
fact last_log "$(docker logs --tail 1 "$container" 2>&1)"
fact health "$(curl -s -o /dev/null --max-time 5 -w '%{http_code}' "http://127.0.0.1:$port/health" 2>/dev/null)"
""".replace("@FACT_LIMIT@", str(FACT_LIMIT)).replace("@LOG_TAIL_LINES@", str(LOG_TAIL_LINES))


@dataclass
class NodeFacts:
    """What the probe saw on the node."""

    startup_status: str = ""
    container: str = ""
    progress: str = ""
    last_log: str = ""
    health: str = ""

    @classmethod
    def parse(cls, text: str) -> NodeFacts:
        facts = cls()
        for line in text.splitlines():
            name, sep, value = line.partition("=")
            if sep and name in cls.__dataclass_fields__:
                setattr(facts, name, value.strip())
        return facts


@dataclass
class SshTarget:
    user: str
    host: str
    private_key: str
    command_hint: str
    """The stack's sshCommand, pointed at the live node: what the user types to look closer."""
    known_hosts: str = ""
    """The stack's sshKnownHosts output: `<alias> ssh-ed25519 AAAA...`, the only host key accepted."""
    port: int = 22


# The user from the sshCommand output and the address from the TPU API reach ssh's command line: a user name as
# useradd takes one (shadow-utils' default NAME_REGEX), an address as an IP, so neither can be an option such as
# `-oProxyCommand=...`; they also follow `--`, after which ssh reads no option (OpenSSH ssh.c, getopt).
SSH_USER = re.compile(r"[a-z_][a-z0-9_-]{0,31}\Z")


def _checked_host(host: str, stack_label: str) -> str:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        raise StatusError(f"{stack_label}'s node address {escaped(host)[:80]!r} is not an IP address") from None


def ssh_target(outputs: dict[str, Any], host: str, stack_label: str) -> SshTarget:
    """The stack's user and key, for the node at `host` (the live address, not the last deploy's)."""
    command = required(outputs, "sshCommand", stack_label).split()
    user = command[-1].rpartition("@")[0]
    if not user:
        raise StatusError(f"{stack_label}'s sshCommand output names no user: {escaped(' '.join(command))!r}")
    if not SSH_USER.match(user):
        raise StatusError(f"{stack_label}'s sshCommand output names the user {escaped(user)[:80]!r}, which is no "
                          "user name; run `pulumi up` to rewrite the outputs")
    host = _checked_host(host, stack_label)
    key = required(outputs, "sshPrivateKey", stack_label)
    known_hosts = required(outputs, "sshKnownHosts", stack_label)
    return SshTarget(user=user, host=host, private_key=key, known_hosts=known_hosts,
                     command_hint=" ".join([*command[:-1], f"{user}@{host}"]))


def remote_command(port: int) -> str:
    """Arguments only, no secret: the probe script itself arrives on stdin (as serve.sh does)."""
    return "sudo -n bash -s -- " + shlex.join(
        [boot_contract.STATUS_FILE, container.CONTAINER_NAME, str(port), PROGRESS_PATTERN])


class SshRefusedError(Exception):
    """The node answered but refused the key."""


class SshUnreachableError(Exception):
    """No SSH answer (yet)."""


class SshHostKeyError(Exception):
    """The node answered with a host key that is not the stack's."""


def read_node(target: SshTarget, port: int) -> NodeFacts:
    """Run the read-only probe on the node with the stack's key in a 0600 file that is removed after."""
    with tempfile.TemporaryDirectory(prefix="tpu-vllm-status-") as directory:
        key_file = Path(directory) / "key"
        descriptor = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(target.private_key.rstrip("\n") + "\n")  # OpenSSH wants the final newline
        # Every run is a new node behind a recycled address, but the host key is the stack's (host_key.py):
        # only it is accepted, named by its alias whatever the address.
        known_hosts = Path(directory) / "known_hosts"
        known_hosts.write_text(target.known_hosts.rstrip("\n") + "\n")
        alias = target.known_hosts.split(maxsplit=1)[0]
        command = [
            "ssh", "-i", str(key_file), "-p", str(target.port),
            "-o", "BatchMode=yes", "-o", f"ConnectTimeout={SSH_CONNECT_TIMEOUT_SECONDS}",
            "-o", "IdentitiesOnly=yes", *pinned_ssh_options(str(known_hosts), alias), "-o", "LogLevel=ERROR",
            "--", f"{target.user}@{target.host}", remote_command(port),
        ]
        try:
            completed = subprocess.run(command, input=PROBE_SCRIPT, capture_output=True, text=True,
                                       errors="replace", timeout=SSH_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            raise SshUnreachableError(f"no answer in {SSH_TIMEOUT_SECONDS} s") from None
    if completed.returncode == 255:
        message = last_line(completed.stderr) or "ssh failed"
        if "host key verification failed" in completed.stderr.lower():
            raise SshHostKeyError(f"{target.host} offered a host key that is not the stack's ({message})")
        if "permission denied" in message.lower():
            raise SshRefusedError(message)
        raise SshUnreachableError(message)
    if completed.returncode != 0:
        raise StatusError(f"the status probe failed on the node (exit {completed.returncode}): "
                          f"{last_line(completed.stderr) or 'no message'}")
    return NodeFacts.parse(completed.stdout)
