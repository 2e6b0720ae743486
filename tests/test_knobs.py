"""Issue 22's knobs: tpu-inference's variables and the log's untested arms as settings.

For each: what it renders (vLLM's flags, its container's environment on both platforms), how a bad
value is refused (the key, the value, the reason, the fix; never a traceback), and its one warning.
vLLM's own parser judges the rendered commands in tests/test_vllm_parser.py.
"""

from __future__ import annotations

import json

import pytest

from components import settings
from components.basis import chip_memory
from components.gke import workload
from components.serving import serve_command
from components.serving.spec import serving_spec
from components.settings import untested_arms
from components.settings.tpu_inference import TPU_INFERENCE_VARIABLES, V5E_ONE_CHIP_HOST_VCPUS
from components.vm import container
from tests.golden import GOLDEN_DIR
from tests.wing_values import gke_pod, vm_serving

SSH = {"access": {"sshSourceRanges": ["198.51.100.7/32"]}}
ALL_TPU_INFERENCE = {"attnBucketizedNumReqs": True, "sliceRopeCache": True, "numPrecompileWorkers": 8,
                     "bucketPaddingGap": 128, "xlaCheckRecompilation": True}
ALL_ENV = {"ATTN_BUCKETIZED_NUM_REQS": "1", "SLICE_ROPE_CACHE": "1", "NUM_PRECOMPILE_WORKERS": "8",
           "VLLM_TPU_BUCKET_PADDING_GAP": "128", "VLLM_XLA_CHECK_RECOMPILATION": "1"}
UNTESTED = "untested: the build log did not measure it"


def load(extra: dict | None = None) -> settings.Loaded:
    return settings.load({**SSH, **(extra or {})}, "my-proj", "dev")


def problems(extra: dict) -> list[str]:
    with pytest.raises(settings.SettingsError) as raised:
        load(extra)
    return raised.value.problems


def untested_warnings(loaded: settings.Loaded) -> list[str]:
    return [warning for warning in loaded.warnings if UNTESTED in warning]


def env_pairs(args: list[str]) -> dict[str, str]:
    return dict(args[i + 1].split("=", 1) for i, arg in enumerate(args) if arg == "-e")


# --- the log's table -------------------------------------------------------------------------------------

def test_every_variable_of_the_logs_table_is_a_setting_with_its_default_and_description():
    table = {variable.env: variable for variable in TPU_INFERENCE_VARIABLES}
    assert set(table) == set(ALL_ENV)
    defaults = settings.TpuInferenceSettings()
    for variable in TPU_INFERENCE_VARIABLES:
        field = next(name for name, info in settings.TpuInferenceSettings.model_fields.items()
                     if info.alias == variable.key)
        assert getattr(defaults, field) == variable.default
        assert variable.measured is False  # the log changed none of them
    assert "685 s of an 857 s boot" in table["NUM_PRECOMPILE_WORKERS"].description
    assert "one validation boot" in table["VLLM_XLA_CHECK_RECOMPILATION"].description


# --- rendering -------------------------------------------------------------------------------------------

NO_REDIRECTS = {serve_command.MEDIA_REDIRECTS_VARIABLE: "0"}  # not a tpu-inference knob: vLLM's media redirects

def test_the_logs_configuration_renders_no_variable_and_no_new_flag():
    cfg = load().settings
    assert serve_command.backend_environment(cfg) == NO_REDIRECTS  # set whatever the settings
    args = container.docker_run_args(vm_serving(cfg))
    assert set(env_pairs(args)) == {"HF_TOKEN_PATH", "VLLM_XLA_CACHE_PATH", "HF_HOME", *NO_REDIRECTS}
    assert "--speculative-config" not in args
    assert untested_arms.untested_arms(cfg) == []


def test_each_variable_reaches_vllms_container_on_the_vm_before_the_image():
    cfg = load({"tpuInference": ALL_TPU_INFERENCE}).settings
    args = container.docker_run_args(vm_serving(cfg))
    assert {name: value for name, value in env_pairs(args).items() if name in ALL_ENV} == ALL_ENV
    last_env = max(i for i, arg in enumerate(args) if arg == "-e")
    assert last_env < args.index(cfg.vllm.image)  # docker options, not vLLM arguments
    assert container.render_docker_command(vm_serving(cfg)).count("NUM_PRECOMPILE_WORKERS=8") == 1


def test_each_variable_reaches_the_gke_pods_vllm_container():
    cfg = load({"platform": "gke", "tpuInference": ALL_TPU_INFERENCE}).settings
    pod = workload.pod_template(gke_pod(cfg), service_account="vllm", image="i", cache_bucket="b",
                                cache_prefix="xla/k", hash_of_config="x")
    [vllm] = [c for c in pod["spec"]["containers"] if c["name"] == "vllm"]
    env = {entry["name"]: entry["value"] for entry in vllm["env"]}
    assert {name: env[name] for name in ALL_ENV} == ALL_ENV
    front = [c for c in pod["spec"]["containers"] if c["name"] != "vllm"]
    assert all(name not in json.dumps(front) for name in ALL_ENV)  # the front's nginx gets none


def test_the_gke_compile_cache_gives_each_variable_setting_its_own_prefix():
    from components.gke import compile_cache
    from components.gke.deployment import configuration_key

    default = load({"platform": "gke"}).settings
    gapped = load({"platform": "gke", "tpuInference": {"bucketPaddingGap": 128}}).settings
    assert serve_command.vllm_serve_args(default) == serve_command.vllm_serve_args(gapped)
    assert configuration_key(serving_spec(default)) != configuration_key(serving_spec(gapped))
    # Unset variables add nothing to the key.
    assert configuration_key(serving_spec(default)) == compile_cache.flags_key(
        serve_command.vllm_serve_args(default), {})


def test_a_key_set_to_its_default_is_rendered_and_unset_keys_are_not():
    env = serve_command.backend_environment(load({"tpuInference": {"numPrecompileWorkers": 1}}).settings)
    assert env == {"NUM_PRECOMPILE_WORKERS": "1", **NO_REDIRECTS}
    env = serve_command.backend_environment(load({"tpuInference": {"xlaCheckRecompilation": False}}).settings)
    assert env == {"VLLM_XLA_CHECK_RECOMPILATION": "0", **NO_REDIRECTS}


def test_booleans_render_as_1_and_0_which_vllms_int_reading_takes():
    env = serve_command.backend_environment(load({"tpuInference": {"sliceRopeCache": "true"}}).settings)
    assert env == {"SLICE_ROPE_CACHE": "1", **NO_REDIRECTS}


def test_ngram_renders_vllms_speculative_config_json():
    cfg = load({"vllm": {"speculativeConfig": {"method": "ngram", "numSpeculativeTokens": 4,
                                                 "promptLookupMax": 6, "promptLookupMin": 2}}}).settings
    args = serve_command.vllm_serve_args(cfg)
    flag = json.loads(args[args.index("--speculative-config") + 1])
    assert flag == {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 6, "prompt_lookup_min": 2}
    assert args.index("--speculative-config") < args.index("--host")


def test_ngram_defaults_are_the_sizes_tpu_inference_tests_on_tpu():
    cfg = load({"vllm": {"speculativeConfig": {"method": "ngram"}}}).settings
    args = serve_command.vllm_serve_args(cfg)
    assert json.loads(args[args.index("--speculative-config") + 1]) == {
        "method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 5, "prompt_lookup_min": 3}


def test_text_only_renders_zero_limits_and_the_2048_bucket():
    cfg = load({"vllm": {"limitMmPerPrompt": {"image": 0, "audio": 0}, "maxNumBatchedTokens": 2048}}).settings
    args = serve_command.vllm_serve_args(cfg)
    assert args[args.index("--limit-mm-per-prompt") + 1] == '{"image":0,"audio":0}'
    assert args[args.index("--max-num-batched-tokens") + 1] == "2048"


def test_2048_with_media_on_is_still_the_servers_refusal():
    found = problems({"vllm": {"maxNumBatchedTokens": 2048}})
    assert any("max_tokens_per_mm_item (2496)" in problem for problem in found)


# --- validation ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("extra", "key", "says"), [
    ({"tpuInference": {"numPrecompileWorkers": 0}}, "tpuInference.numPrecompileWorkers = 0", "use 1 to 24"),
    ({"tpuInference": {"numPrecompileWorkers": -3}}, "tpuInference.numPrecompileWorkers = -3", "use 1 to 24"),
    ({"tpuInference": {"numPrecompileWorkers": 25}}, "tpuInference.numPrecompileWorkers = 25",
     "24 on ct5lp-hightpu-1t"),
    ({"tpuInference": {"numPrecompileWorkers": "eight"}}, 'tpuInference.numPrecompileWorkers = "eight"',
     "whole number"),
    ({"tpuInference": {"numPrecompileWorkers": 2.5}}, "tpuInference.numPrecompileWorkers = 2.5", "whole number"),
    ({"tpuInference": {"numPrecompileWorkers": True}}, "tpuInference.numPrecompileWorkers = true",
     "not true or false"),
    ({"tpuInference": {"bucketPaddingGap": True}}, "tpuInference.bucketPaddingGap = true", "not true or false"),
    ({"vllm": {"speculativeConfig": {"method": "ngram", "numSpeculativeTokens": True}}},
     "vllm.speculativeConfig.numSpeculativeTokens = true", "not true or false"),
    ({"tpuInference": {"bucketPaddingGap": 100}}, "tpuInference.bucketPaddingGap = 100", "multiple of 16"),
    ({"tpuInference": {"bucketPaddingGap": -128}}, "tpuInference.bucketPaddingGap = -128", "multiple of 16"),
    ({"tpuInference": {"bucketPaddingGap": 8}}, "tpuInference.bucketPaddingGap = 8", "multiple of 16"),
    ({"tpuInference": {"bucketPaddingGap": 4096}}, "tpuInference.bucketPaddingGap = 4096",
     "not below vllm.maxNumBatchedTokens (4096)"),
    ({"tpuInference": {"bucketPaddingGap": 8192}}, "tpuInference.bucketPaddingGap = 8192",
     "compiles buckets past the budget"),
    ({"tpuInference": {"sliceRopeCache": "maybe"}}, 'tpuInference.sliceRopeCache = "maybe"', "true or false"),
    ({"tpuInference": {"xlaCheckRecompilaton": True}}, "tpuInference.xlaCheckRecompilaton",
     "did you mean 'xlaCheckRecompilation'"),
    ({"tpuInference": {"NUM_PRECOMPILE_WORKERS": 8}}, "tpuInference.NUM_PRECOMPILE_WORKERS", "unknown key"),
    ({"vllm": {"speculativeConfig": {"method": "eagle3"}}}, 'vllm.speculativeConfig.method = "eagle3"',
     "set it to ngram"),
    ({"vllm": {"speculativeConfig": {"method": "ngram_gpu"}}}, 'vllm.speculativeConfig.method = "ngram_gpu"',
     "GPU proposer"),
    ({"vllm": {"speculativeConfig": {}}}, "vllm.speculativeConfig.method", "is required"),
    ({"vllm": {"speculativeConfig": {"method": "ngram", "numSpeculativeTokens": 0}}},
     "vllm.speculativeConfig.numSpeculativeTokens = 0", "at least 1"),
    ({"vllm": {"speculativeConfig": {"method": "ngram", "promptLookupMin": 7}}}, "vllm.speculativeConfig = ",
     "promptLookupMin (7) is above promptLookupMax (5)"),
    ({"vllm": {"speculativeConfig": "ngram"}}, 'vllm.speculativeConfig = "ngram"', "map of settings"),
])
def test_bad_values_are_refused_with_the_key_the_value_and_the_fix(extra, key, says):
    found = problems(extra)
    assert any(problem.startswith(f"tpu-vllm:{key}") and says in problem for problem in found), found


def test_a_gap_under_a_larger_budget_is_fine():
    loaded = load({"vllm": {"maxNumBatchedTokens": 8192}, "tpuInference": {"bucketPaddingGap": 4096}})
    assert loaded.settings.tpu_inference.bucket_padding_gap == 4096


def test_workers_up_to_the_hosts_vcpus_are_accepted():
    assert load({"tpuInference": {"numPrecompileWorkers": V5E_ONE_CHIP_HOST_VCPUS}}).settings


# --- warnings --------------------------------------------------------------------------------------------

ARM_CASES = {
    "maxModelLen 65536": ({"vllm": {"maxModelLen": 65536}}, "vllm.maxModelLen = 65536"),
    "maxNumBatchedTokens 8192": ({"vllm": {"maxNumBatchedTokens": 8192}}, "vllm.maxNumBatchedTokens = 8192"),
    "padding gap 128": ({"tpuInference": {"bucketPaddingGap": 128}}, "tpuInference.bucketPaddingGap = 128"),
    "ngram": ({"vllm": {"speculativeConfig": {"method": "ngram"}}}, 'vllm.speculativeConfig = {"method": "ngram"'),
    "text only": ({"vllm": {"limitMmPerPrompt": {"image": 0, "audio": 0}, "maxNumBatchedTokens": 2048}},
                  'vllm.limitMmPerPrompt = {"image": 0, "audio": 0}'),
    "attention buckets": ({"tpuInference": {"attnBucketizedNumReqs": True}},
                          "tpuInference.attnBucketizedNumReqs = true"),
    "rope slice": ({"tpuInference": {"sliceRopeCache": True}}, "tpuInference.sliceRopeCache = true"),
    "precompile workers": ({"tpuInference": {"numPrecompileWorkers": 8}}, "tpuInference.numPrecompileWorkers = 8"),
}


@pytest.mark.parametrize("name", list(ARM_CASES))
def test_each_arm_warns_once_that_the_log_did_not_measure_it(name):
    extra, setting = ARM_CASES[name]
    warnings = untested_warnings(load(extra))
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"tpu-vllm:{setting}") and "docs/arms.md" in warnings[0]


def test_every_arm_at_once_warns_once_each():
    extra = {"vllm": {"maxModelLen": 65536, "maxNumBatchedTokens": 8192, "speculativeConfig": {"method": "ngram"}},
             "tpuInference": ALL_TPU_INFERENCE}
    warnings = untested_warnings(load(extra))
    assert len(warnings) == 7 and len(set(warnings)) == 7


def test_the_logs_configuration_and_explicit_defaults_warn_nothing_new():
    defaults = {"tpuInference": {"numPrecompileWorkers": 1, "bucketPaddingGap": 0, "sliceRopeCache": False,
                                 "attnBucketizedNumReqs": False, "xlaCheckRecompilation": False},
                "vllm": {"maxModelLen": 16384}}
    assert load(defaults).warnings == load().warnings == []


def test_check_recompilation_left_on_warns_that_it_is_for_one_validation_boot():
    warnings = load({"tpuInference": {"xlaCheckRecompilation": True}}).warnings
    [warning] = [w for w in warnings if "xlaCheckRecompilation" in w]
    assert "one validation boot" in warning and "xlaCheckRecompilation false" in warning
    assert UNTESTED not in warning


def test_the_gap_moves_the_bucket_a_budget_runs_as():
    # 2496 with powers of two: the 4096 bucket (the log's -24.7%); with the gap, the 2560 one.
    assert any("compiles as the 4096 bucket" in w for w in load({"vllm": {"maxNumBatchedTokens": 2496}}).warnings)
    gapped = load({"vllm": {"maxNumBatchedTokens": 2496}, "tpuInference": {"bucketPaddingGap": 128}}).warnings
    assert any("compiles as the 2560 bucket" in w and "step by 128" in w for w in gapped)
    on_the_ladder = load({"vllm": {"maxNumBatchedTokens": 2560}, "tpuInference": {"bucketPaddingGap": 128}})
    assert not any("compiles as the" in w for w in on_the_ladder.warnings)


# --- the KV budget of the 65536 arm ----------------------------------------------------------------------

def test_65536_keeps_512_blocks_per_request_so_the_pool_does_not_shrink():
    base = load().settings.kv_budget()
    long = load({"vllm": {"maxModelLen": 65536}}).settings.kv_budget()
    assert (base.block_size, base.blocks_per_request, base.kv_blocks, base.kv_tokens) == (64, 512, 5021, 321_344)
    assert (long.block_size, long.blocks_per_request, long.kv_blocks, long.kv_tokens) == (128, 512, 2510, 321_280)
    assert long.kv_pool_bytes == base.kv_pool_bytes
    [warning] = untested_warnings(load({"vllm": {"maxModelLen": 65536}}))
    assert "block size 128 x 512 blocks per request = 65536" in warning and "321,280 tokens" in warning


def test_the_arms_plan_shows_flags_environment_and_kv_budget():
    plan = json.loads((GOLDEN_DIR / "arms.json").read_text())
    assert plan["budget"]["block_size"] == 128 and plan["budget"]["blocks_per_request"] == 512
    assert plan["budget"]["kv_tokens"] == 321_280
    assert plan["budget"]["tpu_inference_environment"] == ALL_ENV
    assert plan["budget"]["token_buckets"] == {"count": 67, "largest": 8192, "padding_gap": 128}
    assert len(plan["budget"]["untested_arms"]) == 7
    shown = json.dumps(plan["resources"])
    assert "NUM_PRECOMPILE_WORKERS=8" in shown and "--speculative-config" in shown
    assert sum(UNTESTED in warning for warning in plan["warnings"]) == 7
    gke = json.loads((GOLDEN_DIR / "gkearms.json").read_text())
    pod_env = json.dumps([r for r in gke["resources"] if r["type"].endswith(":Deployment")])
    assert '"name": "NUM_PRECOMPILE_WORKERS", "value": "8"' in pod_env
    dev = json.loads((GOLDEN_DIR / "dev.json").read_text())
    assert "untested_arms" not in dev["budget"] and "tpu_inference_environment" not in dev["budget"]


# --- the ladder ------------------------------------------------------------------------------------------

def test_the_token_ladder():
    assert chip_memory.token_buckets(4096) == (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
    gapped = chip_memory.token_buckets(4096, 128)
    assert gapped[:5] == (16, 32, 64, 128, 256) and gapped[-1] == 4096 and len(gapped) == 35
    assert chip_memory.compiled_bucket(2496, gapped) == 2560
    assert chip_memory.compiled_bucket(2496, chip_memory.token_buckets(4096)) == 4096
