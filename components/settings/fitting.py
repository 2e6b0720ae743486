"""What `python -m tools.fit` says of this stack's model on its shape, for everything the stack deploys: the model
(catalogued by its Hugging Face id, read from `vllm.modelConfig`, or unknown), its fit (components/sizing) and
what follows from it: the tensor-parallel size, the KV budget, the chip's price. No second copy of any fact: the
catalog and sizing hold them."""

from __future__ import annotations

from typing import Any

from components import catalog, sizing
from components.basis import chip_memory
from components.catalog import weights_index
from components.sizing.kv import KV_DTYPE_BITS

# components.settings.root.Settings, which calls these for its properties (root imports this module, so not back).
Settings = Any

SAFETENSORS_INDEX = weights_index.SAFETENSORS_INDEX
index_total_size = weights_index.index_total_size


def index_weights_bytes(config_path: str) -> int | None:
    """index_total_size, or None where it has none or cannot be read (the vllm section's validator says why)."""
    try:
        return index_total_size(config_path)
    except catalog.ConfigError:
        return None


def model_spec(settings: Settings) -> sizing.ModelSpec | None:
    """vllm.modelConfig's model (weights: the index beside it, else counted from the config), else the catalog's
    model of vllm.model, else None (an unknown model: only vllm.modelGeometry, or nothing, sizes it)."""
    vllm = settings.vllm
    if vllm.hf_config is not None:
        spec = sizing.ModelSpec.from_config_file(vllm.hf_config, name=vllm.model, index=False)
        total = index_weights_bytes(vllm.hf_config)
        if total is not None:
            spec = sizing.ModelSpec(spec.name, spec.geometry, weights_index.index_weights(vllm.hf_config, total),
                                    spec.family)
        return spec
    catalogued = catalog.catalog_model(vllm.model)
    return sizing.ModelSpec.of(catalogued) if catalogued is not None else None


def sized_kv_dtype(kv_cache_dtype: str) -> str:
    """The KV dtype sizing knows; the others (warned or refused by the vllm section) are sized as auto."""
    return kv_cache_dtype if kv_cache_dtype in KV_DTYPE_BITS else "auto"


def deployed_fit(settings: Settings, tensor_parallel_size: int | None = None, *,
                 as_planned: bool = False) -> sizing.Fit | None:
    """The model on tpu.acceleratorType at vllm.maxModelLen, as tools.fit computes it (at the sizes the vllm
    section sets, unless `as_planned`: the planner's layout); None for an unknown model."""
    spec = model_spec(settings)
    if spec is None:
        return None
    vllm, tpu = settings.vllm, settings.tpu
    return sizing.fit(spec, tpu.shape, vllm.max_model_len, gpu_memory_utilization=vllm.gpu_memory_utilization,
                      kv_cache_dtype=sized_kv_dtype(vllm.kv_cache_dtype), context_tokens=settings.load.context_tokens,
                      clients=settings.load.clients, region=tpu.region, run_hours=tpu.run_seconds / 3600,
                      tensor_parallel_size=None if as_planned else tensor_parallel_size or vllm.tensor_parallel_size,
                      data_parallel_size=None if as_planned or tensor_parallel_size else vllm.data_parallel_size,
                      max_num_batched_tokens=vllm.max_num_batched_tokens, max_num_seqs=vllm.max_num_seqs,
                      dtype=vllm.dtype)


def planned_layout_name(settings: Settings) -> str:
    """The layout the planner picks for this stack with neither size set (for a fix that says what it gets)."""
    planned = deployed_fit(settings, as_planned=True)
    return "unknown model" if planned is None else planned.layout


def smallest_shape(settings: Settings) -> catalog.Shape | None:
    spec = model_spec(settings)
    if spec is None:
        return None
    vllm = settings.vllm
    return sizing.smallest_fitting_shape(spec, vllm.max_model_len,
                                         gpu_memory_utilization=vllm.gpu_memory_utilization,
                                         max_num_batched_tokens=vllm.max_num_batched_tokens,
                                         kv_cache_dtype=sized_kv_dtype(vllm.kv_cache_dtype), dtype=vllm.dtype)


def kv_budget_of(fit: sizing.Fit) -> chip_memory.KvBudget | None:
    """The fit's pool as the stack's KV budget (the tokens measured where a boot measured them)."""
    figures = fit.figures
    if "kv_pool" not in figures:
        return None
    per_token, block = int(figures["kv_bytes_per_token"].value), int(figures["block_size"].value)
    cap, hbm = int(figures["cap"].value), int(figures["hbm"].value)
    pool, blocks, tokens = int(figures["kv_pool"].value), int(figures["kv_blocks"].value), fit.kv_tokens
    # Every replica's: each data-parallel replica holds a pool of its own (components/sizing/layouts.py).
    replicas = fit.data_parallel_size
    return chip_memory.KvBudget(kv_bytes_per_token=per_token, hbm_cap_bytes=cap * replicas,
                                kv_pool_bytes=pool * replicas, outside_cap_bytes=(hbm - cap) * replicas,
                                block_size=block, kv_blocks=blocks * replicas, kv_tokens=tokens,
                                max_model_len=fit.max_model_len, replicas=replicas)


def chip_usd_per_hour(settings: Settings, provisioning_model: str) -> catalog.ChipPrice | None:
    """One chip of the shape's generation at this provisioning model: the zone's region's price, else the region
    the catalog has prices for (the price is then another region's: the plan says so)."""
    generation = settings.tpu.shape.generation
    return (catalog.chip_price(generation.name, settings.tpu.region, provisioning_model)
            or catalog.chip_price(generation.name, generation.price_region, provisioning_model))


def price_not_found(generation: catalog.Generation, region: str, provisioning_model: str) -> str:
    """The words for a chip with no price read (sizing's, one wording for the plan and tools.fit)."""
    return sizing.price_not_found(generation.name, region, provisioning_model)
