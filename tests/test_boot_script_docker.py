"""The compute path's boot script under bash: startup.sh with startup/install_docker.sh spliced in, on an image with
no docker (Compute Engine's ubuntu-accel images ship none: "sudo: docker: command not found"), against the same fake
metadata server and Secret Manager as startup.sh's own tests; the queued-resource path's script is startup.sh as is."""

from __future__ import annotations

import subprocess
from pathlib import Path

from components.catalog import COMPUTE, QUEUED_RESOURCE
from components.vm import boot_script
from tests.fakes.gcp_metadata import FakeMetadata
from tests.shims import make_shims
from tests.test_startup_script import Run, attributes, good_secrets

# What the fake apt-get "installs": a docker on PATH that records its calls, as docker.io's /usr/bin/docker would be.
DOCKER_FAKE = 'case "$1" in --version) echo "Docker version 26.1.3, build 26.1.3-0ubuntu1";; esac; exit 0'
# apt-get update succeeds; apt-get install puts that docker where docker.io would.
INSTALLS = 'if [[ "$1" == install ]]; then cp @DOCKER@ @BIN@/docker; fi; exit 0'


class ComputeRun(Run):
    """startup.sh's harness on the compute path's script, with no docker anywhere on PATH until apt-get puts one."""

    def __init__(self, tmp_path: Path, metadata_url: str, secretmanager_url: str, apt_get: str, **env):
        self.bin = tmp_path / "bin"
        packaged = tmp_path / "package"
        packaged.mkdir()
        make_shims(packaged, tmp_path / "commands.log", {"docker": DOCKER_FAKE})
        apt_get = apt_get.replace("@BIN@", str(self.bin)).replace("@DOCKER@", str(packaged / "docker"))
        super().__init__(tmp_path, metadata_url, secretmanager_url,
                         fakes={"apt-get": apt_get, "systemctl": "exit 0"}, **env)
        (self.bin / "docker").unlink()  # the harness's own docker fake: this image has none
        # Nor the machine's own docker: the system's commands, every one but docker, through links of their own.
        system = tmp_path / "system-bin"
        system.mkdir()
        for directory in ("/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"):
            for entry in Path(directory).iterdir() if Path(directory).is_dir() else ():
                link = system / entry.name
                if entry.name != "docker" and not link.exists() and not link.is_symlink():
                    link.symlink_to(entry)
        self.env["PATH"] = f"{self.bin}:{system}"
        self.script = tmp_path / "compute-startup.sh"
        self.script.write_text(boot_script.boot_script(COMPUTE))

    def __call__(self):
        self.result = subprocess.run(["bash", str(self.script)], env=self.env, capture_output=True, text=True,
                                     timeout=120)
        return self.result


def test_the_queued_resource_paths_script_is_startup_sh_byte_for_byte():
    assert boot_script.boot_script(QUEUED_RESOURCE) == boot_script.STARTUP_SCRIPT.read_text()


def test_the_compute_paths_script_is_startup_sh_with_the_install_before_its_last_block():
    script = boot_script.boot_script(COMPUTE)
    head = boot_script.STARTUP_SCRIPT.read_text().removesuffix(boot_script.EXECUTED_BLOCK)
    assert script.startswith(head) and script.endswith(boot_script.EXECUTED_BLOCK)
    assert boot_script.INSTALL_DOCKER.read_text() in script


def test_an_image_without_docker_gets_docker_io_before_the_pull_and_boots_ready(tmp_path, servers):
    metadata, secretmanager = servers(FakeMetadata(attributes()), good_secrets())
    run = ComputeRun(tmp_path, metadata.url, secretmanager.url, INSTALLS)
    result = run()
    assert result.returncode == 0, result.stderr
    assert run.status == "ready"
    commands = run.commands.splitlines()
    install = commands.index("apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=60 docker.io ")
    assert commands[install - 1] == "apt-get update -qq "
    assert "systemctl enable --now docker.service " in commands
    # The image pull starts once docker is there (startup.sh pulls only when `command -v docker` finds one).
    pull = next(i for i, line in enumerate(commands) if line.startswith("docker pull vllm/vllm-tpu:nightly"))
    assert pull > install
    assert "installing docker.io" in result.stderr and "docker installed: Docker version" in result.stderr
    run.assert_no_canary_anywhere()


def test_a_failing_apt_get_is_retried_then_is_a_failed_status_naming_the_step(tmp_path, servers):
    metadata, secretmanager = servers(FakeMetadata(attributes()), good_secrets())
    run = ComputeRun(tmp_path, metadata.url, secretmanager.url, "exit 100")
    assert run().returncode == 1
    assert run.status.startswith("failed: installing docker (this image ships none): apt-get failed 4 times")
    assert "sudo systemctl restart google-startup-scripts" in run.status
    assert run.commands.count("apt-get update -qq") == 4
    # No secret was read: the boot stopped before it.
    assert secretmanager.requests == []


def test_a_flaky_archive_is_retried_until_it_answers(tmp_path, servers):
    metadata, secretmanager = servers(FakeMetadata(attributes()), good_secrets())
    counter = tmp_path / "apt-tries"
    flaky = (f'n=$(cat {counter} 2>/dev/null || echo 0); echo $((n + 1)) > {counter}; '
             '[[ "$1" == update && $n -lt 2 ]] && exit 100\n' + INSTALLS)
    run = ComputeRun(tmp_path, metadata.url, secretmanager.url, flaky)
    assert run().returncode == 0, run.result.stderr
    assert run.status == "ready"
    assert run.commands.count("apt-get update -qq") == 3
    assert "apt-get failed; retry 1/4" in run.result.stderr


def test_a_vm_that_has_docker_installs_nothing(tmp_path, servers):
    metadata, secretmanager = servers(FakeMetadata(attributes()), good_secrets())
    run = ComputeRun(tmp_path, metadata.url, secretmanager.url, "exit 100")
    make_shims(run.bin, run.log, {"docker": DOCKER_FAKE})
    assert run().returncode == 0, run.result.stderr
    assert run.status == "ready" and "apt-get" not in run.commands


def test_apt_held_by_another_apt_is_waited_for_with_the_delay_doubling(tmp_path, servers):
    """A first boot's apt-daily or unattended-upgrades holds apt's locks ("Could not get lock"): the retries back off
    as http_get's do, 1 s then 2 s here (2 s to 128 s on a node)."""
    metadata, secretmanager = servers(FakeMetadata(attributes()), good_secrets())
    counter = tmp_path / "apt-tries"
    locked = (f'n=$(cat {counter} 2>/dev/null || echo 0); echo $((n + 1)) > {counter}\n'
              'if [[ "$1" == update && $n -lt 2 ]]; then\n'
              '  echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 1234 (apt-get)" >&2\n'
              '  exit 100\nfi\n' + INSTALLS)
    run = ComputeRun(tmp_path, metadata.url, secretmanager.url, locked, STARTUP_BACKOFF_SECONDS="1")
    assert run().returncode == 0, run.result.stderr
    assert run.status == "ready"
    assert "retry 1/4 in 1s" in run.result.stderr and "retry 2/4 in 2s" in run.result.stderr
