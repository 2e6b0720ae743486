"""Which model implementation tpu-inference 0.32.0 serves an architecture with, and so how its sliding-window layers
are sized (MODEL_IMPL_TYPE=auto, the default: tpu_inference/envs.py).

tpu_inference/models/common/model_loader.py: resolve_model_architecture picks "vllm" for the architectures in
_VLLM_PREFERRED_ARCHITECTURES and "flax_nnx" for the rest; get_model then loads the JAX (flax_nnx) model when the
architecture is in the JAX registry (_get_model_architecture's _MODEL_REGISTRY) and "Fall[s] back to the vLLM model"
when it is not. tests/test_sizing_upstream.py reads both lists from the installed file and holds these to them.

tpu_inference/runner/kv_cache_manager.py get_kv_cache_spec: on the JAX path every layer gets full-length pages
(`sliding_window = None`); on the vLLM path a layer keeps the window vLLM's model class gives it, unless the padded
head sizes differ across layers (`disable_sliding_window = len(head_size_set) > 1`). vLLM then plans a hybrid
(full + sliding window) cache: several KV groups over one block pool (vllm/v1/core/kv_cache_planning.py
get_kv_cache_groups, vLLM 0.32.0), sized in components/sizing/kv_groups.py.
"""

from __future__ import annotations

JAX = "flax_nnx"
VLLM = "vllm"
# tpu_inference/models/common/model_loader.py (0.32.0) _VLLM_PREFERRED_ARCHITECTURES.
VLLM_PREFERRED_ARCHITECTURES = frozenset({
    "GptOssForCausalLM", "Qwen3MoeForCausalLM", "KimiK25ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration",
})
# The same file's _MODEL_REGISTRY keys (_get_model_architecture): the architectures with a JAX model. A plug-in
# may add more through its register_model; nothing in tpu-inference itself calls it.
JAX_REGISTERED_ARCHITECTURES = frozenset({
    "Llama4ForCausalLM", "DeepseekV3ForCausalLM", "LlamaForCausalLM", "Llama4ForConditionalGeneration",
    "Qwen3ForCausalLM", "Qwen2_5_VLForConditionalGeneration", "Eagle3LlamaForCausalLM", "GptOssForCausalLM",
    "Qwen2ForCausalLM", "Gemma4ForConditionalGeneration", "Gemma4ForCausalLM", "Gemma4MTPModel",
    "DFlashForCausalLM", "DFlashDraftModel",
})


def model_implementation(architectures: tuple[str, ...]) -> str:
    """flax_nnx or vllm, as tpu-inference resolves MODEL_IMPL_TYPE=auto and then loads (one architecture: the
    resolver asserts exactly one; none or several can only be the vLLM model's)."""
    if len(architectures) != 1:
        return VLLM
    architecture = architectures[0]
    if architecture in VLLM_PREFERRED_ARCHITECTURES or architecture not in JAX_REGISTERED_ARCHITECTURES:
        return VLLM
    return JAX
