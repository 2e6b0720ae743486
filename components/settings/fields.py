"""What every section shares: the base model, durations, image references, host names, warnings."""

from __future__ import annotations

import ipaddress
import re

from pydantic import BaseModel, ConfigDict, ValidationInfo
from pydantic.alias_generators import to_camel

HOSTNAME = re.compile(r"(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*")


def parse_duration(text: str) -> int:
    """'4h', '90m', '2d', '1h30m', '3600s' -> seconds."""
    cleaned = str(text).strip().lower()
    parts = re.findall(r"(\d+)\s*([dhms])", cleaned)
    if not parts or re.sub(r"\d+\s*[dhms]", "", cleaned).strip():
        raise ValueError(
            f"cannot read {text!r} as a duration; write it like 4h, 90m, 2d or 1h30m"
        )
    unit_seconds = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    return sum(int(number) * unit_seconds[unit] for number, unit in parts)


def _warn(info: ValidationInfo, message: str) -> None:
    if info.context is not None:
        info.context.setdefault("warnings", []).append(message)


class _Section(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


# Docker's image reference grammar (distribution/reference): [host[:port]/]path[:tag][@digest].
_IMAGE_REFERENCE = re.compile(
    r"(?:(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*"
    r"(?::[0-9]+)?|localhost(?::[0-9]+)?)/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[\w][\w.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?"
)


def pullable_image(value: str, example: str) -> str:
    """An image reference docker (and the kubelet) can pull; it also lands in `docker run`'s argv, so
    nothing option-like or with spaces gets through."""
    if not value.strip():
        raise ValueError(f"the node pulls this container; set it to {example} or a pinned tag")
    if re.fullmatch(r"(sha256:)?[0-9a-f]{12,64}", value):
        raise ValueError(
            "an image ID from `docker images` is a config-blob ID, not a manifest digest: "
            "docker pull by it fails with 'unexpected media type'; use the repository and a "
            f"tag, e.g. {example}, or repository@sha256:<manifest digest>"
        )
    if not _IMAGE_REFERENCE.fullmatch(value):
        raise ValueError(
            f"not an image reference docker can pull; write it like {example}, "
            "registry.example.com/team/image:v1 or repository@sha256:<digest>"
        )
    return value


# Names that resolve inside the node or the VPC: GCE's metadata server and internal DNS, mDNS, loopback.
INWARD_SUFFIXES = (".internal", ".localhost", ".local", ".home.arpa", ".localdomain")


def _inward_host(host: str) -> str | None:
    """Why a media host would point vLLM's fetcher back inside, or None for a public name or address."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if address is not None:
        return None if address.is_global else "is not a public address"
    if host == "localhost" or host.endswith(INWARD_SUFFIXES):
        return "names the node, the metadata server or the VPC"
    if "." not in host:
        return "is a single label, which the node's resolver completes with its own search domains"
    # getaddrinfo reads 2130706433 or 0x7f000001 as 127.0.0.1: a real domain's last label has a letter first.
    if not re.fullmatch(r"[a-z][a-z0-9-]*", host.rsplit(".", 1)[1]):
        return "reads as a numeric address to the resolver"
    return None
