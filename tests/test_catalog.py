"""The catalog: shapes, prices, models and measured points as cited data, and the old names that read them."""

from __future__ import annotations

import json

import pytest

from components import catalog
from components.basis import chip_memory, price_list
from components.catalog import geometry as catalog_geometry
from components.catalog import models as catalog_models
from components.settings import facts

GIB = 1024**3


def test_eight_single_host_shapes_with_their_gke_machines_and_topologies():
    table = {shape.accelerator_type: (shape.chips, shape.gke_machine_type, shape.gke_topology, shape.gke_tpu_count)
             for shape in catalog.all_shapes()}
    assert table == {
        "v5litepod-1": (1, "ct5lp-hightpu-1t", "1x1", 1), "v5litepod-4": (4, "ct5lp-hightpu-4t", "2x2", 4),
        "v5litepod-8": (8, "ct5lp-hightpu-8t", "2x4", 8), "v6e-1": (1, "ct6e-standard-1t", "1x1", 1),
        "v6e-4": (4, "ct6e-standard-4t", "2x2", 4), "v6e-8": (8, "ct6e-standard-8t", "2x4", 8),
        "tpu7x-standard-1t": (1, "tpu7x-standard-1t", "1x1x1", 1),
        "tpu7x-standard-4t": (4, "tpu7x-standard-4t", "2x2x1", 4),
    }
    assert catalog.shape("v5e-1") is None  # prose, never an API value
    assert catalog.shape_for_gke_machine("ct6e-standard-4t").accelerator_type == "v6e-4"


def test_hbm_is_what_the_runtime_reported_not_the_marketing_figure():
    assert catalog.shape("v5litepod-8").hbm_bytes_per_chip == int(15.75 * GIB)
    assert catalog.shape("v6e-1").hbm_bytes_per_chip == int(31.24 * GIB)
    assert catalog.shape("v6e-4").hbm_bytes == 4 * int(31.24 * GIB)
    # Every generation a boot has run on sizes against what its runtime reported; TPU7x (no boot yet) against
    # Google's 192 GiB, marked given, never measured.
    assert all(shape.generation.hbm_measured and shape.generation.hbm_source.date for shape in catalog.all_shapes()
               if shape.generation.name != "TPU7x")
    assert not catalog.shape("tpu7x-standard-4t").generation.hbm_measured


def test_v6e_takes_only_hyperdisk_and_v5e_pd_balanced():
    assert catalog.shape("v6e-1").cache_disk_type == "hyperdisk-balanced"
    assert "pd-balanced" not in catalog.shape("v6e-8").generation.data_disk_types
    # Google's storage-options page: "TPU v5e Balanced Persistent Disk, Hyperdisk ML"; the stack's is the first.
    assert catalog.shape("v5litepod-1").generation.data_disk_types == ("pd-balanced", "hyperdisk-ml")
    assert catalog.shape("v5litepod-1").cache_disk_type == "pd-balanced"


def test_flex_start_observations_are_dated_and_inside_the_zones_the_type_exists_in():
    for generation in (catalog.shape("v5litepod-1").generation, catalog.shape("v6e-1").generation):
        for seen in generation.flex_start:
            assert seen.zone in generation.zones and seen.source.date
    v6e = catalog.shape("v6e-1")
    assert v6e.flex_start_accepted_zones == {"us-east5-a", "us-east5-b", "europe-west4-a"}
    assert v6e.flex_start_refused_zones == {"us-central1-b", "us-south1-a"}
    assert v6e.runtime_version == "v2-alpha-tpuv6e"
    assert (v6e.generation.quota_id, v6e.generation.spot_quota_id) == (
        "TPUV6EPerProjectPerZoneForTPUAPI", "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI")


def test_the_old_names_read_the_catalog_unchanged():
    # Moved, not duplicated: what settings, costs and the plans read before the catalog existed, to the value.
    assert facts.FLEX_START_VERIFIED_ZONES == {"us-west4-a"}
    assert facts.FLEX_START_REJECTING_ZONES == {"europe-west4-a", "europe-west4-b"}
    assert facts.V5E_ZONES == {"us-central1-a", "us-south1-a", "us-west1-c", "us-west4-a", "us-west4-b",
                               "us-east5-a", "us-east5-b", "us-east5-c", "europe-west4-a", "europe-west4-b"}
    assert facts.GKE_V5E_ONE_CHIP_MACHINE == "ct5lp-hightpu-1t"
    assert price_list.USD_PER_CHIP_HOUR == {"spot": 0.5779, "flex-start": 0.6, "on-demand": 1.2, "1-year": 0.84,
                                            "3-year": 0.54}
    assert list(price_list.USD_PER_CHIP_HOUR) == ["spot", "flex-start", "on-demand", "1-year", "3-year"]
    assert price_list.USD_PER_GB_MONTH == {"pd-balanced": 0.11}
    assert chip_memory.V5E_HBM_BYTES == 16_911_433_728
    assert chip_memory.GEMMA_4_E2B_IT.weights_bytes == 9_634_916_597
    assert chip_memory.KV_LOAD_RULE_OF_THUMB == 0.78


def test_prices_keep_their_source_and_v6e_spot_is_dearer_than_flex_start():
    v6e = catalog.chip_prices("v6e", "us-east5")
    assert (v6e["flex-start"].usd_per_chip_hour, v6e["spot"].usd_per_chip_hour) == (1.35, 1.4033)
    assert v6e["spot"].usd_per_chip_hour > v6e["flex-start"].usd_per_chip_hour
    assert catalog.chip_price("v5e", "us-west4", "flex-start").usd_per_chip_hour == 0.60
    assert catalog.chip_price("v6e", "us-west4", "flex-start") is None  # never guessed
    # The Compute Engine article's europe-west4 column, where its flex-start instance ran.
    west4 = catalog.chip_prices("v6e", "europe-west4")
    assert {model: price.usd_per_chip_hour for model, price in west4.items()} == {
        "flex-start": 1.35, "spot": 1.78, "on-demand": 2.97}
    assert "devto-tpu-api-vs-gce-provisioning.md" in west4["flex-start"].source.where
    assert catalog.disk_price("hyperdisk-balanced", "us-east5") is None
    assert all(price.source.where and price.source.date for price in catalog.prices.CHIP_PRICES)


def test_at_least_six_models_each_with_a_cited_config_copy():
    models = catalog.catalog_models()
    assert len(models) >= 6
    names = {model.name for model in models}
    assert {"google/gemma-4-E2B-it", "google/gemma-4-E4B-it", "Qwen/Qwen3-8B", "Qwen/Qwen3-30B-A3B"} <= names
    assert any(name.startswith("meta-llama/Llama-3") for name in names)
    for model in models:
        assert model.config_source.where and model.config_source.date
        assert json.loads((catalog_models.CONFIGS / model.config_file).read_text()) == model.config
        assert model.weights.bytes > 0 and model.weights.basis


def test_catalogued_llama_ids_are_chat_checkpoints():
    # Meta's base Llama checkpoints ship no chat template; vLLM 0.33.0 answers a chat request to such a tokenizer with
    # 400 (vllm/renderers/hf.py ChatTemplateResolutionError), so a catalogued Llama must be an -Instruct id.
    llamas = [model.name for model in catalog.catalog_models() if model.family is catalog_models.LLAMA_3]
    assert llamas and all(name.endswith("-Instruct") for name in llamas), llamas


def test_e2b_geometry_is_the_logs_table():
    # Both logs: 35 layers, i % 5 == 4 full, 20 KV-shared, so 15 own a cache: 12 sliding at head_dim 256 and
    # 3 full at 512, one KV head; the shared ones read layer 13 (sliding) or 14 (full).
    geometry = catalog.catalog_model("google/gemma-4-E2B-it").geometry
    assert [layer.index for layer in geometry.kv_layers] == list(range(15))
    assert sorted((layer.layer_type, layer.head_dim, layer.kv_heads) for layer in geometry.kv_layers) == (
        [("full_attention", 512, 1)] * 3 + [("sliding_attention", 256, 1)] * 12)
    assert geometry.kv_shared_layers == {index: 14 if index % 5 == 4 else 13 for index in range(15, 35)}
    assert geometry.max_context_tokens == 131_072


def test_e4b_has_two_kv_heads_and_24_cache_owning_layers():
    geometry = catalog.catalog_model("google/gemma-4-E4B-it").geometry
    assert len(geometry.kv_layers) == 24 and geometry.kv_heads == {2}
    assert geometry.head_dims == {256, 512}


def test_a_config_without_the_kv_share_fields_owns_every_layer():
    config = dict(catalog.catalog_model("google/gemma-4-E2B-it").config)
    config["text_config"] = {key: value for key, value in config["text_config"].items()
                             if key != "num_kv_shared_layers"}
    assert len(catalog.geometry_from_config(config).kv_layers) == 35


@pytest.mark.parametrize("name", sorted(catalog_models.INDEX_TOTALS))
def test_weights_counted_from_the_config_are_the_safetensors_index_total(name):
    total, source = catalog_models.INDEX_TOTALS[name]
    assert source
    assert catalog.catalog_model(name).weights.bytes == total


def gpt_oss_checkpoint_bytes(config: dict) -> int:
    """gpt-oss's safetensors tensors from its config: bf16 embeddings, head, norms, attention (with biases and sinks)
    and router; each expert's gate_up and down projections as MXFP4 blocks (16 bytes per 32 values), one scale byte
    per 32 values and a bf16 bias (transformers' GptOss checkpoint layout: *_blocks, *_scales, *_bias)."""
    hidden, inner, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    heads, kv_heads, head_dim = config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]
    experts, vocab, bf16 = config["num_local_experts"], config["vocab_size"], 2
    attention = (2 * heads * head_dim * hidden + heads * head_dim + hidden + heads
                 + 2 * (kv_heads * head_dim * hidden + kv_heads * head_dim)) * bf16
    router = (experts * hidden + experts) * bf16
    gate_up = experts * 2 * inner * (hidden // 32 * 17 + bf16)
    down = experts * hidden * (inner // 32 * 17 + bf16)
    per_layer = attention + 2 * hidden * bf16 + router + gate_up + down
    return 2 * vocab * hidden * bf16 + hidden * bf16 + layers * per_layer


def test_gpt_oss_weights_are_the_checkpoints_index_totals_recomputed_from_the_config():
    # One rule lands on gpt-oss-20b's stored index total and on the figure cited for gpt-oss-120b, to the byte.
    for name in ("openai/gpt-oss-20b", "openai/gpt-oss-120b"):
        model = catalog.catalog_model(name)
        assert gpt_oss_checkpoint_bytes(model.config) == model.weights.bytes, name
    assert catalog.catalog_model("openai/gpt-oss-120b").weights.bytes == catalog_models.GPT_OSS_120B_INDEX_TOTAL


def test_the_release_matrix_models_are_catalogued_with_their_hybrid_layers():
    gemma = catalog.catalog_model("google/gemma-3-27b-it").geometry
    kinds = [layer.layer_type for layer in gemma.kv_layers]
    # Gemma3TextConfig's default pattern (sliding unless (i + 1) % 6 == 0) on 62 layers: 10 full, 52 sliding.
    assert (kinds.count("full_attention"), kinds.count("sliding_attention")) == (10, 52)
    assert gemma.sliding_window == 1024 and gemma.max_context_tokens == 131072 and gemma.kv_heads == {16}
    oss = catalog.catalog_model("openai/gpt-oss-120b").geometry
    assert len(oss.kv_layers) == 36 and oss.sliding_window == 128 and oss.head_dims == {64}
    llama = catalog.catalog_model("meta-llama/Llama-3.3-70B-Instruct")
    assert llama.geometry.kv_heads == {8} and len(llama.geometry.kv_layers) == 80
    assert catalog.catalog_model("google/gemma-3-27b-it").family.tool_call_parser is None


def test_weights_count_is_none_for_a_layout_it_does_not_know():
    assert catalog.catalog_model("google/gemma-4-E2B-it").geometry.parameter_count is None
    assert catalog.catalog_model("google/gemma-4-E2B-it").weights.measured


@pytest.mark.parametrize(("text", "said"), [
    ('{"num_hidden_layers": 2}', "num_attention_heads is missing"),
    ("[1, 2]", "holds a JSON list"),
    ("{not json", "is not JSON"),
    ('{"num_hidden_layers": 2, "num_attention_heads": 2, "kv_lora_rank": 512}', "multi-head latent attention"),
    ('{"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 8, "layer_types": ["linear_attention", '
     '"full_attention"]}', "linear_attention"),
])
def test_a_config_it_cannot_size_is_refused_in_words(tmp_path, text, said):
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(catalog.ConfigError) as caught:
        catalog.geometry_from_file(path)
    assert said in str(caught.value)


def test_a_missing_config_names_the_file(tmp_path):
    with pytest.raises(catalog.ConfigError, match="nowhere.json: cannot read it"):
        catalog.geometry_from_file(tmp_path / "nowhere.json")


def test_a_context_scaled_by_a_linear_rope_factor_and_not_by_llama3():
    text = {"max_position_embeddings": 4096, "rope_scaling": {"rope_type": "linear", "factor": 4.0}}
    assert catalog_geometry.max_context(text) == 16384
    assert catalog_geometry.max_context({**text, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}) == 4096


def test_measured_pools_are_the_logs():
    v5e = catalog.measured_pool("google/gemma-4-E2B-it", "v5litepod-1", 32768)
    v6e = catalog.measured_pool("google/gemma-4-E2B-it", "v6e-1", 32768)
    assert (v5e.kv_tokens, v5e.block_size, v5e.kv_blocks) == (321_344, 64, 5_021)
    assert (v6e.kv_tokens, v6e.block_size, v6e.kv_blocks) == (1_151_744, 64, 17_996)
    assert catalog.measured_pool("google/gemma-4-E2B-it", "v6e-1", 32768, gpu_memory_utilization=0.95) is None
    assert catalog.measured_on("google/gemma-4-E2B-it", "v6e-1")
    assert not catalog.measured_on("Qwen/Qwen3-8B", "v6e-1")


def test_a_gemma_3_config_given_by_path_is_of_the_gemma_3_family_and_a_text_only_one_takes_no_image():
    # A config's model_type decides the family when it is given by path (vllm.modelConfig): gemma3 is the
    # multimodal checkpoint (its image tower), gemma3_text the text-only one, which must not be given images.
    from components.catalog.models import GEMMA_3, family_for
    assert family_for("gemma3") is GEMMA_3 and "image" in GEMMA_3.modalities
    assert family_for("gemma3_text") is None
