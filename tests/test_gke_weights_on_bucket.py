"""The checkpoint on the cache bucket (vllm.weightsOnDisk on gke: HF_HOME is the bucket's huggingface/ prefix, mounted
by gcsfuse): the pods' grants let huggingface_hub's own download step land a file through the mount, and the compile
cache's prefix stays create-only.

huggingface_hub runs in the vLLM venv (its requirements-vllm.txt pin) through tests/hf_download_check.py, into a fake
gcsfuse mount (tests/fakes/gcsfuse_mount.py) that checks each rename and delete against the grants the stack makes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from components.gke import compile_cache
from tests import program as harness
from tests import vllm_venv

ROOT = Path(__file__).resolve().parent.parent
CHECK = ROOT / "tests" / "hf_download_check.py"
BUCKET = "gcp:storage/bucket:Bucket"
BUCKET_GRANT = "gcp:storage/bucketIAMMember:BucketIAMMember"
# The gke example with the checkpoint on the bucket (tests/test_policy_identities.py judges the same run).
WEIGHTS_CONFIG = harness.with_section(harness.gke_config(), "vllm", weightsOnDisk=True)
CONDITION_CLAUSE = re.compile(r'resource\.name\.startsWith\("projects/_/buckets/([^/"]+)/objects/([^"]+)"\)')


@pytest.fixture(scope="module")
def weights_program():
    return harness.run(WEIGHTS_CONFIG, stack="gke")


def pod_grants(program) -> list[tuple[str, str | None]]:
    """The pods' grants on the bucket as (role, object-name prefix its condition admits, or None: any object)."""
    bucket = program.one(BUCKET)["inputs"]["name"]
    grants: list[tuple[str, str | None]] = []
    for grant in program.of_type(BUCKET_GRANT):
        role, condition = grant["inputs"]["role"], grant["inputs"].get("condition")
        if condition is None:
            grants.append((role, None))
            continue
        for clause in condition["expression"].split(" || "):
            match = CONDITION_CLAUSE.fullmatch(clause)
            assert match and match.group(1) == bucket, clause
            grants.append((role, match.group(2)))
    return sorted(grants, key=lambda item: (item[0], item[1] or ""))


def hf_pin() -> str:
    [pin] = [line.split("==")[1].strip() for line in (ROOT / "requirements-vllm.txt").read_text().splitlines()
             if line.startswith("huggingface_hub==")]
    return pin


def download(grants: list[tuple[str, str | None]], root: Path) -> dict:
    request = {"root": str(root), "only_dir": compile_cache.WEIGHTS_PREFIX, "grants": grants}
    completed = vllm_venv.run([str(CHECK), json.dumps(request)], cwd=str(ROOT), text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)
    assert result["version"] == hf_pin()  # the image's huggingface_hub, not another
    return result


def test_a_checkpoint_file_lands_through_the_mount_with_the_pods_grants(weights_program, tmp_path):
    result = download(pod_grants(weights_program), tmp_path)
    assert result["error"] is None and result["blob"]
    # The temporary file was moved, not left behind (a refused delete would leave it, and fail the download).
    assert result["files"] == ["hub/models--org--model/blobs/0123abcd"]


def test_create_only_on_the_checkpoint_prefix_fails_the_download(tmp_path):
    """What the stack granted before: gcsfuse's rename copies, then its delete is refused (EACCES)."""
    result = download([(compile_cache.READ_ROLE, None), (compile_cache.WRITE_ROLE, "huggingface/")], tmp_path)
    assert result["error"] == "PermissionError: [Errno 13]"
    assert [name for name in result["files"] if name.endswith(".incomplete")]


def test_the_checkpoint_grant_is_its_prefix_alone_and_the_compile_cache_stays_create_only(weights_program,
                                                                                         gke_program):
    bucket = weights_program.one(BUCKET)["inputs"]["name"]
    cache_prefix = weights_program.output("compileCachePath")["value"].removeprefix(f"gs://{bucket}/")
    assert pod_grants(weights_program) == [("roles/storage.objectCreator", f"{cache_prefix}/"),
                                           ("roles/storage.objectUser", "huggingface/"),
                                           ("roles/storage.objectViewer", None)]
    # Without weightsOnDisk nothing may delete: read, and create under the configuration's prefix.
    assert {role for role, _ in pod_grants(gke_program)} == {"roles/storage.objectViewer",
                                                            "roles/storage.objectCreator"}
    [writer] = [g for g in weights_program.of_type(BUCKET_GRANT) if g["inputs"]["role"] == "roles/storage.objectUser"]
    assert "compile-cache" in writer["dependencies"]  # the pods wait for it, as for the cache's grants
