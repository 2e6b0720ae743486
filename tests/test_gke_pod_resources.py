"""Every container of the serving pod asks for CPU and memory, vLLM's memory holds its in-memory /dev/shm, and
the whole pod fits one ct5lp-hightpu-1t node's allocatable share next to the node's own system pods."""

from __future__ import annotations

import copy
import json

import pytest

from components import catalog, settings
from components.gke import pod_resources, workload
from tests import program as harness
from tests.wing_values import gke_pod

GIB, MIB = pod_resources.GIB, pod_resources.MIB


def quantity(value: str) -> int:
    """Bytes (Mi, Gi) or millicores (m, or whole cores) of a quantity the manifests use."""
    for suffix, factor in (("Gi", GIB), ("Mi", MIB)):
        if value.endswith(suffix):
            return int(value.removesuffix(suffix)) * factor
    return int(value.removesuffix("m")) if value.endswith("m") else int(value) * 1000


def rendered_pod() -> dict:
    """The example stack's pod template."""
    raw = {key.split(":", 1)[1]: value for key, value in harness.gke_config().items() if key.startswith("tpu-vllm:")}
    parsed = {key: (json.loads(value) if settings.TOP_LEVEL_KEYS.get(key) else value) for key, value in raw.items()}
    pod = gke_pod(settings.load(parsed, "my-proj", "gke").settings)
    return workload.pod_template(pod, service_account="vllm", image="i@sha256:" + "a" * 64, cache_bucket="b",
                                 cache_prefix="xla/k", hash_of_config="x")["spec"]


def pod_requests(spec: dict) -> tuple[int, int]:
    """CPU millicores and memory bytes the scheduler counts for the pod, the injected FUSE sidecar included."""
    cpu = pod_resources.FUSE_SIDECAR_CPU_MILLICORES
    memory = pod_resources.FUSE_SIDECAR_MEMORY_BYTES
    for container in spec["containers"]:
        requests = container["resources"]["requests"]
        cpu += quantity(requests["cpu"])
        memory += quantity(requests["memory"])
    return cpu, memory


def fits_the_node(spec: dict, capacity: tuple[int, int] = (pod_resources.V5E_1T_CPU_MILLICORES,
                                                           pod_resources.V5E_1T_MEMORY_BYTES)) -> bool:
    cpu, memory = pod_requests(spec)
    cpu_free = pod_resources.allocatable_cpu_millicores(capacity[0]) - pod_resources.SYSTEM_PODS_CPU_MILLICORES
    memory_free = pod_resources.allocatable_memory_bytes(capacity[1]) - pod_resources.SYSTEM_PODS_MEMORY_BYTES
    return cpu <= cpu_free and memory <= memory_free


def test_gkes_reservations_give_the_published_allocatable_for_known_sizes():
    # The page's own arithmetic: a 4 GiB node keeps 1 GiB; 8 GiB keeps 1.8; 16 GiB keeps 2.6; then 6%.
    assert pod_resources.allocatable_memory_bytes(4 * GIB) == 3 * GIB - 100 * MIB
    assert pod_resources.allocatable_memory_bytes(16 * GIB) == int(16 * GIB - 2.6 * GIB) - 100 * MIB
    # CPU: 60m + 10m + 10m for the first 4 cores, then 2.5m a core.
    assert pod_resources.allocatable_cpu_millicores(4000) == 3920
    assert pod_resources.allocatable_cpu_millicores(24_000) == 24_000 - 80 - 50
    # ct5lp-hightpu-1t: ~40 GiB of 44.7 GiB.
    assert 40 * GIB < pod_resources.allocatable_memory_bytes(pod_resources.V5E_1T_MEMORY_BYTES) < 41 * GIB


def test_every_container_asks_for_cpu_and_memory_and_vllms_memory_holds_its_shm():
    spec = rendered_pod()
    for container in spec["containers"]:
        assert {"cpu", "memory"} <= set(container["resources"]["requests"]), container["name"]
    vllm = next(c for c in spec["containers"] if c["name"] == "vllm")
    shm = next(v for v in spec["volumes"] if v["name"] == "dshm")["emptyDir"]
    assert shm["medium"] == "Memory"
    assert quantity(vllm["resources"]["requests"]["memory"]) >= quantity(shm["sizeLimit"]) + 4 * GIB
    # The chip's request and limit stay equal (an extended resource); no memory limit on vLLM (unmeasured use).
    assert vllm["resources"]["requests"]["google.com/tpu"] == vllm["resources"]["limits"]["google.com/tpu"] == "1"
    assert "memory" not in vllm["resources"]["limits"] and "cpu" not in vllm["resources"]["limits"]
    for name in ("front", "metrics"):
        resources = next(c for c in spec["containers"] if c["name"] == name)["resources"]
        assert quantity(resources["limits"]["memory"]) >= quantity(resources["requests"]["memory"])


def test_the_pod_fits_one_node_next_to_the_system_pods():
    assert fits_the_node(rendered_pod())


@pytest.mark.parametrize("shape", [shape for shape in catalog.all_shapes() if shape.on_gke],
                         ids=lambda shape: shape.gke_machine_type)
def test_the_pod_fits_every_shapes_machine(shape):
    """Every catalogued machine (the catalog's vCPUs and memory, Google's VM-type tables) takes the one pod; the
    smallest, ct5lp-hightpu-1t, is the bound, and a machine of half its size would not."""
    assert fits_the_node(rendered_pod(), pod_resources.node_capacity(shape))
    assert not fits_the_node(rendered_pod(), (12_000, 24 * 10**9))


@pytest.mark.parametrize("container, field, value", [
    ("vllm", "memory", "40Gi"),   # a vLLM request that forgets the node's own reservations
    ("vllm", "cpu", "24000m"),    # the whole node's cores
])
def test_a_request_past_the_nodes_share_is_caught(container, field, value):
    spec = copy.deepcopy(rendered_pod())
    next(c for c in spec["containers"] if c["name"] == container)["resources"]["requests"][field] = value
    assert not fits_the_node(spec)
