"""What the Pulumi side and the VM's scripts agree on: the metadata the VM reads, the files it writes.

startup.sh is static (no templating), so it spells these names itself; tests check both
sides against this module.
"""

from __future__ import annotations

from typing import Any

# Metadata attributes startup.sh reads (names and places only, never a secret value).
HF_TOKEN_SECRET_ATTRIBUTE = "tpu-vllm-hf-token-secret"
API_KEY_SECRET_ATTRIBUTE = "tpu-vllm-api-key-secret"
CACHE_DEVICE_ATTRIBUTE = "tpu-vllm-cache-device"
# The cache disk's size in GB (Compute Engine's GB: 2^30 bytes), what the stack controls of the disk: the boot script
# takes the one whole disk of that size, whatever the service names it (the device name is only a preference).
CACHE_SIZE_ATTRIBUTE = "tpu-vllm-cache-size-gb"
CACHE_MOUNT_ATTRIBUTE = "tpu-vllm-cache-mount"
IMAGE_ATTRIBUTE = "tpu-vllm-image"
SSH_HOST_KEY_SECRET_ATTRIBUTE = "tpu-vllm-ssh-host-key-secret"
# The Ops Agent's configuration (components/vm/ops_agent.py); absent when monitoring.enabled is false.
OPS_AGENT_CONFIG_ATTRIBUTE = "tpu-vllm-ops-agent-config"

# Files startup.sh writes at every boot. Each secret is its own root-only file (directory 0700, file 0600),
# mounted read-only into the containers that need it; no secret is ever in an environment or an argv.
SECRETS_DIR = "/etc/tpu-vllm/secrets"
HF_TOKEN_FILE = f"{SECRETS_DIR}/hf-token"
API_KEY_FILE = f"{SECRETS_DIR}/api-key"
# The boot script's status: its state on the first line, `boot <id>` on the second. Under /run (a tmpfs,
# empty at every boot) and stamped with the kernel's boot id, so no boot ever reads another boot's `ready`.
STATUS_FILE = "/run/tpu-vllm/startup-status"
BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"
# Held (flock) by the one run of startup.sh that owns the status, for its whole life; it names that run's pid. A
# second run waits for it: the guest agent's unit (KillMode=process) can start one while another goes on.
BOOT_LOCK_FILE = "/run/tpu-vllm/startup.lock"
# Where earlier versions kept the status (it survived reboots); startup.sh deletes it.
LEGACY_STATUS_FILE = "/var/lib/tpu-vllm/startup-status"
# The check the containers' units wait on (tpu-vllm-boot-ready.service runs it once per boot).
BOOT_READY_CHECK = "/etc/tpu-vllm/boot-ready-check.sh"
# Where earlier versions kept both secrets for `docker run --env-file`; startup.sh deletes it.
LEGACY_ENV_FILE = "/etc/tpu-vllm/env"
# The stack's SSH host key (components/vm/host_key.py), installed by startup.sh before the deploy dials: its
# own directory, not /etc/ssh/ssh_host_ed25519_key, which google-guest-agent rewrites on a new instance
# (google_guest_agent/instance_setup.go, generateSSHKeys); a drop-in that sshd_config includes first names
# it the only HostKey (Ubuntu's sshd_config starts with `Include /etc/ssh/sshd_config.d/*.conf` and leaves
# every HostKey line commented, so the image's own keys are no longer offered).
SSH_HOST_KEY_FILE = "/etc/ssh/tpu-vllm/ssh_host_ed25519_key"
SSHD_HOST_KEY_DROP_IN = "/etc/ssh/sshd_config.d/00-tpu-vllm-host-key.conf"
# The systemd unit that runs the startup-script metadata on GCE/TPU VM images (google-guest-agent).
BOOT_SCRIPT_UNIT = "google-startup-scripts.service"


def node_metadata(*, startup_script: str, ssh_keys: str, hf_token_secret: str, api_key_secret: str,
                  ssh_host_key_secret: str, cache_device: str, cache_mount: str, image: Any,
                  cache_size_gb: str = "", ops_agent_config: str = "") -> dict[str, Any]:
    """The node's metadata: the static boot script, the SSH key, and where the VM finds things (values, or Pulumi
    inputs the wing passes: the image is its digest pinned at the first `pulumi up`)."""
    metadata = {
        "startup-script": startup_script,
        "ssh-keys": ssh_keys,
        # The stack's own key in ssh-keys must be honoured (an org policy enforcing OS Login wins).
        "enable-oslogin": "FALSE",
        # With OS Login off, every project-wide SSH key would log in with sudo: only this node's key may.
        "block-project-ssh-keys": "TRUE",
        HF_TOKEN_SECRET_ATTRIBUTE: hf_token_secret,
        API_KEY_SECRET_ATTRIBUTE: api_key_secret,
        # The secret's name only: the key is read at boot with the VM's identity, like the two above.
        SSH_HOST_KEY_SECRET_ATTRIBUTE: ssh_host_key_secret,
        CACHE_DEVICE_ATTRIBUTE: cache_device,
        CACHE_SIZE_ATTRIBUTE: cache_size_gb,
        CACHE_MOUNT_ATTRIBUTE: cache_mount,
        IMAGE_ATTRIBUTE: image,
    }
    if ops_agent_config:
        metadata[OPS_AGENT_CONFIG_ATTRIBUTE] = ops_agent_config
    return metadata


def boot_ready_check_script() -> str:
    """POSIX sh: exits 0 only if this boot's run of the boot script wrote `ready`. STARTUP_ROOT prefixes its
    paths in tests, as in startup.sh; systemd never sets it."""
    return f"""#!/bin/sh
# tpu-vllm: did this boot's run of the boot script write `ready`? Run by tpu-vllm-boot-ready.service;
# rendered by the stack, no secret inside.
root="${{STARTUP_ROOT:-}}"
status_file="$root{STATUS_FILE}"
boot_id="$(cat "$root{BOOT_ID_FILE}")" || exit 1
state="" stamp=""
{{ read -r state; read -r stamp; }} <"$status_file" 2>/dev/null || true
if [ -z "$state" ]; then
  echo "tpu-vllm: no boot status in {STATUS_FILE}: the boot script has not run on this boot" >&2
  exit 1
fi
if [ "$stamp" != "boot $boot_id" ]; then
  echo "tpu-vllm: {STATUS_FILE} was written by another boot ($stamp), not this one ($boot_id)" >&2
  exit 1
fi
if [ "$state" != ready ]; then
  echo "tpu-vllm: the boot script's status is '$state', not ready: the containers stay stopped" >&2
  exit 1
fi
"""
