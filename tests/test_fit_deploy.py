"""The stack deploys what `python -m tools.fit` says fits (issue 37 item 4): one setting, tpu.acceleratorType,
names the shape on both wings; the model comes from the catalog or vllm.modelConfig; what cannot fit is refused
before any cloud call, naming the smallest shape that can."""

from __future__ import annotations

import json

import pytest

from components import catalog, settings
from components.gke import compute_class
from components.serving import serve_command

V6E_1 = {"zone": "us-east5-a", "acceleratorType": "v6e-1"}
GKE_V6E = {"location": "us-east5-a", "nodeLocations": ["us-east5-a"], "maxReplicas": 2}


SSH = {"sshSourceRanges": ["198.51.100.7/32"]}


def load(**sections) -> settings.Loaded:
    return settings.load({"access": SSH, **sections}, "my-proj", "dev")


def problems(**sections) -> list[str]:
    with pytest.raises(settings.SettingsError) as caught:
        load(**sections)
    return caught.value.problems


def one_problem(**sections) -> str:
    found = problems(**sections)
    assert len(found) == 1, found
    return found[0]


# --- The shape --------------------------------------------------------------------------------

def test_the_shape_sets_runtime_disk_and_tensor_parallel_size():
    cfg = load(tpu=V6E_1, vllm={"model": "Qwen/Qwen3-8B"}).settings
    assert (cfg.tpu.runtime, cfg.cache_disk_type, cfg.tensor_parallel_size) == (
        "v2-alpha-tpuv6e", "hyperdisk-balanced", 1)
    args = serve_command.vllm_serve_args(cfg)
    assert args[args.index("--tensor-parallel-size") + 1] == "1"
    # The default stays the log's.
    default = load().settings
    assert (default.tpu.runtime, default.cache_disk_type, default.gke_machine_type) == (
        "v2-alpha-tpuv5-lite", "pd-balanced", "ct5lp-hightpu-1t")


def test_a_multi_chip_fit_renders_its_tensor_parallel_size():
    cfg = load(tpu={**V6E_1, "acceleratorType": "v6e-4"}, vllm={"model": "Qwen/Qwen3-32B"}).settings
    args = serve_command.vllm_serve_args(cfg)
    assert args[args.index("--tensor-parallel-size") + 1] == "4"


def test_a_wrong_generation_runtime_is_refused_with_the_fix():
    message = one_problem(tpu={**V6E_1, "runtimeVersion": "v2-alpha-tpuv5-lite"})
    assert "tpu-vllm:tpu.runtimeVersion" in message and "set it to v2-alpha-tpuv6e" in message
    assert load(tpu={**V6E_1, "runtimeVersion": "v2-alpha-tpuv6e"}).settings.tpu.runtime == "v2-alpha-tpuv6e"


def test_a_zone_without_the_generation_is_refused_and_refusing_zones_are_errors():
    message = one_problem(tpu={"acceleratorType": "v6e-1"})  # us-west4-a, the default zone: no v6e there
    assert "tpu-vllm:tpu.zone" in message and "us-east5-a" in message
    assert "tpu.zone is unset" in message and "is not where v6e is listed" in message
    refused = one_problem(tpu={**V6E_1, "zone": "us-central1-b"})
    assert "FLEX_START provisioning model is not supported" in refused and "v6e-1" in refused
    # A zone where v6e exists and nobody ran flex-start: a warning, as for v5e.
    warnings = load(tpu={**V6E_1, "zone": "us-east1-d"}).warnings
    assert any("only verified (on v6e-1) in europe-west4-a, us-east5-a, us-east5-b" in w for w in warnings)


def test_v5e_serving_zone_googles_flex_start_page_lists_warns_and_says_so():
    warnings = load(tpu={"zone": "us-central1-a"}).warnings
    assert any("Google's flex-start page lists us-central1-a" in w for w in warnings)


def test_a_cache_disk_the_shape_does_not_take_is_refused():
    message = one_problem(tpu=V6E_1, cache={"diskType": "pd-balanced"})
    assert "tpu-vllm:cache.diskType" in message and "hyperdisk-balanced" in message
    assert load(tpu=V6E_1, cache={"diskType": "hyperdisk-balanced"}).settings.cache_disk_type == "hyperdisk-balanced"


# --- GKE ----------------------------------------------------------------------------------------

def test_a_gke_machine_that_disagrees_with_the_shape_is_refused_with_the_fix():
    message = one_problem(platform="gke", tpu={**V6E_1, "maxRunDuration": "1d"},
                          gke={**GKE_V6E, "machineType": "ct5lp-hightpu-1t"})
    assert "tpu-vllm:gke.machineType" in message and "ct6e-standard-1t" in message
    assert "set tpu.acceleratorType to v5litepod-1" in message
    agreeing = load(platform="gke", tpu={**V6E_1, "maxRunDuration": "1d"},
                    gke={**GKE_V6E, "machineType": "ct6e-standard-1t"}).settings
    assert agreeing.gke_machine_type == "ct6e-standard-1t"


def test_an_unknown_gke_machine_is_refused():
    message = one_problem(platform="gke", tpu={"maxRunDuration": "1d"}, gke={"machineType": "n2-standard-8"})
    assert "tpu-vllm:gke.machineType" in message and "ct6e-standard-8t" in message


def test_the_compute_class_and_the_pod_follow_the_shape():
    shape = catalog.shape("v6e-4")
    rule = compute_class.priority("flex-start", load().settings.gke, 14400, shape)
    assert rule["tpu"] == {"type": "tpu-v6e-slice", "topology": "2x2", "count": 4}
    assert compute_class.node_selector("c", shape)["cloud.google.com/gke-tpu-accelerator"] == "tpu-v6e-slice"
    quota = compute_class.chip_quota(2, "ns", 1, shape.gke_tpu_count)
    assert quota["spec"]["hard"]["requests.google.com/tpu"] == "12"
    assert compute_class.class_name("p", shape) == "p-tpu-v6e-2x2"
    assert compute_class.class_name("p") == "p-tpu-v5e-1x1"  # the log's class keeps its name


def test_each_replica_counts_all_its_nodes_chips_against_the_cap():
    message = one_problem(platform="gke", tpu={**V6E_1, "acceleratorType": "v6e-4", "maxRunDuration": "1d"},
                          gke={**GKE_V6E, "maxReplicas": 2}, vllm={"model": "Qwen/Qwen3-32B"})
    assert "tpu-vllm:gke.maxReplicas" in message and "12 chips" in message


# --- The model ------------------------------------------------------------------------------------

def test_a_model_that_cannot_fit_is_refused_naming_the_smallest_shape_that_can():
    message = one_problem(vllm={"model": "google/gemma-4-E4B-it"})
    assert 'tpu-vllm:vllm.model = "google/gemma-4-E4B-it"' in message and "does not fit v5litepod-1" in message
    assert "set tpu.acceleratorType to v6e-1" in message
    # On that shape it loads.
    assert load(tpu=V6E_1, vllm={"model": "google/gemma-4-E4B-it"}).settings.fit.fits


def test_a_model_no_catalogued_shape_holds_says_so():
    message = one_problem(tpu=V6E_1, vllm={"model": "Qwen/Qwen3-32B", "maxModelLen": 32768,
                                           "gpuMemoryUtilization": 0.2})
    assert "does not fit v6e-1" in message


def test_an_unmeasured_pair_warns_once_and_a_measured_one_does_not():
    warnings = load(tpu=V6E_1, vllm={"model": "Qwen/Qwen3-8B"}).warnings
    unmeasured = [w for w in warnings if "nobody has measured" in w]
    assert len(unmeasured) == 1
    assert "Memory statistics" in unmeasured[0] and "TPU KV cache size" in unmeasured[0]
    assert not any("nobody has measured" in w for w in load(tpu=V6E_1).warnings)  # E2B on v6e-1: the article's
    assert not any("nobody has measured" in w for w in load().warnings)


def test_model_geometry_still_works_and_points_to_model_config():
    geometry = {"weightsGib": 9.5, "kvLayers": [{"layers": 20, "kvHeads": 2, "headDim": 256}],
                "maxContextTokens": 65536}
    loaded = load(vllm={"model": "acme/agent-7b", "toolCallParser": "hermes", "modelGeometry": geometry})
    assert loaded.settings.kv_budget().kv_tokens > 0
    [warning] = [w for w in loaded.warnings if "vllm.modelGeometry" in w]
    assert "vllm.modelConfig" in warning


@pytest.fixture
def qwen_config(tmp_path):
    """A local copy of Qwen3-8B's config.json (the catalog's) with a safetensors index beside it."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps(catalog.catalog_model("Qwen/Qwen3-8B").config), encoding="utf-8")
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 16_381_470_720}, "weight_map": {}}), encoding="utf-8")
    return config


def test_model_config_brings_any_model_with_its_family_and_index_weights(qwen_config):
    loaded = load(tpu=V6E_1, vllm={"model": "acme/my-qwen3-finetune", "modelConfig": str(qwen_config)})
    cfg = loaded.settings
    assert (cfg.vllm.tool_call_parser, cfg.vllm.reasoning_parser) == ("hermes", "qwen3")
    assert cfg.fit.figures["weights"].value == 16_381_470_720
    assert "model.safetensors.index.json" in cfg.fit.figures["weights"].basis
    assert cfg.kv_budget().kv_bytes_per_token == 147_456
    assert not any("go unchecked" in w for w in loaded.warnings)
    # On a v5e-1 the same weights do not fit: refused, naming v6e-1.
    message = one_problem(vllm={"model": "acme/my-qwen3-finetune", "modelConfig": str(qwen_config)})
    assert "set tpu.acceleratorType to v6e-1" in message


def test_model_config_without_an_index_counts_the_weights(qwen_config):
    (qwen_config.parent / "model.safetensors.index.json").unlink()
    cfg = load(tpu=V6E_1, vllm={"model": "acme/q", "modelConfig": str(qwen_config)}).settings
    assert cfg.fit.figures["weights"].value == 16_381_470_720  # the count lands on the index's total
    assert not cfg.fit.figures["weights"].measured


def test_a_missing_or_bad_model_config_is_refused_clearly(tmp_path):
    missing = one_problem(tpu=V6E_1, vllm={"model": "acme/q", "modelConfig": str(tmp_path / "nope.json"),
                                           "toolCallParser": "hermes"})
    assert "tpu-vllm:vllm.modelConfig" in missing and "cannot read" in missing and "config.json" in missing
    bad = tmp_path / "config.json"
    bad.write_text("{not json", encoding="utf-8")
    message = one_problem(tpu=V6E_1, vllm={"model": "acme/q", "modelConfig": str(bad), "toolCallParser": "hermes"})
    assert "tpu-vllm:vllm.modelConfig" in message and "is not JSON" in message
    assert "Traceback" not in message
    bad.write_bytes(b'{"model_type": "qwen3", "note": "\xff"}')  # not UTF-8: a ValueError, not an OSError
    message = one_problem(tpu=V6E_1, vllm={"model": "acme/q", "modelConfig": str(bad), "toolCallParser": "hermes"})
    assert "tpu-vllm:vllm.modelConfig" in message and "is not UTF-8" in message


# --- Costs ----------------------------------------------------------------------------------------

def test_costs_are_the_catalogs_chip_price_times_chips_in_the_region():
    cfg = load(tpu={**V6E_1, "acceleratorType": "v6e-4"}, vllm={"model": "Qwen/Qwen3-32B"}).settings
    assert cfg.tpu_usd_per_hour() == pytest.approx(4 * 1.35)
    assert cfg.tpu_usd_per_hour("spot") == pytest.approx(4 * 1.4033)
    assert load().settings.tpu_usd_per_hour() == pytest.approx(0.60)


# --- The cache disk in the plan -------------------------------------------------------------------

def golden_disk_inputs(stack: str) -> dict:
    from tests.golden import GOLDEN_DIR
    plan = json.loads((GOLDEN_DIR / f"{stack}.json").read_text(encoding="utf-8"))
    [disk] = [resource for resource in plan["resources"] if resource["type"] == "gcp:compute/disk:Disk"]
    return disk["inputs"]


def test_the_v6e_cache_disk_is_hyperdisk_at_its_free_baseline_and_the_v5e_one_is_the_logs():
    v6e = golden_disk_inputs("qwenv6e")
    assert (v6e["type"], v6e["provisionedIops"], v6e["provisionedThroughput"]) == ("hyperdisk-balanced", 3000, 140)
    v5e = golden_disk_inputs("dev")
    assert v5e["type"] == "pd-balanced" and "provisionedIops" not in v5e and "provisionedThroughput" not in v5e


# --- /dev/shm follows the checkpoint ---------------------------------------------------------------

def test_shm_holds_the_checkpoint_with_the_logs_headroom_and_stays_the_logs_for_e2b():
    from components.serving import spec
    assert spec.shm_bytes_for(None) == spec.shm_bytes_for(8 * 1024**3) == 16 * 1024**3
    assert spec.shm_bytes_for(16_381_470_720) == 26 * 1024**3  # Qwen3-8B: 15.26 GiB x 16/9.54, whole GiB


@pytest.mark.parametrize("model", catalog.catalog_models(), ids=lambda model: model.name)
def test_the_pod_with_its_shm_fits_every_machine_the_model_fits(model):
    from components import sizing
    from components.gke import pod_resources
    from components.serving import spec
    for fitted in sizing.fits_by_shape(model, 32768):
        # A shape the gke wing does not build (tpu7x-standard-1t) has no pod to fit.
        if not fitted.fits or not fitted.shape.on_gke:
            continue
        vllm = pod_resources.vllm_size(spec.shm_bytes_for(int(fitted.figures["weights"].value)))
        memory = (vllm.memory_bytes + pod_resources.FRONT.memory_bytes + pod_resources.METRICS_DOOR.memory_bytes
                  + pod_resources.FUSE_SIDECAR_MEMORY_BYTES)
        cpu, capacity = pod_resources.node_capacity(fitted.shape)
        room = pod_resources.allocatable_memory_bytes(capacity) - pod_resources.SYSTEM_PODS_MEMORY_BYTES
        assert memory <= room, (fitted.shape.accelerator_type, memory, room)


def test_a_model_config_whose_weights_nobody_can_count_asks_for_the_index(tmp_path):
    """Gemma 4's layout is not counted from its config: without the index the weights are unknown, and refused."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps(catalog.catalog_model("google/gemma-4-E2B-it").config), encoding="utf-8")
    message = one_problem(tpu=V6E_1, vllm={"model": "acme/my-gemma", "modelConfig": str(config)})
    assert "weights' size is not known" in message and "model.safetensors.index.json beside" in message
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 10_246_000_000}}), encoding="utf-8")
    cfg = load(tpu=V6E_1, vllm={"model": "acme/my-gemma", "modelConfig": str(config)}).settings
    assert cfg.fit.fits and (cfg.vllm.tool_call_parser, cfg.vllm.reasoning_parser) == ("gemma4", "gemma4")


def test_gke_tpu_zones_the_catalog_does_not_list_for_the_generation_warn():
    # Issue 46: a zone the catalog does not list warns and plans, on gke as on vm.
    warnings = load(platform="gke", tpu={**V6E_1, "maxRunDuration": "1d"},
                    gke={"location": "us-west4-a", "nodeLocations": ["us-west4-a"]}).warnings
    message = next(w for w in warnings if "tpu-vllm:gke.nodeLocations" in w and "not in the zones" in w)
    assert "us-west4-a is not in the zones Google's pages listed for TPU v6e" in message
    assert "us-east5-a" in message and "the plan goes on" in message


def test_the_unbounded_billing_warning_prices_the_shape():
    """v6e's spot is dearer than its flex-start (the article's prices), the reverse of v5e."""
    v6e = load(tpu={**V6E_1, "provisioningModel": "spot"}).warnings
    assert any("costs $84" in w and "3.8% less than spot" in w for w in v6e)  # 60 h x $1.4033
    v5e = load(tpu={"provisioningModel": "spot"}).warnings
    assert any("3.8% more than spot" in w for w in v5e)


def test_weights_on_disk_asks_room_for_the_models_checkpoint():
    message = one_problem(tpu=V6E_1, vllm={"model": "Qwen/Qwen3-8B", "weightsOnDisk": True}, cache={"sizeGb": 20})
    assert "tpu-vllm:cache.sizeGb = 20" in message and "15.26 GiB checkpoint" in message
    assert "use at least 32" in message
    assert load(tpu=V6E_1, vllm={"model": "Qwen/Qwen3-8B", "weightsOnDisk": True}, cache={"sizeGb": 32}).settings
    assert "9.54 GiB checkpoint" in one_problem(vllm={"weightsOnDisk": True}, cache={"sizeGb": 19})


def test_a_pinned_kv_pool_is_bounded_by_the_shapes_chip_not_v5es():
    """vLLM's --kv-cache-memory is per chip: on a v6e-1 (31.24 GiB) a 20 GiB pool is not over the chip; 40 GiB is."""
    twenty_gib, forty_gib = 20 * 1024**3, 40 * 1024**3
    loaded = load(tpu=V6E_1, vllm={"model": "Qwen/Qwen3-8B", "kvCacheMemoryBytes": twenty_gib})
    assert not any("whole HBM" in warning for warning in loaded.warnings)
    message = one_problem(tpu=V6E_1, vllm={"model": "Qwen/Qwen3-8B", "kvCacheMemoryBytes": forty_gib})
    assert f"tpu-vllm:vllm.kvCacheMemoryBytes = {forty_gib}" in message and "31.24 GiB" in message


def test_flex_start_messages_name_the_shape_the_zone_was_seen_on_not_the_one_asked_for():
    # The catalog's v6e observations are of v6e-1 only (catalog/shapes.py, the v6e article); nobody ran v6e-8.
    text = " ".join(load(tpu={"acceleratorType": "v6e-8", "zone": "us-east1-d"}).warnings)
    assert "flex-start v6e is only verified (on v6e-1) in" in text and "flex-start v6e-8" not in text
    # A zone the catalog does not list warns (issue 46), naming where v6e-1 ran.
    text = " ".join(load(tpu={"acceleratorType": "v6e-8", "zone": "us-east9-z"}).warnings)
    assert "where flex-start v6e-1 was run" in text and "flex-start v6e-8" not in text


@pytest.mark.parametrize("platform", ["vm", "gke"])
@pytest.mark.parametrize(("model", "tpu", "parsers"), [
    # tpu-inference's release matrix tests both; Qwen3-4B fits the log's one-chip v5e, gpt-oss-20b (a hybrid KV
    # cache, two groups) one v6e chip.
    ("Qwen/Qwen3-4B", None, ("hermes", "qwen3")),
    ("openai/gpt-oss-20b", V6E_1, ("openai", "openai_gptoss")),
])
def test_the_new_catalog_models_plan_on_a_shape_that_fits_on_both_platforms(platform, model, tpu, parsers):
    sections = {"vllm": {"model": model}}
    if tpu is not None:
        sections["tpu"] = tpu
    if platform == "gke":
        sections["platform"] = "gke"
        if tpu is not None:
            sections["gke"] = GKE_V6E
    cfg = load(**sections).settings
    fitted = cfg.fit
    assert fitted is not None and fitted.fits, fitted and fitted.reasons
    args = serve_command.vllm_serve_args(cfg)
    assert (args[args.index("--tool-call-parser") + 1], args[args.index("--reasoning-parser") + 1]) == parsers


@pytest.mark.parametrize("platform", ["vm", "gke"])
@pytest.mark.parametrize(("model", "shape", "vllm", "parsers"), [
    # The release matrix's larger models on the smallest v6e shape each fits (docs/models.md): gpt-oss-120b,
    # gemma-4-31B-it and gemma-3-27b-it at TP 4, Llama-3.3-70B-Instruct at TP 8. Gemma 3 has no tool-call format of
    # its own (no family parser), so its deploy names one.
    ("openai/gpt-oss-120b", "v6e-4", {}, ("openai", "openai_gptoss")),
    ("google/gemma-4-31B-it", "v6e-4", {}, ("gemma4", "gemma4")),
    ("google/gemma-3-27b-it", "v6e-4", {"toolCallParser": "pythonic"}, ("pythonic", None)),
    ("meta-llama/Llama-3.3-70B-Instruct", "v6e-8", {}, ("llama3_json", None)),
])
def test_the_release_matrix_models_plan_on_a_shape_that_fits_on_both_platforms(platform, model, shape, vllm, parsers):
    chips = catalog.shape(shape).chips
    sections = {"vllm": {"model": model, **vllm}, "tpu": {**V6E_1, "acceleratorType": shape}}
    if platform == "gke":
        # One replica, and room for the rollout's second.
        sections.update(platform="gke", gke={**GKE_V6E, "maxReplicas": 1, "maxTpuChips": 2 * chips})
    cfg = load(**sections).settings
    assert cfg.fit is not None and cfg.fit.fits and cfg.fit.tensor_parallel_size == chips, cfg.fit.reasons
    args = serve_command.vllm_serve_args(cfg)
    tool, reasoning = parsers
    assert args[args.index("--tool-call-parser") + 1] == tool
    assert (args[args.index("--reasoning-parser") + 1] if "--reasoning-parser" in args else None) == reasoning


def test_a_pinned_max_num_seqs_sizes_the_page_as_tpu_inference_does():
    """tpu-inference bounds a request's page table by max_num_seqs (flash_attn.py: 1024 * 1024 // 2 // max_num_seqs
    // 4 pages), so 1,024 sequences at 32,768 tokens take 256-token pages where 256 sequences take 64 (the second
    reader of issue 47: the plan had ignored vllm.maxNumSeqs)."""
    from components.settings.fitting import deployed_fit

    default = deployed_fit(load(vllm={"maxModelLen": 32768}).settings)
    pinned = deployed_fit(load(vllm={"maxModelLen": 32768, "maxNumSeqs": 1024}).settings)
    assert default.figures["block_size"].value == 64
    assert pinned.figures["block_size"].value == 256 and "max_num_seqs 1024" in pinned.figures["block_size"].basis
