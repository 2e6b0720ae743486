"""The stack's identities hold exactly the grants the stack makes: an allow-list, tried on many resource types.

Each variant adds one grant to the dev (vm) or gke stack's own resources and goes through the pure function
and through the pack's real entry (tests/policy_entry_check.py under pulumi-policy, in the pack's venv).
"""

from __future__ import annotations

import copy
import json

import pytest

from policy import identity_grants
from tests import program as harness
from tests.policy_venv import entry_reports
from tests.test_gke_policy import with_urns as gke_urns
from tests.test_gke_weights_on_bucket import WEIGHTS_CONFIG
from tests.test_policy import STACK_URN, program_resources

RULE = "stack-identities-hold-only-their-grants"
VM_ACCOUNT = "tpu-vllm-dev-vm@my-proj.iam.gserviceaccount.com"
WORKLOAD = "tpu-vllm-gke-wl@my-proj.iam.gserviceaccount.com"
NODES = "tpu-vllm-gke-nodes@my-proj.iam.gserviceaccount.com"
ADAPTER = "tpu-vllm-gke-metrics@my-proj.iam.gserviceaccount.com"
SA = f"serviceAccount:{VM_ACCOUNT}"


def grant(type_: str, name: str = "extra-grant", **props):
    return (type_, props, f"{STACK_URN}{type_}::{name}")


# name -> (stack, the grant added, text the violation must say); None: the grant is allowed.
VARIANTS = {
    "service account IAMMember: the VM's account may act as another": (
        "vm", grant("gcp:serviceaccount/iAMMember:IAMMember", role="roles/iam.serviceAccountTokenCreator",
                    serviceAccountId="projects/my-proj/serviceAccounts/deployer@my-proj.iam.gserviceaccount.com",
                    member=SA), "roles/iam.serviceAccountTokenCreator"),
    "service account IAMMember: someone may act as the VM's account": (
        "vm", grant("gcp:serviceaccount/iAMMember:IAMMember", role="roles/iam.serviceAccountTokenCreator",
                    serviceAccountId=f"projects/my-proj/serviceAccounts/{VM_ACCOUNT}",
                    member="user:mallory@example.com"), "could act as the stack's identity"),
    "service account IAMBinding: Workload Identity for the VM's account to a user": (
        "vm", grant("gcp:serviceaccount/iAMBinding:IAMBinding", role="roles/iam.workloadIdentityUser",
                    serviceAccountId=f"projects/my-proj/serviceAccounts/{VM_ACCOUNT}",
                    members=["user:mallory@example.com"]), "could act as the stack's identity"),
    "bucket IAMMember": (
        "vm", grant("gcp:storage/bucketIAMMember:BucketIAMMember", bucket="team-data",
                    role="roles/storage.objectViewer", member=SA), "roles/storage.objectViewer on BucketIAMMember"),
    "bucket IAMPolicy": (
        "vm", grant("gcp:storage/bucketIAMPolicy:BucketIAMPolicy", bucket="team-data", policyData=json.dumps(
            {"bindings": [{"role": "roles/storage.admin", "members": [SA]}]})), "roles/storage.admin"),
    "bucket access control (ACL entity)": (
        "vm", grant("gcp:storage/bucketAccessControl:BucketAccessControl", bucket="team-data", role="READER",
                    entity=f"user-{VM_ACCOUNT}"), VM_ACCOUNT),
    "bucket ACL role entities": (
        "vm", grant("gcp:storage/bucketACL:BucketACL", bucket="team-data",
                    roleEntities=[f"OWNER:user-{VM_ACCOUNT}"]), VM_ACCOUNT),
    "another team's secret": (
        "vm", grant("gcp:secretmanager/secretIamMember:SecretIamMember", secretId="billing-db-password",
                    role="roles/secretmanager.secretAccessor", member=SA), "a secret that is not the stack's own"),
    "another project's secret of the same name": (
        "vm", grant("gcp:secretmanager/secretIamMember:SecretIamMember",
                    secretId="projects/other-proj/secrets/hf-token", role="roles/secretmanager.secretAccessor",
                    member=SA), "a secret that is not the stack's own"),
    "admin on the stack's own secret": (
        "vm", grant("gcp:secretmanager/secretIamMember:SecretIamMember", secretId="tpu-vllm-dev-api-key",
                    role="roles/secretmanager.admin", member=SA), "roles/secretmanager.admin"),
    "Artifact Registry repository": (
        "vm", grant("gcp:artifactregistry/repositoryIamMember:RepositoryIamMember", repository="images",
                    location="us", role="roles/artifactregistry.writer", member=SA), "roles/artifactregistry.writer"),
    "KMS key": (
        "vm", grant("gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember", cryptoKeyId="proj/us/ring/key",
                    role="roles/cloudkms.cryptoKeyDecrypter", member=SA), "roles/cloudkms.cryptoKeyDecrypter"),
    "KMS key ring IAMBinding": (
        "vm", grant("gcp:kms/keyRingIAMBinding:KeyRingIAMBinding", keyRingId="proj/us/ring",
                    role="roles/cloudkms.admin", members=[SA]), "roles/cloudkms.admin"),
    "project IAMMember with the deleted: spelling": (
        "vm", grant("gcp:projects/iAMMember:IAMMember", project="my-proj", role="roles/viewer",
                    member=f"deleted:{SA}?uid=123456789"), "roles/viewer on project"),
    "project IAMMember with a condition": (
        "vm", grant("gcp:projects/iAMMember:IAMMember", project="my-proj", role="roles/storage.admin", member=SA,
                    condition={"title": "t", "expression": "true"}), "roles/storage.admin on project"),
    "organization IAMBinding": (
        "vm", grant("gcp:organizations/iAMBinding:IAMBinding", orgId="123", role="roles/browser",
                    members=[SA.upper().replace("SERVICEACCOUNT", "serviceAccount")]), "roles/browser on organization"),
    "folder IAMPolicy": (
        "vm", grant("gcp:folder/iAMPolicy:IAMPolicy", folder="folders/42", policyData=json.dumps(
            {"bindings": [{"role": "roles/viewer", "members": [SA]}]})), "roles/viewer on folder"),
    "the GKE nodes' role for the VM's account": (
        "vm", grant("gcp:projects/iAMMember:IAMMember", project="my-proj",
                    role="roles/container.defaultNodeServiceAccount", member=SA),
        "roles/container.defaultNodeServiceAccount on project"),
    "pub/sub topic": (
        "vm", grant("gcp:pubsub/topicIAMMember:TopicIAMMember", topic="t", role="roles/pubsub.publisher",
                    member=SA), "roles/pubsub.publisher"),
    "BigQuery dataset access": (
        "vm", grant("gcp:bigquery/datasetAccess:DatasetAccess", datasetId="d", role="READER",
                    userByEmail=VM_ACCOUNT), VM_ACCOUNT),
    "another member's grants are not the stack's business": (
        "vm", grant("gcp:storage/bucketIAMMember:BucketIAMMember", bucket="b", role="roles/storage.admin",
                    member="serviceAccount:other@my-proj.iam.gserviceaccount.com"), None),
    "a same-named account in another project is not the stack's": (
        "vm", grant("gcp:projects/iAMMember:IAMMember", project="other-proj", role="roles/owner",
                    member="serviceAccount:tpu-vllm-dev-vm@other-proj.iam.gserviceaccount.com"), None),
    # gke: three identities, each with its own allowed grants only.
    "gke: the workload reads another secret": (
        "gke", grant("gcp:secretmanager/secretIamMember:SecretIamMember", secretId="hf-token-of-another-team",
                     role="roles/secretmanager.secretAccessor", member=f"serviceAccount:{WORKLOAD}"),
        "a secret that is not the stack's own"),
    "gke: the workload gets the adapter's metric reads": (
        "gke", grant("gcp:projects/iAMMember:IAMMember", project="my-proj", role="roles/monitoring.viewer",
                     member=f"serviceAccount:{WORKLOAD}"), "roles/monitoring.viewer on project"),
    "gke: the metrics adapter gets the nodes' role": (
        "gke", grant("gcp:projects/iAMMember:IAMMember", project="my-proj",
                     role="roles/container.defaultNodeServiceAccount", member=f"serviceAccount:{ADAPTER}"),
        "roles/container.defaultNodeServiceAccount on project"),
    "gke: the workload may write another bucket": (
        "gke", grant("gcp:storage/bucketIAMMember:BucketIAMMember", bucket="team-data", role="roles/storage.objectUser",
                     member=f"serviceAccount:{WORKLOAD}"), "roles/storage.objectUser on BucketIAMMember"),
    "gke: the workload administers its own cache bucket": (
        "gke", grant("gcp:storage/bucketIAMMember:BucketIAMMember", bucket="tpu-vllm-gke-xla-my-proj",
                     role="roles/storage.admin", member=f"serviceAccount:{WORKLOAD}"), "roles/storage.admin"),
    "gke: the metrics adapter writes the cache bucket": (
        "gke", grant("gcp:storage/bucketIAMMember:BucketIAMMember", bucket="tpu-vllm-gke-xla-my-proj",
                     role="roles/storage.objectUser", member=f"serviceAccount:{ADAPTER}"), "roles/storage.objectUser"),
    "gke: the nodes get a project editor role": (
        "gke", grant("gcp:projects/iAMMember:IAMMember", project="my-proj", role="roles/editor",
                     member=f"serviceAccount:{NODES}"), "roles/editor on project"),
    "gke: the nodes read the stack's API key": (
        "gke", grant("gcp:secretmanager/secretIamMember:SecretIamMember", secretId="tpu-vllm-gke-api-key",
                     role="roles/secretmanager.secretAccessor", member=f"serviceAccount:{NODES}"),
        "the stack's secret, for an identity that does not read it"),
    "gke: a user may impersonate the workload": (
        "gke", grant("gcp:serviceaccount/iAMMember:IAMMember", role="roles/iam.serviceAccountUser",
                     serviceAccountId=f"projects/my-proj/serviceAccounts/{WORKLOAD}",
                     member="user:mallory@example.com"), "could act as the stack's identity"),
    "gke: another namespace's pods may use the workload's identity": (
        "gke", grant("gcp:serviceaccount/iAMMember:IAMMember", role="roles/iam.workloadIdentityUser",
                     serviceAccountId=f"projects/my-proj/serviceAccounts/{WORKLOAD}",
                     member="serviceAccount:my-proj.svc.id.goog[default/default]"),
        "could act as the stack's identity"),
    "gke: the adapter's Kubernetes account may use the workload's identity": (
        "gke", grant("gcp:serviceaccount/iAMMember:IAMMember", role="roles/iam.workloadIdentityUser",
                     serviceAccountId=f"projects/my-proj/serviceAccounts/{WORKLOAD}",
                     member="serviceAccount:my-proj.svc.id.goog[custom-metrics/custom-metrics-stackdriver-adapter]"),
        "could act as the stack's identity"),
    # --- issue 27: acting as a stack identity, by every name it has ---
    "the VM's account named by its numeric unique id (unknown at preview: may be the stack's)": (
        "vm", grant("gcp:serviceaccount/iAMMember:IAMMember", role="roles/iam.serviceAccountTokenCreator",
                    serviceAccountId="projects/my-proj/serviceAccounts/104712345678901234567",
                    member="user:mallory@example.com"), "could act as the stack's identity"),
    "the VM's account named through projects/-/": (
        "vm", grant("gcp:serviceaccount/iAMMember:IAMMember", role="roles/iam.serviceAccountTokenCreator",
                    serviceAccountId=f"projects/-/serviceAccounts/{VM_ACCOUNT}",
                    member="user:mallory@example.com"), "could act as the stack's identity"),
    "project-wide token creator for anyone": (
        "vm", grant("gcp:projects/iAMMember:IAMMember", project="my-proj", role="roles/iam.serviceAccountTokenCreator",
                    member="user:mallory@example.com"), "could act as every service account there"),
    "project-wide service account user for anyone": (
        "vm", grant("gcp:projects/iAMBinding:IAMBinding", project="my-proj", role="roles/iam.serviceAccountUser",
                    members=["group:devs@example.com"]), "could act as every service account there"),
    "project-wide key admin in a whole policy": (
        "vm", grant("gcp:projects/iAMPolicy:IAMPolicy", project="my-proj", policyData=json.dumps(
            {"bindings": [{"role": "roles/iam.serviceAccountKeyAdmin", "members": ["user:mallory@example.com"]}]})),
        "could act as every service account there"),
    "folder-wide OpenID token creator": (
        "vm", grant("gcp:folder/iAMMember:IAMMember", folder="folders/42",
                    role="roles/iam.serviceAccountOpenIdTokenCreator", member="user:mallory@example.com"),
        "could act as every service account there"),
    "organization-wide Workload Identity user": (
        "vm", grant("gcp:organizations/iAMMember:IAMMember", orgId="123", role="roles/iam.workloadIdentityUser",
                    member="user:mallory@example.com"), "could act as every service account there"),
    "gke: the workload's Kubernetes account as a principal:// gets a project role": (
        "gke", grant("gcp:projects/iAMMember:IAMMember", project="my-proj", role="roles/storage.admin",
                     member="principal://iam.googleapis.com/projects/123456789012/locations/global/"
                            "workloadIdentityPools/my-proj.svc.id.goog/subject/ns/tpu-vllm/sa/vllm"),
        "names the stack's Kubernetes identity"),
    "gke: the workload's Kubernetes account in the legacy svc.id.goog form gets a bucket role": (
        "gke", grant("gcp:storage/bucketIAMMember:BucketIAMMember", bucket="team-data", role="roles/storage.admin",
                     member="serviceAccount:my-proj.svc.id.goog[tpu-vllm/vllm]"),
        "names the stack's Kubernetes identity"),
    "gke: the serving namespace as a principalSet:// gets a project role": (
        "gke", grant("gcp:projects/iAMMember:IAMMember", project="my-proj", role="roles/viewer",
                     member="principalSet://iam.googleapis.com/projects/123456789012/locations/global/"
                            "workloadIdentityPools/my-proj.svc.id.goog/namespace/tpu-vllm"),
        "names the stack's Kubernetes identity"),
    "gke: the whole pool as a principalSet:// reads another secret": (
        "gke", grant("gcp:secretmanager/secretIamMember:SecretIamMember", secretId="billing-db-password",
                     role="roles/secretmanager.secretAccessor",
                     member="principalSet://iam.googleapis.com/projects/123456789012/locations/global/"
                            "workloadIdentityPools/my-proj.svc.id.goog/*"),
        "names the stack's Kubernetes identity"),
    "gke: the workload's Kubernetes account may act as another account": (
        "gke", grant("gcp:serviceaccount/iAMMember:IAMMember", role="roles/iam.workloadIdentityUser",
                     serviceAccountId="projects/my-proj/serviceAccounts/deployer@my-proj.iam.gserviceaccount.com",
                     member="serviceAccount:my-proj.svc.id.goog[tpu-vllm/vllm]"),
        "names the stack's Kubernetes identity"),
    "gke: a google-native project IAM member for the workload": (
        "gke", grant("google-native:cloudresourcemanager/v3:ProjectIamMember", name="projects/my-proj",
                     role="roles/owner", member=f"serviceAccount:{WORKLOAD}"), "roles/owner"),
    "gke: a google-native project IAM policy with project-wide token creator": (
        "gke", grant("google-native:cloudresourcemanager/v1:ProjectIamPolicy", project="my-proj", bindings=[
            {"role": "roles/iam.serviceAccountTokenCreator", "members": ["user:mallory@example.com"]}]),
        "could act as every service account there"),
    # The grants that must keep passing.
    "token creator on another team's account, for a user": (
        "vm", grant("gcp:serviceaccount/iAMMember:IAMMember", role="roles/iam.serviceAccountTokenCreator",
                    serviceAccountId="projects/my-proj/serviceAccounts/deployer@my-proj.iam.gserviceaccount.com",
                    member="user:alice@example.com"), None),
    "a project role for another namespace's Kubernetes account": (
        "gke", grant("gcp:projects/iAMMember:IAMMember", project="my-proj", role="roles/storage.objectViewer",
                     member="principal://iam.googleapis.com/projects/123456789012/locations/global/"
                            "workloadIdentityPools/my-proj.svc.id.goog/subject/ns/batch/sa/loader"), None),
    "another namespace as a principalSet://": (
        "gke", grant("gcp:projects/iAMMember:IAMMember", project="my-proj", role="roles/viewer",
                     member="principalSet://iam.googleapis.com/projects/123456789012/locations/global/"
                            "workloadIdentityPools/my-proj.svc.id.goog/namespace/batch"), None),
    "another project's pool naming the same namespace": (
        "gke", grant("gcp:projects/iAMMember:IAMMember", project="other-proj", role="roles/viewer",
                     member="serviceAccount:other-proj.svc.id.goog[tpu-vllm/vllm]"), None),
    "a project-wide role that acts as no one": (
        "vm", grant("gcp:projects/iAMMember:IAMMember", project="my-proj", role="roles/logging.viewer",
                    member="user:alice@example.com"), None),
    "gke: the workload's own Workload Identity grant spelled as a principal://": (
        "gke", grant("gcp:serviceaccount/iAMMember:IAMMember", role="roles/iam.workloadIdentityUser",
                     serviceAccountId=f"projects/my-proj/serviceAccounts/{WORKLOAD}",
                     member="principal://iam.googleapis.com/projects/123456789012/locations/global/"
                            "workloadIdentityPools/my-proj.svc.id.goog/subject/ns/tpu-vllm/sa/vllm"), None),
}


RBAC = "kubernetes:rbac.authorization.k8s.io/v1:"
POOL = "projects/123456789012/locations/global/workloadIdentityPools/my-proj.svc.id.goog"


def k8s(kind: str, name: str = "extra", namespace: str | None = None, **props):
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    return grant(f"{RBAC}{kind}", f"extra-{kind.lower()}", metadata=metadata, apiVersion="rbac.authorization.k8s.io/v1",
                 kind=kind, **props)


def role_ref(kind: str, name: str) -> dict:
    return {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name}


TOKEN_RULES = [{"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]}]
VLLM_SA = {"kind": "ServiceAccount", "name": "vllm", "namespace": "tpu-vllm"}
MALLORY = {"kind": "User", "name": "mallory@example.com", "apiGroup": "rbac.authorization.k8s.io"}


def with_unique_id(number: str):
    """The stack as `up` sees it: the VM's Account with its uniqueId output known."""
    def change(resources):
        for type_, props, _ in resources:
            if type_ == identity_grants.SERVICE_ACCOUNT_TYPE:
                props["uniqueId"] = number
        return resources
    return change


def spc_naming(secret: str):
    return grant("kubernetes:secrets-store.csi.x-k8s.io/v1:SecretProviderClass", "extra-class",
                 metadata={"name": "extra", "namespace": "tpu-vllm"}, spec={"provider": "gke", "parameters": {
                     "secrets": f"- resourceName: projects/my-proj/secrets/{secret}/versions/latest\n  path: x\n"}})


# name -> (stack, what the variant adds: resources, or a change to the stack's own; text the violation must say)
MULTI_VARIANTS = {
    "gke: cluster-admin bound to the workload's Kubernetes account": (
        "gke", [k8s("ClusterRoleBinding", subjects=[VLLM_SA], roleRef=role_ref("ClusterRole", "cluster-admin"))],
        "binds ServiceAccount tpu-vllm/vllm"),
    "gke: the serving namespace's accounts as a Group, bound to view": (
        "gke", [k8s("ClusterRoleBinding", subjects=[{"kind": "Group", "name": "system:serviceaccounts:tpu-vllm"}],
                    roleRef=role_ref("ClusterRole", "view"))], "binds Group system:serviceaccounts:tpu-vllm"),
    "gke: the workload's account as a User subject": (
        "gke", [k8s("RoleBinding", namespace="default", subjects=[
            {"kind": "User", "name": "system:serviceaccount:tpu-vllm:vllm"}], roleRef=role_ref("ClusterRole", "view"))],
        "binds User system:serviceaccount:tpu-vllm:vllm"),
    "gke: a Role in the serving namespace lets another account mint its tokens": (
        "gke", [k8s("Role", "minter", "tpu-vllm", rules=TOKEN_RULES),
                k8s("RoleBinding", "minter", "tpu-vllm", subjects=[MALLORY], roleRef=role_ref("Role", "minter"))],
        "mints tokens for or runs as"),
    "gke: a ClusterRole with serviceaccounts/token create, bound cluster-wide": (
        "gke", [k8s("ClusterRole", "minter", rules=[{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]),
                k8s("ClusterRoleBinding", "minter", subjects=[MALLORY], roleRef=role_ref("ClusterRole", "minter"))],
        "mints tokens for or runs as"),
    "gke: edit in the serving namespace (runs pods as any of its accounts)": (
        "gke", [k8s("RoleBinding", "editors", "tpu-vllm", subjects=[MALLORY], roleRef=role_ref("ClusterRole", "edit"))],
        "mints tokens for or runs as"),
    "gke: impersonate serviceaccounts in the serving namespace": (
        "gke", [k8s("Role", "imp", "tpu-vllm", rules=[
            {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["impersonate"]}]),
                k8s("RoleBinding", "imp", "tpu-vllm", subjects=[MALLORY], roleRef=role_ref("Role", "imp"))],
        "mints tokens for or runs as"),
    "gke: a SecretProviderClass beside the stack's widens nothing": (
        "gke", [spc_naming("billing-db-password"),
                grant("gcp:secretmanager/secretIamMember:SecretIamMember", secretId="billing-db-password",
                      role="roles/secretmanager.secretAccessor", member=f"serviceAccount:{WORKLOAD}")],
        "a secret that is not the stack's own"),
    "a project custom role holding actAs, granted project-wide": (
        "vm", [grant("gcp:projects/iAMCustomRole:IAMCustomRole", "extra-role", roleId="actor", title="a",
                     permissions=["resourcemanager.projects.get", "iam.serviceAccounts.actAs"]),
               grant("gcp:projects/iAMMember:IAMMember", project="my-proj", role="projects/my-proj/roles/actor",
                     member="user:mallory@example.com")], "could act as every service account there"),
    "an organization custom role holding signJwt, granted on the organization": (
        "vm", [grant("gcp:organizations/iAMCustomRole:IAMCustomRole", "extra-role", roleId="signer", orgId="123",
                     title="s", permissions=["iam.serviceAccounts.signJwt"]),
               grant("gcp:organizations/iAMMember:IAMMember", orgId="123", role="organizations/123/roles/signer",
                     member="user:mallory@example.com")], "could act as every service account there"),
    "the VM's account by the unique id `up` knows": (
        "vm", [with_unique_id("104712345678901234567"),
               grant("gcp:serviceaccount/iAMBinding:IAMBinding", role="roles/iam.serviceAccountUser",
                     serviceAccountId="projects/-/serviceAccounts/104712345678901234567",
                     members=["user:mallory@example.com"])], "could act as the stack's identity"),
    # Must keep passing.
    "another account's unique id, once `up` knows the stack's": (
        "vm", [with_unique_id("104712345678901234567"),
               grant("gcp:serviceaccount/iAMMember:IAMMember", role="roles/iam.serviceAccountTokenCreator",
                     serviceAccountId="projects/my-proj/serviceAccounts/109999999999999999999",
                     member="user:alice@example.com")], None),
    "gke: a binding to another namespace's account, and a token role there": (
        "gke", [k8s("Role", "minter", "batch", rules=TOKEN_RULES),
                k8s("RoleBinding", "minter", "batch", roleRef=role_ref("Role", "minter"), subjects=[
                    {"kind": "ServiceAccount", "name": "loader", "namespace": "batch"}]),
                k8s("ClusterRoleBinding", "viewers", subjects=[
                    {"kind": "ServiceAccount", "name": "loader", "namespace": "batch"}],
                    roleRef=role_ref("ClusterRole", "view"))], None),
    "a project custom role that acts as no one": (
        "vm", [grant("gcp:projects/iAMCustomRole:IAMCustomRole", "extra-role", roleId="reader", title="r",
                     permissions=["storage.objects.get"]),
               grant("gcp:projects/iAMMember:IAMMember", project="my-proj", role="projects/my-proj/roles/reader",
                     member="user:alice@example.com")], None),
}
VARIANTS.update({name: (stack, added, says) for name, (stack, added, says) in MULTI_VARIANTS.items()})
# gke with vllm.weightsOnDisk: the pods write the checkpoint's prefix of their own bucket, nothing more.
CACHE_BUCKET = "tpu-vllm-gke-xla-my-proj"
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # a preview's unknown value (policy/resource_view.py)


def weights_grant(expression: str | None, bucket: str = CACHE_BUCKET, who: str = WORKLOAD):
    condition = {} if expression is None else {"condition": {"title": "t", "expression": expression}}
    return grant("gcp:storage/bucketIAMMember:BucketIAMMember", bucket=bucket, role="roles/storage.objectUser",
                 member=f"serviceAccount:{who}", **condition)


def on_prefix(prefix: str, bucket: str = CACHE_BUCKET) -> str:
    return f'resource.name.startsWith("projects/_/buckets/{bucket}/objects/{prefix}")'


VARIANTS.update({
    "gke weights: the checkpoint grant again": ("gke-weights", weights_grant(on_prefix("huggingface/")), None),
    "gke weights: its condition unknown at preview (judged at up)": ("gke-weights", weights_grant(UNKNOWN), None),
    "gke weights: object writes on the whole cache bucket": (
        "gke-weights", weights_grant(None), "roles/storage.objectUser on BucketIAMMember"),
    "gke weights: object writes on the compile cache's entries": (
        "gke-weights", weights_grant(on_prefix("xla/")), "roles/storage.objectUser on BucketIAMMember"),
    "gke weights: the checkpoint prefix or anything": (
        "gke-weights", weights_grant(f'{on_prefix("huggingface/")} || true'), "roles/storage.objectUser"),
    "gke weights: the metrics adapter writes the checkpoint": (
        "gke-weights", weights_grant(on_prefix("huggingface/"), who=ADAPTER), "roles/storage.objectUser"),
})
# gke with gke.dockerHubMirror: the nodes read the stack's own mirror, nothing more.
MIRROR_ID = "tpu-vllm-gke-dockerhub"


def mirror_grant(repository: str = MIRROR_ID, role: str = "roles/artifactregistry.reader", who: str = NODES,
                 **where):
    return grant("gcp:artifactregistry/repositoryIamMember:RepositoryIamMember", repository=repository, role=role,
                 member=f"serviceAccount:{who}", **where)


VARIANTS.update({
    "gke mirror: the nodes read the stack's own mirror again (a second grant of the same)": (
        "gke-mirror", mirror_grant(location="us-west4"), None),
    "gke mirror: the nodes read another repository": (
        "gke-mirror", mirror_grant("projects/my-proj/locations/us-west4/repositories/team-images"),
        "roles/artifactregistry.reader"),
    "gke mirror: the nodes read another project's repository of the same name": (
        "gke-mirror", mirror_grant(f"projects/other-proj/locations/us-west4/repositories/{MIRROR_ID}"),
        "roles/artifactregistry.reader"),
    "gke mirror: the nodes read a repository of the same name in another region": (
        "gke-mirror", mirror_grant(location="europe-west4", project="my-proj"), "roles/artifactregistry.reader"),
    "gke mirror: the nodes may write the mirror": (
        "gke-mirror", mirror_grant(role="roles/artifactregistry.writer", location="us-west4"),
        "roles/artifactregistry.writer"),
    "gke mirror: the workload reads the mirror": (
        "gke-mirror", mirror_grant(who=WORKLOAD, location="us-west4"), "roles/artifactregistry.reader"),
    "gke: the nodes read a repository of the same name the stack does not declare": (
        "gke", mirror_grant(location="us-west4"), "roles/artifactregistry.reader"),
})


# issue 29: the Ops Agent's two project roles, for the TPU VM's own account and no other, and nothing more.
VARIANTS.update({
    "vm: the VM's account administers Cloud Monitoring": (
        "vm", grant("gcp:projects/iAMMember:IAMMember", project="my-proj", role="roles/monitoring.admin",
                    member=SA), "roles/monitoring.admin on project"),
    "vm: the agent's metric writes on a folder instead": (
        "vm", grant("gcp:folder/iAMMember:IAMMember", folder="folders/1", role="roles/monitoring.metricWriter",
                    member=SA), "roles/monitoring.metricWriter"),
    "vm: the agent's role through a whole project policy": (
        "vm", grant("gcp:projects/iAMBinding:IAMBinding", project="my-proj", role="roles/logging.logWriter",
                    members=[SA]), "roles/logging.logWriter"),
    "gke: the workload gets the VM agent's metric writes": (
        "gke", grant("gcp:projects/iAMMember:IAMMember", project="my-proj", role="roles/monitoring.metricWriter",
                     member=f"serviceAccount:{WORKLOAD}"), "roles/monitoring.metricWriter on project"),
})


@pytest.fixture(scope="module")
def stacks(gke_program):
    mirror = harness.run(harness.with_section(harness.gke_config(), "gke", dockerHubMirror=True), stack="gke")
    weights = harness.run(WEIGHTS_CONFIG, stack="gke")  # the run tests/test_gke_weights_on_bucket.py makes
    return {"vm": program_resources(harness.dev_config()), "gke": gke_urns(gke_program.registrations),
            "gke-mirror": gke_urns(mirror.registrations), "gke-weights": gke_urns(weights.registrations)}


@pytest.fixture(scope="module")
def cases(stacks):
    built = {"vm stack": (stacks["vm"], {}), "gke stack": (stacks["gke"], {}),
             "gke mirror stack": (stacks["gke-mirror"], {}), "gke weights stack": (stacks["gke-weights"], {})}
    for name, (stack, added, _) in VARIANTS.items():
        resources = copy.deepcopy(stacks[stack])
        for item in added if isinstance(added, list) else [added]:
            resources = item(resources) if callable(item) else [*resources, item]
        built[name] = (resources, {})
    return built


def check(found: list[str], name: str) -> None:
    says = VARIANTS[name][2]
    if says is None:
        assert found == [], found
    else:
        assert found, f"{name}: nothing reported"
        assert any(says in message for message in found), found
        assert all("hold only the grants the stack makes" in message or "could act as" in message
                   for message in found)


def test_both_stacks_as_the_program_makes_them_pass(cases):
    for name in ("vm stack", "gke stack", "gke mirror stack", "gke weights stack"):
        resources, _ = cases[name]
        assert identity_grants.stack_identities_hold_only_their_grants(resources) == [], name


@pytest.mark.parametrize("name", list(VARIANTS))
def test_each_grant_directly(cases, name):
    resources, _ = cases[name]
    check(identity_grants.stack_identities_hold_only_their_grants(resources), name)


@pytest.fixture(scope="module")
def preview():
    """The dev stack's preview: a new account's email, and so the members of its grants, are unknown."""
    from tests.test_policy import with_urns

    return with_urns(harness.run(harness.dev_config(), preview=True).registrations)


PREVIEW_FOREIGN = grant("gcp:storage/bucketIAMMember:BucketIAMMember", bucket="b", role="roles/storage.admin",
                        member=SA)


@pytest.fixture(scope="module")
def pack_reports(cases, stacks, preview):
    """Every case of this module through the pack's real entry in one process (it loads the pack once for all):
    the variants, the preview's and the other providers' IAM."""
    judged = {**cases, "preview": (preview, {}),
              "preview with a known foreign grant": ([*preview, PREVIEW_FOREIGN], {})}
    advisory = {name: ([*copy.deepcopy(stacks["vm"]), added], {}) for name, added in ADVISORY_CASES.items()}
    assert not judged.keys() & advisory.keys()
    return entry_reports({**judged, **advisory})


@pytest.fixture(scope="module")
def through_the_entry(pack_reports):
    return pack_reports["cases"]


@pytest.mark.parametrize("name", list(VARIANTS))
def test_each_grant_through_the_pack_entry(through_the_entry, name):
    check(through_the_entry[name][RULE], name)


def test_the_stacks_pass_through_the_pack_entry(through_the_entry):
    assert through_the_entry["vm stack"][RULE] == [] and through_the_entry["gke stack"][RULE] == []
    assert through_the_entry["gke mirror stack"][RULE] == [] and through_the_entry["gke weights stack"][RULE] == []


def test_the_allow_list_is_what_the_stacks_grant(stacks):
    """Every grant each stack makes to its own identities is one the allow-list names (and nothing more)."""
    granted = set()
    for resources in stacks.values():
        for type_, props, _ in resources:
            for role, member in identity_grants._grants(type_, props) if identity_grants._is_grant(type_) else []:
                if member.startswith("serviceAccount:tpu-vllm-"):
                    granted.add(role)
    assert granted == {identity_grants.ACCESSOR_ROLE, identity_grants.GKE_NODE_ROLE, identity_grants.ADAPTER_ROLE,
                       *identity_grants.CACHE_BUCKET_ROLES, *identity_grants.OPS_AGENT_ROLES,
                       identity_grants.MIRROR_READER_ROLE, identity_grants.WEIGHTS_ROLE}


def test_a_preview_with_unknown_members_is_judged_without_an_advisory_note(preview, pack_reports):
    # In a preview a new account's email, and so the members of its grants, are unknown.
    unknown = [props["member"] for type_, props, _ in preview
               if type_ == "gcp:secretmanager/secretIamMember:SecretIamMember"]
    assert pack_reports["cases"]["preview"][RULE] == []
    [message] = pack_reports["cases"]["preview with a known foreign grant"][RULE]
    assert "roles/storage.admin" in message and "advisory" not in message
    assert unknown  # the stack's own grants are there, whatever their members look like at preview


ADVISORY = "other-providers-iam-is-reviewed"
ADVISORY_CASES = {
    "a google-native project IAM policy": grant(
        "google-native:cloudresourcemanager/v1:ProjectIamPolicy", project="my-proj",
        bindings=[{"role": "roles/viewer", "members": ["user:alice@example.com"]}]),
    "a local command that runs gcloud add-iam-policy-binding": grant(
        "command:local:Command", create="gcloud iam service-accounts add-iam-policy-binding "
        f"{VM_ACCOUNT} --member=user:mallory@example.com --role=roles/iam.serviceAccountTokenCreator"),
    "a remote command that runs gcloud set-iam-policy": grant(
        "command:remote:Command", create="/usr/bin/gcloud projects set-iam-policy my-proj policy.json",
        connection={"host": "203.0.113.9"}),
}


def test_iam_of_other_providers_is_reported_as_advisory(pack_reports):
    assert pack_reports["levels"][ADVISORY] == "advisory"
    assert pack_reports["cases"]["vm stack"][ADVISORY] == []
    for name in ADVISORY_CASES:
        [note] = pack_reports["cases"][name][ADVISORY]
        assert "extra-grant" in note and ("google-native" in note or "gcloud" in note), (name, note)
