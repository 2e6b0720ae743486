"""Whether the engine serves a config's architecture with a KV cache, and vLLM's own words when it does not, read
before any figure is shown (a model the server refuses, or one that allocates no KV, must not be said to fit).

- vLLM's registry (vllm/model_executor/models/registry.py, vLLM 0.32.0; the names are data in vllm_registry.json,
  held to the installed registry by tests/test_engine_support_upstream.py): an architecture is known when it is one
  of _VLLM_MODELS, or when its suffix swapped for another of vLLM's suffixes names one (_normalize_arch with
  vllm/config/model.py _SUFFIX_TO_DEFAULTS, e.g. a ...ForSequenceClassification of a registered ...ForCausalLM);
  otherwise _raise_for_unsupported: "was supported in vLLM until v..., and is not supported anymore" for
  _PREVIOUSLY_SUPPORTED_MODELS, "is not supported in-tree anymore. Please install the plugin at ..." for
  _OOT_SUPPORTED_MODELS, else "are not supported for now". With model_impl auto vLLM first tries its Transformers
  modeling backend for an architecture outside its registry (inspect_model_cls): a path this planner does not size.
- encoder-only attention allocates no KV cache: tpu-inference 0.32.0 tpu_inference/runner/kv_cache_manager.py
  get_kv_cache_spec ("encoder-only attention does not need KV cache"); vLLM's bert.py, bert_with_rope.py,
  roberta.py and modernbert.py build only EncoderOnlyAttention, and llama.py, qwen2.py, qwen3.py and gemma3.py
  switch to it when the config says `is_causal: false` ("You can override the HF config with `is_causal=False` to
  enable bidirectional attention, which is used in some embedding models").
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

REGISTRY_FILE = Path(__file__).resolve().parent / "vllm_registry.json"
# vllm/config/model.py _SUFFIX_TO_DEFAULTS, in its order (the first that matches is the one swapped).
ARCHITECTURE_SUFFIXES = (
    "ForCausalLM", "ForConditionalGeneration", "ChatModel", "LMHeadModel", "ForTextEncoding", "EmbeddingModel",
    "ForSequenceClassification", "ForTokenClassification", "ForAudioClassification", "ForImageClassification",
    "ForVideoClassification", "ClassificationModel", "ForRewardModeling", "RewardModel", "Model")
# Registry modules whose every attention layer is EncoderOnlyAttention.
ENCODER_ONLY_MODULES = frozenset({"bert", "bert_with_rope", "roberta", "modernbert"})
# Registry modules that take EncoderOnlyAttention when the config sets is_causal false.
CAUSAL_SWITCH_MODULES = frozenset({"llama", "qwen2", "qwen3", "gemma3"})


@cache
def registry() -> dict[str, Any]:
    return json.loads(REGISTRY_FILE.read_text(encoding="utf-8"))


def registered(architecture: str) -> str | None:
    """The registry name vLLM resolves `architecture` to, or None (registry.py _normalize_arch)."""
    module_of = registry()["module_of"]
    if architecture in module_of:
        return architecture
    suffix = next((suffix for suffix in ARCHITECTURE_SUFFIXES if architecture.endswith(suffix)), None)
    if suffix is None:
        return None
    for replacement in ARCHITECTURE_SUFFIXES:
        candidate = architecture[: len(architecture) - len(suffix)] + replacement
        if candidate in module_of:
            return candidate
    return None


def refusal(config: dict[str, Any]) -> str | None:
    """Why vLLM would not serve this config with a KV cache, in vLLM's words; None when it would (or when the config
    names no architecture: not judged here)."""
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    architectures = list(config.get("architectures") or text.get("architectures") or [])
    if not architectures:
        return None
    known = [name for name in (registered(architecture) for architecture in architectures) if name]
    if known:
        module = registry()["module_of"].get(known[0])
        if module in ENCODER_ONLY_MODULES or (module in CAUSAL_SWITCH_MODULES and text.get("is_causal") is False):
            return (f"{known[0]} is an encoder-only model in vLLM ({module}.py's EncoderOnlyAttention): tpu-inference "
                    "allocates it no KV cache (\"encoder-only attention does not need KV cache\"), so it has no KV "
                    "tokens or clients to plan; it serves embeddings or scores (vLLM's pooling runner), not chat")
        return None
    for architecture in architectures:
        version = registry()["previously_supported"].get(architecture)
        if version is not None:
            return (f"vLLM refuses it: \"Model architecture {architecture} was supported in vLLM until v{version}, "
                    "and is not supported anymore. Please use an older version of vLLM if you want to use this "
                    "model architecture.\"")
        plugin = registry()["out_of_tree"].get(architecture)
        if plugin is not None:
            return (f"vLLM refuses it: \"Model architecture {architecture} is not supported in-tree anymore. Please "
                    f"install the plugin at {plugin} if you want to use this model architecture.\"")
    # Not refused outright: with model_impl auto vLLM first tries its Transformers modeling backend
    # (registry.py inspect_model_cls, _try_resolve_transformers) and says "not supported for now" only when that fails.
    return (f"vLLM {registry()['vllm']}'s registry does not list it: vLLM would try its Transformers modeling "
            "backend, a path this planner does not size (and, failing that, refuses it: \"Model architectures "
            f"{architectures} are not supported for now.\")")
