"""Each rule of the build log: a passing and a failing case, with key, value and fix in the message."""

import json
import re

import pytest

from components import settings as s
from policy import address_ranges

SSH = {"access": {"sshSourceRanges": ["198.51.100.7/32"]}}


def load(**sections):
    sections.setdefault("access", {})
    sections["access"] = {"sshSourceRanges": ["198.51.100.7/32"], **sections["access"]}
    return s.load(sections, project="my-proj", stack="dev")


def problems(**sections):
    with pytest.raises(s.SettingsError) as caught:
        load(**sections)
    return caught.value.problems


def test_ssh_needs_source_ranges():
    with pytest.raises(s.SettingsError) as caught:
        s.load({}, "my-proj", "dev")
    assert "tpu-vllm:access.sshSourceRanges = []" in caught.value.problems[0]
    assert "ifconfig.me" in caught.value.problems[0]


def test_ssh_from_anywhere_needs_an_explicit_opt_in():
    assert "allowSshFromAnywhere" in one_problem(access={"sshSourceRanges": ["0.0.0.0/0"]})
    loaded = load(access={"sshSourceRanges": ["0.0.0.0/0"], "allowSshFromAnywhere": True})
    assert any("open to any address" in w for w in loaded.warnings)


def one_problem(**sections):
    found = problems(**sections)
    assert len(found) == 1, found
    return found[0]


def test_defaults_are_the_logs_final_configuration():
    cfg = load().settings
    assert (cfg.tpu.zone, cfg.tpu.accelerator_type, cfg.tpu.runtime) == (
        "us-west4-a", "v5litepod-1", "v2-alpha-tpuv5-lite")
    assert cfg.tpu.provisioning_model == "flex-start" and cfg.tpu.run_seconds == 14400
    assert cfg.vllm.gpu_memory_utilization == 0.92 and cfg.vllm.max_num_batched_tokens == 4096


@pytest.mark.parametrize("spelling", ["v5e-1", "v5e", "V5E-1", "tpu-v5e-1", "v5lite-1"])
def test_marketing_spellings_are_errors(spelling):
    message = one_problem(tpu={"acceleratorType": spelling})
    assert "tpu-vllm:tpu.acceleratorType" in message and spelling in message
    assert "spelled v5litepod-1 in every API call and CLI argument" in message


def test_an_uncatalogued_shape_is_refused_naming_the_catalogued_ones():
    message = one_problem(tpu={"acceleratorType": "v5litepod-16"})
    assert "tpu-vllm:tpu.acceleratorType" in message and "v5litepod-1, v5litepod-4, v5litepod-8, v6e-1" in message
    # A catalogued multi-chip shape is taken (the log's E2B fits it; tools.fit says how).
    assert load(tpu={"acceleratorType": "v5litepod-4"}).settings.tpu.shape.chips == 4


@pytest.mark.parametrize(("text", "seconds"), [("4h", 14400), ("90m", 5400), ("2d", 172800), ("1h30m", 5400)])
def test_human_durations(text, seconds):
    assert load(tpu={"maxRunDuration": text}).settings.tpu.run_seconds == seconds


@pytest.mark.parametrize("text", ["30s", "8d", "4 hours", "forever"])
def test_run_duration_outside_1m_to_7d_or_unreadable_is_an_error(text):
    message = one_problem(tpu={"maxRunDuration": text})
    assert "tpu-vllm:tpu.maxRunDuration" in message and text in message


@pytest.mark.parametrize("zone", ["europe-west4-a", "europe-west4-b"])
def test_flex_start_rejecting_zones_are_errors_quoting_the_api(zone):
    message = one_problem(tpu={"zone": zone})
    assert 'FLEX_START provisioning model is not supported for accelerator type "v5litepod-1"' in message
    assert "us-west4-a" in message


def test_unverified_zone_warns():
    warnings = load(tpu={"zone": "us-east5-a"}).warnings
    assert any("only verified (on v5litepod-1) in us-west4-a" in w for w in warnings)


@pytest.mark.parametrize(("model", "weekend"), [("spot", "$35"), ("on-demand", "$72")])
def test_spot_and_on_demand_warn_that_nothing_stops_billing(model, weekend):
    warnings = load(tpu={"provisioningModel": model}).warnings
    assert any("nothing stops its billing" in w and weekend in w for w in warnings)


def test_run_duration_with_spot_is_an_error():
    message = one_problem(tpu={"provisioningModel": "spot", "maxRunDuration": "4h"})
    assert "only flex-start accepts a run duration" in message


def test_flex_start_spelled_like_the_api_gets_a_fix():
    message = one_problem(tpu={"provisioningModel": "FLEX_START"})
    assert "'flex-start'" in message


@pytest.mark.parametrize("value", [0.95, 0.97, 1.0])
def test_memory_utilization_0_95_and_above_is_an_error(value):
    message = one_problem(vllm={"gpuMemoryUtilization": value})
    assert "691 s" in message and "0.92" in message and str(value) in message


@pytest.mark.parametrize(("value", "margin"), [(0.93, "291 MB"), (0.94, "127 MB")])
def test_memory_utilization_0_93_and_0_94_warn(value, margin):
    warnings = load(vllm={"gpuMemoryUtilization": value}).warnings
    assert any(margin in w and "37 MB" in w for w in warnings)


def test_memory_utilization_0_92_is_silent():
    assert not any("gpuMemoryUtilization" in w for w in load(vllm={"gpuMemoryUtilization": 0.92}).warnings)


def test_vllm_dtype_float32_is_sized_at_four_bytes_not_as_bf16():
    # The log's bf16 pool (18,432 bytes per token, 321,344 tokens) is not float32's: the weights double and fill
    # a v5litepod-1's cap, so the plan refuses before a node is paid for, naming the shape that holds them.
    message = one_problem(vllm={"dtype": "float32"})
    assert message.startswith('tpu-vllm:vllm.model = "google/gemma-4-E2B-it": does not fit v5litepod-1')
    assert "weights (17.95 GiB) fill the cap" in message and "set tpu.acceleratorType to v6e-1" in message
    budget = load(vllm={"dtype": "float32"}, tpu={"acceleratorType": "v6e-1", "zone": "us-east5-a"}).settings
    assert budget.kv_budget().kv_bytes_per_token == 36_864


@pytest.mark.parametrize("dtype", ["auto", "bfloat16"])
def test_kv_dtype_auto_and_bf16_are_fine(dtype):
    assert not any("kvCacheDtype" in w for w in load(vllm={"kvCacheDtype": dtype}).warnings)


@pytest.mark.parametrize("dtype", ["fp8", "fp8_e4m3", "fp8_e5m2"])
def test_fp8_kv_warns_it_buys_nothing(dtype):
    warnings = load(vllm={"kvCacheDtype": dtype}).warnings
    assert any("1.000x" in w and "2%" in w for w in warnings)


def test_int8_kv_is_not_a_cli_choice():
    assert "invalid choice: 'int8'" in one_problem(vllm={"kvCacheDtype": "int8"})


@pytest.mark.parametrize("dtype", ["int8_per_token_head", "nvfp4", "fp8_inc", "fp8_ds_mla", "turboquant_3bit"])
def test_kv_dtypes_that_kill_the_server_are_errors(dtype):
    assert "kills the server at boot" in one_problem(vllm={"kvCacheDtype": dtype})


def test_unknown_kv_dtype_lists_the_accepted_values():
    message = one_problem(vllm={"kvCacheDtype": "fp4"})
    assert "auto" in message and "fp8_e4m3" in message and "turboquant_*" in message


def test_batched_tokens_not_a_power_of_two_warns_with_its_bucket():
    warnings = load(vllm={"maxNumBatchedTokens": 3000}).warnings
    assert any("compiles as the 4096 bucket" in w and "-24.7%" in w for w in warnings)


def test_batched_tokens_below_multimodal_floor_quotes_the_servers_error():
    message = one_problem(vllm={"maxNumBatchedTokens": 2048})
    assert "max_tokens_per_mm_item (2496) is larger than max_num_batched_tokens (2048)" in message


def test_text_only_lifts_the_multimodal_floor():
    loaded = load(vllm={"maxNumBatchedTokens": 2048, "limitMmPerPrompt": {"image": 0, "audio": 0}})
    assert loaded.settings.vllm.max_num_batched_tokens == 2048


def test_a_tensor_parallel_size_the_shape_does_not_allow_is_an_error():
    message = one_problem(vllm={"tensorParallelSize": 2})
    assert "tpu-vllm:vllm.tensorParallelSize = 2" in message
    assert "remove the key for the planned layout (tensor-parallel 1 x data-parallel 1;" in message
    assert "or use one that works: tensorParallelSize 1 x dataParallelSize 1" in message


V5E_8 = {"acceleratorType": "v5litepod-8"}


def test_a_data_parallel_size_the_host_cannot_split_into_is_refused_with_the_layouts_that_work():
    message = one_problem(tpu=V5E_8, vllm={"dataParallelSize": 3})
    assert "tpu-vllm:vllm.dataParallelSize = 3" in message and "do not split into 3 replicas" in message
    assert ("tensorParallelSize 1 x dataParallelSize 8, tensorParallelSize 2 x dataParallelSize 4, "
            "tensorParallelSize 4 x dataParallelSize 2, tensorParallelSize 8 x dataParallelSize 1") in message
    message = one_problem(tpu=V5E_8, vllm={"dataParallelSize": 2, "tensorParallelSize": 2})
    assert "tensorParallelSize 2 x dataParallelSize 2 = 4 is not the 8 device(s) of v5litepod-8" in message
    assert "remove the keys for the planned layout (tensor-parallel 2 x data-parallel 4;" in message


def test_a_layout_the_host_splits_into_is_served_as_given():
    for vllm, layout in (({"dataParallelSize": 2}, (4, 2)), ({"tensorParallelSize": 2}, (2, 4)),
                         ({"dataParallelSize": 8, "tensorParallelSize": 1}, (1, 8)), ({}, (2, 4))):
        settings = load(tpu=V5E_8, vllm=vllm).settings
        assert (settings.tensor_parallel_size, settings.data_parallel_size) == layout, vllm


def test_pinned_block_size_is_an_error():
    assert "512 blocks per request" in one_problem(vllm={"blockSize": 32})


def test_pinned_max_num_seqs_warns():
    assert any("tpu-vllm:vllm.maxNumSeqs = 64: " in w for w in load(vllm={"maxNumSeqs": 64}).warnings)


def test_planned_load_over_78_percent_of_the_pool_warns():
    assert not any(w.startswith("tpu-vllm:load = ") for w in load(load={"clients": 16, "contextTokens": 1024}).warnings)
    warnings = load(load={"clients": 64, "contextTokens": 8192}).warnings
    assert any(w.startswith("tpu-vllm:load = ") and "524,288" in w for w in warnings)


@pytest.mark.parametrize(("section", "typo", "near"), [
    ("vllm", "maxModelLenn", "maxModelLen"), ("tpu", "zon", "zone"), ("cache", "sizeGB", "sizeGb")])
def test_unknown_keys_name_the_nearest_valid_key(section, typo, near):
    message = one_problem(**{section: {typo: 1}})
    assert f"tpu-vllm:{section}.{typo}" in message and f"did you mean '{near}'" in message


def test_unknown_top_level_key():
    assert "did you mean 'vllm'" in one_problem(vlm={})


def test_every_problem_is_reported_at_once():
    found = problems(
        tpu={"acceleratorType": "v5e-1", "zone": "europe-west4-a"},
        vllm={"gpuMemoryUtilization": 0.95, "kvCacheDtype": "int8", "maxNumBatchedTokens": 2048,
              "tensorParallelSize": 0, "blockSize": 32, "maxModelLenn": 1},
    )
    keys = ["acceleratorType", "zone", "gpuMemoryUtilization", "kvCacheDtype", "maxNumBatchedTokens",
            "tensorParallelSize", "blockSize", "maxModelLenn"]
    for key in keys:
        assert any(key in problem for problem in found), key


def test_public_serving_needs_an_explicit_opt_in():
    assert "allowPublicServing" in one_problem(access={"servingSourceRanges": ["0.0.0.0/0"]})
    loaded = load(access={"servingSourceRanges": ["0.0.0.0/0"], "allowPublicServing": True})
    assert any("open to the internet" in w for w in loaded.warnings)


def test_bad_cidr_is_an_error():
    assert "203.0.113.7/32" in one_problem(access={"sshSourceRanges": ["my-laptop"]})


def test_hf_token_and_existing_secret_together_is_an_error():
    with pytest.raises(s.SettingsError) as caught:
        s.load({"hfToken": "x", "hfTokenSecret": "hf-token"}, "p", "dev", explicit_hf_secret=True)
    assert "remove one" in caught.value.problems[0]


def test_secret_values_never_appear_in_messages():
    with pytest.raises(s.SettingsError) as caught:
        s.load({"hfToken": {"not": "a string CANARY-SETTINGS"}}, "p", "dev")
    assert "CANARY-SETTINGS" not in caught.value.render()


def test_warnings_are_shown_once():
    warnings = load(vllm={"kvCacheDtype": "fp8"}).warnings
    assert len(warnings) == len(set(warnings))


def test_short_health_timeout_is_an_error():
    assert "cold start" in one_problem(vllm={"healthTimeout": "5m"})



@pytest.mark.parametrize("upstream", [8000, 22])
def test_the_front_and_vllm_cannot_share_a_port(upstream):
    problem = one_problem(vllm={"serverPort": upstream})
    assert problem.startswith(f"tpu-vllm:vllm.serverPort = {upstream}:") and "8001" in problem


# --- Ids derived from the stack name (issue 12 §3) -------------------------------------------
# The APIs' documented patterns, written out here independently of components/basis/naming.py.
COMPUTE_NAME = r"[a-z]([-a-z0-9]*[a-z0-9])?"  # compute.v1 Disk/Firewall name, network tags: 1-63
ACCOUNT_ID = r"[a-z]([-a-z0-9]*[a-z0-9])"  # iam.v1 CreateServiceAccountRequest.accountId: 6-30
SECRET_ID = r"[A-Za-z0-9_-]+"  # secretmanager.v1 secretId: at most 255
TPU_ID = r"[A-Za-z0-9_.~+%-]+"  # tpu.v2alpha1 queuedResourceId / nodeId
LABEL_VALUE = r"[a-z0-9_-]{0,63}"  # label values (ASCII subset of [\p{Ll}\p{Lo}\p{N}_-]{0,63})

AWKWARD_STACKS = ["dev", "my_stack", "prod.eu", "Prod", "UPPER", "abcdefghijklmnopqrstu",
                  "a-very-long-stack-name-for-production-eu", "x" * 100, "___", "team.a_b-", "ümlaut"]


def derived_ids(stack):
    cfg = s.load({"access": {"sshSourceRanges": ["198.51.100.7/32"]}}, "my-proj", stack).settings
    prefix = cfg.resource_prefix
    return {
        "node": cfg.node_id,
        "account": cfg.vm_service_account_id,
        "disk": cfg.cache_disk_name,
        "tag": cfg.network_tag,
        "hf-secret": f"{prefix}-hf-token",
        "api-secret": f"{prefix}-api-key",
        **{f"firewall-{rule}": f"{prefix}-{rule}" for rule in ("ssh", "serving-internal", "serving-external")},
        "label": cfg.labels["stack"],
    }


@pytest.mark.parametrize("stack", AWKWARD_STACKS)
def test_every_derived_id_matches_its_apis_documented_pattern(stack):
    ids = derived_ids(stack)
    for name in ("node", "disk", "tag", "firewall-ssh", "firewall-serving-internal", "firewall-serving-external"):
        assert re.fullmatch(COMPUTE_NAME, ids[name]) and len(ids[name]) <= 63, (name, ids[name])
    assert re.fullmatch(TPU_ID, ids["node"])
    assert re.fullmatch(ACCOUNT_ID, ids["account"]) and 6 <= len(ids["account"]) <= 30, ids["account"]
    for name in ("hf-secret", "api-secret"):
        assert re.fullmatch(SECRET_ID, ids[name]) and len(ids[name]) <= 255
    assert re.fullmatch(LABEL_VALUE, ids["label"]), ids["label"]


def test_a_valid_stack_name_keeps_its_readable_ids():
    assert derived_ids("dev") == {
        "node": "tpu-vllm-dev", "account": "tpu-vllm-dev-vm", "disk": "tpu-vllm-dev-cache",
        "tag": "tpu-vllm-dev", "hf-secret": "tpu-vllm-dev-hf-token", "api-secret": "tpu-vllm-dev-api-key",
        "firewall-ssh": "tpu-vllm-dev-ssh", "firewall-serving-internal": "tpu-vllm-dev-serving-internal",
        "firewall-serving-external": "tpu-vllm-dev-serving-external", "label": "dev"}


@pytest.mark.parametrize(("one", "other"), [
    ("my_stack", "my-stack"), ("Prod", "prod"), ("prod.eu", "prod-eu"),
    ("a-shared-prefix-of-thirty-one-c-one", "a-shared-prefix-of-thirty-one-c-two"),
    ("x" * 99 + "a", "x" * 99 + "b")])
def test_stacks_that_look_alike_get_different_ids(one, other):
    first, second = derived_ids(one), derived_ids(other)
    assert all(first[name] != second[name] for name in first), (first, second)


def test_derived_ids_are_stable():
    assert derived_ids("My_Stack.eu") == derived_ids("My_Stack.eu")
    assert derived_ids("My_Stack.eu")["account"].startswith("tpu-vllm-my-stack")


# --- Settings that cannot work --------------------------------------------------------------

def test_a_run_shorter_than_a_cold_start_plus_the_health_wait_is_an_error():
    message = one_problem(tpu={"maxRunDuration": "30m"})
    assert 'tpu-vllm:tpu.maxRunDuration = "30m": ' in message
    assert "857 s" in message and "at least 45m" in message
    assert load(tpu={"maxRunDuration": "45m"}).settings.tpu.run_seconds == 2700
    # A shorter health wait makes room for a shorter run.
    assert load(tpu={"maxRunDuration": "30m"}, vllm={"healthTimeout": "15m"}).settings.tpu.run_seconds == 1800


@pytest.mark.parametrize("value", ["0s", "0m", "0h0m"])
def test_a_zero_queue_timeout_is_an_error(value):
    message = one_problem(tpu={"queueTimeout": value})
    assert "tpu-vllm:tpu.queueTimeout" in message and "wait forever" in message and "1h" in message


def test_a_short_queue_timeout_is_accepted():
    assert load(tpu={"queueTimeout": "1m"}).settings.tpu.queue_seconds == 60


def test_max_model_len_above_the_models_context_is_an_error():
    message = one_problem(vllm={"maxModelLen": 131073})
    assert "tpu-vllm:vllm.maxModelLen = 131073" in message
    assert "131072" in message and "is greater than the derived max_model_len" in message
    assert load(vllm={"maxModelLen": 131072}).settings.vllm.max_model_len == 131072


@pytest.mark.parametrize("port", [22])
def test_the_ssh_port_is_refused_for_the_front(port):
    message = one_problem(front={"listenPort": port})
    assert "tpu-vllm:front.listenPort = 22" in message and "sshd" in message and "use 8000" in message


@pytest.mark.parametrize("port", [8000, 8080, 2222, 1024])
def test_other_ports_are_accepted(port):
    assert load(front={"listenPort": port}).settings.front.listen_port == port


@pytest.mark.parametrize("port", [80, 443, 1023])
def test_a_privileged_serving_port_is_refused_on_vm(port):
    """The front runs as its own unprivileged user there (components/vm/metadata_block.py): nginx could not bind."""
    message = one_problem(front={"listenPort": port})
    assert f"tpu-vllm:front.listenPort = {port}" in message and "below 1024" in message and "e.g. 8000" in message


def test_a_privileged_serving_port_is_left_to_gke():
    """On gke the front's container is not the VM's; the rule is the VM's alone."""
    assert load(platform="gke", front={"listenPort": 80}).settings.front.listen_port == 80


@pytest.mark.parametrize("image", ["", "   "])
def test_an_empty_image_is_an_error(image):
    message = one_problem(vllm={"image": image})
    assert "tpu-vllm:vllm.image" in message and "vllm/vllm-tpu:v0.32.0" in message


def test_an_image_id_from_docker_images_is_an_error_with_the_logs_reason():
    message = one_problem(vllm={"image": "sha256:2a4a1f82793f748e02af54d77a62e590d34d2c9c68e833a8bb00d26a878a684c"})
    assert "config-blob ID" in message and "unexpected media type" in message


@pytest.mark.parametrize("image", ["vllm tpu", "vllm/vllm-tpu:", "Vllm/VLLM-TPU:nightly"])
def test_an_unpullable_image_reference_is_an_error(image):
    assert "docker can pull" in one_problem(vllm={"image": image})


@pytest.mark.parametrize("image", [
    "vllm/vllm-tpu:nightly", "vllm/vllm-tpu", "us-docker.pkg.dev/my-proj/repo/vllm-tpu:v0.26.1",
    "localhost:5000/vllm-tpu:dev",
    "vllm/vllm-tpu@sha256:5b63034a1d04e6f9f3232f0920b81462da2e2d3d721b33cc41033b9eb38f712f"])
def test_pullable_image_references_are_accepted(image):
    assert load(vllm={"image": image}).settings.vllm.image == image


@pytest.mark.parametrize(("key", "value", "near"), [
    ("toolCallParser", "gemma", "gemma4"), ("toolCallParser", "Gemma4", "gemma4"),
    ("reasoningParser", "gemma-4", "gemma4")])
def test_parsers_vllm_does_not_register_are_errors(key, value, near):
    message = one_problem(vllm={key: value})
    assert f"tpu-vllm:vllm.{key} = \"{value}\"" in message
    assert "vLLM does not register" in message and f"did you mean {near}" in message


def test_the_registered_parser_lists_are_vllms():
    assert {"gemma4", "hermes", "llama3_json", "qwen3_xml", "mistral"} <= s.VLLM_TOOL_CALL_PARSERS
    assert {"gemma4", "qwen3", "deepseek_r1"} <= s.VLLM_REASONING_PARSERS
    assert "gemma3" not in s.VLLM_TOOL_CALL_PARSERS  # Gemma 3 has no parser of its own


@pytest.mark.parametrize(("limits", "words"), [
    ({"image": -1, "audio": 1}, "0 or more"), ({"images": 4}, "not a modality vLLM knows"),
    ({"image": 4, "speech": 1}, "vision_chunk")])
def test_bad_multimodal_limits_are_errors(limits, words):
    message = one_problem(vllm={"limitMmPerPrompt": limits})
    assert "tpu-vllm:vllm.limitMmPerPrompt" in message and words in message


@pytest.mark.parametrize("limits", [{"image": 0, "audio": 0}, {"image": 2, "video": 1}, {}])
def test_good_multimodal_limits_are_accepted(limits):
    assert load(vllm={"limitMmPerPrompt": limits}).settings.vllm.limit_mm_per_prompt == limits


def test_max_num_seqs_zero_is_an_error_and_one_is_not():
    message = one_problem(vllm={"maxNumSeqs": 0})
    assert "tpu-vllm:vllm.maxNumSeqs = 0: at least 1" in message
    assert load(vllm={"maxNumSeqs": 1}).settings.vllm.max_num_seqs == 1


@pytest.mark.parametrize(("labels", "words"), [
    ({"Team": "agents"}, "must start with a lowercase letter"), ({"team": "Agents B"}, "may hold only"),
    ({"1team": "a"}, "must start with a lowercase letter"), ({"team": "x" * 64}, "at most 63"),
    ({"k" + str(n): "v" for n in range(63)}, "at most 62 labels")])
def test_labels_gcp_would_refuse_are_errors(labels, words):
    message = one_problem(tpu={"labels": labels})
    assert "tpu-vllm:tpu.labels" in message and words in message


def test_labels_gcp_accepts_pass():
    labels = {"team": "agents", "cost-center": "", "über_team": "ä-1"}
    cfg = load(tpu={"labels": labels}).settings
    assert cfg.labels == {"app": "tpu-vllm", "stack": "dev", **labels}


@pytest.mark.parametrize(("key", "value"), [
    ("network", "My_Net"), ("network", "vpc-"), ("network", "projects/p/global/networks/Bad"),
    ("subnetwork", "sub_net")])
def test_network_names_gcp_would_refuse_are_errors(key, value):
    message = one_problem(tpu={key: value})
    assert f"tpu-vllm:tpu.{key}" in message and "lowercase letters" in message


@pytest.mark.parametrize(("key", "value"), [
    ("network", "default"), ("network", "projects/my-proj/global/networks/vpc-1"),
    ("network", "global/networks/vpc-1"), ("subnetwork", "tpu-subnet"),
    ("subnetwork", "projects/my-proj/regions/us-west4/subnetworks/tpu-subnet")])
def test_network_names_gcp_accepts_pass(key, value):
    assert getattr(load(tpu={key: value}).settings.tpu, key) == value


def test_a_subnetwork_in_another_region_is_an_error():
    message = one_problem(tpu={"subnetwork": "regions/us-central1/subnetworks/tpu-subnet"})
    assert "us-central1" in message and "us-west4" in message


@pytest.mark.parametrize("project", ["proj", "My-Project", "my-project-", "1project", "my_project",
                                     "a" * 31, "123456789012"])
def test_a_malformed_project_is_an_error(project):
    with pytest.raises(s.SettingsError) as caught:
        s.load({"access": {"sshSourceRanges": ["198.51.100.7/32"]}}, project, "dev")
    [message] = caught.value.problems
    assert message.startswith(f'gcp:project = "{project}"') and "pulumi config set gcp:project" in message


@pytest.mark.parametrize("project", ["my-proj", "tokyo-rain-123", "a" * 30, "example.com:my-project"])
def test_well_formed_projects_pass(project):
    assert s.load({"access": {"sshSourceRanges": ["198.51.100.7/32"]}}, project, "dev").settings.project == project


@pytest.mark.parametrize("zone", ["us-east4-a", "europe-west1-b", "asia-northeast1-a"])
def test_a_zone_the_catalog_does_not_list_for_v5e_warns_and_plans(zone):
    # Issue 46: zone lists change every few months; a zone nobody wrote down is not a refusal.
    warnings = load(tpu={"zone": zone}).warnings
    message = next(w for w in warnings if f'tpu-vllm:tpu.zone = "{zone}"' in w and "not in the zones" in w)
    assert "us-west4-a" in message and "the plan goes on" in message
    # Google's pages as read, not a claim that the zone has no v5e (their stored copies lack the Asia rows).
    assert "is not in the zones Google's pages listed for TPU v5e as of" in message and "no TPU v5e" not in message


@pytest.mark.parametrize("zone", ["us-central1-a", "us-south1-a", "us-west1-c"])
def test_a_v5e_zone_without_verified_flex_start_still_only_warns(zone):
    assert any("only verified (on v5litepod-1) in us-west4-a" in w for w in load(tpu={"zone": zone}).warnings)


@pytest.mark.parametrize("value", [-1, 0])
def test_a_kv_pool_that_is_not_positive_is_an_error(value):
    message = one_problem(vllm={"kvCacheMemoryBytes": value})
    assert f"tpu-vllm:vllm.kvCacheMemoryBytes = {value}" in message and "remove the key" in message
    assert "gpuMemoryUtilization = " not in message


def test_a_kv_pool_larger_than_the_chip_is_an_error_about_the_chip():
    message = one_problem(vllm={"kvCacheMemoryBytes": 100_000_000_000})
    assert "tpu-vllm:vllm.kvCacheMemoryBytes = 100000000000" in message and "15.75 GiB" in message


@pytest.mark.parametrize("value", [4_000_000_000, 6_500_000_000])
def test_a_pinned_kv_pool_warns_that_tpu_ignores_it_and_the_plan_keeps_gpu_memory_utilizations_pool(value):
    # tpu-inference 0.32.0 tpu_inference/worker/tpu_worker.py determine_available_memory sizes the pool from
    # gpu_memory_utilization alone; only vLLM 0.33.0's GPU/CPU/XPU workers read kv_cache_memory_bytes.
    plain, pinned = load(), load(vllm={"kvCacheMemoryBytes": value})
    assert pinned.settings.kv_budget() == plain.settings.kv_budget()
    assert any(f"tpu-vllm:vllm.kvCacheMemoryBytes = {value}: ignored on TPU" in w for w in pinned.warnings)
    assert not any("kvCacheMemoryBytes" in w for w in plain.warnings)


@pytest.mark.parametrize(("key", "value", "path"), [
    ("vllm.maxModelLen", "16384", "tpu-vllm:vllm.maxModelLen"),
    ("tpu.zone", "us-west4-a", "tpu-vllm:tpu.zone"),
    ("access.sshSourceRanges[0]", "198.51.100.7/32", "tpu-vllm:access.sshSourceRanges[0]")])
def test_a_flat_key_suggests_config_set_with_path(key, value, path):
    message = one_problem(**{key: value})
    assert message.startswith(f'{path} = "{value}"')
    assert f"pulumi config rm '{path}' && pulumi config set --path '{path}' {value}" in message


def test_an_unknown_dotted_key_still_gets_the_nearest_key():
    assert "did you mean 'vllm'" in one_problem(**{"vlm.maxModelLen": "1"})


# --- Pydantic's own messages always say the fix ---------------------------------------------

PYDANTIC_SAMPLES = [
    ("greater_than_equal", {"cache": {"sizeGb": 5}}, "tpu-vllm:cache.sizeGb = 5: at least 10"),
    ("less_than_equal", {"cache": {"sizeGb": 70000}}, "at most 65536; set it to 65536 or less"),
    ("greater_than", {"vllm": {"gpuMemoryUtilization": 0}}, "must be more than 0.0; set it like 0.92"),
    ("int_parsing", {"vllm": {"maxModelLen": "long"}}, "must be a whole number; set it like 32768"),
    ("int_from_float", {"vllm": {"maxModelLen": 1.5}}, "without a fraction; set it like 32768"),
    ("int_type", {"load": {"clients": [1]}}, "must be a whole number; set it like 16"),
    ("int_parsing_size", {"load": {"clients": "9" * 5000}}, "of a sensible size; set it like 16"),
    ("int_parsing-dict-value", {"vllm": {"limitMmPerPrompt": {"image": "four"}}}, "must be a whole number"),
    ("model_type-list-item", {"vllm": {"modelGeometry": {"weightsGib": 4, "kvLayers": ["x"],
                                                        "maxContextTokens": 8192}}},
     "--path 'tpu-vllm:vllm.modelGeometry.kvLayers[0].layers'"),
    ("float_parsing", {"vllm": {"gpuMemoryUtilization": "most"}}, "must be a number; set it like 0.92"),
    ("bool_parsing", {"vllm": {"enablePrefixCaching": "maybe"}},
     "must be true or false; set it to true or false (the default is true)"),
    ("string_type", {"tpu": {"maxRunDuration": 4}}, "write durations like 4h"),
    ("string_type", {"vllm": {"image": 5}}, 'must be text; quote it in YAML; set it like "vllm/vllm-tpu:v0.32.0"'),
    ("literal_error", {"tpu": {"provisioningModel": "preemptible"}}, "must be one of 'flex-start', 'spot' or"),
    ("dict_type", {"tpu": {"labels": "team"}}, "must be a map; set it like {\"team\": \"agents\"}"),
    ("model_type", {"vllm": "google/gemma-4-E2B-it"}, "must be a map of settings, not str"),
    ("list_type", {"access": {"internalSourceRanges": "10.0.0.0/8"}},
     "--path 'tpu-vllm:access.internalSourceRanges[0]'"),
    ("too_short", {"vllm": {"modelGeometry": {"weightsGib": 4, "kvLayers": [], "maxContextTokens": 8192}}},
     "needs at least 1 item"),
    ("missing", {"vllm": {"modelGeometry": {"weightsGib": 4, "kvLayers": [{"layers": 4, "kvHeads": 1}],
                                            "maxContextTokens": 8192}}},
     "tpu-vllm:vllm.modelGeometry.kvLayers[0].headDim: is required"),
]


@pytest.mark.parametrize(("kind", "sections", "fix"), PYDANTIC_SAMPLES, ids=[f"{k}-{i}" for i, (k, _, _) in
                                                                           enumerate(PYDANTIC_SAMPLES)])
def test_pydantic_errors_say_the_fix(kind, sections, fix):
    found = problems(**sections)
    assert any(fix in problem for problem in found), found
    assert not any("Input should" in problem for problem in found), found


def test_secret_keys_stay_masked_but_token_counts_do_not():
    message = one_problem(load={"contextTokens": "many"})
    assert 'tpu-vllm:load.contextTokens = "many"' in message


# --- Changing the model ------------------------------------------------------------------------

V6E_1 = {"zone": "us-east5-a", "acceleratorType": "v6e-1"}
V6E_4 = {**V6E_1, "acceleratorType": "v6e-4"}


def test_parsers_and_limits_follow_the_model_family():
    other = load(vllm={"model": "acme/agent-7b", "toolCallParser": "hermes"}).settings.vllm
    assert (other.tool_call_parser, other.reasoning_parser, other.limit_mm_per_prompt) == ("hermes", None, {})
    qwen = load(tpu=V6E_1, vllm={"model": "Qwen/Qwen3-8B"}).settings.vllm
    assert (qwen.tool_call_parser, qwen.reasoning_parser, qwen.limit_mm_per_prompt) == ("hermes", "qwen3", {})
    llama = load(tpu=V6E_1, vllm={"model": "meta-llama/Llama-3.1-8B-Instruct"}).settings.vllm
    assert (llama.tool_call_parser, llama.reasoning_parser) == ("llama3_json", None)
    e4b = load(tpu=V6E_1, vllm={"model": "google/gemma-4-E4B-it"}).settings.vllm
    assert (e4b.tool_call_parser, e4b.reasoning_parser) == ("gemma4", "gemma4")
    assert e4b.limit_mm_per_prompt == {"image": 4, "audio": 1}
    # The 26B and 31B checkpoints have no audio tower.
    # (31B is catalogued and fits a v6e-4 at the default length.)
    assert load(tpu=V6E_4, vllm={"model": "google/gemma-4-31B-it"}).settings.vllm.limit_mm_per_prompt == {"image": 4}


@pytest.mark.parametrize("model", ["Qwen/Qwen3-8B", "google/gemma-3-4b-it"])
def test_gemma4_parsers_on_another_model_are_errors(model):
    found = problems(tpu=V6E_1, vllm={"model": model, "toolCallParser": "gemma4", "reasoningParser": "gemma4"})
    assert len(found) == 2
    assert all("reads only Gemma 4 output" in p and model in p for p in found)


@pytest.mark.parametrize("model", ["google/gemma-4-E4B-it", "unsloth/gemma-4-26B-A4B-it", "/models/gemma4-e2b-ft"])
def test_gemma4_parsers_on_any_gemma4_checkpoint_pass(model):
    vllm = load(tpu=V6E_1, vllm={"model": model, "toolCallParser": "gemma4", "reasoningParser": "gemma4"}).settings.vllm
    assert vllm.tool_call_parser == "gemma4"


def test_another_parser_on_gemma4_is_an_error():
    message = one_problem(tpu=V6E_1, vllm={"model": "google/gemma-4-E4B-it", "toolCallParser": "hermes"})
    assert "only the gemma4 parser reads" in message


def test_a_model_of_no_known_family_must_name_its_parser():
    message = one_problem(vllm={"model": "acme/agent-7b"})
    assert "tpu-vllm:vllm.toolCallParser = null" in message and "hermes" in message


def test_a_model_without_geometry_says_what_is_unchecked_and_how_to_supply_it():
    warnings = load(vllm={"model": "acme/agent-7b", "toolCallParser": "hermes"}).warnings
    [warning] = [w for w in warnings if w.startswith('tpu-vllm:vllm.model = "acme/agent-7b": ')]
    for words in ("KV pool", "planned load", "maxModelLen", "weights fit", "vllm.modelConfig", "docs/models.md"):
        assert words in warning


def test_audio_on_a_model_without_an_audio_tower_warns():
    warnings = load(tpu=V6E_4, vllm={"model": "google/gemma-4-31B-it",
                                     "limitMmPerPrompt": {"image": 4, "audio": 1}}).warnings
    assert any("takes no audio" in w for w in warnings)


GEOMETRY = {"weightsGib": 9.5, "kvLayers": [{"layers": 20, "kvHeads": 2, "headDim": 256}], "maxContextTokens": 65536}


def test_a_supplied_geometry_brings_the_kv_and_context_checks_back():
    loaded = load(vllm={"model": "acme/agent-7b", "toolCallParser": "hermes", "modelGeometry": GEOMETRY})
    kv = loaded.settings.kv_budget()
    assert kv.kv_bytes_per_token == 20 * 2 * 2 * 256 * 2
    assert kv.kv_tokens > 0 and not any("unchecked" in w for w in loaded.warnings)
    message = one_problem(vllm={"model": "acme/agent-7b", "toolCallParser": "hermes", "modelGeometry": GEOMETRY,
                                "maxModelLen": 131072})
    assert "longer than acme/agent-7b's context (65536 tokens" in message


def test_a_supplied_geometry_is_validated():
    found = problems(vllm={"model": "acme/agent-7b", "toolCallParser": "hermes",
                           "modelGeometry": {**GEOMETRY, "maxContextTokenz": 1}})
    assert any("did you mean 'maxContextTokens'" in p for p in found)
    # Weights that fill one chip's cap leave no KV pool (v5e: 0.92 x 15.75 = 14.49 GiB).
    found = problems(vllm={"model": "acme/agent-7b", "toolCallParser": "hermes",
                           "modelGeometry": {**GEOMETRY, "weightsGib": 20}})
    assert any("tpu-vllm:vllm.gpuMemoryUtilization" in p and "14.49 GiB" in p for p in found)


def test_a_geometry_on_the_measured_model_warns_that_it_replaces_the_log():
    assert any("replaces the catalog's geometry" in w for w in load(vllm={"modelGeometry": GEOMETRY}).warnings)


def test_turning_tool_calling_off_is_an_error_because_the_smoke_test_calls_a_tool():
    message = one_problem(vllm={"enableAutoToolChoice": False})
    assert "tpu-vllm:vllm.enableAutoToolChoice = false" in message and "serve.sh" in message


def test_every_new_problem_is_reported_in_one_run():
    found = problems(tpu={"queueTimeout": "0s", "zone": "us-east4", "labels": {"Team": "x"}},
                     front={"listenPort": 22}, vllm={"image": "", "maxNumSeqs": 0, "kvCacheMemoryBytes": -5,
                           "toolCallParser": "nope", "limitMmPerPrompt": {"image": -1}},
                     cache={"sizeGb": 1}, **{"vllm.maxModelLen": "1"})
    for key in ("queueTimeout", "zone", "labels", "front.listenPort", "image", "maxNumSeqs", "kvCacheMemoryBytes",
                "toolCallParser", "limitMmPerPrompt", "sizeGb", "vllm.maxModelLen = "):
        assert any(key in problem for problem in found), key


# --- access: ranges judged by the addresses they cover ---

OPEN_VARIANTS = [["0.0.0.0/0"], ["0.0.0.0/00"], ["1.2.3.4/0"], ["0.0.0.0/1", "128.0.0.0/1"], ["::/0"],
                 ["::ffff:0.0.0.0/96"], ["0.0.0.0/1"], ["8.0.0.0/8"], ["2001:db8::/32"],
                 ["8.8.0.0/16", "9.9.0.0/16"]]


@pytest.mark.parametrize("ranges", OPEN_VARIANTS)
def test_ssh_open_to_the_internet_needs_the_opt_in_however_written(ranges):
    message = one_problem(access={"sshSourceRanges": ranges})
    assert message.startswith("tpu-vllm:access.sshSourceRanges = ")
    assert "opens SSH to the internet" in message and "tpu-vllm:access.allowSshFromAnywhere true" in message
    assert any(str(address_ranges.parse(text)) in message for text in ranges)
    loaded = load(access={"sshSourceRanges": ranges, "allowSshFromAnywhere": True})
    [warning] = [w for w in loaded.warnings if w.startswith("tpu-vllm:access.allowSshFromAnywhere = true: ")]
    assert s.NARROW_SSH_COMMAND in warning


@pytest.mark.parametrize("ranges", OPEN_VARIANTS)
def test_serving_open_to_the_internet_needs_the_opt_in_however_written(ranges):
    message = one_problem(access={"servingSourceRanges": ranges})
    assert message.startswith("tpu-vllm:access.servingSourceRanges = ")
    assert "tpu-vllm:access.allowPublicServing true" in message
    loaded = load(access={"servingSourceRanges": ranges, "allowPublicServing": True})
    assert any("open to the internet" in w for w in loaded.warnings)


def test_the_halves_are_named_together():
    message = one_problem(access={"sshSourceRanges": ["0.0.0.0/1", "128.0.0.0/1"]})
    assert "0.0.0.0/1 and 128.0.0.0/1 together reach every public IPv4 address" in message


@pytest.mark.parametrize("ranges", [["198.51.100.7/32"], ["203.0.113.0/24", "2001:db8:1::/48"], ["8.8.0.0/16"],
                                    ["10.0.0.0/8", "8.8.8.8/32"]])
def test_your_own_ranges_need_no_opt_in(ranges):
    loaded = load(access={"sshSourceRanges": ranges, "servingSourceRanges": ranges})
    assert not any("open to" in w for w in loaded.warnings)


@pytest.mark.parametrize("ranges", [["0.0.0.0/0"], ["8.8.8.0/24"], ["::/0"], ["::ffff:0.0.0.0/96"],
                                    ["10.128.0.0/9", "172.32.0.0/16"], ["127.0.0.1/32"]])
def test_internal_ranges_must_be_private(ranges):
    message = one_problem(front={"listenPort": 8080}, access={"internalSourceRanges": ranges})
    assert message.startswith("tpu-vllm:access.internalSourceRanges = ")
    assert "not private" in message and "access.servingSourceRanges" in message
    assert "access.allowPublicServing" in message
    assert ranges[-1] in message


def test_a_public_internal_range_is_refused_even_with_the_serving_opt_in():
    assert "not private" in one_problem(access={"internalSourceRanges": ["0.0.0.0/0"], "allowPublicServing": True})


@pytest.mark.parametrize("ranges", [["10.128.0.0/9"], ["172.16.0.0/12", "192.168.1.0/24"], ["100.64.0.0/10"],
                                    ["fd00:1::/64"], ["::ffff:10.0.0.0/104"]])
def test_private_internal_ranges_are_fine(ranges):
    assert load(access={"internalSourceRanges": ranges}).settings.access.internal_source_ranges


def test_ranges_are_kept_in_one_spelling_and_host_bits_warn():
    loaded = load(access={"sshSourceRanges": [" 203.0.113.7/24", "198.51.100.7"],
                          "servingSourceRanges": ["0.0.0.0/00"], "allowPublicServing": True})
    assert loaded.settings.access.ssh_source_ranges == ["203.0.113.0/24", "198.51.100.7/32"]
    assert loaded.settings.access.serving_source_ranges == ["0.0.0.0/0"]
    assert any("203.0.113.7/24 has host bits set" in w and "203.0.113.7/32" in w for w in loaded.warnings)


def test_the_narrowing_command_is_one_line_and_asks_for_ipv4():
    assert "\n" not in s.NARROW_SSH_COMMAND and "curl -4" in s.NARROW_SSH_COMMAND
    assert s.NARROW_SSH_COMMAND.endswith("pulumi config rm --path 'tpu-vllm:access.allowSshFromAnywhere'")


# --- secret settings ---

@pytest.mark.parametrize("value", ["", "   ", "\n"])
def test_an_empty_hf_token_is_an_error_naming_the_key(value):
    message = one_problem(hfToken=value)
    assert message.startswith("tpu-vllm:hfToken = [secret]: it is empty")
    assert "pulumi config set --secret tpu-vllm:hfToken" in message


@pytest.mark.parametrize("value", ["", " \n"])
def test_an_empty_private_key_is_an_error_naming_the_key(value):
    message = one_problem(access={"sshPublicKey": "ssh-ed25519 AAAAuserkey me@laptop"}, sshPrivateKey=value)
    assert message.startswith("tpu-vllm:sshPrivateKey = [secret]: it is empty")
    assert "tpu-vllm:access.sshPublicKey" in message


@pytest.mark.parametrize("value", ["", " ", "projects/p/secrets/hf-token", "hf token"])
def test_a_malformed_hf_token_secret_id_is_an_error(value):
    message = one_problem(hfTokenSecret=value)
    assert message.startswith(f"tpu-vllm:hfTokenSecret = {json.dumps(value)}: a Secret Manager secret id")


SECRET_CANARY = "CANARY settings secret"


def test_a_secret_hf_token_secret_id_is_never_quoted():
    with pytest.raises(s.SettingsError) as caught:
        s.load({"hfTokenSecret": SECRET_CANARY, "access": {"sshSourceRanges": ["198.51.100.7/32"]}}, "my-proj", "dev",
               explicit_hf_secret=True, secret_keys=frozenset({"hfTokenSecret"}))
    assert "tpu-vllm:hfTokenSecret = [secret]" in caught.value.render()
    assert SECRET_CANARY not in caught.value.render()
    loaded = s.load({"hfTokenSecret": "my-id", "access": {"sshSourceRanges": ["198.51.100.7/32"]}}, "my-proj", "dev",
                    explicit_hf_secret=True, secret_keys=frozenset({"hfTokenSecret"}))
    assert loaded.secret_keys == {"hfTokenSecret"}


@pytest.mark.parametrize("section", ["access", "vllm", "tpu"])
def test_a_section_set_with_secret_is_refused_and_not_quoted(section):
    raw = {"access": {"sshSourceRanges": ["0.0.0.0/0"], "sshUser": "canary"}, "vllm": {"image": "canary/img"},
           "tpu": {"zone": "canary"}}
    with pytest.raises(s.SettingsError) as caught:
        s.load(raw, "my-proj", "dev", secret_keys=frozenset({section}))
    [problem] = caught.value.problems
    assert problem.startswith(f"tpu-vllm:{section}: is set with --secret") and "canary" not in problem


@pytest.mark.parametrize("key", ["hfToken", "sshPrivateKey"])
def test_a_token_or_key_set_without_secret_is_an_error(key):
    raw = {key: "CANARY-plain", "access": {"sshSourceRanges": ["198.51.100.7/32"]}}
    if key == "sshPrivateKey":
        raw["access"]["sshPublicKey"] = "ssh-ed25519 AAAAuserkey me@laptop"
    with pytest.raises(s.SettingsError) as caught:
        s.load(raw, "my-proj", "dev", secret_keys=frozenset())
    [problem] = caught.value.problems
    assert problem.startswith(f"tpu-vllm:{key}: is stored in plaintext")
    assert f"pulumi config set --secret tpu-vllm:{key}" in problem and "CANARY-plain" not in problem
    assert s.load(raw, "my-proj", "dev", secret_keys=frozenset({key})).settings


@pytest.mark.parametrize("image", ["", "--privileged", "nginx latest", "sha256:2a4a1f82793f"])
def test_the_front_image_is_checked_like_the_vllm_image(image):
    # It lands in `docker run`'s argv: an option-like value would become a docker option.
    problem = one_problem(front={"image": image})
    assert problem.startswith("tpu-vllm:front.image = ") and "nginx:1.28.0-alpine" in problem


def test_a_pinned_front_image_is_accepted():
    assert load(front={"image": "nginx@sha256:" + "a" * 64}).settings.front.image == "nginx@sha256:" + "a" * 64


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "169.254.169.254", "metadata.google.internal",
                                  "metadata", "10.0.0.1", "192.168.1.10", "vm-1.us-west4-a.c.my-proj.internal",
                                  "2130706433", "0x7f000001", "printer.local", "a.b.localhost", "100.64.0.1"])
def test_media_hosts_that_point_back_inside_are_refused(host):
    problem = one_problem(vllm={"allowedMediaDomains": [host]})
    assert problem.startswith("tpu-vllm:vllm.allowedMediaDomains") and "public host names only" in problem


@pytest.mark.parametrize("host", ["images.example.com", "upload.wikimedia.org", "8.8.8.8", "cdn-1.example.co.uk"])
def test_public_media_hosts_are_accepted(host):
    assert load(vllm={"allowedMediaDomains": [host]}).settings.vllm.allowed_media_domains == [host]


@pytest.mark.parametrize("value", [92, 95, 1.0, 1.01, 0.95])
def test_a_memory_cap_too_high_names_a_value_the_other_checks_accept(value):
    """92 used to be told "1 or less", and 1.0 was then refused: the fix must work in one try (issue 29)."""
    [problem] = problems(vllm={"gpuMemoryUtilization": value})
    suggested = float(re.search(r"set it to (\d+\.\d+)", problem).group(1))
    assert load(vllm={"gpuMemoryUtilization": suggested}).settings.vllm.gpu_memory_utilization == suggested
    assert "1 or less" not in problem and "at most 1" not in problem
    if value > 1:
        assert "not a percentage" in problem


# --- the ports' renamed keys: an old stack file keeps meaning what it meant ---

@pytest.mark.parametrize(("old", "new", "attribute"), [
    (("vllm", "port"), ("front", "listenPort"), ("front", "listen_port")),
    (("front", "upstreamPort"), ("vllm", "serverPort"), ("vllm", "server_port")),
])
def test_an_old_port_key_is_read_as_its_new_name_with_a_warning_naming_it(old, new, attribute):
    loaded = s.load({**SSH, old[0]: {old[1]: 8088}}, "my-proj", "dev")
    assert getattr(getattr(loaded.settings, attribute[0]), attribute[1]) == 8088
    [warning] = [w for w in loaded.warnings if f"{old[0]}.{old[1]}" in w]
    assert warning.startswith(f"tpu-vllm:{old[0]}.{old[1]} = 8088: is renamed tpu-vllm:{new[0]}.{new[1]}")
    assert f"pulumi config set --path 'tpu-vllm:{new[0]}.{new[1]}' 8088" in warning


def test_the_old_keys_keep_the_meaning_they_had():
    """vllm.port was the front's (the serving port), front.upstreamPort vLLM's: both at once, swapped values."""
    cfg = s.load({**SSH, "vllm": {"port": 8080, "maxModelLen": 16384}, "front": {"upstreamPort": 8090}},
                 "my-proj", "dev").settings
    assert (cfg.front.listen_port, cfg.vllm.server_port, cfg.vllm.max_model_len) == (8080, 8090, 16384)


def test_an_old_key_beside_its_new_one_is_an_error_naming_both():
    found = problems(vllm={"port": 8080}, front={"listenPort": 8081})
    assert any(p.startswith("tpu-vllm:vllm.port = 8080: is the old name of tpu-vllm:front.listenPort") for p in found)


def test_an_old_key_moves_into_a_section_that_is_not_a_map_only_as_an_error():
    """A new section that is not a map is not silently replaced by the moved key."""
    with pytest.raises(s.SettingsError) as caught:
        s.load({**SSH, "vllm": {"port": 8080}, "front": "nginx"}, "my-proj", "dev")
    assert any("tpu-vllm:front" in problem for problem in caught.value.problems)


def test_an_old_key_set_to_22_is_refused_like_the_new_one():
    # Named as written (issue 36): tests/test_settings_that_say_nothing.py holds both renames.
    assert any(p.startswith("tpu-vllm:vllm.port = 22: is the old name of tpu-vllm:front.listenPort, read as that: "
                            "sshd listens on 22") for p in problems(vllm={"port": 22}))


def test_the_new_keys_load_without_a_warning():
    loaded = s.load({**SSH, "front": {"listenPort": 8080}, "vllm": {"serverPort": 8090}}, "my-proj", "dev")
    assert not [w for w in loaded.warnings if "renamed" in w]


def test_an_ai_zone_google_lists_for_v6e_plans():
    # Google's AI zones have a suffix of letters and digits; its zones page reads "All v6e configurations ...
    # us-central1-ai1 • us-central1-b • us-east1-d • us-east5-a • us-east5-b • us-south1-ai1b" (issue 46).
    loaded = load(tpu={"acceleratorType": "v6e-1", "zone": "us-south1-ai1b"})
    assert loaded.settings.tpu.zone == "us-south1-ai1b"
    assert not any("not in the zones" in w for w in loaded.warnings)
    # Flex-start there was never observed: a warning, as any listed zone nobody ran.
    assert any("flex-start v6e is only verified" in w for w in loaded.warnings)


@pytest.mark.parametrize("zone", ["us-west4", "us-west4-", "US-WEST4-A", "uswest4-a"])
def test_a_zone_without_region_and_suffix_is_still_not_a_zone(zone):
    assert "not a zone" in one_problem(tpu={"zone": zone})


def test_qwen3_json_a_vllm_0_33_tool_call_parser_is_accepted():
    # vLLM 0.33.0 vllm/tool_parsers/__init__.py: "qwen3_json": ("hermes_tool_parser", "Hermes2ProToolParser").
    loaded = load(tpu=V6E_1, vllm={"model": "Qwen/Qwen3-8B", "toolCallParser": "qwen3_json"})
    assert loaded.settings.vllm.tool_call_parser == "qwen3_json"
    assert "does not register" in one_problem(tpu=V6E_1, vllm={"model": "Qwen/Qwen3-8B", "toolCallParser": "qwen9"})
