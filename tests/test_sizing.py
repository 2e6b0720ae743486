"""Sizing: tpu-inference's padding rules, the page size, the pool, and the two measured pools reproduced."""

from __future__ import annotations

import pytest

from components import catalog, sizing
from components.basis import chip_memory

E2B = "google/gemma-4-E2B-it"


def model(name: str) -> catalog.CatalogModel:
    return catalog.catalog_model(name)


@pytest.mark.parametrize(("head_dim", "padded"), [(64, 64), (80, 128), (128, 128), (192, 256), (256, 256),
                                                  (512, 512)])
def test_head_dim_pads_to_128_but_64_stays(head_dim, padded):
    assert sizing.padded_head_dim(head_dim) == padded


def test_kv_heads_pad_up_to_the_tensor_parallel_size():
    assert sizing.padded_kv_heads(1, 4) == 4
    assert sizing.padded_kv_heads(8, 4) == 8
    with pytest.raises(sizing.SizingError):
        sizing.padded_kv_heads(3, 2)


def test_an_fp8_cache_packs_into_the_same_words_for_one_kv_head():
    # The log: fp8 KV is 1.000x capacity, "(32, 1, 2, 256) -> (32, 1, 4, 256)".
    geometry = model(E2B).geometry
    assert sizing.kv_bytes_per_token(geometry, 1, "fp8") == sizing.kv_bytes_per_token(geometry, 1, "auto") == 18_432
    # With 8 KV heads the narrower element does halve the bytes.
    qwen = model("Qwen/Qwen3-8B").geometry
    assert sizing.kv_bytes_per_token(qwen, 1, "fp8") * 2 == sizing.kv_bytes_per_token(qwen, 1, "auto")


def test_one_kv_head_makes_more_chips_store_it_again():
    geometry = model(E2B).geometry
    assert [sizing.kv_bytes_per_token(geometry, tp) for tp in (1, 2, 4, 8)] == [18_432, 36_864, 73_728, 147_456]
    result = sizing.fit(model(E2B), catalog.shape("v6e-4"), 32768, tensor_parallel_size=4)
    assert result.data_parallel_size == 1 and result.kv_replication == 4
    assert any("stored 4 times" in note for note in result.notes)


def test_head_dim_64_uses_the_128_lane_layout():
    # kernel_hd64: K and V of 8 heads share 128 lanes per head: 8 x 128 x 2 B = 2 x 8 x 64 x 2 B.
    assert sizing.layer_bytes_per_token(64, 8, 1, 16) == 2 * 8 * 64 * 2
    assert sizing.layer_bytes_per_token(80, 8, 1, 16) == 2 * 8 * 128 * 2


@pytest.mark.parametrize(("max_model_len", "block"), [(32768, 64), (16384, 32), (65536, 128), (131072, 256),
                                                      (8192, 256), (2048, 128), (128, 16)])
def test_the_page_size_tpu_inference_picks(max_model_len, block):
    assert sizing.block_size(max_model_len) == block


def test_e2b_on_v5e_1_is_the_logs_pool_exactly_and_todays_budget():
    result = sizing.fit(model(E2B), catalog.shape("v5litepod-1"), 32768)
    assert result.fits and result.tensor_parallel_size == 1
    assert result.figures["kv_tokens"].value == 321_344
    assert result.figures["kv_tokens_measured"].value == 321_344
    assert result.figures["kv_blocks"].value == 5_021
    budget = chip_memory.kv_budget(chip_memory.GEMMA_4_E2B_IT, 0.92, 32768)
    assert (budget.kv_tokens, budget.kv_pool_bytes, budget.kv_bytes_per_token) == (
        result.figures["kv_tokens"].value, result.figures["kv_pool"].value, result.figures["kv_bytes_per_token"].value)


@pytest.mark.parametrize(("shape", "measured"), [("v5litepod-1", 321_344), ("v6e-1", 1_151_744)])
def test_both_measured_pools_reproduced_within_a_tenth_of_a_percent(shape, measured):
    computed = sizing.fit(model(E2B), catalog.shape(shape), 32768).figures["kv_tokens"].value
    assert abs(computed - measured) / measured < 0.001


def test_every_figure_says_measured_with_a_source_or_computed_with_a_formula():
    result = sizing.fit(model(E2B), catalog.shape("v6e-1"), 32768)
    assert result.figures["hbm"].measured and "boot.log" in result.figures["hbm"].basis
    assert result.figures["kv_tokens_measured"].how.startswith("measured: ")
    assert result.figures["kv_tokens"].how.startswith("computed: int(kv_blocks / ceil(max_model_len / block_size)")
    assert all(figure.basis for figure in [*result.figures.values(), *result.usd_per_hour.values(),
                                           *result.max_run_usd.values()])


def test_e4b_fits_v6e_1_and_not_v5e_1():
    # The v6e article: "E4B fits at bf16 here and does not on v5e".
    assert sizing.fit(model("google/gemma-4-E4B-it"), catalog.shape("v6e-1"), 32768).fits
    refused = sizing.fit(model("google/gemma-4-E4B-it"), catalog.shape("v5litepod-1"), 32768)
    assert not refused.fits and "fill the cap" in refused.reasons[0]
    assert sizing.smallest_fitting_shape(model("google/gemma-4-E4B-it"), 32768).accelerator_type == "v6e-1"


def test_a_pool_smaller_than_one_request_does_not_fit():
    result = sizing.fit(model("Qwen/Qwen3-30B-A3B"), catalog.shape("v5litepod-4"), 32768)
    assert not result.fits and "less than one 32,768-token request" in result.reasons[0]
    assert sizing.fit(model("Qwen/Qwen3-30B-A3B"), catalog.shape("v5litepod-4"), 8192).fits


def test_kv_tokens_are_vllms_capacity_when_the_page_does_not_divide_the_context():
    # 1000 tokens take 16 pages of 64: vLLM reports pages / 16 x 1000, not pages x 64.
    result = sizing.fit(model(E2B), catalog.shape("v5litepod-1"), 1000)
    blocks, block = result.figures["kv_blocks"].value, result.figures["block_size"].value
    assert block == 64
    assert result.figures["kv_tokens"].value == int(blocks / 16 * 1000) < blocks * block


def test_past_the_models_context_does_not_fit():
    result = sizing.fit(model("Qwen/Qwen3-8B"), catalog.shape("v6e-8"), 65536)
    assert not result.fits and "past the model's context (40960" in result.reasons[0]


def test_the_tensor_parallel_size_is_the_whole_host_when_the_heads_split():
    assert sizing.tensor_parallel_choices(model("Qwen/Qwen3-30B-A3B").geometry, 8) == (1, 2, 4, 8)
    geometry = catalog.geometry_from_config({"num_hidden_layers": 1, "num_attention_heads": 6, "hidden_size": 768,
                                             "num_key_value_heads": 3})
    assert sizing.tensor_parallel_choices(geometry, 8) == (1,)
    assert sizing.fit(sizing.ModelSpec("six-heads", geometry, None, None),
                      catalog.shape("v6e-8"), 1024).tensor_parallel_size == 1


def test_clients_follow_the_78_percent_rule():
    result = sizing.fit(model(E2B), catalog.shape("v5litepod-1"), 32768, context_tokens=8192, clients=64)
    assert result.figures["clients"].value == int(321_344 * 0.78) // 8192 == 30
    assert any("64 clients x 8,192 tokens" in note for note in result.notes)


def test_costs_per_provisioning_model_and_one_runs_most():
    result = sizing.fit(model(E2B), catalog.shape("v6e-4"), 32768, run_hours=4)
    assert result.usd_per_hour["flex-start"].value == pytest.approx(4 * 1.35)
    assert result.max_run_usd["flex-start"].value == pytest.approx(4 * 4 * 1.35)
    assert result.max_run_usd["spot"].value is None
    elsewhere = sizing.fit(model(E2B), catalog.shape("v6e-1"), 32768, region="asia-east1")
    assert elsewhere.usd_per_hour == {} and any("no v6e price read for asia-east1" in note for note in elsewhere.notes)


def test_the_serve_flags_are_what_the_fit_decided():
    result = sizing.fit(model("Qwen/Qwen3-30B-A3B"), catalog.shape("v6e-4"), 32768)
    assert result.serve_flags() == {"--max-model-len": "32768", "--tensor-parallel-size": "4",
                                    "--tool-call-parser": "hermes", "--reasoning-parser": "qwen3"}
    llama = sizing.fit(model("meta-llama/Llama-3.1-8B-Instruct"), catalog.shape("v6e-1"), 32768).serve_flags()
    assert "--reasoning-parser" not in llama and llama["--tool-call-parser"] == "llama3_json"


def test_an_unknown_kv_dtype_is_refused_by_name():
    with pytest.raises(sizing.SizingError, match="'int8'"):
        sizing.fit(model(E2B), catalog.shape("v6e-1"), 32768, kv_cache_dtype="int8")


def test_any_config_sizes_and_asks_for_weights_it_cannot_count(tmp_path):
    path = tmp_path / "my-gemma" / "config.json"
    path.parent.mkdir()
    path.write_text((catalog.models.CONFIGS / model(E2B).config_file).read_text())
    spec = sizing.ModelSpec.from_config_file(path)
    assert (spec.name, spec.weights, spec.family.tool_call_parser) == (str(path), None, "gemma4")
    unknown = sizing.fit(spec, catalog.shape("v6e-1"), 32768)
    assert not unknown.fits and "weights' size is not known" in unknown.reasons[0]
    given = sizing.fit(sizing.ModelSpec.from_config_file(path, weights_bytes=model(E2B).weights.bytes),
                       catalog.shape("v6e-1"), 32768)
    assert given.fits and given.figures["kv_tokens"].value == 1_151_488
    weights = given.figures["weights"]
    assert weights.how == "given: the bytes given with the config" and not weights.measured


@pytest.mark.parametrize("point", catalog.measured_pools(), ids=lambda p: f"{p.accelerator_type}-{p.max_model_len}")
def test_every_measured_point_is_reproduced_within_a_tenth_of_a_percent(point):
    result = sizing.fit(model(point.model), catalog.shape(point.accelerator_type), point.max_model_len,
                        gpu_memory_utilization=point.gpu_memory_utilization)
    assert result.figures["block_size"].value == point.block_size
    assert abs(result.figures["kv_tokens"].value - point.kv_tokens) / point.kv_tokens < 0.001
    assert result.figures["kv_tokens_measured"].value == point.kv_tokens


def test_vllm_dtype_float32_doubles_the_kv_bytes_per_token_and_the_weights():
    # tpu-inference allocates an auto KV cache in the model's dtype and vLLM loads the weights in it (kv.py).
    e2b, v6e = model(E2B), catalog.shape("v6e-1")
    bf16, fp32 = sizing.fit(e2b, v6e, 32768), sizing.fit(e2b, v6e, 32768, dtype="float32")
    assert bf16.figures["kv_bytes_per_token"].value == 18_432
    assert fp32.figures["kv_bytes_per_token"].value == 36_864
    assert fp32.figures["weights"].value == 2 * bf16.figures["weights"].value
    assert not fp32.figures["weights"].measured and "--dtype float32" in fp32.figures["weights"].how
    # the boots measured bf16: no measured pool stands in for a float32 one
    assert fp32.measured_point is None and "kv_tokens_measured" not in fp32.figures
    assert not sizing.fit(e2b, catalog.shape("v5litepod-1"), 32768, dtype="float32").fits
    # an fp8 cache is fp8 whatever the model's dtype
    assert (sizing.fit(e2b, v6e, 32768, kv_cache_dtype="fp8", dtype="float32").figures["kv_bytes_per_token"].value
            == sizing.fit(e2b, v6e, 32768, kv_cache_dtype="fp8").figures["kv_bytes_per_token"].value)


def test_a_float16_checkpoint_vllm_refuses_float16_for_is_served_bfloat16_under_auto_and_refused_only_when_named():
    # vllm/config/model.py: _resolve_auto_dtype filters the platform's dtypes through _is_valid_dtype ("Falling back
    # to"), while a named float16 meets _check_valid_dtype's ValueError.
    from components.sizing import kv
    assert kv.served_dtype("auto", "float16", "gemma3") == "bfloat16"
    assert kv.served_dtype("auto", "float16", "qwen3") == "float16"
    assert kv.served_dtype("bfloat16", "float16", "gemma3") == "bfloat16"
    with pytest.raises(kv.SizingError, match="does not support float16"):
        kv.served_dtype("float16", "bfloat16", "gemma3")
