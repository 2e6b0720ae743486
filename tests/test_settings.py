"""Each rule of the build log: a passing and a failing case, with key, value and fix in the message."""

import json

import pytest

from components import settings as s


def load(**sections):
    sections.setdefault("access", {})
    sections["access"] = {"sshSourceRanges": ["198.51.100.7/32"], **sections["access"]}
    return s.load(sections, project="proj", stack="dev")


def problems(**sections):
    with pytest.raises(s.SettingsError) as caught:
        load(**sections)
    return caught.value.problems


def test_ssh_needs_source_ranges():
    with pytest.raises(s.SettingsError) as caught:
        s.load({}, "proj", "dev")
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
    assert (cfg.tpu.zone, cfg.tpu.accelerator_type, cfg.tpu.runtime_version) == (
        "us-west4-a", "v5litepod-1", "v2-alpha-tpuv5-lite")
    assert cfg.tpu.provisioning_model == "flex-start" and cfg.tpu.run_seconds == 14400
    assert cfg.vllm.gpu_memory_utilization == 0.92 and cfg.vllm.max_num_batched_tokens == 4096


@pytest.mark.parametrize("spelling", ["v5e-1", "v5e", "V5E-1", "tpu-v5e-1", "v5lite-1"])
def test_marketing_spellings_are_errors(spelling):
    message = one_problem(tpu={"acceleratorType": spelling})
    assert "tpu-vllm:tpu.acceleratorType" in message and spelling in message
    assert "spelled v5litepod-1 in every API call and CLI argument" in message


def test_more_chips_are_refused_with_the_mqa_reason():
    message = one_problem(tpu={"acceleratorType": "v5litepod-4"})
    assert "one KV head" in message and "v5litepod-1" in message


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
    assert any("only verified in us-west4-a" in w for w in warnings)


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


def test_tensor_parallel_other_than_one_is_an_error():
    assert "one KV head (full MQA)" in one_problem(vllm={"tensorParallelSize": 2})


def test_pinned_block_size_is_an_error():
    assert "512 blocks per request" in one_problem(vllm={"blockSize": 32})


def test_pinned_max_num_seqs_warns():
    assert any("maxNumSeqs=64" in w for w in load(vllm={"maxNumSeqs": 64}).warnings)


def test_planned_load_over_78_percent_of_the_pool_warns():
    assert not any(w.startswith("load:") for w in load(load={"clients": 16, "contextTokens": 1024}).warnings)
    warnings = load(load={"clients": 64, "contextTokens": 8192}).warnings
    assert any(w.startswith("load:") and "524,288" in w for w in warnings)


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
              "tensorParallelSize": 4, "blockSize": 32, "maxModelLenn": 1},
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


# --- access: ranges judged by the addresses they cover ---

OPEN_VARIANTS = [["0.0.0.0/0"], ["0.0.0.0/00"], ["1.2.3.4/0"], ["0.0.0.0/1", "128.0.0.0/1"], ["::/0"],
                 ["::ffff:0.0.0.0/96"], ["0.0.0.0/1"], ["8.0.0.0/8"], ["2001:db8::/32"],
                 ["8.8.0.0/16", "9.9.0.0/16"]]


@pytest.mark.parametrize("ranges", OPEN_VARIANTS)
def test_ssh_open_to_the_internet_needs_the_opt_in_however_written(ranges):
    message = one_problem(access={"sshSourceRanges": ranges})
    assert message.startswith("tpu-vllm:access.sshSourceRanges = ")
    assert "opens SSH to the internet" in message and "tpu-vllm:access.allowSshFromAnywhere true" in message
    assert any(str(s.address_ranges.parse(text)) in message for text in ranges)
    loaded = load(access={"sshSourceRanges": ranges, "allowSshFromAnywhere": True})
    [warning] = [w for w in loaded.warnings if w.startswith("access.allowSshFromAnywhere")]
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
    message = one_problem(vllm={"port": 8001}, access={"internalSourceRanges": ranges})
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
        s.load({"hfTokenSecret": SECRET_CANARY, "access": {"sshSourceRanges": ["198.51.100.7/32"]}}, "p", "dev",
               explicit_hf_secret=True, secret_keys=frozenset({"hfTokenSecret"}))
    assert "tpu-vllm:hfTokenSecret = [secret]" in caught.value.render()
    assert SECRET_CANARY not in caught.value.render()
    loaded = s.load({"hfTokenSecret": "my-id", "access": {"sshSourceRanges": ["198.51.100.7/32"]}}, "p", "dev",
                    explicit_hf_secret=True, secret_keys=frozenset({"hfTokenSecret"}))
    assert loaded.secret_keys == {"hfTokenSecret"}


@pytest.mark.parametrize("section", ["access", "vllm", "tpu"])
def test_a_section_set_with_secret_is_refused_and_not_quoted(section):
    raw = {"access": {"sshSourceRanges": ["0.0.0.0/0"], "sshUser": "canary"}, "vllm": {"image": "canary/img"},
           "tpu": {"zone": "canary"}}
    with pytest.raises(s.SettingsError) as caught:
        s.load(raw, "p", "dev", secret_keys=frozenset({section}))
    [problem] = caught.value.problems
    assert problem.startswith(f"tpu-vllm:{section} is set with --secret") and "canary" not in problem


@pytest.mark.parametrize("key", ["hfToken", "sshPrivateKey"])
def test_a_token_or_key_set_without_secret_is_an_error(key):
    raw = {key: "CANARY-plain", "access": {"sshSourceRanges": ["198.51.100.7/32"]}}
    if key == "sshPrivateKey":
        raw["access"]["sshPublicKey"] = "ssh-ed25519 AAAAuserkey me@laptop"
    with pytest.raises(s.SettingsError) as caught:
        s.load(raw, "p", "dev", secret_keys=frozenset())
    [problem] = caught.value.problems
    assert problem.startswith(f"tpu-vllm:{key} is stored in plaintext")
    assert f"pulumi config set --secret tpu-vllm:{key}" in problem and "CANARY-plain" not in problem
    assert s.load(raw, "p", "dev", secret_keys=frozenset({key})).settings
