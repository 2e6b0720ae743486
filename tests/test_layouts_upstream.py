"""The layouts held to the source: tpu-inference 0.32.0's own code (tests/tpu_inference_layout_check.py, in the
vLLM venv) turns every layout the planner offers for every catalogued model and shape into multi-process data
parallelism, one engine mesh of t devices per rank on the chips the planner counts for it, a libtpu port each;
and its KV functions (tests/tpu_inference_kv_check.py) give each replica the bytes per token the planner sizes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from components import catalog, sizing
from components.catalog import models as catalog_models
from tests import test_sizing_upstream, vllm_venv

ROOT = Path(__file__).resolve().parent.parent
CHECK = ROOT / "tests" / "tpu_inference_layout_check.py"


def every_layout() -> list[tuple[str, str, sizing.Fit]]:
    return [(model.name, shape.accelerator_type, candidate)
            for model in catalog.catalog_models() for shape in catalog.all_shapes()
            for candidate in sizing.all_layouts(model, shape, 32768) if candidate.tensor_parallel_size]


def layout_key(shape: catalog.Shape, candidate: sizing.Fit) -> str:
    return f"{candidate.tensor_parallel_size}x{candidate.data_parallel_size}@{shape.chips}"


def judged(requests: dict[str, dict]) -> dict[str, dict]:
    completed = vllm_venv.run([str(CHECK)], input=json.dumps(list(requests.values())), text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return dict(zip(requests, json.loads(completed.stdout), strict=True))


@pytest.fixture(scope="module")
def engine() -> dict[str, dict]:
    requests = {}
    for _, shape_name, candidate in every_layout():
        shape = catalog.shape(shape_name)
        requests[layout_key(shape, candidate)] = {
            "tensor_parallel_size": candidate.tensor_parallel_size, "data_parallel_size": candidate.data_parallel_size,
            "chips": shape.chips, "cores_per_chip": shape.generation.devices_per_chip}
    # The variants that must not get through: SPMD data parallelism (offline), more ranks than the host holds.
    requests["offline"] = {"tensor_parallel_size": 2, "data_parallel_size": 4, "chips": 8, "online": False}
    requests["too-many"] = {"tensor_parallel_size": 2, "data_parallel_size": 8, "chips": 8}
    return judged(requests)


@pytest.mark.parametrize(("model_name", "shape_name", "candidate"), every_layout(),
                         ids=[f"{m}@{s}:{c.tensor_parallel_size}x{c.data_parallel_size}" for m, s, c in every_layout()])
def test_each_rank_gets_the_chips_the_planner_counts(engine, model_name, shape_name, candidate):
    shape = catalog.shape(shape_name)
    answer = engine[layout_key(shape, candidate)]
    tp, dp = candidate.tensor_parallel_size, candidate.data_parallel_size
    assert "error" not in answer, answer
    assert answer["mesh"]["tensor_parallelism"] == tp and answer["total_devices"] == tp
    if dp == 1:
        assert answer["multiprocess_dp"] is None and answer["ranks"] == []
        return
    # vLLM keeps d engine cores; each builds a mesh of t devices (no data axis) on its own chips.
    assert answer["multiprocess_dp"] == "1" and answer["vllm_data_parallel_size"] == dp
    assert answer["mesh"]["data_parallelism"] == 1
    # Each rank's chips: its t devices over the chip's devices (TPU7x: two per chip), whole chips only.
    per_rank = tp // shape.generation.devices_per_chip
    chips = [rank["visible_chips"] for rank in answer["ranks"]]
    assert chips == [",".join(map(str, range(rank * per_rank, (rank + 1) * per_rank))) for rank in range(dp)]
    assert {rank["chips_per_process_bounds"] for rank in answer["ranks"]} == {f"1,{per_rank},1"}
    assert len({rank["process_port"] for rank in answer["ranks"]}) == dp


def test_what_the_engine_refuses_or_folds_is_what_the_planner_never_offers(engine):
    # Offline (not `vllm serve`), tpu-inference folds DP into one SPMD mesh and tells vLLM to spawn one engine.
    assert engine["offline"]["multiprocess_dp"] == "0" and engine["offline"]["vllm_data_parallel_size"] == 1
    assert engine["offline"]["total_devices"] == 8 and engine["offline"]["mesh"]["data_parallelism"] == 4
    assert "needs TPU chips [8, 10) but the host only has 8 chips" in engine["too-many"]["error"]
    products = {(c.tensor_parallel_size, c.data_parallel_size, s) for _, s, c in every_layout()}
    assert all(tp * dp == catalog.shape(s).devices for tp, dp, s in products)


@pytest.fixture(scope="module")
def kv_answers() -> dict[str, dict]:
    sizes: dict[str, set[int]] = {}
    for model_name, _, candidate in every_layout():
        sizes.setdefault(model_name, set()).add(candidate.tensor_parallel_size)
    requests = [{"config": str(catalog_models.CONFIGS / catalog.catalog_model(name).config_file),
                 "tensor_parallel_sizes": sorted(tps), "kv_dtypes": ["auto"]} for name, tps in sizes.items()]
    return {Path(answer["config"]).name: answer for answer in test_sizing_upstream.upstream(requests)}


def test_each_replica_holds_the_kv_bytes_tpu_inference_allocates(kv_answers):
    checked = 0
    for model_name, _, candidate in every_layout():
        figure = candidate.figures.get("kv_bytes_per_token")
        if figure is None:
            continue
        answer = kv_answers[catalog.catalog_model(model_name).config_file]
        assert figure.value == answer["bytes"][f"{candidate.tensor_parallel_size}:auto"], (model_name, candidate.layout)
        checked += 1
    assert checked > 30
