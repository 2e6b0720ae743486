"""The VM's two containers: vLLM on 127.0.0.1, and the key-checking front (nginx) on the serving port.

systemd runs both in the foreground (components/vm/systemd_units.py). No secret is ever an argument or an
environment value: the HF token and the API key are root-only files that startup.sh writes at boot,
mounted read-only. vLLM gets `HF_TOKEN_PATH` (huggingface_hub reads the token from that file) and its
entry command reads the key from its file into `VLLM_API_KEY` inside the container; the front's entry
command (components/serving/front.py) reads the same file. `docker inspect` therefore shows paths, never values.
"""

from __future__ import annotations

import shlex

from components.serving import front
from components.serving.serve_command import KEY_ENTRY_NAME, KEY_ENTRY_SCRIPT, backend_environment, vllm_serve_args
from components.settings import Settings
from components.vm import metadata_block
from components.vm.boot_contract import API_KEY_FILE, HF_TOKEN_FILE

CONTAINER_NAME = "tpu-vllm"
FRONT_CONTAINER_NAME = "tpu-vllm-front"
# Inside the container: the XLA compile cache (~197 MB in the log) lives here.
CONTAINER_CACHE_DIR = "/root/.cache/vllm"
CONTAINER_HF_DIR = "/root/.cache/huggingface"
# Inside both containers the key is at the front's path; the token only in vLLM's.
CONTAINER_API_KEY_FILE = front.KEY_FILE
CONTAINER_HF_TOKEN_FILE = front.KEY_FILE.rsplit("/", 1)[0] + "/hf-token"

# Files serve.sh installs on the VM (none holds a secret).
FRONT_CONFIG_FILE = "/etc/tpu-vllm/front/nginx.conf"
VLLM_RUNNER = "/etc/tpu-vllm/run-vllm.sh"
FRONT_RUNNER = "/etc/tpu-vllm/run-front.sh"

# devices access: libtpu pins host memory for DMA, which the default 64 KiB memlock limit refuses.
MEMLOCK_UNLIMITED = "memlock=-1:-1"
TPU_DEVICE_GLOBS = ("/dev/vfio/*", "/dev/accel*")
# The front's private tmpfs: the key's map line, the pid file and nginx's temp files.
FRONT_TMPFS = f"{front.RUN_DIR}:rw,noexec,nosuid,nodev,size=128m,mode=0755,{metadata_block.front_tmpfs_owner()}"


def tpu_access_args(settings: Settings) -> list[str]:
    """privileged: what the build log ran. devices: serve.sh's runner adds each TPU device node found at start."""
    if settings.vllm.container_access == "privileged":
        return ["--privileged"]
    return ["--ulimit", MEMLOCK_UNLIMITED]


def docker_run_args(settings: Settings) -> list[str]:
    """vLLM's `docker run` options, image and command, for a foreground run under systemd."""
    mount = settings.cache.mount_point
    args = [
        "--name", CONTAINER_NAME, "--net=host", *tpu_access_args(settings),
        "-v", "/dev/shm:/dev/shm", "--shm-size", "10gb",
        "-v", f"{mount}/vllm:{CONTAINER_CACHE_DIR}",
        "-v", f"{HF_TOKEN_FILE}:{CONTAINER_HF_TOKEN_FILE}:ro",
        "-v", f"{API_KEY_FILE}:{CONTAINER_API_KEY_FILE}:ro",
        "-e", f"HF_TOKEN_PATH={CONTAINER_HF_TOKEN_FILE}",
    ]
    for name, value in backend_environment(settings).items():
        args += ["-e", f"{name}={value}"]
    if settings.vllm.weights_on_disk:
        args += ["-v", f"{mount}/huggingface:{CONTAINER_HF_DIR}", "-e", f"HF_HOME={CONTAINER_HF_DIR}"]
    else:
        # The 9.54 GiB checkpoint downloads in ~10 s: faster than reading it back from PD.
        args += ["-e", "HF_HOME=/dev/shm"]
    return args + ["--entrypoint", "/bin/sh", settings.vllm.image,
                   "-c", KEY_ENTRY_SCRIPT, KEY_ENTRY_NAME, *vllm_serve_args(settings)]


def front_docker_run_args(settings: Settings) -> list[str]:
    """The front's `docker run` options and image; its command is front.entry_command()."""
    return [
        "--name", FRONT_CONTAINER_NAME, "--net=host",
        # Its own user, kept from the metadata server (components/vm/metadata_block.py), with its copy of the key.
        *metadata_block.front_user_args(),
        "-v", f"{FRONT_CONFIG_FILE}:{front.CONFIG_PATH}:ro",
        "-v", f"{metadata_block.FRONT_KEY_FILE}:{front.KEY_FILE}:ro",
        "--tmpfs", FRONT_TMPFS,
        settings.front.image,
    ]


def front_config(settings: Settings) -> str:
    return front.nginx_config(listen_port=settings.vllm.port, upstream_port=settings.front.upstream_port)


def front_runner_script(settings: Settings) -> str:
    """What tpu-vllm-front.service runs. The entry script is a quoted here-document, so it reads as written."""
    command, flag, entry = front.entry_command()
    delimiter = "TPU_VLLM_FRONT_ENTRY"
    if delimiter in entry.splitlines():
        raise ValueError(f"the front's entry script contains the line {delimiter}")
    return f"""#!/bin/bash
# Run by tpu-vllm-front.service, which removes the previous container first: nginx in the foreground on the
# serving port. Rendered by the stack; no secret: the key is a root-only file mounted read-only.
set -euo pipefail
IFS= read -r -d '' entry <<'{delimiter}' || true
{entry}{'' if entry.endswith(chr(10)) else chr(10)}{delimiter}
exec docker run {shlex.join(front_docker_run_args(settings))} {command} {flag} "$entry"
"""


def render_docker_command(settings: Settings) -> str:
    """vLLM's run as one line, for the outputs (`devices` adds the device nodes found at start)."""
    return shlex.join(["sudo", "docker", "run", *docker_run_args(settings)])
