"""`tpu-vllm:access`: who can reach the node."""

from __future__ import annotations

import re
from typing import ClassVar

from pydantic import Field, field_validator

from components.settings.fields import SourceRanges, _Section
from components.settings.findings import InvalidSettingError
from policy import address_ranges

# authorized_keys' public key form (OpenSSH sshd(8), AUTHORIZED_KEYS FILE FORMAT: keytype, base64-encoded key,
# comment), narrowed to the types this stack accepted before and a one-line printable-ASCII comment.
OPENSSH_PUBLIC_KEY = re.compile(r"(?:ssh-ed25519|ssh-rsa|ecdsa-sha2-[a-z0-9-]+) [A-Za-z0-9+/]+={0,3}(?: [ -~]*)?")


class AccessSettings(_Section):
    """Who can reach the node (config key `tpu-vllm:access`)."""

    config_key: ClassVar[str] = "access"

    ssh_source_ranges: SourceRanges = Field(default_factory=list, description=(
        "where Pulumi's SSH comes from (vm): your address, e.g. `203.0.113.7/32`; required on vm; ranges reaching "
        "the internet (alone or together: `0.0.0.0/0`, `::/0`, the two `/1` halves, more than a /16) need "
        "`allowSshFromAnywhere`"))
    allow_ssh_from_anywhere: bool = Field(False, description=(
        "explicit opt-in for SSH from the internet (key-only auth); warns on every `up` with the narrowing command"))
    serving_source_ranges: SourceRanges = Field(default_factory=list, description=(
        "outside ranges that may call the serving port directly; none by default (use the tunnel); ranges "
        "reaching the internet need `allowPublicServing`"))
    internal_source_ranges: SourceRanges = Field(default_factory=lambda: ["10.128.0.0/9"], description=(
        "VPC ranges that may call the serving port (the default network's auto-mode range); private only "
        "(RFC 1918, RFC 6598 `100.64.0.0/10`, IPv6 ULA `fc00::/7`), anything else is an error"))
    allow_public_serving: bool = Field(False, description=(
        "explicit opt-in for serving ranges that reach the internet (only the API key stands in front)"))
    ssh_user: str = Field("tpu-vllm", description="the Linux user Pulumi logs in as")
    ssh_public_key: str | None = Field(None, description=(
        "your own key instead of the generated one, one OpenSSH line (type, key, optional printable-ASCII "
        "comment); set `tpu-vllm:sshPrivateKey` with `--secret` too"))

    @field_validator("internal_source_ranges")
    @classmethod
    def _internal_is_private(cls, values: list[str]) -> list[str]:
        public = [value for value in values if not address_ranges.is_private(address_ranges.parse(value))]
        if public:
            raise InvalidSettingError(
                f"{', '.join(public)} {'is' if len(public) == 1 else 'are'} not private: internal ranges are your "
                f"VPC's own addresses, inside {address_ranges.PRIVATE_RANGES_TEXT}",
                "list outside ranges in access.servingSourceRanges instead (one that opens the endpoint to the "
                "internet also needs access.allowPublicServing true)",
            )
        return values

    @field_validator("ssh_user")
    @classmethod
    def _user_shape(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", value):
            raise InvalidSettingError("not a Linux user name", "use a lowercase Linux user name, e.g. tpu-vllm")
        return value

    @field_validator("ssh_public_key")
    @classmethod
    def _public_key_shape(cls, value: str | None) -> str | None:
        # The whole line, not its start: the key becomes a line of the node's ssh-keys metadata
        # (USERNAME:KEY), where a newline in a comment would add a key of its own for any user.
        if value is not None and not OPENSSH_PUBLIC_KEY.fullmatch(value.strip()):
            raise InvalidSettingError("not one OpenSSH public key line (type, base64 key, and an optional comment "
                                      "of printable ASCII)",
                                      "paste an OpenSSH public key line, e.g. 'ssh-ed25519 AAAA... me@laptop'")
        return None if value is None else value.strip()
