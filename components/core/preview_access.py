"""What the pull-request preview identity needs to run `pulumi preview --refresh` on this stack.

Derived from the settings, so the one-time setup in docs/review.md grants exactly this stack's secrets
(the stack output `previewIam`, also in the offline plan) instead of names written for `dev`.
Reads only: a preview creates nothing, and a refresh reads every resource in state.
"""

from __future__ import annotations

from typing import Any

from components.core.secrets import ACCESSOR_ROLE, api_key_secret_id, hf_token_secret_id, ssh_host_key_secret_id

# Each role with what the refresh or the program reads through it.
SHARED_ROLES = {
    "roles/iam.serviceAccountViewer": "the stack's service account",
    "roles/secretmanager.viewer": "the secrets, their IAM bindings and the hand-made hf-token's lookup",
    "roles/serviceusage.serviceUsageViewer": "the enabled APIs",
}
# Only the vm stack has firewall rules and a cache disk: the gke stack reads no Compute Engine resource itself.
VM_ROLES = {
    "roles/compute.viewer": "the firewall rules, the cache disk and its lookup by name (compute.disks.get)",
    "roles/tpu.viewer": "the queued resource and its node (the provider's read)",
}
# tpu.api compute: the node is a Compute Engine instance, read through compute.viewer (no TPU API resource at all).
VM_COMPUTE_ROLES = {
    "roles/compute.viewer": "the firewall rules, the cache disk and its lookup by name (compute.disks.get), and the "
                            "TPU VM instance (compute.instances.get: the provider's read and the guard's diff)",
}
# Role contents: Google's predefined roles as snapshotted by iann0036/iam-dataset gcp/roles/*.json (head 2073fa52,
# 2026-08-22). iam.securityReviewer holds storage.buckets.getIamPolicy and artifactregistry.repositories.getIamPolicy
# but neither resource's get, which a refresh of the bucket (the provider's Buckets.Get) and of the mirror needs.
GKE_ROLES = {
    "roles/container.viewer": "the cluster, its node pools, the engine versions and every Kubernetes object the "
                              "stack made (read through gke-gcloud-auth-plugin)",
    "roles/iam.securityReviewer": "the project-, service-account- and bucket-level IAM bindings (getIamPolicy)",
    "roles/storage.bucketViewer": "the compile-cache bucket (storage.buckets.get and list only, no object; a beta "
                                  "role)",
}
# gke.dockerHubMirror: the narrowest predefined role with artifactregistry.repositories.get; it also lets the
# identity pull the images of the project's repositories.
GKE_MIRROR_ROLES = {
    "roles/artifactregistry.reader": "the Docker Hub mirror repository (artifactregistry.repositories.get; its "
                                     "IAM binding through iam.securityReviewer)",
}

# monitoring.enabled: the dashboard, the alert policies and their channel; on vm also the Ops Agent's two project
# roles for the VM's account (IAMMember, read with the project's getIamPolicy).
MONITORING_ROLES = {
    "roles/monitoring.viewer": "the dashboard, the alert policies and their notification channel",
}
VM_MONITORING_ROLES = {
    "roles/iam.securityReviewer": "the VM account's two project-level grants for the Ops Agent (getIamPolicy)",
}


def preview_identity_access(platform: str, prefix: str, stack_keeps_hf_token: bool,
                            monitoring: bool = False, docker_hub_mirror: bool = False,
                            node_api: str = "queued-resource") -> dict[str, Any]:
    """{"projectRoles": {role: why}, "secretAccessor": {secret id: why}} for the preview identity;
    docker_hub_mirror: gke.dockerHubMirror (read on gke only); node_api: the vm node's path (tpu.api)."""
    vm_roles = VM_COMPUTE_ROLES if node_api == "compute" else VM_ROLES
    roles = {**SHARED_ROLES, **(GKE_ROLES if platform == "gke" else vm_roles)}
    if platform == "gke" and docker_hub_mirror:
        roles.update(GKE_MIRROR_ROLES)
    if monitoring:
        roles.update(MONITORING_ROLES)
        if platform != "gke":
            roles.update(VM_MONITORING_ROLES)
    # A refresh reads a SecretVersion's payload, so accessor only on the secrets whose version the stack
    # manages; a hand-made hf-token is only looked up (metadata, secretmanager.viewer).
    managed = [api_key_secret_id(prefix)] + ([hf_token_secret_id(prefix)] if stack_keeps_hf_token else [])
    if platform != "gke":
        managed.append(ssh_host_key_secret_id(prefix))  # the node's SSH host key (components/vm/host_key.py)
    return {
        "projectRoles": dict(sorted(roles.items())),
        "secretAccessor": {secret: f"{ACCESSOR_ROLE}: a refresh reads the version the stack manages"
                           for secret in sorted(managed)},
    }
