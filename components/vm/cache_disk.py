"""The persistent disk that keeps the XLA compile cache across nodes (cold 857 s, warm 497 s)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp


@dataclass
class CacheDiskArgs:
    project: str
    zone: str
    name: str
    size_gb: int
    disk_type: str = "pd-balanced"
    keep_on_destroy: bool = False
    """Leave the disk (and the warm cache) behind on `pulumi destroy`."""
    labels: dict[str, str] = field(default_factory=dict)


class CacheDisk(pulumi.ComponentResource):
    """A zonal disk, independent of the node, so flex-start expiry does not take the cache with it."""

    disk: gcp.compute.Disk
    source_disk: pulumi.Output[str]
    """projects/<p>/zones/<z>/disks/<name>: what the queued resource attaches."""

    def __init__(self, name: str, args: CacheDiskArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-vllm:storage:CacheDisk", name, None, opts)
        self.disk = gcp.compute.Disk(
            f"{name}-disk",
            project=args.project,
            zone=args.zone,
            name=args.name,
            type=args.disk_type,
            size=args.size_gb,
            labels=args.labels,
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=args.keep_on_destroy),
        )
        self.source_disk = pulumi.Output.concat(
            "projects/", args.project, "/zones/", args.zone, "/disks/", self.disk.name
        )
        self.register_outputs({"source_disk": self.source_disk})
