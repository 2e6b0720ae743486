"""One page-size rule (components/catalog/paging.py) for the stack's v5e budget (components/basis/chip_memory) and the
planner (components/sizing): tpu-inference 0.32.0's get_page_size picks next_pow2(len) / 16 within [16, 256] at or
below 8192 tokens, so chip_memory's old "512 blocks per request" rule (16 there) was wrong; and what the long-context
arm says about blocks per request is the budget's own figure."""

from __future__ import annotations

import pytest

from components import sizing
from components.basis import chip_memory
from components.basis.chip_memory import GEMMA_4_E2B_IT
from components.settings.untested_arms import _long_context_arm
from tests.test_knobs import load


@pytest.mark.parametrize(("max_model_len", "page"),
                         [(2048, 128), (4096, 256), (8192, 256), (16384, 32), (32768, 64), (65536, 128)])
def test_chip_memory_picks_tpu_inferences_page_size(max_model_len, page):
    assert chip_memory.block_size_for(max_model_len) == sizing.block_size(max_model_len) == page


def test_a_short_context_is_sized_by_vllms_capacity_not_blocks_times_pages():
    # 4096 tokens, 256-token pages: vLLM reports int(pages / 16 x 4096), the pool's whole pages.
    kv = chip_memory.kv_budget(GEMMA_4_E2B_IT, 0.92, 4096)
    assert (kv.block_size, kv.blocks_per_request) == (256, 16)
    assert kv.kv_tokens == int(kv.kv_blocks / 16 * 4096) == kv.kv_blocks * 256


def test_the_long_context_arm_says_at_most_512_blocks_and_shows_the_real_count():
    settings = load({"vllm": {"maxModelLen": 40000}}).settings
    arm = _long_context_arm(settings)
    kv = settings.kv_budget()
    assert (kv.block_size, kv.blocks_per_request) == (128, 313)
    assert "at most 512 blocks" in arm.why
    assert "128 x 313 blocks per request = 40064, the first whole block past 40000" in arm.why
    assert "to keep 512 blocks per request" not in arm.why
