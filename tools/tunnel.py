"""Open the SSH tunnel to a vm stack's node, pinned to the stack's host key, on a local port of your choice.

    python -m tools.tunnel [--stack dev] [--local-port 8001]

The `sshTunnelCommand` output does the same on the serving port (8000); this one takes any free local port,
reads the key and the known host from the stack's outputs into a 0600 temp directory (removed when the
tunnel ends), and runs in the foreground (add `&` to keep the shell). The API key stays in the outputs.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from components.vm.deployment import TUNNEL_KEEPALIVE
from components.vm.host_key import pinned_ssh_options
from tools import status, status_outputs
from tools.status_report import StatusError


def tunnel_command(target: status.SshTarget, local_port: int, remote_port: int, key_file: Path,
                   known_hosts_file: Path) -> list[str]:
    """ssh -N -L local:127.0.0.1:remote to the node, accepting only the stack's host key."""
    alias = target.known_hosts.split(maxsplit=1)[0]
    return ["ssh", "-i", str(key_file), "-p", str(target.port), "-o", "IdentitiesOnly=yes",
            *pinned_ssh_options(str(known_hosts_file), alias), *TUNNEL_KEEPALIVE.split(),
            "-N", "-L", f"127.0.0.1:{local_port}:127.0.0.1:{remote_port}", f"{target.user}@{target.host}"]


def write_credentials(target: status.SshTarget, directory: Path) -> tuple[Path, Path]:
    key_file, known_hosts_file = directory / "key", directory / "known_hosts"
    key_file.touch(mode=0o600)
    key_file.write_text(target.private_key.rstrip("\n") + "\n")  # OpenSSH wants the final newline
    known_hosts_file.write_text(target.known_hosts.rstrip("\n") + "\n")
    return key_file, known_hosts_file


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.tunnel", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", help="the stack (default: the selected one)")
    parser.add_argument("--local-port", type=int, help="the port on this machine (default: the serving port)")
    args = parser.parse_args(argv)
    label = f"stack {args.stack}" if args.stack else "the selected stack"
    try:
        outputs = status.stack_outputs(args.stack)
        if outputs is None:
            raise StatusError(f"no {label}: deploy it first")
        remote_port = status.serving_port(outputs, label)
        host = status_outputs.required(outputs, "sshCommand", label).split()[-1].rpartition("@")[2]
        target = status.ssh_target(outputs, host, label)
    except StatusError as error:
        print(f"tools.tunnel: {error}", file=sys.stderr)
        return 2
    local_port = args.local_port or remote_port
    if not 0 < local_port < 65536:
        print(f"tools.tunnel: --local-port {local_port} is not a TCP port (1-65535)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="tpu-vllm-tunnel-") as directory:
        key_file, known_hosts_file = write_credentials(target, Path(directory))
        print(f"tools.tunnel: http://127.0.0.1:{local_port}/v1 -> {host} (Ctrl-C ends it)", file=sys.stderr)
        try:
            return subprocess.run(tunnel_command(target, local_port, remote_port, key_file,
                                                 known_hosts_file)).returncode
        except KeyboardInterrupt:
            return 0


if __name__ == "__main__":
    sys.exit(main())
