"""The serving spec: what the server *is*, whatever runs it, as one frozen value built once from the settings.

Both wings render it: the VM into `docker run` arguments, systemd units and the serving step's stdin
(components/vm/container.py, systemd_units.py, serving_step.py), GKE into the pod's containers
(components/gke/workload.py). Neither derives any of it again from the settings, so the two cannot drift:
tests/test_serving_spec.py renders both from the same settings and compares what each runs.

Platform-free: paths are the ones *inside* the containers; where a wing finds the files on its host (the VM's
root-only files, GKE's CSI volumes) is the wing's business.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.serving import front
from components.serving.serve_command import (
    KEY_ENTRY_NAME,
    KEY_ENTRY_SCRIPT,
    LISTEN_HOST,
    backend_environment,
    vllm_serve_args,
)
from components.settings import Settings

# Both secret files, inside the containers. Each has its own directory: on GKE a CSI volume fills the directory
# it is mounted on, so the key (the front's, front.KEY_FILE) and the token cannot share one.
API_KEY_FILE = front.KEY_FILE
HF_TOKEN_FILE = "/run/secrets/tpu-vllm-hf/hf-token"
# huggingface_hub reads the token from the file this variable names (huggingface_hub 2.4.0, the one the vLLM 0.33.0
# image installs: huggingface_hub/constants.py HF_TOKEN_PATH, read in utils/_auth.py _get_token_from_file).
HF_TOKEN_PATH_VARIABLE = "HF_TOKEN_PATH"
HF_HOME_VARIABLE = "HF_HOME"
# Where vLLM's XLA programs are cached. tpu-inference 0.32.0 points JAX's persistent cache at
# vllm.envs.VLLM_XLA_CACHE_PATH (tpu_inference/runner/compilation_manager.py, CompilationManager.__init__:
# jax.config.update("jax_compilation_cache_dir", vllm_envs.VLLM_XLA_CACHE_PATH)); vLLM 0.33.0 reads the variable,
# defaulting to ~/.cache/vllm/xla_cache (vllm/envs.py, "VLLM_XLA_CACHE_PATH"). Set explicitly on both wings, so
# neither depends on the image's home directory.
COMPILE_CACHE_VARIABLE = "VLLM_XLA_CACHE_PATH"
COMPILE_CACHE_PATH = "/var/cache/tpu-vllm/xla"
# vllm.weightsOnDisk: the checkpoint under HF_HOME on the wing's persistent storage, else in memory.
WEIGHTS_PATH = "/var/cache/tpu-vllm/huggingface"
SHM_PATH = "/dev/shm"
# The memory-backed /dev/shm: the 9.54 GiB checkpoint downloads into it (HF_HOME=/dev/shm, ~10 s in the build log)
# and vLLM's processes share memory through it. 16 GiB: the checkpoint with room for huggingface_hub's partial
# files and a larger revision; the build log's 10 GiB (`--shm-size 10gb`) left half a GiB. GKE counts it in vLLM's
# memory request (components/gke/pod_resources.py vllm_size: 16 + 8 GiB fits the ct5lp-hightpu-1t's allocatable).
SHM_BYTES = 16 * 1024**3
GIB = 1024**3
# The log's headroom: 16 GiB for its 9.54 GiB checkpoint. A larger checkpoint (the fit's weights: the catalog's, or
# the safetensors index beside vllm.modelConfig) gets the same ratio, in whole GiB; never less than the log's 16.
SHM_HEADROOM = 16 / 9.54


def shm_bytes_for(weights_bytes: int | None) -> int:
    """The memory-backed /dev/shm for a checkpoint of this many bytes (None: unknown, the log's size)."""
    if not weights_bytes:
        return SHM_BYTES
    return max(SHM_BYTES, -(-int(weights_bytes * SHM_HEADROOM) // GIB) * GIB)


@dataclass(frozen=True)
class ServingSpec:
    """One server: vLLM behind the key-checking front. Every field is a plain, hashable value."""

    model: str
    """vllm.model: what vLLM serves."""
    vllm_image: str
    """vllm.image as written (each wing may pin it to a digest or pull it through a mirror)."""
    vllm_entry: tuple[str, ...]
    """vLLM's container command: reads the API key file into VLLM_API_KEY, then runs its arguments."""
    serve_args: tuple[str, ...]
    """`vllm serve` and its flags (components/serving/serve_command.py), ending with where vLLM listens."""
    backend_environment: tuple[tuple[str, str], ...]
    """tpu-inference's variables (tpu-vllm:tpuInference), as (name, value), in order."""
    host: str
    """Where vLLM listens: loopback only; the front owns the serving port."""
    listen_port: int
    """The front's port: the only one clients reach."""
    upstream_port: int
    """vLLM's own port on `host`, behind the front."""
    front_image: str
    """front.image as written."""
    front_config: str
    """The front's nginx.conf (components/serving/front.py), the same text on both wings."""
    front_config_path: str
    """Where the front reads its config, inside its container."""
    front_entry: tuple[str, ...]
    """The front's container command: the key file to nginx's map line, then nginx in the foreground."""
    front_run_dir: str
    """The front's private scratch directory (the key's map line, nginx's pid and temp files)."""
    api_key_file: str
    """The API key file inside both containers (the front's and vLLM's)."""
    hf_token_file: str
    """The HF token file inside vLLM's container."""
    compile_cache_path: str
    """The XLA compile cache inside vLLM's container (kept across runs by each wing's storage)."""
    shm_bytes: int
    """The size of vLLM's memory-backed /dev/shm."""
    weights_on_disk: bool
    """vllm.weightsOnDisk: the checkpoint kept on persistent storage instead of downloaded into /dev/shm."""
    hf_home: str
    """HF_HOME inside vLLM's container: WEIGHTS_PATH with weights on disk, else /dev/shm."""
    health_timeout_seconds: int
    """vllm.healthTimeout: how long a cold compile may take before /health must answer."""
    health_command: tuple[str, ...]
    """vLLM's /health on loopback, from inside its container or pod."""

    @property
    def environment(self) -> tuple[tuple[str, str], ...]:
        """vLLM's whole environment beyond the image's own: the token's path, the cache, HF_HOME, tpu-inference's.
        No value is secret."""
        return ((HF_TOKEN_PATH_VARIABLE, self.hf_token_file), (COMPILE_CACHE_VARIABLE, self.compile_cache_path),
                (HF_HOME_VARIABLE, self.hf_home), *self.backend_environment)

    @property
    def front_layout(self) -> front.FrontLayout:
        """The front's paths inside its container, as components/serving/front.py takes them."""
        return front.FrontLayout(config_path=self.front_config_path, key_file=self.api_key_file,
                                 run_dir=self.front_run_dir)

    @property
    def vllm_command(self) -> tuple[str, ...]:
        """What vLLM's container runs, entry and arguments together."""
        return self.vllm_entry + self.serve_args


def health_command(host: str, port: int) -> tuple[str, ...]:
    return ("python3", "-c",
            f"import urllib.request; urllib.request.urlopen('http://{host}:{port}/health', timeout=4)")


def _weights_bytes(settings: Settings) -> int | None:
    fitted = settings.fit
    return int(fitted.figures["weights"].value or 0) or None if fitted is not None else None


def serving_spec(settings: Settings) -> ServingSpec:
    """The one place the server is derived from the settings; pure (no cloud call, no file read)."""
    vllm = settings.vllm
    layout = front.FrontLayout()
    listen_port, upstream_port = settings.front.listen_port, settings.vllm.server_port
    return ServingSpec(
        model=vllm.model,
        vllm_image=vllm.image,
        vllm_entry=("/bin/sh", "-c", KEY_ENTRY_SCRIPT, KEY_ENTRY_NAME),
        serve_args=tuple(vllm_serve_args(settings)),
        backend_environment=tuple(backend_environment(settings).items()),
        host=LISTEN_HOST,
        listen_port=listen_port,
        upstream_port=upstream_port,
        front_image=settings.front.image,
        front_config=front.nginx_config(listen_port=listen_port, upstream_port=upstream_port, layout=layout),
        front_config_path=layout.config_path,
        front_entry=tuple(front.entry_command(layout)),
        front_run_dir=layout.run_dir,
        api_key_file=API_KEY_FILE,
        hf_token_file=HF_TOKEN_FILE,
        compile_cache_path=COMPILE_CACHE_PATH,
        shm_bytes=shm_bytes_for(_weights_bytes(settings)),
        weights_on_disk=vllm.weights_on_disk,
        hf_home=WEIGHTS_PATH if vllm.weights_on_disk else SHM_PATH,
        health_timeout_seconds=vllm.health_timeout_seconds,
        health_command=health_command(LISTEN_HOST, upstream_port),
    )
