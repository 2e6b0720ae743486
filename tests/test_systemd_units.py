"""The systemd units that restart both containers after a reboot: parsed for their ordering and checked by
systemd's own `systemd-analyze verify` (Debian's systemd package) against stub units for what they need."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from components import settings
from components.serving.spec import serving_spec
from components.vm import boot_contract, container, metadata_block, systemd_units
from tests.wing_values import vm_serving

SSH = {"access": {"sshSourceRanges": ["198.51.100.7/32"]}}
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
SYSTEMD_ESCAPE = shutil.which("systemd-escape")


def cfg(**sections):
    return settings.load({**SSH, **sections}, "my-proj", "dev").settings


def parse(text: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None,
                                       dict_type=_MultiDict, empty_lines_in_values=False)
    parser.optionxform = str  # keys are case-sensitive
    parser.read_string(text)
    return parser


class _MultiDict(dict):
    """systemd keys may repeat (ExecStartPre=...): keep every value, joined by newlines."""

    def __setitem__(self, key, value):
        if isinstance(value, list) and key in self and isinstance(self[key], list):
            self[key].extend(value)
        else:
            super().__setitem__(key, value)


def values(unit: configparser.ConfigParser, section: str, key: str) -> list[str]:
    return unit.get(section, key).splitlines()


def test_vllm_starts_after_docker_the_boot_scripts_success_and_the_cache_mount():
    unit = parse(systemd_units.vllm_unit(vm_serving(cfg())))
    requires = unit.get("Unit", "Requires").split()
    after = unit.get("Unit", "After").split()
    needed = ["docker.service", systemd_units.BOOT_READY_UNIT, "mnt-tpu\\x2dvllm\\x2dcache.mount"]
    assert requires == needed
    assert set(needed) <= set(after)
    assert unit.get("Install", "WantedBy") == "multi-user.target"


def test_the_boot_check_runs_once_per_boot_after_the_boot_script_without_running_it_again():
    unit = parse(systemd_units.boot_ready_unit())
    # After= only: google-startup-scripts is a oneshot that goes inactive; Requires=/Wants= would re-run it.
    assert unit.get("Unit", "After") == boot_contract.BOOT_SCRIPT_UNIT
    assert not unit.has_option("Unit", "Requires") and not unit.has_option("Unit", "Wants")
    assert unit.get("Service", "Type") == "oneshot" and unit.get("Service", "RemainAfterExit") == "yes"
    assert unit.get("Service", "ExecStart") == f"/bin/sh {boot_contract.BOOT_READY_CHECK}"
    for rendered in (systemd_units.vllm_unit(vm_serving(cfg())), systemd_units.front_unit(serving_spec(cfg()))):
        assert boot_contract.BOOT_SCRIPT_UNIT not in parse(rendered).get("Unit", "Requires")


def test_vllm_removes_its_old_container_then_creates_a_fresh_one_and_restarts_with_limits():
    unit = parse(systemd_units.vllm_unit(vm_serving(cfg())))
    pre = values(unit, "Service", "ExecStartPre")
    # '-': no container yet is fine. Nothing on the host's /tmp: libtpu's lock is in the container's own.
    assert pre == [f"-docker rm -f {container.CONTAINER_NAME}"]
    args = container.docker_run_args(vm_serving(cfg()))
    mounts = [arg for flag, arg in zip(args[:-1], args[1:], strict=True) if flag == "-v"]
    assert mounts and not [mount for mount in mounts if mount.split(":")[1] in ("/tmp", "/")]
    assert unit.get("Service", "ExecStart") == f"bash {container.VLLM_RUNNER}"
    assert unit.get("Service", "Restart") == "on-failure"
    assert int(unit.get("Service", "RestartSec")) >= 10
    assert unit.get("Unit", "StartLimitBurst") == "3" and unit.get("Unit", "StartLimitIntervalSec") == "3600"
    assert unit.get("Service", "ExecStop") == f"docker stop --time 30 {container.CONTAINER_NAME}"


def test_the_front_needs_the_boot_script_for_its_key_file_but_not_the_cache_disk():
    unit = parse(systemd_units.front_unit(serving_spec(cfg())))
    assert unit.get("Unit", "Requires").split() == ["docker.service", systemd_units.BOOT_READY_UNIT,
                                                    metadata_block.BLOCK_UNIT]
    # The block first, before every start (restarts too), as root and not ignorable; then the old container goes.
    assert values(unit, "Service", "ExecStartPre")[:2] == [f"+/bin/sh {metadata_block.BLOCK_SCRIPT}",
                                                          f"-docker rm -f {container.FRONT_CONTAINER_NAME}"]
    assert unit.get("Service", "ExecStart") == f"bash {container.FRONT_RUNNER}"
    assert unit.get("Service", "Restart") == "on-failure"


def test_a_custom_mount_point_names_its_own_mount_unit():
    unit = parse(systemd_units.vllm_unit(vm_serving(cfg(cache={"mountPoint": "/data/vllm_cache.2"}))))
    assert "data-vllm_cache.2.mount" in unit.get("Unit", "Requires").split()


@pytest.mark.parametrize("path", ["/mnt/tpu-vllm-cache", "/data/vllm_cache.2", "/mnt/.hidden/x", "/media/a b/ü",
                                  "/mnt//x/", "/"])
def test_escape_matches_systemd_escape(path):
    if SYSTEMD_ESCAPE is None:
        pytest.skip("systemd-escape comes with Debian's systemd package (scripts/test.sh installs it)")
    real = subprocess.run([SYSTEMD_ESCAPE, "--path", path], capture_output=True, text=True, check=True).stdout.strip()
    assert systemd_units.escape_path(path) == real


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze comes with Debian's systemd package")
@pytest.mark.parametrize("access", ["privileged", "devices"])
def test_systemd_analyze_verify_accepts_both_units(tmp_path, access):
    settings_ = cfg(vllm={"containerAccess": access})
    stubs = tmp_path / "units"
    stubs.mkdir()
    # What the units depend on, as the TPU VM image has them.
    (stubs / "docker.service").write_text("[Service]\nExecStart=/bin/true\n")
    (stubs / boot_contract.BOOT_SCRIPT_UNIT).write_text("[Service]\nType=oneshot\nExecStart=/bin/true\n")
    mount = systemd_units.mount_unit(settings_.cache.mount_point)
    (stubs / mount).write_text(f"[Mount]\nWhat=/dev/disk/by-id/google-persistent-disk-1\n"
                               f"Where={settings_.cache.mount_point}\n")
    names = [systemd_units.VLLM_UNIT, systemd_units.FRONT_UNIT, systemd_units.BOOT_READY_UNIT,
             metadata_block.BLOCK_UNIT]
    (stubs / names[0]).write_text(systemd_units.vllm_unit(vm_serving(settings_)))
    (stubs / names[1]).write_text(systemd_units.front_unit(serving_spec(settings_)))
    (stubs / names[2]).write_text(systemd_units.boot_ready_unit())
    (stubs / names[3]).write_text(metadata_block.block_unit())
    checked = subprocess.run([SYSTEMD_ANALYZE, "verify", "--man=no", *(str(stubs / name) for name in names)],
                             capture_output=True, text=True, env={**os.environ, "SYSTEMD_UNIT_PATH": f"{stubs}:"})
    # Any complaint (an unknown key, a bad value, a command it cannot find) is printed, even when the exit is 0.
    assert checked.returncode == 0 and checked.stderr.strip() == "", checked.stderr


def test_verify_catches_a_broken_unit(tmp_path):
    if SYSTEMD_ANALYZE is None:
        pytest.skip("systemd-analyze comes with Debian's systemd package")
    broken = systemd_units.front_unit(serving_spec(cfg())).replace("Restart=on-failure", "Restart=sometimes")
    path = tmp_path / systemd_units.FRONT_UNIT
    path.write_text(broken)
    (tmp_path / systemd_units.BOOT_READY_UNIT).write_text(systemd_units.boot_ready_unit())
    (tmp_path / metadata_block.BLOCK_UNIT).write_text(metadata_block.block_unit())
    (tmp_path / "docker.service").write_text("[Service]\nExecStart=/bin/true\n")
    (tmp_path / boot_contract.BOOT_SCRIPT_UNIT).write_text("[Service]\nType=oneshot\nExecStart=/bin/true\n")
    checked = subprocess.run([SYSTEMD_ANALYZE, "verify", "--man=no", str(path)], capture_output=True, text=True,
                             env={**os.environ, "SYSTEMD_UNIT_PATH": f"{tmp_path}:"})
    assert "Failed to parse service restart specifier" in checked.stderr


def test_units_and_runners_hold_no_secret_and_name_no_env_file():
    vm = vm_serving(cfg())
    for text in (systemd_units.vllm_unit(vm), systemd_units.front_unit(vm.spec),
                 container.front_runner_script(vm.spec), " ".join(container.docker_run_args(vm))):
        assert "--env-file" not in text and "EnvironmentFile" not in text
        assert "VLLM_API_KEY=" not in text.replace('VLLM_API_KEY="$(cat', "")


def test_the_front_runner_is_valid_bash(tmp_path):
    path = tmp_path / "run-front.sh"
    path.write_text(container.front_runner_script(serving_spec(cfg())))
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0


def test_unit_files_reference_paths_the_stack_installs():
    vm = vm_serving(cfg())
    text = (systemd_units.vllm_unit(vm) + systemd_units.front_unit(vm.spec) + systemd_units.boot_ready_unit()
            + metadata_block.block_unit())
    for path in (container.VLLM_RUNNER, container.FRONT_RUNNER, boot_contract.BOOT_READY_CHECK,
                 metadata_block.BLOCK_SCRIPT, metadata_block.FRONT_KEY_SCRIPT):
        assert path in text
    assert Path(container.VLLM_RUNNER).parent == Path(container.FRONT_RUNNER).parent == Path("/etc/tpu-vllm")
