"""The real startup/startup.sh under bash, against a fake metadata server and Secret Manager."""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from components.vm import boot_contract as contract
from tests.fakes.gcp_metadata import ACCESS_TOKEN, FakeMetadata, FakeSecretManager
from tests.shims import make_shims, stdlib_python3

SCRIPT = Path(__file__).resolve().parent.parent / "startup" / "startup.sh"
HF_CANARY = "hf_CANARYstartupTOKEN0123456789"
API_CANARY = "CANARYapiKEY0123456789abcdefghijklmnopqrstuv"
HF_SECRET = "projects/proj/secrets/hf-token"
API_SECRET = "projects/proj/secrets/tpu-vllm-dev-api-key"
CANARIES = (HF_CANARY, API_CANARY, ACCESS_TOKEN)
BOOT_ID = "0b1d0c52-7c1e-4a39-9a41-5d3e2f1c0a77"


def attributes(**extra):
    values = {contract.HF_TOKEN_SECRET_ATTRIBUTE: HF_SECRET, contract.API_KEY_SECRET_ATTRIBUTE: API_SECRET,
              contract.IMAGE_ATTRIBUTE: "vllm/vllm-tpu:nightly", contract.CACHE_MOUNT_ATTRIBUTE: "/mnt/tpu-vllm-cache"}
    values.update(extra)
    return {key: value for key, value in values.items() if value is not None}


class Run:
    def __init__(self, tmp_path: Path, metadata_url: str, secretmanager_url: str, fakes=None, **env):
        self.root = tmp_path / "root"
        self.root.mkdir(exist_ok=True)
        self.boot(BOOT_ID)
        self.log = tmp_path / "commands.log"
        self.env = make_shims(tmp_path / "bin", self.log, {"docker": "exit 0", **stdlib_python3(), **(fakes or {})})
        self.env.update({
            "STARTUP_ROOT": str(self.root),
            "GCE_METADATA_HOST": metadata_url.removeprefix("http://"),
            "CLOUDSDK_API_ENDPOINT_OVERRIDES_SECRETMANAGER": secretmanager_url + "/",
            "STARTUP_ATTEMPTS": "4",
            "STARTUP_BACKOFF_SECONDS": "0",
            **env,
        })

    def __call__(self):
        self.result = subprocess.run(["bash", str(SCRIPT)], env=self.env, capture_output=True, text=True,
                                     timeout=120)
        return self.result

    def start(self) -> subprocess.Popen:
        """Starts the script without waiting: `finish` collects what it said."""
        self.process = subprocess.Popen(["bash", str(SCRIPT)], env=self.env, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
        self.stderr_read = ""
        return self.process

    def wait_for_stderr(self, text: str) -> None:
        """Reads the running script's log until a line holds `text` (or it ends)."""
        for line in self.process.stderr:
            self.stderr_read += line
            if text in line:
                return

    def finish(self):
        stdout, stderr = self.process.communicate(timeout=120)
        self.result = subprocess.CompletedProcess(self.process.args, self.process.returncode, stdout,
                                                  self.stderr_read + stderr)
        return self.result

    def boot(self, boot_id: str) -> None:
        """The kernel's id of the boot the next run belongs to (a reboot gives a new one)."""
        path = self.root / contract.BOOT_ID_FILE.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(boot_id + "\n")

    @property
    def status_lines(self) -> list[str]:
        return (self.root / contract.STATUS_FILE.lstrip("/")).read_text().splitlines()

    @property
    def status(self) -> str:
        """The state line (the second line is the boot stamp)."""
        return self.status_lines[0]

    @property
    def commands(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def assert_no_canary_anywhere(self):
        for canary in CANARIES:
            assert canary not in self.commands, f"{canary} reached a command line"
            assert canary not in self.result.stdout and canary not in self.result.stderr


def good_secrets(**faults):
    return FakeSecretManager({HF_SECRET: HF_CANARY, API_SECRET: API_CANARY}, faults=faults or None)


def test_success_writes_each_secret_to_its_own_root_only_file_and_the_ready_marker(tmp_path, servers):
    metadata, secretmanager = servers(FakeMetadata(attributes()), good_secrets())
    run = Run(tmp_path, metadata.url, secretmanager.url)
    legacy = run.root / contract.LEGACY_ENV_FILE.lstrip("/")
    legacy.parent.mkdir(parents=True)
    legacy.write_text(f"HF_TOKEN={HF_CANARY}\n")  # what an earlier version left behind
    result = run()
    assert result.returncode == 0, result.stderr
    secrets_dir = run.root / contract.SECRETS_DIR.lstrip("/")
    assert (run.root / contract.HF_TOKEN_FILE.lstrip("/")).read_text() == HF_CANARY + "\n"
    assert (run.root / contract.API_KEY_FILE.lstrip("/")).read_text() == API_CANARY + "\n"
    assert sorted(path.name for path in secrets_dir.iterdir()) == ["api-key", "hf-token"]
    assert stat.S_IMODE(secrets_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(secrets_dir.parent.stat().st_mode) == 0o700
    for path in secrets_dir.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not legacy.exists()
    assert run.status == "ready"
    assert (run.root / "mnt/tpu-vllm-cache/vllm").is_dir()
    assert "docker pull vllm/vllm-tpu:nightly" in run.commands
    assert "no cache disk attribute" in result.stderr
    run.assert_no_canary_anywhere()
    # It really asked Secret Manager for the latest version of each secret, with the VM's token.
    paths = [r.path for r in secretmanager.requests]
    assert paths == [f"/v1/{HF_SECRET}/versions/latest:access", f"/v1/{API_SECRET}/versions/latest:access"]


def test_403_names_the_missing_binding_and_the_service_account(tmp_path, servers):
    metadata, secretmanager = servers(FakeMetadata(attributes()), good_secrets(**{HF_SECRET: [403] * 10}))
    run = Run(tmp_path, metadata.url, secretmanager.url)
    assert run().returncode == 1
    assert "roles/secretmanager.secretAccessor" in run.status
    assert "vm@proj.iam.gserviceaccount.com" in run.status
    assert not (run.root / contract.SECRETS_DIR.lstrip("/")).exists()
    assert len(secretmanager.requests) == 1  # a 403 is not retried
    run.assert_no_canary_anywhere()


def test_404_says_to_add_a_version(tmp_path, servers):
    metadata, secretmanager = servers(FakeMetadata(attributes()),
                                      FakeSecretManager({API_SECRET: API_CANARY}))
    run = Run(tmp_path, metadata.url, secretmanager.url)
    assert run().returncode == 1
    assert run.status.startswith("failed: the HF token secret has no version (or does not exist)")
    assert "gcloud secrets versions add SECRET_ID" in run.status and "tpu-vllm:hfTokenSecret" in run.status


@pytest.mark.parametrize(("state", "fix"), [
    ("DISABLED", "enable it: gcloud secrets versions enable 4 --secret=SECRET_ID; or add a new version"),
    ("DESTROYED", "its value is gone: add a new version"),
])
def test_a_latest_version_that_is_not_enabled_names_its_state_and_the_fix_and_claims_no_retries(
        tmp_path, servers, state, fix):
    # Secret Manager's `latest` is the newest version whatever its state: a disabled or destroyed one is a 400.
    secrets = FakeSecretManager({HF_SECRET: HF_CANARY, API_SECRET: API_CANARY}, latest_state={HF_SECRET: state},
                                latest_version=4)
    metadata, secretmanager = servers(FakeMetadata(attributes()), secrets)
    run = Run(tmp_path, metadata.url, secretmanager.url)
    assert run().returncode == 1
    assert len(secretmanager.requests) == 1  # a 400 is not retried, and the status must not say it was
    assert run.status.startswith(f"failed: the latest version (4) of the HF token secret is {state}")
    assert fix in run.status and "gcloud secrets versions add SECRET_ID --data-file=-" in run.status
    assert "attempts" not in run.status
    run.assert_no_canary_anywhere()


@pytest.mark.parametrize(("faults", "expected"), [
    ({HF_SECRET: [401]}, "failed: Secret Manager answered 401 for the HF token secret (not retried)"),
    ({HF_SECRET: [503] * 10}, "failed: Secret Manager answered 503 for the HF token secret after 4 attempts"),
])
def test_any_other_answer_says_how_often_it_was_asked(tmp_path, servers, faults, expected):
    metadata, secretmanager = servers(FakeMetadata(attributes()), good_secrets(**faults))
    run = Run(tmp_path, metadata.url, secretmanager.url)
    assert run().returncode == 1
    assert run.status == expected
    run.assert_no_canary_anywhere()


# A hfTokenSecret set with --secret: its id is private, so no boot log line (the serial console), status or
# error may carry it; the script says "the HF token secret".
PRIVATE_SECRET_ID = "CANARYprivateHFsecretID7f3a"
PRIVATE_HF_SECRET = f"projects/proj/secrets/{PRIVATE_SECRET_ID}"


@pytest.mark.parametrize("fault", [None, [403], [401], [503] * 10, [503, 429], "missing", "DISABLED", "DESTROYED"])
def test_a_private_hf_token_secret_id_never_reaches_a_log_line_or_the_status(tmp_path, servers, fault):
    values = {PRIVATE_HF_SECRET: HF_CANARY, API_SECRET: API_CANARY}
    if fault == "missing":
        values.pop(PRIVATE_HF_SECRET)
    states = {PRIVATE_HF_SECRET: fault} if fault in ("DISABLED", "DESTROYED") else None
    faults = {PRIVATE_HF_SECRET: fault} if isinstance(fault, list) else None
    private = attributes(**{contract.HF_TOKEN_SECRET_ATTRIBUTE: PRIVATE_HF_SECRET})
    metadata, secretmanager = servers(FakeMetadata(private),
                                      FakeSecretManager(values, faults=faults, latest_state=states, latest_version=4))
    run = Run(tmp_path, metadata.url, secretmanager.url)
    run()
    assert [r.path for r in secretmanager.requests][0] == f"/v1/{PRIVATE_HF_SECRET}/versions/latest:access"
    said = "\n".join([run.result.stdout, run.result.stderr, *run.status_lines])
    assert "the HF token secret" in said
    assert PRIVATE_SECRET_ID not in said
    run.assert_no_canary_anywhere()


def test_transient_503_and_429_are_retried(tmp_path, servers):
    metadata, secretmanager = servers(FakeMetadata(attributes()), good_secrets(**{HF_SECRET: [503, 429]}))
    run = Run(tmp_path, metadata.url, secretmanager.url)
    assert run().returncode == 0, run.result.stderr
    assert run.status == "ready"
    assert len([r for r in secretmanager.requests if HF_SECRET in r.path]) == 3
    run.assert_no_canary_anywhere()


def test_metadata_server_answering_503_at_first(tmp_path, servers):
    metadata, secretmanager = servers(FakeMetadata(attributes(), unavailable_first=2), good_secrets())
    run = Run(tmp_path, metadata.url, secretmanager.url)
    assert run().returncode == 0, run.result.stderr
    assert run.status == "ready"


def test_metadata_server_not_listening_yet(tmp_path):
    probe = FakeMetadata(attributes())
    port = probe.port
    probe.httpd.server_close()  # the port is free again: connections are refused until it starts
    started: list[FakeMetadata] = []
    with good_secrets() as secretmanager:
        # No back-off, and attempts enough to outlast any start of the server: it starts once the script has
        # said it got no answer, so the script must have retried a refused connection to reach `ready`.
        run = Run(tmp_path, f"http://127.0.0.1:{port}", secretmanager.url,
                  STARTUP_ATTEMPTS="100000", STARTUP_BACKOFF_SECONDS="0")
        run.start()
        try:
            run.wait_for_stderr("no answer")
            started.append(FakeMetadata(attributes(), port=port).__enter__())
            result = run.finish()
        finally:
            if run.process.poll() is None:
                run.process.kill()
                run.process.wait()
            for server in started:
                server.__exit__(None, None, None)
    assert result.returncode == 0, result.stderr
    assert "no answer" in result.stderr
    assert run.status == "ready"


def test_metadata_server_that_never_answers_fails_clearly(tmp_path, servers):
    metadata, secretmanager = servers(FakeMetadata(attributes(), unavailable_first=10_000), good_secrets())
    run = Run(tmp_path, metadata.url, secretmanager.url)
    assert run().returncode == 1
    assert run.status.startswith("failed: metadata server answered 503")


BLKID = shutil.which("blkid") or "/usr/sbin/blkid"
MKFS = shutil.which("mkfs.ext4") or "/usr/sbin/mkfs.ext4"
DUMPE2FS = shutil.which("dumpe2fs") or "/usr/sbin/dumpe2fs"
SFDISK = shutil.which("sfdisk") or "/usr/sbin/sfdisk"
needs_disk_tools = pytest.mark.skipif(not all(Path(tool).exists() for tool in (BLKID, MKFS, DUMPE2FS, SFDISK)),
                                      reason="run through ./scripts/test.sh, which installs e2fsprogs and fdisk")
DISK_FAKES = {
    # The real blkid and mkfs.ext4 on an image file; FAKE_* make them fail as a real disk can.
    "blkid": 'if [[ -n "${FAKE_BLKID_CODE:-}" ]]; then printf "%b" "${FAKE_BLKID_OUT:-}"; '
             'echo "blkid: probe failed" >&2; exit "$FAKE_BLKID_CODE"; fi\n'
             f'exec {BLKID} "$@"',
    "mkfs.ext4": '[[ -z "${FAKE_MKFS_FAIL:-}" ]] || { echo "mkfs.ext4: Device or resource busy" >&2; exit 1; }\n'
                 f'exec {MKFS} "$@"',
    # Mounting needs root: recorded, not done.
    "mountpoint": '[[ -e "$STARTUP_ROOT/.mounted" ]]',
    "mount": '[[ -z "${FAKE_MOUNT_FAIL:-}" ]] || { echo "mount: wrong fs type" >&2; exit 32; }\n'
             'touch "$STARTUP_ROOT/.mounted"',
}
GIB = 1 << 30
MIB = 1 << 20


def disk_run(tmp_path, servers, size: int = GIB, sized: bool = True, **env) -> Run:
    """A node with one blank data disk of `size` bytes at google-persistent-disk-1; `sized`: the metadata states the
    disk's size in GB, as the stack writes it (else only the name, as an older stack's metadata did)."""
    with_disk = attributes(**{contract.CACHE_DEVICE_ATTRIBUTE: "persistent-disk-1",
                              contract.CACHE_SIZE_ATTRIBUTE: str(size >> 30) if sized else None})
    metadata, secretmanager = servers(FakeMetadata(with_disk), good_secrets())
    # fakes_sleep: the 60 s wait for a disk that is not there passes at once.
    fakes = {**DISK_FAKES, "sleep": "exit 0"} if env.pop("fakes_sleep", False) else DISK_FAKES
    run = Run(tmp_path, metadata.url, secretmanager.url, fakes=fakes, **env)
    run.device = run.root / "dev/disk/by-id/google-persistent-disk-1"
    run.device.parent.mkdir(parents=True)
    with open(run.device, "wb") as image:
        image.truncate(size)  # sparse: a new persistent disk reads as zeros
    (run.root / "etc").mkdir()
    return run


def test_a_cache_disk_that_never_appears_names_the_nvme_case_and_how_to_look(tmp_path, servers):
    # On v6e a Hyperdisk attaches as NVMe; whether its image's udev rules make google-<name> is unverified.
    with_disk = attributes(**{contract.CACHE_DEVICE_ATTRIBUTE: "persistent-disk-1"})
    metadata, secretmanager = servers(FakeMetadata(with_disk), good_secrets())
    run = Run(tmp_path, metadata.url, secretmanager.url, fakes={**DISK_FAKES, "sleep": "exit 0"})
    assert run().returncode == 1
    assert run.status.startswith(f"failed: cache disk never appeared: {run.root}/dev/disk/by-id/google-persistent-"
                                 "disk-1 does not exist; is it attached (dataDisks)? On v6e the Hyperdisk attaches "
                                 "as NVMe")
    assert "ls -l /dev/disk/by-id" in run.status


# ---- the cache disk found by what the stack controls (its size), not by the name the service gives it ----

def sparse(path: Path, size: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as image:
        image.truncate(size)
    return path


def formatted(run: Run) -> list[Path]:
    """The devices mkfs.ext4 was run on (its last argument), in order."""
    return [Path(line.split()[-1]) for line in run.commands.splitlines() if line.startswith("mkfs.ext4 ")]


def boot_disk(run: Run, size: int) -> Path:
    """The node's boot disk: partitioned, so never the cache disk whatever its size (its -part1 link says so)."""
    disk = sparse(run.root / "dev/sda", size)
    (run.root / "dev/sdb1").write_bytes(b"")
    (run.device.parent / "google-persistent-disk-0").symlink_to(disk)
    (run.device.parent / "google-persistent-disk-0-part1").symlink_to(run.root / "dev/sdb1")
    return disk


@needs_disk_tools
def test_the_cache_disk_is_found_by_its_size_whatever_the_service_names_it(tmp_path, servers):
    run = disk_run(tmp_path, servers)
    run.device.unlink()  # the service named it otherwise: the NVMe link a Hyperdisk gets, say
    disk = sparse(run.root / "dev/nvme0n2", GIB)
    (run.device.parent / "nvme-nvme.1ae0-ZGF0YQ-Google-00000001").symlink_to(disk)
    boot = boot_disk(run, GIB)  # the same size, but partitioned
    sparse(run.device.parent / "google-scratch", 2 * GIB)  # unpartitioned, another size
    assert run().returncode == 0, run.result.stderr
    assert run.status == "ready"
    assert formatted(run) == [run.device.parent / "nvme-nvme.1ae0-ZGF0YQ-Google-00000001"]
    with open(boot, "rb") as untouched:
        assert real_uuid(disk) and untouched.read(MIB) == bytes(MIB)  # the boot disk: not formatted


@needs_disk_tools
def test_the_named_disk_is_preferred_among_disks_of_the_cache_size(tmp_path, servers):
    run = disk_run(tmp_path, servers)
    sparse(run.device.parent / "google-persistent-disk-2", GIB)
    assert run().returncode == 0, run.result.stderr
    assert formatted(run) == [run.device]


def test_two_disks_of_the_cache_size_neither_named_are_refused_not_guessed(tmp_path, servers):
    run = disk_run(tmp_path, servers, fakes_sleep=True)
    run.device.rename(run.device.parent / "google-data-a")
    sparse(run.device.parent / "google-data-b", GIB)
    assert run().returncode == 1
    assert run.status.startswith("failed: cache disk: several unpartitioned disks are 1 GiB (/dev/disk/by-id/google-"
                                 "data-a /dev/disk/by-id/google-data-b), and none is google-persistent-disk-1: set "
                                 "tpu-vllm:cache.deviceName to the one to use")
    assert command_count(run, "mkfs.ext4") == 0 and command_count(run, "blkid") == 0


def test_a_disk_of_another_size_is_never_taken_for_the_cache_disk_even_by_its_name(tmp_path, servers):
    run = disk_run(tmp_path, servers, fakes_sleep=True)
    sparse(run.device, 2 * GIB)
    assert run().returncode == 1
    assert run.status.startswith("failed: cache disk never appeared: no unpartitioned disk of 1 GiB (1073741824 "
                                 "bytes) under /dev/disk/by-id; others: /dev/disk/by-id/google-persistent-disk-1 "
                                 "(2147483648 bytes)")
    assert command_count(run, "blkid") == 0 and command_count(run, "mkfs.ext4") == 0


def command_count(run: Run, name: str) -> int:
    return sum(line.startswith(name + " ") for line in run.commands.splitlines())


def real_uuid(device: Path) -> str:
    return subprocess.run([BLKID, "-p", "-s", "UUID", "-o", "value", str(device)], capture_output=True,
                          text=True, check=True).stdout.strip()


def fstab_line(uuid: str) -> str:
    return f"UUID={uuid} /mnt/tpu-vllm-cache ext4 discard,defaults,nofail,x-systemd.device-timeout=10s 0 2"


def zero(device: Path, offset: int, length: int) -> None:
    with open(device, "r+b") as image:
        image.seek(offset)
        image.write(bytes(length))


def mkfs(device: Path, *options: str) -> None:
    subprocess.run([MKFS, "-q", "-F", *options, str(device)], check=True, capture_output=True)


class DiskBytes:
    """What a sparse image file reads as, kept as its data extents only (a 1 GiB image holds a few MiB): a
    byte-for-byte comparison of two reads without reading the holes, which read as zeros."""

    def __init__(self, device: Path):
        self.extents: list[tuple[int, bytes]] = []
        with open(device, "rb") as image:
            self.size = os.fstat(image.fileno()).st_size
            offset = 0
            while offset < self.size:
                try:
                    start = os.lseek(image.fileno(), offset, os.SEEK_DATA)
                except OSError as error:  # ENXIO: nothing but a hole from here to the end
                    if error.errno != errno.ENXIO:
                        raise
                    break
                end = os.lseek(image.fileno(), start, os.SEEK_HOLE)
                image.seek(start)
                self.extents.append((start, image.read(end - start)))
                offset = end

    def read(self, start: int, end: int) -> bytes:
        chunk = bytearray(end - start)
        for offset, data in self.extents:
            low, high = max(start, offset), min(end, offset + len(data))
            if low < high:
                chunk[low - start:high - start] = data[low - offset:high - offset]
        return bytes(chunk)

    def differences(self, other: DiskBytes) -> list[str]:
        """The places where the two reads differ: every byte outside both sets of extents is a zero in both."""
        if self.size != other.size:
            return [f"size {self.size} != {other.size}"]
        ranges = sorted((offset, offset + len(data)) for offset, data in (*self.extents, *other.extents))
        return [f"bytes {start}-{end}" for start, end in ranges if self.read(start, end) != other.read(start, end)]


def backup_superblock_uuid(device: Path, backup_block: int, block_size: int) -> str:
    """The filesystem's UUID as its backup superblock still holds it (what `e2fsck -b` recovers from)."""
    dumped = subprocess.run([DUMPE2FS, "-h", "-o", f"superblock={backup_block}", "-o", f"blocksize={block_size}",
                             str(device)], capture_output=True, text=True)
    match = re.search(r"^Filesystem UUID:\s+(\S+)$", dumped.stdout, re.MULTILINE)
    return match.group(1) if match else ""


@needs_disk_tools
def test_a_blank_cache_disk_is_formatted_once_mounted_and_listed_in_fstab_idempotently(tmp_path, servers):
    run = disk_run(tmp_path, servers)
    assert run().returncode == 0, run.result.stderr
    uuid = real_uuid(run.device)
    assert subprocess.run([BLKID, "-p", "-s", "TYPE", "-o", "value", str(run.device)], capture_output=True,
                          text=True).stdout.strip() == "ext4"
    assert run().returncode == 0, run.result.stderr  # second boot: no format, no second fstab line
    assert real_uuid(run.device) == uuid
    assert (run.root / "etc/fstab").read_text().splitlines() == [fstab_line(uuid)]
    assert command_count(run, "mkfs.ext4") == 1
    assert command_count(run, "mount") == 1
    # Only the low-level probe decides: a cached `blkid DEVICE` answer never does.
    assert all(line.startswith("blkid -p ") for line in run.commands.splitlines() if line.startswith("blkid"))


@needs_disk_tools
def test_a_replaced_disk_replaces_the_fstab_line_for_its_mount_point(tmp_path, servers):
    run = disk_run(tmp_path, servers)
    (run.root / "etc/fstab").write_text("UUID=root / ext4 defaults 0 1\n"
                                        "UUID=9999-0000 /mnt/tpu-vllm-cache ext4 defaults,nofail 0 2\n")
    assert run().returncode == 0, run.result.stderr
    assert (run.root / "etc/fstab").read_text().splitlines() == ["UUID=root / ext4 defaults 0 1",
                                                                 fstab_line(real_uuid(run.device))]


@pytest.mark.parametrize("code", ["4"])
def test_a_blkid_error_fails_clearly_and_never_formats(tmp_path, servers, code):
    run = disk_run(tmp_path, servers, FAKE_BLKID_CODE=code)
    assert run().returncode == 1
    assert run.status.startswith(f"failed: blkid -p could not probe {run.root}/dev/disk/by-id/google-persistent-disk-1 "
                                 f"(exit {code}: blkid: probe failed)")
    assert command_count(run, "mkfs.ext4") == 0 and command_count(run, "mount") == 0
    assert not (run.root / "etc/fstab").exists()


def _ext4_start_zeroed(device: Path, length: int) -> tuple[int, int, str]:
    mkfs(device)  # 1 GiB: 4k blocks, groups of 128 MiB, the first backup at block 32768
    uuid = real_uuid(device)
    zero(device, 0, length)
    return 32768, 4096, uuid


def _small_ext4_start_zeroed(device: Path) -> tuple[int, int, str]:
    mkfs(device, "-b", "1024")  # 1k blocks, groups of 8 MiB, the first backup at block 8193
    uuid = real_uuid(device)
    zero(device, 0, 4 * MIB)
    return 8193, 1024, uuid


def _ext4_in_a_lost_partition(device: Path) -> tuple[int, int, str]:
    # A first partition at 1 MiB whose table is gone: blkid -p sees nothing at the start of the disk.
    subprocess.run([MKFS, "-q", "-F", "-E", "offset=1048576", str(device), "262144"], check=True,
                   capture_output=True)
    return 0, 0, ""


def _data_after_the_first_mib(device: Path) -> tuple[int, int, str]:
    with open(device, "r+b") as image:
        image.seek(2 * MIB)
        image.write(b"compile cache " * 1000)
    return 0, 0, ""


def _gpt_with_its_start_zeroed(device: Path) -> tuple[int, int, str]:
    subprocess.run([SFDISK, "-q", str(device)], input="label: gpt\n,\n", text=True, check=True,
                   capture_output=True)
    zero(device, 0, 4 * MIB)
    return 0, 0, ""


def _data_only_at_the_end(device: Path) -> tuple[int, int, str]:
    with open(device, "r+b") as image:
        image.seek(GIB - 4096)
        image.write(b"EFI PART")
    return 0, 0, ""


@needs_disk_tools
@pytest.mark.parametrize(("prepare", "expected"), [
    (lambda device: _ext4_start_zeroed(device, MIB), "where an ext4 keeps a backup superblock"),
    (lambda device: _ext4_start_zeroed(device, 4 * MIB), "where an ext4 keeps a backup superblock"),
    (_small_ext4_start_zeroed, "where an ext4 keeps a backup superblock"),
    (_ext4_in_a_lost_partition, "its first 4 MiB hold data"),
    (_data_after_the_first_mib, "its first 4 MiB hold data"),
    (_gpt_with_its_start_zeroed, ""),
    (_data_only_at_the_end, "its last MiB holds data"),
], ids=["ext4-first-MiB-zeroed", "ext4-first-4MiB-zeroed", "ext4-1k-blocks-start-zeroed",
        "ext4-in-a-lost-partition-at-1MiB", "data-after-1MiB", "gpt-start-zeroed", "data-only-at-the-end"])
def test_a_disk_that_holds_data_where_blkid_sees_nothing_is_never_formatted(tmp_path, servers, prepare, expected):
    run = disk_run(tmp_path, servers)
    backup_block, block_size, uuid = prepare(run.device)
    assert subprocess.run([BLKID, "-p", str(run.device)], capture_output=True).returncode in (0, 2)
    before = DiskBytes(run.device)
    assert run().returncode == 1
    assert run.status.startswith("failed: ")
    assert expected in run.status
    assert "not formatting" in run.status or "partition table" in run.status
    assert command_count(run, "mkfs.ext4") == 0 and command_count(run, "mount") == 0
    assert before.differences(DiskBytes(run.device)) == []
    if backup_block:
        # Still the filesystem it was, recoverable from its backup; the status says how, and how to format.
        assert backup_superblock_uuid(run.device, backup_block, block_size) == uuid
        assert f"e2fsck -b 32768 {run.device}" in run.status and f"mkfs.ext4 -m 0 {run.device}" in run.status


@pytest.mark.parametrize("device_kind", ["directory", "short"])
def test_a_device_that_cannot_be_read_in_full_is_never_formatted(tmp_path, servers, device_kind):
    # blkid -p exits 2 for "nothing found" and also when it cannot open the path at all. Found by its name alone
    # (by its size, neither would be taken for the cache disk at all).
    run = disk_run(tmp_path, servers, sized=False)
    if device_kind == "directory":
        run.device.unlink()
        run.device.mkdir()
    else:
        run.device.write_bytes(bytes(100))  # cannot be read as far as a real disk's first MiBs
    assert run().returncode == 1
    assert "not blank" in run.status and "not formatting" in run.status
    assert command_count(run, "mkfs.ext4") == 0 and command_count(run, "mount") == 0


@pytest.mark.parametrize(("probe", "expected"), [
    ("TYPE=xfs\\nUUID=abcd\\n", "holds a xfs filesystem, not ext4; refusing to format it"),
    ("PTUUID=1234\\nPTTYPE=gpt\\n", "has a gpt partition table"),
])
def test_a_disk_that_is_not_plain_ext4_is_refused_not_formatted(tmp_path, servers, probe, expected):
    run = disk_run(tmp_path, servers, FAKE_BLKID_CODE="0", FAKE_BLKID_OUT=probe)
    assert run().returncode == 1
    assert expected in run.status and run.status.startswith("failed: cache disk ")
    assert command_count(run, "mkfs.ext4") == 0 and command_count(run, "mount") == 0


def test_no_fstab_line_is_ever_written_with_an_empty_uuid(tmp_path, servers):
    run = disk_run(tmp_path, servers, FAKE_BLKID_CODE="0", FAKE_BLKID_OUT="TYPE=ext4\\n")
    assert run().returncode == 1
    assert "UUID '' is empty or malformed; not writing /etc/fstab" in run.status
    assert not (run.root / "etc/fstab").exists()


def _line_of(status: str) -> str:
    match = re.search(r"\(line (\d+)\)$", status)
    assert match, status
    return SCRIPT.read_text().splitlines()[int(match.group(1)) - 1]


@needs_disk_tools
@pytest.mark.parametrize(("env", "step", "command"), [
    ({"FAKE_MKFS_FAIL": "1"}, "formatting the blank cache disk", "mkfs.ext4"),
    ({"FAKE_MOUNT_FAIL": "1"}, "mounting the cache disk", "mount -o discard,defaults"),
])
def test_a_failed_mkfs_or_mount_ends_in_a_failed_status_naming_the_step_and_line(tmp_path, servers, env, step,
                                                                                  command):
    run = disk_run(tmp_path, servers, **env)
    assert run().returncode != 0
    assert run.status.startswith(f"failed: {step} ")
    assert f"`{command}" in run.status
    assert command in _line_of(run.status)
    assert not (run.root / contract.SECRETS_DIR.lstrip("/")).exists()


def test_any_unexpected_failure_ends_in_a_failed_status_not_running(tmp_path, servers):
    metadata, secretmanager = servers(FakeMetadata(attributes()), good_secrets())
    run = Run(tmp_path, metadata.url, secretmanager.url, fakes={"install": "exit 1"})
    assert run().returncode == 1
    assert run.status.startswith("failed: writing the secret files: `install -m 0600 ")
    assert "install -m 0600" in _line_of(run.status)
    run.assert_no_canary_anywhere()


@pytest.mark.parametrize("reply", [b"<html>captive portal</html>"])
def test_a_200_token_reply_that_is_not_json_fails_clearly(tmp_path, servers, reply):
    metadata, secretmanager = servers(FakeMetadata(attributes(), token_reply=reply), good_secrets())
    run = Run(tmp_path, metadata.url, secretmanager.url)
    assert run().returncode == 1
    assert run.status == ("failed: the metadata server's token reply (HTTP 200) is not JSON with an access_token; "
                          "is something intercepting metadata.google.internal?")
    assert secretmanager.requests == []
    assert "captive" not in run.result.stderr  # the reply's text is never echoed


@pytest.mark.parametrize("mount_point", ["/mnt/../etc"])
def test_a_system_mount_point_from_metadata_is_refused(tmp_path, servers, mount_point):
    metadata, secretmanager = servers(FakeMetadata(attributes(**{contract.CACHE_MOUNT_ATTRIBUTE: mount_point})),
                                      good_secrets())
    run = Run(tmp_path, metadata.url, secretmanager.url)
    assert run().returncode == 1
    assert run.status.startswith(f"failed: cache mount point {mount_point}") or \
        run.status.startswith(f"failed: cache mount point '{mount_point}'")
    assert secretmanager.requests == []


def test_the_script_reads_every_attribute_the_stack_sets():
    metadata = contract.node_metadata(startup_script="", ssh_keys="", hf_token_secret="", api_key_secret="",
                                      ssh_host_key_secret="", cache_device="", cache_mount="", image="")
    script = SCRIPT.read_text()
    ours = [key for key in metadata if key.startswith("tpu-vllm-")]
    assert len(ours) == 7
    for key in ours:
        assert re.search(rf"metadata_attribute {key} \w+\n", script), key


def test_the_script_writes_the_secret_files_where_the_containers_mount_them():
    script = SCRIPT.read_text()
    assert f'SECRETS_DIR="$ROOT{contract.SECRETS_DIR}"' in script
    assert f'LEGACY_ENV_FILE="$ROOT{contract.LEGACY_ENV_FILE}"' in script
    assert f'STATUS_FILE="$STATUS_DIR/{contract.STATUS_FILE.rsplit("/", 1)[1]}"' in script
    assert contract.BOOT_LOCK_FILE.rsplit("/", 1)[0] == contract.STATUS_FILE.rsplit("/", 1)[0]
    assert f'LOCK_FILE="$STATUS_DIR/{contract.BOOT_LOCK_FILE.rsplit("/", 1)[1]}"' in script
    names = [path.rsplit("/", 1)[1] for path in (contract.HF_TOKEN_FILE, contract.API_KEY_FILE)]
    assert f"for name in {' '.join(names)}; do" in script
