"""Every GCP id the stack derives from its stack name, valid for the API that receives it.

Pulumi accepts stack names GCP refuses (`my_stack`, `prod.eu`, `Prod`, 100 characters), so
ids are derived here, in one place: lowercase, only the characters each API allows, within
its length limit. A name that had to be changed or shortened gets a short hash of the real
stack name, so two stacks never share an id (`my_stack` is not `my-stack`) and the same
stack always gets the same one. A name that fits as it is keeps its old, readable id
(`dev` -> `tpu-vllm-dev`), so existing stacks are not replaced.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

APP = "tpu-vllm"
HASH_CHARS = 6

# The APIs' own rules, quoted from their discovery documents (google-api-python-client); the
# ids made here keep to the strictest, COMPUTE_NAME, within each API's length:
# - compute.v1 Disk/Firewall/Network name and network tags: "1-63 characters long and match the
#   regular expression `[a-z]([-a-z0-9]*[a-z0-9])?`";
# - iam.v1 CreateServiceAccountRequest.accountId: "6-30 characters long, and match the regular
#   expression `[a-z]([-a-z0-9]*[a-z0-9])`";
# - secretmanager.v1 secretId: "maximum length of 255 characters ... letters, numerals, and the
#   hyphen (-) and underscore (_) characters";
# - tpu.v2alpha1 queuedResourceId and nodeId: "`^[A-Za-z0-9_.~+%-]+$`" (the node is also a VM
#   host name, hence COMPUTE_NAME).
COMPUTE_NAME = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
LIMITS = {"compute": 63, "service_account": 30}


def _slug(text: str) -> str:
    """Lowercase, runs of anything but [a-z0-9] become one '-', no '-' at either end."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _short_hash(stack: str) -> str:
    return hashlib.sha256(stack.encode()).hexdigest()[:HASH_CHARS]


def stack_id(stack: str, suffix: str = "", limit: int = LIMITS["compute"]) -> str:
    """`tpu-vllm-<stack>[-<suffix>]`, or with `-<hash>` before the suffix when the stack name
    had to be changed or shortened to fit `limit`. Always `[a-z]([-a-z0-9]*[a-z0-9])?`."""
    tail = f"-{suffix}" if suffix else ""
    slug = _slug(stack)
    plain = f"{APP}-{slug}{tail}"
    if slug and slug == stack and len(plain) <= limit:
        return plain
    room = limit - len(APP) - 2 - HASH_CHARS - len(tail)
    kept = slug[:max(room, 0)].rstrip("-")
    return "-".join(part for part in (APP, kept, _short_hash(stack)) if part) + tail


# The longest suffix the stack adds to the prefix (a firewall rule), so every `<prefix>-<suffix>` fits 63.
LONGEST_PREFIX_SUFFIX = "-serving-external"


def resource_prefix(stack: str) -> str:
    """What every compute id of the stack starts with (at most 46 characters); also the node's network tag."""
    return stack_id(stack, limit=LIMITS["compute"] - len(LONGEST_PREFIX_SUFFIX))


# Each service account of the stack and the suffix its id ends with. An account id cannot change in place
# (a new id is a new account: its grants and Workload Identity bindings go with the old one), so each keeps
# the rule it was first named by: the serving identities a stack id of their own, the gke-only ones the
# resource prefix cut to fit (as components/core/identity.py named them before this function).
SERVICE_ACCOUNTS = {
    "vm": ("vm", "stack"),
    "workload": ("wl", "stack"),
    "nodes": ("nodes", "prefix"),
    "metrics": ("metrics", "prefix"),
}


def service_account_id(stack: str, role: str) -> str:
    """The id (6-30 characters) of the stack's service account for `role`: every account id comes from here."""
    try:
        suffix, rule = SERVICE_ACCOUNTS[role]
    except KeyError:
        raise ValueError(f"no service account role {role!r}; the roles are {', '.join(SERVICE_ACCOUNTS)}") from None
    if rule == "stack":
        return stack_id(stack, suffix, limit=LIMITS["service_account"])
    prefix = resource_prefix(stack)
    return f"{prefix[:LIMITS['service_account'] - 1 - len(suffix)].rstrip('-')}-{suffix}"


def label_value(text: str) -> str:
    """A label value GCP accepts (0-63 of lowercase letters, digits, '_' and '-'), hashed if changed."""
    value = re.sub(r"[^a-z0-9_-]+", "-", text.lower())
    if value == text and len(value) <= 63:
        return value
    return f"{value[:63 - HASH_CHARS - 1]}-{_short_hash(text)}"


def _label_char(char: str, first: bool) -> bool:
    category = unicodedata.category(char)
    if first:
        return category in ("Ll", "Lo")
    return category in ("Ll", "Lo", "Nd", "Nl", "No") or char in "_-"


def label_problem(key: str, value: str) -> str | None:
    """Why GCP would refuse this label, or None. The rule every service here shares (Secret
    Manager's words): keys 1-63 characters `[\\p{Ll}\\p{Lo}][\\p{Ll}\\p{Lo}\\p{N}_-]{0,62}`,
    values 0-63 characters `[\\p{Ll}\\p{Lo}\\p{N}_-]{0,63}`, each at most 128 bytes in UTF-8."""
    if not 1 <= len(key) <= 63 or len(key.encode()) > 128:
        return f"label key {key!r} must be 1 to 63 characters"
    if not _label_char(key[0], first=True) or not all(_label_char(c, first=False) for c in key[1:]):
        return (f"label key {key!r} must start with a lowercase letter and hold only lowercase "
                "letters, digits, '_' and '-'")
    if len(value) > 63 or len(value.encode()) > 128:
        return f"label value {value!r} (key {key!r}) must be at most 63 characters"
    if not all(_label_char(c, first=False) for c in value):
        return f"label value {value!r} (key {key!r}) may hold only lowercase letters, digits, '_' and '-'"
    return None
