"""The systemd units that bring both containers back by themselves after a reboot of the node.

Each container unit starts only after Docker, this boot's run of the boot script (which writes the secret
files on every boot) and, for vLLM, the compile-cache mount; it removes the previous container and creates
a fresh one from the runner script serve.sh installed, so a restart never inherits an old container's
flags. A crash restarts the container, a few times an hour at most: a setting that fails ~11 minutes into
every compile must not loop for the whole run.

The boot script's own unit (google-startup-scripts.service) is a oneshot that goes inactive when it
finishes, so requiring it would run the boot script again at every start of a container. Instead a
oneshot of ours, ordered after it, checks its status file once per boot and stays active (RemainAfterExit);
the container units require that one. The check passes only on a `ready` stamped with this boot's id.
"""

from __future__ import annotations

from components.serving.spec import ServingSpec
from components.settings.text import unprintable
from components.vm import boot_contract, container, metadata_block
from components.vm.container import VmServing

UNIT_DIR = "/etc/systemd/system"
VLLM_UNIT = "tpu-vllm.service"
FRONT_UNIT = "tpu-vllm-front.service"
BOOT_READY_UNIT = "tpu-vllm-boot-ready.service"
DOCKER_UNIT = "docker.service"
# vLLM: a crash costs a compile (~8 min warm, ~14 cold); three tries an hour, then the unit stays failed.
VLLM_RESTART_SECONDS = 30
VLLM_START_LIMIT = (3, 3600)
# The front starts in a second; it may retry faster.
FRONT_RESTART_SECONDS = 5
FRONT_START_LIMIT = (5, 600)

_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:_.")


def escape_path(path: str) -> str:
    """`systemd-escape --path PATH`: the name systemd gives the unit of a mount point."""
    trimmed = "/".join(part for part in path.split("/") if part)
    if not trimmed:
        return "-"
    out = []
    for index, char in enumerate(trimmed):
        if char == "/":
            out.append("-")
        elif char in _SAFE and not (index == 0 and char == "."):
            out.append(char)
        else:
            out.extend(f"\\x{byte:02x}" for byte in char.encode())
    return "".join(out)


def unit_text(value: str) -> str:
    """A value for a unit line that takes free text (Description=), carried inertly: systemd resolves specifiers in
    it, so `%` is written `%%` ("Use "%%" in place of "%" to specify a single percent sign", systemd.unit(5),
    SPECIFIERS); a line ending in a backslash is joined with the next (systemd.syntax(7)), and a newline, NUL or
    CR would end the line there, so those are refused (systemd 252, man/systemd.unit.xml and man/systemd.syntax.xml,
    as Debian's systemd 252.38 ships them). The settings refuse all of these first; this keeps a renderer honest."""
    bad = unprintable(value)
    if bad is not None or value.endswith("\\"):
        raise ValueError(f"cannot write {value!r} into a systemd unit line: it holds {bad or 'a trailing backslash'}")
    return value.replace("%", "%%")


def mount_unit(mount_point: str) -> str:
    return escape_path(mount_point) + ".mount"


def unit_path(name: str) -> str:
    return f"{UNIT_DIR}/{name}"


def boot_ready_unit() -> str:
    return f"""# Written by the tpu-vllm serving step (serve.sh); the stack renders it, `pulumi up` replaces it.
[Unit]
Description=tpu-vllm: this boot's run of the boot script wrote the secret files and mounted the cache disk
# Ordered after the boot script, never pulling it in: it is a oneshot, and starting it would run it again.
After={boot_contract.BOOT_SCRIPT_UNIT}

[Service]
Type=oneshot
RemainAfterExit=yes
# Passes only on this boot's `ready` (the status is stamped with the boot id): never on a status an
# earlier boot left, nor when the boot script failed, was stopped or never ran.
ExecStart=/bin/sh {boot_contract.BOOT_READY_CHECK}
"""


def _unit(*, description: str, why: str, requires: str, start_limit: tuple[int, int], service: str) -> str:
    """Both containers' units: the same header, ordering and install section; `service` is the [Service] body."""
    burst, interval = start_limit
    return f"""# Written by the tpu-vllm serving step (serve.sh); the stack renders it, `pulumi up` replaces it.
[Unit]
Description={unit_text(description)}
# {why}
Requires={requires}
After={requires} network-online.target
Wants=network-online.target
StartLimitIntervalSec={interval}
StartLimitBurst={burst}

[Service]
Type=simple
{service}
[Install]
WantedBy=multi-user.target
"""


def vllm_unit(vm: VmServing) -> str:
    where = f"{vm.spec.host}:{vm.spec.upstream_port}"
    return _unit(
        description=f"tpu-vllm: vLLM serving {vm.spec.model} on {where}, behind {FRONT_UNIT}",
        why="The secret files come from the boot script, the compile cache from its own disk: start after both.",
        requires=f"{DOCKER_UNIT} {BOOT_READY_UNIT} {mount_unit(vm.cache_mount)}",
        start_limit=VLLM_START_LIMIT,
        service=f"""# Replace, never restart: a new start must not inherit an old container's flags. libtpu's lock file
# (/tmp/libtpu_lockfile, jax-ml/jax issue 10192) is in the container's own /tmp, which no -v mounts, and its
# lock is held by the process: removing the old container ends any holder.
ExecStartPre=-docker rm -f {container.CONTAINER_NAME}
ExecStart=bash {container.VLLM_RUNNER}
ExecStop=docker stop --time 30 {container.CONTAINER_NAME}
Restart=on-failure
RestartSec={VLLM_RESTART_SECONDS}
TimeoutStopSec=60
""")


def front_unit(spec: ServingSpec) -> str:
    upstream = f"{spec.host}:{spec.upstream_port}"
    return _unit(
        description=(f"tpu-vllm front: nginx on :{spec.listen_port}, the key on all but /health, "
                     f"before vLLM on {upstream}"),
        why=("The API key file comes from the boot script; the front's user is kept from the metadata server "
             "before it runs."),
        requires=f"{DOCKER_UNIT} {BOOT_READY_UNIT} {metadata_block.BLOCK_UNIT}",
        start_limit=FRONT_START_LIMIT,
        service=f"""# Before every start, restarts included: the block unit stays active once run (RemainAfterExit), so
# requiring it re-adds nothing a flush of OUTPUT removed. '+': root whatever User=, capability or namespacing
# options the unit gains, though its control-group-wide ones (DevicePolicy=, IPAddressDeny=...) still apply.
ExecStartPre=+/bin/sh {metadata_block.BLOCK_SCRIPT}
ExecStartPre=-docker rm -f {container.FRONT_CONTAINER_NAME}
# The front runs as uid {metadata_block.FRONT_UID}: its own copy of this boot's key.
ExecStartPre=/bin/sh {metadata_block.FRONT_KEY_SCRIPT}
ExecStart=bash {container.FRONT_RUNNER}
ExecStop=docker stop --time 10 {container.FRONT_CONTAINER_NAME}
Restart=on-failure
RestartSec={FRONT_RESTART_SECONDS}
""")
