"""`python -m tools.plan`: the offline plan reviewers read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
CANARY = "v1:CANARYciphertextTHATmustNOTleak"


def plan(*args: str, config_dir: Path | None = None) -> subprocess.CompletedProcess:
    extra = ["--config-dir", str(config_dir)] if config_dir else []
    return subprocess.run([sys.executable, "-m", "tools.plan", *args, *extra], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


@pytest.fixture(scope="module")
def dev_json():
    result = plan("--stack", "dev", "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_json_shape(dev_json):
    assert set(dev_json) >= {"resources", "warnings", "budget"}
    for resource in dev_json["resources"]:
        assert set(resource) == {"type", "name", "parent", "inputs"}
    assert {"kv_bytes_per_token", "kv_tokens", "hbm_cap_gib", "kv_pool_gib", "cost_per_hour_usd",
            "max_spend_usd"} <= set(dev_json["budget"])


def test_budget_is_the_logs(dev_json):
    budget = dev_json["budget"]
    assert budget["kv_bytes_per_token"] == 18_432
    assert budget["kv_tokens"] == 321_344
    assert (budget["hbm_cap_gib"], budget["kv_pool_gib"], budget["outside_cap_gib"]) == (14.49, 5.52, 1.26)
    assert (budget["cost_per_hour_usd"], budget["max_spend_usd"]) == (0.6, 2.4)


def test_the_queued_resource_body_is_shown_whole(dev_json):
    queued = next(r for r in dev_json["resources"] if r["type"].endswith(":QueuedResource"))
    body = queued["inputs"]["body"]
    assert body["provisioningModel"] == "FLEX_START" and body["runDuration"]["maxRunDuration"] == "14400s"
    assert "__provider" not in queued["inputs"]
    assert queued["parent"] == "tpu"


def test_unset_project_uses_a_marked_placeholder(dev_json):
    assert dev_json["project"] == "PLACEHOLDER-set-gcp-project"
    assert any("pulumi config set gcp:project" in note for note in dev_json["notes"])


def test_secrets_are_redacted(dev_json):
    outputs = dev_json["outputs"]
    assert outputs["apiKey"] == "[secret]" and outputs["sshPrivateKey"] == "[secret]"
    version = next(r for r in dev_json["resources"] if r["name"] == "secrets-api-key-version")
    assert version["inputs"]["secretData"] == "[secret]"
    assert "mock-generated-api-key" not in json.dumps(dev_json)


def test_text_plan_shows_resources_budget_and_warnings():
    result = plan("--stack", "dev")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "pulumi-python:dynamic/tpu-vllm:QueuedResource  tpu-qr" in text
    assert '"maxRunDuration": "14400s"' in text
    assert "kv_tokens: 321344" in text
    assert "warning: access.allowSshFromAnywhere" in text
    assert "vllm serve google/gemma-4-E2B-it" in text


def write_stack(tmp_path: Path, config: dict) -> Path:
    (tmp_path / "Pulumi.review.yaml").write_text(yaml.safe_dump({"config": config}))
    return tmp_path


def test_secure_values_it_cannot_decrypt_are_redacted(tmp_path):
    directory = write_stack(tmp_path, {"gcp:project": "my-proj", "tpu-vllm:hfToken": {"secure": CANARY},
                                       "tpu-vllm:access": {"sshSourceRanges": ["198.51.100.7/32"]}})
    result = plan("--stack", "review", "--json", config_dir=directory)
    assert result.returncode == 0, result.stderr
    assert "CANARYciphertext" not in result.stdout + result.stderr
    data = json.loads(result.stdout)
    hf_version = next(r for r in data["resources"] if r["name"] == "secrets-hf-token-version")
    assert hf_version["inputs"]["secretData"] == "[secret]"
    assert data["outputs"]["hfTokenSource"].startswith("managed by the stack")


def test_bad_config_exits_2_with_every_problem_and_no_traceback(tmp_path):
    directory = write_stack(tmp_path, {
        "gcp:project": "my-proj",
        "tpu-vllm:tpu": {"acceleratorType": "v5e-1", "zone": "europe-west4-b", "maxRunDuration": "9d"},
        "tpu-vllm:vllm": {"gpuMemoryUtilization": 0.95, "kvCacheDtype": "int8", "tensorParallelSize": 2,
                          "maxNumBatchedTokens": 2048, "blockSize": 16, "maxModelLenn": 1},
    })
    result = plan("--stack", "review", config_dir=directory)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    for key in ("acceleratorType", "zone", "maxRunDuration", "gpuMemoryUtilization", "kvCacheDtype",
                "tensorParallelSize", "maxNumBatchedTokens", "blockSize", "did you mean 'maxModelLen'"):
        assert key in result.stderr, key
    assert result.stdout == ""


def test_missing_stack_file_exits_2():
    result = plan("--stack", "nope")
    assert result.returncode == 2 and "Pulumi.nope.yaml" in result.stderr


SEVEN_BAD_CONFIGS = [
    ({"tpu-vllm:tpu": {"acceleratorType": "v5e-1"}}, "tpu.acceleratorType", "v5e-1", "set it to v5litepod-1"),
    ({"tpu-vllm:tpu": {"zone": "europe-west4-a"}}, "tpu.zone", "europe-west4-a", "set it to us-west4-a"),
    ({"tpu-vllm:tpu": {"maxRunDuration": "10d"}}, "tpu.maxRunDuration", "10d", "set something like 4h"),
    ({"tpu-vllm:vllm": {"gpuMemoryUtilization": 0.95}}, "vllm.gpuMemoryUtilization", "0.95", "set it to 0.92"),
    ({"tpu-vllm:vllm": {"kvCacheDtype": "int8"}}, "vllm.kvCacheDtype", "int8", "set it to auto"),
    ({"tpu-vllm:vllm": {"maxNumBatchedTokens": 2048}}, "vllm.maxNumBatchedTokens", "2048", "Use 4096"),
    ({"tpu-vllm:vllm": {"maxModelLenn": 16384}}, "vllm.maxModelLenn", "maxModelLenn", "did you mean 'maxModelLen'"),
]


@pytest.mark.parametrize(("config", "key", "value", "fix"), SEVEN_BAD_CONFIGS,
                         ids=[case[1] for case in SEVEN_BAD_CONFIGS])
def test_seven_bad_configs_each_fail_with_key_value_and_fix(tmp_path, config, key, value, fix):
    directory = write_stack(tmp_path, {"gcp:project": "my-proj", **config})
    result = plan("--stack", "review", config_dir=directory)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    problem = next(line for line in result.stderr.splitlines() if f"tpu-vllm:{key}" in line)
    assert value in problem and fix in problem


MALFORMED_STACK_FILES = [
    ("config-list", "config:\n  - tpu-vllm:vllm\n", "config: holds a list, not a map"),
    ("config-string", "config: tpu-vllm\n", "config: holds a str, not a map"),
    ("top-level-list", "- config\n- gcp:project\n", "holds a list, not a map"),
    ("duplicate-key", "config:\n  tpu-vllm:vllm:\n    maxModelLen: 16384\n    maxModelLen: 32768\n",
     "line 4, column 5: key 'maxModelLen' appears twice (first on line 3)"),
    ("duplicate-section", "config:\n  tpu-vllm:tpu: {zone: us-west4-a}\n  tpu-vllm:tpu: {zone: us-west1-c}\n",
     "key 'tpu-vllm:tpu' appears twice"),
    ("syntax-error", "config:\n  tpu-vllm:vllm: {maxModelLen: [\n", "not valid YAML"),
    ("bad-indent", "config:\n  gcp:project: my-proj\n    tpu-vllm:vllm: {}\n", "line 3, column"),
]


@pytest.mark.parametrize(("text", "words"), [case[1:] for case in MALFORMED_STACK_FILES],
                         ids=[case[0] for case in MALFORMED_STACK_FILES])
def test_a_malformed_stack_file_names_the_file_and_the_fix(tmp_path, text, words):
    from components.settings import SettingsError
    from tools.plan import read_stack_config

    path = tmp_path / "Pulumi.review.yaml"
    path.write_text(text)
    with pytest.raises(SettingsError) as caught:
        read_stack_config(path)
    [problem] = caught.value.problems
    assert problem.startswith(str(path)) and words in problem
    assert "<unicode string>" not in problem


@pytest.mark.parametrize("text", ["", "config:\n", "# only a comment\n", "config: {}\n"])
def test_an_empty_stack_file_is_an_empty_config(tmp_path, text):
    from tools.plan import read_stack_config

    path = tmp_path / "Pulumi.review.yaml"
    path.write_text(text)
    assert read_stack_config(path) == ({}, [])


@pytest.mark.parametrize("case", ["duplicate-key", "syntax-error"])
def test_a_malformed_stack_file_exits_2_without_a_traceback(tmp_path, case):
    text = next(item[1] for item in MALFORMED_STACK_FILES if item[0] == case)
    (tmp_path / "Pulumi.review.yaml").write_text(text)
    result = plan("--stack", "review", config_dir=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert "Traceback" not in result.stderr and "Pulumi.review.yaml" in result.stderr


NEW_BAD_CONFIGS = [
    ({"tpu-vllm:vllm.maxModelLen": "16384"}, "vllm.maxModelLen", "16384", "pulumi config set --path"),
    ({"tpu-vllm:vllm": {"port": 22}}, "vllm.port", "22", "use 8000"),
    ({"tpu-vllm:tpu": {"zone": "us-east4-a"}}, "tpu.zone", "us-east4-a", "set it to us-west4-a"),
    ({"tpu-vllm:cache": {"sizeGb": 5}}, "cache.sizeGb", "5", "at least 10"),
    ({"tpu-vllm:vllm": {"kvCacheMemoryBytes": 100_000_000_000}}, "vllm.kvCacheMemoryBytes", "100000000000",
     "15.75 GiB"),
]


@pytest.mark.parametrize(("config", "key", "value", "fix"), NEW_BAD_CONFIGS, ids=[case[1] for case in NEW_BAD_CONFIGS])
def test_new_bad_configs_fail_with_key_value_and_fix(tmp_path, config, key, value, fix):
    directory = write_stack(tmp_path, {"gcp:project": "my-proj",
                                       "tpu-vllm:access": {"sshSourceRanges": ["198.51.100.7/32"]}, **config})
    result = plan("--stack", "review", config_dir=directory)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    problem = next(line for line in result.stderr.splitlines() if f"tpu-vllm:{key}" in line)
    assert value in problem and fix in problem


def test_a_malformed_project_fails_the_plan(tmp_path):
    directory = write_stack(tmp_path, {"gcp:project": "My Project"})
    result = plan("--stack", "review", config_dir=directory)
    assert result.returncode == 2 and 'gcp:project = "My Project"' in result.stderr
