"""The one place the `docker run ... vllm serve ...` command is rendered from settings.

The deploy, the offline plan and the stack outputs all call these functions, so
what reviewers read is what runs.
"""

from __future__ import annotations

import json
import shlex

from components.boot_contract import ENV_FILE
from components.settings import Settings, VllmSettings

CONTAINER_NAME = "tpu-vllm"
# Inside the container: the XLA compile cache (~197 MB in the log) lives here.
CONTAINER_CACHE_DIR = "/root/.cache/vllm"
CONTAINER_HF_DIR = "/root/.cache/huggingface"


def vllm_serve_args(vllm: VllmSettings) -> list[str]:
    """`vllm serve` and its flags, in the build log's order."""
    args = [
        "vllm", "serve", vllm.model,
        "--dtype", vllm.dtype,
        "--kv-cache-dtype", vllm.kv_cache_dtype,
        "--max-model-len", str(vllm.max_model_len),
        "--max-num-batched-tokens", str(vllm.max_num_batched_tokens),
        "--tensor-parallel-size", str(vllm.tensor_parallel_size),
        "--gpu-memory-utilization", f"{vllm.gpu_memory_utilization:g}",
        "--enable-prefix-caching" if vllm.enable_prefix_caching else "--no-enable-prefix-caching",
    ]
    if vllm.disable_chunked_mm_input:
        args.append("--disable-chunked-mm-input")
    args += ["--limit-mm-per-prompt", json.dumps(vllm.limit_mm_per_prompt, separators=(",", ":"))]
    if vllm.enable_auto_tool_choice:
        args.append("--enable-auto-tool-choice")
    if vllm.tool_call_parser:
        args += ["--tool-call-parser", vllm.tool_call_parser]
    if vllm.reasoning_parser:
        args += ["--reasoning-parser", vllm.reasoning_parser]
    if vllm.max_num_seqs is not None:
        args += ["--max-num-seqs", str(vllm.max_num_seqs)]
    if vllm.kv_cache_memory_bytes is not None:
        args += ["--kv-cache-memory", str(vllm.kv_cache_memory_bytes)]
    if vllm.port != 8000:
        args += ["--port", str(vllm.port)]
    return args


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
    return args + [settings.vllm.image] + vllm_serve_args(settings.vllm)


def render_serve_command(vllm: VllmSettings) -> str:
    return shlex.join(vllm_serve_args(vllm))


def render_docker_command(settings: Settings) -> str:
    return shlex.join(["sudo", "docker", "run", *docker_run_args(settings)])
