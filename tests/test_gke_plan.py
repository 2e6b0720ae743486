"""`python -m tools.plan --stack gke`: the whole gke plan with costs, offline."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from components.basis import spending
from tests import program as harness
from tools.plan.render import render_text

ROOT = Path(__file__).resolve().parent.parent


def plan(*args: str, config_dir: Path | None = None) -> subprocess.CompletedProcess:
    """Shared with every other test that plans the same stack files this session (tests/program.py plan)."""
    return harness.plan(list(args), config_dir=config_dir, timeout=120)


def gke_plan_json() -> subprocess.CompletedProcess:
    """The shipped gke stack's JSON plan with --config-dir at the root: the very request tests/golden renders for
    test_golden_plans (--config-dir names the directory the stack file is read from anyway), so the session plans
    the gke stack once for both."""
    return plan("--stack", "gke", "--json", config_dir=ROOT)


@pytest.fixture(scope="module")
def gke_json():
    result = gke_plan_json()
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


# Every node's boot disk (100 GB pd-balanced, $0.11/GB-month), the bucket's 197 MB, the 1h recycling overlap.
DISK = 100 * 0.11 / 730
REPLICA = (0.60 + DISK) * 24 / 23
BASELINE = 0.10 + spending.system_machine_usd_per_hour("e2-standard-2") + DISK + 0.197 * 0.023 / 730


def test_the_gke_plan_shows_the_platform_and_its_costs(gke_json):
    budget_ = gke_json["budget"]
    assert budget_["platform"] == "gke" and budget_["gke_replicas"] == "1..4"
    assert budget_["gke_cost_per_hour_usd_at_max_replicas"] == pytest.approx(4 * REPLICA + BASELINE, abs=1e-4)
    assert budget_["gke_cost_per_hour_usd_at_min_replicas"] == pytest.approx(REPLICA + BASELINE, abs=1e-4)
    assert budget_["gke_baseline_usd_per_hour"] == pytest.approx(BASELINE, abs=1e-4)
    assert budget_["gke_max_spend_per_run_usd"] == pytest.approx(24 * (4 * REPLICA + BASELINE), abs=0.01)
    assert budget_["gke_boot_disk_usd_per_month_per_node"] == 11.0
    assert budget_["kv_tokens_at_max_replicas"] == 4 * 321_344
    assert budget_["load_limit_tokens_at_max_replicas"] == 4 * 250_648
    # The example keeps one replica: the plan names the gap at every run end and the setting that removes it.
    [gap] = gke_json["warnings"]
    assert gap.startswith("tpu-vllm:gke.minReplicas = 1") and "set gke.minReplicas to 2" in gap


def test_the_gke_plan_lists_cluster_class_cache_workload_and_autoscaling(gke_json):
    types = {r["type"] for r in gke_json["resources"]}
    assert {"gcp:container/cluster:Cluster", "kubernetes:cloud.google.com/v1:ComputeClass",
            "gcp:storage/bucket:Bucket", "pulumi-python:dynamic/tpu-vllm:ImageDigest",
            "kubernetes:apps/v1:Deployment", "kubernetes:autoscaling/v2:HorizontalPodAutoscaler",
            "kubernetes:core/v1:Service", "kubernetes:monitoring.googleapis.com/v1:PodMonitoring"} <= types
    assert not [t for t in types if t.endswith(":QueuedResource") or t == "command:remote:Command"]
    assert gke_json["outputs"]["apiKey"] == "[secret]"
    assert "mock-generated-api-key" not in json.dumps(gke_json)


def test_the_text_plan_shows_the_class_the_cache_the_digest_and_the_costs(gke_json):
    text = render_text(gke_json)  # what `--stack gke` without --json prints
    assert "kubernetes:cloud.google.com/v1:ComputeClass  tpu-class" in text
    assert '"maxRunDurationSeconds": 86400' in text and '"leadTimeSeconds": 3600' in text
    assert 'computeClassPriorities: ["flex-start"]' in text
    # The digest is the registry's, known at the first up: the plan marks it, never invents one silently.
    assert "vllmImage: vllm/vllm-tpu@sha256:<image-digest>" in text and "<image-digest>:" in text
    assert "compileCachePath: gs://tpu-vllm-gke-xla-" in text and "/xla/<image-digest>/" in text
    assert "vllm serve google/gemma-4-E2B-it" in text


def test_the_plan_shows_every_gke_output_the_registry_lists(gke_json):
    from components.core.stack_outputs import names_for

    # The docs' table is written from the registry (tests/test_stack_outputs.py). externalEndpoint takes
    # internalEndpoint's place only with gke.allowExternalLoadBalancer, and the inference gateway's outputs come only
    # with gke.inferenceGateway, and scaleToZero and scaleToZeroCostUsd only at gke.minReplicas 0,
    # all of which the example stack leaves off.
    assert names_for("gke") == set(gke_json["outputs"]) | {"externalEndpoint", "inferenceGateway",
                                                           "inferenceGatewayCost", "scaleToZero",
                                                           "scaleToZeroCostUsd"}


def cost_lines(text: str) -> list[str]:
    return text.split("cost (USD", 1)[1].split("\n\n", 1)[0].splitlines()[1:]


def test_the_gke_plan_does_not_say_billing_stops_by_itself(gke_json):
    text = render_text(gke_json)  # what `--stack gke` prints
    assert "stops by itself" not in text and "with no run, still billing" not in text
    lines = cost_lines(text)
    assert any(line.startswith("  cluster fee $0.10/hour, system pool (1 x e2-standard-2) $0.08/hour and its boot "
                               "disks $0.02/hour: from pulumi up to pulumi destroy") for line in lines)
    assert any("plus its node's boot disk (100 GB pd-balanced, $11.00/month)" in line for line in lines)
    assert any("each replacement comes up 1h before its node's 24h run ends" in line and "$0.64/hour" in line
               for line in lines)
    assert any("compile cache (one Cloud Storage bucket every replica shares" in line for line in lines)
    assert any("run ends after 24h (tpu.maxRunDuration), but the billing does not" in line
               and "gke.minReplicas (1)" in line for line in lines)
    [idle] = [line for line in lines if "with no requests, still billing" in line]
    assert "1 replica(s) (gke.minReplicas) with their boot disks" in idle and "the cache bucket" in idle
    month = 730 * (REPLICA + BASELINE) + 0.06
    assert f"about ${month:,.2f}/month until pulumi destroy" in idle
    assert gke_json["budget"]["gke_usd_per_month_at_min_replicas"] == pytest.approx(month - 0.06, abs=0.01)
    assert not any("fallback" in line for line in lines)  # none opted into


def gke_budget(**gke_values) -> dict:
    """The plan's budget for a variant of the gke stack (the costs module's own functions, no program run)."""
    from components import settings as settings_module
    from components.economics import costs
    from tests.test_gke_settings import gke_raw

    raw = gke_raw()
    extra = gke_values.pop("top", {})
    raw = {**raw, **extra, "gke": {**raw["gke"], **gke_values}}
    return costs.plan_budget(settings_module.load(raw, "my-proj", "gke").settings, secret_versions=0,
                             disk_outlives_destroy=None)


def test_a_reused_cluster_and_an_unbounded_pool_say_so():
    from components.economics.cost_lines import plan_cost_lines

    reused = plan_cost_lines({**gke_budget(useExistingCluster=True, clusterName="shared"), "secret_versions": 0,
                              "secret_versions_usd_per_month": 0})
    assert any("reused cluster (gke.useExistingCluster)" in line for line in reused)
    [idle] = [line for line in reused if "still billing" in line]
    # 730 h of one replica (chip, boot disk, overlap) and the bucket: no fee, no system node.
    assert "cluster fee" not in idle and f"about ${730 * REPLICA + 0.197 * 0.023:,.2f}/month" in idle
    spot = plan_cost_lines({**gke_budget(allowUnboundedBilling=True, top={"tpu": {"provisioningModel": "spot"}}),
                            "secret_versions": 1, "secret_versions_usd_per_month": 0.06})
    assert any("no run duration (spot): every TPU node bills until the autoscaler removes it" in line
               for line in spot)
    assert not any("stops by itself" in line or "run ends after" in line or "recycling" in line for line in spot)
    kept = plan_cost_lines({**gke_budget(), "cache_disk_outlives_destroy": True, "secret_versions": 0,
                            "secret_versions_usd_per_month": 0})
    assert any("the bucket outlives pulumi destroy" in line for line in kept)


def test_each_fallback_is_priced_in_the_plan():
    from components.economics.cost_lines import plan_cost_lines

    summary = gke_budget(fallback=["spot", "on-demand"])
    assert summary["gke_fallbacks"] == {
        "spot": {"per_replica_usd_per_hour": pytest.approx(0.5779 + DISK, abs=1e-4),
                 "at_max_replicas_usd_per_hour": pytest.approx(4 * (0.5779 + DISK) + BASELINE, abs=1e-4)},
        "on-demand": {"per_replica_usd_per_hour": pytest.approx(1.20 + DISK, abs=1e-4),
                      "at_max_replicas_usd_per_hour": pytest.approx(4 * (1.20 + DISK) + BASELINE, abs=1e-4)}}
    lines = plan_cost_lines({**summary, "secret_versions": 0, "secret_versions_usd_per_month": 0})
    spot, on_demand = [line for line in lines if "fallback" in line]
    assert spot.startswith("  fallback spot (gke.fallback") and "$0.59/hour per replica, $2.56/hour at 4" in spot
    assert on_demand.startswith("  fallback on-demand") and "$1.22/hour per replica" in on_demand


def test_no_stand_in_for_an_unset_project_is_shown_unmarked():
    """The gke cache bucket is named after the project: with gcp:project unset, its name showed the engine's
    stand-in as if it were real (issue 29). Every use, inside longer names too, shows the marked placeholder."""
    from tools.plan.placeholders import PLACEHOLDER_PROJECT, UNSET_PROJECT_STAND_IN

    planned = gke_plan_json()
    assert planned.returncode == 0, planned.stderr
    assert UNSET_PROJECT_STAND_IN not in planned.stdout
    assert json.loads(planned.stdout)["outputs"]["compileCacheBucket"].endswith(f"-xla-{PLACEHOLDER_PROJECT}")
