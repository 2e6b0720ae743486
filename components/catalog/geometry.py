"""A model's KV geometry read from its Hugging Face `config.json`, by the rules tpu-inference 0.32.0 applies on
its JAX path (tpu_inference/runner/kv_cache_manager.py get_kv_cache_spec, utils.get_layer_kv_params,
models/common/kv_share.compute_kv_share_map) and vLLM 0.33.0 reads the config by (hf_text_config,
model_arch_config_convertor get_head_size / get_total_num_kv_heads, config/model.py _get_and_verify_max_len).

Pure: a dict in, a frozen value out. The padding to the TPU's shapes and the bytes are components/sizing's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.catalog import config_checks, config_defaults
from components.catalog.config_checks import ConfigError
from components.reading import bounded

MAX_CONFIG_BYTES = 4 * bounded.MIB
"""A config.json is a few kilobytes (a vision model's, with its processor's lists, tens)."""

SLIDING = "sliding_attention"
FULL = "full_attention"
# Layer kinds whose cache is not attention KV (Mamba / linear-attention hybrids): sized by other rules.
NOT_ATTENTION_LAYERS = frozenset({"linear_attention", "mamba", "mamba2", "conv", "short_conv"})
# transformers 5.20.2 (models/gemma4/configuration_gemma4.py __post_init__): a Gemma 4 text config without
# global_head_dim gets 512 on its full-attention layers.
GEMMA4_DEFAULT_GLOBAL_HEAD_DIM = 512
GEMMA4_TEXT_TYPES = frozenset({"gemma4_text"})
# vLLM applies a RoPE factor to max_position_embeddings for every rope type but these (and "default", which has
# no factor): _get_and_verify_max_len, vLLM 0.33.0.
ROPE_TYPES_ALREADY_SCALED = frozenset({"su", "longrope", "llama3", "yarn", "deepseek_yarn",
                                       "deepseek_llama_scaling", "default"})
# _get_and_verify_max_len skips the factor for any text model_type containing "gemma3" ("Gemma3's max_model_len
# (128K) is already scaled by RoPE scaling").
ROPE_FACTOR_SKIPPED_MODEL_TYPE = "gemma3"
# The keys vLLM derives the longest context from (model_arch_config_convertor.py derive_max_model_len_and_key):
# the smallest of those present, and model_max_length over all of them when set.
MAX_LENGTH_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
                   "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len")
# rope_parameters nested by layer type (transformers 5, e.g. {"full_attention": {...}, "sliding_attention": {...}}):
# vllm/transformers_utils/config.py is_rope_parameters_nested, with transformers' ALLOWED_LAYER_TYPES (5.20.2).
ROPE_NESTING_KEYS = frozenset({
    "full_attention", "sliding_attention", "chunked_attention", "window_attention", "indexed_attention",
    "compressed_sparse_attention", "heavily_compressed_attention", "minimax_m3_sparse", "conv", "moe", "hybrid",
    "hybrid_sliding", "linear_attention", "sparse", "dense", "main", "compress"})


@dataclass(frozen=True)
class KvLayer:
    """One layer that owns a KV cache, before any padding."""

    index: int
    layer_type: str
    head_dim: int
    kv_heads: int


@dataclass(frozen=True)
class ModelGeometry:
    """What sizing needs from a config.json."""

    model_type: str
    architectures: tuple[str, ...]
    num_hidden_layers: int
    num_attention_heads: int
    kv_layers: tuple[KvLayer, ...]
    """Only the layers that own a cache; KV-shared layers read another layer's."""
    kv_shared_layers: dict[int, int]
    """{shared layer: the layer whose cache it reads} (tpu-inference's KV-share map)."""
    max_context_tokens: int | None
    """The longest --max-model-len vLLM accepts (max_position_embeddings, with a RoPE factor where vLLM applies
    one); None when the config does not say."""
    dtype: str
    """The checkpoint's dtype ("auto" KV takes it)."""
    sliding_window: int | None
    parameter_count: int | None
    """Parameters counted from the config (dense and Qwen3-MoE decoders only); None for other layouts."""
    uses_sliding_window: bool = False
    """The config sets a sliding window and does not turn it off (use_sliding_window: false): a model class may
    window some layers. Whether the cache keeps the window is tpu-inference's call (components/sizing/
    implementation.py)."""
    layer_types_given: bool = False
    """The config lists `layer_types` (vLLM's arg_utils puts a window on every layer only when it does not, or when
    every entry is sliding: components/sizing/kv_groups.py)."""
    quant_method: str | None = None
    """quantization_config.quant_method as the checkpoint states it (e.g. "mxfp4"); None for unquantized."""
    expert_weight_elements_per_layer: int | None = None
    """One MoE layer's expert weights in elements (gpt-oss: experts x (gate_up 2 x intermediate x hidden + down
    hidden x intermediate)); None for layouts not read here."""

    @property
    def kv_heads(self) -> frozenset[int]:
        return frozenset(layer.kv_heads for layer in self.kv_layers)

    @property
    def head_dims(self) -> frozenset[int]:
        return frozenset(layer.head_dim for layer in self.kv_layers)


def text_config(config: dict[str, Any]) -> dict[str, Any]:
    """vLLM's hf_text_config: a multimodal checkpoint's text_config, else the config itself."""
    inner = config.get("text_config")
    return inner if isinstance(inner, dict) else config


def _positive_int(text: dict[str, Any], key: str, required: bool = True) -> int | None:
    value = text.get(key)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{key} is {value!r}; a config.json states it as a positive integer")
    return value


def kv_share_map(text: dict[str, Any]) -> dict[int, int]:
    """tpu-inference's compute_kv_share_map: each of the last num_kv_shared_layers layers reads the cache of the
    last earlier non-shared layer of its own attention type; nothing without layer_types."""
    shared = text.get("num_kv_shared_layers", 0)
    layer_types = text.get("layer_types")
    if not isinstance(shared, int) or isinstance(shared, bool) or shared <= 0:
        return {}
    if not isinstance(layer_types, list) or not layer_types:
        return {}
    layers = _positive_int(text, "num_hidden_layers")
    first_shared = layers - shared
    owners = layer_types[:first_shared]
    mapping = {}
    for index in range(first_shared, layers):
        kind = layer_types[index]
        if kind not in owners:
            raise ConfigError(f"layer {index} ({kind}) shares KV but no earlier layer of that type owns a cache "
                              f"(num_kv_shared_layers={shared}, num_hidden_layers={layers})")
        mapping[index] = len(owners) - 1 - owners[::-1].index(kind)
    return mapping


def layer_kv_params(text: dict[str, Any], layer_type: str) -> tuple[int | None, int | None]:
    """tpu-inference's get_layer_kv_params on a flat config: (head_dim, kv heads) of one layer type. Full
    layers take global_head_dim (Gemma 4), and num_global_key_value_heads when attention_k_eq_v."""
    if layer_type == SLIDING:
        return text.get("head_dim"), text.get("num_key_value_heads")
    head_dim = text.get("global_head_dim") or text.get("head_dim")
    if text.get("model_type") in GEMMA4_TEXT_TYPES and "global_head_dim" not in text:
        head_dim = GEMMA4_DEFAULT_GLOBAL_HEAD_DIM
    if text.get("attention_k_eq_v"):
        kv_heads = text.get("num_global_key_value_heads") or text.get("num_key_value_heads")
    else:
        kv_heads = text.get("num_key_value_heads")
    return head_dim, kv_heads


def base_head_dim(text: dict[str, Any]) -> int:
    """vLLM's get_head_size: head_dim when set and positive, else hidden_size // num_attention_heads."""
    head_dim = text.get("head_dim")
    if isinstance(head_dim, int) and head_dim > 0:
        return head_dim
    return _positive_int(text, "hidden_size") // _positive_int(text, "num_attention_heads")


def base_kv_heads(text: dict[str, Any]) -> int:
    """vLLM's get_total_num_kv_heads for a grouped-query config: num_key_value_heads, else every attention head."""
    return _positive_int(text, "num_key_value_heads", required=False) or _positive_int(text, "num_attention_heads")


def rope_parameters(text: dict[str, Any]) -> list[dict[str, Any]]:
    """vLLM's iter_rope_parameters on the config transformers builds: `rope_parameters` (transformers 5), else the
    legacy `rope_scaling` transformers turns into it; one dict per layer type when nested; `type` read as
    `rope_type` (patch_legacy_rope_type)."""
    raw = text.get("rope_parameters")
    if not isinstance(raw, dict):
        raw = text.get("rope_scaling")
    if not isinstance(raw, dict) or not raw:
        return []
    if set(raw) <= ROPE_NESTING_KEYS:
        found = [value for value in raw.values() if isinstance(value, dict) and value]
    else:
        found = [raw]
    return [{**value, "rope_type": value.get("rope_type") or value.get("type") or "default"} for value in found]


def max_context(text: dict[str, Any], model_type: str | None = None) -> int | None:
    """vLLM 0.33.0's derived max_model_len (config/model.py _get_and_verify_max_len): the smallest length key
    (model_max_length over all), times the RoPE factor of the last rope entry whose type vLLM scales by (none
    for a gemma3 model_type, null read as 1.0). None when no key is set: vLLM then takes the user's length.
    `model_type`: the text config's as transformers fills it in (a copy may leave it out of text_config)."""
    lengths = [text[key] for key in MAX_LENGTH_KEYS
               if isinstance(text.get(key), (int, float)) and not isinstance(text.get(key), bool)]
    if not lengths:
        return None
    derived = min(lengths)
    if text.get("model_max_length"):
        derived = text["model_max_length"]
    parameters = rope_parameters(text)
    if parameters and ROPE_FACTOR_SKIPPED_MODEL_TYPE not in str(model_type or text.get("model_type") or ""):
        factor = 1.0
        for entry in parameters:
            if entry["rope_type"] not in ROPE_TYPES_ALREADY_SCALED:
                factor = entry.get("factor", factor)
        derived *= 1.0 if factor is None else factor
    return int(derived)


def max_context_of_config(config: dict[str, Any]) -> int | None:
    """max_context on a whole config.json: its text config, with the model type transformers would give it."""
    text = text_config(config)
    return max_context(text, str(text.get("model_type") or config.get("model_type") or ""))


def parameter_count(text: dict[str, Any]) -> int | None:
    """Parameters of a Llama-layout decoder (llama, mistral, qwen3, qwen3_moe), from the config alone; None for
    any other layout. Held to the safetensors index totals of Llama-3.1-8B, Qwen3-8B and Qwen3-30B-A3B."""
    model_type = text.get("model_type")
    if model_type not in ("llama", "mistral", "qwen3", "qwen3_moe"):
        return None
    hidden, layers = text["hidden_size"], text["num_hidden_layers"]
    heads, head_dim, kv_heads = text["num_attention_heads"], base_head_dim(text), base_kv_heads(text)
    vocab = text["vocab_size"]
    embeddings = vocab * hidden * (1 if text.get("tie_word_embeddings", False) else 2)
    attention = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
    if text.get("attention_bias"):
        attention += heads * head_dim + 2 * kv_heads * head_dim + hidden
    norms = 2 * hidden + (2 * head_dim if model_type in ("qwen3", "qwen3_moe") else 0)
    total = embeddings + hidden  # the final norm
    for index in range(layers):
        if model_type == "qwen3_moe" and _is_moe_layer(text, index):
            experts = text["num_experts"]
            mlp = experts * 3 * hidden * text["moe_intermediate_size"] + hidden * experts
        else:
            mlp = 3 * hidden * text["intermediate_size"]
        total += attention + norms + mlp
    return total


def _is_moe_layer(text: dict[str, Any], index: int) -> bool:
    """transformers' Qwen3MoeDecoderLayer: sparse unless listed in mlp_only_layers or off the sparse step."""
    step = text.get("decoder_sparse_step") or 1  # null, like absent: the config class's default (1)
    return (index not in (text.get("mlp_only_layers") or [])
            and (text.get("num_experts") or 0) > 0 and (index + 1) % step == 0)


def geometry_from_config(config: dict[str, Any]) -> ModelGeometry:
    """Read a config.json's dict as transformers fills it (config_defaults: the family's class defaults where it is
    silent). Raises ConfigError for a config it cannot size (config_checks first: no arithmetic on a value it has
    not checked)."""
    config = config_defaults.filled(config)
    config_checks.check(config)
    text = text_config(config)
    if text.get("kv_lora_rank") or text.get("q_lora_rank"):
        raise ConfigError("multi-head latent attention (kv_lora_rank): not sized here; tpu-inference caches one "
                          "latent vector per token and layer (an MLAAttentionSpec of kv_lora_rank + qk_rope_head_dim, "
                          "each padded to 128: runner/kv_cache_manager.py get_kv_cache_spec), which this planner "
                          "does not compute")
    layers = _positive_int(text, "num_hidden_layers")
    heads = _positive_int(text, "num_attention_heads")
    raw_types = text.get("layer_types")
    layer_types = list(raw_types) if isinstance(raw_types, list) else []
    odd = sorted(set(layer_types) & NOT_ATTENTION_LAYERS)
    if odd:
        raise ConfigError(f"layer_types has {', '.join(odd)} layers: not sized here; vLLM gives each such layer a "
                          "fixed state per request (a MambaSpec) in the attention layers' block pool, pages unified "
                          "with theirs (tpu-inference update_mamba_page_size_padded), which this planner does "
                          "not size")
    shared = kv_share_map(text)
    fallback_dim, fallback_heads = base_head_dim(text), base_kv_heads(text)
    owners = []
    for index in range(layers):
        if index in shared:
            continue
        kind = layer_types[index] if index < len(layer_types) else FULL
        head_dim, kv_heads = layer_kv_params(text, kind)
        owners.append(KvLayer(index, kind, head_dim or fallback_dim, kv_heads or fallback_heads))
    dtype = text.get("dtype") or text.get("torch_dtype") or config.get("dtype") or config.get("torch_dtype")
    architectures = config.get("architectures") or text.get("architectures") or ()
    return ModelGeometry(
        model_type=str(text.get("model_type") or config.get("model_type") or ""),
        architectures=tuple(architectures),
        num_hidden_layers=layers,
        num_attention_heads=heads,
        kv_layers=tuple(owners),
        kv_shared_layers=shared,
        max_context_tokens=max_context_of_config(config),
        dtype=str(dtype or "bfloat16"),
        sliding_window=text.get("sliding_window") if isinstance(text.get("sliding_window"), int) else None,
        parameter_count=parameter_count(text),
        uses_sliding_window=(isinstance(text.get("sliding_window"), int) and text["sliding_window"] > 0
                             and text.get("use_sliding_window") is not False),
        layer_types_given=bool(layer_types),
        quant_method=_quant_method(config),
        expert_weight_elements_per_layer=_expert_elements(text),
    )


def _quant_method(config: dict[str, Any]) -> str | None:
    quantization = config.get("quantization_config") or text_config(config).get("quantization_config")
    method = quantization.get("quant_method") if isinstance(quantization, dict) else None
    return method if isinstance(method, str) else None


def _expert_elements(text: dict[str, Any]) -> int | None:
    """gpt-oss's fused experts (transformers' GptOssExperts: gate_up_proj 2 x intermediate x hidden, down_proj
    hidden x intermediate, per expert)."""
    if text.get("model_type") != "gpt_oss":
        return None
    experts, hidden, inner = (text.get(key) for key in ("num_local_experts", "hidden_size", "intermediate_size"))
    if not all(isinstance(value, int) and not isinstance(value, bool) and value > 0
               for value in (experts, hidden, inner)):
        return None
    return experts * 3 * hidden * inner


def read_config(path: str | Path) -> dict[str, Any]:
    """A config.json from disk (components/reading/bounded.py), or ConfigError naming the file and what is wrong."""
    try:
        config = bounded.read_json(path, MAX_CONFIG_BYTES, "config.json")
    except bounded.ReadError as error:
        raise ConfigError(str(error)) from None
    if not isinstance(config, dict):
        raise ConfigError(str(bounded.ReadError(path, f"holds a JSON {type(config).__name__}, not the object a "
                                                      "config.json is")))
    return config


def geometry_from_file(path: str | Path) -> ModelGeometry:
    return geometry_from_config(read_config(path))
