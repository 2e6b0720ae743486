"""Sliding windows by tpu-inference's model path (components/sizing/implementation.py): full-length pages on the JAX
path (Gemma 4, Llama, Qwen3 dense) or when head sizes differ; a vLLM-path model that keeps its windows (GPT-OSS,
vLLM-preferred; Gemma 3, not in the JAX registry) is planned as vLLM groups it (components/sizing/kv_groups.py;
tests/test_kv_groups_upstream.py holds the figures to vLLM's planner)."""

from __future__ import annotations

from components import catalog, sizing
from components.catalog import geometry_from_config
from components.catalog.models import Weights
from components.sizing import ModelSpec

GIB = 1024**3
# Shapes of the two upstream configs the second reader named (field names as in their config.json files).
GPT_OSS = {
    "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "num_hidden_layers": 24,
    "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64, "hidden_size": 2880,
    "sliding_window": 128, "max_position_embeddings": 131072,
    "layer_types": ["sliding_attention", "full_attention"] * 12,
}
GEMMA_3 = {
    "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
    "text_config": {"model_type": "gemma3_text", "num_hidden_layers": 48, "num_attention_heads": 16,
                    "num_key_value_heads": 8, "head_dim": 256, "hidden_size": 3840, "sliding_window": 1024,
                    "max_position_embeddings": 131072,
                    "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 8},
}


def spec(config: dict, name: str) -> ModelSpec:
    return ModelSpec(name, geometry_from_config(config), Weights(2 * GIB, False, "given for the test"), None)


def test_tpu_inference_picks_the_path_by_its_own_lists():
    assert sizing.model_implementation(("GptOssForCausalLM",)) == "vllm"  # JAX-registered but vLLM-preferred
    assert sizing.model_implementation(("Qwen3MoeForCausalLM",)) == "vllm"
    assert sizing.model_implementation(("Gemma3ForConditionalGeneration",)) == "vllm"  # not registered
    assert sizing.model_implementation(("Gemma4ForConditionalGeneration",)) == "flax_nnx"
    assert sizing.model_implementation(("LlamaForCausalLM",)) == "flax_nnx"


def test_a_vllm_path_model_that_keeps_its_windows_is_planned_in_groups():
    for config, name, groups in ((GPT_OSS, "gpt-oss", 2), (GEMMA_3, "gemma-3", 6)):
        result = sizing.fit(spec(config, name), catalog.shape("v6e-4"), 32768)
        assert result.fits and result.kv_tokens > 0, result.reasons
        assert result.figures["kv_groups"].value == groups
        assert "sliding-window" in result.figures["kv_groups"].basis


def test_full_length_pages_where_tpu_inference_allocates_them():
    # Gemma 4 on the JAX path: its windows get full pages, and the measured pool is reproduced.
    e2b = sizing.fit(catalog.catalog_model("google/gemma-4-E2B-it"), catalog.shape("v5litepod-1"), 32768)
    assert e2b.fits and e2b.figures["kv_tokens"].value == 321_344
    # Qwen3-MoE is on the vLLM path but has no window (use_sliding_window false).
    assert sizing.fit(catalog.catalog_model("Qwen/Qwen3-30B-A3B"), catalog.shape("v6e-8"), 32768).fits
    # A vLLM-path model whose head sizes differ: upstream disables its windows, so full pages are right.
    mixed = geometry_from_config({**GEMMA_3, "text_config": {**GEMMA_3["text_config"], "global_head_dim": 512}})
    plan = sizing.kv_groups.plan(mixed, 1, "auto", 16, 32768)
    assert mixed.head_dims == {256, 512} and not plan.windows_kept and len(plan.groups) == 1
    no_window = sizing.kv_groups.plan(geometry_from_config({**GPT_OSS, "sliding_window": None}), 1, "auto", 16, 32768)
    assert not no_window.hybrid


def test_an_mxfp4_checkpoints_load_transient_is_said_unknown_with_its_size():
    # tpu-inference's MXFP4 loader dequantizes a whole MoE layer to float32 before requantizing it: the plan cannot
    # know whether XLA holds that at once, so it says so, with the size computed from the config.
    [note] = [note for note in sizing.fit(catalog.catalog_model("openai/gpt-oss-20b"), catalog.shape("v6e-1"),
                                          32768).notes if note.startswith("unknown:")]
    assert "2.97 GiB" in note and f"{32 * 3 * 2880 * 2880:,} expert weights" in note
    big = sizing.fit(catalog.catalog_model("openai/gpt-oss-120b"), catalog.shape("v6e-8"), 32768)
    assert any("11.87 GiB" in note for note in big.notes)
    # Unquantized (GPT_OSS here states no quantization_config) and dense models: nothing to say.
    assert not any(note.startswith("unknown:") for note in sizing.fit(spec(GPT_OSS, "g"), catalog.shape("v6e-1"),
                                                                      32768).notes)
    assert not any(note.startswith("unknown:") for note in sizing.fit(catalog.catalog_model("Qwen/Qwen3-8B"),
                                                                      catalog.shape("v6e-1"), 32768).notes)
