"""A boot that fails cannot look ready: the real startup.sh under bash, the rendered boot-ready check under sh.

The status lives under /run and carries this boot's id; the check the containers' units wait on passes only
on this boot's `ready`. A reboot is a new id in $STARTUP_ROOT/proc/sys/kernel/random/boot_id.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from components.vm import boot_contract as contract
from tests.fakes.gcp_metadata import FakeMetadata
from tests.test_startup_script import BOOT_ID, Run, attributes, good_secrets

NEXT_BOOT_ID = "9a8b7c6d-1111-4222-8333-444455556666"


def boot_ready(run: Run) -> subprocess.CompletedProcess:
    """The check tpu-vllm-boot-ready.service runs (as rendered by the stack), against this fake node."""
    check = run.root / contract.BOOT_READY_CHECK.lstrip("/")
    check.parent.mkdir(parents=True, exist_ok=True)
    check.write_text(contract.boot_ready_check_script())
    return subprocess.run(["sh", str(check)], env={"STARTUP_ROOT": str(run.root), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True)


@pytest.fixture
def node(tmp_path, servers):
    metadata, secretmanager = servers(FakeMetadata(attributes()), good_secrets())
    return Run(tmp_path, metadata.url, secretmanager.url)


def test_this_boots_ready_passes_the_check_and_is_stamped_with_this_boot(node):
    assert node().returncode == 0, node.result.stderr
    assert node.status_lines == ["ready", f"boot {BOOT_ID}"]
    assert boot_ready(node).returncode == 0
    assert node.root.joinpath(contract.STATUS_FILE.lstrip("/")).parent == node.root / "run/tpu-vllm"


def test_a_second_boot_whose_script_never_runs_does_not_inherit_the_first_boots_ready(node):
    assert node().returncode == 0, node.result.stderr
    node.boot(NEXT_BOOT_ID)  # rebooted; the guest agent never ran the script this time
    checked = boot_ready(node)
    assert checked.returncode == 1
    assert "written by another boot" in checked.stderr


def test_a_second_boot_dying_before_its_first_step_fails_the_check_and_says_failed(tmp_path, servers):
    metadata, secretmanager = servers(FakeMetadata(attributes()), good_secrets())
    node = Run(tmp_path, metadata.url, secretmanager.url)
    assert node().returncode == 0 and boot_ready(node).returncode == 0
    node.boot(NEXT_BOOT_ID)
    # Boot 2: its very first command (the scratch directory) fails.
    dying = Run(tmp_path, metadata.url, secretmanager.url, fakes={"mktemp": "exit 1"})
    dying.boot(NEXT_BOOT_ID)
    assert dying().returncode != 0
    assert dying.status_lines[0].startswith("failed: starting: `mktemp -d` exited 1")
    assert dying.status_lines[1] == f"boot {NEXT_BOOT_ID}"
    checked = boot_ready(dying)
    assert checked.returncode == 1 and "not ready" in checked.stderr
    assert secretmanager.requests[2:] == []  # boot 2 read no secret


def test_the_status_left_where_earlier_versions_kept_it_is_removed(node):
    legacy = node.root / contract.LEGACY_STATUS_FILE.lstrip("/")
    legacy.parent.mkdir(parents=True)
    legacy.write_text("ready\n")
    assert node().returncode == 0, node.result.stderr
    assert not legacy.exists()


@pytest.mark.parametrize(("status", "message"), [
    (None, "has not run on this boot"),
    ("running", "not ready"),
    ("failed: permission denied", "not ready"),
    ("ready\nboot ", "written by another boot"),
    ("ready", "written by another boot"),
    ("READY", "written by another boot"),
])
def test_the_check_passes_on_nothing_but_this_boots_ready(node, status, message):
    node.root.joinpath(contract.BOOT_ID_FILE.lstrip("/")).write_text(BOOT_ID + "\n")
    status_file = node.root / contract.STATUS_FILE.lstrip("/")
    status_file.parent.mkdir(parents=True, exist_ok=True)
    if status is not None:
        stamp = "" if "\n" in status or status in ("ready", "READY") else f"\nboot {BOOT_ID}"
        status_file.write_text(status + stamp + "\n")
    checked = boot_ready(node)
    assert checked.returncode == 1
    assert message in checked.stderr


def test_sigterm_during_a_retry_ends_failed_not_running(tmp_path, servers):
    metadata, secretmanager = servers(FakeMetadata(attributes(), unavailable_first=10_000), good_secrets())
    # A long backoff: only a trap that runs during the sleep can write the status before it ends.
    node = Run(tmp_path, metadata.url, secretmanager.url, STARTUP_ATTEMPTS="8", STARTUP_BACKOFF_SECONDS="600")
    script = Path(__file__).resolve().parent.parent / "startup" / "startup.sh"
    process = subprocess.Popen(["bash", str(script)], env=node.env, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        for line in process.stderr:
            if "retry 1/8" in line:
                break
        assert node.status == "running"
        # What `systemctl stop` (or its timeout) does: SIGTERM to every process of the unit.
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == 143
    assert node.status.startswith("failed: reading the metadata: stopped by SIGTERM")
    assert node.status_lines[1] == f"boot {BOOT_ID}"
