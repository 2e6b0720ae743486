"""startup.sh and serve.sh one function at a time: each is sourced into bash (which runs nothing), then one
of its functions is called directly."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from components.vm import boot_contract

STARTUP = Path(__file__).resolve().parent.parent / "startup" / "startup.sh"
SERVE = Path(__file__).resolve().parent.parent / "startup" / "serve.sh"
MIB = 1 << 20
BOOT_ID = "0b1d0c52-7c1e-4a39-9a41-5d3e2f1c0a77"


def sourced(script: Path, snippet: str, root: Path, **env: str) -> subprocess.CompletedProcess:
    """`source SCRIPT; SNIPPET` under bash, with STARTUP_ROOT=root."""
    return subprocess.run(["bash", "-c", f'source "$1"\n{snippet}', "test-shell", str(script)],
                          env={**os.environ, "STARTUP_ROOT": str(root), **env}, capture_output=True, text=True,
                          timeout=60)


def image(path: Path, size: int, writes: dict[int, bytes] | None = None) -> Path:
    with open(path, "wb") as handle:
        handle.truncate(size)
        for offset, data in (writes or {}).items():
            handle.seek(offset)
            handle.write(data)
    return path


@pytest.mark.parametrize("script", [STARTUP, SERVE])
def test_sourcing_a_script_runs_nothing_and_defines_the_shared_helpers(tmp_path, script):
    result = sourced(script, 'declare -F say die >/dev/null && echo "work dir: [$WORK_DIR]"', tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "work dir: []\n"
    assert list(tmp_path.iterdir()) == []  # no status written, no directory made


@pytest.mark.parametrize(("script", "prefix"), [(STARTUP, "tpu-vllm-startup: "), (SERVE, "[tpu-vllm] ")])
def test_say_and_die_mean_the_same_in_both_scripts(tmp_path, script, prefix):
    said = sourced(script, "say hello; echo after", tmp_path)
    assert f"{prefix}hello" in said.stdout + said.stderr and "after" in said.stdout
    died = sourced(script, 'BOOT_ID=x; die "it broke"; echo never', tmp_path)
    assert died.returncode == 1 and "never" not in died.stdout
    assert f"{prefix}FAILED: it broke" in died.stderr


def test_startup_die_records_the_first_failure_only(tmp_path):
    result = sourced(STARTUP, 'BOOT_ID=abc; take_lock; (die "first") || true; die "second"', tmp_path)
    assert result.returncode == 1
    status = tmp_path / boot_contract.STATUS_FILE.lstrip("/")
    assert status.read_text() == "failed: first\nboot abc\n"


def test_a_run_that_does_not_hold_the_lock_never_writes_the_status(tmp_path):
    """The status belongs to the run holding the lock: a second run that fails while it waits writes nothing."""
    result = sourced(STARTUP, 'BOOT_ID=abc; die "not mine"', tmp_path)
    assert result.returncode == 1 and "FAILED: not mine" in result.stderr
    assert not (tmp_path / boot_contract.STATUS_FILE.lstrip("/")).exists()


def test_backup_groups_are_those_of_sparse_super(tmp_path):
    result = sourced(STARTUP, "backup_groups 250", tmp_path)
    assert sorted(map(int, result.stdout.split())) == [1, 3, 5, 7, 9, 25, 27, 49, 81, 125, 243]
    assert sourced(STARTUP, "backup_groups 1", tmp_path).stdout == ""


def test_blank_disk_check_passes_a_disk_of_zeros(tmp_path):
    disk = image(tmp_path / "disk", 300 * MIB)
    result = sourced(STARTUP, f"blank_disk_check {disk}", tmp_path)
    assert result.returncode == 0 and result.stdout == ""


@pytest.mark.parametrize(("size", "offset", "reason"), [
    (300 * MIB, 0, "its first 4 MiB hold data"),
    (300 * MIB, 3 * MIB + 5, "its first 4 MiB hold data"),
    # 1k blocks: group 1's backup superblock at block 8193
    (300 * MIB, 8 * MIB + 1024, "it holds data at byte 8388608, where an ext4 keeps a backup superblock"),
    # 2k blocks in a first partition at 1 MiB: group 1 at 1 MiB + 32 MiB
    (300 * MIB, 33 * MIB, "it holds data at byte 34603008, where an ext4 keeps a backup superblock"),
    # 4k blocks: group 3 at 384 MiB
    (600 * MIB, 384 * MIB + 100, "it holds data at byte 402653184, where an ext4 keeps a backup superblock"),
    (300 * MIB, 300 * MIB - 1, "its last MiB holds data (where GPT keeps its backup header)"),
])
def test_blank_disk_check_names_the_first_place_that_holds_data(tmp_path, size, offset, reason):
    disk = image(tmp_path / "disk", size, {offset: b"\x01"})
    result = sourced(STARTUP, f"blank_disk_check {disk}", tmp_path)
    assert result.returncode == 1
    assert result.stdout.strip() == reason


@pytest.mark.parametrize(("size", "reason"), [(2 * MIB, "it is smaller than 4 MiB (or cannot be read)")])
def test_blank_disk_check_refuses_what_it_cannot_read_in_full(tmp_path, size, reason):
    disk = image(tmp_path / "disk", size)
    result = sourced(STARTUP, f"blank_disk_check {disk}", tmp_path)
    assert result.returncode == 1 and result.stdout.strip() == reason
    missing = sourced(STARTUP, f"blank_disk_check {tmp_path}/none", tmp_path)
    assert missing.returncode == 1 and missing.stdout.strip() == "its size cannot be read"


def test_reads_as_zeros_is_false_past_the_end(tmp_path):
    disk = image(tmp_path / "disk", MIB)
    assert sourced(STARTUP, f"reads_as_zeros {disk} 0 {MIB}", tmp_path).returncode == 0
    assert sourced(STARTUP, f"reads_as_zeros {disk} {MIB - 10} 20", tmp_path).returncode == 1


@pytest.mark.parametrize(("mount_point", "ok"), [("/mnt/tpu-vllm-cache", True), ("/data/cache", True),
                                                 ("/usr/cache", False), ("/mnt/../etc", False),
                                                 ("relative", False), ("/run", False)])
def test_check_mount_point(tmp_path, mount_point, ok):
    result = sourced(STARTUP, f"BOOT_ID=x; check_mount_point '{mount_point}'", tmp_path)
    assert (result.returncode == 0) is ok, result.stderr


def test_serve_parse_args_requires_every_flag(tmp_path):
    result = sourced(SERVE, "parse_args --status /s --api-key-file /k --model m --port 1 --upstream-port 2 "
                            "--container c --front-container f --runner /r --vllm-unit v --front-unit u -- img",
                     tmp_path)
    assert result.returncode == 2 and "serve.sh: missing --smoke-test" in result.stderr
    done = sourced(SERVE, "parse_args --status /s --api-key-file /k --model m --port 1 --upstream-port 2 "
                          "--container c --front-container f --runner /r --vllm-unit v --front-unit u "
                          "--smoke-test /t -- img 'a b'; printf '%s|' \"$STATUS_FILE\" \"$FRONT_URL\" "
                          "\"${VLLM_RUN_ARGS[@]}\"", tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{tmp_path}/s|http://127.0.0.1:1|img|a b|"


@pytest.mark.parametrize(("content", "expected"), [
    (f"ready\nboot {BOOT_ID}\n", "ready"),
    (f"failed: x (line 3)\nboot {BOOT_ID}\n", "failed: x (line 3)"),
    ("ready\nboot 5e6f7a8b-0000-4c4c-8888-000011112222\n", ""),
    ("ready\n", ""),
    (None, ""),
])
def test_serve_boot_status_reads_only_this_boots_status(tmp_path, content, expected):
    (tmp_path / "proc/sys/kernel/random").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/random/boot_id").write_text(BOOT_ID + "\n")
    if content is not None:
        (tmp_path / "status").write_text(content)
    result = sourced(SERVE, f"STATUS_FILE={tmp_path}/status; boot_status", tmp_path)
    assert result.returncode == 0 and result.stdout == (expected + "\n" if expected else "")


def test_serve_stage_file_keeps_only_its_own_places(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    kept = sourced(SERVE, f"WORK_DIR={work}; stage_file /etc/tpu-vllm/x.conf <<<'hello'; echo \"${{STAGED_PATHS[*]}}\"",
                   tmp_path)
    assert kept.stdout == "/etc/tpu-vllm/x.conf\n" and (work / "staged.0").read_text() == "hello\n"
    refused = sourced(SERVE, f"WORK_DIR={work}; stage_file /etc/sudoers <<<'x'", tmp_path)
    assert refused.returncode == 1 and "refusing to install /etc/sudoers" in refused.stderr


def test_serve_write_vllm_runner_keeps_every_argument_as_it_was(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text('#!/bin/bash\nprintf "<%s>" "$@"\n')
    (bin_dir / "docker").chmod(0o755)
    args = ["run", "--name", "x", "a b", "$HOME", "it's", '{"image":4}', "--", "-c"]
    quoted = " ".join("'" + arg.replace("'", "'\\''") + "'" for arg in args)
    result = sourced(SERVE, f"WORK_DIR={work}; VLLM_UNIT=v; RUNNER=/etc/tpu-vllm/run.sh; "
                            f"VLLM_RUN_ARGS=({quoted}); write_vllm_runner", tmp_path)
    assert result.returncode == 0, result.stderr
    ran = subprocess.run(["bash", str(tmp_path / "etc/tpu-vllm/run.sh")], capture_output=True, text=True,
                         env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert ran.stdout == "<run>" + "".join(f"<{arg}>" for arg in args)


def agent_shims(tmp_path: Path, *, installed: bool) -> tuple[Path, Path]:
    """`systemctl` and `curl` that record their arguments; the agent's unit exists only when `installed`."""
    shims, calls = tmp_path / "shims", tmp_path / "calls"
    shims.mkdir()
    (shims / "systemctl").write_text(f'#!/bin/sh\necho "systemctl $*" >>"{calls}"\n'
                                     f'[ "$1" = cat ] && exit {0 if installed else 1}\nexit 0\n')
    # No network in the tests, as on a node whose egress is blocked: the download fails as curl -f does.
    (shims / "curl").write_text(f'#!/bin/sh\necho "curl $*" >>"{calls}"\nexit 22\n')
    for shim in shims.iterdir():
        shim.chmod(0o755)
    return shims, calls


@pytest.mark.parametrize("installed", [False, True], ids=["first boot, install fails", "agent already there"])
def test_the_metrics_agent_gets_its_config_and_a_failure_costs_only_the_metrics(tmp_path, installed):
    root = tmp_path / "root"
    shims, calls = agent_shims(tmp_path, installed=installed)
    config = "metrics:\n  receivers: {}"
    result = sourced(STARTUP, f'BOOT_ID=abc; take_lock; write_status ready\n'
                              f'start_metrics_agent "{config}"; wait; echo "exit $?"', root,
                     PATH=f"{shims}:{os.environ['PATH']}")
    assert result.returncode == 0, result.stderr
    written = root / "etc/google-cloud-ops-agent/config.yaml"
    assert written.read_text() == config + "\n" and written.stat().st_mode & 0o777 == 0o644
    assert (root / boot_contract.STATUS_FILE.lstrip("/")).read_text() == "ready\nboot abc\n"  # the boot stands
    log = (root / "run/tpu-vllm/ops-agent.log").read_text()
    recorded = calls.read_text()
    if installed:
        assert "curl" not in recorded and "systemctl restart google-cloud-ops-agent" in recorded
    else:
        assert "curl -fsS --max-time 60 -o" in recorded and "add-google-cloud-ops-agent-repo.sh" in recorded
        assert "could not install the Ops Agent" in log and "restart" not in recorded
