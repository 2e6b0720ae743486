"""components/catalog/config_defaults.py held to transformers 5.20.2 in the vLLM venv: every class default it
states is the installed config class's dataclass field default, and configs that leave keys out come out of
AutoConfig (as vLLM loads them) with the values and layer_types the planner fills in."""

from __future__ import annotations

import json

from components.catalog import config_defaults
from tests import vllm_venv
from tests.test_config_defaults import GEMMA_3_SPARSE

READ = """
import dataclasses, json, sys, tempfile, pathlib
from transformers import AutoConfig, CONFIG_MAPPING
asked = json.load(sys.stdin)
defaults = {}
for model_type, keys in asked["defaults"].items():
    fields = {field.name: field.default for field in dataclasses.fields(CONFIG_MAPPING[model_type])}
    defaults[model_type] = {key: fields.get(key, "<not a field>") for key in keys}
parents = {parent: CONFIG_MAPPING[parent].sub_configs["text_config"].model_type for parent in asked["parents"]}
built = []
for config in asked["configs"]:
    with tempfile.TemporaryDirectory() as folder:
        (pathlib.Path(folder) / "config.json").write_text(json.dumps(config))
        loaded = AutoConfig.from_pretrained(folder, local_files_only=True)
    text = loaded.get_text_config()
    values = {}
    for key in asked["keys"]:
        try:
            values[key] = getattr(text, key, None)
        except Exception:  # transformers 5: a per-layer value read as one (Gemma 4's head_dim) raises
            values[key] = None
    built.append(values | {"model_type": text.model_type})
print(json.dumps({"defaults": defaults, "parents": parents, "built": built}))
"""
KEYS = ("num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "sliding_window",
        "layer_types", "max_position_embeddings", "vocab_size")
CONFIGS = [
    GEMMA_3_SPARSE,
    {"model_type": "gemma3_text", "num_hidden_layers": 7, "sliding_window_pattern": 3},
    {"model_type": "gpt_oss", "num_hidden_layers": 6},
    {"model_type": "qwen2", "num_hidden_layers": 6, "use_sliding_window": True, "max_window_layers": 4},
    {"model_type": "qwen3", "num_hidden_layers": 5},
    {"model_type": "gemma4_text", "num_hidden_layers": 8},
    {"model_type": "llama", "num_hidden_layers": 3, "hidden_size": 1024, "num_attention_heads": 8},
]


def test_the_class_defaults_and_rules_are_transformers():
    asked = {"defaults": {model_type: list(values) for model_type, values in config_defaults.CLASS_DEFAULTS.items()},
             "parents": list(config_defaults.TEXT_CONFIG_TYPES), "configs": CONFIGS, "keys": list(KEYS)}
    completed = vllm_venv.run(["-c", READ], input=json.dumps(asked), text=True)
    assert completed.returncode == 0, completed.stderr[-3000:]
    upstream = json.loads(completed.stdout)
    assert upstream["defaults"] == config_defaults.CLASS_DEFAULTS
    assert upstream["parents"] == config_defaults.TEXT_CONFIG_TYPES
    for config, built in zip(CONFIGS, upstream["built"], strict=True):
        ours = config_defaults.filled(config)
        text = ours.get("text_config", ours)
        assert text["model_type"] == built["model_type"], config
        assert bool(text.get("layer_types")) == bool(built["layer_types"]), config
        for key in ("num_hidden_layers", "num_attention_heads", "layer_types", "max_position_embeddings"):
            if built[key] is not None and key in text:
                assert text[key] == built[key], (config, key)
        if built["num_key_value_heads"] is not None and text.get("num_key_value_heads") is not None:
            assert text["num_key_value_heads"] == built["num_key_value_heads"], config
