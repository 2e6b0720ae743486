"""The layer between reading a config.json and sizing it: every value geometry.py reads, checked for its type, sign
and range, and the geometry's own rules, before any arithmetic. A config.json is anyone's file: `"128"` for a number,
`true` for 1 (Python's bool is an int), `"no"` for true, `Infinity`, 10**400 layers or 64 KV heads over 32 would
otherwise end in a traceback, a loop, or a model sized and said to fit that no engine could load.

Layers, in order: bounded reading (components/reading/bounded.py: a regular file, a size cap, UTF-8, JSON without
non-finite numbers), then the defaults the family's config class fills (components/catalog/config_defaults.py: a
key left out of a known family's config takes transformers' value; of an unknown family's, it is refused where the
geometry needs it), then these checks (`check`), then geometry.py's rules. Each refusal names the key as written
(`text_config.head_dim` for a multimodal checkpoint's text config), the value and the fix.

The rules, where they come from:
- grouped-query attention shares each KV head among num_attention_heads / num_key_value_heads query heads, so the
  one divides the other (transformers models/llama/modeling_llama.py `num_key_value_groups = num_attention_heads //
  num_key_value_heads`, repeat_kv; vLLM's attention layers assert the same when they shard heads);
- `layer_types` holds one entry per layer (transformers 5.x configuration_utils.py layer_type_validation:
  "`num_hidden_layers` (...) must be equal to the number of layer types");
- head_dim, when not stated, is hidden_size // num_attention_heads (vLLM get_head_size), meaningful only when it
  divides;
- the ranges are far past any open model (Llama 3.1 405B: 126 layers, 128 heads, hidden 16384, vocab 128256;
  Llama 4 Scout: a 10M-token context) and well short of what would loop or overflow.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_LAYERS = 1024
MAX_HEADS = 4096
MAX_HEAD_DIM = 4096
MAX_HIDDEN = 1 << 18
MAX_VOCAB = 1 << 24
MAX_EXPERTS = 4096
MAX_POSITIONS = 1 << 30
MAX_ROPE_FACTOR = 1024.0
# The keys geometry.py reads as counts, with their range, and whether a config may leave them out.
COUNTS: dict[str, tuple[int, int]] = {
    "num_hidden_layers": (1, MAX_LAYERS),
    "num_attention_heads": (1, MAX_HEADS),
    "num_key_value_heads": (1, MAX_HEADS),
    "num_global_key_value_heads": (1, MAX_HEADS),
    "head_dim": (1, MAX_HEAD_DIM),
    "global_head_dim": (1, MAX_HEAD_DIM),
    "hidden_size": (1, MAX_HIDDEN),
    "intermediate_size": (1, MAX_HIDDEN * 16),
    "moe_intermediate_size": (1, MAX_HIDDEN * 16),
    "vocab_size": (1, MAX_VOCAB),
    "num_experts": (0, MAX_EXPERTS),
    "decoder_sparse_step": (1, MAX_LAYERS),
    "num_kv_shared_layers": (0, MAX_LAYERS),
    "sliding_window": (1, MAX_POSITIONS),
    "kv_lora_rank": (0, MAX_HIDDEN),
    "q_lora_rank": (0, MAX_HIDDEN),
}
# Read as yes or no.
FLAGS = ("tie_word_embeddings", "attention_bias", "attention_k_eq_v", "use_sliding_window")
# Read as text.
TEXTS = ("model_type", "dtype", "torch_dtype")
# The context lengths vLLM derives max_model_len from (geometry.MAX_LENGTH_KEYS): a positive number.
LENGTHS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
           "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len")
# Needed to count a Llama-layout decoder's parameters (geometry.parameter_count), by model_type.
PARAMETER_KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size", "intermediate_size")
MOE_PARAMETER_KEYS = ("num_experts", "moe_intermediate_size")
COUNTED_TYPES = ("llama", "mistral", "qwen3", "qwen3_moe")


class ConfigError(ValueError):
    """A config.json this catalog cannot size: what is wrong, in words a user can act on (for a value: the key as
    written, the value and the fix)."""


def _shown(value: Any) -> str:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    text = "".join(ascii(character)[1:-1] if not character.isprintable() else character for character in text)
    return text if len(text) <= 80 else text[:77] + "..."


def _refuse(key: str, value: Any, what: str, fix: str) -> ConfigError:
    return ConfigError(f"{key} = {_shown(value)}: {what}; {fix}")


def _count(text: dict[str, Any], key: str, prefix: str) -> int | None:
    if key not in text or text[key] is None:
        return None
    value, (low, high) = text[key], COUNTS[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise _refuse(prefix + key, value, "a config.json states it as a whole number",
                      f"write it as a number without quotes, from {low} to {high:,}")
    if not low <= value <= high:
        raise _refuse(prefix + key, value, f"outside {low} to {high:,}, where every real model's is",
                      "check the checkpoint's own config.json")
    return value


def _positive_length(text: dict[str, Any], key: str, prefix: str) -> None:
    value = text.get(key)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or \
            not 0 < value <= MAX_POSITIONS:
        raise _refuse(prefix + key, value, f"a context length is a number from 1 to {MAX_POSITIONS:,}",
                      "check the checkpoint's own config.json")


def _rope(text: dict[str, Any], prefix: str) -> None:
    for key in ("rope_parameters", "rope_scaling"):
        value = text.get(key)
        if value is None:
            continue
        if not isinstance(value, dict):
            raise _refuse(prefix + key, value, "an object (or null)", "check the checkpoint's own config.json")
        nested = [(f"{key}.{name}", entry) for name, entry in value.items() if isinstance(entry, dict)]
        for where, entry in [(key, value), *nested]:
            factor = entry.get("factor")
            if factor is None:
                continue
            if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not math.isfinite(factor) or \
                    not 0 < factor <= MAX_ROPE_FACTOR:
                raise _refuse(f"{prefix}{where}.factor", factor, f"a RoPE factor is a number above 0, at most "
                              f"{MAX_ROPE_FACTOR:g}", "check the checkpoint's own config.json")
            kind = entry.get("rope_type", entry.get("type"))
            if kind is not None and not isinstance(kind, str):
                raise _refuse(f"{prefix}{where}.rope_type", kind, "a RoPE type is text",
                              "check the checkpoint's own config.json")


def check(config: Any) -> None:
    """Raise ConfigError for the first value geometry.py could not size honestly; None when all can be."""
    if not isinstance(config, dict):
        raise ConfigError(f"the file holds {_shown(config)[:40]}: a config.json holds one JSON object")
    inner = config.get("text_config")
    if inner is not None and not isinstance(inner, dict):
        raise _refuse("text_config", inner, "a multimodal config's text config is an object",
                      "check the checkpoint's own config.json")
    text, prefix = (inner, "text_config.") if isinstance(inner, dict) else (config, "")
    for where, source in ((prefix, text), ("", config)):
        for key in TEXTS:
            if source.get(key) is not None and not isinstance(source[key], str):
                raise _refuse(where + key, source[key], "text", "check the checkpoint's own config.json")
        architectures = source.get("architectures")
        if architectures is not None and (not isinstance(architectures, list)
                                          or not all(isinstance(item, str) for item in architectures)):
            raise _refuse(where + "architectures", architectures, "a list of class names",
                          "check the checkpoint's own config.json")
    for key in FLAGS:
        if text.get(key) is not None and not isinstance(text[key], bool):
            raise _refuse(prefix + key, text[key], "true or false, unquoted", f"write {key}: true or false")
    counts = {key: _count(text, key, prefix) for key in COUNTS}
    for key in LENGTHS:
        _positive_length(text, key, prefix)
    _rope(text, prefix)
    layers, heads = counts["num_hidden_layers"], counts["num_attention_heads"]
    for key in ("num_hidden_layers", "num_attention_heads"):
        if counts[key] is None:
            raise ConfigError(f"{prefix}{key} is missing: every decoder's config.json states it; give the "
                                   "checkpoint's own config.json")
    assert layers is not None and heads is not None
    if counts["kv_lora_rank"] or counts["q_lora_rank"]:
        return  # multi-head latent attention: geometry.py refuses it by name, whatever its head counts
    for key in ("num_key_value_heads", "num_global_key_value_heads"):
        kv_heads = counts[key]
        if kv_heads is not None and (kv_heads > heads or heads % kv_heads):
            raise _refuse(prefix + key, kv_heads, f"num_attention_heads {heads} is not a whole multiple of it: "
                          "grouped-query attention shares each KV head among a whole number of query heads",
                          f"a divisor of {heads}, as the checkpoint's config.json states it")
    if counts["head_dim"] is None and counts["global_head_dim"] is None:
        hidden = counts["hidden_size"]
        if hidden is None:
            raise ConfigError(f"{prefix}head_dim and {prefix}hidden_size are both missing: the head size comes "
                                   "from one of them; give the checkpoint's own config.json")
        if hidden % heads:
            raise _refuse(prefix + "hidden_size", hidden, f"not a whole multiple of num_attention_heads {heads}, so "
                          "it gives no head size", f"state {prefix}head_dim")
    layer_types = text.get("layer_types")
    if layer_types is not None:
        if not isinstance(layer_types, list) or not all(isinstance(kind, str) for kind in layer_types):
            raise _refuse(prefix + "layer_types", layer_types, "a list of layer kinds (text)",
                          "check the checkpoint's own config.json")
        if len(layer_types) != layers:
            raise _refuse(prefix + "layer_types", f"{len(layer_types)} entries", f"num_hidden_layers is {layers}, "
                          "and transformers takes one entry per layer", "check the checkpoint's own config.json")
    shared = counts["num_kv_shared_layers"]
    if shared is not None and shared >= layers:
        raise _refuse(prefix + "num_kv_shared_layers", shared, f"at least num_hidden_layers ({layers}): no layer "
                      "would own a cache", f"below {layers}")
    only = text.get("mlp_only_layers")
    if only is not None and (not isinstance(only, list) or not all(
            isinstance(index, int) and not isinstance(index, bool) and 0 <= index < layers for index in only)):
        raise _refuse(prefix + "mlp_only_layers", only, f"a list of layer indices from 0 to {layers - 1}",
                      "check the checkpoint's own config.json")
    model_type = text.get("model_type") or config.get("model_type")
    if model_type in COUNTED_TYPES:
        needed = PARAMETER_KEYS + (MOE_PARAMETER_KEYS if model_type == "qwen3_moe" and counts["num_experts"] else ())
        missing = [key for key in needed if counts[key] is None]
        if missing:
            raise ConfigError(f"{prefix}{missing[0]} is missing: a {model_type} config.json states it, and its "
                                   "weights are counted from it; give the checkpoint's own config.json")
