"""vLLM's own `vllm serve` parser accepts the serve command of the default and of every arm.

The commands are rendered by the stack (components/serving/serve_command.py) and judged in the vLLM venv
(requirements-vllm.txt, built by scripts/test.sh) by tests/vllm_cli_check.py: vLLM's serve subcommand
parser, its validate step, EngineArgs.from_cli_args and SpeculativeConfig; tpu-inference's envs.py reads
the rendered environment back; its get_token_paddings is the ladder chip_memory.token_buckets must match.
One run of that script serves every test here, forked from the session's one process that has imported vLLM
(tests/vllm_venv.py: importing it takes ~18 s of CPU).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from pathlib import Path

import pytest

from components import settings
from components.basis import chip_memory
from components.serving import serve_command
from components.settings import facts
from components.settings.tpu_inference import TPU_INFERENCE_VARIABLES
from tests import vllm_venv
from tests.vllm_venv import vllm_python  # noqa: F401 - where test_monitoring and test_serving_spec find it

ROOT = Path(__file__).resolve().parent.parent
CHECK = ROOT / "tests" / "vllm_cli_check.py"
SSH = {"access": {"sshSourceRanges": ["198.51.100.7/32"]}}
ALL_TPU_INFERENCE = {"attnBucketizedNumReqs": True, "sliceRopeCache": True, "numPrecompileWorkers": 8,
                     "bucketPaddingGap": 128, "xlaCheckRecompilation": True}
NGRAM = {"method": "ngram", "numSpeculativeTokens": 3, "promptLookupMax": 5, "promptLookupMin": 3}
TEXT_ONLY = {"limitMmPerPrompt": {"image": 0, "audio": 0}, "maxNumBatchedTokens": 2048}
V6E_1 = {"zone": "us-east5-a", "acceleratorType": "v6e-1"}

# The default (the log's final configuration) and each arm of issue 22, alone and all together.
ARMS = {
    "default": {},
    "max-model-len-65536": {"vllm": {"maxModelLen": 65536}},
    "max-num-batched-tokens-8192": {"vllm": {"maxNumBatchedTokens": 8192}},
    "bucket-padding-gap-128": {"tpuInference": {"bucketPaddingGap": 128}},
    "ngram": {"vllm": {"speculativeConfig": NGRAM}},
    "ngram-defaults": {"vllm": {"speculativeConfig": {"method": "ngram"}}},
    "text-only-2048": {"vllm": TEXT_ONLY},
    "tpu-inference-variables": {"tpuInference": ALL_TPU_INFERENCE},
    "every-arm": {"vllm": {"maxModelLen": 65536, "maxNumBatchedTokens": 8192, "speculativeConfig": NGRAM},
                  "tpuInference": ALL_TPU_INFERENCE},
    "every-arm-text-only": {"vllm": {**TEXT_ONLY, "maxModelLen": 65536, "speculativeConfig": NGRAM}},
    "gke-every-arm": {"platform": "gke", "vllm": {"maxModelLen": 65536, "speculativeConfig": NGRAM},
                      "tpuInference": ALL_TPU_INFERENCE},
    # The golden stacks qwenv6e and qwenv6egke (tests/golden/stacks), and a multi-chip fit (TP from the fit).
    "qwen3-8b-v6e-1": {"tpu": V6E_1, "vllm": {"model": "Qwen/Qwen3-8B"}},
    "gke-qwen3-8b-v6e-1": {"platform": "gke", "tpu": {**V6E_1, "maxRunDuration": "1d"},
                           "gke": {"location": "us-east5-a", "nodeLocations": ["us-east5-a"], "maxReplicas": 2},
                           "vllm": {"model": "Qwen/Qwen3-8B"}},
    "qwen3-32b-v6e-4": {"tpu": {**V6E_1, "acceleratorType": "v6e-4"}, "vllm": {"model": "Qwen/Qwen3-32B"}},
    "gemma-4-e4b-v6e-1": {"tpu": V6E_1, "vllm": {"model": "google/gemma-4-E4B-it"}},
    # Data-parallel layouts (components/sizing/layouts.py): the planned one on eight v5e chips, each given one,
    # and gke's (the golden stacks dpv5e8 and dpv5e8gke).
    "e2b-v5litepod-8": {"tpu": {"acceleratorType": "v5litepod-8"}},
    "e2b-v5litepod-8-dp8": {"tpu": {"acceleratorType": "v5litepod-8"}, "vllm": {"dataParallelSize": 8}},
    "e2b-v5litepod-8-tp4": {"tpu": {"acceleratorType": "v5litepod-8"}, "vllm": {"tensorParallelSize": 4}},
    "e2b-v6e-8": {"tpu": {**V6E_1, "acceleratorType": "v6e-8"}},
    # Issue 43's Done-when stack (the golden tpu7xflex): TPU7x through Compute Engine, two JAX devices per chip.
    "e2b-tpu7x-standard-4t-flex-7d": {"tpu": {"zone": "us-central1-c", "acceleratorType": "tpu7x-standard-4t",
                                              "maxRunDuration": "7d",
                                              "runtimeVersion": "projects/my-proj/global/images/family/tpu-vm"}},
    "gke-e2b-v5litepod-8-dp8": {"platform": "gke", "tpu": {"acceleratorType": "v5litepod-8"},
                                "gke": {"maxReplicas": 1, "maxTpuChips": 16},
                                "vllm": {"dataParallelSize": 8}},
}
# Our settings refuse these lookup windows and sizes; vLLM must refuse them too (and take the others).
SPECULATIVE_PROBES = {
    "min-above-max": ({"method": "ngram", "prompt_lookup_min": 6, "prompt_lookup_max": 5}, False),
    "zero-tokens": ({"method": "ngram", "num_speculative_tokens": 0}, False),
    "zero-lookup": ({"method": "ngram", "prompt_lookup_max": 0}, False),
    "min-equals-max": ({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 5,
                        "prompt_lookup_max": 5}, True),
}
PADDINGS = [(4096, 0), (8192, 0), (2048, 0), (2496, 0), (4096, 128), (8192, 128), (2496, 128), (4096, 48),
            (4096, 16), (4096, 2048), (2048, 1024), (16, 0)]


def arm_settings(extra: dict) -> settings.Settings:
    raw = {**SSH, **extra}
    return settings.load(raw, "my-proj", "dev").settings


@pytest.fixture(scope="module")
def verdict(tmp_path_factory):
    return judged_once(tmp_path_factory, verdict_request())


def judged_once(tmp_path_factory, request: dict) -> dict:
    """Judged once per test run: xdist's workers share this run's temp dir (their base temp's parent), and
    the first one writes the verdict there under a lock the others wait on. Keyed by the request, so
    nothing but this run's own request is ever read back."""
    text = json.dumps(request, sort_keys=True)
    run_dir = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        run_dir = run_dir.parent
    shared = run_dir / f"vllm-parser-{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"
    with open(f"{shared}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not shared.exists():
            shared.write_text(json.dumps(judge(text)))
    return json.loads(shared.read_text())


def verdict_request() -> dict:
    commands = {name: serve_command.vllm_serve_args(arm_settings(extra)) for name, extra in ARMS.items()}
    for name, (spec, _) in SPECULATIVE_PROBES.items():
        commands[f"probe-{name}"] = ["vllm", "serve", facts.DEFAULT_MODEL, "--speculative-config", json.dumps(spec)]
    commands["unknown-flag"] = ["vllm", "serve", facts.DEFAULT_MODEL, "--no-such-flag"]
    return {
        "commands": commands,
        "env": {name: serve_command.backend_environment(arm_settings(extra)) for name, extra in ARMS.items()},
        "env_names": [variable.env for variable in TPU_INFERENCE_VARIABLES],
        "paddings": PADDINGS,
    }


def judge(request: str) -> dict:
    completed = vllm_venv.run([str(CHECK)], input=request, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout)


@pytest.mark.parametrize("name", list(ARMS))
def test_vllm_accepts_the_serve_command_and_reads_what_the_stack_meant(verdict, name):
    cfg = arm_settings(ARMS[name])
    result = verdict["commands"][name]
    assert "error" not in result, result.get("error")
    parsed = result["parsed"]
    vllm = cfg.vllm
    assert parsed["model_tag"] == vllm.model
    assert parsed["max_model_len"] == vllm.max_model_len
    assert parsed["max_num_batched_tokens"] == vllm.max_num_batched_tokens
    assert parsed["limit_mm_per_prompt"] == vllm.limit_mm_per_prompt
    assert parsed["disable_chunked_mm_input"] is vllm.disable_chunked_mm_input
    assert parsed["enable_auto_tool_choice"] is True
    # The family's parsers (the catalog's), and the fit's tensor-parallel size.
    assert (parsed["tool_call_parser"], parsed["reasoning_parser"]) == (vllm.tool_call_parser, vllm.reasoning_parser)
    assert (vllm.tool_call_parser, vllm.reasoning_parser) == (cfg.family.tool_call_parser, cfg.family.reasoning_parser)
    assert parsed["tensor_parallel_size"] == cfg.fit.tensor_parallel_size == cfg.tensor_parallel_size
    # The layout: one engine and (vLLM's default, vllm/entrypoints/cli/serve.py) one API server per replica,
    # spawned by vLLM's own `mp` backend on this host; the replicas' chips are the host's.
    assert parsed["data_parallel_size"] == cfg.fit.data_parallel_size == cfg.data_parallel_size
    assert parsed["data_parallel_size"] * parsed["tensor_parallel_size"] == cfg.tpu.shape.devices
    assert parsed["api_server_count"] in (None, 1, parsed["data_parallel_size"])
    assert parsed["data_parallel_backend"] == "mp"
    assert (parsed["host"], parsed["port"]) == ("127.0.0.1", cfg.vllm.server_port)
    assert parsed["block_size"] is None  # the backend picks it
    spec = vllm.speculative_config
    if spec is None:
        assert parsed["speculative"] is None
    else:
        assert parsed["speculative"] == {"method": "ngram", "num_speculative_tokens": spec.num_speculative_tokens,
                                         "prompt_lookup_min": spec.prompt_lookup_min,
                                         "prompt_lookup_max": spec.prompt_lookup_max}


def test_the_planned_layouts_reach_the_serve_command(verdict):
    """Eight v5e chips serve the 2B model as replicas, never one model split eight ways; the sizes given win."""
    parsed = {name: verdict["commands"][name]["parsed"] for name in ARMS if "v5litepod-8" in name or "v6e-8" in name}
    def layout(name: str) -> tuple[int, int]:
        return parsed[name]["tensor_parallel_size"], parsed[name]["data_parallel_size"]

    assert layout("e2b-v5litepod-8-dp8") == (1, 8) and layout("e2b-v5litepod-8-tp4") == (4, 2)
    assert parsed["e2b-v5litepod-8"]["data_parallel_size"] > 1 and parsed["e2b-v6e-8"]["data_parallel_size"] == 8
    assert parsed["gke-e2b-v5litepod-8-dp8"]["data_parallel_size"] == 8
    assert verdict["commands"]["default"]["parsed"]["data_parallel_size"] == 1  # the flag is not rendered at 1


def test_the_check_is_not_a_rubber_stamp(verdict):
    assert "unrecognized arguments: --no-such-flag" in verdict["commands"]["unknown-flag"]["error"]


@pytest.mark.parametrize("name", list(SPECULATIVE_PROBES))
def test_vllm_and_the_settings_agree_on_the_ngram_sizes(verdict, name):
    spec, valid = SPECULATIVE_PROBES[name]
    vllm_accepts = "error" not in verdict["commands"][f"probe-{name}"]
    camel = {"method": spec["method"], **{
        "".join([part if i == 0 else part.title() for i, part in enumerate(key.split("_"))]): value
        for key, value in spec.items() if key != "method"}}
    try:
        arm_settings({"vllm": {"speculativeConfig": camel}})
        settings_accept = True
    except settings.SettingsError:
        settings_accept = False
    assert (vllm_accepts, settings_accept) == (valid, valid), verdict["commands"][f"probe-{name}"]


def test_the_new_shapes_render_their_own_parsers_and_tensor_parallel_size(verdict):
    """Not only the log's pair: Qwen3 gets hermes/qwen3, and Qwen3-32B on v6e-4 is split over 4 chips."""
    assert (verdict["commands"]["qwen3-8b-v6e-1"]["parsed"]["tool_call_parser"],
            verdict["commands"]["qwen3-8b-v6e-1"]["parsed"]["reasoning_parser"]) == ("hermes", "qwen3")
    assert verdict["commands"]["qwen3-32b-v6e-4"]["parsed"]["tensor_parallel_size"] == 4


def test_the_tool_and_reasoning_parsers_are_registered(verdict):
    assert "gemma4" in verdict["tool_parsers"] and "gemma4" in verdict["reasoning_parsers"]
    assert verdict["tool_parser_gemma4"].startswith("Gemma4")
    assert verdict["reasoning_parser_gemma4"].startswith("Gemma4")
    # The parser names the settings accept (facts.py) are exactly what the pinned vLLM registers: none refused
    # that it takes (qwen3_json, 0.33.0), none accepted that it lacks.
    assert facts.VLLM_TOOL_CALL_PARSERS == set(verdict["tool_parsers"])
    assert facts.VLLM_REASONING_PARSERS == set(verdict["reasoning_parsers"])


def test_the_backends_read_the_rendered_environment_as_set(verdict):
    names = [variable.env for variable in TPU_INFERENCE_VARIABLES]
    # Unset, every variable reads as the default the log's table (and the settings) give it.
    for variable in TPU_INFERENCE_VARIABLES:
        assert verdict["env"]["default"][variable.env]["tpu_inference"] == variable.default, variable.env
    read = verdict["env"]["every-arm"]
    assert {name: read[name]["tpu_inference"] for name in names} == {
        "ATTN_BUCKETIZED_NUM_REQS": True, "SLICE_ROPE_CACHE": True, "NUM_PRECOMPILE_WORKERS": 8,
        "VLLM_TPU_BUCKET_PADDING_GAP": 128, "VLLM_XLA_CHECK_RECOMPILATION": True}
    # vLLM reads VLLM_XLA_CHECK_RECOMPILATION itself, with int(): "true" would crash it, "1" does not.
    assert read["VLLM_XLA_CHECK_RECOMPILATION"]["vllm"] is True
    # The gap alone: only its variable is rendered, the rest stay at the backend's defaults.
    gap_only = verdict["env"]["bucket-padding-gap-128"]
    assert gap_only["VLLM_TPU_BUCKET_PADDING_GAP"]["tpu_inference"] == 128
    assert gap_only["NUM_PRECOMPILE_WORKERS"]["tpu_inference"] == 1


def test_the_budget_ladder_is_tpu_inferences(verdict):
    for (tokens, gap), real in zip(PADDINGS, verdict["paddings"], strict=True):
        assert list(chip_memory.token_buckets(tokens, gap)) == real, (tokens, gap)
