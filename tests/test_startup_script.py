"""The real startup/startup.sh under bash, against a fake metadata server and Secret Manager."""

from __future__ import annotations

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


def test_success_writes_a_root_only_env_file_and_the_ready_marker(tmp_path, servers):
    metadata, secretmanager = servers(FakeMetadata(attributes()), good_secrets())
    run = Run(tmp_path, metadata.url, secretmanager.url)
    result = run()
    assert result.returncode == 0, result.stderr
    env_file = run.root / contract.ENV_FILE.lstrip("/")
    env_dir = env_file.parent
    assert env_file.read_text() == f"HF_TOKEN={HF_CANARY}\nVLLM_API_KEY={API_CANARY}\n"
    assert stat.S_IMODE(env_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
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
    assert not (run.root / contract.ENV_FILE.lstrip("/")).exists()
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
    # blkid: blank until mkfs ran; then it reports a UUID.
    "blkid": 'marker="$STARTUP_ROOT/.formatted"; [[ -e "$marker" ]] || exit 2; '
             '[[ "$1" == -s ]] && echo 1111-2222; exit 0',
    "mkfs.ext4": 'touch "$STARTUP_ROOT/.formatted"',
    "mountpoint": '[[ -e "$STARTUP_ROOT/.mounted" ]]',
    "mount": 'touch "$STARTUP_ROOT/.mounted"',
}


def test_cache_disk_is_formatted_once_mounted_and_listed_in_fstab_idempotently(tmp_path, servers):
    with_disk = attributes(**{contract.CACHE_DEVICE_ATTRIBUTE: "persistent-disk-1"})
    metadata, secretmanager = servers(FakeMetadata(with_disk), good_secrets())
    run = Run(tmp_path, metadata.url, secretmanager.url, fakes=DISK_FAKES)
    device = run.root / "dev/disk/by-id/google-persistent-disk-1"
    device.parent.mkdir(parents=True)
    device.touch()
    (run.root / "etc").mkdir()
    assert run().returncode == 0, run.result.stderr
    assert run().returncode == 0, run.result.stderr  # second boot: no format, no second fstab line
    fstab = (run.root / "etc/fstab").read_text().splitlines()
    assert fstab == ["UUID=1111-2222 /mnt/tpu-vllm-cache ext4 discard,defaults,nofail,"
                     "x-systemd.device-timeout=10s 0 2"]
    assert run.commands.count("mkfs.ext4 ") == 1
    assert run.commands.count("\nmount ") + run.commands.startswith("mount ") == 1


def test_the_script_reads_every_attribute_the_stack_sets():
    metadata = contract.node_metadata(startup_script="", ssh_keys="", hf_token_secret="", api_key_secret="",
                                      cache_device="", cache_mount="", image="")
    script = SCRIPT.read_text()
    ours = [key for key in metadata if key.startswith("tpu-vllm-")]
    assert len(ours) == 5
    for key in ours:
        assert f"metadata_attribute {key})" in script, key
