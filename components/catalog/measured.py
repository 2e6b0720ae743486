"""What someone measured on the hardware: boot-log memory lines and KV pools, with where each was read.

A new point comes from one boot's log: `Memory statistics | total_hbm_limit_gb=... | total_hbm_limit_cap_gb=... |
total_hbm_used_gb=... | total_hbm_avail_gb=...` and `TPU KV cache size: N tokens` (vllm-tpu 0.32.0 names the device
type: vllm/v1/core/kv_cache_utils.py _kv_cache_device_name; the 0.26.1rc1 nightly both logs below ran printed
`GPU KV cache size`), and `kv_cache_config.num_blocks` from the `Hybrid KV cache layout` line when it is there.
Add it here with the model, the shape, max-model-len, gpu-memory-utilization and the log's place; docs/models.md
says how.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.catalog.builds import MEASURED, Build
from components.catalog.sources import V5E_LOG_SOURCE, V6E_ARTICLE_SOURCE, V6E_BOOT_SOURCE, Source

GIB = 1024**3


@dataclass(frozen=True)
class MeasuredPool:
    """One boot's memory budget and KV pool, as its log printed them."""

    model: str
    accelerator_type: str
    max_model_len: int
    gpu_memory_utilization: float
    kv_tokens: int
    """`TPU KV cache size: N tokens` (`GPU KV cache size` in the older nightly's logs)."""
    block_size: int
    hbm_limit_gib: float
    cap_gib: float
    weights_gib: float
    """`total_hbm_used_gb` after loading: the weights as resident on the chips."""
    kv_pool_gib: float
    """`total_hbm_avail_gb`."""
    source: Source
    kv_blocks: int | None = None
    tensor_parallel_size: int = 1
    kv_cache_dtype: str = "auto"
    build: Build = MEASURED
    """The vLLM build that booted (components/catalog/builds.py): another build may allocate another pool."""

    @property
    def cited(self) -> str:
        """Where the figure was read, and which build printed it."""
        return f"{self.source}, ran {self.build}"


MEASURED_POOLS: tuple[MeasuredPool, ...] = (
    # The log's final configuration: "block_size 64 x 5,021 blocks = 321,344 tokens", 14.49 cap / 8.97 / 5.52.
    MeasuredPool("google/gemma-4-E2B-it", "v5litepod-1", 32768, 0.92, 321_344, 64, 15.75, 14.49, 8.97, 5.52,
                 V5E_LOG_SOURCE, kv_blocks=5_021),
    # The log's max-model-len table: 16,384 -> block 32, 10,043 blocks, 321,376 tokens.
    MeasuredPool("google/gemma-4-E2B-it", "v5litepod-1", 16384, 0.92, 321_376, 32, 15.75, 14.49, 8.97, 5.52,
                 V5E_LOG_SOURCE, kv_blocks=10_043),
    # The v6e boot log: 31.24 / 28.74 / 8.97 / 19.77 GiB, "GPU KV cache size: 1,151,744 tokens",
    # kv_cache_config.num_blocks=17996 at block 64; --gpu-memory-utilization left to vLLM's default (0.92).
    MeasuredPool("google/gemma-4-E2B-it", "v6e-1", 32768, 0.92, 1_151_744, 64, 31.24, 28.74, 8.97, 19.77,
                 V6E_BOOT_SOURCE, kv_blocks=17_996),
    # The article's section 2.3: 16,384 -> block 32, 1,151,776 tokens; 65,536 -> block 128, 1,151,744.
    MeasuredPool("google/gemma-4-E2B-it", "v6e-1", 16384, 0.92, 1_151_776, 32, 31.24, 28.74, 8.97, 19.77,
                 V6E_ARTICLE_SOURCE),
    MeasuredPool("google/gemma-4-E2B-it", "v6e-1", 65536, 0.92, 1_151_744, 128, 31.24, 28.74, 8.97, 19.77,
                 V6E_ARTICLE_SOURCE),
)

# The log's load rule, from its 8K x 64 cell (TTFT 11.7 s past the pool): "keep clients x context < 250,000
# tokens - about 78% of the 321,344-token KV pool".
KV_LOAD_RULE_OF_THUMB = 0.78

# The measured pool in bytes on v5e: pinned as --kv-cache-memory by the log ("Measured-good value on this setup:
# 5923602432"), the E2B weights' resident bytes follow from it (components/catalog/models.py).
V5E_E2B_KV_POOL_BYTES = 5_923_602_432


def measured_pools(model: str | None = None, accelerator_type: str | None = None) -> tuple[MeasuredPool, ...]:
    return tuple(point for point in MEASURED_POOLS
                 if model in (None, point.model) and accelerator_type in (None, point.accelerator_type))


def measured_pool(model: str, accelerator_type: str, max_model_len: int,
                  gpu_memory_utilization: float = 0.92, kv_cache_dtype: str = "auto") -> MeasuredPool | None:
    """The boot measured at exactly this model, shape, context, utilization and KV dtype, or None."""
    return next((point for point in MEASURED_POOLS
                 if (point.model, point.accelerator_type, point.max_model_len) == (model, accelerator_type,
                                                                                   max_model_len)
                 and abs(point.gpu_memory_utilization - gpu_memory_utilization) < 1e-9
                 and point.kv_cache_dtype in (kv_cache_dtype, "auto" if kv_cache_dtype == "bfloat16" else "")),
                None)


def measured_on(model: str, accelerator_type: str) -> bool:
    """Whether anyone booted this model on this shape (at any context)."""
    return any(point.model == model and point.accelerator_type == accelerator_type for point in MEASURED_POOLS)
