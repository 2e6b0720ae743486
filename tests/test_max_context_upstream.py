"""The planner's longest context (components/catalog/geometry.py max_context) held to vLLM 0.33.0's own
_get_and_verify_max_len, run in the vLLM venv on the config transformers and vLLM build (tests/vllm_max_len_check.py):
every catalogued config.json, and synthetic ones for each rule (linear, dynamic, yarn, llama3, the transformers-5
`rope_parameters` spelling, Gemma 3's skipped factor, a GPT-2 length key)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from components import catalog
from components.catalog import models as catalog_models
from components.catalog.geometry import max_context_of_config
from tests import vllm_venv

ROOT = Path(__file__).resolve().parent.parent
CHECK = ROOT / "tests" / "vllm_max_len_check.py"
LLAMA = json.loads((catalog_models.CONFIGS / "meta-llama--Llama-3.2-3B.json").read_text())
QWEN = json.loads((catalog_models.CONFIGS / "Qwen--Qwen3-8B.json").read_text())


def llama(max_positions: int, **fields) -> dict:
    config = copy.deepcopy(LLAMA)
    config.pop("rope_scaling", None)
    config["max_position_embeddings"] = max_positions
    config.update(fields)
    return config


def nested_linear() -> dict:
    config = json.loads((catalog_models.CONFIGS / "google--gemma-4-E2B-it.json").read_text())
    config["text_config"]["rope_parameters"]["full_attention"] = {"rope_type": "linear", "factor": 2.0,
                                                                  "rope_theta": 1000000.0}
    return config


GEMMA3_TEXT = {
    "model_type": "gemma3_text", "hidden_size": 3840, "intermediate_size": 15360, "num_hidden_layers": 48,
    "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256, "vocab_size": 262208,
    "max_position_embeddings": 131072, "sliding_window": 1024, "rope_theta": 1000000.0,
    "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
}
SYNTHETIC = {
    "linear-legacy-type": llama(4096, rope_scaling={"type": "linear", "factor": 4.0}),
    "dynamic": llama(4096, rope_scaling={"rope_type": "dynamic", "factor": 2.0}),
    "yarn": llama(16384, rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}),
    "llama3": copy.deepcopy(LLAMA),
    "rope-parameters-linear": llama(4096, rope_parameters={"rope_type": "linear", "factor": 4.0,
                                                           "rope_theta": 500000.0}),
    "qwen3-yarn": {**copy.deepcopy(QWEN), "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                                          "original_max_position_embeddings": 32768}},
    "gemma3-text": copy.deepcopy(GEMMA3_TEXT),
    "gemma3-multimodal": {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"],
                          "text_config": copy.deepcopy(GEMMA3_TEXT)},
    # transformers 5's per-layer-type rope_parameters (Gemma 4's copy), one type given a linear factor.
    "nested-rope-parameters": nested_linear(),
    "gpt2-n-positions": {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_positions": 1024,
                         "n_embd": 768, "n_head": 12, "n_layer": 12, "vocab_size": 50257},
}
# What each synthetic config must come to (vLLM's answer is the authority; these say the rule each one tests).
EXPECTED = {"linear-legacy-type": 16384, "dynamic": 8192, "yarn": 16384, "llama3": 131072,
            "rope-parameters-linear": 16384, "qwen3-yarn": 40960, "gemma3-text": 131072,
            "gemma3-multimodal": 131072, "nested-rope-parameters": 262144, "gpt2-n-positions": 1024}


@pytest.fixture(scope="module")
def vllm_lengths(tmp_path_factory) -> dict[str, int | None]:
    directory = tmp_path_factory.mktemp("configs")
    paths = {model.name: str(catalog_models.CONFIGS / model.config_file) for model in catalog.catalog_models()}
    for name, config in SYNTHETIC.items():
        path = directory / f"{name}.json"
        path.write_text(json.dumps(config))
        paths[name] = str(path)
    completed = vllm_venv.run([str(CHECK)], input=json.dumps(list(paths.values())), text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    by_path = json.loads(completed.stdout)
    return {name: by_path[path] for name, path in paths.items()}


def test_the_synthetic_configs_are_what_each_rule_says_in_vllm(vllm_lengths):
    assert {name: vllm_lengths[name] for name in SYNTHETIC} == EXPECTED


@pytest.mark.parametrize("name", [model.name for model in catalog.catalog_models()])
def test_the_planner_derives_vllms_context_for_every_catalogued_model(vllm_lengths, name):
    assert catalog.catalog_model(name).geometry.max_context_tokens == vllm_lengths[name]


@pytest.mark.parametrize("name", sorted(SYNTHETIC))
def test_the_planner_derives_vllms_context_for_each_rope_rule(vllm_lengths, name):
    assert max_context_of_config(SYNTHETIC[name]) == vllm_lengths[name]
