"""`tpu-vllm:cache`: the persistent disk for the XLA compile cache."""

from __future__ import annotations

import posixpath
import re
from typing import ClassVar

from pydantic import Field, field_validator

from components import catalog
from components.settings.facts import SYSTEM_MOUNT_ROOTS
from components.settings.fields import _Section
from components.settings.findings import InvalidSettingError


class CacheSettings(_Section):
    """The persistent disk for the XLA compile cache (config key `tpu-vllm:cache`)."""

    config_key: ClassVar[str] = "cache"

    size_gb: int = Field(50, ge=10, le=65536, description=(
        "billed run or no run (pd-balanced at $0.11/GB-month in us-west4: $5.50/month at 50); holds the ~197 MB "
        "compile cache with room, and the 9.54 GiB weights with `vllm.weightsOnDisk` (then at least 20)"))
    disk_type: str | None = Field(None, description=(
        "unset: the shape's data disk, `pd-balanced` on v5e, `hyperdisk-balanced` on v6e (Google's TPU storage "
        "page: v5e takes Balanced Persistent Disk and Hyperdisk ML, v6e Hyperdisk Balanced and Hyperdisk ML; "
        "Hyperdisk ML is read-mostly, so the stack does not use it); any other type is an error"))
    keep_on_destroy: bool = Field(False, description=(
        "keep the disk (gke: the compile-cache bucket) and the warm cache across destroys: it then outlives "
        "`pulumi destroy` and bills until you delete it"))
    device_name: str = Field("persistent-disk-1", description=(
        "the name the boot script prefers for the cache disk (`/dev/disk/by-id/google-persistent-disk-1`; letters, "
        "digits, `-`, `_`); it takes the one unpartitioned disk of `cache.sizeGb` whatever it is named, and this "
        "name only when several are that size"))
    mount_point: str = Field("/mnt/tpu-vllm-cache", description=(
        "where the VM mounts the cache disk; system directories (`/`, `/etc`, `/usr`, `/var`, `/home`, `/tmp`, "
        "`/lib*`, ... and what lies under them, however spelled) are refused"))

    @field_validator("device_name")
    @classmethod
    def _device_name(cls, value: str) -> str:
        # The boot script finds the disk at /dev/disk/by-id/google-<name>: one plain path segment.
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}", value):
            raise InvalidSettingError(
                "not a disk device name (1 to 63 letters, digits, '-' and '_', starting with a letter or digit; "
                "it names /dev/disk/by-id/google-<name>)", "use persistent-disk-1, the TPU VM's name for its first "
                "data disk")
        return value

    @field_validator("disk_type")
    @classmethod
    def _a_tpu_data_disk(cls, value: str | None) -> str | None:
        known = sorted({disk for shape in catalog.all_shapes() for disk in shape.generation.data_disk_types})
        if value is not None and value not in known:
            raise InvalidSettingError(f"not a data disk type a TPU VM takes (the catalog's: {', '.join(known)})",
                                      "remove the key: it follows tpu.acceleratorType")
        return value

    @field_validator("mount_point")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/") or not re.fullmatch(r"[A-Za-z0-9._/-]+", value):
            raise InvalidSettingError("not a plain absolute path", "use an absolute path of letters, digits, '.', "
                                      "'_', '-' and '/', e.g. /mnt/tpu-vllm-cache")
        # //usr/../etc and /etc/ are /etc: judge the directory the kernel would mount on.
        normal = "/" + posixpath.normpath(value).lstrip("/")
        system = next((root for root in SYSTEM_MOUNT_ROOTS
                       if normal == root or normal.startswith(root + "/")), None)
        if normal == "/" or system or re.match(r"/lib(32|64|x32)?(/|$)", normal):
            shown = f" (that is {normal})" if normal != value else ""
            raise InvalidSettingError(
                f"a system directory{shown}: mounting the cache disk there would hide the OS's own files "
                "or land on a directory that is cleaned or virtual",
                "use a path under /mnt, e.g. /mnt/tpu-vllm-cache",
            )
        return normal
