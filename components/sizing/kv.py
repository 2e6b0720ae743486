"""KV bytes per token by tpu-inference 0.32.0's own rules, and the page (block) size it picks.

- head_dim is padded to a multiple of 128, except 64, which has its own kernel (utils.get_padded_head_dim);
- KV heads are padded up to the tensor-parallel size (utils.get_padded_num_heads): with one KV head, TP=4 stores
  the head four times;
- the ragged-paged-attention cache page is (pages, page_size, align(2 x heads, packing) / packing, packing,
  align(head_dim, 128)) per chip, K and V interleaved on one axis, packed into 32-bit words (kernels/
  ragged_paged_attention/v3/kernel.py get_kv_cache_shape; head_dim 64: kernel_hd64.py, K and V side by side in
  128 lanes), and the mesh multiplies the head axis by the TP size (runner/kv_cache.py
  get_kv_cache_shape_with_mesh); a page's bytes are bits x product(shape) / 8 (get_attention_page_size_bytes);
- sliding-window layers get full-length pages on the JAX path (kv_cache_manager.get_kv_cache_spec sets
  sliding_window=None), and KV-shared layers get none (components/catalog/geometry.py drops them). A model tpu-inference
  serves through vLLM's model keeps its windows unless its head sizes differ (components/sizing/implementation.py):
  the groups and the pool they share are components/sizing/kv_groups.py's.
"""

from __future__ import annotations

from components.catalog import paging
from components.catalog.geometry import ModelGeometry

TPU_HEAD_SIZE_ALIGNMENT = 128
# vLLM's default max_num_seqs on TPU is 256 (the log); the page table's budget follows from it (catalog/paging.py).
DEFAULT_MAX_NUM_SEQS = paging.DEFAULT_MAX_NUM_SEQS

# --kv-cache-dtype -> bits per element. "auto" takes the model's dtype as served (MODEL_DTYPE_BITS; the 16 here is
# bf16's, what every catalogued model serves at by default). On v6e tpu-inference logs "Automatically using fp8_e5m2
# for FP8 KV cache" with auto, yet allocates bfloat16 (the v6e boot log's regular_attn_dtype=bfloat16, and its pool
# matches bf16 to 0.01%).
KV_DTYPE_BITS = {"auto": 16, "bfloat16": 16, "float16": 16, "fp8": 8, "fp8_e4m3": 8, "fp8_e5m2": 8}
# vLLM's --dtype as the engine runs it -> bits per weight and per "auto" KV element: tpu-inference 0.32.0 allocates an
# "auto" KV cache in the model's dtype (runner/tpu_runner.py: `if cache_dtype == "auto": cache_dtype = self.dtype`,
# `self.dtype = self.model_config.dtype`) and loads the weights in it.
MODEL_DTYPE_BITS = {"bfloat16": 16, "float16": 16, "float32": 32}


class SizingError(ValueError):
    """An input the arithmetic cannot size (an unknown KV dtype, a TP size the model cannot shard to)."""


def align_to(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment


next_power_of_two = paging.next_power_of_two


def padded_head_dim(head_dim: int) -> int:
    """get_padded_head_dim: up to a multiple of 128; 64 stays 64."""
    return head_dim if head_dim == 64 else align_to(head_dim, TPU_HEAD_SIZE_ALIGNMENT)


def padded_kv_heads(kv_heads: int, tensor_parallel_size: int) -> int:
    """get_padded_num_heads: fewer heads than the TP size are padded up to it; more must divide evenly."""
    if kv_heads >= tensor_parallel_size:
        if kv_heads % tensor_parallel_size:
            raise SizingError(f"{kv_heads} KV heads do not split over tensor-parallel size {tensor_parallel_size}")
        return kv_heads
    if tensor_parallel_size % kv_heads:
        raise SizingError(f"tensor-parallel size {tensor_parallel_size} is not a multiple of {kv_heads} KV heads")
    return tensor_parallel_size


# Model types vLLM refuses to serve at float16 (vllm/config/model.py _FLOAT16_NOT_SUPPORTED_MODELS, vllm-tpu 0.32.0:
# "Numerical instability. Please use bfloat16 or float32 instead.", raised by _check_valid_dtype).
FLOAT16_REFUSED_MODEL_TYPES = frozenset({"gemma2", "gemma3", "gemma3_text", "glm4"})


def served_dtype(dtype: str, checkpoint_dtype: str, model_type: str = "") -> str:
    """vLLM's --dtype as the engine runs it (vllm/config/model.py _get_and_verify_dtype): a dtype named is that
    dtype; "auto" is the checkpoint's, a float32 checkpoint downcast to the platform's first supported dtype
    (_resolve_auto_dtype; tpu-inference's TpuPlatform keeps vllm/platforms/interface.py's [bfloat16, float16,
    float32]). float16 on a model type vLLM refuses it for: under "auto" the first supported dtype that type takes,
    bfloat16 (_resolve_auto_dtype filters the platform's list through _is_valid_dtype: "Falling back to"); named, a
    SizingError in vLLM's words (_check_valid_dtype)."""
    refused = model_type in FLOAT16_REFUSED_MODEL_TYPES
    if dtype == "auto":
        return "bfloat16" if checkpoint_dtype == "float32" or (checkpoint_dtype == "float16" and refused) \
            else checkpoint_dtype
    if dtype == "float16" and refused:
        raise SizingError(f"vLLM refuses float16 for model type {model_type!r} (\"does not support float16. Reason: "
                          "Numerical instability. Please use bfloat16 or float32 instead.\")")
    return dtype


def kv_bits(kv_cache_dtype: str, model_dtype: str = "bfloat16") -> int:
    """Bits per KV element; `model_dtype` is the dtype the model is served at (served_dtype), which "auto" takes."""
    if kv_cache_dtype not in KV_DTYPE_BITS:
        raise SizingError(f"--kv-cache-dtype {kv_cache_dtype!r} is not sized here; use one of "
                          f"{', '.join(KV_DTYPE_BITS)}")
    if kv_cache_dtype != "auto":
        return KV_DTYPE_BITS[kv_cache_dtype]
    return model_bits(model_dtype)


def model_bits(model_dtype: str) -> int:
    """Bits per element of a model served at `model_dtype`; SizingError for a dtype not sized here."""
    if model_dtype not in MODEL_DTYPE_BITS:
        raise SizingError(f"a model served at dtype {model_dtype!r} is not sized here; sized: "
                          f"{', '.join(MODEL_DTYPE_BITS)}")
    return MODEL_DTYPE_BITS[model_dtype]


def dtype_packing(bits: int) -> int:
    """get_dtype_packing: elements per 32-bit word."""
    return 32 // bits


def layer_bytes_per_token(head_dim: int, kv_heads: int, tensor_parallel_size: int, bits: int) -> int:
    """One cache-owning layer's K and V for one token, summed over the TP chips (the mesh's whole page)."""
    head_dim, heads = padded_head_dim(head_dim), padded_kv_heads(kv_heads, tensor_parallel_size)
    per_chip_heads = heads // tensor_parallel_size
    packing = dtype_packing(bits)
    if head_dim == 64:
        # kernel_hd64: (pages, page, align(heads, packing) / packing, packing, 128): K and V share the 128 lanes.
        elements = align_to(per_chip_heads, packing) * TPU_HEAD_SIZE_ALIGNMENT
    else:
        elements = align_to(per_chip_heads * 2, packing) * align_to(head_dim, TPU_HEAD_SIZE_ALIGNMENT)
    return elements * tensor_parallel_size * bits // 8


def kv_bytes_per_token(geometry: ModelGeometry, tensor_parallel_size: int, kv_cache_dtype: str = "auto",
                       dtype: str = "auto") -> int:
    """Every cache-owning layer's bytes for one token, across the TP chips, the model served at --dtype `dtype`."""
    bits = kv_bits(kv_cache_dtype, served_dtype(dtype, geometry.dtype, geometry.model_type))
    return sum(layer_bytes_per_token(layer.head_dim, layer.kv_heads, tensor_parallel_size, bits)
               for layer in geometry.kv_layers)


def unpadded_kv_bytes_per_token(geometry: ModelGeometry, kv_cache_dtype: str = "auto", dtype: str = "auto") -> int:
    """What the config alone says (2 x heads x head_dim x bytes per layer), before any TPU padding."""
    element_bytes = kv_bits(kv_cache_dtype, served_dtype(dtype, geometry.dtype, geometry.model_type)) // 8
    return sum(2 * layer.kv_heads * layer.head_dim * element_bytes for layer in geometry.kv_layers)


def tensor_parallel_choices(geometry: ModelGeometry, chips: int) -> tuple[int, ...]:
    """The TP sizes a host of `chips` chips can run this model at: powers of two up to the chip count that split
    the attention heads (vLLM: num_attention_heads % TP == 0) and that every layer's KV heads pad to."""
    choices = []
    size = 1
    while size <= chips:
        if chips % size == 0 and geometry.num_attention_heads % size == 0 and all(
                _pads(layer.kv_heads, size) for layer in geometry.kv_layers):
            choices.append(size)
        size *= 2
    return tuple(choices)


def _pads(kv_heads: int, size: int) -> bool:
    return kv_heads % size == 0 if kv_heads >= size else size % kv_heads == 0


def block_size(max_model_len: int, max_num_seqs: int = DEFAULT_MAX_NUM_SEQS) -> int:
    """The page size tpu-inference picks when --block-size is not set (components/catalog/paging.py, the one copy
    of the rule): 16 past 8192 tokens, else next_pow2(len) / 16 within [16, 256]; raised to the page that keeps a
    request within the page table (512 pages at 256 sequences)."""
    return paging.page_size(max_model_len, max_num_seqs)
