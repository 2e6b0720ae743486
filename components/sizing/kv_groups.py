"""The KV cache groups vLLM plans over one shared block pool, and what one request at max-model-len holds of it:
the hybrid (sliding window + full attention) arithmetic, one module so kv.py keeps only the bytes of a page.

Read from vLLM 0.32.0 (vllm-tpu 0.32.0; vLLM 0.33.0 agrees on every line used here) and tpu-inference 0.32.0:

- the layers' specs: tpu_inference/runner/kv_cache_manager.py get_kv_cache_spec. On the JAX path every layer is a
  FullAttentionSpec (`sliding_window = None`); on the vLLM path a layer keeps the window vLLM's model class gave its
  Attention, unless the padded head sizes differ across layers (`disable_sliding_window = len(head_size_set) > 1`).
  vLLM's Attention takes the layer's own window (`per_layer_sliding_window`: Gemma 3 and Llama from
  `layer_types[i] == "sliding_attention"`, gpt-oss every even layer, the same as its layer_types) and otherwise
  `cache_config.sliding_window`, which vllm/engine/arg_utils.py sets to the config's sliding_window only when
  `layer_types` is absent or all sliding ("Only set CacheConfig.sliding_window if the model is all sliding
  window"), vllm/model_executor/layers/attention/attention.py;
- the groups: vllm/v1/core/kv_cache_planning.py get_kv_cache_groups. One spec on every layer ("KV cache of all layers
  are the same") or one type with several page sizes (UniformTypeKVCacheSpecs: all full attention, or all one
  window): one group of every layer. Several types with one page size: _get_kv_cache_groups_uniform_page_size,
  one bucket per spec, group size the smallest bucket's layer count (the largest when under 1.5 x the smallest),
  each bucket split into cdiv(layers, group size) groups of layers[i::groups]. Several types and several page sizes
  on tpu-inference's layer-outermost layout (NHD): unify_kv_cache_spec_page_size, not sized here (refused by name);
- the pool: get_kv_cache_config_from_groups, num_blocks = available // bytes per block, where a block is the largest
  group's pages summed (_get_kv_cache_bytes_per_block): every group draws its blocks from that one pool;
- one request at max-model-len (get_max_concurrency_for_kv_cache_config, the sum over groups of cdiv(the group's
  max_memory_usage_bytes, its page)): a full-attention group cdiv(max_model_len, block) blocks; a sliding-window
  group cdiv(min(window - 1 + in-flight tokens, max_model_len), block) + 1 (v1/kv_cache_interface.py
  SlidingWindowSpec.max_admission_blocks_per_request: "+1 because the sliding window may not start from the
  beginning of the block"); in-flight tokens = max_concurrent_batches x max_num_batched_tokens (vllm/config/vllm.py
  max_in_flight_tokens; two batches with async scheduling, which vLLM turns on for tpu-inference's single-host
  "uni" executor);
- the logged "KV cache size": int(num_blocks / blocks per request x max_model_len) (v1/core/kv_cache_utils.py
  get_kv_cache_capacity);
- the start-up check: get_kv_cache_configs reserves "the null block BlockPool permanently holds back" before
  _check_enough_kv_cache_memory, so one max-model-len request needs its blocks plus one.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.catalog import geometry as catalog_geometry
from components.catalog.geometry import ModelGeometry
from components.sizing import implementation, kv

# The stack's --max-num-batched-tokens (components/settings/vllm.py VllmSettings.max_num_batched_tokens, the log's
# 4096). vLLM's own default on TPU is 2048: get_batch_defaults' TPU table never matches "TPU V5E" (the log).
DEFAULT_MAX_NUM_BATCHED_TOKENS = 4096
# VllmConfig.max_concurrent_batches with async scheduling on and one pipeline stage (the V1 runner): 2.
CONCURRENT_BATCHES = 2
# vLLM's heuristic: group by the largest bucket when it is under 1.5 x the smallest (gpt-oss-20b + eagle).
GROUP_SIZE_SLACK = 1.5


@dataclass(frozen=True)
class LayerSpec:
    """One cache-owning layer as tpu-inference specs it: its page's bytes and its window (None: full attention)."""

    index: int
    page_bytes: int
    sliding_window: int | None


@dataclass(frozen=True)
class KvGroup:
    """One KV cache group: layers sharing a block table (vLLM's KVCacheGroupSpec)."""

    layers: tuple[int, ...]
    sliding_window: int | None
    page_bytes: int
    """The group's block: its layers' pages summed."""

    def blocks_per_request(self, block_size: int, max_model_len: int, in_flight_tokens: int) -> int:
        if self.sliding_window is None:
            return -(-max_model_len // block_size)
        held = min(self.sliding_window - 1 + in_flight_tokens, max_model_len)
        return -(-held // block_size) + 1


@dataclass(frozen=True)
class KvPlan:
    """The groups and the per-block and per-request figures of the pool they share."""

    groups: tuple[KvGroup, ...]
    block_size: int
    bytes_per_block: int
    blocks_per_request: int
    in_flight_tokens: int
    windows_kept: bool

    @property
    def hybrid(self) -> bool:
        return len(self.groups) > 1 or any(group.sliding_window is not None for group in self.groups)

    def blocks(self, available: int) -> int:
        return max(available, 0) // self.bytes_per_block

    def capacity_tokens(self, blocks: int, max_model_len: int) -> int:
        return int(blocks / self.blocks_per_request * max_model_len)

    def one_request_fits(self, blocks: int) -> bool:
        """The null block held back, then one max-model-len request's blocks."""
        return blocks - 1 >= self.blocks_per_request


class UnsizedKvCacheError(ValueError):
    """A spec mix vLLM sizes by rules this module does not compute (the message says which and why)."""


def layer_windows(geometry: ModelGeometry) -> dict[int, int | None]:
    """The window vLLM's Attention gives each cache-owning layer on the vLLM path."""
    window = geometry.sliding_window if geometry.uses_sliding_window else None
    if window is None:
        return {layer.index: None for layer in geometry.kv_layers}
    if not geometry.layer_types_given or all(layer.layer_type == catalog_geometry.SLIDING
                                             for layer in geometry.kv_layers):
        return {layer.index: window for layer in geometry.kv_layers}
    return {layer.index: window if layer.layer_type == catalog_geometry.SLIDING else None
            for layer in geometry.kv_layers}


def layer_specs(geometry: ModelGeometry, tensor_parallel_size: int, kv_cache_dtype: str,
                block_size: int, dtype: str = "auto") -> tuple[tuple[LayerSpec, ...], bool]:
    """Each cache-owning layer's spec, and whether windows stay on (the vLLM path with one padded head size)."""
    bits = kv.kv_bits(kv_cache_dtype, kv.served_dtype(dtype, geometry.dtype, geometry.model_type))
    keep = (implementation.model_implementation(geometry.architectures) == implementation.VLLM
            and len({kv.padded_head_dim(layer.head_dim) for layer in geometry.kv_layers}) == 1)
    windows = layer_windows(geometry) if keep else {}
    specs = tuple(LayerSpec(layer.index,
                            block_size * kv.layer_bytes_per_token(layer.head_dim, layer.kv_heads,
                                                                  tensor_parallel_size, bits),
                            windows.get(layer.index))
                  for layer in geometry.kv_layers)
    return specs, keep and any(spec.sliding_window is not None for spec in specs)


def group(specs: tuple[LayerSpec, ...]) -> tuple[KvGroup, ...]:
    """get_kv_cache_groups on tpu-inference's layer-outermost layout."""
    windows = {spec.sliding_window for spec in specs}
    if len(windows) == 1:  # one type (all full, or all one window): one group, whatever the page sizes
        return (KvGroup(tuple(spec.index for spec in specs), windows.pop(), sum(spec.page_bytes for spec in specs)),)
    if len({spec.page_bytes for spec in specs}) > 1:
        raise UnsizedKvCacheError("not sized: sliding-window and full-attention layers with different page sizes "
                             "(vLLM's unify_kv_cache_spec_page_size scales their block sizes; not computed here)")
    buckets: dict[int | None, list[LayerSpec]] = {}
    for spec in specs:
        buckets.setdefault(spec.sliding_window, []).append(spec)
    smallest = min(len(layers) for layers in buckets.values())
    largest = max(len(layers) for layers in buckets.values())
    size = largest if largest < smallest * GROUP_SIZE_SLACK else smallest
    groups = []
    for window, layers in buckets.items():
        count = -(-len(layers) // size)
        for offset in range(count):
            members = layers[offset::count]
            groups.append(KvGroup(tuple(spec.index for spec in members), window,
                                  sum(spec.page_bytes for spec in members)))
    return tuple(groups)


def plan(geometry: ModelGeometry, tensor_parallel_size: int, kv_cache_dtype: str, block_size: int,
         max_model_len: int, max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS,
         dtype: str = "auto") -> KvPlan:
    """The groups and their shared pool's per-block and per-request figures (the model served at --dtype
    `dtype`). Raises UnsizedKvCacheError."""
    specs, windows_kept = layer_specs(geometry, tensor_parallel_size, kv_cache_dtype, block_size, dtype)
    groups = group(specs)
    in_flight = CONCURRENT_BATCHES * max_num_batched_tokens
    return KvPlan(groups=groups, block_size=block_size,
                  bytes_per_block=max(member.page_bytes for member in groups),
                  blocks_per_request=sum(member.blocks_per_request(block_size, max_model_len, in_flight)
                                         for member in groups),
                  in_flight_tokens=in_flight, windows_kept=windows_kept)
