"""Sizing: pure arithmetic on the catalog. Whether a model fits a TPU shape, at which tensor-parallel size, and
every figure of its memory budget and cost, each marked measured (with its source) or computed (with its
formula). KV bytes per token follow tpu-inference 0.32.0's own rules (components/sizing/kv.py).

Public interface (stable; settings checks, the serving spec and tools.fit read only these):

    fit(model, shape, max_model_len, *, gpu_memory_utilization=0.92, kv_cache_dtype="auto", context_tokens=None,
        clients=None, region=None, run_hours=4.0, tensor_parallel_size=None, data_parallel_size=None,
        max_num_batched_tokens=4096, dtype="auto") -> Fit
        at the planned layout (components/sizing/layouts.py: every tensor-parallel t x data-parallel d of the
        host's devices, the lowest $ per million output tokens at `clients` x `context_tokens`, computed by
        components/sizing/rate.py), or at the one the sizes given make; fit_layout(...) the same at a given one
    all_layouts(model, shape, max_model_len, **same options) -> tuple[Fit, ...]: each layout, fewest replicas first
        model: a CatalogModel, or a ModelSpec: ModelSpec.of(catalog_model), ModelSpec.from_config_file(path,
        name=None, weights_bytes=None) for any config.json (weights counted where the layout allows), or
        ModelSpec(name, geometry, weights | None, family | None)
    fits_by_shape(model, max_model_len, **same options) -> tuple[Fit, ...]     one per catalogued shape
    smallest_fitting_shape(model, max_model_len, **same options) -> Shape | None
    Fit: model, shape, max_model_len, tensor_parallel_size, data_parallel_size, layout (its name), fits,
         reasons (why not, user-worded), figures {hbm, cap, weights, block_size, kv_bytes_per_token,
         [kv_groups, kv_block_bytes, kv_blocks_per_request: a hybrid cache], kv_pool, kv_blocks, kv_tokens,
         [kv_tokens_measured], clients, [kv_tokens_all]} of Figure (per replica but
         clients and kv_tokens_all), output_rate (Figure | None: computed tokens/s), usd_per_million_output
         {provisioning model: Figure}, usd_per_hour {provisioning model: Figure}, max_run_usd {...}, region,
         measured_point (MeasuredPool | None), measured_here (any boot of this pair), kv_tokens (every replica's;
         measured if there is one, else computed), kv_tokens_per_replica, kv_replication, notes, family,
         serve_flags() -> {"--max-model-len": ..., "--tensor-parallel-size": ..., ["--data-parallel-size": ...],
         "--tool-call-parser": ..., "--reasoning-parser": ...}
    Figure: value, unit, measured, basis (source or formula), how ("measured: ..." / "computed: ...")
    kv_bytes_per_token(geometry, tensor_parallel_size, kv_cache_dtype="auto", dtype="auto") -> int    across the TP
        chips, the model served at vLLM's --dtype (an auto KV cache is the served dtype: MODEL_DTYPE_BITS)
    tensor_parallel_choices(geometry, devices) -> tuple[int, ...]   the sizes the heads split over (layouts' t)
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
    fit_layout,
    price_not_found,
)
from components.sizing.implementation import model_implementation
from components.sizing.kv import (
    KV_DTYPE_BITS,
    MODEL_DTYPE_BITS,
    SizingError,
    block_size,
    kv_bytes_per_token,
    layer_bytes_per_token,
    padded_head_dim,
    padded_kv_heads,
    tensor_parallel_choices,
    unpadded_kv_bytes_per_token,
)
from components.sizing.layouts import all_layouts, fit, fits_by_shape, smallest_fitting_shape
from components.sizing.rate import DEFAULT_PLANNED_CLIENTS
from components.sizing.rate import FORMULA_SUMMARY as RATE_FORMULA_SUMMARY

__all__ = [
    "DEFAULT_GPU_MEMORY_UTILIZATION", "DEFAULT_RUN_HOURS", "KV_DTYPE_BITS", "LOAD_RULE", "MODEL_DTYPE_BITS",
    "Figure", "Fit",
    "DEFAULT_PLANNED_CLIENTS", "ModelSpec", "RATE_FORMULA_SUMMARY", "SizingError", "all_layouts", "block_size",
    "fit", "fit_layout", "fits_by_shape", "kv_bytes_per_token", "layer_bytes_per_token",
    "padded_head_dim", "padded_kv_heads", "price_not_found", "smallest_fitting_shape",
    "tensor_parallel_choices", "unpadded_kv_bytes_per_token", "model_implementation", "kv_groups",
]
