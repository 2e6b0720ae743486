"""The front's own user on the VM, and the rule that keeps it away from the metadata server.

Both containers share the host's network (`--net=host`). vLLM must reach the metadata server: tpu-inference
reads the TPU's accelerator type, name and worker id from it (vllm-project/tpu-inference
tpu_inference/tpu_info.py, `get_tpu_metadata`, v0.11.1-2957), and JAX on a TPU VM its topology env
(jax-ml/jax jax/_src/clusters/cloud_tpu_cluster.py, `get_metadata`, v0.11.0-510). The front needs nothing
from it, but the same server hands any caller the VM identity's token, which reads every secret of the stack.

So the front runs as a user of its own (a numeric uid:gid no host account has), without capabilities and
unable to gain privileges, and a rule in the host's OUTPUT chain rejects everything that user's sockets send
to the metadata server's addresses. The front's unit installs it (idempotently) before every start, restarts
included (`ExecStartPre=`, systemd_units.front_unit): the oneshot unit it also requires runs once per boot and
then stays active (RemainAfterExit), so neither Restart= nor `systemctl restart` runs it again, and a rule
flushed meanwhile would stay gone. The xt_owner match reads the uid of the process that created the socket
(linux net/netfilter/xt_owner.c, `owner_mt`: the socket file's `f_cred->fsuid`), so it holds for every process
in the front's container, whatever address spelling or port it uses, and leaves root (vLLM) alone.

Why the serving step and not startup.sh: the boot script travels inside the queued resource's request, so a
change to it replaces a live node; the files the serving step installs (components/vm/serving_step.py) are
sent over SSH and change nothing else. Nothing keeps iptables rules across a reboot; what runs before each
start puts them back.
"""

from __future__ import annotations

import shlex

from components.vm import boot_contract

# The front's user and group: 65525, which no account or service on the node has. Debian policy 9.2.2 reserves
# 65000-65533 (never allocated; 60000-64999 are base-passwd's), useradd (login.defs UID_MAX 60000, what
# google-guest-agent's accounts use) stays below, systemd's DynamicUser= takes 61184-65519 (systemd.io
# UIDS-GIDS, its default build) and nobody/nogroup are 65534 (65533 on SUSE): the rule names the front alone.
FRONT_UID = 65525
FRONT_GID = 65525

# The metadata server's addresses: 169.254.169.254 (google-auth 2.63.0 compute_engine/_metadata.py,
# `_GCE_DEFAULT_MDS_IP`; metadata.google.internal resolves to it, from /etc/hosts on Google's images and from
# the metadata server's own DNS, which is the same address) and its IPv6 address on IPv6 VMs, fd20:ce::254
# (named in SSRF deny-lists, not found in a Google source here; blocked too, at no cost).
METADATA_IPV4 = "169.254.169.254/32"
METADATA_IPV6 = "fd20:ce::254/128"

# On the VM (installed by the serving step; /etc/tpu-vllm holds no secret, /run is emptied at every boot).
BLOCK_SCRIPT = "/etc/tpu-vllm/metadata-block.sh"
BLOCK_UNIT = "tpu-vllm-metadata-block.service"
FRONT_KEY_SCRIPT = "/etc/tpu-vllm/front-key.sh"
# The front's copy of the API key: its user must read it, and startup.sh writes the original root-only.
FRONT_KEY_DIR = "/run/tpu-vllm/front-key"
FRONT_KEY_FILE = f"{FRONT_KEY_DIR}/api-key"


def front_user_args() -> list[str]:
    """`docker run` options for the front: its own user, no capabilities, no setuid way back to root.

    moby daemon/oci_linux.go `getUser` (docker v29.7.2) takes a numeric uid:gid that the image's passwd lacks
    as given (moby/sys/user v0.4.1 user.go, GetExecUser); `no-new-privileges` (daemon/daemon_unix.go) keeps a
    setuid binary in the image from making the process root again, and root is what the rule exempts."""
    return ["--user", f"{FRONT_UID}:{FRONT_GID}", "--cap-drop", "ALL", "--security-opt", "no-new-privileges"]


def front_tmpfs_owner() -> str:
    """tmpfs options giving the front's private run directory to its user (moby/sys/mount v0.3.5
    flags_unix.go validFlags: uid and gid are tmpfs options docker passes on)."""
    return f"uid={FRONT_UID},gid={FRONT_GID}"


def block_rules() -> list[list[str]]:
    """Each rule as iptables/ip6tables arguments after the command and the -C/-I verb."""
    owner = ["-m", "owner", "--uid-owner", str(FRONT_UID), "-j", "REJECT"]
    return [["iptables", "OUTPUT", "-d", METADATA_IPV4, *owner],
            ["ip6tables", "OUTPUT", "-d", METADATA_IPV6, *owner]]


def block_script() -> str:
    """POSIX sh run by the oneshot unit: adds each rule at the top of OUTPUT unless it is there (-C), so a
    second run adds nothing; fails (and the front stays down) if a rule cannot be installed."""
    lines = []
    for command, chain, *rule in block_rules():
        spec = shlex.join(rule)
        lines.append(f"{command} -w -C {chain} {spec} 2>/dev/null || {command} -w -I {chain} 1 {spec}")
        lines.append(f"{command} -w -C {chain} {spec}")
    body = "\n".join(lines)
    return f"""#!/bin/sh
# tpu-vllm: the front's user (uid {FRONT_UID}) may not reach the metadata server, whose token reads the
# stack's secrets. Run by {BLOCK_UNIT} at every boot and by the front's unit before each start;
# rendered by the stack, no secret inside.
set -eu
{body}
"""


def block_unit() -> str:
    return f"""# Written by the tpu-vllm serving step (serve.sh); the stack renders it, `pulumi up` replaces it.
[Unit]
Description=tpu-vllm: the front's user (uid {FRONT_UID}) may not reach the metadata server
# Nothing keeps iptables rules across a reboot: the front's unit requires this one and starts after it, so it
# runs on every boot before the front does; the front's unit also runs the script before each of its starts
# (this unit, once active, is not run again). Never undone on stop: a front without it must not run.

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh {BLOCK_SCRIPT}
"""


def front_key_script() -> str:
    """POSIX sh run before each start of the front: a copy of the API key only the front's user can read.
    STARTUP_ROOT prefixes its paths in tests, as in startup.sh; systemd never sets it."""
    key_dir, key_file = FRONT_KEY_DIR, FRONT_KEY_FILE
    owner = f"-o {FRONT_UID} -g {FRONT_GID}"
    return f"""#!/bin/sh
# tpu-vllm: the front runs as uid {FRONT_UID}; startup.sh's key file is root's. Run by the front's unit before
# each start, so a key rewritten at boot is the one it gets; rendered by the stack, no secret inside.
set -eu
root="${{STARTUP_ROOT:-}}"
install -d -m 0700 {owner} "$root{key_dir}"
install -m 0400 {owner} "$root{boot_contract.API_KEY_FILE}" "$root{key_file}.tmp"
mv -f "$root{key_file}.tmp" "$root{key_file}"
"""
