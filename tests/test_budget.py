"""The budget must reproduce every figure of the build log."""

import pytest

from components.basis import chip_memory, price_list, spending
from components.basis.chip_memory import GEMMA_4_E2B_IT, GIB
from components.economics import cost_lines


def test_kv_bytes_per_token_counts_both_head_dims():
    # 12 sliding x 256 + 3 full x 512, one KV head, K and V, bf16.
    assert chip_memory.kv_bytes_per_token(GEMMA_4_E2B_IT) == 12_288 + 6_144 == 18_432


def test_cap_kv_pool_and_remainder_at_0_92():
    kv = chip_memory.kv_budget(GEMMA_4_E2B_IT, 0.92, 32768)
    assert round(kv.hbm_cap_bytes / GIB, 2) == 14.49
    assert kv.kv_pool_bytes == 5_923_602_432
    assert round(kv.kv_pool_bytes / GIB, 2) == 5.52
    assert round(GEMMA_4_E2B_IT.weights_bytes / GIB, 2) == 8.97
    assert round(kv.outside_cap_bytes / GIB, 2) == 1.26


@pytest.mark.parametrize(
    ("max_model_len", "block_size", "blocks", "tokens"),
    [(16384, 32, 10_043, 321_376), (32768, 64, 5_021, 321_344)],
)
def test_kv_tokens_in_whole_blocks(max_model_len, block_size, blocks, tokens):
    kv = chip_memory.kv_budget(GEMMA_4_E2B_IT, 0.92, max_model_len)
    assert (kv.block_size, kv.kv_blocks, kv.kv_tokens) == (block_size, blocks, tokens)
    assert max_model_len // kv.block_size == chip_memory.BLOCKS_PER_REQUEST


def test_pinned_pool_gives_the_same_tokens():
    kv = chip_memory.kv_budget(GEMMA_4_E2B_IT, 0.92, 16384, kv_pool_override_bytes=5_923_602_432)
    assert kv.kv_tokens == 321_376


def test_0_95_sizes_as_the_log_predicted():
    kv = chip_memory.kv_budget(GEMMA_4_E2B_IT, 0.95, 32768)
    assert round(kv.hbm_cap_bytes / GIB, 2) == 14.96
    assert round(kv.kv_pool_bytes / GIB, 2) == 5.99
    assert kv.kv_tokens == 348_864


def test_load_rule_of_thumb_is_about_250k_tokens():
    kv = chip_memory.kv_budget(GEMMA_4_E2B_IT, 0.92, 32768)
    assert 249_000 < kv.load_limit_tokens < 251_000


@pytest.mark.parametrize(
    ("pricing", "rate"),
    [("spot", 0.5779), ("flex-start", 0.6), ("on-demand", 1.2), ("1-year", 0.84), ("3-year", 0.54)],
)
def test_cost_per_hour(pricing, rate):
    assert spending.cost_per_hour_usd(pricing) == pytest.approx(rate)


def test_max_spend_of_one_four_hour_flex_start_run():
    assert spending.max_spend_usd("flex-start", 4 * 3600) == pytest.approx(2.40)


@pytest.mark.parametrize(("pricing", "usd"), [("flex-start", 0.111), ("spot", 0.107), ("on-demand", 0.223)])
def test_usd_per_million_output_tokens_at_peak(pricing, usd):
    assert round(spending.usd_per_million_output_tokens(pricing, 1496.5), 3) == usd


def test_forgotten_weekend_on_spot_is_about_35_dollars():
    assert round(spending.forgotten_weekend_usd("spot")) == 35


def test_unknown_model_has_no_geometry():
    assert chip_memory.geometry_for("meta-llama/Llama-3-8B") is None
    assert chip_memory.geometry_for("google/gemma-4-E2B-it") is GEMMA_4_E2B_IT


@pytest.mark.parametrize(("value", "bucket"), [(2496, 4096), (4096, 4096), (2048, 2048), (3000, 4096), (17, 32)])
def test_token_budget_rounds_up_to_power_of_two_bucket(value, bucket):
    assert chip_memory.next_power_of_two(value) == bucket


def test_the_cache_disk_bills_by_the_gb_month_run_or_no_run():
    # pd-balanced in us-west4: $0.11 per GB-month; the default 50 GB disk.
    assert price_list.USD_PER_GB_MONTH["pd-balanced"] == 0.11
    assert spending.disk_usd_per_month("pd-balanced", 50) == pytest.approx(5.50)
    # Its share of one 4-hour run: 4 of the billing month's 730 hours.
    assert spending.disk_usd_for_seconds("pd-balanced", 50, 4 * 3600) == pytest.approx(5.50 * 4 / 730)
    assert spending.max_spend_with_disk_usd("flex-start", 4 * 3600, "pd-balanced", 50) == pytest.approx(2.4301,
                                                                                                     abs=1e-4)


def test_secret_versions_are_priced_per_month():
    assert price_list.USD_PER_SECRET_VERSION_MONTH == 0.06
    assert price_list.FREE_SECRET_VERSIONS_PER_MONTH == 6


@pytest.mark.parametrize("keep", [False, True])
def test_the_disk_billing_sentence_says_when_billing_stops(keep):
    text = cost_lines.cache_disk_billing("pd-balanced", 100, keep, disk_name="tpu-vllm-dev-cache", zone="us-west4-a",
                                     project="proj")
    assert text.startswith("pd-balanced 100 GB x $0.11/GB-month = $11.00/month from creation until deleted, "
                           "whether or not a run is active; ")
    if keep:
        assert text.endswith("it outlives pulumi destroy and bills on until you delete it: gcloud compute disks "
                             "delete tpu-vllm-dev-cache --zone=us-west4-a --project=proj")
    else:
        assert text.endswith("; pulumi destroy deletes it")
