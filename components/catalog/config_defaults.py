"""A config.json as transformers reads it: the keys a checkpoint leaves out, filled from its family's config class,
before any check or arithmetic (vLLM loads the config through transformers' AutoConfig, so it sizes these values).

Read from transformers 5.20.2 (the vLLM venv's; tests/test_config_defaults_upstream.py holds every value here to the
installed classes and builds each rule's config with transformers):
- the class defaults: the dataclass field defaults of each family's config class (models/<family>/
  configuration_<family>.py, e.g. Gemma3TextConfig: num_attention_heads 8, num_key_value_heads 4, head_dim 256), only
  the keys the geometry reads; a key the config states, even as null, is the config's;
- a multimodal config's text_config takes its model_type from the parent's sub_configs (Gemma3Config's text_config
  is a Gemma3TextConfig) when the copy leaves it out;
- layer_types, when absent, as each class's __post_init__ writes them: Gemma 3 sliding unless (i + 1) %
  sliding_window_pattern == 0 (default 6), Gemma 4 the same with 6 and the last layer forced to full attention,
  gpt-oss sliding on even layers, Qwen2 and Qwen3 sliding from max_window_layers on when use_sliding_window (else
  sliding_window is None and every layer full). Families without the key (Llama, Mistral, Phi-3) keep none.
"""

from __future__ import annotations

from typing import Any

SLIDING, FULL = "sliding_attention", "full_attention"
# Each family's class defaults for the keys components/catalog/geometry.py and config_checks.py read
# (transformers 5.20.2). None: the class computes it in __post_init__ (head_dim from hidden_size, KV heads from the
# attention heads), which geometry.py's fallbacks do as vLLM's get_head_size / get_total_num_kv_heads do.
CLASS_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma3_text": {"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
                    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                    "max_position_embeddings": 131072, "tie_word_embeddings": True, "attention_bias": False,
                    "sliding_window": 4096},
    "gemma4_text": {"vocab_size": 262144, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 30,
                    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                    "max_position_embeddings": 131072, "tie_word_embeddings": True, "attention_bias": False,
                    "sliding_window": 512, "attention_k_eq_v": False, "num_kv_shared_layers": 0},
    "gpt_oss": {"num_hidden_layers": 36, "vocab_size": 201088, "hidden_size": 2880, "intermediate_size": 2880,
                "head_dim": 64, "num_attention_heads": 64, "num_key_value_heads": 8, "sliding_window": 128,
                "tie_word_embeddings": False, "max_position_embeddings": 131072, "attention_bias": True},
    "qwen2": {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": 32, "max_position_embeddings": 32768,
              "tie_word_embeddings": False, "use_sliding_window": False, "sliding_window": 4096,
              "max_window_layers": 28},
    "qwen3": {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": 32, "head_dim": 128, "max_position_embeddings": 32768,
              "tie_word_embeddings": False, "attention_bias": False, "use_sliding_window": False,
              "sliding_window": 4096, "max_window_layers": 28},
    "qwen3_moe": {"vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 24,
                  "num_attention_heads": 32, "num_key_value_heads": 4, "max_position_embeddings": 32768,
                  "tie_word_embeddings": False, "attention_bias": False, "use_sliding_window": False,
                  "sliding_window": 4096, "decoder_sparse_step": 1, "moe_intermediate_size": 768,
                  "num_experts": 128},
    "llama": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": None, "max_position_embeddings": 2048,
              "tie_word_embeddings": False, "attention_bias": False, "head_dim": None},
    "mistral": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": None,
                "max_position_embeddings": 131072, "tie_word_embeddings": False, "sliding_window": 4096},
    "phi3": {"vocab_size": 32064, "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": None, "max_position_embeddings": 4096,
             "tie_word_embeddings": False, "sliding_window": None},
}
# A composite config's text_config class (sub_configs["text_config"].model_type).
TEXT_CONFIG_TYPES = {"gemma3": "gemma3_text", "gemma4": "gemma4_text"}
# Gemma 3's `sliding_window_pattern` (kept in configs on the Hub for backward compatibility) and its default.
GEMMA_PATTERN_KEY, GEMMA_PATTERN_DEFAULT = "sliding_window_pattern", 6


def _layer_types(text: dict[str, Any], model_type: str) -> list[str] | None:
    layers = text.get("num_hidden_layers")
    if not isinstance(layers, int) or isinstance(layers, bool) or not 0 < layers <= 4096:
        return None  # config_checks names the bad count
    if model_type in ("gemma3_text", "gemma4_text"):
        pattern = text.get(GEMMA_PATTERN_KEY, GEMMA_PATTERN_DEFAULT) if model_type == "gemma3_text" else 6
        if isinstance(pattern, bool) or not isinstance(pattern, int) or pattern <= 0:
            return None
        kinds = [SLIDING if (index + 1) % pattern else FULL for index in range(layers)]
        if model_type == "gemma4_text":
            kinds[-1] = FULL  # "Last layer must use `full_attention`"
        return kinds
    if model_type == "gpt_oss":
        return [SLIDING if (index + 1) % 2 else FULL for index in range(layers)]
    if model_type in ("qwen2", "qwen3"):
        window = text.get("sliding_window") if text.get("use_sliding_window") else None
        start = text.get("max_window_layers")
        if window is not None and (isinstance(start, bool) or not isinstance(start, int)):
            return None
        return [SLIDING if window is not None and index >= start else FULL for index in range(layers)]
    return None


def _filled_text(text: dict[str, Any], model_type: str) -> dict[str, Any]:
    defaults = CLASS_DEFAULTS.get(model_type)
    if defaults is None:
        return text
    filled = {**{key: value for key, value in defaults.items() if key not in text}, **text}
    if filled.get("layer_types") is None:
        kinds = _layer_types(filled, model_type)
        if kinds is not None:
            filled["layer_types"] = kinds
    return filled


def filled(config: dict[str, Any]) -> dict[str, Any]:
    """The config with its family's defaults where it is silent (a new dict; the given one is not changed)."""
    if not isinstance(config, dict):
        return config
    inner = config.get("text_config")
    if isinstance(inner, dict):
        parent_type = config.get("model_type")
        text_type = inner.get("model_type") or TEXT_CONFIG_TYPES.get(parent_type if isinstance(parent_type, str)
                                                                     else "")
        if not isinstance(text_type, str):
            return config
        text = _filled_text(inner, text_type)
        if "model_type" not in text and text_type:
            text = {**text, "model_type": text_type}
        return {**config, "text_config": text}
    model_type = config.get("model_type")
    return _filled_text(config, model_type) if isinstance(model_type, str) else config
