"""What each serving pod asks of its node: CPU and memory requests (and limits where they are sound), sized so
one pod fits the allocatable share of one ct5lp-hightpu-1t node next to the node's own system pods.

The node: ct5lp-hightpu-1t, 24 vCPU and 48 GB (Google's TPU v5e machine table; GKE's TPU page). GKE reserves part
of every node for the kubelet, the runtime and the OS, and 100 MiB as the eviction threshold; what is left is the
node's allocatable (GKE's "Plan GKE node sizes", "Node allocatable resources", "Memory and CPU reservations"):
memory 25% of the first 4 GiB, 20% of the next 4, 10% of the next 8, 6% of the next 112, 2% above 128 GiB;
CPU 6% of the first core, 1% of the next, 0.5% of the next 2, 0.25% of every core above 4.
"""

from __future__ import annotations

from dataclasses import dataclass

from components import catalog

MIB = 1024**2
GIB = 1024**3

# Each TPU machine's vCPUs and memory are the catalog's (components/catalog/shapes.py, Google's VM-type tables;
# "48 GB" counted as 10^9 bytes: the smaller reading, so the fit holds whichever GCE means). The smallest host,
# ct5lp-hightpu-1t (24 vCPU, 48 GB), bounds the pod: one size fits every shape's node.
_SMALLEST = catalog.shape("v5litepod-1")
V5E_1T_CPU_MILLICORES = _SMALLEST.host_vcpus * 1000
V5E_1T_MEMORY_BYTES = _SMALLEST.host_memory_bytes


def node_capacity(shape: catalog.Shape) -> tuple[int, int]:
    """(millicores, bytes) of the shape's GKE machine."""
    return shape.host_vcpus * 1000, shape.host_memory_bytes

# GKE's reservations: (size of the band, share reserved), in order.
MEMORY_BANDS = ((4 * GIB, 0.25), (4 * GIB, 0.20), (8 * GIB, 0.10), (112 * GIB, 0.06), (None, 0.02))
CPU_BANDS = ((1000, 0.06), (1000, 0.01), (2000, 0.005), (None, 0.0025))
EVICTION_THRESHOLD_BYTES = 100 * MIB


def _reserved(total: float, bands: tuple[tuple[float | None, float], ...]) -> float:
    reserved, left = 0.0, total
    for size, share in bands:
        part = left if size is None else min(left, size)
        reserved += part * share
        left -= part
        if left <= 0:
            break
    return reserved


def allocatable_memory_bytes(capacity_bytes: int) -> int:
    return int(capacity_bytes - _reserved(capacity_bytes, MEMORY_BANDS) - EVICTION_THRESHOLD_BYTES)


def allocatable_cpu_millicores(capacity_millicores: int) -> int:
    return int(capacity_millicores - _reserved(capacity_millicores, CPU_BANDS))


# What else runs on a TPU node, not measured here (no node to look at): the DaemonSets a GKE node carries with
# this stack's add-ons (Dataplane V2, logging and metrics agents, the TPU device plugin, the Cloud Storage FUSE and
# Secret Manager CSI node plugins, Managed Prometheus's collector). An allowance, kept apart from the pod's share.
SYSTEM_PODS_CPU_MILLICORES = 1500
SYSTEM_PODS_MEMORY_BYTES = 3 * GIB
# The Cloud Storage FUSE CSI driver injects a sidecar into the pod with its own default requests (250m CPU,
# 256Mi memory; GKE's "Configure resources for the sidecar container"); the stack lifts its limits only
# (compile_cache.POD_ANNOTATIONS), so the defaults are what the scheduler counts.
FUSE_SIDECAR_CPU_MILLICORES = 250
FUSE_SIDECAR_MEMORY_BYTES = 256 * MIB


@dataclass(frozen=True)
class ContainerSize:
    cpu_millicores: int
    memory_bytes: int
    memory_limit_bytes: int | None = None
    """A memory limit only where the container's use is bounded and known (nginx); vLLM's host memory is not
    measured in the log, so a limit there could only turn a load spike into an OOM kill."""

    def resources(self) -> dict[str, dict[str, str]]:
        out = {"requests": {"cpu": f"{self.cpu_millicores}m", "memory": f"{self.memory_bytes // MIB}Mi"}}
        if self.memory_limit_bytes is not None:
            out["limits"] = {"memory": f"{self.memory_limit_bytes // MIB}Mi"}
        return out


# vLLM's process: the API server, the tokenizer, the engine core and the JAX runtime on the host. Not measured in
# the log; an allowance of a sixth of the node.
VLLM_PROCESS_MEMORY_BYTES = 8 * GIB
# A third of the node's cores: tokenization, detokenization and the scheduler run on the host between TPU steps,
# and nothing else on the node needs them. No CPU limit: throttling would only slow those steps down.
VLLM_CPU_MILLICORES = 8000
FRONT = ContainerSize(cpu_millicores=250, memory_bytes=128 * MIB, memory_limit_bytes=256 * MIB)
METRICS_DOOR = ContainerSize(cpu_millicores=50, memory_bytes=32 * MIB, memory_limit_bytes=64 * MIB)


def vllm_size(shm_bytes: int) -> ContainerSize:
    """The memory-medium /dev/shm is a tmpfs whose pages count against the memory of the container that writes
    them (kubernetes/website content/en/docs/concepts/storage/volumes.md, "emptyDir": "files you write count
    against the memory limit of the container that wrote them"): vLLM writes the checkpoint there, so its request
    holds the whole volume plus its own process."""
    return ContainerSize(cpu_millicores=VLLM_CPU_MILLICORES, memory_bytes=shm_bytes + VLLM_PROCESS_MEMORY_BYTES)

