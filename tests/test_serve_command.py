"""The rendered command for the dev stack is the build log's final command, flag for flag."""

import json
import shlex
import subprocess

from components import settings
from components.serving import serve_command
from components.vm import container
from tests.program import dev_config
from tests.wing_values import vm_serving

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
        "--allowed-media-domains", settings.NO_MEDIA_DOMAIN, "--host", "127.0.0.1", "--port", "8001"]


def test_no_media_domain_is_a_host_no_resolver_answers():
    # vLLM allows any host when the list is empty; a name under .invalid (RFC 6761) can never resolve.
    assert settings.NO_MEDIA_DOMAIN.endswith(".invalid")
    assert settings.HOSTNAME.fullmatch(settings.NO_MEDIA_DOMAIN)


def test_listed_media_domains_are_passed_as_they_are():
    cfg = settings.load({"vllm": {"allowedMediaDomains": ["images.example.com", "cdn.example.org"]}, **SSH},
                        "my-proj", "dev").settings
    args = serve_command.vllm_serve_args(cfg)
    at = args.index("--allowed-media-domains")
    assert args[at + 1:at + 3] == ["images.example.com", "cdn.example.org"] and args[at + 3] == "--host"
    assert settings.NO_MEDIA_DOMAIN not in args


def test_docker_run_adds_the_cache_mount_and_the_secret_files_never_their_values():
    args = container.docker_run_args(vm_serving(dev_settings()))
    image = args.index("vllm/vllm-tpu:v0.32.0")
    options = args[:image]
    assert options == ["--name", "tpu-vllm", "--net=host", "--privileged",
                       "-v", "/dev/shm:/dev/shm", "--shm-size", "16g",
                       "-v", "/mnt/tpu-vllm-cache/vllm/xla_cache:/var/cache/tpu-vllm/xla",
                       "-v", "/etc/tpu-vllm/secrets/hf-token:/run/secrets/tpu-vllm-hf/hf-token:ro",
                       "-v", "/etc/tpu-vllm/secrets/api-key:/run/secrets/tpu-vllm/api-key:ro",
                       "-e", "HF_TOKEN_PATH=/run/secrets/tpu-vllm-hf/hf-token",
                       "-e", "VLLM_XLA_CACHE_PATH=/var/cache/tpu-vllm/xla", "-e", "HF_HOME=/dev/shm",
                       "-e", "VLLM_MEDIA_URL_ALLOW_REDIRECTS=0", "--entrypoint", "/bin/sh"]
    # The entry command reads the key inside the container, then vllm serve replaces the shell.
    assert args[image + 1:image + 4] == ["-c", serve_command.KEY_ENTRY_SCRIPT, serve_command.KEY_ENTRY_NAME]
    assert args[image + 4:] == serve_command.vllm_serve_args(dev_settings())
    assert "--env-file" not in args and "--detach" not in args  # systemd runs it in the foreground


def test_devices_access_drops_privileged_for_a_memlock_limit():
    cfg = settings.load({"vllm": {"containerAccess": "devices"}, **SSH}, "my-proj", "dev").settings
    args = container.docker_run_args(vm_serving(cfg))
    assert "--privileged" not in args
    assert args[args.index("--ulimit") + 1] == "memlock=-1:-1"


def test_the_key_entry_command_exports_the_key_and_runs_the_command(tmp_path):
    key_file = tmp_path / "api-key"
    key_file.write_text("k3y\n")
    script = serve_command.KEY_ENTRY_SCRIPT.replace(container.CONTAINER_API_KEY_FILE, str(key_file))
    ran = subprocess.run(["sh", "-c", script, "entry", "sh", "-c", 'printf "%s|%s" "$VLLM_API_KEY" "$1"', "x", "arg"],
                         capture_output=True, text=True)
    assert ran.returncode == 0 and ran.stdout == "k3y|arg"
    key_file.write_text("")
    empty = subprocess.run(["sh", "-c", script, "entry", "true"], capture_output=True, text=True)
    assert empty.returncode == 1 and "API key file is empty" in empty.stderr
    key_file.unlink()
    missing = subprocess.run(["sh", "-c", script, "entry", "true"], capture_output=True, text=True)
    assert missing.returncode != 0


def test_weights_on_disk_moves_hf_home_to_the_cache_disk():
    cfg = settings.load({"vllm": {"weightsOnDisk": True}, **SSH}, "my-proj", "dev").settings
    args = container.docker_run_args(vm_serving(cfg))
    assert "HF_HOME=/var/cache/tpu-vllm/huggingface" in args
    assert "/mnt/tpu-vllm-cache/huggingface:/var/cache/tpu-vllm/huggingface" in args


def test_optional_flags_render_only_when_set():
    cfg = settings.load({"vllm": {"kvCacheMemoryBytes": 5923602432, "enablePrefixCaching": False},
                         "front": {"listenPort": 8080}, **SSH}, "my-proj", "dev").settings
    rendered = serve_command.render_serve_command(cfg)
    assert "--kv-cache-memory 5923602432" in rendered and "--no-enable-prefix-caching" in rendered
    assert rendered.endswith("--host 127.0.0.1 --port 8001")  # front.listenPort is the front's, not vLLM's
    assert "--no-enable-prefix-caching" in rendered and "--block-size" not in rendered
