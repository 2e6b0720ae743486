"""The persistent disk that keeps the XLA compile cache across nodes (cold 857 s, warm 497 s).

Its name is fixed per stack. With cache.keepOnDestroy, `pulumi destroy` leaves it (retain_on_delete), and
the next `pulumi up` has no disk in state: it looks the name up (gcp.compute.get_disk) and adopts a disk
that carries this stack's labels (the `import` option) instead of creating one, which GCP would refuse
with 409 alreadyExists. A disk of that name without this stack's labels is someone else's: stop and say so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_gcp as gcp

from components.core import lookup_answers
from components.settings.findings import Finding


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


COMPUTE_API = "compute.googleapis.com"

# Hyperdisk Balanced (v6e's data disk) bills IOPS above 3,000 and throughput above 140 MiB/s on top of capacity
# ("Hyperdisk Balanced volumes include, at no extra charge, up to 3,000 IOPS and 140 MiB/s of throughput":
# cloud.google.com/compute/docs/disks/hd-types/hyperdisk-balanced, Baseline performance), and a volume created
# without them gets Compute Engine's size-dependent defaults. The stack states the free baseline, so the disk
# bills its capacity only: far more than a 197 MB compile cache needs. pulumi-gcp 10.2.0 compute.Disk takes them as
# provisioned_iops / provisioned_throughput (terraform-provider-google's google_compute_disk, magic-modules
# mmv1/products/compute/Disk.yaml provisionedIops, provisionedThroughput: default_from_api, updatable in place on
# hyperdisk); Persistent Disk types take neither.
HYPERDISK_BASELINE = {"hyperdisk-balanced": {"provisioned_iops": 3000, "provisioned_throughput": 140}}


def disk_id(project: str, zone: str, name: str) -> str:
    """The id pulumi-gcp gives a compute.Disk (its import id, and the id its data source reads), so an
    adopted disk and one the stack made carry the same id: the engine imports only when the id in state
    differs from it (pulumi pkg/resource/deploy/step_generator.go, generateSteps: `isImport`)."""
    return f"projects/{project}/zones/{zone}/disks/{name}"


def existing_disk(args: CacheDiskArgs) -> Any | None:
    """The disk of this name as GCP has it, or None when there is none. A read only; runs in previews too.

    Absence is pulumi-gcp's own "{id} not found" (components/core/lookup_answers.py). A project whose Compute API
    is not enabled yet (a new one: this lookup runs before the stack enables it, as an invoke waits for
    nothing) cannot hold a kept disk either. Any other failure stops the deploy before anything is made.
    """
    try:
        found = gcp.compute.get_disk(project=args.project, zone=args.zone, name=args.name)
    except Exception as error:  # noqa: BLE001 - judged by the provider's own words below
        if lookup_answers.is_not_found(error, disk_id(args.project, args.zone, args.name)):
            return None
        if lookup_answers.disabled_service(error) == COMPUTE_API:
            pulumi.log.info(f"cache disk {args.name}: the Compute API is not enabled in project {args.project} "
                            "yet, so no kept disk can exist; this deploy enables it and creates the disk")
            return None
        hint = ("; the deployer needs compute.disks.get (roles/compute.viewer)"
                if "googleapi: Error 403" in str(error) else "")
        raise pulumi.RunError(
            f"cache disk {args.name}: could not look it up in project {args.project}, zone {args.zone} "
            f"({lookup_answers.reason(error)}){hint}") from None
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
    refused = kept_disk_refusal(args, found)
    if refused:
        raise pulumi.RunError(refused.render())
    # Since pulumi 3.174 an import only reads; the engine then diffs the imported state like any other
    # (pkg/resource/deploy/step_generator.go, continueStepsFromImport): labels and a larger size are
    # updates in place. Once in state, the id matches and there is no import at all.
    return disk_id(args.project, args.zone, args.name)


def kept_disk_refusal(args: CacheDiskArgs, found: Any) -> Finding | None:
    """What the engine would refuse only at `up`, after the preview: a diff that replaces a resource still
    imported by id ("previously-imported resources that still specify an ID may not be replaced", a
    warning at preview, an error at up: step_generator.go). For a disk, `type` forces a replacement
    (terraform-provider-google resource_compute_disk.go: ForceNew) and so does a smaller `size` (a disk
    only grows: `customdiff.ForceNewIfChange("size", IsDiskShrinkage)`, v7.45.0). Said here, before anything is
    created."""
    where = f"--zone={args.zone} --project={args.project}"
    delete = f"gcloud compute disks delete {args.name} {where}"
    size = getattr(found, "size", None)
    if isinstance(size, int) and args.size_gb < size:
        return Finding(
            "cache.sizeGb", args.size_gb,
            f"the kept cache disk {args.name} is {size} GB, and a disk only grows: adopting it at "
            f"{args.size_gb} GB would replace it, which Pulumi refuses for an adopted disk",
            f"set it to {size} or more (pulumi config set --path 'tpu-vllm:cache.sizeGb' {size}), or delete the "
            f"disk to start with a cold cache ({delete})")
    disk_type = getattr(found, "type", None)
    if disk_type and disk_type.rsplit("/", 1)[-1] != args.disk_type:
        return Finding(
            "cache.diskType", args.disk_type,
            f"the kept cache disk {args.name} is {disk_type.rsplit('/', 1)[-1]}; a disk's type cannot change, so "
            "adopting it would replace it, which Pulumi refuses for an adopted disk",
            f"delete the disk to start with a cold cache ({delete})")
    return None


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
            **HYPERDISK_BASELINE.get(args.disk_type, {}),
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=args.keep_on_destroy, import_=import_id),
        )
        self.source_disk = pulumi.Output.concat(
            "projects/", args.project, "/zones/", args.zone, "/disks/", self.disk.name
        )
        self.register_outputs({"source_disk": self.source_disk})
