"""Sizing: pure arithmetic on the catalog. Whether a model fits a TPU shape, at which tensor-parallel size, and
every figure of its memory budget and cost, each marked measured (with its source) or computed (with its
formula). KV bytes per token follow tpu-inference 0.32.0's own rules (components/sizing/kv.py).

Public interface (stable; settings checks, the serving spec and tools.fit read only these):

    fit(model, shape, max_model_len, *, gpu_memory_utilization=0.92, kv_cache_dtype="auto", context_tokens=None,
        clients=None, region=None, run_hours=4.0, tensor_parallel_size=None, max_num_batched_tokens=4096) -> Fit
        model: a CatalogModel, or a ModelSpec: ModelSpec.of(catalog_model), ModelSpec.from_config_file(path,
        name=None, weights_bytes=None) for any config.json (weights counted where the layout allows), or
        ModelSpec(name, geometry, weights | None, family | None)
    fits_by_shape(model, max_model_len, **same options) -> tuple[Fit, ...]     one per catalogued shape
    smallest_fitting_shape(model, max_model_len, **same options) -> Shape | None
    Fit: model, shape, max_model_len, tensor_parallel_size, fits, reasons (why not, user-worded), figures
         {hbm, cap, weights, block_size, kv_bytes_per_token, [kv_groups, kv_block_bytes, kv_blocks_per_request: a
         hybrid cache], kv_pool, kv_blocks, kv_tokens, [kv_tokens_measured], clients} of Figure,
         usd_per_hour {provisioning model: Figure}, max_run_usd {...}, region,
         measured_point (MeasuredPool | None), measured_here (any boot of this pair), kv_tokens (measured if
         there is one, else computed), kv_replication, notes, family, serve_flags() -> {"--max-model-len": ...,
         "--tensor-parallel-size": ..., "--tool-call-parser": ..., "--reasoning-parser": ...}
    Figure: value, unit, measured, basis (source or formula), how ("measured: ..." / "computed: ...")
    kv_bytes_per_token(geometry, tensor_parallel_size, kv_cache_dtype="auto") -> int    across the TP chips
    tensor_parallel_choices(geometry, chips) -> tuple[int, ...];  planned_tensor_parallel(geometry, chips)
    block_size(max_model_len, max_num_seqs=256) -> int
    padded_head_dim(head_dim), padded_kv_heads(kv_heads, tp), layer_bytes_per_token(head_dim, kv_heads, tp, bits)
    SizingError (bad KV dtype or TP), DEFAULT_GPU_MEMORY_UTILIZATION (0.92), LOAD_RULE (0.78)
    model_implementation(architectures) -> "flax_nnx" | "vllm"   tpu-inference's path for the architecture
    kv_groups.plan(geometry, tp, kv_cache_dtype, block_size, max_model_len, max_num_batched_tokens=4096) -> KvPlan
        vLLM's KV groups over one block pool: groups, bytes_per_block, blocks_per_request, capacity_tokens(blocks,
        len), one_request_fits(blocks) (the null block held back); UnsizedKvCacheError for a mix it does not compute
"""

from components.sizing import kv_groups
from components.sizing.fit import (
    DEFAULT_GPU_MEMORY_UTILIZATION,
    DEFAULT_RUN_HOURS,
    LOAD_RULE,
    Figure,
    Fit,
    ModelSpec,
    fit,
    fits_by_shape,
    smallest_fitting_shape,
)
from components.sizing.implementation import model_implementation
from components.sizing.kv import (
    KV_DTYPE_BITS,
    SizingError,
    block_size,
    kv_bytes_per_token,
    layer_bytes_per_token,
    padded_head_dim,
    padded_kv_heads,
    planned_tensor_parallel,
    tensor_parallel_choices,
    unpadded_kv_bytes_per_token,
)

__all__ = [
    "DEFAULT_GPU_MEMORY_UTILIZATION", "DEFAULT_RUN_HOURS", "KV_DTYPE_BITS", "LOAD_RULE", "Figure", "Fit",
    "ModelSpec", "SizingError", "block_size", "fit", "fits_by_shape", "kv_bytes_per_token", "layer_bytes_per_token",
    "padded_head_dim", "padded_kv_heads", "planned_tensor_parallel", "smallest_fitting_shape",
    "tensor_parallel_choices", "unpadded_kv_bytes_per_token", "model_implementation", "kv_groups",
]
