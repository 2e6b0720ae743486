"""The XLA compile cache every replica shares: one Cloud Storage bucket in the cluster's region, mounted in each
pod by GKE's Cloud Storage FUSE CSI driver (as Google's TPU vLLM reference mounts its weights:
GoogleCloudPlatform/accelerated-platforms, use-cases/inference-ref-arch/kubernetes-manifests/
online-inference-tpu/vllm/base/deployment.yaml).

Why a bucket and not disks cloned from a snapshot: a regional bucket is reachable from every zone of
gke.nodeLocations (a disk, and its clone, is zonal, so a replica would stay in the zone it first ran in);
every replica sees what any other compiled as soon as it is written (a clone only has what the snapshot
had); and it bills for the bytes stored (~0.2 GB per configuration, the log's 197 MB), not for 50 GB per
replica.

The key: each configuration reads and writes only its own prefix, xla/<image digest>/<compile key>, and the mount
shows that prefix alone (gcsfuse `only-dir`). The prefix is housekeeping, not correctness: JAX keys every entry on
the program itself, its compile options and the jax, jaxlib and backend versions (jax-ml/jax jax/_src/cache_key.py
get(), jax-v0.11.0), so a program compiled for another configuration is never read for this one. The compile key
therefore hashes only what changes the compiled programs (COMPILED_FLAGS, COMPILED_VARIABLES, each with why): a flag
outside them (where vLLM listens, the tool and reasoning parsers, media domains) keeps the prefix and its entries.
A flag it leaves out that does change a program costs nothing wrong: JAX misses on the new program, compiles it and
writes it beside the old ones. Old prefixes are deleted by a lifecycle rule (gke.cacheRetention).

Two replicas compiling the same program write the same object name. gcsfuse publishes a file when it is closed and
the first close wins: a second mount's close then fails its generation precondition with ESTALE
(GoogleCloudPlatform/gcsfuse docs/semantics.md, "Concurrency" and "Stale File Handle Errors", v3.x), and JAX turns
a failed write into a warning (jax/_src/compiler.py _cache_write, jax-v0.11.0). Both held the same program, so the
entry that stays is complete and right either way.

Who may write: the workload's Google service account reads the bucket (objectViewer) and creates objects only under
its own configuration's prefix (objectCreator with an IAM condition on the object name); no cache entry may be
deleted or overwritten. Whoever can write a JAX compilation cache can run code in every process that reads it (JAX's
own warning: jax/_src/compilation_cache.py set_cache_dir, jax-v0.11.0), so the boundary is the configuration: each
replica of one configuration trusts the others, and none can write another's entries. With vllm.weightsOnDisk the
same account also creates, replaces and deletes objects under the checkpoint's prefix, huggingface/ (objectUser,
conditioned on that prefix: WEIGHTS_ROLE says why), which every configuration of the stack shares.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp

from components.serving.spec import COMPILE_CACHE_PATH, WEIGHTS_PATH

CSI_DRIVER = "gcsfuse.csi.storage.gke.io"
# Reads: list and get objects anywhere in the bucket (the mount lists its prefix; a list request is checked against
# the bucket, not an object name, so it cannot be narrowed by an object-name condition).
READ_ROLE = "roles/storage.objectViewer"
# Compile-cache writes: create objects, no delete and no overwrite (an overwrite needs storage.objects.delete), under
# one prefix. JAX writes each entry once, in place, with no temporary file or rename (jax/_src/lru_cache.py
# LRUCache.put: `cache_path.write_bytes(value)`, jax-v0.11.0), so creating is all it needs.
WRITE_ROLE = "roles/storage.objectCreator"
# Checkpoint writes (vllm.weightsOnDisk): huggingface_hub downloads each file to `<blob>.<id>.incomplete` and then moves
# it into place (huggingface_hub 2.4.0, requirements-vllm.txt's pin: file_download.py _download_to_tmp_and_move ->
# _chmod_and_move -> shutil.move), and gcsfuse renames a file by copying its object and deleting the old one
# (GoogleCloudPlatform/gcsfuse internal/fs/fs.go renameFile -> nonAtomicRename: CloneToChildFile, then
# DeleteChildFile; atomicRename's move removes the source as well, @005fde9e). The delete needs
# storage.objects.delete, which objectCreator lacks: objectUser holds it (with create, get, list, update and move),
# conditioned on the weights' prefix alone.
WEIGHTS_ROLE = "roles/storage.objectUser"
# Where the pods mount the bucket: the serving spec's paths (components/serving/spec.py).
MOUNT_PATH = COMPILE_CACHE_PATH
WEIGHTS_MOUNT_PATH = WEIGHTS_PATH
VOLUME = "xla-cache"
WEIGHTS_VOLUME = "hf-weights"
PREFIX = "xla"
WEIGHTS_PREFIX = "huggingface"
# The CSI driver injects its sidecar into pods that ask; "0" lifts its default limits, as Google's reference does
# (a compile writes hundreds of MB at once).
POD_ANNOTATIONS = {"gke-gcsfuse/volumes": "true", "gke-gcsfuse/cpu-limit": "0",
                   "gke-gcsfuse/memory-limit": "0", "gke-gcsfuse/ephemeral-storage-limit": "0"}


def bucket_name(resource_prefix: str, project: str) -> str:
    # Bucket names are global: the project id keeps two projects' stacks of the same name apart.
    return f"{resource_prefix}-xla-{project}"[:63].rstrip("-")


# The `vllm serve` flags that change which XLA programs compile, and why. Each is in the key.
COMPILED_FLAGS = {
    "serve": "the model (the positional argument after `serve`): its architecture and weights' shapes",
    "--dtype": "the dtype of every compiled operation",
    "--kv-cache-dtype": "the KV cache's element type, an argument of every attention program",
    "--max-model-len": "the longest sequence: page tables and the largest buckets",
    "--max-num-batched-tokens": "the token buckets the runner precompiles",
    "--max-num-seqs": "the request dimension of every batched program",
    "--tensor-parallel-size": "how each program is sharded across chips",
    "--gpu-memory-utilization": "the KV pool's size, so the shape of the KV arrays every program takes",
    "--kv-cache-memory": "the KV pool's size in bytes, as --gpu-memory-utilization",
    "--speculative-config": "the drafting and verification programs",
    "--limit-mm-per-prompt": "the multimodal encoder's budgets and the shapes profiled for them",
    "--disable-chunked-mm-input": "how multimodal inputs are scheduled into the token buckets",
    # Not read in tpu-inference's runner here: kept in the key, the safe side of not knowing.
    "--enable-prefix-caching": "unverified; may change the scheduled batch's programs",
    "--no-enable-prefix-caching": "as --enable-prefix-caching",
}
# The flags that change no compiled program, and why. A flag in neither map is treated as compiled (a new prefix is
# the safe side of not knowing); tests/test_gke_compute_class.py fails until each flag the stack renders is placed.
SERVING_ONLY_FLAGS = {
    "--host": "where the API server listens",
    "--port": "where the API server listens",
    "--enable-auto-tool-choice": "the API server's parsing of the model's text",
    "--tool-call-parser": "the API server's parsing of the model's text",
    "--reasoning-parser": "the API server's parsing of the model's text",
    "--allowed-media-domains": "which URLs the API server fetches",
    "--served-model-name": "the name the API answers to",
}
# tpu-inference's variables that change the compiled programs (tpu_inference/envs.py, 0.32.0), and why.
COMPILED_VARIABLES = {
    "ATTN_BUCKETIZED_NUM_REQS": "attention compiled at power-of-two request buckets instead of one shape",
    "SLICE_ROPE_CACHE": "the rotary cache's shape (cut to max-model-len)",
    "VLLM_TPU_BUCKET_PADDING_GAP": "the token buckets (linear steps instead of powers of two)",
}
SERVING_ONLY_VARIABLES = {
    "NUM_PRECOMPILE_WORKERS": "how many programs compile at once, not which",
    "VLLM_XLA_CHECK_RECOMPILATION": "an error on a runtime recompile, and smaller entries cached; the programs are "
                                    "the same",
    "VLLM_MEDIA_URL_ALLOW_REDIRECTS": "which URLs the API server fetches",
}


def flag_groups(serve_args: list[str]) -> list[tuple[str, list[str]]]:
    """`vllm serve MODEL --a 1 --b --c x y` as [("serve", [MODEL]), ("--a", ["1"]), ("--b", []),
    ("--c", ["x", "y"])]."""
    groups: list[tuple[str, list[str]]] = []
    for arg in serve_args:
        if arg.startswith("--") or (arg == "serve" and not groups):
            groups.append((arg, []))
        elif groups:
            groups[-1][1].append(arg)
    return groups


def flags_key(serve_args: list[str], backend_environment: dict[str, str]) -> str:
    """The compile key: the flags and tpu-inference variables that change compiled programs (any flag or variable
    not known to change none counts), in the order they are rendered."""
    parts = [part for flag, values in flag_groups(serve_args) if flag not in SERVING_ONLY_FLAGS
             for part in (flag, *values)]
    parts += [f"{name}={value}" for name, value in backend_environment.items() if name not in SERVING_ONLY_VARIABLES]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def cache_prefix(pinned_image: str, configuration_key: str) -> str:
    """xla/<manifest digest hex>/<configuration key (flags_key)>: every configuration has its own."""
    digest = pinned_image.rsplit("@sha256:", 1)[1]
    return f"{PREFIX}/{digest}/{configuration_key}"


def object_name_prefix(bucket: str, prefix: str) -> str:
    """How an IAM condition names the objects under `prefix`: projects/_/buckets/<bucket>/objects/<prefix>/
    (Cloud Storage's "IAM Conditions" resource.name format; the trailing slash keeps xla/a/b from matching
    xla/a/bc)."""
    return f"projects/_/buckets/{bucket}/objects/{prefix}/"


def prefix_expression(bucket: str, prefixes: list[str]) -> str:
    """The CEL expression that admits the objects under these prefixes of the bucket, and no other."""
    return " || ".join(f'resource.name.startsWith("{object_name_prefix(bucket, prefix)}")' for prefix in prefixes)


def write_condition(bucket: str, prefixes: list[str]) -> dict[str, str]:
    """The IAM condition that limits object creation to these prefixes of the bucket."""
    return {"title": "tpu-vllm-own-cache-prefix",
            "description": "creates objects only under this configuration's compile-cache prefix",
            "expression": prefix_expression(bucket, prefixes)}


def weights_condition(bucket: str) -> dict[str, str]:
    """The IAM condition that limits the checkpoint's writes (WEIGHTS_ROLE) to its prefix of the bucket."""
    return {"title": "tpu-vllm-weights-prefix",
            "description": "creates, replaces and deletes objects only under the shared checkpoint's prefix",
            "expression": prefix_expression(bucket, [WEIGHTS_PREFIX])}


def lifecycle_rules(retention_days: int) -> list[dict[str, Any]]:
    """Delete compile-cache objects retention_days after they were written. JAX 0.11 (the image's, through
    tpu-inference 0.32.0's pin jax==0.11.2) with no size limit writes nothing on a read (its -atime files are
    written only when jax_compilation_cache_max_size evicts: jax/_src/lru_cache.py LRUCache.get, jax-v0.11.0), so
    no object records its last use: age (since creation; Cloud Storage's lifecycle "age" condition) is the only
    measure. A configuration still in use past it recompiles once, at its next cold start, and writes its entries
    again. The weights prefix (huggingface/) is never touched."""
    return [{"action": {"type": "Delete"},
             "condition": {"age": retention_days, "matches_prefixes": [f"{PREFIX}/"]}}]


def mount_options(only_dir: str) -> str:
    # implicit-dirs: the JAX cache writes files under directories it never creates as objects.
    return f"implicit-dirs,only-dir={only_dir}"


def csi_volume(name: str, bucket: pulumi.Input[str], options: pulumi.Input[str]) -> dict[str, Any]:
    return {"name": name, "csi": {"driver": CSI_DRIVER, "volumeAttributes": {
        "bucketName": bucket, "mountOptions": options,
        # No grant holds storage.buckets.get (objectViewer, objectCreator and objectUser are object roles): the
        # driver's own bucket check would fail without this.
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
    retention_days: int
    """gke.cacheRetention in whole days: compile-cache objects are deleted this long after they were written."""
    workload_service_account_email: pulumi.Input[str]
    """The pods' Google identity: reads the bucket, creates objects under its own prefixes only."""
    write_prefixes: pulumi.Input[list[str]]
    """The prefixes the pods may create objects under: this configuration's (cache_prefix())."""
    weights_on_disk: bool
    """vllm.weightsOnDisk: the pods also create, replace and delete objects under WEIGHTS_PREFIX (WEIGHTS_ROLE)."""
    labels: dict[str, str]
    """The stack's labels, on the bucket."""
    services: list[pulumi.Resource]
    """The project's APIs (Cloud Storage's among them): the bucket waits for them."""


class CompileCache(pulumi.ComponentResource):
    """The bucket (region of the cluster, uniform access, public access prevented, no soft-delete copies billed,
    old entries deleted) and the workload identity's grants on it: read everywhere, create under its prefix, and
    with weights on disk, write the checkpoint's prefix."""

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
            lifecycle_rules=lifecycle_rules(args.retention_days),
            force_destroy=not keep,
            labels=args.labels,
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=keep, depends_on=args.services),
        )
        member = pulumi.Output.concat("serviceAccount:", args.workload_service_account_email)
        gcp.storage.BucketIAMMember(
            f"{name}-object-viewer", bucket=bucket.name, role=READ_ROLE, member=member,
            opts=pulumi.ResourceOptions(parent=self))
        # A new prefix (a new image or compile key) is a new condition: the grant is replaced, the new one created
        # first, so the new configuration's pods can write before the old grant goes.
        gcp.storage.BucketIAMMember(
            f"{name}-prefix-writer", bucket=bucket.name, role=WRITE_ROLE, member=member,
            condition=pulumi.Output.all(bucket.name, args.write_prefixes).apply(
                lambda values: write_condition(values[0], list(values[1]))),
            opts=pulumi.ResourceOptions(parent=self))
        if args.weights_on_disk:
            gcp.storage.BucketIAMMember(
                f"{name}-weights-writer", bucket=bucket.name, role=WEIGHTS_ROLE, member=member,
                condition=bucket.name.apply(weights_condition), opts=pulumi.ResourceOptions(parent=self))
        self.bucket = bucket.name
        self.register_outputs({"bucket": self.bucket})
