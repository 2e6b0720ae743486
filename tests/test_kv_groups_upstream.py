"""Hybrid KV caches held to the engine: vLLM's own get_kv_cache_groups, get_kv_cache_config_from_groups,
get_kv_cache_capacity and check_enough_kv_cache_memory, on the specs tpu-inference 0.32.0's get_kv_cache_spec builds
from the attention layers vLLM's model class registers (tests/tpu_inference_pool_check.py, in the vLLM venv), against
components/sizing/kv_groups.py through fit(): the groups, the pages, the logged tokens and whether the server starts,
at every TP the planner picks on every catalogued shape; and the null block moving the start-up boundary by one."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from components import catalog, sizing
from components.catalog import geometry_from_config
from components.catalog import models as catalog_models
from components.catalog.models import Weights
from components.sizing import ModelSpec, kv_groups
from tests import vllm_venv
from tests.test_config_defaults import GEMMA_3_SPARSE
from tests.test_sizing_paths import GEMMA_3, GPT_OSS

ROOT = Path(__file__).resolve().parent.parent
POOL_CHECK = ROOT / "tests" / "tpu_inference_pool_check.py"
GIB = 1024**3
LENGTHS = (4096, 32768)
# Shapes of real configs (field names as in their config.json files), each a case of vLLM's grouping:
HYBRIDS = {
    "gpt-oss": GPT_OSS,  # 12 sliding (128) + 12 full: two groups of 12
    "gemma-3": GEMMA_3,  # 40 sliding (1024) + 8 full: one full group and five sliding groups of 8
    # Mistral-style: one window on every layer, no layer_types (arg_utils: cache_config.sliding_window).
    "uniform-window": {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "num_hidden_layers": 32,
                       "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
                       "intermediate_size": 14336, "vocab_size": 32000, "sliding_window": 4096,
                       "max_position_embeddings": 32768},
    # The same with a window as long as the context.
    "uniform-window-long": {"architectures": ["MistralForCausalLM"], "model_type": "mistral",
                            "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                            "hidden_size": 4096, "intermediate_size": 14336, "vocab_size": 32000,
                            "sliding_window": 32768, "max_position_embeddings": 32768},
    # Gemma 3's pattern with 7 full + 20 sliding layers (20 < 1.5 x 7 is false: group size 7, padding).
    "uneven": {**GEMMA_3, "text_config": {**GEMMA_3["text_config"], "num_hidden_layers": 27,
                                          "layer_types": (["sliding_attention"] * 3 + ["full_attention"]) * 6
                                          + ["full_attention"] + ["sliding_attention"] * 2}},
    # Gemma 3 4B's shape stating only what differs from Gemma3TextConfig (heads, KV heads, head_dim and layer_types
    # from the class, as transformers fills them for vLLM).
    "gemma-3-sparse": GEMMA_3_SPARSE,
    # Mixed head sizes on the vLLM path: tpu-inference turns the windows off (one group, full pages).
    "mixed-heads": {**GEMMA_3, "text_config": {**GEMMA_3["text_config"], "global_head_dim": 512}},
}
WEIGHTS = 8 * GIB


def spec(name: str, weights: int = WEIGHTS) -> ModelSpec:
    return ModelSpec(name, geometry_from_config(HYBRIDS[name]), Weights(weights, False, "given for the test"), None)


def planner_sizes(geometry, chips: int) -> tuple[int, ...]:
    return sizing.tensor_parallel_choices(geometry, chips)


def run_oracle(requests: list[dict]) -> list[dict]:
    completed = vllm_venv.run([str(POOL_CHECK)], input=json.dumps(requests), text=True, timeout=900,
                              cwd=str(ROOT / "tests"))
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout)


def request(path: Path, name: str, shape, length: int, weights: int) -> dict:
    geometry = geometry_from_config(HYBRIDS[name])
    return {"config": str(path), "name": name, "accelerator_type": shape.accelerator_type, "chips": shape.chips,
            "hbm_bytes_per_chip": shape.hbm_bytes_per_chip, "weights_bytes": weights, "max_model_len": length,
            "gpu_memory_utilization": sizing.DEFAULT_GPU_MEMORY_UTILIZATION, "kv_dtype": "auto",
            "max_num_batched_tokens": kv_groups.DEFAULT_MAX_NUM_BATCHED_TOKENS,
            "vllm_path": sizing.model_implementation(geometry.architectures) == "vllm"}


@pytest.fixture(scope="module")
def configs(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("hybrid-configs")
    paths = {}
    for name, config in HYBRIDS.items():
        paths[name] = folder / f"{name}.json"
        paths[name].write_text(json.dumps(config))
    return paths


@pytest.fixture(scope="module")
def answers(configs) -> list[dict]:
    shapes = [catalog.shape(kind) for kind in ("v5litepod-1", "v5litepod-8", "v6e-1", "v6e-4")]
    return run_oracle([request(configs[name], name, shape, length, WEIGHTS)
                       for name in HYBRIDS for shape in shapes for length in LENGTHS])


def test_groups_pages_tokens_and_start_are_vllms_at_every_planned_tp(answers):
    compared = 0
    for answer in answers:
        model, shape = spec(answer["name"]), catalog.shape(answer["accelerator_type"])
        for size in planner_sizes(model.geometry, shape.chips):
            upstream = answer["tp"][str(size)]
            where = (answer["name"], answer["accelerator_type"], answer["max_model_len"], size)
            assert upstream["runs"], where
            result = sizing.fit(model, shape, answer["max_model_len"], tensor_parallel_size=size)
            if "pool_error" in upstream:
                assert not result.fits, where
                continue
            plan = kv_groups.plan(model.geometry, size, "auto", int(result.figures["block_size"].value),
                                  answer["max_model_len"])
            assert result.figures["kv_pool"].value == upstream["available"], where
            assert len(plan.groups) == upstream["groups"], where
            assert sorted({group.sliding_window for group in plan.groups} - {None}) == upstream["windows"], where
            assert result.figures["kv_blocks"].value == upstream["num_blocks"], where
            assert result.figures["kv_tokens"].value == upstream["tokens"], where
            assert plan.one_request_fits(upstream["num_blocks"]) == upstream["starts"], where
            compared += 1
    assert compared >= 40


def test_a_hybrid_holds_more_than_a_full_attention_count_says(answers):
    # gpt-oss on one v6e chip at 32K: vLLM's pool holds several times the tokens full-length pages would.
    [answer] = [answer for answer in answers if (answer["name"], answer["accelerator_type"],
                                                 answer["max_model_len"]) == ("gpt-oss", "v6e-1", 32768)]
    result = sizing.fit(spec("gpt-oss"), catalog.shape("v6e-1"), 32768)
    full_length = result.figures["kv_blocks"].value * 16 // 2  # every layer charged the whole context
    assert result.fits and result.figures["kv_tokens"].value == answer["tp"]["1"]["tokens"] > 1.8 * full_length
    assert result.figures["kv_groups"].value == 2


def test_a_uniform_window_is_one_group_and_a_context_long_window_allocates_as_full_attention(answers):
    for name in ("uniform-window", "uniform-window-long"):
        plan = kv_groups.plan(spec(name).geometry, 1, "auto", 16, 32768)
        assert len(plan.groups) == 1 and plan.groups[0].sliding_window is not None
        assert not any(reason.startswith("not sized") for reason in
                       sizing.fit(spec(name), catalog.shape("v6e-1"), 32768).reasons)
    long = sizing.fit(spec("uniform-window-long"), catalog.shape("v6e-1"), 32768)
    full = sizing.fit(dataclasses.replace(spec("uniform-window-long"), geometry=dataclasses.replace(
        spec("uniform-window-long").geometry, sliding_window=None, uses_sliding_window=False)),
        catalog.shape("v6e-1"), 32768)
    # The same pool and pages; vLLM's window rule holds one page more per request (the window's "+1").
    assert long.figures["kv_blocks"].value == full.figures["kv_blocks"].value
    assert long.figures["kv_blocks_per_request"].value == 32768 // 64 + 1


def test_the_null_block_moves_the_start_boundary_by_one_block(configs):
    # Weights chosen so the pool holds exactly one request's blocks, then one block more.
    shape, length = catalog.shape("v6e-1"), 32768
    model = spec("gpt-oss")
    block = sizing.block_size(length)
    plan = kv_groups.plan(model.geometry, 1, "auto", block, length)
    cap = int(shape.hbm_bytes_per_chip * sizing.DEFAULT_GPU_MEMORY_UTILIZATION)
    exact = cap - plan.bytes_per_block * plan.blocks_per_request
    one_more = exact - plan.bytes_per_block
    answers = run_oracle([request(configs["gpt-oss"], "gpt-oss", shape, length, weights)
                          for weights in (exact, one_more)])
    at_exact, at_one_more = (answer["tp"]["1"] for answer in answers)
    assert at_exact["num_blocks"] == plan.blocks_per_request and not at_exact["starts"]
    assert "To serve at least one request" in at_exact["refusal"]
    assert at_one_more["num_blocks"] == plan.blocks_per_request + 1 and at_one_more["starts"]
    refused = sizing.fit(spec("gpt-oss", exact), shape, length)
    fits = sizing.fit(spec("gpt-oss", one_more), shape, length)
    assert not refused.fits and "null block" in refused.reasons[0]
    assert fits.fits


def test_the_start_check_is_the_engines_group_padded_one_and_the_planner_agrees(configs):
    # vLLM's engine checks one max-model-len request against _max_memory_usage_bytes_from_groups (get_kv_cache_configs,
    # v1/core/kv_cache_planning.py): every group pays the largest group's block, so 20 sliding layers in groups of
    # 7, 7 and 6 pay for 21. The public check_enough_kv_cache_memory sums each layer's own need and says yes one
    # window's worth of blocks sooner. At exactly one block short the engine (and the planner) refuse.
    shape, length = catalog.shape("v6e-1"), 32768
    model = spec("uneven")
    block = sizing.block_size(length)
    plan = kv_groups.plan(model.geometry, 1, "auto", block, length)
    assert sorted(len(group.layers) for group in plan.groups) == [6, 7, 7, 7]
    cap = int(shape.hbm_bytes_per_chip * sizing.DEFAULT_GPU_MEMORY_UTILIZATION)
    starts_at = cap - plan.bytes_per_block * (plan.blocks_per_request + 1)
    short = starts_at + 1  # a byte less pool: one block less
    at_start, at_short = (answer["tp"]["1"] for answer in run_oracle(
        [request(configs["uneven"], "uneven", shape, length, weights) for weights in (starts_at, short)]))
    assert at_start["num_blocks"] == plan.blocks_per_request + 1 and at_start["starts"]
    assert at_short["num_blocks"] == plan.blocks_per_request and not at_short["starts"]
    assert at_short["public_check_starts"]  # the per-layer sum would have said it starts
    assert sizing.fit(spec("uneven", starts_at), shape, length).fits
    refused = sizing.fit(spec("uneven", short), shape, length)
    assert not refused.fits and "null block" in refused.reasons[0]


def test_googles_gemma_3_configs_are_sized_within_a_percent_of_the_engine(configs):
    # gemma-3-27b-it's own text config (catalogued) leaves vocab_size, max_position_embeddings and layer_types at
    # Gemma3TextConfig's defaults; the 4B-shaped one omits num_attention_heads, num_key_value_heads and head_dim too.
    # Each is read as transformers fills it and planned as vLLM groups it (seven groups: 10 full, 52 sliding in 6).
    model = catalog.catalog_model("google/gemma-3-27b-it")
    sparse = spec("gemma-3-sparse", 9 * GIB)
    cases = [(model, catalog_models.CONFIGS / model.config_file, kind) for kind in ("v5litepod-8", "v6e-4", "v6e-8")]
    cases += [(sparse, configs["gemma-3-sparse"], kind) for kind in ("v5litepod-1", "v6e-1")]
    requests = [{**request(path, "gemma-3", catalog.shape(kind), 32768, planned.weights.bytes), "name": planned.name}
                for planned, path, kind in cases]
    compared = 0
    for (planned, _, kind), answer in zip(cases, run_oracle(requests), strict=True):
        shape = catalog.shape(kind)
        for size in sizing.tensor_parallel_choices(planned.geometry, shape.chips):
            upstream, result = answer["tp"][str(size)], sizing.fit(planned, shape, 32768, tensor_parallel_size=size)
            where = (planned.name, kind, size)
            if "pool_error" in upstream:  # the weights fill the chips at this TP: both refuse
                assert not result.fits, where
                continue
            assert upstream["starts"] == result.fits, where  # TP 2 on a v6e-4: a 6.4 GiB pool, short of one request
            assert abs(result.figures["kv_tokens"].value - upstream["tokens"]) <= upstream["tokens"] / 100, where
            assert abs(result.figures["kv_pool"].value - upstream["available"]) <= upstream["available"] / 100, where
            assert result.figures["kv_groups"].value == upstream["groups"], where
            compared += 1
    assert compared >= 5
