"""Memory and cost arithmetic for one TPU chip, from the build log's measurements.

Pure functions and data, no Pulumi imports: the plan, the outputs, the settings
warnings and the benchmark all read the same numbers from here.
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024**3

# HBM the runtime reports on one v5e chip ("total_hbm_limit_gb=15.75GiB"); size
# against this, never the 16 GB marketing figure.
V5E_HBM_BYTES = int(15.75 * GIB)

# Everything outside --gpu-memory-utilization's cap; compiled XLA programs live
# here, which is why 0.95 dies at XLA program allocation.
HIGHEST_BOOTING_GPU_MEMORY_UTILIZATION = 0.92
FAILING_GPU_MEMORY_UTILIZATION = 0.95

# Pallas keeps blocks per request constant as max-model-len grows.
BLOCKS_PER_REQUEST = 512

# "keep clients x context < 250,000 tokens - about 78% of the KV pool".
KV_LOAD_RULE_OF_THUMB = 0.78

# Cold and warm boot, seconds (the log's final configuration).
COLD_BOOT_SECONDS = 857
WARM_BOOT_SECONDS = 497

# USD per chip-hour, Cloud Billing Catalog, us-west4 (the log's cost table).
USD_PER_CHIP_HOUR = {
    "spot": 0.5779,
    "flex-start": 0.6000,
    "on-demand": 1.2000,
    "1-year": 0.8400,
    "3-year": 0.5400,
}

# A forgotten weekend on a node that never stops itself (the log: 60 h).
FORGOTTEN_WEEKEND_HOURS = 60

# USD per provisioned GB-month of zonal disk in us-west4, from the Cloud Billing Catalog as
# compiled in github.com/Cyclenerd/google-cloud-pricing-cost-calculator pricing.yml
# (compute.storage.*.cost.us-west4.month; generated 2025-03-06, commit 0166a59e).
# A disk bills for its provisioned size, per second, from creation until it is deleted:
# whether or not a node is attached, whether or not a run is active.
USD_PER_GB_MONTH = {
    "pd-balanced": 0.11,
}

# USD per active secret version per month (cloud.google.com/secret-manager/pricing: $0.06 per
# version and location, automatic replication billed as one location; the first 6 active
# versions a month are free per billing account). Versions bill until destroyed, run or no run.
USD_PER_SECRET_VERSION_MONTH = 0.06
FREE_SECRET_VERSIONS_PER_MONTH = 6

# The billing month the per-month prices assume (Google prorates them by the second;
# the same catalog's monthly instance prices are its hourly ones x 730).
HOURS_PER_MONTH = 730


@dataclass(frozen=True)
class KvLayerGroup:
    """Layers that own a KV cache and share one geometry."""

    layers: int
    kv_heads: int
    head_dim: int


@dataclass(frozen=True)
class ModelGeometry:
    """What the KV and memory arithmetic needs to know about one checkpoint."""

    weights_bytes: int
    kv_layer_groups: tuple[KvLayerGroup, ...]
    kv_element_bytes: int
    # The largest single multimodal item, in tokens; with chunked multimodal
    # input disabled, max-num-batched-tokens must be at least this.
    max_tokens_per_mm_item: int | None
    num_key_value_heads: int
    # The longest context the checkpoint supports (config.json max_position_embeddings); vLLM
    # refuses a larger --max-model-len ("User-specified max_model_len ... is greater than the
    # derived max_model_len"). None: not known.
    max_context_tokens: int | None = None


# gemma-4-E2B-it (the log's config table): 35 layers, 20 KV-shared, so 15 own a
# cache: 12 sliding at head_dim 256 and 3 full-attention at 512, one KV head.
# weights_bytes is the measured cap (0.92 x 15.75 GiB) minus the measured
# 5,923,602,432-byte KV pool, i.e. the "8.97 GiB" of the boot log unrounded.
GEMMA_4_E2B_IT = ModelGeometry(
    weights_bytes=int(V5E_HBM_BYTES * 0.92) - 5_923_602_432,
    kv_layer_groups=(
        KvLayerGroup(layers=12, kv_heads=1, head_dim=256),
        KvLayerGroup(layers=3, kv_heads=1, head_dim=512),
    ),
    kv_element_bytes=2,
    max_tokens_per_mm_item=2496,
    num_key_value_heads=1,
    # text_config.max_position_embeddings = 131072 in google/gemma-4-E2B-it's config.json
    # (Google's model card: 128K context for E2B and E4B).
    max_context_tokens=131_072,
)

MODEL_GEOMETRIES: dict[str, ModelGeometry] = {"google/gemma-4-E2B-it": GEMMA_4_E2B_IT}


def geometry_for(model: str) -> ModelGeometry | None:
    """The measured geometry of a model, or None: an unknown model gets no numbers."""
    return MODEL_GEOMETRIES.get(model)


def kv_bytes_per_token(geometry: ModelGeometry) -> int:
    """K and V for every cache-owning layer, at the geometry's own head_dim."""
    return sum(
        group.layers * group.kv_heads * 2 * group.head_dim * geometry.kv_element_bytes
        for group in geometry.kv_layer_groups
    )


def hbm_cap_bytes(gpu_memory_utilization: float, hbm_bytes: int = V5E_HBM_BYTES) -> int:
    """What the engine may allocate for weights and KV."""
    return int(hbm_bytes * gpu_memory_utilization)


def outside_cap_bytes(gpu_memory_utilization: float, hbm_bytes: int = V5E_HBM_BYTES) -> int:
    """HBM the knob does not govern: compiled XLA programs come out of this."""
    return hbm_bytes - hbm_cap_bytes(gpu_memory_utilization, hbm_bytes)


def kv_pool_bytes(geometry: ModelGeometry, gpu_memory_utilization: float) -> int:
    return hbm_cap_bytes(gpu_memory_utilization) - geometry.weights_bytes


def block_size_for(max_model_len: int) -> int:
    """The block size the Pallas backend picks: 512 blocks per request, power of two."""
    return max(16, next_power_of_two(-(-max_model_len // BLOCKS_PER_REQUEST)))


def next_power_of_two(value: int) -> int:
    """The compiled bucket a token budget really runs as."""
    return 1 if value <= 1 else 1 << (value - 1).bit_length()


# tpu-inference's smallest token bucket (MIN_TOKEN_BUCKET in tpu_inference/envs.py; the runner takes the
# larger of it and the KV packing, which is 2 for bf16): every token-count shape starts here.
MIN_TOKEN_BUCKET = 16


def token_buckets(max_num_batched_tokens: int, padding_gap: int = 0) -> tuple[int, ...]:
    """The token-count shapes tpu-inference precompiles for a step (get_token_paddings in
    tpu_inference/runner/utils.py): doubling from 16 until the budget is covered; with
    VLLM_TPU_BUCKET_PADDING_GAP, doubling only up to the gap, then one gap at a time."""
    size, ladder = MIN_TOKEN_BUCKET, []
    if padding_gap == 0:
        ladder.append(size)
        while size < max_num_batched_tokens:
            size *= 2
            ladder.append(size)
        return tuple(ladder)
    while size <= padding_gap:
        ladder.append(size)
        size *= 2
    size //= 2
    while size < max_num_batched_tokens:
        size += padding_gap
        ladder.append(size)
    return tuple(ladder)


def compiled_bucket(tokens: int, buckets: tuple[int, ...]) -> int:
    """The shape a step of `tokens` tokens runs as: the first bucket that holds it."""
    return next(bucket for bucket in buckets if bucket >= tokens)


@dataclass(frozen=True)
class KvBudget:
    kv_bytes_per_token: int
    hbm_cap_bytes: int
    kv_pool_bytes: int
    outside_cap_bytes: int
    block_size: int
    kv_blocks: int
    kv_tokens: int
    max_model_len: int = 0

    @property
    def blocks_per_request(self) -> int:
        """What the block size holds constant (512): a longer context takes bigger blocks, not more."""
        return -(-self.max_model_len // self.block_size)

    @property
    def load_limit_tokens(self) -> int:
        """clients x context above this costs tail latency, not throughput."""
        return int(self.kv_tokens * KV_LOAD_RULE_OF_THUMB)


def kv_budget(
    geometry: ModelGeometry,
    gpu_memory_utilization: float,
    max_model_len: int,
    kv_pool_override_bytes: int | None = None,
) -> KvBudget:
    """Whole blocks only: the engine allocates the pool in blocks of block_size tokens."""
    per_token = kv_bytes_per_token(geometry)
    pool = kv_pool_override_bytes or kv_pool_bytes(geometry, gpu_memory_utilization)
    block_size = block_size_for(max_model_len)
    blocks = max(pool, 0) // (per_token * block_size)
    return KvBudget(
        kv_bytes_per_token=per_token,
        hbm_cap_bytes=hbm_cap_bytes(gpu_memory_utilization),
        kv_pool_bytes=pool,
        outside_cap_bytes=outside_cap_bytes(gpu_memory_utilization),
        block_size=block_size,
        kv_blocks=blocks,
        kv_tokens=blocks * block_size,
        max_model_len=max_model_len,
    )


def cost_per_hour_usd(pricing: str, chips: int = 1) -> float:
    return USD_PER_CHIP_HOUR[pricing] * chips


def max_spend_usd(pricing: str, run_seconds: int, chips: int = 1) -> float:
    """The most one run can cost before its run duration stops it."""
    return cost_per_hour_usd(pricing, chips) * run_seconds / 3600


def usd_per_million_output_tokens(pricing: str, output_tokens_per_second: float) -> float:
    return cost_per_hour_usd(pricing) / (output_tokens_per_second * 3600) * 1_000_000


def forgotten_weekend_usd(pricing: str) -> float:
    return cost_per_hour_usd(pricing) * FORGOTTEN_WEEKEND_HOURS


def disk_usd_per_month(disk_type: str, size_gb: int) -> float:
    """What the compile-cache disk costs every month it exists, run or no run."""
    return USD_PER_GB_MONTH[disk_type] * size_gb


def disk_usd_for_seconds(disk_type: str, size_gb: int, seconds: int) -> float:
    """The disk's share of a period, e.g. of one run."""
    return disk_usd_per_month(disk_type, size_gb) * seconds / (HOURS_PER_MONTH * 3600)


def cache_disk_billing(disk_type: str, size_gb: int, keep_on_destroy: bool, *, disk_name: str, zone: str,
                       project: str) -> str:
    """One sentence on what the disk costs and when that stops (the stack output and the plan)."""
    text = (f"{disk_type} {size_gb} GB x ${USD_PER_GB_MONTH[disk_type]}/GB-month = "
            f"${disk_usd_per_month(disk_type, size_gb):.2f}/month from creation until deleted, "
            "whether or not a run is active")
    if keep_on_destroy:
        return (f"{text}; cache.keepOnDestroy is set, so it outlives pulumi destroy and bills on until you "
                f"delete it: gcloud compute disks delete {disk_name} --zone={zone} --project={project}")
    return f"{text}; pulumi destroy deletes it"


def max_spend_with_disk_usd(pricing: str, run_seconds: int, disk_type: str, size_gb: int) -> float:
    """One run at most, TPU and the cache disk's share of those hours (the disk bills on after it)."""
    return max_spend_usd(pricing, run_seconds) + disk_usd_for_seconds(disk_type, size_gb, run_seconds)


def gib(value_bytes: int) -> float:
    return value_bytes / GIB


# --- GKE (the scale-out platform) -------------------------------------------------------------
# TPU chips in a GKE node pool bill at the same per-chip-hour rates as above (USD_PER_CHIP_HOUR):
# ct5lp-hightpu-1t is one v5e chip and its host; GKE adds no charge per TPU node.

# GKE Standard cluster management fee, USD per cluster-hour, whatever the size or topology
# (cloud.google.com/kubernetes-engine/pricing). The free tier ($74.40 a month per billing account)
# covers one zonal cluster; the plan counts the fee anyway, since that credit may already be in use.
GKE_CLUSTER_FEE_USD_PER_HOUR = 0.10

# Every GKE node's boot disk (the system pool's and the ComputeClass's TPU nodes'): GKE's default, written out in
# the stack so the costs price exactly what runs (pd-balanced at USD_PER_GB_MONTH: $11 a month per node).
GKE_BOOT_DISK_GB = 100
GKE_BOOT_DISK_TYPE = "pd-balanced"

# The CPU system pool (kube-system, the metrics adapter, Managed Prometheus collectors), on-demand
# USD per node-hour in us-west4: E2 predefined, $0.024553/vCPU-h + $0.003291/GiB-h
# (cloud.google.com/compute/vm-instance-pricing, us-west4). Only machine types priced here are accepted.
E2_USD_PER_VCPU_HOUR = 0.024553
E2_USD_PER_GIB_HOUR = 0.003291
SYSTEM_MACHINE_SHAPES = {"e2-standard-2": (2, 8), "e2-standard-4": (4, 16)}  # vCPUs, GiB


def system_machine_usd_per_hour(machine_type: str) -> float:
    vcpus, gib = SYSTEM_MACHINE_SHAPES[machine_type]
    return vcpus * E2_USD_PER_VCPU_HOUR + gib * E2_USD_PER_GIB_HOUR


@dataclass(frozen=True)
class GkeCost:
    """What a GKE deployment costs per hour with `chips` TPU nodes up."""

    chips: int
    chips_usd_per_hour: float
    cluster_fee_usd_per_hour: float
    system_pool_usd_per_hour: float

    @property
    def baseline_usd_per_hour(self) -> float:
        """Paid while the cluster exists, even with no TPU node: the fee and the system pool."""
        return self.cluster_fee_usd_per_hour + self.system_pool_usd_per_hour

    @property
    def total_usd_per_hour(self) -> float:
        return self.chips_usd_per_hour + self.baseline_usd_per_hour

    def max_spend_usd(self, run_seconds: int) -> float:
        """One run of every node: each TPU node stops by itself after run_seconds; fee and system pool
        for the same span (they keep running until `pulumi destroy`)."""
        return self.total_usd_per_hour * run_seconds / 3600


def gke_cost(pricing: str, chips: int, system_machine_type: str, system_nodes: int,
             cluster_fee: bool = True) -> GkeCost:
    """cluster_fee: False when the stack reuses a cluster it does not pay for."""
    return GkeCost(
        chips=chips,
        chips_usd_per_hour=cost_per_hour_usd(pricing, chips),
        cluster_fee_usd_per_hour=GKE_CLUSTER_FEE_USD_PER_HOUR if cluster_fee else 0.0,
        system_pool_usd_per_hour=system_machine_usd_per_hour(system_machine_type) * system_nodes,
    )


# --- Cloud Monitoring (monitoring.enabled: the dashboard and alerts) -----------------------------------------
# Google Cloud Observability pricing (cloud.google.com/stackdriver/pricing), Cloud Monitoring: Prometheus samples
# ingested (the Ops Agent's Prometheus receiver and Managed Service for Prometheus alike) $0.06 per million for the
# first 50 billion a month, with no free allotment (the free 150 MiB a month is for non-Prometheus chargeable
# metrics); an alerting policy condition $1.50 a month, plus $0.35 per million time series its query returns;
# dashboards and Google's own metrics cost nothing.
USD_PER_MILLION_PROMETHEUS_SAMPLES = 0.06
USD_PER_ALERT_CONDITION_MONTH = 1.50
USD_PER_MILLION_ALERT_SERIES_RETURNED = 0.35
# Series one scrape of vLLM's /metrics holds: its gauges and counters, and a histogram's buckets for each of its
# ~15 histograms (vllm/v1/metrics/loggers.py, 0.33.0). An estimate of the order, not measured on the log's build.
VLLM_SERIES_PER_SCRAPE = 400


def prometheus_samples_per_month(scrape_interval_seconds: int, targets: int = 1) -> int:
    return int(VLLM_SERIES_PER_SCRAPE * targets * HOURS_PER_MONTH * 3600 / scrape_interval_seconds)


def alert_usd_per_month(conditions: int, series_per_evaluation: int, evaluation_seconds: int) -> float:
    evaluations = HOURS_PER_MONTH * 3600 / evaluation_seconds
    returned = conditions * series_per_evaluation * evaluations
    return conditions * USD_PER_ALERT_CONDITION_MONTH + returned / 1e6 * USD_PER_MILLION_ALERT_SERIES_RETURNED
