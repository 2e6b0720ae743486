"""The rendered command for the dev stack is the build log's final command, flag for flag."""

import json
import shlex

from components import serve_command, settings
from components.vm import container
from tests.program import dev_config

# The build log's final configuration, as run on the chip.
LOG_FINAL_COMMAND = """
vllm serve google/gemma-4-E2B-it \
    --dtype bfloat16 \
    --kv-cache-dtype auto \
    --max-model-len 32768 \
    --max-num-batched-tokens 4096 \
    --tensor-parallel-size 1 \
    --gpu-memory-utilization 0.92 \
    --enable-prefix-caching \
    --disable-chunked-mm-input \
    --limit-mm-per-prompt '{"image":4,"audio":1}' \
    --enable-auto-tool-choice --tool-call-parser gemma4 --reasoning-parser gemma4
"""

SSH = {"access": {"sshSourceRanges": ["198.51.100.7/32"]}}


def dev_settings():
    config = dev_config()
    raw = {key.split(":", 1)[1]: json.loads(value)
           for key, value in config.items() if key.startswith("tpu-vllm:")}
    return settings.load(raw, "my-proj", "dev").settings


def test_dev_stack_renders_the_logs_final_command_on_loopback_behind_the_front():
    assert serve_command.vllm_serve_args(dev_settings()) == shlex.split(LOG_FINAL_COMMAND) + [
        "--host", "127.0.0.1", "--port", "8001"]


def test_docker_run_adds_only_the_cache_mount_and_the_env_file():
    args = container.docker_run_args(dev_settings())
    image = args.index("vllm/vllm-tpu:nightly")
    options = args[:image]
    assert options == ["--detach", "--name", "tpu-vllm", "--privileged", "--net=host",
                       "-v", "/dev/shm:/dev/shm", "--shm-size", "10gb",
                       "-v", "/mnt/tpu-vllm-cache/vllm:/root/.cache/vllm",
                       "--env-file", "/etc/tpu-vllm/env", "-e", "HF_HOME=/dev/shm"]
    assert "HF_TOKEN" not in " ".join(args)


def test_weights_on_disk_moves_hf_home_to_the_cache_disk():
    cfg = settings.load({"vllm": {"weightsOnDisk": True}, **SSH}, "my-proj", "dev").settings
    args = container.docker_run_args(cfg)
    assert "HF_HOME=/root/.cache/huggingface" in args
    assert "/mnt/tpu-vllm-cache/huggingface:/root/.cache/huggingface" in args


def test_optional_flags_render_only_when_set():
    cfg = settings.load({"vllm": {"kvCacheMemoryBytes": 5923602432, "port": 8080,
                                  "enablePrefixCaching": False}, **SSH}, "my-proj", "dev").settings
    rendered = serve_command.render_serve_command(cfg)
    assert "--kv-cache-memory 5923602432" in rendered and "--no-enable-prefix-caching" in rendered
    assert rendered.endswith("--host 127.0.0.1 --port 8001")  # vllm.port is the front's, not vLLM's
    assert "--no-enable-prefix-caching" in rendered and "--block-size" not in rendered
