"""Run in the vLLM venv: the KV pool tpu-inference 0.32.0 and vllm-tpu 0.32.0 would build for a config.json on a host,
at every tensor-parallel size the host's chip count divides by (not the planner's choices), with as much of the
upstream code running as written as the venv allows (it has no JAX, so tpu-inference's functions are lifted from
the installed files by name, as tests/tpu_inference_kv_check.py does):

- TP: vLLM's ModelConfig.verify_with_parallel_config (heads divisible by TP) and tpu-inference's own spec loop
  (get_padded_num_heads asserts when KV heads do not pad to TP) decide which sizes run;
- the specs: KVCacheManager.get_kv_cache_spec and _create_attention_spec (runner/kv_cache_manager.py), run on a
  runner stub with the model's text config, a mesh of TP model shards and vLLM's own FullAttentionSpec /
  SlidingWindowSpec classes (the JAX path: no vLLM attention modules registered);
- the page size: PallasAttentionBackend.get_page_size and get_min_page_size (layers/vllm/backends/flash_attn.py),
  the larger taken as tpu_platform.py's check_and_update_config does (the one line restated);
- the pool: TPUWorker.determine_available_memory (worker/tpu_worker.py) on TP devices reporting the catalog's HBM
  limit each and the weights split over them;
- vLLM's own get_kv_cache_configs (v1/core/kv_cache_planning.py), called as the engine calls it
  (v1/engine/core.py _initialize_kv_caches), and get_kv_cache_groups, which it calls first: the groups, the null
  block, the start-up check on the group-padded
  _max_memory_usage_bytes_from_groups and the pages; get_kv_cache_capacity (v1/core/kv_cache_utils.py) for the
  logged "KV cache size".

stdin: JSON [{"config": PATH, "chips": N, "hbm_bytes_per_chip": B, "weights_bytes": W, "max_model_len": L,
"gpu_memory_utilization": U, "kv_dtype": "auto"}]; stdout: JSON [{..., "tp": {"1": {"runs": true, "block_size": ..,
"num_blocks": .., "tokens": ..} (or "pool_error" when the weights fill the cap) or {"runs": false, "why": ..}}}].

The spec loop runs its JAX branch (no vLLM attention modules registered): right for the JAX-path models and for a
vLLM-path model without sliding windows (Qwen3-MoE), whose vLLM branch gives the same full-attention specs;
components/sizing/implementation.py refuses the rest.
"""

from __future__ import annotations

import ast
import json
import logging
import sys
import types

import tpu_inference_kv_check as kv_check

PACKAGE = kv_check.PACKAGE
# vLLM's default max_num_seqs on TPU (vllm/engine/arg_utils.py: the OpenAI server outside H100s), which
# get_min_page_size divides the page table by.
DEFAULT_MAX_NUM_SEQS = 256


def methods_of(relative: str, class_name: str, names: tuple[str, ...], namespace: dict) -> dict:
    """The named methods of one class in a tpu-inference or vLLM file, as plain functions in `namespace`."""
    path = relative if relative.startswith("/") else str(PACKAGE / relative)
    tree = ast.parse(open(path).read())
    [cls] = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == class_name]
    wanted = [node for node in cls.body if isinstance(node, ast.FunctionDef) and node.name in names]
    missing = set(names) - {node.name for node in wanted}
    if missing:
        raise SystemExit(f"{relative} {class_name} no longer defines {sorted(missing)}")
    for node in wanted:
        node.decorator_list = []
    exec(compile(ast.Module(body=wanted, type_ignores=[]), path, "exec"), namespace)  # noqa: S102 - upstream file
    return namespace


class AttentionStub:
    """What get_kv_cache_spec reads of one vLLM Attention layer (vllm/model_executor/layers/attention/
    attention.py): head_size, num_kv_heads, sliding_window, attn_type, kv_sharing_target_layer_name."""

    def __init__(self, **fields):
        self.__dict__.update(fields)


def _attention_type():
    from vllm.v1.attention import backend
    return backend.AttentionType


AttentionType = None


def upstream():
    global AttentionType
    AttentionType = _attention_type()
    import torch
    import vllm.config  # noqa: F401 - first: the convertor module is circular with it
    from vllm.config import model as model_config_module
    from vllm.utils.math_utils import cdiv, next_power_of_2
    from vllm.v1 import kv_cache_interface
    from vllm.v1.core import kv_cache_planning, kv_cache_utils

    up = kv_check.upstream()
    utils = types.SimpleNamespace(**{name: up.utils[name] for name in (
        "get_padded_head_dim", "get_padded_num_heads", "get_layer_kv_params", "get_mesh_shape_product")})
    manager_namespace = {
        "common_utils": utils, "ShardingAxisName": types.SimpleNamespace(ATTN_HEAD=("model", "expert", "dcp")),
        "compute_kv_share_map": up.kv_share["compute_kv_share_map"],
        "get_attention_page_size_bytes": up.cache["get_attention_page_size_bytes"],
        "FullAttentionSpec": kv_cache_interface.FullAttentionSpec,
        "SlidingWindowSpec": kv_cache_interface.SlidingWindowSpec,
        "MLAAttentionSpec": kv_cache_interface.MLAAttentionSpec, "KVCacheSpec": kv_cache_interface.KVCacheSpec,
        "logger": logging.getLogger("tpu_inference_pool_check"),
        # The vLLM-path branch: attention layers as vLLM's model class registers them (stubs of these classes,
        # built by attention_layers below); no Mamba or DeepSeek-V4 layers in a config sized here.
        "Attention": AttentionStub, "MLAAttention": type("MLAAttention", (), {}),
        "MambaBase": type("MambaBase", (), {}), "AttentionLayerBase": type("AttentionLayerBase", (), {}),
        "AttentionType": AttentionType, "is_cache_for_ds_v4": lambda module: False,
        "get_layers_from_vllm_config": lambda config, classes: config.compilation_config.static_forward_context,
    }
    manager = methods_of("runner/kv_cache_manager.py", "KVCacheManager",
                         ("get_kv_cache_spec", "_create_attention_spec"), manager_namespace)
    pages = methods_of("layers/vllm/backends/flash_attn.py", "PallasAttentionBackend",
                       ("get_page_size", "get_min_page_size"), {"cdiv": cdiv, "next_power_of_2": next_power_of_2})
    worker = methods_of("worker/tpu_worker.py", "TPUWorker", ("determine_available_memory",),
                        {"logger": logging.getLogger("tpu_inference_pool_check"), "envs": None})
    verify = methods_of(model_config_module.__file__, "ModelConfig", ("verify_with_parallel_config",),
                        dict(vars(model_config_module)))
    return types.SimpleNamespace(manager=manager, pages=pages, worker=worker, verify=verify, torch=torch,
                                 planning=kv_cache_planning, utils=kv_cache_utils, backend=up.backend,
                                 kv_share=up.kv_share["compute_kv_share_map"],
                                 layer_kv_params=up.utils["get_layer_kv_params"])


def configs_of(path: str):
    """The HF config and text config as vLLM loads them, and vLLM's ModelArchitectureConfig (ModelConfig.
    get_model_arch_config: the convertor's convert(), per layer on a heterogeneous config)."""
    import shutil
    import tempfile
    from pathlib import Path

    from transformers import AutoConfig
    from vllm.transformers_utils.config import get_hf_text_config
    from vllm.transformers_utils.model_arch_config_convertor import (
        MODEL_ARCH_CONFIG_CONVERTORS,
        ModelArchConfigConvertorBase,
    )
    with tempfile.TemporaryDirectory() as directory:
        shutil.copy(path, Path(directory) / "config.json")
        config = AutoConfig.from_pretrained(directory, local_files_only=True)
    text = get_hf_text_config(config)
    arch = MODEL_ARCH_CONFIG_CONVERTORS.get(config.model_type, ModelArchConfigConvertorBase)(config, text).convert()
    return config, text, arch


def vllm_config_stub(config, text, arch, tp, max_model_len, utilization, max_num_batched_tokens, block_size=16):
    """What the upstream functions run here read of VllmConfig, from vLLM's own config classes where they build on
    a CPU (CacheConfig) and the loaded model otherwise (ModelConfig.get_head_size, get_total_num_kv_heads and
    get_num_layers return the arch config's figures)."""
    from vllm.config import CacheConfig
    cache = CacheConfig(block_size=block_size, gpu_memory_utilization=utilization)
    # tpu-inference's layout (runner/kv_cache_manager.py DEFAULT_KV_CACHE_LAYOUT = "NHD", vLLM's alias of LBNHC).
    cache.kv_cache_layout = "NHD"
    model = types.SimpleNamespace(
        max_model_len=max_model_len, hf_text_config=text, hf_config=config, use_mla=False, multimodal_config=None,
        get_total_num_kv_heads=lambda: arch.total_num_kv_heads, get_head_size=lambda: arch.head_size,
        get_num_layers=lambda parallel: text.num_hidden_layers, model_arch_config=arch,
        # get_kv_cache_configs auto-fits the length only when it was -1; get_kv_cache_groups groups by itself
        # unless the model class declares its own grouping (none of the families sized here).
        original_max_model_len=max_model_len, supports_kv_cache_grouping=False)
    parallel = types.SimpleNamespace(tensor_parallel_size=tp, enable_hc_sp=False, enable_expert_parallel=False,
                                     pipeline_parallel_size=1, decode_context_parallel_size=1)
    stub = types.SimpleNamespace(
        model_config=model, cache_config=cache, parallel_config=parallel,
        scheduler_config=types.SimpleNamespace(max_num_seqs=DEFAULT_MAX_NUM_SEQS,
                                               disable_hybrid_kv_cache_manager=False,
                                               max_num_batched_tokens=max_num_batched_tokens,
                                               async_scheduling=True),
        attention_config=types.SimpleNamespace(hisparse_config=None),
        compilation_config=types.SimpleNamespace(static_forward_context={}),
        kv_transfer_config=None, speculative_config=None, use_v2_model_runner=False)
    # vLLM's own properties (vllm/config/vllm.py): two concurrent batches with async scheduling, and the tokens
    # in flight a sliding-window layer holds beyond its window.
    from vllm.config import VllmConfig
    stub.max_concurrent_batches = VllmConfig.max_concurrent_batches.fget(stub)
    stub.max_in_flight_tokens = VllmConfig.max_in_flight_tokens.fget(stub)
    stub.num_prefill_lookahead_tokens = VllmConfig.num_prefill_lookahead_tokens.fget(stub)
    return stub


def attention_layers(up, text, arch) -> dict:
    """The decoder Attention layers vLLM's model class builds (tpu-inference's vLLM path), by the rules the vLLM
    0.32.0 model files state: the layer's own window where the class gives one (gemma3.py and llama.py:
    layer_types[i] == "sliding_attention"; gpt_oss.py: every even layer), else cache_config.sliding_window, which
    engine/arg_utils.py sets to the config's window only when layer_types is absent or all sliding
    (layers/attention/attention.py); heads and head size per layer as get_layer_kv_params reads them, the KV-shared
    layers pointing at their target (compute_kv_share_map)."""
    layer_types = getattr(text, "layer_types", None)
    window = getattr(text, "sliding_window", None)
    everywhere = window if layer_types is None or all(kind == "sliding_attention" for kind in layer_types) else None
    shared = up.kv_share(text)
    layers = {}
    for index in range(text.num_hidden_layers):
        kind = layer_types[index] if layer_types and index < len(layer_types) else "full_attention"
        if text.model_type == "gpt_oss":
            own = window if index % 2 == 0 else None
        else:
            own = window if kind == "sliding_attention" else None
        head_size, kv_heads = up.layer_kv_params(text, kind)
        layers[f"model.layers.{index}.self_attn.attn"] = AttentionStub(
            head_size=head_size or arch.head_size, num_kv_heads=kv_heads or arch.total_num_kv_heads,
            sliding_window=own if own is not None else everywhere, attn_type=AttentionType.DECODER,
            kv_sharing_target_layer_name=(f"model.layers.{shared[index]}.self_attn.attn" if index in shared
                                          else None))
    return layers


def pool(up, request, loaded, tp):
    config = vllm_config_stub(*loaded, tp, request["max_model_len"], request["gpu_memory_utilization"],
                              request.get("max_num_batched_tokens", 4096))
    if request.get("vllm_path"):
        config.compilation_config.static_forward_context = attention_layers(up, loaded[1], loaded[2])
    model_self = types.SimpleNamespace(**vars(config.model_config))
    try:
        up.verify["verify_with_parallel_config"](model_self, config.parallel_config)
    except (ValueError, NotImplementedError) as error:
        return {"runs": False, "why": str(error)}
    # tpu_platform.check_and_update_config: the page size, raised to the page-table minimum.
    page = up.pages["get_page_size"](config)
    config.cache_config.block_size = max(page, up.pages["get_min_page_size"](config))
    runner = types.SimpleNamespace(
        cache_config=config.cache_config, mesh=types.SimpleNamespace(shape={"model": tp}),
        model_config=config.model_config, vllm_config=config, parallel_config=config.parallel_config,
        kv_cache_dtype=kv_check.KV_DTYPES[request["kv_dtype"]], attention_backend=up.backend,
        speculative_config=None)
    manager = types.SimpleNamespace(runner=runner, use_mla=False, shared_kv_cache_layers={},
                                    _hybrid_uniform_page_size_bytes=None)
    manager._create_attention_spec = lambda *args, **kw: up.manager["_create_attention_spec"](manager, *args, **kw)
    try:
        specs = up.manager["get_kv_cache_spec"](manager)
    except AssertionError as error:  # get_padded_num_heads: KV heads that do not pad to TP
        return {"runs": False, "why": f"get_padded_num_heads: {error}"}
    for spec in specs.values():  # vLLM's spec takes a torch dtype; the page bytes are tpu-inference's already
        object.__setattr__(spec, "dtype", up.torch.bfloat16)
    weights = request["weights_bytes"]
    used = [weights // tp + (weights % tp if device == 0 else 0) for device in range(tp)]
    hbm = [(used[device], request["hbm_bytes_per_chip"]) for device in range(tp)]
    worker_namespace = up.worker
    worker_namespace["utils"] = types.SimpleNamespace(hbm_usage_bytes=lambda devices: hbm, GBYTES=1024**3)
    worker = types.SimpleNamespace(cache_config=config.cache_config, devices=list(range(tp)), vllm_config=config)
    try:
        available = up.worker["determine_available_memory"](worker)
    except ValueError as error:  # "total_hbm_used_gb=... exceeds ...": the weights fill the cap
        return {"runs": True, "block_size": config.cache_config.block_size, "pool_error": str(error)}
    # The engine's own call (vllm/v1/engine/core.py _initialize_kv_caches): get_kv_cache_configs, which groups the
    # layers (get_kv_cache_groups), reserves the null block and checks one max-model-len request against the
    # group-padded _max_memory_usage_bytes_from_groups before it builds the config; the groups counted on a copy
    # of the specs, as get_kv_cache_groups may rewrite them in place.
    groups = up.planning.get_kv_cache_groups(config, dict(specs))
    try:
        [kv_cache_config] = up.planning.get_kv_cache_configs(config, [dict(specs)], [available])
        starts, refusal = True, None
    except ValueError as error:
        starts, refusal = False, str(error)
        # The config get_kv_cache_configs would have built past its check (its own line, one worker).
        kv_cache_config = up.planning.get_kv_cache_config_from_groups(config, groups, available)
    tokens, _ = up.utils.get_kv_cache_capacity(config, kv_cache_config)
    # The public check_enough_kv_cache_memory sums each layer's own need (max_memory_usage_bytes), not the padded
    # groups': kept to show where the two part (a bucket split into unequal groups).
    try:
        up.planning.check_enough_kv_cache_memory(config, dict(specs), available)
        public_starts = True
    except ValueError:
        public_starts = False
    return {"runs": True, "block_size": config.cache_config.block_size, "num_blocks": kv_cache_config.num_blocks,
            "tokens": tokens, "available": available, "groups": len(groups), "starts": starts,
            "public_check_starts": public_starts,
            "refusal": refusal, "windows": sorted({group.kv_cache_spec.sliding_window for group in groups
                                                   if hasattr(group.kv_cache_spec, "sliding_window")
                                                   and group.kv_cache_spec.sliding_window is not None})}


def main() -> int:
    requests = json.load(sys.stdin)
    up = upstream()
    answers = []
    for request in requests:
        loaded = configs_of(request["config"])
        sizes = [size for size in range(1, request["chips"] + 1) if request["chips"] % size == 0]
        answers.append({**request, "tp": {str(size): pool(up, request, loaded, size) for size in sizes}})
    json.dump(answers, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
