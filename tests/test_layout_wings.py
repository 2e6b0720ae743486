"""The planned layout as both wings deploy it: one value (Settings.tensor_parallel_size x data_parallel_size, from
components/sizing/layouts.py) read by the serve command, the KV outputs and guidance, the dashboard and the alerts."""

from __future__ import annotations

import json
from pathlib import Path

from components import settings
from components.monitoring import alerts, promql
from components.serving import serve_command
from components.vm.deployment import monitoring_scope

ROOT = Path(__file__).resolve().parent.parent
SSH = {"access": {"sshSourceRanges": ["198.51.100.7/32"]}}
V5E_8 = {"tpu": {"acceleratorType": "v5litepod-8"}}


def loaded(**sections) -> settings.Settings:
    return settings.load({**SSH, **sections}, "my-proj", "dev").settings


def flag(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def test_eight_replicas_reach_the_serve_command_and_the_kv_budget():
    cfg = loaded(**V5E_8, vllm={"dataParallelSize": 8})
    args = serve_command.vllm_serve_args(cfg)
    assert (flag(args, "--tensor-parallel-size"), flag(args, "--data-parallel-size")) == ("1", "8")
    kv = cfg.kv_budget()
    assert (kv.replicas, kv.kv_tokens, kv.kv_blocks) == (8, 8 * 321_344, 8 * 5_021)
    assert kv.load_limit_tokens == int(8 * 321_344 * 0.78)
    assert "8 data-parallel replicas of 321,344 tokens each behind the one endpoint" in kv.replicas_clause


def test_one_chip_renders_no_data_parallel_flag_and_no_clause():
    cfg = loaded()
    args = serve_command.vllm_serve_args(cfg)
    assert "--data-parallel-size" not in args and flag(args, "--tensor-parallel-size") == "1"
    assert cfg.kv_budget().replicas == 1 and cfg.kv_budget().replicas_clause == ""


def test_the_tiles_and_alerts_split_by_engine_only_for_several():
    cfg = loaded(**V5E_8, vllm={"dataParallelSize": 8})
    several = monitoring_scope("dev", "tpu-vllm-dev", cfg.tpu, cfg.cache, cfg.kv_budget(), engines=8)
    one = monitoring_scope("dev", "tpu-vllm-dev", cfg.tpu, cfg.cache, cfg.kv_budget())
    assert promql.kv_usage(several).startswith("max by (engine) (vllm:kv_cache_usage_perc{")
    assert promql.kv_usage(one).startswith("max (vllm:kv_cache_usage_perc{")
    assert any("8 data-parallel replicas of 1 chip(s)" in note for note in several.notes)
    kv_rule = next(rule for rule in alerts.rules(several, kv_for_seconds=60, waiting_for_seconds=60,
                                                 run_end_warning_seconds=600) if rule.key == "kv")
    assert "by (engine)" in kv_rule.query  # any one replica past the wall fires, not the host's average
    gke_scope = promql.Scope("t", {"job": "x"}, None, True, 1.0, engines=4)
    assert promql.output_tokens_per_second(gke_scope).startswith("sum by (instance, engine) (rate(")


def test_the_golden_gke_pod_takes_the_node_and_runs_eight_engines():
    plan = (ROOT / "tests" / "golden" / "dpv5e8gke.json").read_text()
    assert '"google.com/tpu": "8"' in plan
    assert "--data-parallel-size 8" in plan or '"--data-parallel-size", "8"' in plan
    vm_plan = json.loads((ROOT / "tests" / "golden" / "dpv5e8.json").read_text())
    assert "--data-parallel-size" in json.dumps(vm_plan)


def test_the_plan_diff_names_a_layout_change():
    from tools.plan.diff import render_diff

    base = json.loads((ROOT / "tests" / "golden" / "dpv5e8.json").read_text())
    head = json.loads(json.dumps(base))
    head["budget"].update(tensor_parallel_size=1, data_parallel_size=8)
    text = render_diff(base, head)
    assert "data_parallel_size: 4 -> 8 (+4)" in text and "tensor_parallel_size: 2 -> 1 (-1)" in text
    assert render_diff(base, json.loads(json.dumps(base))).count("data_parallel_size") == 0


def test_a_pool_borrowed_from_a_one_chip_boot_says_so():
    loaded_v6e = settings.load({**SSH, "tpu": {"zone": "us-east5-a", "acceleratorType": "v6e-8"}}, "my-proj", "dev")
    warning = next(str(finding) for finding in loaded_v6e.warnings if "nobody has measured" in str(finding))
    assert "9,213,952-token KV pool is 8 x the v6e-1 boot's 1,151,744 (measured there" in warning
    loaded_v5e = settings.load({**SSH, **V5E_8}, "my-proj", "dev")
    warning = next(str(finding) for finding in loaded_v5e.warnings if "nobody has measured" in str(finding))
    assert "computed by tpu-inference's rules" in warning  # tensor-parallel 2: no 2-chip v5e boot to borrow
