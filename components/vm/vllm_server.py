"""The serving step: over SSH, start the log's vLLM container, wait for health, smoke-test it."""

from __future__ import annotations

import hashlib
import shlex
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_command as command

from components import serve_command
from components.settings import Settings
from components.vm import boot_contract, container

SERVE_SCRIPT = Path(__file__).resolve().parents[2] / "startup" / "serve.sh"


def serve_script_text() -> str:
    return SERVE_SCRIPT.read_text()


def remote_command_text(settings: Settings) -> str:
    """`sudo bash -s -- ...`: flags only; the script arrives on stdin, secrets stay on the VM."""
    args = [
        "--status", boot_contract.STATUS_FILE,
        "--env-file", boot_contract.ENV_FILE,
        "--container", container.CONTAINER_NAME,
        "--port", str(settings.vllm.port),
        "--model", settings.vllm.model,
        "--health-timeout", str(settings.vllm.health_timeout_seconds),
        "--", *container.docker_run_args(settings),
    ]
    return "sudo bash -s -- " + shlex.join(args)


def content_hash(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


@dataclass
class VllmServerArgs:
    settings: Settings
    host: pulumi.Input[str]
    """The node's external IP."""
    node_uid: pulumi.Input[str]
    """Changes with every new node (its own id; the name is fixed per stack): re-runs the serving step."""
    ssh_user: str
    ssh_private_key: pulumi.Output[str]


class VllmServer(pulumi.ComponentResource):
    """Nothing here runs on destroy, so destroy works after GCP has deleted the node."""

    command: command.remote.Command
    serve_command: str
    stdout: pulumi.Output[str]

    def __init__(self, name: str, args: VllmServerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-vllm:serving:VllmServer", name, None, opts)
        text = remote_command_text(args.settings)
        script = serve_script_text()
        self.serve_command = serve_command.render_serve_command(args.settings)
        self.command = command.remote.Command(
            f"{name}-serve",
            connection=command.remote.ConnectionArgs(
                host=args.host,
                user=args.ssh_user,
                private_key=args.ssh_private_key,
                # A fresh node's sshd and guest agent take a minute or two to accept the key.
                dial_error_limit=60,
                per_dial_timeout=30,
            ),
            create=text,
            stdin=script,
            triggers=[args.node_uid, content_hash(text, script)],
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.stdout = self.command.stdout
        self.register_outputs({"stdout": self.stdout})
