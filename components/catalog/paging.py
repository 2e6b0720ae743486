"""The KV page (block) size tpu-inference 0.32.0 picks, and the tokens vLLM 0.33.0 reports for a pool of pages: the
one copy of these rules, read by components/sizing (any model, any shape) and components/basis/chip_memory (the
stack's v5e budget). Rules of an upstream, kept at the catalog's floor so both rooms above can read them.

- tpu_inference/layers/vllm/backends/flash_attn.py get_page_size: 16 past 8192 tokens, else next_pow2(len) / 16
  within [16, 256]; get_min_page_size: next_pow2(ceil(len / (1 MiB / 2 / max_num_seqs / 4))), the page table's
  SMEM budget; tpu_inference/platforms/tpu_platform.py takes the larger when --block-size is not set.
- vllm/v1/core/kv_cache_utils.py get_kv_cache_capacity: int(pages / pages per max-model-len request x
  max-model-len), the logged "KV cache size" (one full-attention group).
"""

from __future__ import annotations

# vLLM's default max_num_seqs on TPU (vllm/engine/arg_utils.py: 256 for the OpenAI server outside H100s).
DEFAULT_MAX_NUM_SEQS = 256
PAGE_SIZE_FLOOR, PAGE_SIZE_CEILING, SHORT_CONTEXT_LIMIT = 16, 256, 8192


def next_power_of_two(value: int) -> int:
    return 1 if value <= 1 else 1 << (value - 1).bit_length()


def max_pages_per_request(max_num_seqs: int = DEFAULT_MAX_NUM_SEQS) -> int:
    """get_min_page_size's budget: half of the 1 MiB SMEM over max_num_seqs rows of 4-byte page ids (512 at 256)."""
    return 1024 * 1024 // 2 // max_num_seqs // 4


def page_size(max_model_len: int, max_num_seqs: int = DEFAULT_MAX_NUM_SEQS) -> int:
    """The page size tpu-inference picks when --block-size is not set."""
    if max_model_len > SHORT_CONTEXT_LIMIT:
        page = PAGE_SIZE_FLOOR
    else:
        page = min(max(next_power_of_two(max_model_len) // 16, PAGE_SIZE_FLOOR), PAGE_SIZE_CEILING)
    minimum = next_power_of_two(-(-max_model_len // max_pages_per_request(max_num_seqs)))
    return max(page, minimum)


def pages_per_request(max_model_len: int, page: int) -> int:
    return -(-max_model_len // page)


def capacity_tokens(pages: int, page: int, max_model_len: int) -> int:
    """vLLM's logged KV cache size for a one-group pool of `pages` pages."""
    return int(pages / pages_per_request(max_model_len, page) * max_model_len)
