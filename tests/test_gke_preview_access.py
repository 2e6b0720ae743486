"""The pull-request preview identity's project roles (the `previewIam` output) let `pulumi preview --refresh` read
every Cloud Storage and Artifact Registry resource a gke stack declares.

What each refresh reads, and which role holds that permission, are Google's: the provider's read calls
(terraform-provider-google-beta resource_storage_bucket.go resourceStorageBucketRead: `Buckets.Get(bucket)`; an
IAM member's read is the resource's getIamPolicy; the Artifact Registry repository's read is its GET) and the
predefined roles' permissions as snapshotted by iann0036/iam-dataset gcp/roles/*.json (head 2073fa52, 2026-08-22).
"""

from __future__ import annotations

import pytest

from components.core.preview_access import preview_identity_access
from tests import program as harness

READ_PERMISSION = {
    "gcp:storage/bucket:Bucket": "storage.buckets.get",
    "gcp:storage/bucketIAMMember:BucketIAMMember": "storage.buckets.getIamPolicy",
    "gcp:artifactregistry/repository:Repository": "artifactregistry.repositories.get",
    "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember": "artifactregistry.repositories.getIamPolicy",
}
# Of those permissions, what each role a stack's previewIam may name holds (the snapshot's includedPermissions).
ROLE_HOLDS = {
    "roles/iam.securityReviewer": {"storage.buckets.getIamPolicy", "artifactregistry.repositories.getIamPolicy"},
    "roles/storage.bucketViewer": {"storage.buckets.get"},
    "roles/artifactregistry.reader": {"artifactregistry.repositories.get"},
    "roles/container.viewer": set(), "roles/iam.serviceAccountViewer": set(), "roles/secretmanager.viewer": set(),
    "roles/serviceusage.serviceUsageViewer": set(), "roles/monitoring.viewer": set(),
}


@pytest.fixture(scope="module")
def mirror_program():
    # The same run as tests/test_policy_identities.py's and tests/test_gke_image_digest.py's mirror stack.
    return harness.run(harness.with_section(harness.gke_config(), "gke", dockerHubMirror=True), stack="gke")


def unread(program) -> list[str]:
    """Each Storage or Artifact Registry resource whose refresh read no role in the stack's previewIam holds."""
    roles = program.output("previewIam")["value"]["projectRoles"]
    assert set(roles) <= set(ROLE_HOLDS), set(roles) - set(ROLE_HOLDS)  # a new role: say what it holds here
    held = set().union(*(ROLE_HOLDS[role] for role in roles))
    return [f"{r['type']} {r['name']}: {READ_PERMISSION[r['type']]}" for r in program.registrations
            if r["type"] in READ_PERMISSION and READ_PERMISSION[r["type"]] not in held]


def test_the_preview_identity_reads_the_gke_stacks_bucket_and_mirror(gke_program, mirror_program):
    assert [r for r in mirror_program.registrations if r["type"] == "gcp:artifactregistry/repository:Repository"]
    assert unread(gke_program) == [] and unread(mirror_program) == []


def test_each_read_role_is_asked_only_where_its_resource_is():
    def roles(platform: str, mirror: bool) -> set[str]:
        return set(preview_identity_access(platform, "p", False, docker_hub_mirror=mirror)["projectRoles"])

    assert "roles/storage.bucketViewer" in roles("gke", False) - roles("vm", False)
    assert "roles/artifactregistry.reader" in roles("gke", True) - roles("gke", False)
    assert "roles/artifactregistry.reader" not in roles("vm", True)  # a vm stack has no mirror, whatever gke says
