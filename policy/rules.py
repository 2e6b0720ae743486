"""tpu-vllm's guardrails as plain functions over resource properties.

Importable without pulumi_policy (the pack's entry point, policy/__main__.py, wraps
them), so they are tested directly on the dev stack's resources. Each returns a
list of violation messages, each saying how to fix it. They judge what GCP will do
with a value, not how it is spelled: ranges by the addresses they cover, protocols
by number or name, ports by the ranges that contain them, commands as a shell reads them.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

try:
    from . import acting_as, address_ranges, opt_in
except ImportError:  # run by the pack's __main__, which puts this directory on sys.path
    import acting_as
    import address_ranges
    import opt_in

try:
    from pulumi_policy.proxy import UnknownValueError
except ImportError:  # the rules also run without pulumi_policy (tests, the offline plan)
    class UnknownValueError(Exception):  # type: ignore[no-redef]
        """Stands in for pulumi_policy's: nothing raises it here."""

# What a preview sends for a value computed at deploy (pulumi sdk/go/common/resource/plugin/rpc.go, the
# same strings pulumi_policy/proxy.py names); the analyzer's proxy raises UnknownValueError on reading one.
UNKNOWN_SENTINELS = frozenset({
    "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7", "3eeb2bf0-c639-47a8-9e75-3b44932eb421",
    "04da6b54-80e4-46f7-96ec-b56ff0331ba9", "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",
    "030794c1-ac77-496b-92df-f27374a8bd58", "e48ece36-62e2-4504-bad9-02848725956a",
    "dd056dcd-154b-4c76-9bd3-c8f88648b5ff",
})


def known_items(mapping: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """The entries whose values are known: a preview leaves the others unknown (e.g. a new stack's SSH key),
    and the rest of the mapping must still be judged, not turned into pulumi_policy's advisory note."""
    for key in mapping:
        try:
            value = mapping[key]
        except UnknownValueError:
            continue
        if not (isinstance(value, str) and value in UNKNOWN_SENTINELS):
            yield key, value

QUEUED_RESOURCE_TYPES = {"pulumi-python:dynamic/tpu-vllm:QueuedResource"}
# pulumi-gcp TPU resources: none of them can carry a run duration.
UNBOUNDED_TPU_TYPES = {"gcp:tpu/v2Vm:V2Vm", "gcp:tpu/node:Node", "gcp:tpu/v2QueuedResource:V2QueuedResource"}
FIREWALL_TYPE = "gcp:compute/firewall:Firewall"
# The component that writes opt-in notes, and only from the stack's settings (components/vm/network.py).
NODE_FIREWALL_TYPE = "tpu-vllm:network:NodeFirewall"
SECRET_TYPE = "gcp:secretmanager/secret:Secret"
COMMAND_TYPES = {"command:remote:Command", "command:local:Command"}
# Grants above a single resource, by scope, as pulumi-gcp spells their type tokens.
IAM_SCOPES = {"projects": "project", "organizations": "organization", "folder": "folder"}
IAM_GRANT_TYPES = {f"gcp:{module}/iAM{kind}:IAM{kind}": scope
                   for module, scope in IAM_SCOPES.items() for kind in ("Member", "Binding", "Policy")}

MAX_RUN_SECONDS = 7 * 24 * 3600  # the API's own limit for flex-start
# The build log: 0.95 fails XLA program allocation ~691 s in; 0.92 is the measured ceiling.
MAX_GPU_MEMORY_UTILIZATION = 0.92
SSH_PORT = 22
VLLM_DEFAULT_PORT = 8000  # what `vllm serve` listens on without --port
# GCP takes a protocol by name or by IP protocol number; "all" includes TCP.
TCP_PROTOCOLS = {"tcp", "6", "all"}
# An ingress rule with no source at all applies to every IPv4 source.
NO_SOURCE_MEANS = ["0.0.0.0/0"]

DEFAULT_CONFIG = {
    "allowUnboundedBilling": False,
    "allowOpenSsh": False,
    "allowPublicServing": False,
    "honorStackOptIns": True,
    "servingPort": None,
}


@dataclass(frozen=True)
class Seen:
    """A resource as a stack policy sees it; the URN tells which component made it."""

    type: str
    props: Mapping[str, Any]
    urn: str = ""


def _seen(resources: Iterable[Seen | tuple]) -> list[Seen]:
    return [item if isinstance(item, Seen) else Seen(*item) for item in resources]


def _config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    return {**DEFAULT_CONFIG, **(config or {})}


def _seconds(duration: str) -> int | None:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)s", str(duration or ""))
    return int(float(match.group(1))) if match else None


def tpu_billing_stops(type_: str, props: Mapping[str, Any], config: Mapping[str, Any] | None = None) -> list[str]:
    """A flex-start request runs at most 7 days; nothing may bill without an end unless allowed."""
    config = _config(config)
    if type_ in UNBOUNDED_TPU_TYPES:
        if config["allowUnboundedBilling"]:
            return []
        return [f"{type_} has no run duration, so it bills until someone deletes it; use tpu-vllm's "
                "flex-start queued resource (tpu.provisioningModel: flex-start, tpu.maxRunDuration: 4h), "
                "or set the policy config allowUnboundedBilling: true"]
    if type_ not in QUEUED_RESOURCE_TYPES:
        return []
    body = props.get("body") or {}
    model = body.get("provisioningModel")
    if model == "FLEX_START":
        seconds = _seconds((body.get("runDuration") or {}).get("maxRunDuration"))
        if seconds is None:
            return ["the flex-start queued resource has no runDuration.maxRunDuration, so nothing stops "
                    "its billing; set tpu-vllm:tpu.maxRunDuration (e.g. 4h)"]
        if seconds > MAX_RUN_SECONDS:
            return [f"runDuration.maxRunDuration is {seconds}s, over 7 days (604800s); set "
                    "tpu-vllm:tpu.maxRunDuration to 7d or less"]
        return []
    if config["allowUnboundedBilling"]:
        return []
    return [f"the queued resource is {model or 'not flex-start'}, which has no automatic stop (a forgotten "
            "weekend is $35 on spot, $72 on-demand); use tpu.provisioningModel: flex-start, or set the "
            "policy config allowUnboundedBilling: true"]


# --- commands, read as a shell and vLLM's argument parser read them ---

def _shell_words(text: str) -> list[str]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes: the shell would refuse it too; read it word by word
        return text.split()


def _flags(words: list[str]) -> Iterator[tuple[int, str, str | None]]:
    """(position, name, value) of each --flag; vLLM accepts `--a_b` for `--a-b` and `--flag=value`."""
    for position, word in enumerate(words):
        if not word.startswith("--") or word == "--":
            continue
        name, equals, value = word.partition("=")
        if not equals:
            following = words[position + 1] if position + 1 < len(words) else None
            value = following if following is not None and not following.startswith("-") else None
        yield position, name.replace("_", "-").lower(), value


def _command_texts(props: Mapping[str, Any]) -> list[str]:
    return [str(props.get(field)) for field in ("create", "update") if props.get(field)]


def _listening_ports(text: str) -> set[int]:
    """Every --port in the command, and vLLM's default when `vllm serve` has none of its own."""
    words = _shell_words(text)
    flags = list(_flags(words))
    ports = {int(value) for _, name, value in flags if name == "--port" and value and value.isdigit()}
    serve_at = next((i for i in range(len(words) - 1) if words[i].endswith("vllm") and words[i + 1] == "serve"),
                    None)
    if serve_at is not None and not any(name == "--port" and position > serve_at for position, name, _ in flags):
        ports.add(VLLM_DEFAULT_PORT)
    return ports


# --- firewall rules, as GCP applies them ---

def _port_spans(allows: Iterable[Mapping[str, Any]] | None) -> list[tuple[int, int]]:
    """The TCP port ranges a rule allows."""
    spans: list[tuple[int, int]] = []
    for allow in allows or []:
        if str(allow.get("protocol", "")).strip().lower() not in TCP_PROTOCOLS:
            continue
        ports = list(allow.get("ports") or [])
        if not ports:
            spans.append((0, 65535))  # no ports: every port
        for port in ports:
            low, _, high = str(port).strip().partition("-")
            try:
                spans.append((int(low), int(high or low)))
            except ValueError:  # GCP would refuse it; count it as every port rather than none
                spans.append((0, 65535))
    return spans


def _ingress_sources(props: Mapping[str, Any]) -> list[str]:
    """Source ranges of an ingress allow rule; none for egress, deny-only or tag-only rules."""
    if str(props.get("direction") or "INGRESS").strip().upper() != "INGRESS":
        return []
    ranges = [str(text) for text in props.get("sourceRanges") or []]
    if ranges:
        return ranges
    if props.get("sourceTags") or props.get("sourceServiceAccounts"):
        return []  # only from the VPC's own tagged instances or service accounts
    return NO_SOURCE_MEANS


def _made_by_the_stack(urn: str) -> bool:
    """A rule the stack's NodeFirewall component made (urn:pulumi:stack::project::Parent$Type::name)."""
    parts = urn.split("::")
    types = parts[2].split("$") if len(parts) >= 4 else []
    return types[-2:] == [NODE_FIREWALL_TYPE, FIREWALL_TYPE]


def _cleared(rule: Seen, port: int, setting: str, config: Mapping[str, Any]) -> set[address_ranges.Network]:
    """Ranges the stack's own opt-in note clears on this rule, for this port, under this setting only."""
    if not config["honorStackOptIns"] or not _made_by_the_stack(rule.urn):
        return set()
    cleared = set()
    for note in opt_in.read(str(rule.props.get("description") or "")):
        if note.setting != setting or note.port != port:
            continue
        for text in note.ranges:
            try:
                cleared.add(address_ranges.parse(text))
            except ValueError:
                continue
    return cleared


def serving_ports(resources: Iterable[Seen | tuple], config: Mapping[str, Any] | None = None) -> list[int]:
    """Where the stack serves: the stack's serving firewall rules, every --port of its commands, policy config."""
    config = _config(config)
    ports = {int(config["servingPort"])} if config["servingPort"] else set()
    for resource in _seen(resources):
        if resource.type in COMMAND_TYPES:
            for text in _command_texts(resource.props):
                ports |= _listening_ports(text)
        elif (resource.type == FIREWALL_TYPE and _made_by_the_stack(resource.urn)
              and str(resource.props.get("description") or "").startswith("tpu-vllm serving")):
            ports |= {low for low, high in _port_spans(resource.props.get("allows")) if low == high}
    return sorted(ports) or [VLLM_DEFAULT_PORT]


def firewall_not_open_to_the_world(resources: Iterable[Seen | tuple],
                                   config: Mapping[str, Any] | None = None) -> list[str]:
    """Stack-wide: no set of ingress rules opens SSH or a serving port to the internet unless opted in."""
    config = _config(config)
    resources = _seen(resources)
    rules = [r for r in resources if r.type == FIREWALL_TYPE]
    checks = [(SSH_PORT, "SSH", opt_in.SSH_OPT_IN, "allowOpenSsh",
               "narrow tpu-vllm:access.sshSourceRanges to your address")]
    checks += [(port, "the serving port", opt_in.SERVING_OPT_IN, "allowPublicServing",
                "use the SSH tunnel, or narrow tpu-vllm:access.servingSourceRanges")
               for port in serving_ports(resources, config) if port != SSH_PORT]
    violations = []
    for port, what, setting, policy_setting, fix in checks:
        if config[policy_setting]:
            continue
        reaching: list[tuple[str, str]] = []  # (rule name, range as written)
        for rule in rules:
            if not any(low <= port <= high for low, high in _port_spans(rule.props.get("allows"))):
                continue
            name = str(rule.props.get("name") or rule.urn.rsplit("::", 1)[-1])
            cleared = _cleared(rule, port, setting, config)
            for text in _ingress_sources(rule.props):
                try:
                    network = address_ranges.parse(text)
                except ValueError:
                    violations.append(f"firewall {name}: cannot read source range {text!r}, so cannot tell who "
                                      f"reaches {what} (tcp:{port}); write it as CIDR, e.g. 203.0.113.7/32")
                    continue
                if network not in cleared:
                    reaching.append((name, text))
        exposure = address_ranges.internet_exposure(text for _, text in reaching)
        if exposure:
            names = sorted({name for name, text in reaching if text in exposure.ranges})
            violations.append(
                f"{what} (tcp:{port}) is open to the internet: {exposure.describe()} (firewall "
                f"{', '.join(names)}); {fix}, or opt in explicitly (stack setting tpu-vllm:access.{setting}, "
                f"or policy config {policy_setting})")
    return violations


# --- instance metadata ---

SECRET_PATTERNS = [
    (re.compile(r"hf_[A-Za-z0-9]{30,}"), "a Hugging Face token"),
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"), "a private key"),
    (re.compile(r"ya29\.[A-Za-z0-9_\-]{20,}"), "a Google access token"),
]
# Public by design: OpenSSH public keys (in ssh-keys, or pasted elsewhere), content digests
# (image@sha256:...) and images tagged with a git commit (CI builds: repo/image:<40 hex>).
PUBLIC_BLOBS = re.compile(
    r"(?:ssh-(?:ed25519|rsa|dss)|ecdsa-sha2-nistp\d+|sk-[a-z0-9-]+@openssh\.com)\s+AAAA[A-Za-z0-9+/]+=*"
    r"|\bsha(?:1|224|256|384|512):[0-9A-Fa-f]+"
    r"|[\w.-]+(?:/[\w.-]+)+:[0-9a-f]{40}\b")
# Base64 and URL-safe tokens mix cases and carry separators; judge the whole run.
LONG_TOKEN = re.compile(r"[A-Za-z0-9+/=_\-]{32,}")
# Hex and lowercase keys have one case; judge each unbroken run, so that names like
# projects/p-123456/secrets/tpu-vllm-dev-hf-token stay words.
KEY_PIECE = re.compile(r"[A-Za-z0-9]{24,}")
HEX_PIECE = re.compile(r"[0-9A-Fa-f]+")


def _entropy(text: str) -> float:
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def _has_letters_and_digits(text: str) -> bool:
    return any(c.isdigit() for c in text) and any(c.isalpha() for c in text)


def _mixed_case_token(token: str) -> bool:
    return (_has_letters_and_digits(token) and any(c.isupper() for c in token)
            and any(c.islower() for c in token) and _entropy(token) > 4.0)


def _random_piece(piece: str) -> bool:
    # Hex has 16 symbols, at most 4 bits a character (a random 32-character key measures ~3.6).
    threshold = 3.0 if HEX_PIECE.fullmatch(piece) else 4.0
    return _has_letters_and_digits(piece) and _entropy(piece) > threshold


def _random_strings(text: str) -> list[str]:
    """API keys, hex keys, passwords: long high-entropy runs of letters and digits; not words or paths."""
    text = PUBLIC_BLOBS.sub(" ", text)
    return ([token for token in LONG_TOKEN.findall(text) if _mixed_case_token(token)]
            + [piece for piece in KEY_PIECE.findall(text) if _random_piece(piece)])


def metadata_has_no_secrets(type_: str, props: Mapping[str, Any],
                            config: Mapping[str, Any] | None = None) -> list[str]:
    """Instance metadata is readable from the instance: no token, key or random string in it."""
    metadata: Mapping[str, Any] = {}
    if type_ in QUEUED_RESOURCE_TYPES:
        for spec in ((props.get("body") or {}).get("tpu") or {}).get("nodeSpec") or []:
            metadata = {**metadata, **dict(known_items((spec.get("node") or {}).get("metadata") or {}))}
    elif type_ in UNBOUNDED_TPU_TYPES or type_ == "gcp:compute/instance:Instance":
        metadata = dict(known_items(props.get("metadata") or {}))
        if props.get("metadataStartupScript"):
            metadata["startup-script"] = props["metadataStartupScript"]
    violations = []
    for key, value in known_items(metadata):
        text = str(value)
        for pattern, what in SECRET_PATTERNS:
            if pattern.search(text):
                violations.append(f"metadata {key!r} contains {what}; keep it in Secret Manager and let the VM "
                                  "read it at boot (tpu-vllm:hfToken or hfTokenSecret)")
        if _random_strings(text):
            violations.append(f"metadata {key!r} contains a long random string that looks like a secret; "
                              "store it in Secret Manager and pass only its name")
    return violations


def secrets_are_labelled(type_: str, props: Mapping[str, Any], config: Mapping[str, Any] | None = None) -> list[str]:
    if type_ != SECRET_TYPE or props.get("labels"):
        return []
    return [f"secret {props.get('secretId', '')} has no labels; add labels (e.g. app, stack) so it can be "
            "found, audited and cleaned up"]


def _container_argvs(value: Any) -> Iterator[list[str]]:
    """command + args of every container in a Kubernetes object, wherever its pod template sits."""
    if isinstance(value, Mapping):
        for key in ("initContainers", "containers", "ephemeralContainers"):
            for container in value.get(key) or []:
                if isinstance(container, Mapping):
                    yield [str(word) for word in [*(container.get("command") or []), *(container.get("args") or [])]]
        for item in value.values():
            yield from _container_argvs(item)
    elif isinstance(value, list):
        for item in value:
            yield from _container_argvs(item)


def gpu_memory_utilization_capped(type_: str, props: Mapping[str, Any],
                                  config: Mapping[str, Any] | None = None) -> list[str]:
    """The VM's remote command and every Kubernetes container's argv (the gke wing's pods)."""
    if type_ in COMMAND_TYPES:
        argvs = [_shell_words(text) for text in _command_texts(props)]
    elif type_.startswith("kubernetes:"):
        argvs = list(_container_argvs(props))
    else:
        return []
    violations = []
    for words in argvs:
        for _, name, value in _flags(words):
            if name != "--gpu-memory-utilization" or value is None:
                continue
            try:
                fraction = float(value)
            except ValueError:
                continue  # vLLM refuses to start with it
            if fraction > MAX_GPU_MEMORY_UTILIZATION:
                violations.append(f"the serve command sets --gpu-memory-utilization {value}: above 0.92 the "
                                  "build log saw XLA program allocation fail (~691 s in at 0.95); set "
                                  "tpu-vllm:vllm.gpuMemoryUtilization to 0.92")
    return violations


# --- the stack's identities hold exactly the grants the stack makes (an allow-list) ---
#
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
CACHE_BUCKET_ROLE = " / ".join(CACHE_BUCKET_ROLES)
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
                           if key in ("tpu-vllm-hf-token-secret", "tpu-vllm-api-key-secret") and value)
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
    resources = [Seen(resource.type, _known_copy(resource.props), resource.urn) for resource in _seen(resources)]
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

    def allowed(type_: str, props: Mapping[str, Any], role: str, email: str) -> bool:
        if type_ in REPOSITORY_GRANT_TYPES:
            granted = _repository_key(props.get("repository"), props.get("project"), props.get("location"))
            return (role == MIRROR_READER_ROLE and email in node_accounts
                    and any(_same_repository(granted, own) for own in own_repositories))
        if type_ in BUCKET_GRANT_TYPES:
            bucket = str(props.get("bucket") or "").removeprefix("b/")
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
            if allowed(resource.type, resource.props, role, email):
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
    for resource in _seen(resources):
        props = _known_copy(resource.props)
        words = [_shell_words(text) for text in _command_texts(props)] if resource.type in COMMAND_TYPES else []
        note = acting_as.other_provider_iam(resource.type, props, words)
        if note:
            notes.append(f"{resource.urn.rsplit('::', 1)[-1] or resource.type}: {note}")
    return notes


RESOURCE_RULES = {
    "tpu-billing-stops": (tpu_billing_stops,
                          "A flex-start TPU runs at most 7 days; no TPU bills without an end unless allowed."),
    "metadata-has-no-secrets": (metadata_has_no_secrets,
                                "No instance metadata value looks like a token, key or random secret."),
    "secrets-are-labelled": (secrets_are_labelled, "Secret Manager secrets carry labels."),
    "gpu-memory-utilization-capped": (gpu_memory_utilization_capped,
                                      "The vLLM serve command keeps --gpu-memory-utilization at 0.92 or below."),
}
STACK_RULES = {
    "firewall-not-open-to-the-world": (
        firewall_not_open_to_the_world,
        "SSH and the serving ports are not open to the internet (by the addresses the rules cover) unless allowed."),
    "stack-identities-hold-only-their-grants": (
        stack_identities_hold_only_their_grants,
        "The stack's service accounts hold exactly the grants the stack makes (an allow-list), on any resource; "
        "no one else may act as them."),
}
# Reported, not enforced: what the pack cannot read as a grant is named for a reviewer.
ADVISORY_STACK_RULES = {
    "other-providers-iam-is-reviewed": (
        other_providers_iam_is_reviewed,
        "IAM changes outside pulumi-gcp (google-native IAM resources, gcloud IAM commands) are named for review."),
}
