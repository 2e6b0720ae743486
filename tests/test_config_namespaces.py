"""A key under a namespace nothing reads is an error with the fix, not silently ignored; the plaintext
hfToken error names the stack file the user actually has."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from components.settings.namespaces import provider_namespaces, unread_namespace_findings
from tests import program as harness

ROOT = Path(__file__).resolve().parent.parent


def plan_of(tmp_path: Path, stack: str, extra: dict) -> subprocess.CompletedProcess:
    document = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    document["config"] = {"gcp:project": "my-proj", **document["config"], **extra}
    (tmp_path / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(document))
    return harness.plan(["--stack", stack], config_dir=tmp_path, timeout=120)


def test_every_installed_provider_namespace_is_known():
    assert {"gcp", "command", "tls", "random", "kubernetes"} <= provider_namespaces()


@pytest.mark.parametrize("namespace", ["tpu-vlm", "tpu_vllm", "TPU-VLLM", "tpuvllm", "tpu-vllms", "tpu-llm"])
def test_a_typo_of_the_namespace_is_an_error_that_names_the_right_one(namespace):
    [finding] = unread_namespace_findings([f"{namespace}:cache"], "Pulumi.dev.yaml")
    rendered = finding.render()
    assert rendered.startswith(f"{namespace}:cache: ")
    assert "a typo of 'tpu-vllm'" in rendered and "rename the key to tpu-vllm:cache in Pulumi.dev.yaml" in rendered


def test_an_unread_namespace_is_an_error_naming_who_reads_what():
    [finding] = unread_namespace_findings(["aws:region"], "Pulumi.dev.yaml")
    assert "neither this program (tpu-vllm) nor an installed provider (command, gcp" in finding.render()
    assert "pulumi config rm 'aws:region'" in finding.render()


@pytest.mark.parametrize("key", ["gcp:project", "gcp:region", "kubernetes:context", "command:x", "pulumi:tags",
                                 "tpu-vllm:vllm", "tpu-vllm:anything"])
def test_namespaces_something_reads_pass(key):
    assert unread_namespace_findings([key], "Pulumi.dev.yaml") == []


def test_the_plan_stops_on_a_typo_namespace_and_never_shows_its_value(tmp_path):
    canary = "hf_CANARYnamespace0123456789"
    completed = plan_of(tmp_path, "mine", {"tpu-vlm:cache": {"sizeGb": 80}, "tpu-vlm:hfToken": canary})
    assert completed.returncode == 2, completed.stdout
    assert "Traceback" not in completed.stderr
    assert "tpu-vlm:cache: is under the namespace 'tpu-vlm'" in completed.stderr
    assert "rename the key to tpu-vllm:cache in Pulumi.mine.yaml" in completed.stderr
    assert canary not in completed.stderr + completed.stdout


def test_the_plaintext_token_error_names_the_stack_file(tmp_path):
    completed = plan_of(tmp_path, "mine", {"tpu-vllm:hfToken": "hf_CANARYplaintext0123456789"})
    assert completed.returncode == 2
    assert "tpu-vllm:hfToken: is stored in plaintext in Pulumi.mine.yaml" in completed.stderr
    assert "Pulumi.<stack>.yaml" not in completed.stderr


@pytest.mark.parametrize(("key", "value"), [("gcp:zone", "europe-west4-a"), ("gcp:region", "us-central1")])
def test_a_provider_wide_place_is_a_warning_naming_the_setting_that_decides(tmp_path, key, value):
    """gcp:zone / gcp:region are read by pulumi-gcp, so no namespace check catches them, yet the stack names every
    place itself: the plan says so and which setting does decide (issue 29)."""
    plan = plan_of(tmp_path, "zoned", {key: value})
    assert plan.returncode == 0, plan.stderr
    said = next(line for line in (plan.stdout + plan.stderr).splitlines() if line.startswith(f"warning: {key} = "))
    assert "tpu-vllm:tpu.zone" in said and f"pulumi config rm {key}" in said and value in said
    assert "us-west4-a" in plan.stdout  # the TPU stays where tpu.zone puts it


def test_without_a_provider_wide_place_nothing_is_said():
    # The shipped dev stack, the file plan_of writes the place into above, sets neither gcp:zone nor gcp:region:
    # its plan (shared with tests/test_plan.py's text plan, tests/shared_runs.py) is the other side.
    document = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    assert not {"gcp:zone", "gcp:region"} & set(document["config"])
    plan = harness.plan(["--stack", "dev"], timeout=120)
    assert plan.returncode == 0, plan.stderr
    assert "no resource of this stack takes its place" not in plan.stdout + plan.stderr
