"""The real startup/serve.sh under bash with a fake docker and a fake vLLM server on 127.0.0.1."""

from __future__ import annotations

import shlex
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from components import settings
from components.vm import boot_contract, container
from components.vm.vllm_server import remote_command_text
from tests.fakes.vllm import FakeVllm
from tests.shims import make_shims

SCRIPT = Path(__file__).resolve().parent.parent / "startup" / "serve.sh"
API_CANARY = "CANARYserveKEY0123456789abcdefghijklmnopqrstu"
MODEL = "google/gemma-4-E2B-it"
VLLM_LOG = (
    "INFO Memory statistics | total_hbm_limit_gb=15.75GiB | total_hbm_limit_cap_gb=14.49GiB\n"
    "INFO Init kv-cache: block_size 64 x 5021 blocks\n"
    "INFO:     Application startup complete.\n"
)
FAKE_DOCKER = r'''
state="$STARTUP_ROOT/.docker"
mkdir -p "$state"
case "$1" in
  run) echo "${FAKE_DOCKER_RUNNING:-true}" > "$state/running"; echo deadbeef ;;
  rm) rm -f "$state/running" ;;
  inspect) cat "$state/running" 2>/dev/null || echo false ;;
  logs) printf '%s' "${FAKE_VLLM_LOG:-}" ;;
esac
'''

SSH = {"access": {"sshSourceRanges": ["198.51.100.7/32"]}}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Serve:
    def __init__(self, tmp_path: Path, port: int, status: str | None = "ready", **env):
        self.root = tmp_path / "root"
        env_file = self.root / boot_contract.ENV_FILE.lstrip("/")
        env_file.parent.mkdir(parents=True)
        env_file.write_text(f"HF_TOKEN=hf_unused\nVLLM_API_KEY={API_CANARY}\n")
        (self.root / "tmp").mkdir()
        (self.root / "tmp/libtpu_lockfile").touch()
        if status is not None:
            status_file = self.root / boot_contract.STATUS_FILE.lstrip("/")
            status_file.parent.mkdir(parents=True)
            status_file.write_text(status + "\n")
        self.log = tmp_path / "commands.log"
        self.env = make_shims(tmp_path / "bin", self.log, {"docker": FAKE_DOCKER})
        self.env.update({"STARTUP_ROOT": str(self.root), "FAKE_VLLM_LOG": VLLM_LOG, **env})
        cfg = settings.load({"vllm": {"port": port}, **SSH}, "my-proj", "dev").settings
        self.docker_args = container.docker_run_args(cfg)
        # Exactly what pulumi-command sends, minus sudo (the tests run unprivileged).
        self.argv = shlex.split(remote_command_text(cfg))[4:]

    def __call__(self, *extra: str, timeout: int = 60):
        separator = self.argv.index("--")
        argv = self.argv[:separator] + ["--poll", "0.2", *extra] + self.argv[separator:]
        self.result = subprocess.run(["bash", "-s", "--", *argv], input=SCRIPT.read_text(), env=self.env,
                                     capture_output=True, text=True, timeout=timeout)
        return self.result

    @property
    def commands(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def assert_key_never_leaked(self):
        assert not any(API_CANARY in line for line in self.commands)
        assert API_CANARY not in self.result.stdout and API_CANARY not in self.result.stderr


def test_happy_path_replaces_the_container_waits_and_smoke_tests(tmp_path):
    with FakeVllm(API_CANARY, MODEL, unhealthy_first=2) as vllm:
        serve = Serve(tmp_path, vllm.port)
        result = serve()
    assert result.returncode == 0, result.stderr
    docker = [line for line in serve.commands if line.startswith("docker ")]
    assert docker[0] == "docker rm -f tpu-vllm "
    run = [line for line in docker if line.startswith("docker run ")]
    assert run == ["docker run " + " ".join(_q(arg) for arg in serve.docker_args) + " "]
    assert not (serve.root / "tmp/libtpu_lockfile").exists()
    for milestone in ("Memory statistics", "Init kv-cache", "startup complete"):
        assert result.stdout.count(milestone) == 1
    assert "tool call ok: get_weather" in result.stdout
    paths = [(r.method, r.path, "Authorization" in r.headers) for r in vllm.requests if r.path != "/health"]
    assert paths == [("GET", "/v1/models", False), ("GET", "/v1/models", True),
                     ("POST", "/v1/chat/completions", True), ("POST", "/v1/chat/completions", True)]
    assert not any(r.path == "/v1/completions" for r in vllm.requests)
    serve.assert_key_never_leaked()


def _q(arg: str) -> str:
    """bash's printf %q, for the simple characters the docker args use."""
    out = subprocess.run(["bash", "-c", 'printf "%q" "$1"', "_", arg], capture_output=True, text=True)
    return out.stdout


def test_connection_refused_then_healthy(tmp_path):
    port = free_port()
    started: list[FakeVllm] = []
    timer = threading.Timer(1.0, lambda: started.append(FakeVllm(API_CANARY, MODEL, port=port).__enter__()))
    timer.start()
    try:
        result = Serve(tmp_path, port)()
    finally:
        timer.join()
        for server in started:
            server.__exit__(None, None, None)
    assert result.returncode == 0, result.stderr
    assert "ready: google/gemma-4-E2B-it" in result.stdout


def test_health_timeout_fails_with_the_log_tail(tmp_path):
    with FakeVllm(API_CANARY, MODEL, unhealthy_first=10_000) as vllm:
        serve = Serve(tmp_path, vllm.port)
        result = serve("--health-timeout", "1")
    assert result.returncode == 1
    assert "/health did not answer 200 within 1s" in result.stderr
    assert "Application startup complete" in result.stderr  # the log tail


def test_a_container_that_exits_fails_at_once_with_its_log(tmp_path):
    with FakeVllm(API_CANARY, MODEL, unhealthy_first=10_000) as vllm:
        serve = Serve(tmp_path, vllm.port, FAKE_DOCKER_RUNNING="false",
                      FAKE_VLLM_LOG="RuntimeProgramAllocationFailure: Attempting to reserve 384.11M\n")
        result = serve("--health-timeout", "1000")
    assert result.returncode == 1
    assert "vllm exited before it became healthy" in result.stderr
    assert "RuntimeProgramAllocationFailure" in result.stderr


def test_a_tool_call_that_does_not_come_back_fails_the_deploy(tmp_path):
    with FakeVllm(API_CANARY, MODEL, tool_calls_work=False) as vllm:
        serve = Serve(tmp_path, vllm.port)
        result = serve()
    assert result.returncode == 1
    assert "no get_weather tool call came back" in result.stderr
    serve.assert_key_never_leaked()


def test_an_endpoint_open_without_the_key_fails_the_deploy(tmp_path):
    with FakeVllm(API_CANARY, MODEL) as vllm:
        vllm.api_key = None  # a server started without VLLM_API_KEY answers everyone
        vllm.handle = _open_handler(vllm)
        result = Serve(tmp_path, vllm.port)()
    assert result.returncode == 1
    assert "without the API key; expected 401" in result.stderr


def _open_handler(vllm):
    original = FakeVllm.handle

    def handle(request):
        request.headers = {**dict(request.headers), "Authorization": "Bearer None"}
        return original(vllm, request)
    return handle


def test_a_failed_boot_script_stops_the_deploy_with_its_reason(tmp_path):
    with FakeVllm(API_CANARY, MODEL) as vllm:
        serve = Serve(tmp_path, vllm.port, status="failed: permission denied reading projects/p/secrets/hf")
        result = serve()
    assert result.returncode == 1
    assert "permission denied reading projects/p/secrets/hf" in result.stderr
    assert not any(line.startswith("docker run") for line in serve.commands)


def test_a_boot_script_that_never_finishes_is_bounded(tmp_path):
    with FakeVllm(API_CANARY, MODEL) as vllm:
        serve = Serve(tmp_path, vllm.port, status=None)
        result = serve("--status-timeout", "1")
    assert result.returncode == 1
    assert "did not finish in 1s" in result.stderr


@pytest.mark.parametrize("missing", ["--model", "--port"])
def test_missing_arguments_are_refused(tmp_path, missing):
    serve = Serve(tmp_path, 8000)
    index = serve.argv.index(missing)
    serve.argv = serve.argv[:index] + serve.argv[index + 2:]
    result = serve()
    assert result.returncode == 2 and f"missing {missing}" in result.stderr
