"""The stack's identities hold exactly the grants the stack makes (an allow-list), on any resource, and no one
else may act as them; what the pack cannot read as a grant is named for a reviewer."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

try:
    from . import acting_as
    from .resource_view import (
        COMMAND_TYPES,
        QUEUED_RESOURCE_TYPES,
        SECRET_TYPE,
        UNKNOWN_SENTINELS,
        Seen,
        UnknownValueError,
        as_seen,
        known_items,
    )
    from .shell_commands import command_texts, shell_words
except ImportError:  # run by the pack's __main__, which puts this directory on sys.path
    import acting_as
    from resource_view import (
        COMMAND_TYPES,
        QUEUED_RESOURCE_TYPES,
        SECRET_TYPE,
        UNKNOWN_SENTINELS,
        Seen,
        UnknownValueError,
        as_seen,
        known_items,
    )
    from shell_commands import command_texts, shell_words

# Grants above a single resource, by scope, as pulumi-gcp spells their type tokens.
IAM_SCOPES = {"projects": "project", "organizations": "organization", "folder": "folder"}
IAM_GRANT_TYPES = {f"gcp:{module}/iAM{kind}:IAM{kind}": scope
                   for module, scope in IAM_SCOPES.items() for kind in ("Member", "Binding", "Policy")}

# The stack's identities: the TPU VM's service account (its queued resource's node spec) and every service
# account the program declares. Each may hold only these grants, and any other IAM member, binding, policy
# or access-control entry naming one of them, on any resource type and at any level, is a violation:
ACCESSOR_ROLE = "roles/secretmanager.secretAccessor"
# - secretAccessor on the stack's own secrets (the ones it creates or tells its node or pods to read);
SECRET_GRANT_TYPES = {f"gcp:secretmanager/secretIam{kind}:SecretIam{kind}" for kind in ("Member", "Binding", "Policy")}
# - on the whole project, the role GKE's nodes need, for the identity a stack cluster or node pool runs as;
GKE_NODE_ROLE = "roles/container.defaultNodeServiceAccount"
GKE_NODE_TYPES = {"gcp:container/cluster:Cluster", "gcp:container/nodePool:NodePool"}
# - on the whole project, metric reads for the identity the GKE metrics adapter's Kubernetes account uses
#   (docs/gke.md: the HPA's adapter, custom-metrics/custom-metrics-stackdriver-adapter);
ADAPTER_ROLE = "roles/monitoring.viewer"
ADAPTER_KSA = ("custom-metrics", "custom-metrics-stackdriver-adapter")
# - on gke, object reads and (prefix-conditioned) creation on the stack's own compile-cache bucket for the serving
#   pods' identity (docs/gke.md: the XLA cache every replica shares; components/gke/compile_cache.py);
CACHE_BUCKET_ROLES = ("roles/storage.objectViewer", "roles/storage.objectCreator")
#   with vllm.weightsOnDisk also object writes and deletes (huggingface_hub renames each downloaded file, and gcsfuse
#   renames by copy and delete) on the bucket's checkpoint prefix, and only there: the grant's IAM condition must be
#   exactly that prefix's, or unknown at preview (judged at `up`);
WEIGHTS_ROLE = "roles/storage.objectUser"
WEIGHTS_PREFIX = "huggingface/"
CACHE_BUCKET_ROLE = " / ".join(CACHE_BUCKET_ROLES) + f" ({WEIGHTS_ROLE} on {WEIGHTS_PREFIX} alone)"
BUCKET_TYPE = "gcp:storage/bucket:Bucket"
BUCKET_GRANT_TYPES = {f"gcp:storage/bucketIAM{kind}:BucketIAM{kind}" for kind in ("Member", "Binding")}
# - on vm, the Ops Agent's two roles on the whole project for the TPU VM's own account, and no other account
#   (issue 29: components/vm/ops_agent.py, the dashboard's metrics; Google's Ops Agent authorization page);
OPS_AGENT_ROLES = frozenset({"roles/monitoring.metricWriter", "roles/logging.logWriter"})
# - on gke with gke.dockerHubMirror, image reads on the stack's own Docker Hub mirror (an Artifact Registry
#   repository the program declares) for the identity its cluster's nodes run as (components/gke/registry_mirror.py);
MIRROR_READER_ROLE = "roles/artifactregistry.reader"
REPOSITORY_TYPE = "gcp:artifactregistry/repository:Repository"
REPOSITORY_GRANT_TYPES = {"gcp:artifactregistry/repositoryIamMember:RepositoryIamMember"}
# - and, on the identity itself, Workload Identity user for one Kubernetes service account (gke).
WORKLOAD_IDENTITY_ROLE = "roles/iam.workloadIdentityUser"
SERVICE_ACCOUNT_TYPE = "gcp:serviceaccount/account:Account"
SERVICE_ACCOUNT_GRANT_TYPES = {f"gcp:serviceaccount/iAM{kind}:IAM{kind}" for kind in ("Member", "Binding", "Policy")}
_WORKLOAD_IDENTITY_MEMBER = re.compile(r"serviceaccount:[a-z0-9.-]+\.svc\.id\.goog\[([^/\]]+)/([^\]]+)\]")
_EMAIL = re.compile(r"[a-z0-9][a-z0-9._-]*@[a-z0-9.-]+\.iam\.gserviceaccount\.com")
# The metadata attributes that name the secrets the TPU VM reads at boot (components/vm/boot_contract.py).
SECRET_METADATA_KEYS = ("tpu-vllm-hf-token-secret", "tpu-vllm-api-key-secret")
_SECRET_NAME = re.compile(r"projects/([^/\s\"']+)/secrets/([A-Za-z0-9_-]+)")


@dataclass(frozen=True)
class _Identity:
    local: str
    """The part before @ (an Account's accountId)."""
    project: str | None
    """None when the program leaves the project to the provider: any project matches."""

    def matches(self, email: str) -> bool:
        local, _, domain = email.partition("@")
        if local != self.local or not domain.endswith(".iam.gserviceaccount.com"):
            return False
        return self.project is None or domain == f"{self.project}.iam.gserviceaccount.com"


def _grants(type_: str, props: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(role, member) pairs an IAM member, binding or whole policy grants."""
    if isinstance(props.get("bindings"), Sequence) and not isinstance(props.get("bindings"), str):
        # google-native's ProjectIamPolicy and kin carry the policy's bindings as a property.
        return [(str(binding.get("role")), str(member)) for binding in props["bindings"]
                if isinstance(binding, Mapping) for member in binding.get("members") or []]
    if type_.lower().endswith("iampolicy"):
        data = props.get("policyData") or "{}"
        try:
            policy = json.loads(data) if isinstance(data, str) else data
        except json.JSONDecodeError:
            return [("(an unreadable policy)", str(data))]
        return [(str(binding.get("role")), str(member)) for binding in (policy or {}).get("bindings") or []
                for member in binding.get("members") or []]
    members = list(props.get("members") or []) + ([props["member"]] if props.get("member") else [])
    return [(str(props.get("role")), str(member)) for member in members]


def _known_copy(value: Any) -> Any:
    """A plain copy without the values a preview leaves unknown (a new account's email, a new stack's SSH key):
    the grants whose members are known are judged at preview, the rest at `up`, never an advisory note."""
    if isinstance(value, Mapping):
        return {key: _known_copy(item) for key, item in known_items(value)}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        items = []
        for index in range(len(value)):
            try:
                item = value[index]
            except UnknownValueError:
                continue
            if not (isinstance(item, str) and item in UNKNOWN_SENTINELS):
                items.append(_known_copy(item))
        return items
    return value


def _stack_identities(resources: list[Seen]) -> list[_Identity]:
    identities = []
    for resource in resources:
        if resource.type in QUEUED_RESOURCE_TYPES:
            for spec in ((resource.props.get("body") or {}).get("tpu") or {}).get("nodeSpec") or []:
                email = str(((spec.get("node") or {}).get("serviceAccount") or {}).get("email") or "").lower()
                if "@" in email:
                    local, _, domain = email.partition("@")
                    identities.append(_Identity(local, domain.removesuffix(".iam.gserviceaccount.com") or None))
        elif resource.type == SERVICE_ACCOUNT_TYPE and resource.props.get("accountId"):
            project = resource.props.get("project")
            identities.append(_Identity(str(resource.props["accountId"]).lower(),
                                        str(project).lower() if project else None))
    return identities


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, Sequence) and not isinstance(value, bytes):  # pulumi-policy's list proxy too
        for item in value:
            yield from _strings(item)


def _emails_in(value: Any) -> set[str]:
    """Every service-account email a value names, however it is spelled (member, principal://, ACL entity)."""
    found = {match.group(0) for text in _strings(value) for match in _EMAIL.finditer(text.lower())}
    # Access-control entities spell a member as user-EMAIL or group-EMAIL.
    return found | {email.split("-", 1)[1] for email in found if email.startswith(("user-", "group-"))}


def _is_grant(type_: str) -> bool:
    """An IAM member, binding or policy, an access-control entry or list, or an access grant (BigQuery's
    DatasetAccess, Access Context Manager's levels), of any GCP resource type."""
    token = type_.rsplit(":", 1)[-1].lower()
    if type_.startswith("google-native:"):  # read like pulumi-gcp's where its members are spelled the same way
        return "iam" in token
    return type_.startswith("gcp:") and ("iam" in token or "access" in token or token.endswith("acl"))


def _secret_key(name: Any, project: Any = None) -> tuple[str | None, str]:
    text = str(name or "")
    found = _SECRET_NAME.search(text)
    if found:
        return found.group(1).lower(), found.group(2)
    return (str(project).lower() if project else None), text.rsplit("/", 1)[-1]


def _own_secrets(resources: list[Seen]) -> set[tuple[str | None, str]]:
    """The secrets the stack creates, and those it tells its node (metadata) or pods (SecretProviderClass) to read."""
    own = set()
    for resource in resources:
        if resource.type == SECRET_TYPE and resource.props.get("secretId"):
            own.add(_secret_key(resource.props["secretId"], resource.props.get("project")))
        elif resource.type in QUEUED_RESOURCE_TYPES:
            for spec in ((resource.props.get("body") or {}).get("tpu") or {}).get("nodeSpec") or []:
                metadata = (spec.get("node") or {}).get("metadata") or {}
                own.update(_secret_key(value) for key, value in metadata.items()
                           if key in SECRET_METADATA_KEYS and value)
        elif resource.type.endswith(":SecretProviderClass") and _made_by_a_stack_component(resource.urn):
            # Only the stack's own class (written from its settings); one added beside it widens nothing.
            for text in _strings(resource.props.get("spec")):
                own.update((match.group(1).lower(), match.group(2)) for match in _SECRET_NAME.finditer(text))
    return own


def _is_own_secret(props: Mapping[str, Any], own: set[tuple[str | None, str]]) -> bool:
    project, secret = _secret_key(props.get("secretId"), props.get("project"))
    return any(secret == own_secret and (project is None or own_project is None or project == own_project)
               for own_project, own_secret in own)


def _node_accounts(resources: list[Seen]) -> set[str]:
    return {email for resource in resources if resource.type in GKE_NODE_TYPES
            for email in _emails_in([resource.props.get("nodeConfig"),
                                     [pool.get("nodeConfig") for pool in resource.props.get("nodePools") or []
                                      if isinstance(pool, Mapping)]])}


def _kubernetes_accounts(resources: list[Seen]) -> dict[str, set[tuple[str, str]]]:
    """email -> the stack's Kubernetes service accounts (namespace, name) annotated to act as it (gke)."""
    accounts: dict[str, set[tuple[str, str]]] = {}
    for resource in resources:
        if not (resource.type.startswith("kubernetes:") and resource.type.endswith("/v1:ServiceAccount")):
            continue
        metadata = resource.props.get("metadata") or {}
        email = str((metadata.get("annotations") or {}).get("iam.gke.io/gcp-service-account") or "").lower()
        if email:
            accounts.setdefault(email, set()).add((str(metadata.get("namespace") or "default"),
                                                   str(metadata.get("name") or "")))
    return accounts


_REPOSITORY_NAME = re.compile(r"projects/([^/]+)/locations/([^/]+)/repositories/([^/]+)")


def _repository_key(name: Any, project: Any, location: Any) -> tuple[str | None, str | None, str]:
    """(project, location, id) of an Artifact Registry repository, from its full name or its parts; None where
    the program leaves a part to the provider."""
    text = str(name or "")
    found = _REPOSITORY_NAME.fullmatch(text)
    if found:
        return found.group(1).lower(), found.group(2).lower(), found.group(3)
    return (str(project).lower() if project else None), (str(location).lower() if location else None), text


def _same_repository(one: tuple[str | None, str | None, str], other: tuple[str | None, str | None, str]) -> bool:
    return one[2] == other[2] and all(a is None or b is None or a == b for a, b in zip(one[:2], other[:2], strict=True))


def _condition_unknown(props: Mapping[str, Any]) -> bool:
    """The grant has a condition whose expression a preview left unknown."""
    if "condition" not in props:
        return False
    condition = dict(known_items(props)).get("condition")
    return not isinstance(condition, Mapping) or "expression" not in dict(known_items(condition))


def _scope_of(type_: str) -> str:
    return IAM_GRANT_TYPES.get(type_) or type_.rsplit(":", 1)[-1]


def _made_by_a_stack_component(urn: str) -> bool:
    """A resource whose parent is one of the stack's own components (urn:...::tpu-vllm:gke:X$type::name): it is
    written from the stack's settings, not added beside them."""
    parts = urn.split("::")
    types = parts[2].split("$") if len(parts) >= 4 else []
    return len(types) >= 2 and types[-2].startswith("tpu-vllm:")


def _above_one_resource(type_: str) -> bool:
    """A grant on a project, folder or organization (pulumi-gcp's, or google-native's ProjectIamMember and kin)."""
    token = type_.rsplit(":", 1)[-1].lower()
    return type_ in IAM_GRANT_TYPES or (type_.startswith("google-native:")
                                        and token.startswith(("project", "folder", "organization")))


def _service_account_target(props: Mapping[str, Any]) -> tuple[set[str], str | None]:
    """The emails and the numeric unique id a serviceAccountId names (projects/P/serviceAccounts/EMAIL_OR_ID,
    projects/-/serviceAccounts/..., or the bare email or id)."""
    target = props.get("serviceAccountId")
    return _emails_in(target), acting_as.unique_id(str(target or ""))


def stack_identities_hold_only_their_grants(resources: Iterable[Seen | tuple],
                                            config: Mapping[str, Any] | None = None) -> list[str]:
    """Stack-wide: every grant naming one of the stack's identities, by any of their names, is on the allow-list
    above, and no grant lets anyone but the stack act as them."""
    seen = as_seen(resources)
    # A preview may leave a grant's condition unknown (it is written from the bucket's name): judged at `up`.
    unknown_conditions = {resource.urn for resource in seen if resource.type in BUCKET_GRANT_TYPES
                          and _condition_unknown(resource.props)}
    resources = [Seen(resource.type, _known_copy(resource.props), resource.urn) for resource in seen]
    identities = _stack_identities(resources)
    if not identities:
        return []
    own_secrets = _own_secrets(resources)
    node_accounts = _node_accounts(resources)
    kubernetes_accounts = _kubernetes_accounts(resources)
    accounts = acting_as.stack_accounts(resources, SERVICE_ACCOUNT_TYPE, kubernetes_accounts)
    custom_roles = acting_as.custom_impersonation_roles(resources)
    tpu_vm_accounts = {f"{identity.local}@{identity.project}.iam.gserviceaccount.com"
                       for resource in resources if resource.type in QUEUED_RESOURCE_TYPES
                       for identity in _stack_identities([resource])}

    def ours(email: str) -> bool:
        return any(identity.matches(email) for identity in identities)

    def reads_the_secrets(email: str) -> bool:
        """The VM's account, or the serving pods' (a stack Kubernetes account that is not the adapter's)."""
        return email in tpu_vm_accounts or bool(kubernetes_accounts.get(email, set()) - {ADAPTER_KSA})

    own_buckets = {str(r.props.get("name")) for r in resources if r.type == BUCKET_TYPE and r.props.get("name")}

    own_repositories = [_repository_key(r.props.get("repositoryId"), r.props.get("project"), r.props.get("location"))
                        for r in resources if r.type == REPOSITORY_TYPE and r.props.get("repositoryId")]

    def allowed(type_: str, props: Mapping[str, Any], role: str, email: str, urn: str = "") -> bool:
        if type_ in REPOSITORY_GRANT_TYPES:
            granted = _repository_key(props.get("repository"), props.get("project"), props.get("location"))
            return (role == MIRROR_READER_ROLE and email in node_accounts
                    and any(_same_repository(granted, own) for own in own_repositories))
        if type_ in BUCKET_GRANT_TYPES:
            bucket = str(props.get("bucket") or "").removeprefix("b/")
            if role == WEIGHTS_ROLE:
                expression = (props.get("condition") or {}).get("expression")
                limited = urn in unknown_conditions or expression == (
                    f'resource.name.startsWith("projects/_/buckets/{bucket}/objects/{WEIGHTS_PREFIX}")')
                return limited and bucket in own_buckets and reads_the_secrets(email)
            return role in CACHE_BUCKET_ROLES and bucket in own_buckets and reads_the_secrets(email)
        if type_ in SECRET_GRANT_TYPES:
            return role == ACCESSOR_ROLE and _is_own_secret(props, own_secrets) and reads_the_secrets(email)
        if IAM_GRANT_TYPES.get(type_) == "project" and type_.endswith(":IAMMember"):
            return ((role == GKE_NODE_ROLE and email in node_accounts)
                    or (role == ADAPTER_ROLE and ADAPTER_KSA in kubernetes_accounts.get(email, set()))
                    or (role in OPS_AGENT_ROLES and email in tpu_vm_accounts))
        return False

    def own_workload_identity(emails: set[str], role: str, member: str) -> bool:
        """The one grant on a stack account the stack makes: Workload Identity user for its own Kubernetes
        account, in any spelling (legacy svc.id.goog[ns/ksa] or principal://.../subject/ns/NS/sa/KSA)."""
        name = acting_as.kubernetes_name(member)
        return (role == WORKLOAD_IDENTITY_ROLE and name is not None and name.name is not None
                and accounts.names_ours(name)
                and any((name.namespace, name.name) in kubernetes_accounts.get(email, set()) for email in emails))

    violations = acting_as.rbac_violations(resources, accounts)
    for resource in resources:
        if not _is_grant(resource.type):
            continue
        where = f"{_scope_of(resource.type)} {resource.urn.rsplit('::', 1)[-1] or resource.type}".strip()
        grants = _grants(resource.type, resource.props)
        judged: set[str] = set()  # members already reported for this resource
        # Grants on one of the stack's identities, named by email or numeric unique id: who may act as it.
        if resource.type in SERVICE_ACCOUNT_GRANT_TYPES:
            emails, number = _service_account_target(resource.props)
            targets = set(filter(ours, emails))
            by_number = number is not None and not emails and accounts.may_be_ours(number)
            for role, member in grants if targets or by_number else []:
                judged.add(member)
                if targets and own_workload_identity(targets, role, member):
                    continue
                unsure = "" if number in accounts.unique_ids else ", which a preview cannot tell from the stack's"
                account = ", ".join(sorted(targets)) or f"{number} (a numeric unique id{unsure})"
                violations.append(f"{member} gets {role} on the stack's service account {account} ({where}): "
                                  "it could act as the stack's identity and read its secrets; the stack lets only "
                                  "its own Kubernetes service accounts use it (roles/iam.workloadIdentityUser)")
        # Project-, folder- or organization-wide impersonation acts as every account there, the stack's too.
        if _above_one_resource(resource.type):
            for role, member in grants:
                if acting_as.acts_as_every_account(role, custom_roles):
                    judged.add(member)
                    violations.append(
                        f"{member} gets {role} on the whole {_scope_of(resource.type)} ({where}): it could act as "
                        "every service account there, the stack's included, and read the stack's secrets; grant it "
                        "on the one service account that needs it instead (never on the stack's)")
        # The stack's Kubernetes accounts named directly (principal://, principalSet://, svc.id.goog[ns/ksa]).
        for role, member in grants:
            if member in judged or not accounts.names_ours(acting_as.kubernetes_name(member)):
                continue
            judged.add(member)
            violations.append(
                f"{member} names the stack's Kubernetes identity (the serving or metrics adapter pods) and gets "
                f"{role} ({where}): the stack's identities hold only the grants the stack makes (Workload Identity "
                "user on their own Google account); remove it, or give what needs it an identity of its own")
        named = [(role, member) for role, member in grants
                 if member not in judged and any(ours(e) for e in _emails_in(member))]
        if not grants:  # an access-control list, or a grant spelled in a way _grants does not read
            named = [("access", email) for email in _emails_in(resource.props) if ours(email)
                     and resource.type not in SERVICE_ACCOUNT_GRANT_TYPES]
        for role, member in named:
            email = next(e for e in _emails_in(member) if ours(e))
            if allowed(resource.type, resource.props, role, email, resource.urn):
                continue
            what = where
            if resource.type in SECRET_GRANT_TYPES and role == ACCESSOR_ROLE:
                what = ("a secret that is not the stack's own" if not _is_own_secret(resource.props, own_secrets)
                        else "the stack's secret, for an identity that does not read it")
            violations.append(
                f"{member} gets {role} on {what}: the stack's identities hold only the grants the stack makes "
                f"({ACCESSOR_ROLE} on its own two secrets for the VM or the serving pods; on gke {GKE_NODE_ROLE} "
                f"for the nodes, {ADAPTER_ROLE} for the metrics adapter, {CACHE_BUCKET_ROLE} on its own cache "
                f"bucket for the pods, {WORKLOAD_IDENTITY_ROLE} for their own Kubernetes accounts; on vm "
                f"{' and '.join(sorted(OPS_AGENT_ROLES))} for the VM's Ops Agent); remove this "
                "grant, or give what needs it an identity of its own")
    return violations


def other_providers_iam_is_reviewed(resources: Iterable[Seen | tuple],
                                    config: Mapping[str, Any] | None = None) -> list[str]:
    """Advisory: IAM changes this pack cannot judge as grants (google-native's IAM resources, commands that run
    gcloud's IAM verbs) are named, so a reviewer sees them."""
    notes = []
    for resource in as_seen(resources):
        props = _known_copy(resource.props)
        words = [shell_words(text) for text in command_texts(props)] if resource.type in COMMAND_TYPES else []
        note = acting_as.other_provider_iam(resource.type, props, words)
        if note:
            notes.append(f"{resource.urn.rsplit('::', 1)[-1] or resource.type}: {note}")
    return notes
