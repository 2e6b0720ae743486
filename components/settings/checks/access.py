"""Cross-key rules of access: who can reach the node, judged by the addresses the ranges cover."""

from __future__ import annotations

from components.settings.access import AccessSettings
from components.settings.facts import NAMESPACE
from policy import address_ranges

# One line that narrows SSH to this machine's IPv4 address (the node has no IPv6) and drops the opt-in.
NARROW_SSH_COMMAND = (
    "pulumi config rm --path 'tpu-vllm:access.sshSourceRanges' && "
    "pulumi config set --path 'tpu-vllm:access.sshSourceRanges[0]' \"$(curl -4 -s ifconfig.me)/32\" && "
    "pulumi config rm --path 'tpu-vllm:access.allowSshFromAnywhere'"
)


def _access_checks(access: AccessSettings, warnings: list[str], needs_ssh: bool = True) -> list[str]:
    """Who can reach the node, judged by the addresses the ranges cover (policy/address_ranges.py)."""
    errors: list[str] = []
    serving = address_ranges.internet_exposure(access.serving_source_ranges)
    if serving and not access.allow_public_serving:
        errors.append(
            f"{NAMESPACE}:access.servingSourceRanges = {access.serving_source_ranges}: opens the model "
            f"endpoint to the internet ({serving.describe()}); use the SSH tunnel or narrower ranges, or set "
            f"{NAMESPACE}:access.allowPublicServing true if you mean it"
        )
    elif serving:
        warnings.append(
            f"access.allowPublicServing: the endpoint is open to the internet ({serving.describe()}); only the "
            "API key stands in front of it"
        )
    # Only the vm platform deploys over SSH; GKE has no node to log in to.
    if needs_ssh and not access.ssh_source_ranges:
        errors.append(
            f"{NAMESPACE}:access.sshSourceRanges = []: Pulumi starts the container over SSH from "
            f"this machine, so the firewall must let it in; set your address: {NARROW_SSH_COMMAND}"
        )
        return errors
    ssh = address_ranges.internet_exposure(access.ssh_source_ranges)
    if ssh and not access.allow_ssh_from_anywhere:
        errors.append(
            f"{NAMESPACE}:access.sshSourceRanges = {access.ssh_source_ranges}: opens SSH to the internet "
            f"({ssh.describe()}); use your address ({NARROW_SSH_COMMAND}), or set "
            f"{NAMESPACE}:access.allowSshFromAnywhere true if you mean it (key-only auth)"
        )
    elif ssh:
        # Logged by every `pulumi up` until the ranges are narrowed.
        warnings.append(
            f"access.allowSshFromAnywhere: SSH (key-only) is open to any address ({ssh.describe()}); "
            f"narrow it to this machine: {NARROW_SSH_COMMAND}"
        )
    return errors
