"""What the sections share: the base model, how a field warns, and the field types several sections use
(durations, image references, public host names, address ranges, ports, zones), each validated in one place."""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo
from pydantic.alias_generators import to_camel

from components.settings.facts import NO_MEDIA_DOMAIN
from components.settings.findings import Finding, InvalidSettingError
from policy import address_ranges

HOSTNAME = re.compile(r"(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*")
# region-suffix; an AI zone's suffix is letters and digits, e.g. us-south1-ai1b, us-central1-ai1a
# (docs.cloud.google.com/tpu/docs/regions-zones and compute/docs/regions-zones/ai-zones, read 2026-12).
ZONE = re.compile(r"[a-z]+-[a-z]+[0-9]+-[a-z0-9]+")
# A project id (or number, or a legacy domain-scoped id) inside a resource path: what Resource Manager's ids are made
# of, so nothing else (a quote, a space, a newline) rides in a path the APIs and the plan show.
PROJECT_IN_PATH = r"[a-z0-9][a-z0-9.:-]{0,62}"
DURATION_EXAMPLES = "4h, 90m, 2d or 1h30m"


def parse_duration(text: str) -> int:
    """'4h', '90m', '2d', '1h30m', '3600s' -> seconds (ASCII digits only: `\\d` would read other scripts' digits)."""
    cleaned = str(text).strip().lower()
    parts = re.findall(r"([0-9]+) *([dhms])", cleaned)
    if not parts or re.sub(r"[0-9]+ *[dhms]", "", cleaned).strip(" "):
        raise InvalidSettingError(f"cannot read {text!r} as a duration", f"write it like {DURATION_EXAMPLES}")
    unit_seconds = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    return sum(int(number) * unit_seconds[unit] for number, unit in parts)


class _Section(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )
    config_key: ClassVar[str] = ""
    """Where the section sits under tpu-vllm: ('vllm'), so its findings name their key in full."""

    @classmethod
    def key_of(cls, info: ValidationInfo) -> str:
        field = cls.model_fields.get(info.field_name or "")
        name = (field.alias if field is not None and field.alias else None) or to_camel(info.field_name or "")
        return f"{cls.config_key}.{name}" if cls.config_key else name


def _warn(info: ValidationInfo, finding: Finding) -> None:
    if info.context is not None:
        info.context.setdefault("warnings", []).append(finding)


def warn(cls: type[_Section], info: ValidationInfo, value: Any, message: str, fix: str) -> None:
    """A field validator's warning, keyed by the field it checks."""
    _warn(info, Finding.warning(cls.key_of(info), value, message, fix))


class DurationText:
    """Marks a duration field, so pydantic's type errors on it say how durations are written."""


def _readable_duration(value: str) -> str:
    parse_duration(value)
    # Shown as written in the plan and the dashboard's notes: without the spaces around it.
    return value.strip()


Duration = Annotated[str, AfterValidator(_readable_duration), DurationText()]
"""A duration as text: 4h, 90m, 2d, 1h30m, 3600s."""
Port = Annotated[int, Field(ge=1, le=65535)]
"""A TCP port."""


def _zone(value: str) -> str:
    if len(value) > 63 or not ZONE.fullmatch(value):
        raise InvalidSettingError(f"{value!r} is not a zone", "write zones like us-west4-a")
    return value


Zone = Annotated[str, AfterValidator(_zone)]
"""A GCP zone name, e.g. us-west4-a."""


# Docker's image reference grammar (distribution/reference): [host[:port]/]path[:tag][@digest].
_IMAGE_REFERENCE = re.compile(
    r"(?:(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*"
    r"(?::[0-9]+)?|localhost(?::[0-9]+)?)/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[\w][\w.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?",
    # distribution/reference's `\w` is Go's, ASCII only; Python's would take other scripts' letters in a tag.
    re.ASCII,
)


def pullable_image(value: str, example: str) -> str:
    """An image reference docker (and the kubelet) can pull; it also lands in `docker run`'s argv, so
    nothing option-like or with spaces gets through."""
    if not value.strip():
        raise InvalidSettingError("the node pulls this container", f"set it to {example} or a pinned tag")
    if re.fullmatch(r"(sha256:)?[0-9a-f]{12,64}", value):
        raise InvalidSettingError(
            "an image ID from `docker images` is a config-blob ID, not a manifest digest: "
            "docker pull by it fails with 'unexpected media type'",
            f"use the repository and a tag, e.g. {example}, or repository@sha256:<manifest digest>",
        )
    # distribution/reference reference.go (`0965666`), Parse: "repository name must not be more than 255
    # characters", the path after the domain (its anchoredNameRegexp takes a first part of several as the domain).
    name = re.split(r"[:@](?=[^/]*$)", value)[0]
    if not _IMAGE_REFERENCE.fullmatch(value) or len(name.split("/", 1)[-1]) > 255:
        raise InvalidSettingError(
            "not an image reference docker can pull",
            f"write it like {example}, registry.example.com/team/image:v1 or repository@sha256:<digest>",
        )
    return value


def image_reference(example: str) -> Any:
    """The type of an image field whose default (and example in its error) is `example`."""
    return Annotated[str, AfterValidator(lambda value: pullable_image(value, example))]


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


def _public_host(value: str) -> str:
    if value == NO_MEDIA_DOMAIN:
        raise InvalidSettingError(f"{value!r} is what an empty list renders to", "leave the list empty instead")
    if not HOSTNAME.fullmatch(value):
        raise InvalidSettingError(
            f"{value!r} is not a host name (vLLM matches the URL's host exactly, so list each subdomain)",
            "write lowercase host names only, no scheme, port, path or wildcard, e.g. images.example.com; leave "
            "the list empty to allow no media URLs at all",
        )
    inward = _inward_host(value)
    if inward:
        raise InvalidSettingError(
            f"{value!r} {inward}: whoever holds the API key could make vLLM fetch from the node itself, its "
            "metadata server or your VPC (vLLM's own loopback port answers without the key)",
            "list public host names only",
        )
    return value


PublicHostName = Annotated[str, AfterValidator(_public_host)]
"""A host name on the internet: not the node, its metadata server, the VPC, nor a numeric address."""


def _canonical_ranges(values: list[str], info: ValidationInfo) -> list[str]:
    """Each range as GCP will read it (host bits dropped, '/00' is '/0'), so checks and rules see one spelling."""
    canonical = []
    for value in values:
        try:
            network = address_ranges.parse(value)
        except ValueError:
            raise InvalidSettingError(f"{value!r} is not a CIDR range", "write it like 203.0.113.7/32") from None
        if address_ranges.has_host_bits(value):
            _warn(info, Finding.warning(
                f"access.{to_camel(info.field_name or '')}", values,
                f"{value} has host bits set, so it means {network} ({network.num_addresses:,} addresses)",
                f"for one address write {value.strip().split('/')[0]}/{network.max_prefixlen}",
            ))
        canonical.append(str(network))
    return canonical


SourceRanges = Annotated[list[str], AfterValidator(_canonical_ranges)]
"""Address ranges (CIDR), canonical as GCP stores them; a range with host bits set warns."""
