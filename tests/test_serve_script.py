"""The real startup/serve.sh under bash, fed exactly what pulumi-command sends (its flags, then serve.sh and the
rendered files on stdin), with the real `docker` CLI against a fake Docker Engine, a fake systemctl that runs
the installed units, a fake vLLM on the loopback upstream port and a key-checking fake front on the serving port.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from components import settings
from components.serving import front
from components.settings.front import DEFAULT_IMAGE as FRONT_DEFAULT_IMAGE
from components.vm import boot_contract, container, metadata_block, systemd_units
from components.vm.serving_step import installed_files, remote_command_text, serve_stdin
from tests.fakes.docker_engine import FakeDockerEngine
from tests.fakes.systemctl import SystemctlServer
from tests.fakes.vllm import FakeFront, FakeVllm
from tests.shims import make_shims, stdlib_python3
from tests.wing_values import vm_serving

HERE = Path(__file__).resolve().parent
DOCKER_CLI = os.environ.get("TPU_VLLM_DOCKER_CLI") or shutil.which("docker")
pytestmark = pytest.mark.skipif(DOCKER_CLI is None,
                                reason="run through ./scripts/test.sh, which installs the docker CLI")

API_CANARY = "CANARYserveKEY0123456789abcdefghijklmnopqrstu"
HF_CANARY = "hf_CANARYserveTOKEN0123456789"
CANARIES = (API_CANARY, HF_CANARY)
MODEL = "google/gemma-4-E2B-it"
MILESTONE_LOG = (
    "INFO Memory statistics | total_hbm_limit_gb=15.75GiB | total_hbm_limit_cap_gb=14.49GiB\n"
    "INFO Init kv-cache: block_size 64 x 5021 blocks\n"
    "INFO Precompile backbone --> {'num_tokens': 16}\n"
    "INFO:     Application startup complete.\n"
)
COMPILING_LOG = (
    "INFO Memory statistics | total_hbm_limit_gb=15.75GiB | total_hbm_limit_cap_gb=14.49GiB\n"
    "INFO Precompile all the subgraphs with possible input shapes.\n"
    "INFO Precompile backbone --> {'num_tokens': 16}\n"
    "INFO Compilation of backbone --> {'num_tokens': 16} finished in 3.21 [secs].\n"
    "INFO Precompile backbone --> {'num_tokens': 32}\n"
    "INFO some unrelated line\n"
)
SSH = {"access": {"sshSourceRanges": ["198.51.100.7/32"]}}
BOOT_ID = "0b1d0c52-7c1e-4a39-9a41-5d3e2f1c0a77"
EARLIER_BOOT_ID = "5e6f7a8b-0000-4c4c-8888-000011112222"


# For the tests that wait out a deadline: each poll runs several processes, and only the deadline is asserted.
SLOW_POLL = ("--poll", "0.5")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Node:
    """One fake VM: its root, the engine, vLLM on the upstream port, a front on the serving port."""

    def __init__(self, tmp_path: Path, status: str | None = "ready", vllm_log: str = MILESTONE_LOG,
                 status_boot_id: str = "",
                 raw: dict | None = None, vllm_key: str | None = API_CANARY, front_reply_field: str = "content",
                 no_front: bool = False, systemctl: str = "", **vllm_options):
        self.tmp_path = tmp_path
        self.root = tmp_path / "root"
        status_boot_id = status_boot_id or BOOT_ID
        self.engine = FakeDockerEngine().__enter__()
        self.engine.logs[container.CONTAINER_NAME] = vllm_log
        self.engine.logs[container.FRONT_CONTAINER_NAME] = "nginx: ready\n"
        port, upstream = free_port(), free_port()
        raw = raw or {}
        self.cfg = settings.load({**SSH, **raw, "front": {"listenPort": port},
                                  "vllm": {"serverPort": upstream, **raw.get("vllm", {})}}, "my-proj", "dev").settings
        self.vllm = FakeVllm(vllm_key, MODEL, port=upstream, **vllm_options).__enter__()
        # no_front: vLLM itself on the serving port, as if the front were missing.
        self.front = (FakeVllm if no_front else FakeFront)(API_CANARY, MODEL, port=port,
                                                           reply_field=front_reply_field).__enter__()
        for path, value in ((boot_contract.API_KEY_FILE, API_CANARY), (boot_contract.HF_TOKEN_FILE, HF_CANARY)):
            secret = self.root / path.lstrip("/")
            secret.parent.mkdir(parents=True, exist_ok=True)
            secret.write_text(value + "\n")
        boot_id = self.root / boot_contract.BOOT_ID_FILE.lstrip("/")
        boot_id.parent.mkdir(parents=True)
        boot_id.write_text(BOOT_ID + "\n")
        if status is not None:
            status_file = self.root / boot_contract.STATUS_FILE.lstrip("/")
            status_file.parent.mkdir(parents=True)
            status_file.write_text(f"{status}\nboot {status_boot_id}\n")
        self.log = tmp_path / "commands.log"
        self.env = make_shims(tmp_path / "bin", self.log, {
            "docker": f'exec {shlex.quote(DOCKER_CLI)} "$@"',
            "systemctl": systemctl or
            f'exec {shlex.quote(sys.executable)} {shlex.quote(str(HERE / "fakes/systemctl.py"))} "$@"',
            "journalctl": "exit 1",
            **stdlib_python3(),
        })
        docker_config = tmp_path / "docker-config"
        docker_config.mkdir()
        # Canaries in serve.sh's own environment too: a `-e NAME` without a value would copy them into a container.
        self.env.update({"STARTUP_ROOT": str(self.root), **self.engine.client_env(docker_config),
                         "HF_TOKEN": HF_CANARY, "VLLM_API_KEY": API_CANARY})
        # Exactly what pulumi-command sends, minus sudo (the tests run unprivileged).
        self.argv = shlex.split(remote_command_text(vm_serving(self.cfg)))[4:]
        self.stdin = serve_stdin(vm_serving(self.cfg))

    def close(self) -> None:
        self.engine.__exit__(None, None, None)
        self.vllm.__exit__(None, None, None)
        self.front.__exit__(None, None, None)

    def __call__(self, *extra: str, timeout: int = 60) -> subprocess.CompletedProcess:
        separator = self.argv.index("--")
        argv = self.argv[:separator] + ["--poll", "0.1", "--front-timeout", "5", *extra] + self.argv[separator:]
        self.result = subprocess.run(["bash", "-s", "--", *argv], input=self.stdin, env=self.env,
                                     capture_output=True, text=True, timeout=timeout)
        return self.result

    def file(self, path: str) -> str:
        return (self.root / path.lstrip("/")).read_text()

    @property
    def commands(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def assert_no_secret_left_the_files(self):
        for canary in CANARIES:
            assert not any(canary in line for line in self.commands), "a secret reached an argv"
            assert canary not in self.result.stdout and canary not in self.result.stderr
            for request in self.engine.requests:
                assert canary not in request.path + json.dumps(request.query), "a secret reached the engine"
                assert canary.encode() not in request.body, f"a secret reached the engine: {request.path}"
            for path, _ in installed_files(vm_serving(self.cfg)):
                assert canary not in self.file(path)
            assert canary not in self.file(container.VLLM_RUNNER)
            assert canary not in self.stdin and all(canary not in arg for arg in self.argv)


@pytest.fixture(scope="module")
def systemctl_server():
    """One fake systemctl for the module's runs (its state is under each node's root): a bash client per call,
    not a Python interpreter per call."""
    with SystemctlServer() as server:
        yield server


@pytest.fixture
def node(tmp_path, systemctl_server):
    nodes: list[Node] = []

    def make(**options) -> Node:
        nodes.append(Node(tmp_path, systemctl=systemctl_server.client_shim(), **options))
        return nodes[-1]

    yield make
    for made in nodes:
        made.close()


def both_created(vm: Node) -> bool:
    """Both units' `docker run` reached the engine: `systemctl restart` returns before them (as under systemd), so
    under load the fake's /health could otherwise answer before the creates the test reads (a flake at 2 cores)."""
    return bool(vm.engine.creates(container.CONTAINER_NAME) and vm.engine.creates(container.FRONT_CONTAINER_NAME))


def test_happy_path_installs_the_units_runs_both_containers_and_smoke_tests_through_the_front(node):
    vm = node(loading_polls=2)
    # Loading until vLLM's log was read once, then two more polls: `systemctl restart` returns before the
    # foreground `docker run` has created the container (as under systemd), so the first reads may find none.
    vm.vllm.ready_when = lambda: vm.engine.log_reads.get(container.CONTAINER_NAME, 0) >= 1 and both_created(vm)
    result = vm()
    assert result.returncode == 0, result.stderr
    # Every rendered file is on the VM as rendered, and the vLLM runner exists.
    for path, text in installed_files(vm_serving(vm.cfg)):
        assert vm.file(path) == text
    assert vm.file(container.VLLM_RUNNER).startswith("#!/bin/bash\n")
    assert f"ExecStart=bash {container.VLLM_RUNNER}" in vm.file(systemd_units.unit_path(systemd_units.VLLM_UNIT))
    for unit in (systemd_units.VLLM_UNIT, systemd_units.FRONT_UNIT):
        assert (vm.root / f".systemd/{unit}.enabled").exists()
    # systemd: reload, enable both, restart both (each unit removes its old container first).
    systemctl = [line.split()[1:] for line in vm.commands if line.startswith("systemctl ")]
    assert systemctl[:4] == [["daemon-reload"], ["enable", "--quiet", "tpu-vllm-front.service", "tpu-vllm.service"],
                             ["reset-failed", "tpu-vllm-front.service", "tpu-vllm.service"],
                             ["restart", "tpu-vllm-front.service", "tpu-vllm.service"]]
    assert "docker rm -f tpu-vllm " in vm.commands and "docker rm -f tpu-vllm-front " in vm.commands
    # The engine got one create per container, with exactly the rendered arguments.
    [vllm_create] = vm.engine.creates(container.CONTAINER_NAME)
    [front_create] = vm.engine.creates(container.FRONT_CONTAINER_NAME)
    image = container.docker_run_args(vm_serving(vm.cfg)).index(vm.cfg.vllm.image)
    assert vllm_create["Entrypoint"] == ["/bin/sh"]
    assert vllm_create["Cmd"] == container.docker_run_args(vm_serving(vm.cfg))[image + 1:]
    assert vllm_create["HostConfig"]["Privileged"] is True
    assert sorted(vllm_create["HostConfig"]["Binds"]) == sorted([
        "/dev/shm:/dev/shm", "/mnt/tpu-vllm-cache/vllm/xla_cache:/var/cache/tpu-vllm/xla",
        "/etc/tpu-vllm/secrets/hf-token:/run/secrets/tpu-vllm-hf/hf-token:ro",
        "/etc/tpu-vllm/secrets/api-key:/run/secrets/tpu-vllm/api-key:ro"])
    # The docker CLI parsed the spec's size in binary units: 16 GiB, GKE's emptyDir sizeLimit.
    assert vllm_create["HostConfig"]["ShmSize"] == 16 * 1024**3
    # Sorted: the CLI does not keep the order of -e flags.
    assert sorted(vllm_create["Env"]) == ["HF_HOME=/dev/shm", "HF_TOKEN_PATH=/run/secrets/tpu-vllm-hf/hf-token",
                                          "VLLM_MEDIA_URL_ALLOW_REDIRECTS=0",
                                          "VLLM_XLA_CACHE_PATH=/var/cache/tpu-vllm/xla"]
    assert front_create["Image"] == FRONT_DEFAULT_IMAGE
    assert front_create["Cmd"] == front.entry_command()  # the here-document kept the script byte for byte
    assert front_create["HostConfig"]["NetworkMode"] == "host"
    assert sorted(front_create["HostConfig"]["Binds"]) == [
        "/etc/tpu-vllm/front/nginx.conf:/etc/tpu-vllm-front/nginx.conf:ro",
        f"{metadata_block.FRONT_KEY_FILE}:/run/secrets/tpu-vllm/api-key:ro"]
    # The front runs as its own user, which the boot's rule keeps from the metadata server.
    assert front_create["User"] == f"{metadata_block.FRONT_UID}:{metadata_block.FRONT_GID}"
    assert list(front_create["HostConfig"]["Tmpfs"]) == [front.RUN_DIR]
    assert not front_create.get("Env") and not front_create["HostConfig"].get("Privileged")
    # Health on vLLM's loopback port; the smoke test through the front; vLLM's own key checked keyless.
    # Polled until the first 200, then never again: each poll but the last got no answer.
    assert [r.path for r in vm.vllm.requests].count("/health") == vm.vllm.unanswered + 1
    assert vm.vllm.unanswered >= 3
    through_front = [(r.method, r.path, "Authorization" in r.headers) for r in vm.front.requests]
    assert through_front == [("GET", "/health", False), ("POST", "/invocations", False),
                             ("GET", "/v1/models", False), ("GET", "/v1/models", True),
                             ("POST", "/v1/chat/completions", True), ("POST", "/v1/chat/completions", True)]
    assert [(r.path, "Authorization" in r.headers) for r in vm.vllm.requests if r.path != "/health"] == [
        ("/v1/models", False)]
    # The build log's three milestones, each printed once however often the log was read.
    milestones = [line for line in result.stdout.splitlines() if line.startswith("[tpu-vllm] vllm: ")]
    assert milestones == ["[tpu-vllm] vllm: " + line for line in MILESTONE_LOG.splitlines() if "Precompile" not in line]
    assert "tool call ok: get_weather" in result.stdout
    # At the default interval (30 s) the first progress line comes at once, the next only 30 s later.
    assert re.search(r"^PROGRESS_EVERY=30$", (HERE.parent / "startup/serve.sh").read_text(), re.MULTILINE)
    assert sum("waiting for vLLM /health:" in line for line in result.stdout.splitlines()) == 1
    vm.assert_no_secret_left_the_files()
    # What an operator would see: `docker inspect` of both containers, through the real CLI.
    inspected = subprocess.run([DOCKER_CLI, "inspect", container.CONTAINER_NAME, container.FRONT_CONTAINER_NAME],
                               env=vm.env, capture_output=True, text=True, check=True).stdout
    assert all(canary not in inspected for canary in CANARIES)
    assert sorted(json.loads(inspected)[0]["Config"]["Env"]) == [
        "HF_HOME=/dev/shm", "HF_TOKEN_PATH=/run/secrets/tpu-vllm-hf/hf-token", "VLLM_MEDIA_URL_ALLOW_REDIRECTS=0",
        "VLLM_XLA_CACHE_PATH=/var/cache/tpu-vllm/xla"]


def test_tpu_inference_variables_and_the_ngram_flag_reach_vllms_container_as_rendered(node):
    """Through bash, the real docker CLI and the engine: each variable in the container's Env, and the
    --speculative-config JSON byte for byte in its command (quotes and braces survive both shells)."""
    tpu_inference = {"numPrecompileWorkers": 8, "bucketPaddingGap": 128, "xlaCheckRecompilation": True}
    vm = node(raw={"tpuInference": tpu_inference, "vllm": {"speculativeConfig": {"method": "ngram"}}})
    vm.vllm.ready_when = lambda: both_created(vm)
    result = vm()
    assert result.returncode == 0, result.stderr
    [create] = vm.engine.creates(container.CONTAINER_NAME)
    assert sorted(create["Env"]) == ["HF_HOME=/dev/shm", "HF_TOKEN_PATH=/run/secrets/tpu-vllm-hf/hf-token",
                                     "NUM_PRECOMPILE_WORKERS=8", "VLLM_MEDIA_URL_ALLOW_REDIRECTS=0",
                                     "VLLM_TPU_BUCKET_PADDING_GAP=128", "VLLM_XLA_CACHE_PATH=/var/cache/tpu-vllm/xla",
                                     "VLLM_XLA_CHECK_RECOMPILATION=1"]
    spec = create["Cmd"][create["Cmd"].index("--speculative-config") + 1]
    assert json.loads(spec) == {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 5,
                                "prompt_lookup_min": 3}
    [front_create] = vm.engine.creates(container.FRONT_CONTAINER_NAME)
    assert not front_create.get("Env")
    vm.assert_no_secret_left_the_files()


def test_the_probe_catches_secrets_handed_over_the_old_way(tmp_path):
    """The earlier `docker run --env-file`: the real CLI reads the file and sends the values in Env."""
    env_file = tmp_path / "env"
    env_file.write_text(f"HF_TOKEN={HF_CANARY}\nVLLM_API_KEY={API_CANARY}\n")
    (tmp_path / "docker-config").mkdir()
    with FakeDockerEngine() as engine:
        env = {**os.environ, **engine.client_env(tmp_path / "docker-config")}
        subprocess.run([DOCKER_CLI, "run", "--detach", "--name", "old", "--env-file", str(env_file), "img"],
                       env=env, capture_output=True, text=True, check=True)
        [create] = engine.creates("old")
    assert sorted(create["Env"]) == [f"HF_TOKEN={HF_CANARY}", f"VLLM_API_KEY={API_CANARY}"]


def test_the_wait_prints_elapsed_time_and_the_latest_compile_line_each_interval(node):
    vm = node(vllm_log=COMPILING_LOG)
    # vLLM answers only once its log has been read twice, so the last progress line comes from a full log.
    vm.vllm.ready_when = lambda: vm.engine.log_reads.get(container.CONTAINER_NAME, 0) >= 2
    result = vm("--progress-every", "0")
    assert result.returncode == 0, result.stderr
    progress = [line for line in result.stdout.splitlines() if "waiting for vLLM /health:" in line]
    unhealthy = [r for r in vm.vllm.requests if r.path == "/health"][:-1]
    assert len(progress) == len(unhealthy) >= 2  # one line per poll at --progress-every 0
    assert all(re.search(r"waiting for vLLM /health: \d+m\d\ds elapsed; ", line) for line in progress)
    assert progress[-1].endswith("latest: INFO Precompile backbone --> {'num_tokens': 32}")


def test_devices_access_passes_the_tpu_device_nodes_found_at_start_and_no_privilege(node):
    vm = node(raw={"vllm": {"containerAccess": "devices"}})
    for device in ("dev/vfio/vfio", "dev/vfio/0", "dev/accel0"):
        (vm.root / device).parent.mkdir(parents=True, exist_ok=True)
        (vm.root / device).touch()
    vm.vllm.ready_when = lambda: both_created(vm)
    result = vm()
    assert result.returncode == 0, result.stderr
    [create] = vm.engine.creates(container.CONTAINER_NAME)
    host = create["HostConfig"]
    assert not host.get("Privileged")
    assert sorted(d["PathOnHost"] for d in host["Devices"]) == ["/dev/accel0", "/dev/vfio/0", "/dev/vfio/vfio"]
    assert host["Ulimits"] == [{"Name": "memlock", "Soft": -1, "Hard": -1}]


def test_devices_access_with_no_device_node_fails_the_deploy_with_the_reason(node):
    vm = node(raw={"vllm": {"containerAccess": "devices"}}, loading_polls=10_000)
    result = vm("--health-timeout", "60")
    assert result.returncode == 1
    assert "vllm exited before it became healthy" in result.stderr
    assert "no container was created" in result.stderr
    assert vm.engine.creates(container.CONTAINER_NAME) == []
    assert "no TPU device node" in (vm.root / ".systemd/tpu-vllm.service.log").read_text()


def test_a_container_that_exits_stops_its_unit_and_fails_at_once_with_its_log(node):
    vm = node(vllm_log="RuntimeProgramAllocationFailure: Attempting to reserve 384.11M\n", loading_polls=10_000)
    vm.engine.exit_on_start[container.CONTAINER_NAME] = 1
    result = vm("--health-timeout", "60")
    assert result.returncode == 1
    assert "vLLM exited (exit code 1)" in result.stderr
    assert "RuntimeProgramAllocationFailure" in result.stderr
    assert "systemctl stop tpu-vllm.service " in vm.commands


def test_health_timeout_fails_with_the_log_tail_and_leaves_it_running(node):
    vm = node(loading_polls=10_000)
    # Polled twice a second, not ten times (the deadline is the behaviour, not the polls); two seconds, so the
    # foreground `docker run` has created the container whose log tail the failure prints.
    result = vm("--health-timeout", "2", *SLOW_POLL)
    assert result.returncode == 1
    assert "/health did not answer 200 within 2s" in result.stderr
    assert "Application startup complete" in result.stderr  # the log tail
    assert not any(line.startswith("systemctl stop") for line in vm.commands)


def test_a_tool_call_that_does_not_come_back_fails_the_deploy(node):
    vm = node()
    vm.front.tool_calls_work = False
    result = vm()
    assert result.returncode == 1
    assert "no get_weather tool call came back" in result.stderr
    vm.assert_no_secret_left_the_files()


def test_a_front_that_lets_invocations_through_without_the_key_fails_the_deploy(node):
    vm = node(no_front=True)  # vLLM's key guards /v1 but not /invocations, which chats for anyone
    result = vm()
    assert result.returncode == 1
    assert "the front's /invocations answered 200 without the API key; expected 401" in result.stderr


def test_a_vllm_started_without_its_key_fails_the_deploy(node):
    vm = node(vllm_key=None)  # the entry command did not export VLLM_API_KEY
    result = vm()
    assert result.returncode == 1
    assert "vLLM's own /v1/models" in result.stderr and "answered 200 without the API key" in result.stderr


def test_a_front_that_does_not_answer_fails_the_deploy(node):
    vm = node()
    vm.front.__exit__(None, None, None)
    result = vm("--front-timeout", "1", *SLOW_POLL)
    assert result.returncode == 1
    assert "the front on :" in result.stderr and "answered 000 for /health within 1s" in result.stderr


def test_the_units_do_not_start_unless_this_boots_script_said_ready(node):
    vm = node()
    status = vm.root / boot_contract.STATUS_FILE.lstrip("/")
    # serve.sh saw `ready`; then the boot script is run again by hand and fails: the containers must not start.
    assert vm.stdin.endswith("\nmain\n")
    vm.stdin = vm.stdin.removesuffix("main\n") + (
        f"wait_for_startup() {{ printf 'failed: rerun\\nboot {BOOT_ID}\\n' > {shlex.quote(str(status))}; }}\nmain\n")
    result = vm()
    assert result.returncode == 1
    assert "systemd could not start" in result.stderr
    assert vm.engine.creates() == []


def test_the_units_do_not_start_on_a_ready_left_by_an_earlier_boot(node):
    vm = node()
    status = vm.root / boot_contract.STATUS_FILE.lstrip("/")
    # serve.sh saw this boot's `ready`; then the node reboots and the status is an earlier boot's.
    vm.stdin = vm.stdin.removesuffix("main\n") + (
        f"wait_for_startup() {{ printf 'ready\\nboot {EARLIER_BOOT_ID}\\n' > {shlex.quote(str(status))}; }}\nmain\n")
    result = vm()
    assert result.returncode == 1
    assert "systemd could not start" in result.stderr
    assert vm.engine.creates() == []


def test_the_deploy_does_not_take_an_earlier_boots_ready_for_this_ones(node):
    vm = node(status_boot_id=EARLIER_BOOT_ID)
    result = vm("--status-timeout", "1", *SLOW_POLL)
    assert result.returncode == 1
    assert "did not finish in 1s on this boot" in result.stderr
    assert "waiting for the boot script (not started on this boot)" in result.stdout
    assert not any(line.startswith("systemctl") for line in vm.commands)


def test_a_failed_boot_script_stops_the_deploy_with_its_reason(node):
    vm = node(status="failed: permission denied reading projects/p/secrets/hf")
    result = vm()
    assert result.returncode == 1
    assert "permission denied reading projects/p/secrets/hf" in result.stderr
    assert not any(line.startswith("systemctl") for line in vm.commands)
    assert vm.engine.requests == []


def test_a_boot_script_that_never_finishes_is_bounded(node):
    vm = node(status=None)
    result = vm("--status-timeout", "1", *SLOW_POLL)
    assert result.returncode == 1
    assert "did not finish in 1s" in result.stderr


@pytest.mark.parametrize("missing", ["--model", "--api-key-file"])
def test_missing_arguments_are_refused(node, missing):
    vm = node()
    index = vm.argv.index(missing)
    vm.argv = vm.argv[:index] + vm.argv[index + 2:]
    result = vm()
    assert result.returncode == 2 and f"missing {missing}" in result.stderr


def test_a_staged_file_outside_its_places_is_refused(node):
    vm = node()
    vm.stdin = vm.stdin.replace(f"stage_file {container.FRONT_CONFIG_FILE} ", "stage_file /etc/passwd ", 1)
    result = vm()
    assert result.returncode == 1
    assert "refusing to install /etc/passwd" in result.stderr
    assert not (vm.root / "etc/passwd").exists()


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
def test_a_reply_that_is_only_reasoning_still_counts_as_a_chat(node, field):
    # Current vLLM names the field `reasoning`; older releases `reasoning_content`.
    vm = node(front_reply_field=field)
    result = vm()
    assert result.returncode == 0, result.stderr
    assert "chat ok: Hi there" in result.stdout


BILLING_NOTE = "The TPU node is running and billing ($0.60/hour) until its run ends at 2026-01-01T04:00:00Z."


@pytest.mark.parametrize("status", ["failed: permission denied reading projects/p/secrets/hf", None])
def test_every_failure_ends_with_the_billing_note(node, status):
    vm = node(status=status)  # None: the boot script never finishes (an unexpected way to fail)
    vm.stdin = serve_stdin(vm_serving(vm.cfg), BILLING_NOTE)
    result = vm("--status-timeout", "1", *SLOW_POLL) if status is None else vm()
    assert result.returncode == 1
    # Last, so the end of pulumi-command's error (it appends the command's output) is what to do.
    assert result.stderr.rstrip("\n").splitlines()[-1] == f"[tpu-vllm] {BILLING_NOTE}"


def test_a_deploy_that_succeeds_does_not_print_the_billing_note(node):
    vm = node()
    vm.stdin = serve_stdin(vm_serving(vm.cfg), BILLING_NOTE)
    assert vm().returncode == 0
    assert BILLING_NOTE not in vm.result.stderr + vm.result.stdout
