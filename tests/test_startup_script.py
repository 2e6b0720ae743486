"""The real startup/startup.sh under bash, against a fake metadata server and Secret Manager."""

from __future__ import annotations

import re
import stat
import subprocess
import threading
from pathlib import Path

import pytest

from components.vm import boot_contract as contract
from tests.fakes.gcp_metadata import ACCESS_TOKEN, FakeMetadata, FakeSecretManager
from tests.shims import make_shims

SCRIPT = Path(__file__).resolve().parent.parent / "startup" / "startup.sh"
HF_CANARY = "hf_CANARYstartupTOKEN0123456789"
API_CANARY = "CANARYapiKEY0123456789abcdefghijklmnopqrstuv"
HF_SECRET = "projects/proj/secrets/hf-token"
API_SECRET = "projects/proj/secrets/tpu-vllm-dev-api-key"
CANARIES = (HF_CANARY, API_CANARY, ACCESS_TOKEN)


def attributes(**extra):
    values = {contract.HF_TOKEN_SECRET_ATTRIBUTE: HF_SECRET, contract.API_KEY_SECRET_ATTRIBUTE: API_SECRET,
              contract.IMAGE_ATTRIBUTE: "vllm/vllm-tpu:nightly", contract.CACHE_MOUNT_ATTRIBUTE: "/mnt/tpu-vllm-cache"}
    values.update(extra)
    return {key: value for key, value in values.items() if value is not None}


class Run:
    def __init__(self, tmp_path: Path, metadata_url: str, secretmanager_url: str, fakes=None, **env):
        self.root = tmp_path / "root"
        self.root.mkdir(exist_ok=True)
        self.log = tmp_path / "commands.log"
        self.env = make_shims(tmp_path / "bin", self.log, {"docker": "exit 0", **(fakes or {})})
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

    @property
    def status(self) -> str:
        return (self.root / contract.STATUS_FILE.lstrip("/")).read_text().strip()

    @property
    def commands(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def assert_no_canary_anywhere(self):
        for canary in CANARIES:
            assert canary not in self.commands, f"{canary} reached a command line"
            assert canary not in self.result.stdout and canary not in self.result.stderr


@pytest.fixture
def servers():
    started = []

    def start(metadata: FakeMetadata, secretmanager: FakeSecretManager):
        started.extend([metadata.__enter__(), secretmanager.__enter__()])
        return metadata, secretmanager

    yield start
    for server in started:
        server.__exit__(None, None, None)


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
    assert "no enabled version" in run.status and "gcloud secrets versions add hf-token" in run.status


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
    timer = threading.Timer(1.0, lambda: started.append(FakeMetadata(attributes(), port=port).__enter__()))
    with good_secrets() as secretmanager:
        timer.start()
        try:
            run = Run(tmp_path, f"http://127.0.0.1:{port}", secretmanager.url,
                      STARTUP_ATTEMPTS="6", STARTUP_BACKOFF_SECONDS="1")
            result = run()
        finally:
            timer.join()
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


DISK_FAKES = {
    # blkid -p -o export: nothing (exit 2) until mkfs ran, then an ext4 filesystem; FAKE_BLKID_* override it.
    "blkid": 'marker="$STARTUP_ROOT/.formatted"\n'
             'if [[ -n "${FAKE_BLKID_CODE:-}" ]]; then printf "%s" "${FAKE_BLKID_OUT:-}"; '
             'echo "blkid: probe failed" >&2; exit "$FAKE_BLKID_CODE"; fi\n'
             '[[ -e "$marker" ]] || exit 2\n'
             'printf "DEVNAME=%s\\nUUID=%s\\nBLOCK_SIZE=4096\\nTYPE=ext4\\nUSAGE=filesystem\\n" "${@: -1}" '
             '"${FAKE_UUID-1111-2222}"',
    "mkfs.ext4": '[[ -z "${FAKE_MKFS_FAIL:-}" ]] || { echo "mkfs.ext4: Device or resource busy" >&2; exit 1; }\n'
                 'touch "$STARTUP_ROOT/.formatted"',
    "mountpoint": '[[ -e "$STARTUP_ROOT/.mounted" ]]',
    "mount": '[[ -z "${FAKE_MOUNT_FAIL:-}" ]] || { echo "mount: wrong fs type" >&2; exit 32; }\n'
             'touch "$STARTUP_ROOT/.mounted"',
}
FSTAB_LINE = ("UUID=1111-2222 /mnt/tpu-vllm-cache ext4 discard,defaults,nofail,"
              "x-systemd.device-timeout=10s 0 2")


def disk_run(tmp_path, servers, **env) -> Run:
    with_disk = attributes(**{contract.CACHE_DEVICE_ATTRIBUTE: "persistent-disk-1"})
    metadata, secretmanager = servers(FakeMetadata(with_disk), good_secrets())
    run = Run(tmp_path, metadata.url, secretmanager.url, fakes=DISK_FAKES, **env)
    device = run.root / "dev/disk/by-id/google-persistent-disk-1"
    device.parent.mkdir(parents=True)
    device.write_bytes(bytes(1 << 20))  # a new persistent disk reads as zeros
    (run.root / "etc").mkdir()
    return run


def command_count(run: Run, name: str) -> int:
    return sum(line.startswith(name + " ") for line in run.commands.splitlines())


def test_cache_disk_is_formatted_once_mounted_and_listed_in_fstab_idempotently(tmp_path, servers):
    run = disk_run(tmp_path, servers)
    assert run().returncode == 0, run.result.stderr
    assert run().returncode == 0, run.result.stderr  # second boot: no format, no second fstab line
    assert (run.root / "etc/fstab").read_text().splitlines() == [FSTAB_LINE]
    assert command_count(run, "mkfs.ext4") == 1
    assert command_count(run, "mount") == 1
    # Only the low-level probe decides: a cached `blkid DEVICE` answer never does.
    assert all(line.startswith("blkid -p ") for line in run.commands.splitlines() if line.startswith("blkid"))


def test_a_replaced_disk_replaces_the_fstab_line_for_its_mount_point(tmp_path, servers):
    run = disk_run(tmp_path, servers)
    (run.root / "etc/fstab").write_text("UUID=root / ext4 defaults 0 1\n"
                                        "UUID=9999-0000 /mnt/tpu-vllm-cache ext4 defaults,nofail 0 2\n")
    assert run().returncode == 0, run.result.stderr
    assert (run.root / "etc/fstab").read_text().splitlines() == ["UUID=root / ext4 defaults 0 1", FSTAB_LINE]


@pytest.mark.parametrize("code", ["4"])
def test_a_blkid_error_fails_clearly_and_never_formats(tmp_path, servers, code):
    run = disk_run(tmp_path, servers, FAKE_BLKID_CODE=code)
    assert run().returncode == 1
    assert run.status.startswith(f"failed: blkid -p could not probe {run.root}/dev/disk/by-id/google-persistent-disk-1 "
                                 f"(exit {code}: blkid: probe failed)")
    assert command_count(run, "mkfs.ext4") == 0 and command_count(run, "mount") == 0
    assert not (run.root / "etc/fstab").exists()


@pytest.mark.parametrize("device_kind", ["data", "directory", "short"])
def test_no_filesystem_found_never_formats_a_disk_that_is_not_blank(tmp_path, servers, device_kind):
    # blkid -p exits 2 for "nothing found" and also when it cannot open the path at all.
    run = disk_run(tmp_path, servers)
    device = run.root / "dev/disk/by-id/google-persistent-disk-1"
    if device_kind == "data":
        device.write_bytes(bytes(4096) + b"compile cache" + bytes(1 << 20))
    elif device_kind == "directory":
        device.unlink()
        device.mkdir()
    else:
        device.write_bytes(bytes(100))  # cannot be read as far as a real disk's first MiB
    assert run().returncode == 1
    assert "does not read as zeros (or cannot be read); not formatting" in run.status
    assert command_count(run, "mkfs.ext4") == 0 and command_count(run, "mount") == 0


@pytest.mark.parametrize(("probe", "expected"), [
    ("TYPE=xfs\nUUID=abcd\n", "holds a xfs filesystem, not ext4; refusing to format it"),
    ("PTUUID=1234\nPTTYPE=gpt\n", "has a gpt partition table"),
])
def test_a_disk_that_is_not_plain_ext4_is_refused_not_formatted(tmp_path, servers, probe, expected):
    run = disk_run(tmp_path, servers, FAKE_BLKID_CODE="0", FAKE_BLKID_OUT=probe)
    assert run().returncode == 1
    assert expected in run.status and run.status.startswith("failed: cache disk ")
    assert command_count(run, "mkfs.ext4") == 0 and command_count(run, "mount") == 0


def test_no_fstab_line_is_ever_written_with_an_empty_uuid(tmp_path, servers):
    run = disk_run(tmp_path, servers, FAKE_UUID="")
    assert run().returncode == 1
    assert "UUID '' is empty or malformed; not writing /etc/fstab" in run.status
    assert not (run.root / "etc/fstab").exists()


def _line_of(status: str) -> str:
    match = re.search(r"\(line (\d+)\)$", status)
    assert match, status
    return SCRIPT.read_text().splitlines()[int(match.group(1)) - 1]


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
                                      cache_device="", cache_mount="", image="")
    script = SCRIPT.read_text()
    ours = [key for key in metadata if key.startswith("tpu-vllm-")]
    assert len(ours) == 5
    for key in ours:
        assert f"metadata_attribute {key})" in script, key


def test_the_script_writes_the_secret_files_where_the_containers_mount_them():
    script = SCRIPT.read_text()
    assert f'SECRETS_DIR="$ROOT{contract.SECRETS_DIR}"' in script
    assert f'LEGACY_ENV_FILE="$ROOT{contract.LEGACY_ENV_FILE}"' in script
    assert f'STATUS_FILE="$STATUS_DIR/{contract.STATUS_FILE.rsplit("/", 1)[1]}"' in script
    names = [path.rsplit("/", 1)[1] for path in (contract.HF_TOKEN_FILE, contract.API_KEY_FILE)]
    assert f"for name in {' '.join(names)}; do" in script
