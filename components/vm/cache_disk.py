"""The persistent disk that keeps the XLA compile cache across nodes (cold 857 s, warm 497 s).

Its name is fixed per stack. With cache.keepOnDestroy, `pulumi destroy` leaves it (retain_on_delete), and
the next `pulumi up` has no disk in state: it looks the name up (gcp.compute.get_disk) and adopts a disk
that carries this stack's labels (the `import` option) instead of creating one, which GCP would refuse
with 409 alreadyExists. A disk of that name without this stack's labels is someone else's: stop and say so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

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
    owner_labels: dict[str, str] = field(default_factory=dict)
    """The labels that mark a disk as this stack's (app, stack): one that has them is adopted."""


# How the provider's data source reports a disk that is not there (the Compute API's 404).
NOT_FOUND = re.compile(r"\b404\b|notFound|was not found", re.IGNORECASE)


def disk_id(project: str, zone: str, name: str) -> str:
    """The id pulumi-gcp gives a compute.Disk (its import id too), so an adopted disk and one the stack made
    carry the same id: the engine imports only when the id in state differs from it
    (pulumi pkg/resource/deploy/step_generator.go, generateSteps: `isImport`)."""
    return f"projects/{project}/zones/{zone}/disks/{name}"


def existing_disk(args: CacheDiskArgs) -> Any | None:
    """The disk of this name as GCP has it, or None when there is none. A read only; runs in previews too."""
    try:
        found = gcp.compute.get_disk(project=args.project, zone=args.zone, name=args.name)
    except Exception as error:  # the provider's own text says what went wrong
        if NOT_FOUND.search(str(error)):
            return None
        raise pulumi.RunError(
            f"cache disk {args.name}: could not look it up in project {args.project}, zone {args.zone} "
            f"({error}); the deployer needs compute.disks.get (roles/compute.viewer)") from None
    return found if getattr(found, "name", None) else None


def adoption(args: CacheDiskArgs, found: Any | None) -> str | None:
    """The import id when an existing disk carries this stack's labels; None to create one.

    Raises a RunError, before anything is created, for a disk of that name that is not this stack's.
    """
    if found is None:
        return None
    where = f"--zone={args.zone} --project={args.project}"
    labels = dict(getattr(found, "labels", None) or {})
    if any(labels.get(key) != value for key, value in args.owner_labels.items()):
        wanted = ",".join(f"{key}={value}" for key, value in args.owner_labels.items())
        shown = ", ".join(f"{key}={value}" for key, value in sorted(labels.items())) or "none"
        raise pulumi.RunError(
            f"cache disk {args.name} already exists in {args.zone} and is not this stack's (its labels: {shown}; "
            f"this stack's: {wanted}). Choose one: delete it if nothing needs it (gcloud compute disks delete "
            f"{args.name} {where}); or, if it is this stack's warm cache from before, label it so the next "
            f"pulumi up adopts it (gcloud compute disks add-labels {args.name} --labels={wanted} {where}); or "
            "deploy under another stack name, which names its own disk")
    # Pulumi imports only when the inputs match the disk (size, type, labels); otherwise it stops and names
    # the property that differs (docs/lifecycle.md). Once in state, the id matches and a change is an update.
    return disk_id(args.project, args.zone, args.name)


class CacheDisk(pulumi.ComponentResource):
    """A zonal disk, independent of the node, so flex-start expiry does not take the cache with it."""

    disk: gcp.compute.Disk
    source_disk: pulumi.Output[str]
    """projects/<p>/zones/<z>/disks/<name>: what the queued resource attaches."""
    adopted: bool
    """The disk existed with this stack's labels and is imported rather than created."""

    def __init__(self, name: str, args: CacheDiskArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-vllm:storage:CacheDisk", name, None, opts)
        import_id = adoption(args, existing_disk(args))
        self.adopted = import_id is not None
        if self.adopted:
            pulumi.log.info(f"cache disk {args.name} exists with this stack's labels (kept by an earlier "
                            "destroy): adopting it and its warm compile cache", self)
        self.disk = gcp.compute.Disk(
            f"{name}-disk",
            project=args.project,
            zone=args.zone,
            name=args.name,
            type=args.disk_type,
            size=args.size_gb,
            labels=args.labels,
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=args.keep_on_destroy, import_=import_id),
        )
        self.source_disk = pulumi.Output.concat(
            "projects/", args.project, "/zones/", args.zone, "/disks/", self.disk.name
        )
        self.register_outputs({"source_disk": self.source_disk})
