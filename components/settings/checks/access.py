"""Cross-key rules of access: who can reach the node, judged by the addresses the ranges cover
(policy/address_ranges.py), and the SSH key pair."""

from __future__ import annotations

from components.settings.findings import NO_VALUE, Finding
from components.settings.root import Settings
from policy import address_ranges

# One line that narrows SSH to this machine's IPv4 address (the node has no IPv6) and drops the opt-in.
NARROW_SSH_COMMAND = (
    "pulumi config rm --path 'tpu-vllm:access.sshSourceRanges' && "
    "pulumi config set --path 'tpu-vllm:access.sshSourceRanges[0]' \"$(curl -4 -s ifconfig.me)/32\" && "
    "pulumi config rm --path 'tpu-vllm:access.allowSshFromAnywhere'"
)


def access_checks(settings: Settings) -> list[Finding]:
    findings: list[Finding] = []
    access = settings.access
    serving = address_ranges.internet_exposure(access.serving_source_ranges)
    if serving and not access.allow_public_serving:
        findings.append(Finding(
            "access.servingSourceRanges", access.serving_source_ranges,
            f"opens the model endpoint to the internet ({serving.describe()})",
            "use the SSH tunnel or narrower ranges, or set tpu-vllm:access.allowPublicServing true if you mean it",
        ))
    elif serving:
        findings.append(Finding.warning(
            "access.allowPublicServing", True,
            f"the endpoint is open to the internet ({serving.describe()}); only the API key stands in front of it",
            "narrow access.servingSourceRanges, or use the SSH tunnel",
        ))
    # Only the vm platform deploys over SSH; GKE has no node to log in to.
    if settings.platform == "vm":
        findings += _ssh_checks(settings)
    if (access.ssh_public_key is None) != (settings.ssh_private_key is None):
        findings.append(Finding(
            "access.sshPublicKey", NO_VALUE,
            "set without tpu-vllm:sshPrivateKey, or the other way round: the two halves come as a pair",
            "set both (the private key with --secret) or neither (the stack generates an ED25519 key)",
            also_keys=("sshPrivateKey",),
        ))
    return findings


def _ssh_checks(settings: Settings) -> list[Finding]:
    access = settings.access
    if not access.ssh_source_ranges:
        return [Finding(
            "access.sshSourceRanges", [],
            "Pulumi starts the container over SSH from this machine, so the firewall must let it in",
            f"set your address: {NARROW_SSH_COMMAND}",
        )]
    ssh = address_ranges.internet_exposure(access.ssh_source_ranges)
    if ssh and not access.allow_ssh_from_anywhere:
        return [Finding(
            "access.sshSourceRanges", access.ssh_source_ranges, f"opens SSH to the internet ({ssh.describe()})",
            f"use your address ({NARROW_SSH_COMMAND}), or set tpu-vllm:access.allowSshFromAnywhere true if you "
            "mean it (key-only auth)",
        )]
    if ssh:
        # Logged by every `pulumi up` until the ranges are narrowed.
        return [Finding.warning(
            "access.allowSshFromAnywhere", True, f"SSH (key-only) is open to any address ({ssh.describe()})",
            f"narrow it to this machine: {NARROW_SSH_COMMAND}",
        )]
    return []
