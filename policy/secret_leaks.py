"""No secret where it can be read: instance metadata holds no token, key or random string, and every secret
is labelled."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

try:
    from .resource_view import (
        COMPUTE_INSTANCE_TYPES,
        INSTANCE_TYPE,
        QUEUED_RESOURCE_TYPES,
        SECRET_TYPE,
        UNBOUNDED_TPU_TYPES,
        instance_metadata,
        known_items,
    )
except ImportError:  # run by the pack's __main__, which puts this directory on sys.path
    from resource_view import (
        COMPUTE_INSTANCE_TYPES,
        INSTANCE_TYPE,
        QUEUED_RESOURCE_TYPES,
        SECRET_TYPE,
        UNBOUNDED_TPU_TYPES,
        instance_metadata,
        known_items,
    )

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
    elif type_ in UNBOUNDED_TPU_TYPES or type_ in COMPUTE_INSTANCE_TYPES or type_ == INSTANCE_TYPE:
        metadata = instance_metadata(type_, props)
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
