"""The one place the `vllm serve ...` command is rendered from settings.

The deploy, the offline plan and the stack outputs all call these functions, so
what reviewers read is what runs.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable

from components.serving import front
from components.settings import NO_MEDIA_DOMAIN, Settings

# vLLM answers only on loopback; the front (components/serving/front.py) owns the serving port.
LISTEN_HOST = "127.0.0.1"

# vLLM's entry command on both platforms (defence in depth behind the front): the key goes from its file
# (front.KEY_FILE, mounted read-only in vLLM's container too) into vLLM's environment inside the container,
# then `vllm serve` replaces the shell. No single quote inside, so it reads plainly in a shell-quoted command.
KEY_ENTRY_SCRIPT = (
    f'set -eu; VLLM_API_KEY="$(cat {front.KEY_FILE})"; '
    '[ -n "$VLLM_API_KEY" ] || { echo "tpu-vllm: the API key file is empty" >&2; exit 1; }; '
    'export VLLM_API_KEY; exec "$@"'
)
KEY_ENTRY_NAME = "tpu-vllm-entry"


def vllm_serve_args(settings: Settings) -> list[str]:
    """`vllm serve` and its flags, in the build log's order, then where it listens (behind the front)."""
    vllm = settings.vllm
    args = [
        "vllm", "serve", vllm.model,
        "--dtype", vllm.dtype,
        "--kv-cache-dtype", vllm.kv_cache_dtype,
        "--max-model-len", str(vllm.max_model_len),
        "--max-num-batched-tokens", str(vllm.max_num_batched_tokens),
        "--tensor-parallel-size", str(settings.tensor_parallel_size),
        # One engine core and one API server per replica behind the one port (vllm/entrypoints/cli/serve.py
        # defaults --api-server-count to it); tpu-inference pins each to its chips (components/sizing/layouts.py).
        *(["--data-parallel-size", str(settings.data_parallel_size)] if settings.data_parallel_size > 1 else []),
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
    if vllm.speculative_config is not None:
        args += ["--speculative-config", vllm.speculative_config.flag_value()]
    # Media URLs in prompts make vLLM fetch them (server-side requests); an empty list would allow any host.
    args += ["--allowed-media-domains", *(vllm.allowed_media_domains or [NO_MEDIA_DOMAIN])]
    return args + ["--host", LISTEN_HOST, "--port", str(settings.vllm.server_port)]


# vLLM follows a media URL's redirects by default (vllm-project/vllm vllm/envs.py v0.33.0,
# VLLM_MEDIA_URL_ALLOW_REDIRECTS, `bool(int(os.getenv(..., "1")))`), and checks only the first URL's host against
# --allowed-media-domains (vllm/multimodal/media/connector.py, MediaConnector.load_from_url and
# load_from_url_async; vllm/entrypoints/launchers/run_batch.py): a listed host answering 302 would send vLLM to
# the metadata server or loopback. "0" makes both connectors fetch the first URL only. Set whatever the list:
# with no media host allowed the list is NO_MEDIA_DOMAIN, and a URL on that very host passes the check
# (connector.py, `_assert_url_in_allowed_media_domains`: `url_spec.hostname not in self.allowed_media_domains`)
# and is fetched; `.invalid` resolves nowhere (RFC 6761) unless a resolver's search list makes it a name that does.
MEDIA_REDIRECTS_VARIABLE = "VLLM_MEDIA_URL_ALLOW_REDIRECTS"


# With data parallelism tpu-inference isolates each rank's chips after asking the host its TPU type
# (tpu-inference 0.32.0 worker/tpu_worker.py _setup_dp_chip_isolation -> tpu_info.get_num_cores_per_chip ->
# get_tpu_type: `envs.TPU_ACCELERATOR_TYPE`, else the GCE metadata server's accelerator-type, None when it does not
# answer, and then `None.startswith` raises). A GKE pod's metadata server is GKE's, which may not serve it: the stack
# states the type it rented, on both platforms, so a rank never depends on that answer.
ACCELERATOR_TYPE_VARIABLE = "TPU_ACCELERATOR_TYPE"


def backend_environment(settings: Settings) -> dict[str, str]:
    """Variables vLLM's container gets on both platforms beyond its own (HF_HOME, the token's path):
    tpu-inference's, from tpu-vllm:tpuInference, no media redirects, and past one replica the TPU type. None is
    secret; both platforms show them in the plan."""
    replicas = settings.data_parallel_size > 1
    layout = {ACCELERATOR_TYPE_VARIABLE: settings.tpu.shape.accelerator_type} if replicas else {}
    return {**settings.tpu_inference.environment(), MEDIA_REDIRECTS_VARIABLE: "0", **layout}


def render_serve_args(serve_args: Iterable[str]) -> str:
    """The `vllm serve ...` line as a shell would read it (the outputs' vllmServeCommand)."""
    return shlex.join(serve_args)


def render_serve_command(settings: Settings) -> str:
    return render_serve_args(vllm_serve_args(settings))
