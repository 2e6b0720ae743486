"""The VM's `docker run` for the vLLM container: options, mounts, image and the serve command."""

from __future__ import annotations

import shlex

from components.serve_command import vllm_serve_args
from components.settings import Settings
from components.vm.boot_contract import ENV_FILE

CONTAINER_NAME = "tpu-vllm"
# Inside the container: the XLA compile cache (~197 MB in the log) lives here.
CONTAINER_CACHE_DIR = "/root/.cache/vllm"
CONTAINER_HF_DIR = "/root/.cache/huggingface"



def docker_run_args(settings: Settings) -> list[str]:
    """`docker run` options, image and command; secrets come only from the env file."""
    mount = settings.cache.mount_point
    args = [
        "--detach", "--name", CONTAINER_NAME,
        "--privileged", "--net=host",
        "-v", "/dev/shm:/dev/shm", "--shm-size", "10gb",
        "-v", f"{mount}/vllm:{CONTAINER_CACHE_DIR}",
        "--env-file", ENV_FILE,
    ]
    if settings.vllm.weights_on_disk:
        args += ["-v", f"{mount}/huggingface:{CONTAINER_HF_DIR}", "-e", f"HF_HOME={CONTAINER_HF_DIR}"]
    else:
        # The 9.54 GiB checkpoint downloads in ~10 s: faster than reading it back from PD.
        args += ["-e", "HF_HOME=/dev/shm"]
    return args + [settings.vllm.image] + vllm_serve_args(settings)


def render_docker_command(settings: Settings) -> str:
    return shlex.join(["sudo", "docker", "run", *docker_run_args(settings)])
