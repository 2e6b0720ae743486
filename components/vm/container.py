"""The VM's two containers: vLLM on 127.0.0.1, and the key-checking front (nginx) on the serving port.

systemd runs both in the foreground (components/vm/systemd_units.py). No secret is ever an argument or an
environment value: the HF token and the API key are root-only files that startup.sh writes at boot,
mounted read-only. vLLM gets `HF_TOKEN_PATH` (huggingface_hub reads the token from that file) and its
entry command reads the key from its file into `VLLM_API_KEY` inside the container; the front's entry
command (components/serving/front.py) reads the same file. `docker inspect` therefore shows paths, never values.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Literal

from components.serving import front
from components.serving.spec import ServingSpec
from components.settings.cache import CacheSettings
from components.settings.vllm import VllmSettings
from components.vm import metadata_block
from components.vm.boot_contract import API_KEY_FILE, HF_TOKEN_FILE

CONTAINER_NAME = "tpu-vllm"
FRONT_CONTAINER_NAME = "tpu-vllm-front"
# On the cache disk: where the compile cache and (vllm.weightsOnDisk) the checkpoint live. The cache's directory is
# where earlier versions' mount of <disk>/vllm at /root/.cache/vllm put vLLM's default VLLM_XLA_CACHE_PATH
# (~/.cache/vllm/xla_cache, vllm/envs.py in vLLM 0.33.0), so a disk compiled by them stays warm.
CACHE_DISK_XLA_DIR = "vllm/xla_cache"
CACHE_DISK_WEIGHTS_DIR = "huggingface"
# Inside both containers the key is at the spec's path (the front's); the token only in vLLM's.
CONTAINER_API_KEY_FILE = front.KEY_FILE

# Files serve.sh installs on the VM (none holds a secret).
FRONT_CONFIG_FILE = "/etc/tpu-vllm/front/nginx.conf"
VLLM_RUNNER = "/etc/tpu-vllm/run-vllm.sh"
FRONT_RUNNER = "/etc/tpu-vllm/run-front.sh"

# devices access: libtpu pins host memory for DMA, which the default 64 KiB memlock limit refuses.
MEMLOCK_UNLIMITED = "memlock=-1:-1"
TPU_DEVICE_GLOBS = ("/dev/vfio/*", "/dev/accel*")
# The front's private tmpfs: the key's map line, the pid file and nginx's temp files.


def front_tmpfs(run_dir: str) -> str:
    return f"{run_dir}:rw,noexec,nosuid,nodev,size=128m,mode=0755,{metadata_block.front_tmpfs_owner()}"


@dataclass(frozen=True)
class VmServing:
    """What the VM's renderers read: the serving spec, and the two facts of the host it does not hold."""

    spec: ServingSpec
    cache_mount: str
    """cache.mountPoint: where the compile-cache disk is mounted on the node."""
    tpu_access: Literal["privileged", "devices"]
    """vllm.containerAccess: how vLLM's container reaches the chip."""

    @staticmethod
    def of(spec: ServingSpec, *, vllm: VllmSettings, cache: CacheSettings) -> VmServing:
        return VmServing(spec=spec, cache_mount=cache.mount_point, tpu_access=vllm.container_access)


def tpu_access_args(tpu_access: str) -> list[str]:
    """privileged: what the build log ran. devices: serve.sh's runner adds each TPU device node found at start."""
    if tpu_access == "privileged":
        return ["--privileged"]
    return ["--ulimit", MEMLOCK_UNLIMITED]


def docker_run_args(vm: VmServing) -> list[str]:
    """vLLM's `docker run` options, image and command, for a foreground run under systemd."""
    spec, mount = vm.spec, vm.cache_mount
    args = [
        "--name", CONTAINER_NAME, "--net=host", *tpu_access_args(vm.tpu_access),
        # The host's /dev/shm, as the build log ran it, and the spec's size (GKE's emptyDir has the same). With the
        # host's mounted, docker makes no shm tmpfs of its own (moby daemon setupIpcDirs: only when no mount covers
        # /dev/shm), so the size states the spec; the host's tmpfs is what bounds it on the node.
        "-v", "/dev/shm:/dev/shm", "--shm-size", docker_size(spec.shm_bytes),
        "-v", f"{mount}/{CACHE_DISK_XLA_DIR}:{spec.compile_cache_path}",
        "-v", f"{HF_TOKEN_FILE}:{spec.hf_token_file}:ro",
        "-v", f"{API_KEY_FILE}:{spec.api_key_file}:ro",
    ]
    if spec.weights_on_disk:
        # Otherwise HF_HOME is /dev/shm: the 9.54 GiB checkpoint downloads in ~10 s, faster than reading it from PD.
        args += ["-v", f"{mount}/{CACHE_DISK_WEIGHTS_DIR}:{spec.hf_home}"]
    for name, value in spec.environment:
        args += ["-e", f"{name}={value}"]
    entrypoint, *entry_args = spec.vllm_entry
    return args + ["--entrypoint", entrypoint, spec.vllm_image, *entry_args, *spec.serve_args]


def docker_size(size_bytes: int) -> str:
    """A size as `docker run` reads it: `g` and `m` are binary units, GiB and MiB (docker/go-units v0.5.0 size.go,
    RAMInBytes parses with binaryMap)."""
    if size_bytes % 1024**3 == 0:
        return f"{size_bytes // 1024**3}g"
    return f"{size_bytes // 1024**2}m"


def front_docker_run_args(spec: ServingSpec) -> list[str]:
    """The front's `docker run` options and image; its command is spec.front_entry."""
    return [
        "--name", FRONT_CONTAINER_NAME, "--net=host",
        # Its own user, kept from the metadata server (components/vm/metadata_block.py), with its copy of the key.
        *metadata_block.front_user_args(),
        "-v", f"{FRONT_CONFIG_FILE}:{spec.front_config_path}:ro",
        "-v", f"{metadata_block.FRONT_KEY_FILE}:{spec.api_key_file}:ro",
        "--tmpfs", front_tmpfs(spec.front_run_dir),
        spec.front_image,
    ]


def front_runner_script(spec: ServingSpec) -> str:
    """What tpu-vllm-front.service runs. The entry script is a quoted here-document, so it reads as written."""
    command, flag, entry = spec.front_entry
    delimiter = "TPU_VLLM_FRONT_ENTRY"
    if delimiter in entry.splitlines():
        raise ValueError(f"the front's entry script contains the line {delimiter}")
    return f"""#!/bin/bash
# Run by tpu-vllm-front.service, which removes the previous container first: nginx in the foreground on the
# serving port. Rendered by the stack; no secret: the key is a root-only file mounted read-only.
set -euo pipefail
IFS= read -r -d '' entry <<'{delimiter}' || true
{entry}{'' if entry.endswith(chr(10)) else chr(10)}{delimiter}
exec docker run {shlex.join(front_docker_run_args(spec))} {command} {flag} "$entry"
"""


def render_docker_command(vm: VmServing) -> str:
    """vLLM's run as one line, for the outputs (`devices` adds the device nodes found at start)."""
    return shlex.join(["sudo", "docker", "run", *docker_run_args(vm)])
