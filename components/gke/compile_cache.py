"""The XLA compile cache every replica shares: one Cloud Storage bucket in the cluster's region, mounted in each
pod by GKE's Cloud Storage FUSE CSI driver (as Google's TPU vLLM reference mounts its weights:
GoogleCloudPlatform/accelerated-platforms, use-cases/inference-ref-arch/kubernetes-manifests/
online-inference-tpu/vllm/base/deployment.yaml).

Why a bucket and not disks cloned from a snapshot: a regional bucket is reachable from every zone of
gke.nodeLocations (a disk, and its clone, is zonal, so a replica would stay in the zone it first ran in);
every replica sees what any other compiled as soon as it is written (a clone only has what the snapshot
had); and it bills for the bytes stored (~0.2 GB per configuration, the log's 197 MB), not for 50 GB per
replica.

The key: each configuration reads and writes only its own prefix, xla/<image digest>/<serve flags hash>, and
the mount shows that prefix alone (gcsfuse `only-dir`). A new image or a changed `vllm serve` flag is a new,
empty prefix: it compiles cold once, then every replica of it starts warm. Two replicas compiling the same
program write the same object name; Cloud Storage makes each upload whole or not at all, the last one wins,
and both carry the same program (same image, same flags), so a reader sees a complete entry either way.

The identity: the workload's own Google service account (Workload Identity), granted roles/storage.objectUser
on this bucket only: read, create and delete objects, nothing on other buckets, no project role.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp

CSI_DRIVER = "gcsfuse.csi.storage.gke.io"
GRANT_ROLE = "roles/storage.objectUser"
MOUNT_PATH = "/var/cache/tpu-vllm/xla"
WEIGHTS_MOUNT_PATH = "/var/cache/tpu-vllm/huggingface"
VOLUME = "xla-cache"
WEIGHTS_VOLUME = "hf-weights"
PREFIX = "xla"
WEIGHTS_PREFIX = "huggingface"
# The measured cache of one configuration (build log: "The JAX compile cache lives there (197 MB measured)").
MEASURED_CACHE_GB = 0.197
# The CSI driver injects its sidecar into pods that ask; "0" lifts its default limits, as Google's reference does
# (a compile writes hundreds of MB at once).
POD_ANNOTATIONS = {"gke-gcsfuse/volumes": "true", "gke-gcsfuse/cpu-limit": "0",
                   "gke-gcsfuse/memory-limit": "0", "gke-gcsfuse/ephemeral-storage-limit": "0"}


def bucket_name(resource_prefix: str, project: str) -> str:
    # Bucket names are global: the project id keeps two projects' stacks of the same name apart.
    return f"{resource_prefix}-xla-{project}"[:63].rstrip("-")


def flags_key(serve_args: list[str], backend_environment: dict[str, str]) -> str:
    """What changes the compiled programs besides the image: the whole `vllm serve` command, and tpu-inference's
    variables when any is set (the padding gap and the attention buckets change which programs compile)."""
    parts = [*serve_args, *(f"{name}={value}" for name, value in backend_environment.items())]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def cache_prefix(pinned_image: str, configuration_key: str) -> str:
    """xla/<manifest digest hex>/<configuration key (flags_key)>: every configuration has its own."""
    digest = pinned_image.rsplit("@sha256:", 1)[1]
    return f"{PREFIX}/{digest}/{configuration_key}"


def mount_options(only_dir: str) -> str:
    # implicit-dirs: the JAX cache writes files under directories it never creates as objects.
    return f"implicit-dirs,only-dir={only_dir}"


def csi_volume(name: str, bucket: pulumi.Input[str], options: pulumi.Input[str]) -> dict[str, Any]:
    return {"name": name, "csi": {"driver": CSI_DRIVER, "volumeAttributes": {
        "bucketName": bucket, "mountOptions": options,
        # The grant is objectUser (no storage.buckets.get): the driver's own bucket check would fail without it.
        "skipCSIBucketAccessCheck": "true"}}}


@dataclass
class CompileCacheArgs:
    project: str
    """The project that owns the bucket."""
    bucket_name: str
    """The bucket's global name (bucket_name())."""
    location: str
    """The bucket's location: the cluster's region, upper case (e.g. US-WEST4)."""
    keep_on_destroy: bool
    """cache.keepOnDestroy: the bucket and its entries outlive `pulumi destroy` (retained, not force-destroyed)."""
    workload_service_account_email: pulumi.Input[str]
    """The pods' Google identity; gets the one bucket-level grant."""
    labels: dict[str, str]
    """The stack's labels, on the bucket."""
    services: list[pulumi.Resource]
    """The project's APIs (Cloud Storage's among them): the bucket waits for them."""


class CompileCache(pulumi.ComponentResource):
    """The bucket (region of the cluster, uniform access, public access prevented, no soft-delete copies billed)
    and the workload identity's objectUser grant on it."""

    bucket: pulumi.Output[str]

    def __init__(self, name: str, args: CompileCacheArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-vllm:gke:CompileCache", name, None, opts)
        keep = args.keep_on_destroy
        bucket = gcp.storage.Bucket(
            name,
            project=args.project,
            name=args.bucket_name,
            location=args.location,
            storage_class="STANDARD",
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            # A recompile is the cost of a lost entry; keeping deleted ones 7 days (the default) would bill them.
            soft_delete_policy={"retention_duration_seconds": 0},
            force_destroy=not keep,
            labels=args.labels,
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=keep, depends_on=args.services),
        )
        gcp.storage.BucketIAMMember(
            f"{name}-object-user",
            bucket=bucket.name,
            role=GRANT_ROLE,
            member=pulumi.Output.concat("serviceAccount:", args.workload_service_account_email),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.bucket = bucket.name
        self.register_outputs({"bucket": self.bucket})
