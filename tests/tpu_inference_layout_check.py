"""Run in the vLLM venv (requirements-vllm.txt: tpu-inference 0.32.0): what tpu-inference's own code does with a
`vllm serve --tensor-parallel-size t --data-parallel-size d` on a host of `chips` chips. stdin: JSON
[{"tensor_parallel_size": t, "data_parallel_size": d, "chips": n, "cores_per_chip": c, "online": true}];
stdout: JSON, one answer each: {"multiprocess_dp": TPU_MULTIPROCESS_DP as resolved, "mesh": the sharding
strategy's sizes, "total_devices": one engine's mesh, "vllm_data_parallel_size": what vLLM is left to spawn,
"ranks": [{"visible_chips", "chips_per_process_bounds", "process_port"} per rank] or {"error": ...}}.

The three functions run unchanged, taken by name from the installed files (their modules import JAX at the top and
the venv has none): platforms/tpu_platform.py TpuPlatform._resolve_multiprocess_dp, layers/common/sharding.py
ShardingStrategy and ShardingConfigManager (from_vllm_config), worker/tpu_worker.py
TPUWorker._setup_dp_chip_isolation. tpu-inference's envs.py (no imports beyond the standard library) is loaded
whole, so TPU_MULTIPROCESS_DP is read as the engine reads it. The config objects carry only the fields those
functions read.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import logging
import math
import os
import sys
import types
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

PACKAGE = Path(importlib.util.find_spec("tpu_inference").submodule_search_locations[0])
LOGGER = logging.getLogger("tpu-inference-layout-check")


def load_envs() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("tpu_inference_envs_as_installed", PACKAGE / "envs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def definitions(relative: str, wanted: dict[str, tuple[str, ...] | None], namespace: dict) -> dict:
    """Top-level classes whole (None) or only the named methods of a class, as plain functions, from one file."""
    tree = ast.parse((PACKAGE / relative).read_text())
    body = []
    for node in tree.body:
        if not isinstance(node, (ast.ClassDef, ast.FunctionDef)) or node.name not in wanted:
            continue
        methods = wanted[node.name]
        if methods is None:
            body.append(node)
            continue
        found = [item for item in node.body if isinstance(item, ast.FunctionDef) and item.name in methods]
        if {item.name for item in found} != set(methods):
            raise SystemExit(f"tpu-inference {relative} {node.name} no longer defines {sorted(methods)}")
        for item in found:
            item.decorator_list = []  # a classmethod's `cls` is unused by these; called with None
            body.append(item)
    missing = set(wanted) - {node.name for node in tree.body if isinstance(node, (ast.ClassDef, ast.FunctionDef))}
    if missing:
        raise SystemExit(f"tpu-inference {relative} no longer defines {sorted(missing)}")
    exec(compile(ast.Module(body=body, type_ignores=[]), str(PACKAGE / relative), "exec"), namespace)  # noqa: S102
    return namespace


def upstream(chips: int, cores_per_chip: int) -> types.SimpleNamespace:
    envs = load_envs()
    base_port = int(ast.literal_eval(next(
        node.value for node in ast.parse((PACKAGE / "distributed/jax_parallel_state.py").read_text()).body
        if isinstance(node, ast.Assign) and any(getattr(target, "id", "") == "BASE_TPU_PROCESS_PORT"
                                                for target in node.targets))))
    tpu_info = types.SimpleNamespace(get_num_cores_per_chip=lambda: cores_per_chip, get_num_chips=lambda: chips)
    # `from tpu_inference import tpu_info` inside _setup_dp_chip_isolation: the host's chips as given.
    sys.modules["tpu_inference"] = types.SimpleNamespace(tpu_info=tpu_info, envs=envs)
    shared = {"envs": envs, "math": math, "os": os, "logger": LOGGER, "asdict": asdict, "dataclass": dataclass,
              "List": list, "Optional": Optional}
    sharding = definitions("layers/common/sharding.py", {"ShardingStrategy": None, "ShardingConfigManager": None},
                           dict(shared, jnp=None, utils=None))
    platform = definitions("platforms/tpu_platform.py", {"TpuPlatform": ("_resolve_multiprocess_dp",)},
                           dict(shared, vllm_envs=types.SimpleNamespace(VLLM_TPU_USING_PATHWAYS=False)))
    worker = definitions("worker/tpu_worker.py", {"TPUWorker": ("_setup_dp_chip_isolation",)},
                         dict(shared, jax_parallel_state=types.SimpleNamespace(BASE_TPU_PROCESS_PORT=base_port)))
    return types.SimpleNamespace(manager=sharding["ShardingConfigManager"],
                                 resolve=platform["_resolve_multiprocess_dp"],
                                 isolate=worker["_setup_dp_chip_isolation"])


ISOLATION = ("TPU_VISIBLE_CHIPS", "TPU_CHIPS_PER_PROCESS_BOUNDS", "TPU_PROCESS_PORT", "TPU_MULTIPROCESS_DP")


def answer(request: dict) -> dict:
    for name in ISOLATION:
        os.environ.pop(name, None)
    code = upstream(request["chips"], request.get("cores_per_chip", 1))
    tp, dp = request["tensor_parallel_size"], request["data_parallel_size"]
    parallel = types.SimpleNamespace(tensor_parallel_size=tp, data_parallel_size=dp, data_parallel_rank=0,
                                     data_parallel_size_local=dp, decode_context_parallel_size=1,
                                     prefill_context_parallel_size=1,
                                     _api_process_rank=-1 if request.get("online", True) else 0)
    config = types.SimpleNamespace(parallel_config=parallel, additional_config={}, lora_config=None)
    try:
        code.resolve(None, config)
        manager = code.manager.from_vllm_config(config)
        ranks = []
        if os.environ.get("TPU_MULTIPROCESS_DP") == "1":
            for rank in range(dp):
                rank_config = types.SimpleNamespace(parallel_config=types.SimpleNamespace(data_parallel_index=rank),
                                                    sharding_config=manager)
                code.isolate(types.SimpleNamespace(vllm_config=rank_config))
                ranks.append({"visible_chips": os.environ["TPU_VISIBLE_CHIPS"],
                              "chips_per_process_bounds": os.environ["TPU_CHIPS_PER_PROCESS_BOUNDS"],
                              "process_port": int(os.environ["TPU_PROCESS_PORT"])})
    except (ValueError, AssertionError) as error:
        return {"error": f"{type(error).__name__}: {error}"}
    return {"multiprocess_dp": os.environ.get("TPU_MULTIPROCESS_DP"), "mesh": asdict(manager.sharding_strategy),
            "total_devices": manager.total_devices, "vllm_data_parallel_size": parallel.data_parallel_size,
            "ranks": ranks}


def main() -> None:
    logging.disable(logging.CRITICAL)
    print(json.dumps([answer(request) for request in json.load(sys.stdin)]))


if __name__ == "__main__":
    main()
