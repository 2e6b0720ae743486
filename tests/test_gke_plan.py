"""`python -m tools.plan --stack gke`: the whole gke plan with costs, offline."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from components import budget
from tools.plan import render_text

ROOT = Path(__file__).resolve().parent.parent


def plan(*args: str, config_dir: Path | None = None) -> subprocess.CompletedProcess:
    extra = ["--config-dir", str(config_dir)] if config_dir else []
    return subprocess.run([sys.executable, "-m", "tools.plan", *args, *extra], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


@pytest.fixture(scope="module")
def gke_json():
    result = plan("--stack", "gke", "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_gke_plan_shows_the_platform_and_its_costs(gke_json):
    budget_ = gke_json["budget"]
    system = budget.system_machine_usd_per_hour("e2-standard-2")
    assert budget_["platform"] == "gke" and budget_["gke_replicas"] == "1..4"
    assert budget_["gke_cost_per_hour_usd_at_max_replicas"] == pytest.approx(2.40 + 0.10 + system, abs=1e-4)
    assert budget_["gke_cost_per_hour_usd_at_min_replicas"] == pytest.approx(0.60 + 0.10 + system, abs=1e-4)
    assert budget_["gke_cluster_fee_and_system_pool_usd_per_hour"] == pytest.approx(0.10 + system, abs=1e-4)
    assert budget_["gke_max_spend_per_run_usd"] == pytest.approx(24 * (2.50 + system), abs=0.01)
    assert budget_["kv_tokens_at_max_replicas"] == 4 * 321_344
    assert budget_["load_limit_tokens_at_max_replicas"] == 4 * 250_648
    assert gke_json["warnings"] == []


def test_the_gke_plan_lists_cluster_pool_workload_and_autoscaling(gke_json):
    types = {r["type"] for r in gke_json["resources"]}
    assert {"gcp:container/cluster:Cluster", "gcp:container/nodePool:NodePool", "kubernetes:apps/v1:StatefulSet",
            "kubernetes:autoscaling/v2:HorizontalPodAutoscaler", "kubernetes:core/v1:Service",
            "kubernetes:monitoring.googleapis.com/v1:PodMonitoring"} <= types
    assert not [t for t in types if t.endswith(":QueuedResource") or t == "command:remote:Command"]
    assert gke_json["outputs"]["apiKey"] == "[secret]"
    assert "mock-generated-api-key" not in json.dumps(gke_json)


def test_the_text_plan_shows_the_pools_flex_start_fields_and_the_costs(gke_json):
    text = render_text(gke_json)  # what `--stack gke` without --json prints
    assert "gcp:container/nodePool:NodePool  tpu-pool" in text
    assert '"flexStart": true' in text and '"maxRunDuration": "86400s"' in text
    assert '"locationPolicy": "ANY"' in text and '"tpuTopology": "1x1"' in text
    assert "gke_cost_per_hour_usd_at_max_replicas: 2.5754" in text
    assert "vllm serve google/gemma-4-E2B-it" in text


def test_the_readme_lists_every_gke_output_and_no_other(gke_json):
    from tests.readme_tables import documented_outputs

    assert documented_outputs("gke") == set(gke_json["outputs"])
