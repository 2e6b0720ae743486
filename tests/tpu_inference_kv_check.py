"""Run in the vLLM venv (requirements-vllm.txt: vLLM 0.33.0, tpu-inference 0.32.0, transformers): KV bytes per
token for each config.json, computed by tpu-inference's own functions. stdin: JSON
[{"config": PATH, "tensor_parallel_sizes": [1, 2, ...], "kv_dtypes": ["auto", "fp8"], "model_dtypes": ["auto"]}]
(model_dtypes, vLLM's --dtype, optional: ["auto"]); stdout: JSON [{"config": PATH, "owners": [layer indexes with a
cache], "bytes": {"TP:DTYPE": int} (at --dtype auto), "bytes_at": {"TP:DTYPE:MODEL_DTYPE": int}, "served":
{MODEL_DTYPE: the dtype vLLM serves it at}}].

The model's dtype is vLLM's own (vllm/config/model.py _get_and_verify_dtype on the transformers config), and an
"auto" KV dtype becomes it by tpu-inference's runner's own statements (runner/tpu_runner.py TPUModelRunner.__init__:
`self.dtype = self.model_config.dtype`, then `cache_dtype = self.cache_config.cache_dtype` and `if cache_dtype ==
"auto": cache_dtype = self.dtype`), taken from the installed file and run on a stand-in `self`.

tpu-inference's modules import JAX at the top and the venv has no JAX (it is a CPU install for vLLM's parser), so
the functions are taken from their files by name and run unchanged, their module-level imports replaced by the
few names they use (`dtypes.itemsize_bits`, numpy's prod, a mesh with only a shape). Nothing of them is copied:
the source is read from the installed package each run. Transformers builds the config object as vLLM would
(AutoConfig from the directory, then get_hf_text_config), and vLLM's own convertor gives the fallbacks the
runner uses (get_total_num_kv_heads, get_head_size).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import shutil
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

PACKAGE = Path(importlib.util.find_spec("tpu_inference").submodule_search_locations[0])
BITS = {"bfloat16": 16, "float16": 16, "float32": 32, "float8_e4m3fn": 8, "float8_e5m2": 8}
# vLLM's --kv-cache-dtype -> the dtype name tpu-inference allocates; "auto" is the model's dtype
# (allocated_kv_dtype), bf16 at the default --dtype of every catalogued checkpoint (the pool check sizes at that).
KV_DTYPES = {"auto": "bfloat16", "bfloat16": "bfloat16", "fp8": "float8_e4m3fn", "fp8_e4m3": "float8_e4m3fn",
             "fp8_e5m2": "float8_e5m2"}


def functions_from(relative: str, names: tuple[str, ...], namespace: dict) -> dict:
    """The named top-level functions (and classes) of one tpu-inference file, defined in `namespace`."""
    source = (PACKAGE / relative).read_text()
    tree = ast.parse(source)
    wanted = [node for node in tree.body
              if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names]
    missing = set(names) - {node.name for node in wanted}
    if missing:
        raise SystemExit(f"tpu-inference {relative} no longer defines {sorted(missing)}")
    module = ast.Module(body=wanted, type_ignores=[])
    exec(compile(module, str(PACKAGE / relative), "exec"), namespace)  # noqa: S102 - the installed upstream file
    return namespace


def upstream() -> types.SimpleNamespace:
    dtypes = types.SimpleNamespace(itemsize_bits=lambda dtype: BITS[str(dtype)])
    shared: dict = {"dtypes": dtypes, "np": np, "Any": object, "Optional": None, "Tuple": tuple, "Union": None}
    utils = functions_from("utils.py", ("get_padded_head_dim", "get_padded_num_heads", "get_layer_kv_params",
                                        "get_dtype_packing", "get_mesh_shape_product"), dict(shared))
    util = functions_from("kernels/ragged_paged_attention/v3/util.py",
                          ("cdiv", "align_to", "get_dtype_bitwidth", "get_dtype_packing"), dict(shared))
    kernel = functions_from("kernels/ragged_paged_attention/v3/kernel.py", ("get_kv_cache_shape",), dict(util))
    kernel_hd64 = functions_from("kernels/ragged_paged_attention/v3/kernel_hd64.py", ("get_kv_cache_shape",),
                                 dict(util))
    kv_share = {}
    exec(compile((PACKAGE / "models/common/kv_share.py").read_text(),  # noqa: S102 - no imports of its own
                 str(PACKAGE / "models/common/kv_share.py"), "exec"), kv_share)

    class Backend:
        """RPAAttentionBackend.get_kv_cache_shape's dispatch (layers/common/attention_backend.py): the hd64
        kernel for head_dim 64, else RPA v3 (USE_BATCHED_RPA_KERNEL is off by default)."""

        def get_kv_cache_shape(self, total_num_pages, page_size, num_kv_heads, head_dim, kv_dtype):
            chosen = kernel_hd64 if head_dim == 64 else kernel
            return chosen["get_kv_cache_shape"](total_num_pages, page_size, num_kv_heads, head_dim, kv_dtype)

    sharding = types.SimpleNamespace(KV_HEAD=("model", "expert"), KV_CONTEXT=("pcp", "dcp"))
    cache_namespace = dict(shared, utils=types.SimpleNamespace(get_mesh_shape_product=utils["get_mesh_shape_product"]),
                           ShardingAxisName=sharding, RPAAttentionBackend=Backend, AttentionBackend=object,
                           to_jax_dtype=lambda dtype: dtype, envs=None, mla=None)
    cache = functions_from("runner/kv_cache.py", ("get_kv_cache_shape_with_mesh", "get_attention_page_size_bytes"),
                           cache_namespace)
    return types.SimpleNamespace(utils=utils, kv_share=kv_share, cache=cache, backend=Backend())


def runner_kv_dtype_statements():
    """TPUModelRunner.__init__'s `self.dtype = ...` and its `cache_dtype = ...` / `if cache_dtype == "auto"` pair,
    compiled from the installed tpu_runner.py (upstream's own nodes, nothing rewritten)."""
    relative = "runner/tpu_runner.py"
    tree = ast.parse((PACKAGE / relative).read_text())
    runner = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "TPUModelRunner")
    init = next(node for node in runner.body if isinstance(node, ast.FunctionDef) and node.name == "__init__")
    text = [ast.unparse(node) for node in init.body]
    wanted = ["self.dtype = self.model_config.dtype", "cache_dtype = self.cache_config.cache_dtype",
              "if cache_dtype == 'auto':\n    cache_dtype = self.dtype"]
    missing = [line for line in wanted if line not in text]
    if missing:
        raise SystemExit(f"tpu-inference {relative} TPUModelRunner.__init__ no longer has {missing}")
    start = text.index(wanted[1])
    if text[start + 1] != wanted[2]:
        raise SystemExit(f"tpu-inference {relative}: the auto KV dtype no longer follows its cache_dtype line")
    nodes = [init.body[text.index(wanted[0])], init.body[start], init.body[start + 1]]
    return compile(ast.Module(body=nodes, type_ignores=[]), str(PACKAGE / relative), "exec")


def served_dtypes(path: str, model_dtypes: list[str]) -> dict:
    """vLLM's --dtype -> the torch dtype vLLM serves this config at (_get_and_verify_dtype, as ModelConfig calls it;
    the platform's supported dtypes are vllm/platforms/interface.py's, which tpu-inference's TpuPlatform keeps)."""
    import vllm.config  # noqa: F401 - as text_config_of: first, for the circular convertor import
    from transformers import AutoConfig
    from vllm.config.model import _get_and_verify_dtype
    with tempfile.TemporaryDirectory() as directory:
        shutil.copy(path, Path(directory) / "config.json")
        config = AutoConfig.from_pretrained(directory, local_files_only=True)
        served = {}
        for name in model_dtypes:
            try:
                served[name] = _get_and_verify_dtype(directory, config, name, is_pooling_model=False)
            except ValueError as error:  # "The model type 'gemma3' does not support float16 ...": refused
                served[name] = None
                print(f"{path}: --dtype {name}: {error}", file=sys.stderr)
        return served


def allocated_kv_dtype(statements, kv_dtype: str, model_dtype) -> str:
    """The runner's KV dtype for --kv-cache-dtype `kv_dtype` on a model served at `model_dtype`, by name."""
    stand_in = types.SimpleNamespace(model_config=types.SimpleNamespace(dtype=model_dtype),
                                     cache_config=types.SimpleNamespace(cache_dtype=kv_dtype))
    scope: dict = {"self": stand_in}
    exec(statements, scope)  # noqa: S102 - the installed upstream statements
    chosen = scope["cache_dtype"]
    return KV_DTYPES[chosen] if isinstance(chosen, str) else str(chosen).removeprefix("torch.")


def text_config_of(path: str):
    import vllm.config  # noqa: F401 - imported first: the convertor module is circular with it
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
    convertor = MODEL_ARCH_CONFIG_CONVERTORS.get(config.model_type, ModelArchConfigConvertorBase)(config, text)
    # Asked only when a layer's own value is missing, as the runner's `or` does (a heterogeneous config refuses a
    # model-wide head_dim, and never needs one).
    return text, convertor.get_total_num_kv_heads, convertor.get_head_size


def bytes_per_token(up, text, base_kv_heads, base_head_size, tp: int, allocated: str) -> tuple[list, int]:
    """kv_cache_manager.get_kv_cache_spec's JAX path, layer by layer, with the page size from
    get_attention_page_size_bytes on a mesh of `tp` model shards (block 64, then per token)."""
    share = up.kv_share["compute_kv_share_map"](text)
    mesh = types.SimpleNamespace(shape={"model": tp})
    owners, total, block = [], 0, 64
    layer_types = list(getattr(text, "layer_types", None) or [])
    for index in range(text.num_hidden_layers):
        if index in share:
            continue
        layer_type = layer_types[index] if index < len(layer_types) else "full_attention"
        head_size, kv_heads = up.utils["get_layer_kv_params"](text, layer_type)
        kv_heads = up.utils["get_padded_num_heads"](kv_heads or base_kv_heads(), tp)
        head_size = up.utils["get_padded_head_dim"](head_size or base_head_size())
        page = up.cache["get_attention_page_size_bytes"](mesh, block, kv_heads, head_size, allocated, False,
                                                          up.backend)
        assert page % block == 0
        owners.append(index)
        total += page // block
    return owners, total


def main() -> int:
    requests = json.load(sys.stdin)
    up = upstream()
    statements = runner_kv_dtype_statements()
    answers = []
    for request in requests:
        text, base_kv_heads, base_head_size = text_config_of(request["config"])
        model_dtypes = sorted({"auto", *request.get("model_dtypes", ["auto"])})
        served = served_dtypes(request["config"], model_dtypes)
        answer = {"config": request["config"], "bytes": {}, "bytes_at": {},
                  "served": {name: str(dtype).removeprefix("torch.") if dtype is not None else "refused"
                             for name, dtype in served.items()}}
        for tp in request["tensor_parallel_sizes"]:
            for kv_dtype in request["kv_dtypes"]:
                for model_dtype in (name for name in model_dtypes if served[name] is not None):
                    allocated = allocated_kv_dtype(statements, kv_dtype, served[model_dtype])
                    owners, total = bytes_per_token(up, text, base_kv_heads, base_head_size, tp, allocated)
                    answer["owners"] = owners
                    answer["bytes_at"][f"{tp}:{kv_dtype}:{model_dtype}"] = total
                    if model_dtype == "auto":
                        answer["bytes"][f"{tp}:{kv_dtype}"] = total
        answers.append(answer)
    json.dump(answers, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
