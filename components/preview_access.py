"""What the pull-request preview identity needs to run `pulumi preview --refresh` on this stack.

Derived from the settings, so the one-time setup in docs/review.md grants exactly this stack's secrets
(the stack output `previewIam`, also in the offline plan) instead of names written for `dev`.
Reads only: a preview creates nothing, and a refresh reads every resource in state.
"""

from __future__ import annotations

from typing import Any

from components.secrets import ACCESSOR_ROLE, api_key_secret_id, hf_token_secret_id, ssh_host_key_secret_id

# Each role with what the refresh or the program reads through it.
SHARED_ROLES = {
    "roles/compute.viewer": "the firewall rules, the cache disk and its lookup by name (compute.disks.get)",
    "roles/iam.serviceAccountViewer": "the stack's service account",
    "roles/secretmanager.viewer": "the secrets, their IAM bindings and the hand-made hf-token's lookup",
    "roles/serviceusage.serviceUsageViewer": "the enabled APIs",
}
VM_ROLES = {
    "roles/tpu.viewer": "the queued resource and its node (the provider's read)",
}
GKE_ROLES = {
    "roles/container.viewer": "the cluster, its node pools, the engine versions and every Kubernetes object the "
                              "stack made (read through gke-gcloud-auth-plugin)",
    "roles/iam.securityReviewer": "the project- and service-account-level IAM bindings (getIamPolicy)",
}


def preview_identity_access(platform: str, prefix: str, stack_keeps_hf_token: bool) -> dict[str, Any]:
    """{"projectRoles": {role: why}, "secretAccessor": {secret id: why}} for the preview identity."""
    roles = {**SHARED_ROLES, **(GKE_ROLES if platform == "gke" else VM_ROLES)}
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
