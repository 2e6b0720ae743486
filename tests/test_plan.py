"""`python -m tools.plan`: the offline plan reviewers read."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests import program as harness

ROOT = Path(__file__).resolve().parent.parent
CANARY = "v1:CANARYciphertextTHATmustNOTleak"


def plan(*args: str, config_dir: Path | None = None) -> subprocess.CompletedProcess:
    """Shared with every other test that plans the same stack files this session (tests/program.py plan)."""
    return harness.plan(list(args), config_dir=config_dir, timeout=120)


@pytest.fixture(scope="module")
def dev_json_output() -> str:
    result = plan("--stack", "dev", "--json")
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def dev_json(dev_json_output):
    return json.loads(dev_json_output)


def test_json_shape(dev_json):
    assert set(dev_json) >= {"resources", "warnings", "budget", "files", "placeholders"}
    for resource in dev_json["resources"]:
        assert set(resource) == {"type", "name", "parent", "component", "retain_on_delete", "inputs", "urn", "aliases"}
        # The engine's URN: the whole chain of parent types (the mock monitor's keeps only the last).
        assert resource["urn"].startswith("urn:pulumi:dev::tpu-vllm::")
        if resource["type"] == "gcp:compute/disk:Disk":
            assert resource["urn"].endswith("$gcp:compute/disk:Disk::cache-disk")
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


def test_unset_project_uses_a_marked_placeholder(dev_json, dev_json_output):
    from tools.plan.placeholders import UNSET_PROJECT_STAND_IN

    assert dev_json["project"] == "PLACEHOLDER-set-gcp-project"
    assert any("pulumi config set gcp:project" in note for note in dev_json["notes"])
    # The stand-in the engine ran with is shown as the marker wherever the program put the project.
    assert UNSET_PROJECT_STAND_IN not in dev_json_output
    account = next(r for r in dev_json["resources"] if r["type"] == "gcp:serviceaccount/account:Account")
    assert account["inputs"]["project"] == "PLACEHOLDER-set-gcp-project"


def test_a_real_project_named_like_the_stand_in_is_shown_as_itself(tmp_path):
    from tools.plan.placeholders import UNSET_PROJECT_STAND_IN

    directory = write_stack(tmp_path, {"gcp:project": UNSET_PROJECT_STAND_IN,
                                       "tpu-vllm:access": {"sshSourceRanges": ["198.51.100.7/32"]}})
    result = plan("--stack", "review", "--json", config_dir=directory)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["project"] == UNSET_PROJECT_STAND_IN and data["notes"] == []
    assert "PLACEHOLDER-set-gcp-project" not in result.stdout


def test_secrets_are_redacted(dev_json):
    outputs = dev_json["outputs"]
    assert outputs["apiKey"] == "[secret]" and outputs["sshPrivateKey"] == "[secret]"
    version = next(r for r in dev_json["resources"] if r["name"] == "secrets-api-key-version")
    assert version["inputs"]["secretData"] == "[secret]"
    assert "mock-generated-api-key" not in json.dumps(dev_json)


@pytest.fixture(scope="module")
def dev_text():
    result = plan("--stack", "dev")
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_text_plan_shows_resources_budget_and_warnings(dev_text):
    assert "pulumi-python:dynamic/tpu-vllm:QueuedResource  tpu-qr" in dev_text
    assert '"maxRunDuration": "14400s"' in dev_text
    assert "kv_tokens: 321344" in dev_text
    assert "warning: tpu-vllm:access.allowSshFromAnywhere = true: " in dev_text
    assert "vllm serve google/gemma-4-E2B-it" in dev_text


def run_concurrently(commands: list[tuple[list[str], dict[str, str]]]) -> list[subprocess.CompletedProcess]:
    processes = [(subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                                   env={**os.environ, **env}), args) for args, env in commands]
    results = []
    for process, args in processes:
        stdout, stderr = process.communicate(timeout=120)
        results.append(subprocess.CompletedProcess(args, process.returncode, stdout, stderr))
    return results


def test_the_plan_is_byte_identical_across_fresh_runs(dev_text, dev_json_output, tmp_path):
    # Fresh processes with other hash seeds than the forked runs the shared plans come from (every child of the
    # fork server has its server's own random seed): the engine's registration order and the key order inside
    # request bodies must not reach either form. The dev and the gke stack, each fresh run writing both forms
    # (the text, and --json-out), each against the same plans forked: this is also the gke plan's forked-against-
    # fresh check (tests/test_fork_server.py makes the program's own).
    gke_text, gke_json_output = plan("--stack", "gke"), plan("--stack", "gke", "--json")
    assert gke_text.returncode == gke_json_output.returncode == 0, gke_text.stderr + gke_json_output.stderr
    seeds = {"dev": "1", "gke": "2"}
    json_files = {stack: tmp_path / f"{stack}.json" for stack in seeds}
    runs = run_concurrently([([sys.executable, "-m", "tools.plan", "--stack", stack, "--json-out", str(path)],
                              {"PYTHONHASHSEED": seeds[stack]}) for stack, path in json_files.items()])
    assert all(run.returncode == 0 for run in runs), [run.stderr for run in runs]
    assert [run.stdout for run in runs] == [dev_text.encode(), gke_text.stdout.encode()]
    assert [path.read_text() for path in json_files.values()] == [dev_json_output, gke_json_output.stdout]
    assert "tpu-qr" in dev_text and "tpu-qr" in dev_json_output and '"platform": "gke"' in gke_json_output.stdout
    # A fresh interpreter's exit finalises what the run left: an open event loop would print "Exception ignored
    # in BaseEventLoop.__del__" here on some runs (test_the_plan_leaves_no_event_loop_for_the_exit_to_trip_over).
    assert [run.stderr for run in runs] == [b"", b""]


def test_resources_are_in_tree_order_with_components_counted_apart(dev_json, dev_text):
    resources = dev_json["resources"]
    real = [r for r in resources if not r["component"]]
    wrappers = [r for r in resources if r["component"]]
    assert {r["type"] for r in wrappers} >= {"tpu-vllm:tpu:TpuNode", "tpu-vllm:serving:VllmServer"}
    assert all(r["parent"] in {w["name"] for w in wrappers} for r in real)
    # Each component is followed by what it holds (and what that holds), siblings sorted by name.
    names = [r["name"] for r in resources]
    for index, resource in enumerate(resources):
        if resource["component"]:
            held = [r["name"] for r in resources if r["parent"] == resource["name"]]
            assert held == sorted(held)
            assert all(names.index(name) > index for name in held)
            subtree_end = index + 1
            while subtree_end < len(resources) and _holds(resources, resource["name"], resources[subtree_end]):
                subtree_end += 1
            assert sum(_holds(resources, resource["name"], r) for r in resources) == subtree_end - index - 1
    assert f"resources: {len(real)} to create (+), grouped by {len(wrappers)} component wrappers" in dev_text
    assert sum(line.lstrip().startswith("+ ") for line in dev_text.splitlines()) == len(real)
    assert "  [component] tpu-vllm:tpu:TpuNode  tpu" in dev_text


def test_mock_values_are_marked_as_placeholders(dev_json, dev_text):
    from tools.plan import placeholders as mocks

    for invented in (mocks.MOCK_EXTERNAL_IP, mocks.MOCK_INTERNAL_IP, "mockmockmock"):
        assert invented not in dev_text and invented not in json.dumps(dev_json), invented
    outputs = dev_json["outputs"]
    assert outputs["queuedResourceState"] == "<queued-resource-state>"
    assert outputs["runEndsAt"] == "<run-end-time>"
    assert outputs["sshCommand"].endswith("tpu-vllm@<external-ip>")
    assert outputs["internalEndpoint"] == "http://<internal-ip>:8000/v1"
    metadata = next(r for r in dev_json["resources"] if r["name"] == "tpu-qr")["inputs"]["body"]["tpu"][
        "nodeSpec"][0]["node"]["metadata"]
    assert metadata["ssh-keys"] == "tpu-vllm:<generated-ssh-public-key>"
    assert set(dev_json["placeholders"]) == {"<external-ip>", "<internal-ip>", "<run-end-time>", "<node-uid>",
                                             "<generated-ssh-public-key>", "<queued-resource-state>",
                                             "<run-end-epoch>",  # the dashboard's run tiles and run-end alert
                                             "<image-digest>"}  # vllm.image's tag, pinned at the first up
    assert mocks.MOCK_TERMINATION_EPOCH not in json.dumps(dev_json)
    assert "note: values in <angle brackets> are placeholders" in dev_text
    assert "  <external-ip>: the node's external IP" in dev_text


def test_placeholders_leave_real_values_that_merely_look_alike():
    from tools.plan.placeholders import mark_placeholders

    assert mark_placeholders(["10.128.0.25", "203.0.113.100", "x ACTIVE", "ACTIVE"]) == [
        "10.128.0.25", "203.0.113.100", "x ACTIVE", "<queued-resource-state>"]


def test_the_files_sent_to_the_vm_are_named_side_by_side(dev_json, dev_text):
    startup = (ROOT / "startup/startup.sh").read_text()
    serve = (ROOT / "startup/serve.sh").read_text()
    files = {entry["path"]: entry for entry in dev_json["files"]}
    assert files["startup/startup.sh"]["used_by"] == ["tpu-qr body.tpu.nodeSpec[0].node.metadata.startup-script"]
    [serve_use] = files["startup/serve.sh"]["used_by"]
    assert serve_use.startswith("vllm-serve stdin (then ") and "bytes the stack renders" in serve_use
    assert files["startup/serve.sh"]["bytes"] == len(serve.encode())
    assert f"stdin: <startup/serve.sh: {len(serve.encode()):,} bytes" in dev_text
    assert f'"startup-script": "<startup/startup.sh: {len(startup.encode()):,} bytes' in dev_text
    section = dev_text.split("files the program hands to the VM")[1].split("\n\n")[0]
    assert "startup/serve.sh" in section and "startup/startup.sh" in section
    assert "#!/usr/bin/env bash" not in dev_text  # named, not printed


def _holds(resources, component: str, resource) -> bool:
    """`resource` is inside `component`, at any depth."""
    parents = {r["name"]: r["parent"] for r in resources if r["component"]}
    parent = resource["parent"]
    while parent in parents:
        if parent == component:
            return True
        parent = parents[parent]
    return False


def test_the_remote_command_is_one_argument_a_line(dev_json, dev_text):
    command = next(r for r in dev_json["resources"] if r["name"] == "vllm-serve")["inputs"]["create"]
    block = re.split(r"\n *stdin:", re.split(r"\n *create:\n", dev_text)[1])[0].splitlines()
    lines = [line.strip().removesuffix(" \\") for line in block]
    assert lines[0] == "sudo bash"
    assert "--max-model-len 32768" in lines and "--gpu-memory-utilization 0.92" in lines
    assert "--limit-mm-per-prompt '{\"image\":4,\"audio\":1}'" in lines
    assert all(line.endswith(" \\") for line in block[:-1]) and not block[-1].endswith("\\")
    assert shlex.split(" ".join(lines)) == shlex.split(command)  # nothing lost or reordered


def test_no_none_in_the_text_on_any_pricing_or_model(tmp_path, dev_text):
    assert re.search(r"\bNone\b", dev_text) is None
    directory = write_stack(tmp_path, {"gcp:project": "my-proj", "tpu-vllm:tpu": {"provisioningModel": "spot"},
                                       "tpu-vllm:access": {"sshSourceRanges": ["198.51.100.7/32"]}})
    result = plan("--stack", "review", config_dir=directory)
    assert result.returncode == 0, result.stderr
    assert re.search(r"\bNone\b", result.stdout) is None
    assert "nothing stops the TPU until pulumi destroy: a forgotten weekend costs $34.67" in result.stdout


def test_the_cache_disk_cost_is_in_the_plan_per_month_and_per_run(dev_json, dev_text):
    budget = dev_json["budget"]
    assert (budget["cache_disk_usd_per_gb_month"], budget["cache_disk_usd_per_month"]) == (0.11, 5.5)
    assert budget["cache_disk_usd_per_run"] == 0.0301  # 4 of the month's 730 hours
    assert budget["max_spend_with_disk_usd"] == 2.4301 and budget["max_spend_usd"] == 2.4
    # The API key's version and the SSH host key's (the HF token's secret is the user's own).
    assert budget["secret_versions"] == 2 and budget["idle_usd_per_month"] == 5.62
    assert budget["cache_disk_outlives_destroy"] is False
    assert "$5.50/month, billed whether or not a run is active" in dev_text
    assert "one run with the disk's share of those hours ($0.03): at most $2.43" in dev_text
    assert "with no run, still billing: the cache disk ($5.50/month) and 2 Secret Manager secret version(s)" in dev_text
    assert "pulumi destroy deletes the disk" in dev_text
    outputs = dev_json["outputs"]
    assert (outputs["cacheDiskUsdPerMonth"], outputs["maxSpendPerRunUsd"], outputs["maxSpendPerRunUsdWithDisk"]) == (
        5.5, 2.4, 2.43)
    assert outputs["cacheDiskBilling"].endswith("whether or not a run is active; pulumi destroy deletes it")


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
        "tpu-vllm:vllm": {"gpuMemoryUtilization": 0.95, "kvCacheDtype": "int8", "tensorParallelSize": 0,
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
    ({"tpu-vllm:tpu": {"maxRunDuration": "10d"}}, "tpu.maxRunDuration", "10d", "set it to 7d or less, like 4h"),
    ({"tpu-vllm:vllm": {"gpuMemoryUtilization": 0.95}}, "vllm.gpuMemoryUtilization", "0.95", "set it to 0.92"),
    ({"tpu-vllm:vllm": {"kvCacheDtype": "int8"}}, "vllm.kvCacheDtype", "int8", "set it to auto"),
    ({"tpu-vllm:vllm": {"maxNumBatchedTokens": 2048}}, "vllm.maxNumBatchedTokens", "2048", "use 4096"),
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
    from tools.plan.stack_file import read_stack_config

    path = tmp_path / "Pulumi.review.yaml"
    path.write_text(text)
    with pytest.raises(SettingsError) as caught:
        read_stack_config(path)
    [problem] = caught.value.problems
    assert problem.startswith(str(path)) and words in problem
    assert "<unicode string>" not in problem


@pytest.mark.parametrize("text", ["", "config:\n", "# only a comment\n", "config: {}\n"])
def test_an_empty_stack_file_is_an_empty_config(tmp_path, text):
    from tools.plan.stack_file import read_stack_config

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
    ({"tpu-vllm:front": {"listenPort": 22}}, "front.listenPort", "22", "use 8000"),
    # Issue 46: an unlisted zone warns; the default zone left on another generation is still refused.
    ({"tpu-vllm:tpu": {"acceleratorType": "v6e-1"}}, "tpu.zone", "us-west4-a", "set it to us-east5-a"),
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


# Two real configurations, as two commits of Pulumi.review.yaml would have them.
BASE_CONFIG = {"gcp:project": "my-proj", "tpu-vllm:hfToken": {"secure": CANARY},
               "tpu-vllm:access": {"sshSourceRanges": ["198.51.100.7/32"]}}
HEAD_CONFIG = {"gcp:project": "my-proj",
               "tpu-vllm:tpu": {"maxRunDuration": "2h", "labels": {"team": "ml"}},
               "tpu-vllm:vllm": {"maxModelLen": 16384},
               "tpu-vllm:cache": {"sizeGb": 100, "keepOnDestroy": True},
               "tpu-vllm:access": {"sshSourceRanges": ["198.51.100.7/32"],
                                   "servingSourceRanges": ["198.51.100.0/24"]}}


@pytest.fixture(scope="module")
def two_plans(tmp_path_factory):
    """(base JSON path, head config dir, head plan, head text) from two configurations."""
    base_dir = write_stack(tmp_path_factory.mktemp("base"), BASE_CONFIG)
    head_dir = write_stack(tmp_path_factory.mktemp("head"), HEAD_CONFIG)
    base = plan("--stack", "review", "--json", config_dir=base_dir)
    head_json = plan("--stack", "review", "--json", config_dir=head_dir)
    head_text = plan("--stack", "review", config_dir=head_dir)
    assert base.returncode == head_json.returncode == head_text.returncode == 0, base.stderr + head_json.stderr
    base_path = base_dir / "base.json"
    base_path.write_text(base.stdout)
    return base_path, head_dir, json.loads(head_json.stdout), head_text.stdout


def test_keep_on_destroy_says_the_disk_outlives_destroy(two_plans):
    _, _, head, text = two_plans
    assert head["budget"]["cache_disk_outlives_destroy"] is True
    assert head["budget"]["cache_disk_usd_per_month"] == 11.0
    assert "+ gcp:compute/disk:Disk  cache-disk  (kept on pulumi destroy)" in text
    assert "cache.keepOnDestroy: the disk outlives pulumi destroy and bills $11.00/month until you delete it" in text
    assert head["outputs"]["cacheDiskBilling"].endswith(
        "cache.keepOnDestroy is set, so it outlives pulumi destroy and bills on until you delete it: "
        "gcloud compute disks delete tpu-vllm-review-cache --zone=us-west4-a --project=my-proj")


def test_diff_cli_against_a_plan_from_another_config(two_plans):
    base_path, head_dir, _, _ = two_plans
    result = plan("--stack", "review", "--diff", str(base_path), config_dir=head_dir)
    assert result.returncode == 0, result.stderr
    diff = result.stdout
    assert diff.startswith("offline plan diff: base.json (stack review) -> this commit (stack review)\n")
    # The labels change reaches the SSH host key's secret and the monitoring resources too; the key, version
    # and grant do not.
    assert "resources: 1 added, 2 removed, 11 changed, 20 unchanged (component wrappers not counted)" in diff
    assert "  + gcp:compute/firewall:Firewall  firewall-serving-external\n" in diff
    assert '      sourceRanges[0]: "198.51.100.0/24"' in diff
    assert "  - gcp:secretmanager/secret:Secret  secrets-hf-token\n" in diff
    assert "  - gcp:secretmanager/secretVersion:SecretVersion  secrets-hf-token-version\n" in diff
    disk = diff.split("  ~ gcp:compute/disk:Disk  cache-disk\n")[1].split("  ~ ")[0]
    assert "      size: 50 -> 100\n" in disk and "      (retain_on_delete): false -> true\n" in disk
    body = diff.split("  ~ pulumi-python:dynamic/tpu-vllm:QueuedResource  tpu-qr\n")[1].split("  ~ ")[0]
    assert '      body.runDuration.maxRunDuration: "14400s" -> "7200s"\n' in body
    assert '      body.tpu.nodeSpec[0].node.labels.team: (absent) -> "ml"\n' in body
    serve = diff.split("  ~ command:remote:Command  vllm-serve\n")[1].split("\n\n")[0]
    assert "      create (by argument):\n        ~ --max-model-len: 32768 -> 16384\n" in serve
    assert "        (pulumi-command replaces the command when its triggers change: it runs again)" in serve
    assert "cost (USD):\n" in diff
    assert "  cache_disk_usd_per_month: 5.5 -> 11.0 (+5.5)\n" in diff
    assert "  max_spend_usd: 2.4 -> 1.2 (-1.2)\n" in diff
    assert "  ~ vllmServeCommand (by argument):\n      ~ --max-model-len: 32768 -> 16384\n" in diff
    assert "  ~ gcloudEquivalent (by argument):\n      ~ --max-run-duration: 14400s -> 7200s\n" in diff
    assert '  + externalEndpoint: "http://<external-ip>:8000/v1"' in diff
    assert CANARY not in diff and re.search(r"\bNone\b", diff) is None


def test_diff_of_a_plan_with_itself_says_no_changes(two_plans):
    from tools.plan import diff as plan_diff

    _, _, head, _ = two_plans
    assert plan_diff.render_diff(head, head, "same.json") == (
        "offline plan diff: same.json (stack review) -> this commit (stack review)\n"
        "no changes: the plan is the same as the base plan\n")


def _edited(plan_data: dict, name: str, path: list, edit) -> dict:
    edited = json.loads(json.dumps(plan_data))
    holder = next(r for r in edited["resources"] if r["name"] == name)["inputs"]
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = edit(holder[path[-1]])
    return edited


def test_diff_shows_a_changed_script_line_by_line_and_names_the_file(two_plans):
    from tools.plan import diff as plan_diff
    from tools.plan.model import sha256

    _, _, head, _ = two_plans
    base = _edited(head, "vllm-serve", ["stdin"], lambda text: text.replace("set -euo pipefail", "set -eu", 1))
    # The stdin is serve.sh followed by the files the stack renders; the plan records serve.sh's own hash.
    base_script = (ROOT / "startup/serve.sh").read_text().replace("set -euo pipefail", "set -eu", 1)
    for entry in base["files"]:
        if entry["path"] == "startup/serve.sh":
            entry.update(sha256=sha256(base_script), bytes=len(base_script.encode()))
    diff = plan_diff.render_diff(base, head)
    serve = diff.split("  ~ command:remote:Command  vllm-serve\n")[1]
    head_bytes = len((ROOT / "startup/serve.sh").read_bytes())
    stdin_bytes = len(next(r for r in head["resources"] if r["name"] == "vllm-serve")["inputs"]["stdin"].encode())
    assert (f"      stdin: startup/serve.sh (and the files rendered after it) changed "
            f"({stdin_bytes - 10:,} -> {stdin_bytes:,} bytes)\n") in serve
    assert "        -set -eu\n        +set -euo pipefail\n" in serve
    assert f"files handed to the VM:\n  ~ startup/serve.sh: {head_bytes - 10:,} -> {head_bytes:,} bytes" in diff


def test_diff_reads_a_base_plan_from_before_these_fields(two_plans):
    """A base branch's plan may predate component flags, files, placeholders and the disk cost."""
    from tools.plan import diff as plan_diff
    from tools.plan import placeholders as mocks

    _, _, head, _ = two_plans
    old = json.loads(json.dumps(head).replace("<external-ip>", mocks.MOCK_EXTERNAL_IP)
                     .replace("<internal-ip>", mocks.MOCK_INTERNAL_IP))
    old["outputs"]["queuedResourceState"] = mocks.MOCK_STATE
    for resource in old["resources"]:
        del resource["component"], resource["retain_on_delete"]
    for key in ("files", "placeholders"):
        del old[key]
    del old["budget"]["cache_disk_usd_per_month"]
    diff = plan_diff.render_diff(old, head)
    assert "resources: 0 added, 0 removed, 0 changed, 32 unchanged" in diff
    assert "cache_disk_usd_per_month: (absent) -> 11.0" in diff
    assert "outputs:" not in diff  # the old plan's raw mock IPs are placeholders too


@pytest.mark.parametrize("content", ["not json", "[]", '{"resources": 3}'], ids=["text", "list", "no-list"])
def test_diff_refuses_a_file_that_is_not_a_plan(tmp_path, content):
    base = tmp_path / "base.json"
    base.write_text(content)
    result = plan("--stack", "dev", "--diff", str(base))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"{base} is not a plan saved by `python -m tools.plan --json`" in result.stderr
    missing = plan("--stack", "dev", "--diff", str(tmp_path / "nope.json"))
    assert missing.returncode == 2 and "no base plan at" in missing.stderr


def test_a_program_that_stops_after_the_settings_passed_is_reported_not_crashed(monkeypatch, tmp_path):
    from tools.plan import engine
    from tools.plan import model as plan_module

    directory = write_stack(tmp_path, {"gcp:project": "my-proj"})
    stopped = engine.ProgramRun([], [], None, {}, error="secret hf-token not found in project proj")
    monkeypatch.setattr(plan_module, "run_program", lambda *args, **kwargs: stopped)
    with pytest.raises(plan_module.PlanError, match="secret hf-token not found"):
        plan_module.run_plan("review", directory)


def test_the_plan_leaves_no_event_loop_for_the_exit_to_trip_over():
    # Open loops are finalised at exit after their own sockets, in no fixed order, and then print
    # "Exception ignored in BaseEventLoop.__del__" to stderr on some runs. Counted after a run in a forked child
    # (its own runtime, as a fresh process has); the fresh processes' exits are
    # test_the_plan_is_byte_identical_across_fresh_runs's, whose stderr must stay empty.
    code = ("import asyncio, gc\n"
            "from tools.plan.model import run_plan\n"
            "run_plan('dev')\n"
            "print(sum(isinstance(o, asyncio.AbstractEventLoop) and not o.is_closed() for o in gc.get_objects()))\n")
    result = harness.python_c(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0" and result.stderr == ""


def test_the_files_rendered_after_serve_sh_are_shown_in_full(dev_text):
    # serve.sh is named by its hash; the front's config and the units it installs are read in full.
    rendered = dev_text.split("then, rendered by the stack:\n", 1)[1]
    assert "include /run/tpu-vllm-front/api-key.map;" in rendered and "listen 8000;" in rendered
    assert "[Unit]" in rendered and "Restart=on-failure" in rendered
    assert "#!/usr/bin/env bash\n# tpu-vllm serving step" not in dev_text


def test_the_plan_shows_every_vm_output_the_registry_lists(dev_json):
    from components.core.stack_outputs import names_for

    # The docs' table is written from the registry (tests/test_stack_outputs.py). externalEndpoint exists only with
    # servingSourceRanges, which the dev stack leaves empty; the compute path's outputs (instanceName, instanceState)
    # and priceNotFound only on tpu.api compute and an unpriced shape: the tpu7xflex golden plan shows them.
    compute = set(golden_plan("tpu7xflex")["outputs"])
    assert names_for("vm") == set(dev_json["outputs"]) | {"externalEndpoint"} | (compute - set(dev_json["outputs"]))
    assert {"instanceName", "instanceState", "priceNotFound"} <= compute


def golden_plan(name: str) -> dict:
    return json.loads((ROOT / "tests/golden" / f"{name}.json").read_text())


def test_diff_reports_every_changed_serve_flag_and_the_model():
    from tools.plan import diff as plan_diff

    head = golden_plan("dev")
    base = json.loads(json.dumps(head))
    base["outputs"]["vllmServeCommand"] = (head["outputs"]["vllmServeCommand"]
                                           .replace("google/gemma-4-E2B-it", "google/gemma-3-1b-it")
                                           .replace("--max-model-len 32768", "--max-model-len 16384")
                                           .replace("--gpu-memory-utilization 0.92", "--gpu-memory-utilization 0.9")
                                           .replace("--port 8001", "--port 8002"))
    diff = plan_diff.render_diff(base, head)
    assert ("  ~ vllmServeCommand (by argument):\n"
            "      ~ argument 3: google/gemma-3-1b-it -> google/gemma-4-E2B-it\n"
            "      ~ --max-model-len: 16384 -> 32768\n"
            "      ~ --gpu-memory-utilization: 0.9 -> 0.92\n"
            "      ~ --port: 8002 -> 8001\n") in diff


def test_diff_prints_integers_with_separators():
    from tools.plan import diff as plan_diff

    head = golden_plan("dev")
    base = json.loads(json.dumps(head))
    base["budget"]["kv_tokens"], head["budget"]["kv_tokens"] = 1_285_376, 642_688
    diff = plan_diff.render_diff(base, head)
    assert "  kv_tokens: 1,285,376 -> 642,688 (-642,688)\n" in diff and "e+0" not in diff


def test_a_gke_diff_shows_only_the_gke_budget_fields():
    from tools.plan import diff as plan_diff

    head = golden_plan("gke")
    base = json.loads(json.dumps(head))
    for key in ("max_spend_usd", "idle_usd_per_month", "max_spend_with_disk_usd"):
        base["budget"][key] = head["budget"][key] + 100  # vm-only: a gke plan does not show them
    base["budget"]["gke_usd_per_month_at_min_replicas"] += 100
    diff = plan_diff.render_diff(base, head)
    assert "gke_usd_per_month_at_min_replicas:" in diff
    assert "max_spend_usd" not in diff and "idle_usd_per_month" not in diff and "max_spend_with_disk" not in diff


def test_the_diff_header_names_both_stacks():
    from tools.plan import diff as plan_diff

    dev, gke = golden_plan("dev"), golden_plan("gke")
    first = plan_diff.render_diff(dev, gke, "base.json").splitlines()[:2]
    assert first[0] == "offline plan diff: base.json (stack dev) -> this commit (stack gke)"
    assert first[1].startswith("note: the base plan is of stack dev, not gke")
    assert plan_diff.render_diff(dev, dev, "base.json").splitlines()[0] == (
        "offline plan diff: base.json (stack dev) -> this commit (stack dev)")


def test_a_copied_stack_diffs_against_devs_plan(tmp_path):
    (tmp_path / "Pulumi.mine.yaml").write_text((ROOT / "Pulumi.dev.yaml").read_text())
    result = plan("--stack", "mine", "--diff", str(ROOT / "tests/golden/dev.json"), config_dir=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("offline plan diff: dev.json (stack dev) -> this commit (stack mine)\n")
    assert ("  ~ gcloudEquivalent (by argument):\n      ~ argument 7: tpu-vllm-dev -> tpu-vllm-mine\n"
            "      ~ --node-id: tpu-vllm-dev -> tpu-vllm-mine\n") in result.stdout


def test_diff_refuses_a_base_whose_resources_have_no_type_or_name(tmp_path):
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"resources": [{"name": "x"}]}))
    result = plan("--stack", "dev", "--diff", str(base))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "resource 0 has no type and name" in result.stderr


def a_base_with_fewer_kv_tokens(directory: Path, dev_json: dict) -> Path:
    base = directory / "base.json"
    base.write_text(json.dumps({**dev_json, "budget": {**dev_json["budget"], "kv_tokens": 1}}))
    return base


def test_one_run_writes_the_text_the_json_and_the_diff(tmp_path, dev_json, dev_json_output, dev_text):
    base = a_base_with_fewer_kv_tokens(tmp_path, dev_json)
    json_out, diff_out = tmp_path / "plan.json", tmp_path / "plan.diff.txt"
    result = plan("--stack", "dev", "--json-out", str(json_out), "--diff", str(base), "--diff-out", str(diff_out))
    assert result.returncode == 0 and result.stderr == ""
    # Each form as the command that prints it alone prints it.
    assert result.stdout == dev_text
    assert json_out.read_text() == dev_json_output
    printed = plan("--stack", "dev", "--diff", str(base))
    assert printed.returncode == 0 and diff_out.read_text() == printed.stdout
    assert printed.stdout.startswith("offline plan diff: base.json (stack dev) -> this commit (stack dev)\n")
    assert "  kv_tokens: 1 -> 321,344 (+321,343)\n" in printed.stdout


def test_with_json_on_stdout_the_diff_goes_to_its_file(tmp_path, dev_json, dev_json_output):
    base = a_base_with_fewer_kv_tokens(tmp_path, dev_json)
    diff_out = tmp_path / "plan.diff.txt"
    result = plan("--stack", "dev", "--json", "--diff", str(base), "--diff-out", str(diff_out))
    assert result.returncode == 0, result.stderr
    assert result.stdout == dev_json_output
    assert "  kv_tokens: 1 -> 321,344 (+321,343)\n" in diff_out.read_text()


def test_a_base_it_cannot_read_still_leaves_the_plans_other_forms(tmp_path, dev_json_output, dev_text):
    # With --diff-out the base is read once the plan is out: CI's artifact keeps this commit's plan.
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"resources": [{"name": "x"}]}))
    json_out, diff_out = tmp_path / "plan.json", tmp_path / "plan.diff.txt"
    result = plan("--stack", "dev", "--json-out", str(json_out), "--diff", str(base), "--diff-out", str(diff_out))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"error: {base} is not a plan saved by `python -m tools.plan --json`: resource 0 has no type and name" in (
        result.stderr)
    assert result.stdout == dev_text and json_out.read_text() == dev_json_output
    assert not diff_out.exists()


def test_a_plan_that_fails_writes_no_file(tmp_path):
    directory = write_stack(tmp_path, {"gcp:project": "my-proj", "tpu-vllm:vllm": {"kvCacheDtype": "int8"}})
    json_out, diff_out = tmp_path / "plan.json", tmp_path / "plan.diff.txt"
    result = plan("--stack", "review", "--json-out", str(json_out), "--diff", str(ROOT / "tests/golden/dev.json"),
                  "--diff-out", str(diff_out), config_dir=directory)
    assert result.returncode == 2 and "vllm.kvCacheDtype" in result.stderr
    assert result.stdout == "" and not json_out.exists() and not diff_out.exists()


def test_a_file_it_cannot_write_is_an_error_not_a_traceback(tmp_path):
    result = plan("--stack", "dev", "--json-out", str(tmp_path / "no-such-dir/plan.json"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"error: cannot write {tmp_path / 'no-such-dir/plan.json'}: No such file or directory" in result.stderr


def test_a_hard_link_to_the_base_is_refused_as_the_base_itself(tmp_path, monkeypatch, capsys):
    from tools.plan import __main__ as cli

    (tmp_path / "b.json").write_text("{}")
    os.link(tmp_path / "b.json", tmp_path / "hard.json")  # one file, two names: resolve() keeps both
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli, "run_plan", lambda *args: pytest.fail("the program ran"))
    with pytest.raises(SystemExit) as exited:
        cli.main(["--stack", "dev", "--diff", "b.json", "--json-out", "hard.json", "--diff-out", "d.txt"])
    assert exited.value.code == 2 and "hard.json is also --diff's file" in capsys.readouterr().err
    assert (tmp_path / "b.json").read_text() == "{}" and not (tmp_path / "d.txt").exists()


def test_a_write_cut_short_leaves_the_earlier_file_whole(tmp_path, monkeypatch):
    from tools.plan import __main__ as cli

    target = tmp_path / "plan.json"
    target.write_text("the earlier plan\n")
    written = Path.write_text

    def disk_fills(path, text, **kwargs):
        written(path, text[:5], **kwargs)  # half of it, then the disk is full
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", disk_fills)
    with pytest.raises(cli.OutputError, match="cannot write .*plan.json: No space left on device"):
        cli._write(target, "the new plan\n")
    monkeypatch.undo()
    assert target.read_text() == "the earlier plan\n" and sorted(p.name for p in tmp_path.iterdir()) == ["plan.json"]


@pytest.mark.parametrize(("args", "message"), [
    (["--json", "--diff", "b.json"], "argument --diff: not allowed with argument --json"),
    (["--diff-out", "d.txt"], "argument --diff-out: needs --diff BASE.json"),
    # A file written before the base is read would be the base: the diff would compare the plan with itself.
    (["--diff", "b.json", "--json-out", "b.json"], "b.json is also --diff's file"),
    (["--diff", "b.json", "--json-out", "sub/../b.json"], "b.json is also --diff's file"),
    (["--diff", "b.json", "--json-out", "link.json"], "b.json is also --diff's file"),
    (["--diff", "b.json", "--diff-out", "./b.json"], "b.json is also --diff's file"),
    (["--diff", "b.json", "--json-out", "x.json", "--diff-out", "x.json"], "x.json is also --json-out's file"),
], ids=["json-and-diff-on-stdout", "diff-out-without-diff", "json-out-is-the-base", "the-base-by-another-path",
        "a-link-to-the-base", "diff-out-is-the-base", "one-file-for-two-forms"])
def test_output_files_that_would_lose_a_form_are_refused_before_the_run(args, message, tmp_path, monkeypatch,
                                                                        capsys):
    from tools.plan import __main__ as cli

    (tmp_path / "sub").mkdir()
    (tmp_path / "link.json").symlink_to("b.json")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli, "run_plan", lambda *args: pytest.fail("the program ran"))
    with pytest.raises(SystemExit) as exited:
        cli.main(["--stack", "dev", *args])
    assert exited.value.code == 2 and message in capsys.readouterr().err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["link.json", "sub"]
