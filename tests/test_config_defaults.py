"""A config.json that leaves keys at their defaults is read as transformers reads it
(components/catalog/config_defaults.py): the family's class defaults fill what it leaves out, a stated value (even
null) is kept, a multimodal text_config takes its class from the parent, and layer_types follow each class's rule."""

from __future__ import annotations

import json
from pathlib import Path

from components import catalog, sizing
from components.catalog import config_defaults, geometry_from_config

ROOT = Path(__file__).resolve().parent.parent
LLAMA = json.loads((ROOT / "components/catalog/configs/meta-llama--Llama-3.1-8B.json").read_text())
# A Gemma 3 4B-shaped multimodal config whose text_config states only what differs from Gemma3TextConfig.
GEMMA_3_SPARSE = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
                  "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "num_hidden_layers": 34,
                                  "sliding_window": 1024, "rope_scaling": {"factor": 8.0, "rope_type": "linear"}}}


def test_left_out_keys_take_the_class_defaults():
    geometry = geometry_from_config(GEMMA_3_SPARSE)
    assert geometry.model_type == "gemma3_text" and geometry.num_attention_heads == 8
    assert geometry.kv_heads == {4} and geometry.head_dims == {256} and geometry.max_context_tokens == 131072
    # Gemma3TextConfig's layer_types: sliding unless (i + 1) % 6 == 0.
    kinds = [layer.layer_type for layer in geometry.kv_layers]
    assert kinds.count("full_attention") == 5 and kinds[5] == "full_attention" and geometry.layer_types_given


def test_a_sparse_gemma_3_is_planned_in_groups():
    spec = sizing.ModelSpec("g", geometry_from_config(GEMMA_3_SPARSE), catalog.Weights(9 * 1024**3, False, "t"), None)
    result = sizing.fit(spec, catalog.shape("v6e-1"), 32768)
    assert result.fits and result.figures["kv_groups"].value == 7  # 5 full (group size 5) + 29 sliding in 6


def test_a_stated_value_is_kept_and_an_unknown_family_gets_nothing():
    stated = {**GEMMA_3_SPARSE, "text_config": {**GEMMA_3_SPARSE["text_config"], "num_attention_heads": 16,
                                                "num_key_value_heads": 8}}
    assert geometry_from_config(stated).num_attention_heads == 16
    unknown = {"model_type": "acme_lm", "num_hidden_layers": 2}
    assert config_defaults.filled(unknown) == unknown
    # A Llama config without num_key_value_heads: the class leaves it None, and every head is a KV head.
    without = {key: value for key, value in LLAMA.items() if key != "num_key_value_heads"}
    assert geometry_from_config(without).kv_heads == {LLAMA["num_attention_heads"]}


def test_layer_types_rules():
    gpt_oss = config_defaults.filled({"model_type": "gpt_oss", "num_hidden_layers": 4})
    assert gpt_oss["layer_types"] == ["sliding_attention", "full_attention"] * 2
    qwen = config_defaults.filled({"model_type": "qwen2", "num_hidden_layers": 4, "use_sliding_window": True,
                                   "max_window_layers": 2})
    assert qwen["layer_types"] == ["full_attention"] * 2 + ["sliding_attention"] * 2
    assert set(config_defaults.filled({"model_type": "qwen3", "num_hidden_layers": 3})["layer_types"]) == {
        "full_attention"}
    gemma4 = config_defaults.filled({"model_type": "gemma4_text", "num_hidden_layers": 8})
    assert gemma4["layer_types"][-1] == "full_attention" and gemma4["layer_types"][5] == "full_attention"
    stated = ["full_attention"] * 4
    assert config_defaults.filled({"model_type": "gpt_oss", "num_hidden_layers": 4,
                                   "layer_types": stated})["layer_types"] == stated
