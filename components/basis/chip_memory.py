"""What one v5e chip's memory holds: HBM, the KV pool, blocks and token buckets, from the build log's
measurements. Pure arithmetic; no Pulumi imports, nothing of the project but the catalog (the measured figures'
home, each with its source). Any model on any shape: components/sizing."""

from __future__ import annotations

from dataclasses import dataclass

from components.catalog import paging
from components.catalog.measured import KV_LOAD_RULE_OF_THUMB
from components.catalog.models import GEMMA_4_E2B_WEIGHTS_BYTES
from components.catalog.shapes import V5E

GIB = 1024**3

# HBM the runtime reports on one v5e chip ("total_hbm_limit_gb=15.75GiB"); size
# against this, never the 16 GB marketing figure (the catalog's, with its source).
V5E_HBM_BYTES = V5E.hbm_bytes_per_chip

# Everything outside --gpu-memory-utilization's cap; compiled XLA programs live
# here, which is why 0.95 dies at XLA program allocation.
HIGHEST_BOOTING_GPU_MEMORY_UTILIZATION = 0.92
FAILING_GPU_MEMORY_UTILIZATION = 0.95

# The most blocks a request may take at vLLM's 256 sequences (tpu-inference's page-table budget): past 8192 tokens
# the page grows to keep a request within it, so a power-of-two max-model-len takes exactly this many.
BLOCKS_PER_REQUEST = paging.max_pages_per_request()

# KV_LOAD_RULE_OF_THUMB ("keep clients x context < 250,000 tokens - about 78% of the KV pool") is the
# catalog's, imported above; modules read it from here too.


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
    weights_bytes=GEMMA_4_E2B_WEIGHTS_BYTES,
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


def kv_pool_bytes(geometry: ModelGeometry, gpu_memory_utilization: float, hbm_bytes: int = V5E_HBM_BYTES) -> int:
    return hbm_cap_bytes(gpu_memory_utilization, hbm_bytes) - geometry.weights_bytes


def block_size_for(max_model_len: int) -> int:
    """The block size tpu-inference picks (components/catalog/paging.py, the rule components/sizing reads too)."""
    return paging.page_size(max_model_len)


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
    replicas: int = 1
    """Data-parallel replicas the pool, pages and cap are summed over (each replica holds its own)."""

    @property
    def blocks_per_request(self) -> int:
        """At most 512 past 8192 tokens (exactly 512 at a power of two): a longer context takes bigger blocks."""
        return paging.pages_per_request(self.max_model_len, self.block_size)

    @property
    def replicas_clause(self) -> str:
        """What the concurrency guidance adds for a data-parallel server (empty for one replica)."""
        if self.replicas <= 1:
            return ""
        return (f"; {self.replicas} data-parallel replicas of {self.kv_tokens // self.replicas:,} tokens each "
                "behind the one endpoint (vLLM spreads requests across them; a request's context sits in one "
                "replica's pool)")

    @property
    def load_limit_tokens(self) -> int:
        """clients x context above this costs tail latency, not throughput."""
        return int(self.kv_tokens * KV_LOAD_RULE_OF_THUMB)


def kv_budget(
    geometry: ModelGeometry,
    gpu_memory_utilization: float,
    max_model_len: int,
    kv_pool_override_bytes: int | None = None,
    hbm_bytes: int = V5E_HBM_BYTES,
) -> KvBudget:
    """Whole blocks only: the engine allocates the pool in blocks of block_size tokens; the tokens are vLLM's
    capacity (the blocks over the blocks one max-model-len request takes, times max-model-len). hbm_bytes: one
    chip's."""
    per_token = kv_bytes_per_token(geometry)
    pool = kv_pool_override_bytes or kv_pool_bytes(geometry, gpu_memory_utilization, hbm_bytes)
    block_size = block_size_for(max_model_len)
    blocks = max(pool, 0) // (per_token * block_size)
    return KvBudget(
        kv_bytes_per_token=per_token,
        hbm_cap_bytes=hbm_cap_bytes(gpu_memory_utilization, hbm_bytes),
        kv_pool_bytes=pool,
        outside_cap_bytes=outside_cap_bytes(gpu_memory_utilization, hbm_bytes),
        block_size=block_size,
        kv_blocks=blocks,
        kv_tokens=paging.capacity_tokens(blocks, block_size, max_model_len),
        max_model_len=max_model_len,
    )


def gib(value_bytes: int) -> float:
    return value_bytes / GIB
