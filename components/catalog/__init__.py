"""The catalog: TPU shapes, models, prices and measured points as dated, cited data behind one query interface
(SkyPilot's sky/catalog is the model). Lowest floor: it imports nothing of the project.

Public interface (stable; the stack and tools.fit read only these):

Shapes (components/catalog/shapes.py)
    shape(name) -> Shape | None                       "v5litepod-1", "-4", "-8", "v6e-1", "-4", "-8" (or their
                                                      machine types, ct6e-standard-1t...), "tpu7x-standard-1t", "-4t"
    all_shapes() -> tuple[Shape, ...]                 catalog order, v5e first;  all_names(): every spelling
    QUEUED_RESOURCE, COMPUTE, NODE_APIS               the node APIs ("queued-resource", "compute")
    shape_for_gke_machine(machine_type) -> Shape | None
    region_of(zone) -> str
    Shape: accelerator_type, chips, devices (chips x devices_per_chip), generation (Generation), machine_type
           (Compute Engine's, None on v5e), names, node_apis, compute_image, gke_machine_type, gke_topology,
           gke_tpu_count, hbm_bytes_per_chip, hbm_bytes_per_device, hbm_bytes (all chips), runtime_version,
           cache_disk_type, flex_start_accepted_zones, flex_start_refused_zones, flex_start_seen(api), config_source
    Generation: name ("v5e"/"v6e"), hbm_bytes_per_chip, hbm_measured, hbm_source, runtime_version,
           gke_accelerator (the cloud.google.com/gke-tpu-accelerator value), data_disk_types (first = the
           stack's), zones (where the type exists), flex_start (ZoneObservation: zone, accepted, source, detail),
           quota_id, spot_quota_id, price_region ("" where none was read), node_apis, default_api,
           compute_image (None: not read), devices_per_chip
Prices (components/catalog/prices.py)
    chip_price(generation, region, provisioning_model) -> ChipPrice | None
    chip_prices(generation, region) -> {provisioning_model: ChipPrice}
    disk_price(disk_type, region) -> DiskPrice | None
    PROVISIONING_MODELS, SELF_STOPPING_MODELS
Models (components/catalog/models.py, geometry.py)
    catalog_model(hf_id) -> CatalogModel | None;  catalog_models() -> tuple[CatalogModel, ...]
    CatalogModel: name, family (Family: tool_call_parser, reasoning_parser, modalities), config (the copied
           config.json), config_source, geometry (ModelGeometry), weights (Weights: bytes, measured, basis)
    geometry_from_config(dict) / geometry_from_file(path) -> ModelGeometry   (raises ConfigError, user-worded)
    read_config(path) -> dict;  family_for(model_type) -> Family | None
    ModelGeometry: kv_layers (KvLayer: index, layer_type, head_dim, kv_heads; KV-shared layers left out),
           kv_shared_layers, num_attention_heads, max_context_tokens, dtype, parameter_count, sliding_window,
           uses_sliding_window, layer_types_given (not components.basis.chip_memory.ModelGeometry, the v5e
           budget's hand-typed geometry)
    config_defaults.filled(config) -> dict       the family's transformers class defaults where a config is silent
    engine_support.refusal(config) -> str | None vLLM's reason to refuse the architecture, or to size no KV cache
    weights_index.index_total_size(config_path) / index_weights(config_path) -> the safetensors index beside it
Measured points (components/catalog/measured.py)
    measured_pool(model, accelerator_type, max_model_len, gpu_memory_utilization=0.92, kv_cache_dtype="auto")
           -> MeasuredPool | None;  measured_pools(model=None, accelerator_type=None);  measured_on(model, type)
    MeasuredPool: kv_tokens, block_size, kv_blocks, hbm_limit_gib, cap_gib, weights_gib, kv_pool_gib, source

The arithmetic on it lives one floor up, in components/sizing (fit, KV bytes per token, TP choices).
"""

from components.catalog.geometry import (
    ConfigError,
    KvLayer,
    ModelGeometry,
    geometry_from_config,
    geometry_from_file,
    read_config,
)
from components.catalog.measured import MeasuredPool, measured_on, measured_pool, measured_pools
from components.catalog.models import CatalogModel, Family, Weights, catalog_model, catalog_models, family_for
from components.catalog.prices import (
    PROVISIONING_MODELS,
    SELF_STOPPING_MODELS,
    ChipPrice,
    DiskPrice,
    chip_price,
    chip_prices,
    disk_price,
)
from components.catalog.shapes import (
    COMPUTE,
    NODE_APIS,
    QUEUED_RESOURCE,
    Generation,
    Shape,
    ZoneObservation,
    all_names,
    all_shapes,
    region_of,
    shape,
    shape_for_gke_machine,
)
from components.catalog.sources import Source

__all__ = [
    "COMPUTE", "NODE_APIS", "QUEUED_RESOURCE", "all_names",
    "PROVISIONING_MODELS", "SELF_STOPPING_MODELS", "CatalogModel", "ChipPrice", "ConfigError", "DiskPrice", "Family",
    "Generation", "KvLayer", "MeasuredPool", "ModelGeometry", "Shape", "Source", "Weights", "ZoneObservation",
    "catalog_model", "catalog_models", "chip_price", "chip_prices", "disk_price", "family_for",
    "geometry_from_config", "geometry_from_file", "measured_on", "measured_pool", "measured_pools", "read_config",
    "all_shapes", "region_of", "shape", "shape_for_gke_machine",
]
