"""The serving step: over SSH, install the two containers as systemd units, wait for health, smoke-test.

The remote command's text is serve.sh's flags and vLLM's `docker run` arguments (what a reviewer reads
in the plan). Its stdin is serve.sh followed by the files it installs, each a quoted here-document so a
preview shows them as written: the front's nginx.conf and runner, the boot-ready check, the systemd units
and the smoke test (startup/smoke_test.py). None holds a
secret; the secrets stay in the files startup.sh wrote on the VM.
"""

from __future__ import annotations

import hashlib
import shlex
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_command as command

from components.settings.access import AccessSettings
from components.settings.checks.access import NARROW_SSH_COMMAND
from components.settings.facts import NAMESPACE
from components.vm import boot_contract, container, metadata_block, systemd_units
from components.vm.container import VmServing
from components.vm.ssh_reachable import SshReachable

SERVE_SCRIPT = Path(__file__).resolve().parents[2] / "startup" / "serve.sh"
SMOKE_TEST_SCRIPT = SERVE_SCRIPT.with_name("smoke_test.py")
# Where serve.sh finds the smoke test it runs once vLLM and the front are healthy.
SMOKE_TEST_FILE = "/etc/tpu-vllm/smoke-test.py"


FILE_DELIMITER = "TPU_VLLM_FILE"
SSH_DIALS = 14
SSH_DIAL_TIMEOUT_SECONDS = 15
# The serving step's own dials, once SshReachable has seen an SSH server identify itself. Until the guest
# agent has added the user and startup.sh has installed the stack's host key, each handshake fails at once:
# pulumi-command v1.2.1 retries every dial error, retry.Until's delay growing 1.5x from 100 ms to 5 s
# (pulumi/pulumi sdk/go/common/util/retry/until.go). It gives up when try + 1 > dialErrorLimit, try counting
# from 0 (connection.go reachedDialingErrorLimit), so a limit of 30 is 31 dials and 30 back-offs:
# ~11 s + 20 x 5 s, about 2 min.
# perDialTimeout bounds only the TCP connect (it becomes ssh.ClientConfig.Timeout, which golang.org/x/crypto
# v0.48.0 ssh/client.go Dial hands to net.DialTimeout alone), and dialErrorLimit counts dials that returned an
# error: a handshake that stalls has neither, and holds the step until `pulumi up` is interrupted. What bounds
# it is outside pulumi-command: SshReachable, just before, requires the server's identification within its
# bound (a peer that accepts and never speaks fails there), and OpenSSH's sshd drops a connection not logged
# in after LoginGraceTime (sshd_config(5): 120 s by default), which ends the dial with an error, retried.
SSH_HANDSHAKE_DIALS = 30
SSH_HANDSHAKE_TIMEOUT_SECONDS = 5


def serve_script_text() -> str:
    return SERVE_SCRIPT.read_text()


def installed_files(vm: VmServing) -> list[tuple[str, str]]:
    """(path on the VM, content) of every file serve.sh installs besides vLLM's runner."""
    return [
        (container.FRONT_CONFIG_FILE, vm.spec.front_config),
        (container.FRONT_RUNNER, container.front_runner_script(vm.spec)),
        (boot_contract.BOOT_READY_CHECK, boot_contract.boot_ready_check_script()),
        (metadata_block.BLOCK_SCRIPT, metadata_block.block_script()),
        (metadata_block.FRONT_KEY_SCRIPT, metadata_block.front_key_script()),
        (systemd_units.unit_path(metadata_block.BLOCK_UNIT), metadata_block.block_unit()),
        (systemd_units.unit_path(systemd_units.BOOT_READY_UNIT), systemd_units.boot_ready_unit()),
        (systemd_units.unit_path(systemd_units.FRONT_UNIT), systemd_units.front_unit(vm.spec)),
        (systemd_units.unit_path(systemd_units.VLLM_UNIT), systemd_units.vllm_unit(vm)),
        (SMOKE_TEST_FILE, SMOKE_TEST_SCRIPT.read_text()),
    ]


def remote_command_text(vm: VmServing) -> str:
    """`sudo bash -s -- ...`: flags and vLLM's docker run arguments; no secret, the rest arrives on stdin."""
    spec = vm.spec
    args = [
        "--status", boot_contract.STATUS_FILE,
        "--api-key-file", boot_contract.API_KEY_FILE,
        "--model", spec.model,
        "--port", str(spec.listen_port),
        "--upstream-port", str(spec.upstream_port),
        "--container", container.CONTAINER_NAME,
        "--front-container", container.FRONT_CONTAINER_NAME,
        "--runner", container.VLLM_RUNNER,
        "--vllm-unit", systemd_units.VLLM_UNIT,
        "--front-unit", systemd_units.FRONT_UNIT,
        "--smoke-test", SMOKE_TEST_FILE,
        *(["--tpu-devices"] if vm.tpu_access == "devices" else []),
        "--health-timeout", str(spec.health_timeout_seconds),
        "--", *container.docker_run_args(vm),
    ]
    return "sudo bash -s -- " + shlex.join(args)


def delimiter_for(body: str) -> str:
    """FILE_DELIMITER, or a longer word when a line of the file is that word: a quoted here-document ends at the
    first line that is exactly its delimiter (bash(1), Here Documents), so the file is carried whole whatever it
    holds."""
    lines = set(body.splitlines())
    delimiter = FILE_DELIMITER
    while delimiter in lines:
        delimiter += "_"
    return delimiter


def serve_stdin(vm: VmServing, failure_note: str = "") -> str:
    """serve.sh, then `stage_file PATH` with each installed file as a quoted here-document, then `main`.
    `failure_note` is what serve.sh prints last when it fails: pulumi-command ends its error with the
    command's output (v1.2.1 provider/pkg/provider/remote/commandOutputs.go, run), so the user reads it."""
    parts = [serve_script_text().rstrip("\n"), "",
             "# ---- Rendered by the stack from its settings (no secret): the files this step installs ----"]
    if failure_note:
        parts.append(f"FAILURE_NOTE={shlex.quote(failure_note)}")
    for path, text in installed_files(vm):
        body = text if text.endswith("\n") else text + "\n"
        delimiter = delimiter_for(body)
        parts.append(f"stage_file {shlex.quote(path)} <<'{delimiter}'\n{body}{delimiter}")
    parts.append("main")
    return "\n".join(parts) + "\n"


def content_hash(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


@dataclass
class ServingStepArgs:
    remote_command: pulumi.Input[str]
    """remote_command_text: what runs over SSH (flags and vLLM's docker run arguments, the image by digest)."""
    stdin: pulumi.Input[str]
    """serve_stdin: serve.sh and the files it installs, with the billing note it prints last on failure."""
    stdin_without_note: pulumi.Input[str]
    """The same without the note: what the triggers hash (the note changes only with the node)."""
    serve_command: str
    """The `vllm serve` line the container runs, shown as an output."""
    host: pulumi.Input[str]
    """The node's external IP."""
    node_uid: pulumi.Input[str]
    """Changes with every new node (its own id; the name is fixed per stack): re-runs the serving step."""
    ssh_user: str
    ssh_private_key: pulumi.Output[str]
    ssh_host_key: pulumi.Input[str]
    """The stack's host key (`ssh-ed25519 AAAA...`, host_key.py): the only key the serving step accepts."""
    ssh_blocked_cause: str
    """ssh_blocked_cause: why SSH usually does not answer, with the setting, its value and the fix."""
    billing_note: pulumi.Input[str]
    """still_billing: that the TPU bills, until when, and the two ways out."""


def ssh_blocked_cause(access: AccessSettings) -> str:
    """Why SSH usually does not answer here, with the setting, its value and the fix."""
    return (f"The firewall lets SSH in only from {NAMESPACE}:access.sshSourceRanges = "
            f"{access.ssh_source_ranges}; if this machine's address is not in it (a /32 from another "
            f"network), narrow it to this machine: {NARROW_SSH_COMMAND}")


# The type token of the days this class was called VllmServer: kept, so a live stack's URN (and its children's)
# stays the same and nothing is replaced; only the Python name says what it is now.
TYPE_TOKEN = "tpu-vllm:serving:VllmServer"


class ServingStep(pulumi.ComponentResource):
    """The SSH serving step (not the server: that is components/serving/spec.py): installs and starts the units
    on the node, waits for health, smoke-tests. Nothing here runs on destroy, so destroy works after GCP has
    deleted the node."""

    command: command.remote.Command
    serve_command: str
    stdout: pulumi.Output[str]

    def __init__(self, name: str, args: ServingStepArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE_TOKEN, name, None, opts)
        text = args.remote_command
        self.serve_command = args.serve_command
        # Fails within the serving step's own dial bounds, with a message pulumi-command's dial error lacks, and
        # fails a peer that accepts and never identifies itself, which pulumi-command would wait on for good.
        self.ssh_reachable = SshReachable(
            f"{name}-ssh-reachable",
            {"host": args.host, "port": 22, "nodeUid": args.node_uid, "dials": SSH_DIALS,
             "dialTimeoutSeconds": SSH_DIAL_TIMEOUT_SECONDS, "backoffSeconds": 1.0,
             "cause": args.ssh_blocked_cause, "billing": args.billing_note},
            pulumi.ResourceOptions(parent=self),
        )
        self.command = command.remote.Command(
            f"{name}-serve",
            connection=command.remote.ConnectionArgs(
                host=args.host,
                user=args.ssh_user,
                private_key=args.ssh_private_key,
                # pulumi-command v1.2.1 (provider/pkg/provider/remote/connection.go, SSHConfig): hostKey is
                # parsed as an authorized_keys line and checked with x/crypto's ssh.FixedHostKey, the host key
                # algorithms narrowed to its type; without it the provider takes any key
                # (ssh.InsecureIgnoreHostKey). A node offering any other key fails the handshake, retried.
                host_key=args.ssh_host_key,
                # A fresh node's sshd and guest agent take a minute or two to accept the key, and startup.sh
                # installs the host key after it reads its secret. A firewall that drops the deployer's
                # packets (access.sshSourceRanges narrowed past its address) has already failed SshReachable
                # within ~5 minutes of ACTIVE; pulumi-command v1.2.1 (provider/pkg/provider/remote/
                # connection.go, Dial/dialWithRetry) then makes at most dialErrorLimit failed dials, each TCP
                # connect bounded by perDialTimeout (the handshake is not: see SSH_HANDSHAKE_DIALS), with
                # retry.Until's back-off (<= 5 s) between them.
                dial_error_limit=SSH_HANDSHAKE_DIALS,
                per_dial_timeout=SSH_HANDSHAKE_TIMEOUT_SECONDS,
            ),
            create=text,
            stdin=args.stdin,
            # The note changes only with the node, which node_uid already triggers on.
            triggers=[args.node_uid, pulumi.Output.all(text, args.stdin_without_note).apply(
                lambda parts: content_hash(*parts))],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.ssh_reachable]),
        )
        self.stdout = self.command.stdout
        self.register_outputs({"stdout": self.stdout})
