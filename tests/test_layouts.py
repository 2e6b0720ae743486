"""The layout planner (components/sizing/layouts.py) and its rate model (components/sizing/rate.py): every
tensor-parallel x data-parallel split of a host, the computed rate calibrated on the build log's one chip, and
the choice."""

from __future__ import annotations

import dataclasses

import pytest

from components import catalog, sizing
from components.sizing import layouts, rate

E2B = "google/gemma-4-E2B-it"


def model(name: str) -> catalog.CatalogModel:
    return catalog.catalog_model(name)


def test_e2b_on_eight_v5e_chips_is_eight_copies_of_the_measured_server():
    result = sizing.fit(model(E2B), catalog.shape("v5litepod-8"), 32768)
    assert (result.tensor_parallel_size, result.data_parallel_size) == (1, 8)
    assert result.kv_tokens >= 2_570_752 == 8 * 321_344
    assert result.kv_tokens_per_replica == 321_344
    assert result.serve_flags()["--data-parallel-size"] == "8"
    assert result.figures["clients"].value == 8 * (int(321_344 * 0.78) // 32768)


def test_e2b_on_v6e_8_holds_eight_measured_v6e_1_pools():
    result = sizing.fit(model(E2B), catalog.shape("v6e-8"), 32768)
    assert (result.tensor_parallel_size, result.data_parallel_size) == (1, 8)
    assert result.kv_tokens >= 9_213_952 == 8 * 1_151_744
    measured = result.figures["kv_tokens_measured"]
    assert measured.measured and "a v6e-1 boot, per replica" in measured.basis
    assert not result.measured_here  # nobody booted it on v6e-8: the pool is the v6e-1 boot's, per replica


def test_a_model_too_large_for_one_chip_keeps_the_tensor_parallelism_it_needs():
    result = sizing.fit(model("Qwen/Qwen3-32B"), catalog.shape("v6e-8"), 32768)
    assert result.fits and result.tensor_parallel_size >= 2
    too_small = [candidate for candidate in sizing.all_layouts(model("Qwen/Qwen3-32B"), catalog.shape("v6e-8"), 32768)
                 if candidate.tensor_parallel_size is not None and candidate.tensor_parallel_size < 4]
    assert too_small and not any(candidate.fits for candidate in too_small)


def test_the_default_single_chip_plan_has_one_layout():
    candidates = sizing.all_layouts(model(E2B), catalog.shape("v5litepod-1"), 32768)
    assert [(c.tensor_parallel_size, c.data_parallel_size) for c in candidates] == [(1, 1)]
    assert "--data-parallel-size" not in candidates[0].serve_flags()


@pytest.mark.parametrize("shape_name", [shape.accelerator_type for shape in catalog.all_shapes()])
@pytest.mark.parametrize("model_name", [entry.name for entry in catalog.catalog_models()])
def test_every_layout_spends_the_whole_host_at_a_size_the_heads_split_over(model_name, shape_name):
    host = catalog.shape(shape_name)
    choices = sizing.tensor_parallel_choices(model(model_name).geometry, host.devices)
    for candidate in sizing.all_layouts(model(model_name), host, 32768):
        assert candidate.tensor_parallel_size * candidate.data_parallel_size == host.devices
        assert candidate.tensor_parallel_size in choices
        if candidate.fits:
            assert candidate.output_rate is not None and candidate.output_rate.how.startswith("computed: step = ")
            if candidate.usd_per_hour:
                assert candidate.usd_per_million_output["flex-start"].how.startswith("computed: flex-start $/hour / ")
            else:
                # No price read for the chip (TPU7x): no $ figure stands in for it.
                assert candidate.usd_per_million_output == {}


def test_the_rate_reproduces_the_logs_single_chip_figures():
    # The log: TPOT 8.02 ms and 125 tokens/s per stream at one client; 1,496.5 tokens/s at 64 clients x 128.
    kv = sizing.kv_bytes_per_token(model(E2B).geometry, 1)
    chip = catalog.shape("v5litepod-1")
    one = rate.predict(E2B, model(E2B).weights.bytes, kv, chip, 1, 1, 321_344, 1, 128)
    assert round(one.step_seconds * 1000, 2) == 8.02 and round(one.output_tokens_per_second) == 125
    many = rate.predict(E2B, model(E2B).weights.bytes, kv, chip, 1, 1, 321_344, 64, 128)
    assert round(many.output_tokens_per_second, 1) == 1496.5 and many.batch_per_replica == 64
    # Its cost table, "128 ctx, 64 clients 1,496.5 | $0.107 | $0.111 | $0.223" (spot, flex-start, on-demand).
    prices = catalog.chip_prices("v5e", "us-west4")
    assert [round(rate.usd_per_million(prices[name].usd_per_chip_hour, many.output_tokens_per_second), 3)
            for name in ("spot", "flex-start", "on-demand")] == [0.107, 0.111, 0.223]


def test_the_rate_admits_what_the_pool_holds_and_no_more():
    kv = sizing.kv_bytes_per_token(model(E2B).geometry, 1)
    chip = catalog.shape("v5litepod-1")
    crowded = rate.predict(E2B, model(E2B).weights.bytes, kv, chip, 1, 1, 321_344, 64, 32768)
    assert crowded.batch_per_replica == int(321_344 * 0.78) // 32768 == crowded.clients_served
    spread = rate.predict(E2B, model(E2B).weights.bytes, kv, catalog.shape("v5litepod-8"), 1, 8, 321_344, 64, 32768)
    assert spread.batch_per_replica == 7 and spread.clients_served == 56
    assert rate.predict(E2B, 1, kv, dataclasses.replace(chip, generation=dataclasses.replace(
        chip.generation, hbm_bandwidth_bytes_per_second=0)), 1, 1, 321_344, 1, 128) is None


def test_the_rate_does_not_let_tensor_parallelism_beat_the_fixed_step_cost():
    # The log: half of the 8.02 ms is fixed per step. Eight chips read an eighth each, and still pay it.
    kv = sizing.kv_bytes_per_token(model(E2B).geometry, 8)
    eight = rate.predict(E2B, model(E2B).weights.bytes, kv, catalog.shape("v5litepod-8"), 8, 1, 778_752, 1, 128)
    assert eight.step_seconds > (rate.LOG_SINGLE_STREAM_MS - rate.LOG_FLOOR_MS) / 1000
    assert eight.output_tokens_per_second < 2 * 125


def test_ties_go_to_fewer_replicas_and_a_cheaper_layout_wins():
    candidates = sizing.all_layouts(model(E2B), catalog.shape("v5litepod-8"), 32768)
    by_replicas = {candidate.data_parallel_size: candidate for candidate in candidates}
    same = dataclasses.replace(by_replicas[8], usd_per_million_output=by_replicas[4].usd_per_million_output)
    assert layouts.chosen((same, by_replicas[4])).data_parallel_size == 4
    assert layouts.chosen((by_replicas[8], by_replicas[4])).data_parallel_size == 8
    # A layout that cannot hold one request is never chosen, however cheap it looks.
    broken = dataclasses.replace(by_replicas[4], fits=False, reasons=("too small",))
    assert layouts.chosen((broken, by_replicas[2])).data_parallel_size == 2


def test_the_planned_load_moves_the_choice():
    host = catalog.shape("v5litepod-8")
    alone = sizing.fit(model(E2B), host, 32768, clients=1, context_tokens=1024)
    crowd = sizing.fit(model(E2B), host, 32768, clients=256, context_tokens=1024)
    assert alone.tensor_parallel_size == 8 and alone.data_parallel_size == 1  # one stream: the fastest step wins
    assert crowd.tensor_parallel_size == 1 and crowd.data_parallel_size == 8


def test_a_given_size_sets_the_other_and_a_wrong_product_is_refused():
    host = catalog.shape("v5litepod-8")
    assert sizing.fit(model(E2B), host, 32768, data_parallel_size=2).tensor_parallel_size == 4
    assert sizing.fit(model(E2B), host, 32768, tensor_parallel_size=2).data_parallel_size == 4
    wrong = sizing.fit(model(E2B), host, 32768, tensor_parallel_size=2, data_parallel_size=2)
    assert not wrong.fits and "tensor-parallel 2 x data-parallel 2 is not this host's 8 devices" in wrong.reasons
    odd = sizing.fit(model(E2B), host, 32768, data_parallel_size=3)
    assert not odd.fits and odd.tensor_parallel_size is None


def test_shapes_count_devices_per_chip():
    host = catalog.shape("v6e-8")
    assert host.generation.devices_per_chip == 1 and host.devices == 8
    doubled = dataclasses.replace(host, generation=dataclasses.replace(host.generation, devices_per_chip=2))
    assert doubled.devices == 16 and doubled.hbm_bytes_per_device == host.hbm_bytes_per_chip // 2
