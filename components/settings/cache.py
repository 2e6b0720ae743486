"""`tpu-vllm:cache`: the persistent disk for the XLA compile cache."""

from __future__ import annotations

import posixpath
import re
from typing import Literal

from pydantic import Field, field_validator

from components.settings.facts import SYSTEM_MOUNT_ROOTS
from components.settings.fields import _Section


class CacheSettings(_Section):
    """The persistent disk for the XLA compile cache (config key `tpu-vllm:cache`)."""

    size_gb: int = Field(50, ge=10, le=65536)
    """Holds the ~197 MB compile cache with room; 50 also fits the 9.54 GiB weights."""
    disk_type: Literal["pd-balanced"] = "pd-balanced"
    """v5e attaches Balanced PD."""
    keep_on_destroy: bool = False
    """Keep the disk (and the warm cache) when the stack is destroyed."""
    device_name: str = "persistent-disk-1"
    """How the VM names the first data disk: /dev/disk/by-id/google-persistent-disk-1."""
    mount_point: str = "/mnt/tpu-vllm-cache"

    @field_validator("mount_point")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/") or not re.fullmatch(r"[A-Za-z0-9._/-]+", value):
            raise ValueError("use an absolute path of letters, digits, '.', '_', '-' and '/', "
                             "e.g. /mnt/tpu-vllm-cache")
        # //usr/../etc and /etc/ are /etc: judge the directory the kernel would mount on.
        normal = "/" + posixpath.normpath(value).lstrip("/")
        system = next((root for root in SYSTEM_MOUNT_ROOTS
                       if normal == root or normal.startswith(root + "/")), None)
        if normal == "/" or system or re.match(r"/lib(32|64|x32)?(/|$)", normal):
            shown = f" (that is {normal})" if normal != value else ""
            raise ValueError(
                f"a system directory{shown}: mounting the cache disk there would hide the OS's own files "
                "or land on a directory that is cleaned or virtual; use a path under /mnt, e.g. "
                "/mnt/tpu-vllm-cache"
            )
        return normal
