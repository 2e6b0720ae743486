"""A boot that fails cannot look ready: the real startup.sh under bash, the rendered boot-ready check under sh.

The status lives under /run and carries this boot's id; the check the containers' units wait on passes only
on this boot's `ready`. A reboot is a new id in $STARTUP_ROOT/proc/sys/kernel/random/boot_id.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import time
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


# ---- a stop under the guest agent: KillMode=process, and a runner that forwards nothing ----

# google-startup-scripts.service, GoogleCloudPlatform/guest-agent 20260724.00 (and every tag since d57d1f7,
# 2020): `Type=oneshot`, `KillMode=process`, so a stop signals the unit's main process alone; since 20250324.00
# that main process is a shell (google_metadata_script_runner_adapt) that runs the runner as its child.
# google_metadata_script_runner/main.go (same tag): setupAndRunScript writes the value to
# RunDir/metadata-scripts*/startup-script (0755, leading whitespace trimmed), runScript starts it with
# exec.Command(DefaultShell, "-c", path) (no Setpgid, no Setsid, no Pdeathsig, no signal forwarding), and runCmd
# gives it one pipe for stdout and stderr, logging each line as "startup-script: LINE". This runner does the same.
RUNNER = r'''
import os, subprocess, sys, tempfile
value = open(sys.argv[1]).read().lstrip(" \n\v\f\t\r")
directory = tempfile.mkdtemp(prefix="metadata-scripts", dir=os.environ["RUNNER_RUN_DIR"])
path = os.path.join(directory, "startup-script")
with open(path, "w") as script:
    script.write(value)
os.chmod(path, 0o755)
read, write = os.pipe()
child = subprocess.Popen(["/bin/bash", "-c", path], stdout=write, stderr=write)
os.close(write)
with os.fdopen(read, errors="replace") as lines:
    for line in lines:
        print(f"startup-script: {line.rstrip()}", flush=True)
child.wait()
'''
# google_metadata_script_runner_adapt (guest-agent 20260724.00): bash, the runner its child, not exec'd.
ADAPT = '''#!/usr/bin/env bash
if [ -e /usr/bin/gce_compat_metadata_script_runner ]; then
  /usr/bin/gce_compat_metadata_script_runner $1
else
  "$RUNNER_PYTHON" "$RUNNER_FILE" "$STARTUP_SCRIPT_FILE"
fi
'''
SCRIPT = Path(__file__).resolve().parent.parent / "startup" / "startup.sh"
RERUN = "rerun with: sudo systemctl restart google-startup-scripts"
# Bounds on waiting for what the test caused, never assertions on time.
SETTLE_SECONDS = 60


class Unit:
    """The unit's main process as systemd starts it (a session and process group of its own), running the runner
    (`runner`) or the adapt shell that runs it (`adapt`), which runs startup.sh."""

    def __init__(self, node: Run, directory: Path, main: str):
        (directory / "run-dir").mkdir(parents=True)
        runner, adapt = directory / "runner.py", directory / "adapt"
        runner.write_text(RUNNER)
        adapt.write_text(ADAPT)
        env = {**node.env, "RUNNER_RUN_DIR": str(directory / "run-dir"), "RUNNER_PYTHON": sys.executable,
               "RUNNER_FILE": str(runner), "STARTUP_SCRIPT_FILE": str(SCRIPT)}
        argv = [sys.executable, str(runner), str(SCRIPT)] if main == "runner" else ["bash", str(adapt), "startup"]
        self.process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        start_new_session=True)
        self.log = ""

    def wait_for(self, text: str) -> None:
        for line in self.process.stdout:
            self.log += line
            if text in line:
                return
        raise AssertionError(f"the run ended without {text!r}: {self.log}")

    def end(self) -> None:
        """Everything the test started in this unit's process group (the unit's own cgroup, on a node)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


def lock_holder(node: Run) -> int:
    return int((node.root / contract.BOOT_LOCK_FILE.lstrip("/")).read_text().split()[1])


def settled_status(node: Run) -> str:
    """The status once it no longer says `running` (or, after SETTLE_SECONDS, whatever it says)."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while node.status == "running" and time.monotonic() < deadline:
        time.sleep(0.02)
    return node.status


def lock_is_free(node: Run, settle: float = SETTLE_SECONDS) -> bool:
    """True once nothing holds the run's lock any more (waits up to `settle` seconds for it)."""
    lock = node.root / contract.BOOT_LOCK_FILE.lstrip("/")
    deadline = time.monotonic() + settle
    with lock.open() as handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.02)


@pytest.fixture
def stalled(tmp_path, servers):
    """A node whose metadata server never answers: the boot script sits in a 600 s back-off until stopped."""
    metadata, secretmanager = servers(FakeMetadata(attributes(), unavailable_first=10_000), good_secrets())
    node = Run(tmp_path, metadata.url, secretmanager.url, STARTUP_BACKOFF_SECONDS="600",
               STARTUP_WATCH_SECONDS="0.05", STARTUP_LOCK_WAIT_SECONDS="0")
    return node, metadata


@pytest.mark.parametrize(("main", "stop"), [("runner", signal.SIGTERM), ("runner", signal.SIGKILL),
                                            ("adapt", signal.SIGTERM)],
                         ids=["runner-SIGTERM", "runner-SIGKILL", "adapt-shell-SIGTERM"])
def test_a_stop_of_the_units_main_process_alone_ends_the_run_with_a_stopped_status_and_no_second_run_beside_it(
        tmp_path, stalled, main, stop):
    node, metadata = stalled
    unit = Unit(node, tmp_path / "unit", main)
    try:
        unit.wait_for("startup-script: tpu-vllm-startup: GET")  # its first metadata read failed; now it backs off
        assert node.status == "running"
        first = lock_holder(node)
        asked = len(metadata.requests)
        # A second run while the first lives (a restart, or the runner started by hand): it refuses to join it.
        second = node()
        assert second.returncode == 75
        assert f"another run of the boot script (pid {first}) is still going" in second.stderr
        assert "not running beside it" in second.stderr
        assert node.status_lines == ["running", f"boot {BOOT_ID}"] and len(metadata.requests) == asked

        os.kill(unit.process.pid, stop)  # KillMode=process: the unit's main process, and nothing else
        unit.process.wait()
        status = settled_status(node)
        assert status.startswith("failed: reading the metadata: stopped: ")
        assert f"(pid {unit.process.pid}), which started it, is gone: its unit was stopped or its runner killed" \
            in status
        assert status.endswith(RERUN)
        assert lock_is_free(node)  # the run and its watcher are gone: the restart the status advises can run
    finally:
        unit.end()


def test_a_restart_while_a_run_goes_on_waits_for_it_to_stop_then_runs_alone_to_ready(tmp_path, servers):
    metadata, secretmanager = servers(FakeMetadata(attributes(), unavailable_first=1), good_secrets())
    node = Run(tmp_path, metadata.url, secretmanager.url, STARTUP_BACKOFF_SECONDS="600",
               STARTUP_WATCH_SECONDS="0.05")
    old = Unit(node, tmp_path / "old", "adapt")
    try:
        old.wait_for("retry 1/")
        first = lock_holder(node)
        new = Unit(node, tmp_path / "new", "runner")
        try:
            new.wait_for(f"another run of the boot script (pid {first}) is still going: waiting up to 600s")
            asked = len(metadata.requests)
            os.kill(old.process.pid, signal.SIGTERM)  # what `systemctl restart` sends the old run's unit
            new.process.wait(timeout=SETTLE_SECONDS)
            new.log += new.process.stdout.read()
            assert new.process.returncode == 0, new.log
            assert node.status_lines == ["ready", f"boot {BOOT_ID}"]
            assert lock_holder(node) != first and len(metadata.requests) > asked
        finally:
            new.end()
    finally:
        old.end()


def test_a_boot_script_killed_outright_is_reported_by_its_watcher(tmp_path, stalled):
    node, _ = stalled
    process = subprocess.Popen(["bash", str(SCRIPT)], env=node.env, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        for line in process.stderr:
            if "retry 1/" in line:
                break
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        status = settled_status(node)
        assert status == (f"failed: stopped: the boot script (pid {process.pid}) was killed before it could write "
                          f"its status (SIGKILL?); {RERUN}")
        assert lock_is_free(node)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


def test_a_boot_script_whose_log_reader_is_gone_ends_stopped_not_running(stalled):
    """The runner killed before the watcher looks: the script's next log line meets a pipe with no reader."""
    node, _ = stalled
    process = subprocess.Popen(["bash", str(SCRIPT)], env=node.env, stderr=subprocess.PIPE, start_new_session=True)
    process.stderr.close()
    try:
        assert process.wait(timeout=SETTLE_SECONDS) == 143
        assert node.status.startswith("failed: reading the metadata: stopped by SIGPIPE: the runner that read its "
                                      "log is gone")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


# ---- a stop during a long step: the trap runs at once, the step's processes end with the run ----

# A fake that stands for a long step: it says its pid, then sleeps (exec: the same pid) until it is ended.
LONG = 'printf "%s\\n" "$$" >"$STARTUP_ROOT/.{name}.pid"; exec sleep 600'


def long_fake(name: str) -> str:
    return LONG.format(name=name)


def pid_of(node: Run, name: str) -> int:
    """The long fake's pid, once it has started (a bounded wait, never an assertion on time)."""
    path = node.root / f".{name}.pid"
    deadline = time.monotonic() + SETTLE_SECONDS
    while not (path.exists() and path.read_text().endswith("\n")) and time.monotonic() < deadline:
        time.sleep(0.02)
    return int(path.read_text())


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    return False


def gone(pid: int) -> bool:
    """True once the process has ended (waits up to SETTLE_SECONDS)."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while running(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not running(pid)


def end_run(process: subprocess.Popen, node: Run, fake: str) -> None:
    """Whatever the test left running: the script, and the long fake if it outlived it."""
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    process.wait()
    with contextlib.suppress(Exception):
        os.kill(pid_of(node, fake), signal.SIGKILL)


def long_step_node(tmp_path, servers, fake: str, disk: bool) -> Run:
    from tests.test_startup_script import DISK_FAKES, GIB
    extra = {contract.CACHE_DEVICE_ATTRIBUTE: "persistent-disk-1"} if disk else {}
    metadata, secretmanager = servers(FakeMetadata(attributes(**extra)), good_secrets())
    node = Run(tmp_path, metadata.url, secretmanager.url, fakes={**DISK_FAKES, fake: long_fake(fake)},
               STARTUP_WATCH_SECONDS="0.05")
    if disk:
        device = node.root / "dev/disk/by-id/google-persistent-disk-1"
        device.parent.mkdir(parents=True)
        with open(device, "wb") as image:
            image.truncate(GIB)  # sparse: a new disk reads as zeros, so the script formats it
        (node.root / "etc").mkdir()
    return node


@pytest.mark.parametrize(("fake", "disk", "step", "ends"), [
    ("curl", False, "reading the metadata", True),
    ("blkid", True, "probing the cache disk", True),
    ("mkfs.ext4", True, "formatting the blank cache disk", False),
], ids=["metadata-read", "disk-probe", "mkfs"])
def test_a_stop_during_a_long_step_says_failed_at_once_and_ends_the_step(tmp_path, servers, fake, disk, step,
                                                                         ends):
    """bash runs a trap only when the foreground command ends; a step waited on in the background (run_step) lets
    the stop's trap run at once. What systemd does under KillMode=process: SIGTERM to the script alone."""
    node = long_step_node(tmp_path, servers, fake, disk)
    process = node.start()
    try:
        step_pid = pid_of(node, fake)
        assert node.status == "running"
        os.kill(process.pid, signal.SIGTERM)
        status = settled_status(node)  # polled, bounded: the fake sleeps 600 s, so only the trap can write this
        assert status.startswith(f"failed: {step}") and ": stopped by SIGTERM" in status, status
        assert status.endswith(RERUN)
        assert process.wait(timeout=SETTLE_SECONDS) == 143
        if ends:
            assert gone(step_pid)  # the step's process group ended with the run
        else:
            # mkfs.ext4 is let finish (a half-formatted disk is one the next boot refuses), holding the lock.
            assert running(step_pid) and not lock_is_free(node, settle=0)
            os.kill(step_pid, signal.SIGKILL)
            assert lock_is_free(node)
    finally:
        end_run(process, node, fake)


def test_a_stop_before_ready_ends_the_image_pull_the_run_started(tmp_path, servers):
    """The pull runs in the background from the cache step on; a run stopped before `ready` (here in the secrets'
    600 s back-off) ends it with itself, as the status says the boot failed."""
    metadata, secretmanager = servers(FakeMetadata(attributes()), good_secrets(**{
        "projects/proj/secrets/hf-token": [503] * 10}))
    node = Run(tmp_path, metadata.url, secretmanager.url, fakes={"docker": long_fake("docker")},
               STARTUP_BACKOFF_SECONDS="600")
    process = node.start()
    try:
        pull = pid_of(node, "docker")
        node.wait_for_stderr("retry 1/")
        assert running(pull) and node.status == "running"
        os.kill(process.pid, signal.SIGTERM)
        assert settled_status(node).startswith("failed: reading the secrets: stopped by SIGTERM")
        assert gone(pull)
    finally:
        end_run(process, node, "docker")


def test_after_ready_the_image_pull_goes_on_for_the_deploy_to_join(tmp_path, servers):
    metadata, secretmanager = servers(FakeMetadata(attributes()), good_secrets())
    node = Run(tmp_path, metadata.url, secretmanager.url, fakes={"docker": long_fake("docker")})
    try:
        assert node().returncode == 0, node.result.stderr
        assert node.status == "ready" and running(pid_of(node, "docker"))
    finally:
        with contextlib.suppress(Exception):
            os.kill(pid_of(node, "docker"), signal.SIGKILL)
