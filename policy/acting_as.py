"""Who can act as the stack's identities: every way to name them, and every grant that lets someone use them.

Used by identity_grants.stack_identities_hold_only_their_grants. Plain functions over resource properties, like
the rules.

Sources (read through the search tool; cited in docs/development.md's outside-contracts table):
- cloud.google.com/iam/docs/service-account-permissions: roles/iam.serviceAccountUser holds
  iam.serviceAccounts.actAs; roles/iam.serviceAccountTokenCreator mints access and ID tokens, signs blobs and JWTs;
  granted on a project (folder, organization) they apply to every service account in it.
- cloud.google.com/kubernetes-engine/docs/concepts/workload-identity (principal identifiers): a Kubernetes
  ServiceAccount is `principal://iam.googleapis.com/projects/NUMBER/locations/global/workloadIdentityPools/
  PROJECT.svc.id.goog/subject/ns/NS/sa/KSA`; all of a namespace `principalSet://.../PROJECT.svc.id.goog/namespace/NS`;
  a cluster `principalSet://.../kubernetes.cluster/https://container.googleapis.com/v1/projects/P/locations/L/clusters/C`;
  the older form `serviceAccount:PROJECT.svc.id.goog[NS/KSA]`.
- kubernetes.io/docs/reference/access-authn-authz/rbac (v1.33): ServiceAccount subjects, the
  system:serviceaccount:NS:NAME user and system:serviceaccounts[:NS] groups; `edit` and `admin` let their holder
  run pods as any ServiceAccount of the namespace; serviceaccounts/token `create` mints a token for one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

# Roles that let their holder act as a service account. On a project, folder or organization they act as every
# account under it, the stack's included; the stack grants none of them there.
IMPERSONATION_ROLES = frozenset({
    "roles/iam.serviceAccountTokenCreator", "roles/iam.serviceAccountUser", "roles/iam.workloadIdentityUser",
    "roles/iam.serviceAccountKeyAdmin", "roles/iam.serviceAccountOpenIdTokenCreator",
    # Sets the accounts' own IAM policies, so grants itself any of the above.
    "roles/iam.serviceAccountAdmin",
})
# A custom role holding any of these acts as the accounts it reaches.
IMPERSONATION_PERMISSIONS = frozenset({
    "iam.serviceaccounts.actas", "iam.serviceaccounts.getaccesstoken", "iam.serviceaccounts.getopenidtoken",
    "iam.serviceaccounts.signblob", "iam.serviceaccounts.signjwt", "iam.serviceaccounts.implicitdelegation",
    "iam.serviceaccountkeys.create", "iam.serviceaccounts.setiampolicy",
})
CUSTOM_ROLE_TYPES = {"gcp:projects/iAMCustomRole:IAMCustomRole", "gcp:organizations/iAMCustomRole:IAMCustomRole"}

_POOL = r"projects/[^/]+/locations/global/workloadIdentityPools/(?P<pool>[a-z0-9-]+)\.svc\.id\.goog"
# Matched against the member lowercased (IAM takes the prefixes in any case).
_KSA_PRINCIPAL = re.compile(rf"principal://iam\.googleapis\.com/{_POOL}/subject/ns/(?P<ns>[^/]+)/sa/(?P<ksa>[^/]+)",
                            re.IGNORECASE)
_KSA_SET = re.compile(rf"principalset://iam\.googleapis\.com/{_POOL}/(?P<rest>.+)", re.IGNORECASE)
_KSA_LEGACY = re.compile(r"serviceaccount:(?P<pool>[a-z0-9.:-]+?)\.svc\.id\.goog\[(?P<ns>[^/\]]+)/(?P<ksa>[^\]]+)\]")
# A service account named by its numeric unique id (21 digits today), in a serviceAccountId or a resource name.
_UNIQUE_ID = re.compile(r"(?:^|/)(\d{6,})$")


@dataclass(frozen=True)
class KubernetesName:
    """How a member names Kubernetes identities of a Workload Identity pool: one ServiceAccount (ns, ksa), all
    of a namespace (ns only), or a wider set (ns None: a cluster, the whole pool, an attribute)."""

    pool: str
    namespace: str | None = None
    name: str | None = None
    wider: str = ""

    def covers(self, namespace: str, name: str) -> bool:
        if self.namespace is None:
            return True  # a cluster, the pool or an attribute: it may hold the stack's accounts
        return self.namespace == namespace and self.name in (None, name)


def kubernetes_name(member: str) -> KubernetesName | None:
    text = member.strip().lower()
    for pattern in (_KSA_PRINCIPAL, _KSA_LEGACY):
        found = pattern.fullmatch(text)
        if found:
            return KubernetesName(found.group("pool"), found.group("ns"), found.group("ksa"))
    found = _KSA_SET.fullmatch(text)
    if not found:
        return None
    rest = found.group("rest")
    if rest.startswith("namespace/") and "/" not in rest.removeprefix("namespace/"):
        return KubernetesName(found.group("pool"), rest.removeprefix("namespace/"))
    return KubernetesName(found.group("pool"), wider=rest)


def unique_id(text: str) -> str | None:
    found = _UNIQUE_ID.search(str(text or "").strip())
    return found.group(1) if found else None


@dataclass
class StackAccounts:
    """What the stack's identities are called: its Kubernetes ServiceAccounts and its accounts' unique ids."""

    kubernetes: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    """Google account email -> the stack's (namespace, name) annotated to act as it."""
    projects: set[str | None] = field(default_factory=set)
    """The projects the stack's accounts live in (None: the provider's default), for the svc.id.goog pool."""
    unique_ids: set[str] = field(default_factory=set)
    """The accounts' uniqueId outputs, where known."""
    some_unique_id_unknown: bool = False
    """An Account whose uniqueId a preview leaves unknown: then any numeric id may be the stack's."""

    @property
    def pairs(self) -> set[tuple[str, str]]:
        return {pair for pairs in self.kubernetes.values() for pair in pairs}

    @property
    def namespaces(self) -> set[str]:
        return {namespace for namespace, _ in self.pairs}

    def may_be_ours(self, number: str) -> bool:
        return number in self.unique_ids or self.some_unique_id_unknown

    def names_ours(self, name: KubernetesName | None) -> bool:
        if name is None or not self._our_pool(name.pool):
            return False
        return any(name.covers(namespace, ksa) for namespace, ksa in self.pairs)

    def _our_pool(self, pool: str) -> bool:
        return None in self.projects or pool in {project.lower() for project in self.projects if project}


def stack_accounts(resources: Iterable[Any], account_type: str,
                   kubernetes: dict[str, set[tuple[str, str]]]) -> StackAccounts:
    accounts = StackAccounts(kubernetes=kubernetes)
    for resource in resources:
        if resource.type != account_type or not resource.props.get("accountId"):
            continue
        project = resource.props.get("project")
        accounts.projects.add(str(project).lower() if project else None)
        number = resource.props.get("uniqueId")
        if number:
            accounts.unique_ids.add(str(number))
        else:
            accounts.some_unique_id_unknown = True
    return accounts


def custom_impersonation_roles(resources: Iterable[Any]) -> set[str]:
    """roleId of every custom role the stack defines that holds a permission to act as service accounts."""
    found = set()
    for resource in resources:
        if resource.type in CUSTOM_ROLE_TYPES and resource.props.get("roleId"):
            permissions = {str(p).lower() for p in resource.props.get("permissions") or []}
            if permissions & IMPERSONATION_PERMISSIONS:
                found.add(str(resource.props["roleId"]))
    return found


def acts_as_every_account(role: str, custom: set[str]) -> bool:
    """A role that, granted on a project, folder or organization, acts as every service account under it."""
    return role in IMPERSONATION_ROLES or (
        "/roles/" in role and role.rsplit("/roles/", 1)[1] in custom)


# --- Kubernetes RBAC ---

RBAC_GROUP = "kubernetes:rbac.authorization.k8s.io/"
# Built-in ClusterRoles that act as the namespace's ServiceAccounts (run pods as any of them), or anything.
ACTING_CLUSTER_ROLES = frozenset({"cluster-admin", "admin", "edit"})
# What the stack itself binds its own Kubernetes accounts to (components/gke/autoscaling.py: the metrics adapter's
# manifests): (subject namespace, subject name, roleRef kind, roleRef name).
STACK_BINDINGS = frozenset({
    ("custom-metrics", "custom-metrics-stackdriver-adapter", "clusterrole", "system:auth-delegator"),
    ("custom-metrics", "custom-metrics-stackdriver-adapter", "role", "extension-apiserver-authentication-reader"),
    ("custom-metrics", "custom-metrics-stackdriver-adapter", "clusterrole", "custom-metrics-resource-reader"),
})

# The inference gateway's endpoint picker (components/gke/inference_pool.py): its own ServiceAccount in the stack's
# namespace, bound to its own Role of the same name there, which may only read pods and the pool's objects (llm-d's
# chart grants it the same, config/charts/routerlib/templates/_rbac.yaml and llm-d-router-gateway rbac.yaml, v0.9.0).
PICKER_ACCOUNT = "vllm-pool-epp"
PICKER_READS = frozenset({"pods", "inferencepools", "inferenceobjectives", "inferencemodelrewrites"})
READ_VERBS = frozenset({"get", "list", "watch"})


def _picker_reads_only(rules: Any) -> bool:
    return bool(rules) and all(
        isinstance(rule, Mapping) and {str(v) for v in rule.get("verbs") or []} <= READ_VERBS
        and {str(r) for r in rule.get("resources") or []} <= PICKER_READS and not rule.get("nonResourceURLs")
        for rule in rules)


def _kind(type_: str) -> str:
    return type_.rsplit(":", 1)[-1] if type_.startswith(RBAC_GROUP) else ""


def _subjects_covering(props: Mapping[str, Any], binding_namespace: str, namespaces: set[str],
                       pairs: set[tuple[str, str]]) -> Iterator[tuple[str, tuple[str, str] | None]]:
    """(how the subject is written, the stack pair it is or None for a set of accounts) for each subject that
    names a ServiceAccount of the stack's namespaces."""
    for subject in props.get("subjects") or []:
        if not isinstance(subject, Mapping):
            continue
        kind = str(subject.get("kind") or "")
        name = str(subject.get("name") or "")
        if kind == "ServiceAccount":
            namespace = str(subject.get("namespace") or binding_namespace)
            if namespace in namespaces:
                yield f"ServiceAccount {namespace}/{name}", (namespace, name) if (namespace, name) in pairs else None
        elif kind == "User" and name.startswith("system:serviceaccount:"):
            namespace, _, account = name.removeprefix("system:serviceaccount:").partition(":")
            if namespace in namespaces:
                yield f"User {name}", (namespace, account) if (namespace, account) in pairs else None
        elif kind == "Group" and (name in ("system:serviceaccounts", "system:authenticated")
                                  or name.removeprefix("system:serviceaccounts:") in namespaces):
            yield f"Group {name}", None


def _rules_act_as(rules: Any) -> bool:
    """A rule list that mints ServiceAccount tokens, impersonates ServiceAccounts, or grants everything."""
    for rule in rules or []:
        if not isinstance(rule, Mapping):
            continue
        groups = {str(g) for g in rule.get("apiGroups") or []}
        resources = {str(r) for r in rule.get("resources") or []}
        verbs = {str(v) for v in rule.get("verbs") or []}
        if not groups & {"", "*"}:
            continue
        if verbs & {"create", "*"} and resources & {"serviceaccounts/token", "*/token", "*"}:
            return True
        if verbs & {"impersonate", "*"} and resources & {"serviceaccounts", "*"}:
            return True
    return False


def rbac_violations(resources: list[Any], accounts: StackAccounts) -> list[str]:
    """RoleBindings and ClusterRoleBindings of the kubernetes provider that bind the stack's namespaces'
    ServiceAccounts beyond what the stack binds, or let anyone mint their tokens or impersonate them."""
    namespaces, pairs = accounts.namespaces, accounts.pairs
    if not namespaces:
        return []
    roles: dict[tuple[str, str, str], Any] = {}  # (kind, namespace, name) -> rules
    for resource in resources:
        kind = _kind(resource.type)
        if kind in ("Role", "ClusterRole"):
            metadata = resource.props.get("metadata") or {}
            roles[(kind.lower(), str(metadata.get("namespace") or "") if kind == "Role" else "",
                   str(metadata.get("name") or ""))] = resource.props.get("rules")
    violations = []
    for resource in resources:
        kind = _kind(resource.type)
        if kind not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        metadata = resource.props.get("metadata") or {}
        namespace = str(metadata.get("namespace") or "default") if kind == "RoleBinding" else ""
        ref = resource.props.get("roleRef") or {}
        ref_kind, ref_name = str(ref.get("kind") or "").lower(), str(ref.get("name") or "")
        where = f"{kind} {metadata.get('name', '')}" + (f" in {namespace}" if namespace else "")
        for written, pair in _subjects_covering(resource.props, namespace or "default", namespaces, pairs):
            if pair is not None and (*pair, ref_kind, ref_name) in STACK_BINDINGS:
                continue
            # The picker holds no Google identity (no Workload Identity binding): only its read-only Role.
            if (written == f"ServiceAccount {namespace}/{PICKER_ACCOUNT}" and ref_kind == "role"
                    and ref_name == PICKER_ACCOUNT and _picker_reads_only(roles.get(("role", namespace, ref_name)))):
                continue
            violations.append(f"{where} binds {written} (the stack's Kubernetes identities) to {ref_kind} "
                              f"{ref_name}: the stack's identities hold only the grants the stack makes; remove it, "
                              "or give what needs it a ServiceAccount of its own in another namespace")
        reaches = namespace in namespaces or kind == "ClusterRoleBinding"
        role_rules = roles.get((ref_kind, namespace if ref_kind == "role" else "", ref_name))
        if reaches and ((ref_kind == "clusterrole" and ref_name in ACTING_CLUSTER_ROLES)
                        or _rules_act_as(role_rules)):
            whom = ", ".join(f"{s.get('kind')} {s.get('name')}" for s in resource.props.get("subjects") or []
                             if isinstance(s, Mapping))
            violations.append(f"{where} gives {whom or 'its subjects'} {ref_kind} {ref_name}, which mints tokens "
                              f"for or runs as the ServiceAccounts of {', '.join(sorted(namespaces))}: they could "
                              "act as the stack's identity and read its secrets; bind a role without "
                              "serviceaccounts/token create, impersonate or pod-running rights there")
    return violations


# --- IAM of other providers: reported for review, never judged silently ---

GCLOUD_IAM_VERBS = frozenset({"add-iam-policy-binding", "set-iam-policy"})


def other_provider_iam(type_: str, props: Mapping[str, Any], command_words: list[list[str]]) -> str | None:
    """A note for an IAM resource this pack does not read as a gcp: grant (google-native's, or a command that
    runs gcloud's IAM verbs), else None."""
    token = type_.rsplit(":", 1)[-1].lower()
    if type_.startswith("google-native:") and "iam" in token:
        return (f"{type_} changes IAM outside pulumi-gcp; the pack judges its members only where it reads them "
                "like a gcp: grant: check by hand that it lets no one act as the stack's service accounts")
    for words in command_words:
        if "gcloud" in {word.rsplit("/", 1)[-1] for word in words} and GCLOUD_IAM_VERBS & set(words):
            verb = next(word for word in words if word in GCLOUD_IAM_VERBS)
            return (f"{type_} runs `gcloud ... {verb}`: an IAM change the pack cannot read; declare it as a "
                    "pulumi-gcp IAM resource so the allow-list judges it, or check by hand that it lets no one act "
                    "as the stack's service accounts")
    return None
