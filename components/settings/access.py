"""`tpu-vllm:access`: who can reach the node."""

from __future__ import annotations

import re

from pydantic import Field, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel

from components.settings.fields import _Section, _warn
from policy import address_ranges


def _check_cidrs(values: list[str], info: ValidationInfo) -> list[str]:
    """Each range as GCP will read it (host bits dropped, '/00' is '/0'), so checks and rules see one spelling."""
    canonical = []
    for value in values:
        network = address_ranges.parse(value)
        if address_ranges.has_host_bits(value):
            _warn(info, (
                f"access.{to_camel(info.field_name or '')}: {value} has host bits set, so it means {network} "
                f"({network.num_addresses:,} addresses); for one address write {value.strip().split('/')[0]}/"
                f"{network.max_prefixlen}"
            ))
        canonical.append(str(network))
    return canonical


class AccessSettings(_Section):
    """Who can reach the node (config key `tpu-vllm:access`)."""

    ssh_source_ranges: list[str] = Field(default_factory=list)
    """Where Pulumi's SSH connection comes from: your address, e.g. 203.0.113.7/32."""
    allow_ssh_from_anywhere: bool = False
    """Explicit opt-in for 0.0.0.0/0 on SSH (key-only auth)."""
    serving_source_ranges: list[str] = Field(default_factory=list)
    """Outside ranges that may call the endpoint directly; none by default (use the tunnel)."""
    internal_source_ranges: list[str] = Field(default_factory=lambda: ["10.128.0.0/9"])
    """VPC ranges that may call the endpoint (the default network's auto-mode range)."""
    allow_public_serving: bool = False
    """Explicit opt-in for 0.0.0.0/0 on the serving port."""
    ssh_user: str = "tpu-vllm"
    ssh_public_key: str | None = None
    """Your own key instead of the generated one (set sshPrivateKey as a secret too)."""

    @field_validator("ssh_source_ranges", "serving_source_ranges", "internal_source_ranges")
    @classmethod
    def _cidrs(cls, values: list[str], info: ValidationInfo) -> list[str]:
        return _check_cidrs(values, info)

    @field_validator("internal_source_ranges")
    @classmethod
    def _internal_is_private(cls, values: list[str]) -> list[str]:
        public = [value for value in values if not address_ranges.is_private(address_ranges.parse(value))]
        if public:
            raise ValueError(
                f"{', '.join(public)} {'is' if len(public) == 1 else 'are'} not private: internal ranges are your "
                f"VPC's own addresses, inside {address_ranges.PRIVATE_RANGES_TEXT}. List outside ranges in "
                "access.servingSourceRanges instead (one that opens the endpoint to the internet also needs "
                "access.allowPublicServing true)"
            )
        return values

    @field_validator("ssh_user")
    @classmethod
    def _user_shape(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", value):
            raise ValueError("use a lowercase Linux user name, e.g. tpu-vllm")
        return value

    @field_validator("ssh_public_key")
    @classmethod
    def _public_key_shape(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"(ssh-ed25519|ssh-rsa|ecdsa-sha2-\S+) \S+", value):
            raise ValueError("paste an OpenSSH public key line, e.g. 'ssh-ed25519 AAAA...'")
        return value
