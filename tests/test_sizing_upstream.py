"""The planner held to the source: tpu-inference 0.32.0's own functions (get_padded_head_dim,
get_padded_num_heads, get_layer_kv_params, compute_kv_share_map, the RPA v3 cache shapes through
get_attention_page_size_bytes) compute KV bytes per token for every catalogued config.json at every tensor-parallel
size the planner can pick, on configs built by transformers as vLLM builds them; components/sizing must agree to
the byte. Run in the vLLM venv by tests/tpu_inference_kv_check.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from components import catalog, sizing
from components.catalog import models as catalog_models
from components.sizing import kv
from components.sizing.fit import whole_chips_per_rank
from components.sizing.kv import SizingError
from tests import vllm_venv

ROOT = Path(__file__).resolve().parent.parent
CHECK = ROOT / "tests" / "tpu_inference_kv_check.py"
KV_DTYPES = ("auto", "fp8")
# vLLM's --dtype choices the stack offers (components/settings/vllm.py VllmSettings.dtype).
MODEL_DTYPES = ("auto", "bfloat16", "float16", "float32")


def planner_sizes(geometry) -> list[int]:
    return sorted({size for shape in catalog.all_shapes()
                   for size in sizing.tensor_parallel_choices(geometry, shape.chips)})


def upstream(requests: list[dict]) -> list[dict]:
    completed = vllm_venv.run([str(CHECK)], input=json.dumps(requests), text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout)


@pytest.fixture(scope="module")
def answers() -> dict[str, dict]:
    requests = [{"config": str(catalog_models.CONFIGS / model.config_file),
                 "tensor_parallel_sizes": planner_sizes(model.geometry), "kv_dtypes": list(KV_DTYPES),
                 "model_dtypes": list(MODEL_DTYPES)}
                for model in catalog.catalog_models()]
    return {Path(answer["config"]).name: answer for answer in upstream(requests)}


@pytest.mark.parametrize("name", [model.name for model in catalog.catalog_models()])
def test_the_planner_agrees_with_tpu_inference_to_the_byte(answers, name):
    model = catalog.catalog_model(name)
    answer = answers[model.config_file]
    assert answer["owners"] == [layer.index for layer in model.geometry.kv_layers]
    planned = {f"{size}:{dtype}": sizing.kv_bytes_per_token(model.geometry, size, dtype)
               for size in planner_sizes(model.geometry) for dtype in KV_DTYPES}
    assert planned == answer["bytes"]


@pytest.mark.parametrize("name", [model.name for model in catalog.catalog_models()])
def test_the_kv_cache_follows_the_served_dtype_as_tpu_inference_allocates_it(answers, name):
    """vLLM resolves --dtype (float32 upcasts the bf16 checkpoint), and tpu-inference's runner makes an auto KV
    cache that dtype: the planner's bytes per token at each --dtype are upstream's, to the byte."""
    model = catalog.catalog_model(name)
    answer = answers[model.config_file]
    def planned_dtype(dtype: str) -> str:
        try:
            return kv.served_dtype(dtype, model.geometry.dtype, model.geometry.model_type)
        except SizingError:  # as vLLM's _check_valid_dtype refuses (float16 on Gemma 3)
            return "refused"

    served = {dtype: planned_dtype(dtype) for dtype in MODEL_DTYPES}
    assert answer["served"] == served
    planned = {f"{size}:{kv_dtype}:{dtype}": sizing.kv_bytes_per_token(model.geometry, size, kv_dtype, dtype)
               for size in planner_sizes(model.geometry) for kv_dtype in KV_DTYPES for dtype in MODEL_DTYPES
               if served[dtype] != "refused"}
    assert planned == answer["bytes_at"]
    assert answer["bytes_at"]["1:auto:float32"] == 2 * answer["bytes_at"]["1:auto:bfloat16"]


def test_the_check_bites_on_a_planner_that_forgets_the_padding(answers):
    # What the config alone says (no head padding to TP, no packing) is not what tpu-inference allocates.
    model = catalog.catalog_model("google/gemma-4-E2B-it")
    unpadded = sizing.unpadded_kv_bytes_per_token(model.geometry)
    assert answers[model.config_file]["bytes"]["4:auto"] != unpadded
    assert answers[model.config_file]["bytes"]["1:auto"] == unpadded == 18_432


LOADER_LISTS = """
import ast, importlib.util, json, pathlib
package = pathlib.Path(importlib.util.find_spec("tpu_inference").submodule_search_locations[0])
tree = ast.parse((package / "models" / "common" / "model_loader.py").read_text())
preferred, registry = None, set()
for node in ast.walk(tree):
    if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "_VLLM_PREFERRED_ARCHITECTURES":
        preferred = sorted(element.value for element in node.value.args[0].elts)
    if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript)
            and getattr(node.targets[0].value, "id", "") == "_MODEL_REGISTRY"
            and isinstance(node.targets[0].slice, ast.Constant)):  # not register_model's plug-in entry
        registry.add(node.targets[0].slice.value)
print(json.dumps({"preferred": preferred, "registry": sorted(registry)}))
"""


def test_the_model_path_lists_are_tpu_inferences_own():
    # tpu_inference/models/common/model_loader.py, read from the installed file (its module imports JAX).
    from components.sizing import implementation
    completed = vllm_venv.run(["-c", LOADER_LISTS], text=True)
    assert completed.returncode == 0, completed.stderr[-3000:]
    lists = json.loads(completed.stdout)
    assert set(lists["preferred"]) == implementation.VLLM_PREFERRED_ARCHITECTURES
    assert set(lists["registry"]) == implementation.JAX_REGISTERED_ARCHITECTURES


POOL_CHECK = ROOT / "tests" / "tpu_inference_pool_check.py"
POOL_LENGTHS = (4096, 32768)


def chip_divisors(chips: int) -> list[int]:
    return [size for size in range(1, chips + 1) if chips % size == 0]


@pytest.fixture(scope="module")
def pools() -> list[dict]:
    requests = [{"config": str(catalog_models.CONFIGS / model.config_file), "model": model.name,
                 # tpu-inference sizes over JAX devices: a TPU7x chip is two, each with half its HBM.
                 "accelerator_type": shape.accelerator_type, "chips": shape.devices,
                 "hbm_bytes_per_chip": shape.hbm_bytes_per_device, "weights_bytes": model.weights.bytes,
                 "max_model_len": length, "gpu_memory_utilization": sizing.DEFAULT_GPU_MEMORY_UTILIZATION,
                 "kv_dtype": "auto",
                 "vllm_path": sizing.model_implementation(model.geometry.architectures) == "vllm"}
                for model in catalog.catalog_models() for shape in catalog.all_shapes() for length in POOL_LENGTHS]
    completed = vllm_venv.run([str(POOL_CHECK)], input=json.dumps(requests), text=True, timeout=900,
                              cwd=str(ROOT / "tests"))
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout)


def test_the_planners_tp_sizes_are_the_ones_vllm_and_tpu_inference_run(pools):
    for answer in pools:
        model, shape = catalog.catalog_model(answer["model"]), catalog.shape(answer["accelerator_type"])
        assert sorted(int(size) for size in answer["tp"]) == chip_divisors(shape.devices)
        runs = tuple(int(size) for size, result in answer["tp"].items() if result["runs"])
        assert sizing.tensor_parallel_choices(model.geometry, shape.devices) == runs, answer["model"]


def test_the_planners_page_pool_and_tokens_are_upstreams_at_every_tp_that_runs(pools):
    compared = 0
    for answer in pools:
        model, shape = catalog.catalog_model(answer["model"]), catalog.shape(answer["accelerator_type"])
        for size, upstream_pool in answer["tp"].items():
            # A size whose data-parallel ranks would split chips (TPU7x at an odd TP) is never planned.
            if not upstream_pool["runs"] or whole_chips_per_rank(int(size), shape.devices // int(size), shape):
                continue
            result = sizing.fit(model, shape, answer["max_model_len"], tensor_parallel_size=int(size))
            where = (answer["model"], answer["accelerator_type"], answer["max_model_len"], size)
            assert result.figures["block_size"].value == upstream_pool["block_size"], where
            if "pool_error" in upstream_pool:
                assert result.figures["kv_pool"].value <= 0 and not result.fits, where
                continue
            assert result.figures["kv_pool"].value == upstream_pool["available"], where
            assert result.figures["kv_blocks"].value == upstream_pool["num_blocks"], where
            assert result.figures["kv_tokens"].value == upstream_pool["tokens"], where
            assert (not any("refuses to start" in reason for reason in result.reasons)) == upstream_pool["starts"], \
                where
            compared += 1
    assert compared > 100


def test_the_pool_check_bites_on_a_planner_that_sums_every_chip_of_the_host(pools):
    # tpu-inference sums the HBM of the TP devices only: at TP 2 on a v6e-8 the host-wide sum is 4x the pool's HBM.
    [answer] = [answer for answer in pools if (answer["model"], answer["accelerator_type"],
                                               answer["max_model_len"]) == ("Qwen/Qwen3-8B", "v6e-8", 32768)]
    shape, weights = catalog.shape("v6e-8"), catalog.catalog_model("Qwen/Qwen3-8B").weights.bytes
    host_wide = int(shape.hbm_bytes_per_chip * shape.chips * sizing.DEFAULT_GPU_MEMORY_UTILIZATION - weights)
    two_chips = int(shape.hbm_bytes_per_chip * 2 * sizing.DEFAULT_GPU_MEMORY_UTILIZATION - weights)
    assert answer["tp"]["2"]["available"] == two_chips != host_wide


HBM_TABLE = """
import ast, importlib.util, json, pathlib, types
package = pathlib.Path(importlib.util.find_spec("tpu_inference").submodule_search_locations[0])
tree = ast.parse((package / "utils.py").read_text())
functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
gbytes = next(node for node in tree.body
              if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "GBYTES")
scope = {}
module = ast.Module(body=[gbytes, functions["get_device_hbm_limit"]], type_ignores=[])
exec(compile(module, "utils.py", "exec"), scope)
table = {}
for kind, generation in (("TPU v5e", "v5e"), ("TPU v6e", "v6e"), ("TPU v7", "TPU7x")):
    scope["get_device_name"] = lambda kind=kind: kind
    table[generation] = scope["get_device_hbm_limit"]()
# Where hbm_usage_bytes falls back to the table (pathways_hbm_usage_gb): inside `if VLLM_TPU_USING_PATHWAYS` or not.
usage = functions["hbm_usage_bytes"]
pathways_branch = [node for node in ast.walk(usage) if isinstance(node, ast.If)
                   and "VLLM_TPU_USING_PATHWAYS" in ast.unparse(node.test)]
inside = {id(call) for branch in pathways_branch for call in ast.walk(branch)}
calls = [call for call in ast.walk(usage) if isinstance(call, ast.Call)
         and ast.unparse(call.func) == "pathways_hbm_usage_gb"]
print(json.dumps({"table": table, "pathways": sum(id(c) in inside for c in calls),
                  "elsewhere": sum(id(c) not in inside for c in calls)}))
"""


def test_tpu_inferences_hbm_table_is_read_on_pathways_and_wherever_no_device_reports_stats():
    """utils.py get_device_hbm_limit's table is the catalog's record of it, and hbm_usage_bytes uses it beyond
    Pathways: where no device reports memory_stats (the catalog said "used only on Pathways")."""
    completed = vllm_venv.run(["-c", HBM_TABLE], text=True)
    assert completed.returncode == 0, completed.stderr[-3000:]
    found = json.loads(completed.stdout)
    # The table is per JAX device; the catalog's record is per chip (TPU7x: two devices a chip).
    per_chip = {generation: limit * catalog.shapes.GENERATIONS[generation].devices_per_chip
                for generation, limit in found["table"].items()}
    assert per_chip == catalog.shapes.TPU_INFERENCE_HBM_TABLE
    assert found["pathways"] >= 1 and found["elsewhere"] >= 1
    where = catalog.shapes.TPU_INFERENCE_HBM_TABLE_SOURCE.where
    assert "Pathways" in where and "no device reports memory_stats" in where
    assert "used only on Pathways" not in (Path(catalog.shapes.__file__)).read_text()
