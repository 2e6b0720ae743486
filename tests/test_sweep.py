"""tools.sweep end to end through the Automation API's own seam (a fake PulumiCommand, tests/fakes/pulumi_cli.py)
and the vLLM-like fake server: the dry run, the order and node reuse, an interruption in each phase, resume, the
comparison. Cells are tiny (one context, 1 and 2 clients, one request each, 4 tokens): the runs are quick."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from pulumi.automation import LocalWorkspace, Stack
from pulumi.automation.errors import StackNotFoundError

from dev.fake_openai_server import FakeOpenAIServer, FakeTiming
from tests.fakes.pulumi_cli import FakePulumiCli
from tools.sweep import cli, compare, config_paths, estimate, runner, stack_ops
from tools.sweep.sweep_file import SweepFileError, read

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "sweeps" / "log-arms.yaml"
TTFT, TPOT = 0.02, 0.004
TINY_CELLS = {"contexts": [128], "clients": [1, 2], "reps": 1, "requestsPerClient": 1, "outputTokens": 4}


@pytest.fixture(scope="module")
def server():
    fake = FakeOpenAIServer(FakeTiming(ttft=TTFT, tpot=TPOT)).start_in_thread()
    yield fake
    fake.stop()


@pytest.fixture
def no_plots(monkeypatch):
    """Plots cost a few hundred ms of CPU each; one test keeps them (the comparison's), the rest skip them."""
    monkeypatch.setattr("tools.bench.report.plot", lambda *args, **kwargs: None)
    monkeypatch.setattr(compare, "_plot", lambda rows, out: [])


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    document = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    document["config"]["gcp:project"] = "sweep-test-project"
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump(document))
    return tmp_path


def base_stack(project: Path) -> dict:
    return dict(yaml.safe_load((project / "Pulumi.dev.yaml").read_text())["config"])


def write_sweep(project: Path, arms: dict, **limits) -> Path:
    path = project / "sweep.yaml"
    path.write_text(yaml.safe_dump({
        "base": "dev", "arms": arms, "cells": TINY_CELLS,
        "limits": {"maxSpendUsd": 20, "maxDuration": "8h", "atEnd": "destroy", **limits}}, sort_keys=False))
    return path


FOUR_ARMS = {
    "base": {},
    "ngram": {"vllm": {"speculativeConfig": {"method": "ngram"}}},
    "longer-run": {"tpu": {"maxRunDuration": "5h"}},
    "precompile-8": {"tpuInference": {"numPrecompileWorkers": 8}},
}


def run_sweep(project, sweep, fake, server, *extra, ticker=None):
    return cli.main([str(sweep), "--project-dir", str(project), "--out", str(project / "out"), *extra],
                    pulumi_command=fake, tunnel=lambda outputs: runner.no_tunnel(server.url, "key"), ticker=ticker)


# ---- the sweep file and the dry run ----

def test_dry_run_of_the_shipped_sweep_needs_no_cli(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # no `pulumi` anywhere: PulumiCommand() would fail
    assert cli.main([str(SHIPPED), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^ 1  base +1 \(new\) +cold", out, re.M)
    assert re.search(r"^ 2  precompile-8 +1 \(reused\) +warm", out, re.M)  # serving-only variable: same compile key
    assert "total" in out and "refused" not in out
    # Each figure says measured, computed, estimated or assumed, and only the base's compile's boot was measured.
    assert "node up: not measured; 223 s assumed" in out
    assert "boot of arm(s) 3 ngram, 4 padding-gap-128, 5 text-only: estimate from the log's base boot" in out
    assert "whether the wait bills is not documented" in out and "bills nothing" not in out
    # docs/arms.md shows this very table.
    table = "\n".join(out.splitlines()[2:9])
    assert table in (ROOT / "docs" / "arms.md").read_text()


def test_the_shipped_layout_sweep_measures_four_layouts_on_one_node(monkeypatch, tmp_path, capsys):
    shipped = ROOT / "sweeps" / "layouts-v5e-8.yaml"
    monkeypatch.setenv("PATH", str(tmp_path))
    assert cli.main([str(shipped), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^ 1  dp8 +1 \(new\) +cold", out, re.M)
    for number, name in ((2, "tp2-dp4"), (3, "tp4-dp2"), (4, "tp8")):  # a layout is a serving-step change
        assert re.search(rf"^ {number}  {name} +1 \(reused\) +cold", out, re.M), name
    sweep = read(shipped, ROOT)
    layouts = {arm.name: (arm.loaded.settings.tensor_parallel_size, arm.loaded.settings.data_parallel_size)
               for arm in sweep.arms}
    assert layouts == {"dp8": (1, 8), "tp2-dp4": (2, 4), "tp4-dp2": (4, 2), "tp8": (8, 1)}


def test_dry_run_refuses_a_sweep_over_its_spend_limit(project, capsys):
    sweep = write_sweep(project, FOUR_ARMS, maxSpendUsd=0.05)
    fake = FakePulumiCli({})
    assert run_sweep(project, sweep, fake, None, "--dry-run") == 2
    assert "limits.maxSpendUsd = 0.05: the sweep is expected to spend" in capsys.readouterr().out
    assert fake.calls == []


def test_dry_run_refuses_a_node_past_its_run_end(project, capsys):
    cells = {**TINY_CELLS, "contexts": [128, 1024, 8192], "clients": [1, 4, 16, 64], "reps": 3,
             "requestsPerClient": 4, "outputTokens": 128}
    hour = {"maxRunDuration": "1h"}
    sweep = write_sweep(project, {"base": {"tpu": hour}, "ngram": {"tpu": hour, **FOUR_ARMS["ngram"]},
                                  "precompile-8": {"tpu": hour, **FOUR_ARMS["precompile-8"]}})
    document = yaml.safe_load(sweep.read_text())
    document["cells"] = cells
    sweep.write_text(yaml.safe_dump(document))
    assert cli.main([str(sweep), "--project-dir", str(project), "--dry-run"]) == 2
    assert "past its run end (tpu-vllm:tpu.maxRunDuration = 1h)" in capsys.readouterr().out


def test_an_arm_is_checked_by_the_settings_package_before_anything_starts(project, capsys):
    sweep = write_sweep(project, {"base": {}, "bad": {"vllm": {"maxNumBatchedTokens": "lots"}},
                                  "secret": {"hfToken": "hf_x"}})
    fake = FakePulumiCli({})
    assert run_sweep(project, sweep, fake, None) == 2
    err = capsys.readouterr().err
    assert 'arms.bad: tpu-vllm:vllm.maxNumBatchedTokens = "lots": must be a whole number' in err
    assert "arms.secret: tpu-vllm:hfToken: a secret" in err
    assert fake.calls == []


def test_a_value_the_cli_would_store_as_another_type_is_refused(project):
    sweep = write_sweep(project, {"odd": {"vllm": {"served": "true"}}})
    with pytest.raises(SweepFileError, match="stores as bool"):
        read(sweep, project)


# ---- the run ----

def test_order_node_reuse_and_nothing_left_billing(no_plots, project, server, capsys):
    fake = FakePulumiCli({"dev": base_stack(project)})
    sweep = write_sweep(project, FOUR_ARMS)
    assert run_sweep(project, sweep, fake, server) == 0
    err = capsys.readouterr().err
    # Node 1 runs base, then precompile-8 (same compile key: warm), then ngram; the run-duration arm gets node 2.
    order = [line.split("(")[1].split(")")[0] for line in err.splitlines() if "] config," in line]
    assert order == ["base", "precompile-8", "ngram", "longer-run"]
    nodes = [item for item in fake.ledger if item["kind"] == "node"]
    assert len(nodes) == 2
    assert [run["node"] for run in fake.serving_runs] == [nodes[0]["serial"]] * 3 + [nodes[1]["serial"]]
    ngram, longer = fake.serving_runs[2], fake.serving_runs[3]
    assert ngram["vllm"]["speculativeConfig"] == {"method": "ngram"}
    assert "speculativeConfig" not in longer["vllm"] and "numPrecompileWorkers" not in (longer["tpuInference"] or {})
    assert nodes[1]["config"]["tpu-vllm:tpu"]["maxRunDuration"] == "5h"
    assert fake.billing() == [] and "dev-sweep" not in fake.stacks
    assert "nothing of the sweep is left billing" in err
    events = [json.loads(line) for line in (project / "out" / "01-base" / "events.jsonl").read_text().splitlines()]
    kinds = [event.get("kind") for event in events]
    assert {"prelude_event", "resource_pre_event", "summary_event", "cancel_event"} <= set(kinds)
    # The comparison is made of exactly what tools.bench recorded for each arm.
    table = json.loads((project / "out" / "comparison.json").read_text())
    assert [row["arm"] for row in table["rows"]] == [a for a in order for _ in range(2)]
    bench = json.loads((project / "out" / "03-ngram" / "bench.json").read_text())
    assert [row["output_tok_s"] for row in table["rows"] if row["arm"] == "ngram"] == \
        [cell["aggregate_tok_s"] for cell in bench["cells"]]


def test_the_comparisons_figures_against_a_server_with_known_latencies(project, server):
    fake = FakePulumiCli({"dev": base_stack(project)})
    sweep = write_sweep(project, {"base": {}})
    assert run_sweep(project, sweep, fake, server) == 0
    rows = json.loads((project / "out" / "comparison.json").read_text())["rows"]
    assert (project / "out" / "comparison.png").stat().st_size and (project / "out" / "01-base" / "bench.png").is_file()
    usd = estimate.plan(read(sweep, project)).arms[0].usd_per_hour
    for row in rows:
        # Causal bounds: the server waits TTFT before the first token and TPOT between tokens, so no request is
        # faster than TTFT + 3 x TPOT; with at most 2 requests a cell, p99 (nearest rank) is the slowest one's.
        assert row["ttft_p50_ms"] >= TTFT * 1000 and row["ttft_p99_ms"] >= row["ttft_p50_ms"]
        assert row["ttft_p99_ms"] + 3 * row["tpot_p99_ms"] >= (TTFT + 3 * TPOT) * 1000
        # Not > 0: on a loaded machine the client may read several tokens in one read, stamped alike (the causal
        # bound above still holds then, TTFT counting the wait).
        assert row["tpot_p99_ms"] >= row["tpot_p50_ms"] >= 0
        assert row["usd_per_million"] == pytest.approx(usd / (row["output_tok_s"] * 3600) * 1e6)


def test_the_winner_is_judged_at_equal_ttft(tmp_path):
    def cell(context, clients, rate, ttfts, tpots):
        return {"context": context, "clients": clients, "status": "ok", "aggregate_tok_s": rate,
                "reps": [{"ttft_ms": ttfts, "tpot_ms": tpots}]}
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"cells": [
        cell(128, 64, 1600.0, [240.0, 250.0, 246.0], [20.0, 40.0, 30.0]),   # faster, TTFT within the log's 247.3
        cell(128, 128, 2400.0, [900.0] * 3, [10.0] * 3)]}))                  # fastest, but TTFT far worse
    rows = compare.rows_of("arm", path, usd_per_hour=0.6)
    assert (rows[0].ttft_p50_ms, rows[0].ttft_p99_ms, rows[0].tpot_p50_ms, rows[0].tpot_p99_ms) == (
        246.0, 250.0, 30.0, 40.0)
    assert rows[0].usd_per_million == pytest.approx(0.6 / (1600 * 3600) * 1e6)
    assert compare.winner(rows) == rows[0]
    assert "1.07x the log's best cell: 1,496.5 tok/s at 128 x 64" in compare.verdict(rows)
    slow = [compare.Row("a", 128, 64, 100.0, 300.0, 300.0, 1.0, 1.0, 1.0)]
    assert compare.winner(slow) is None


@pytest.fixture
def short_graces(monkeypatch):
    """The CLI's graces, short: the held `up` (a queued-resource create in flight) ignores its first signal."""
    monkeypatch.setattr(runner, "CANCEL_GRACE_S", 0.3)
    monkeypatch.setattr(runner, "TERMINATE_GRACE_S", 2.0, raising=False)  # new in the fix


@pytest.mark.parametrize("phase", ["config", "up", "tunnel", "health", "cells"])
def test_an_interruption_in_each_phase_ends_in_a_destroy(project, server, capsys, short_graces, phase):
    fake = FakePulumiCli({"dev": base_stack(project)}, hold_up=(phase == "up"))

    def ticker(now):
        if now == phase and (phase != "up" or fake.up_in_flight.is_set()):
            fake.interrupt()  # the terminal's SIGINT reaches the CLI too
            raise KeyboardInterrupt

    sweep = write_sweep(project, {"base": {}})
    assert run_sweep(project, sweep, fake, server, ticker=ticker) == 130
    err = capsys.readouterr().err
    assert f"sweep stopped in phase {phase}: interrupted (Ctrl-C)" in err
    assert fake.billing() == []
    if phase == "up":
        # The create in flight outlives the first ^C (the dynamic provider ignores Cancel); the second signal
        # terminates the CLI, its provider host dies, and the create watchdog deletes the request.
        assert "the Pulumi CLI got the same Ctrl-C and is cancelling its update" in err
        assert "sending it SIGTERM, its second signal" in err
        assert not any("cancel" in call for call in fake.calls)  # the CLI ended by itself: no lock left
        assert [item["kind"] for item in fake.cleared_pending_creates] == ["node"]
        assert "CHECK: the update was stopped while it created urn:pulumi:sweep::tpu-vllm::" \
               "pulumi-python:dynamic/tpu-vllm:QueuedResource::tpu-qr" in err
    if phase == "config":
        assert "nothing was deployed" in err and not fake.ledger
    else:
        assert "destroyed stack dev-sweep" in err
    assert "dev-sweep" not in fake.stacks


def test_an_error_while_up_runs_stops_the_cli_then_destroys(project, server, capsys, short_graces):
    """`pulumi cancel` would not stop it (DIY: it deletes the lock; the fake's cancel is DIY's): the sweep signals
    the `pulumi up` process itself, SIGINT then SIGTERM."""
    fake = FakePulumiCli({"dev": base_stack(project)}, hold_up=True)

    def ticker(now):
        if now == "up" and fake.up_in_flight.is_set():
            raise runner.LimitError("limits.maxDuration = 4h: reached")

    assert run_sweep(project, write_sweep(project, {"base": {}}), fake, server, ticker=ticker) == 1
    err = capsys.readouterr().err
    assert "sweep stopped in phase up: LimitError: limits.maxDuration = 4h: reached" in err
    assert "sent the Pulumi CLI SIGINT" in err and "sending it SIGTERM" in err
    assert not any("cancel" in call for call in fake.calls)
    refresh = next(call for call in fake.calls if "refresh" in call)
    assert {"--yes", "--clear-pending-creates"} <= set(refresh) and refresh[refresh.index("--stack") + 1] == "dev-sweep"
    assert "destroyed stack dev-sweep" in err
    assert fake.billing() == [] and "dev-sweep" not in fake.stacks


def test_a_cli_that_ignores_its_signals_is_killed_and_its_lock_cleared_after_it_is_gone(project, server, capsys,
                                                                                     short_graces, monkeypatch):
    monkeypatch.setattr(runner, "TERMINATE_GRACE_S", 0.3, raising=False)  # new in the fix
    fake = FakePulumiCli({"dev": base_stack(project)}, hold_up=True)
    fake.ignores_signals = True

    def ticker(now):
        if now == "up" and fake.up_in_flight.is_set():
            raise runner.LimitError("limits.maxDuration = 4h: reached")

    assert run_sweep(project, write_sweep(project, {"base": {}}), fake, server, ticker=ticker) == 1
    err = capsys.readouterr().err
    assert "killing it and its plugins (SIGKILL)" in err
    assert ["--non-interactive", "cancel", "--yes", "--stack", "dev-sweep"] in fake.calls
    assert not fake.cancelled_while_up_ran  # never beside a running update
    assert "cleared the killed update's lock (pulumi cancel)" in err and "destroyed stack dev-sweep" in err
    assert fake.billing() == []


def test_a_ctrl_c_that_never_reached_the_cli_still_ends_it_without_a_kill(project, server, capsys, short_graces):
    """A SIGINT sent to the sweep alone: the CLI's first signal is the sweep's SIGTERM, so a second one terminates it
    (cancellation_scope.go), and nothing needs SIGKILL or `pulumi cancel`."""
    fake = FakePulumiCli({"dev": base_stack(project)}, hold_up=True)

    def ticker(now):
        if now == "up" and fake.up_in_flight.is_set():
            raise KeyboardInterrupt  # and fake.interrupt() is not called

    assert run_sweep(project, write_sweep(project, {"base": {}}), fake, server, ticker=ticker) == 130
    err = capsys.readouterr().err
    assert "sending it SIGTERM again" in err and "SIGKILL" not in err
    assert not any("cancel" in call for call in fake.calls)
    assert "destroyed stack dev-sweep" in err and fake.billing() == []


def test_a_create_watchdog_that_failed_is_named_with_its_delete_command(project, server, capsys, short_graces):
    """destroy skips a pending create (snapshot.go) and refresh --clear-pending-creates only forgets it: if the
    watchdog could not delete the request, the node bills, and the sweep says which and how to delete it."""
    fake = FakePulumiCli({"dev": base_stack(project)}, hold_up=True, watchdog_works=False)

    def ticker(now):
        if now == "up" and fake.up_in_flight.is_set():
            fake.interrupt()
            raise KeyboardInterrupt

    assert run_sweep(project, write_sweep(project, {"base": {}}), fake, server, ticker=ticker) == 130
    err = capsys.readouterr().err
    assert [bill.split("#")[0] for bill in fake.billing()] == ["node"]
    assert "nothing of the sweep is left billing" not in err
    assert ("gcloud alpha compute tpus queued-resources delete tpu-vllm-dev-sweep --project=sweep-test-project "
            "--zone=") in err


def test_an_error_in_up_ends_in_a_destroy(project, server, capsys):
    fake = FakePulumiCli({"dev": base_stack(project)}, fail_up="googleapi: Error 429: quota exceeded")
    assert run_sweep(project, write_sweep(project, {"base": {}}), fake, server) == 1
    err = capsys.readouterr().err
    assert "CommandError" in err and "destroyed stack dev-sweep" in err
    assert fake.billing() == []


def ctrl_c_at_second_cells():
    """A ticker that presses Ctrl-C when the sweep enters its cells the second time (the second arm's)."""
    seen = []

    def ticker(now):
        seen.append(now)
        if now == "cells" and seen.count("cells") == 2:
            raise KeyboardInterrupt
    return ticker


def ctrl_c_in(*phases: str):
    """A ticker that presses Ctrl-C whenever the sweep enters one of these phases (twice: the cells, then its
    own clean-up)."""
    def ticker(now):
        if now in phases:
            raise KeyboardInterrupt
    return ticker


def test_a_second_ctrl_c_says_what_is_left_and_how_to_remove_it(project, server, capsys):
    fake = FakePulumiCli({"dev": base_stack(project)})
    assert run_sweep(project, write_sweep(project, {"base": {}}), fake, server,
                     ticker=ctrl_c_in("cells", "destroy")) == 130
    err = capsys.readouterr().err
    assert "LEFT BEHIND: stack dev-sweep" in err
    assert f"pulumi destroy --yes --stack dev-sweep --cwd {project}" in err
    assert fake.billing()  # the fake's node really is left: the message is not a formality


def test_resume_goes_on_after_the_last_finished_arm(no_plots, project, server, capsys):
    fake = FakePulumiCli({"dev": base_stack(project)})
    sweep = write_sweep(project, {"base": {}, "ngram": FOUR_ARMS["ngram"]})
    assert run_sweep(project, sweep, fake, server, ticker=ctrl_c_at_second_cells()) == 130
    assert fake.billing() == []
    runs_before = len(fake.serving_runs)
    assert run_sweep(project, sweep, fake, server, "--resume") == 0
    assert "resuming after base" in capsys.readouterr().err
    resumed = fake.serving_runs[runs_before:]
    assert len(resumed) == 1 and resumed[0]["vllm"]["speculativeConfig"] == {"method": "ngram"}
    rows = json.loads((project / "out" / "comparison.json").read_text())["rows"]
    assert {row["arm"] for row in rows} == {"base", "ngram"}
    assert fake.billing() == []


def test_keep_best_leaves_the_winners_configuration_up_and_says_how_to_remove_it(no_plots, project, server, capsys):
    fake = FakePulumiCli({"dev": base_stack(project)})
    sweep = write_sweep(project, {"base": {}, "ngram": FOUR_ARMS["ngram"]}, atEnd="keep-best")
    assert run_sweep(project, sweep, fake, server) == 0
    winner = json.loads((project / "out" / "comparison.json").read_text())["winner"]["arm"]
    err = capsys.readouterr().err
    assert f"left up on purpose (limits.atEnd = keep-best): stack dev-sweep serves {winner}'s configuration" in err
    assert f"pulumi destroy --yes --stack dev-sweep --cwd {project}" in err
    vllm = fake.stacks["dev-sweep"].config["tpu-vllm:vllm"]
    assert ("speculativeConfig" in vllm) == (winner == "ngram")
    assert len(fake.billing()) == 2  # its node and its cache disk, on purpose


def test_without_a_cli_the_run_says_how_to_get_the_pinned_one(project, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(project))  # no `pulumi` here: PulumiCommand's `pulumi version` fails
    sweep = write_sweep(project, {"base": {}})
    assert cli.main([str(sweep), "--project-dir", str(project), "--out", str(project / "out")]) == 2
    err = capsys.readouterr().err
    assert "the sweep needs the Pulumi CLI 3.272.0 or a later 3.x (FileNotFoundError" in err
    assert "--install-cli" in err and "Nothing was started" in err


def test_a_cli_that_is_not_logged_in_stops_the_sweep_before_anything_is_made(project, server, capsys):
    fake = FakePulumiCli({"dev": base_stack(project)}, logged_out=True)
    assert run_sweep(project, write_sweep(project, {"base": {}}), fake, server) == 2
    err = capsys.readouterr().err
    assert "the Pulumi CLI refused to open stack dev-sweep: error: PULUMI_ACCESS_TOKEN must be set" in err
    assert "Traceback" not in err and not fake.ledger


def test_an_arm_that_would_outlive_its_nodes_run_end_stops_the_sweep(no_plots, project, server, capsys,
                                                                      monkeypatch):
    fake = FakePulumiCli({"dev": base_stack(project)})
    first_done = project / "out" / "01-base" / "bench.json"  # the clock stands still until arm 1 measured, then
    monkeypatch.setattr(runner, "clock", lambda: 3 * 3600 + 55 * 60 if first_done.exists() else 0.0)  # +3h55m
    sweep = write_sweep(project, {"base": {}, "precompile-8": FOUR_ARMS["precompile-8"]})
    assert run_sweep(project, sweep, fake, server) == 1
    err = capsys.readouterr().err
    assert "arm precompile-8 would run past node 1's run end: it has run 235 min of its 4h" in err
    assert len(fake.serving_runs) == 1 and fake.billing() == []


def test_a_fresh_run_refuses_a_stack_left_by_another_sweep(project, server, capsys):
    fake = FakePulumiCli({"dev": base_stack(project), "dev-sweep": {}},
                         tags={"dev-sweep": {"tpu-vllm:sweep": "0" * 32}})
    assert run_sweep(project, write_sweep(project, {"base": {}}), fake, server) == 2
    assert "stack dev-sweep already exists" in capsys.readouterr().err


# ---- the SDK's behaviours the sweep relies on (docs/development.md, outside contracts) ----

def test_config_set_by_path_round_trips_through_the_settings(project):
    fake = FakePulumiCli({"dev": base_stack(project), "s": {}})
    workspace = LocalWorkspace(work_dir=str(project), pulumi_command=fake)
    stack = Stack.select("s", workspace)
    arm = {"vllm": {"gpuMemoryUtilization": 0.9, "maxNumBatchedTokens": 8192, "enablePrefixCaching": False}}
    to_set, _ = config_paths.changes({}, arm)
    stack.set_all_config({key: __import__("pulumi.automation", fromlist=["ConfigValue"]).ConfigValue(value)
                          for key, value in to_set.items()}, path=True)
    assert fake.stacks["s"].config["tpu-vllm:vllm"] == {
        "gpuMemoryUtilization": "0.9", "maxNumBatchedTokens": 8192, "enablePrefixCaching": False}
    assert config_paths.stored_as("0.9") == "0.9" and config_paths.stored_as("8192") == 8192


def test_the_sdk_reads_the_fakes_answers(project):
    fake = FakePulumiCli({"dev": base_stack(project)})
    workspace = LocalWorkspace(work_dir=str(project), pulumi_command=fake)
    with pytest.raises(StackNotFoundError):
        Stack.select("missing", workspace)
    assert workspace.pulumi_version == "3.272.0"


def test_the_pinned_cli_is_the_sdks_release_and_meets_the_project(project):
    pinned = re.search(r"^pulumi==(\S+)$", (ROOT / "requirements.txt").read_text(), re.M).group(1)
    assert stack_ops.PULUMI_CLI_VERSION == pinned
    preview = (ROOT / ".github" / "workflows" / "preview.yml").read_text()
    assert f'pulumi-version: "{pinned}"' in preview
    required = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["requiredPulumiVersion"]
    minimum = tuple(int(part) for part in required.removeprefix(">=").split("."))
    assert tuple(int(part) for part in pinned.split(".")) >= minimum


def _golden_node_body(name: str) -> str:
    """The queued resource's inputs in a golden plan (tests/golden), with the stack's and project's names taken out."""
    plan = json.loads((ROOT / "tests" / "golden" / f"{name}.json").read_text())
    inputs = next(r["inputs"] for r in plan["resources"] if r["type"].endswith(":QueuedResource"))
    text = json.dumps(inputs, sort_keys=True)
    text = re.sub(rf"tpu-vllm-{name}\b", "tpu-vllm-STACK", text).replace(f'"stack": "{name}"', '"stack": "STACK"')
    return text.replace("PLACEHOLDER-set-gcp-project", "PROJECT").replace("golden-project", "PROJECT")


def _golden_settings(name: str):
    from tools.sweep.sweep_file import _base_config

    folder = ROOT if name == "dev" else ROOT / "tests" / "golden" / "stacks"
    raw, _, secret = _base_config(folder, name, "golden")
    from components.settings.loading import load
    return load(raw, project="golden-project", stack=name, secret_keys=secret).settings


def test_an_arm_the_sweep_runs_on_the_same_node_leaves_the_nodes_request_as_it_was():
    """The real program's plans (the golden ones) hold the node rule: stacks whose settings differ only outside
    estimate.NODE_KEYS send the very same queued-resource body; spot (the tpu section) does not."""
    dev = estimate.node_key(_golden_settings("dev"))
    same_node = [name for name in ("arms", "textonly", "spot") if estimate.node_key(_golden_settings(name)) == dev]
    assert same_node == ["arms", "textonly"]
    for name in same_node:
        assert _golden_node_body(name) == _golden_node_body("dev"), name
    assert _golden_node_body("spot") != _golden_node_body("dev")


def test_cells_default_to_the_logs_12_and_a_bad_limit_names_itself(project):
    path = project / "plain.yaml"
    path.write_text("base: dev\narms: {base: {}}\nlimits: {maxSpendUsd: 3, maxDuration: 4h}\n")
    sweep = read(path, project)
    assert (sweep.cells.contexts, sweep.cells.clients, sweep.cells.reps) == ([128, 1024, 8192], [1, 4, 16, 64], 3)
    assert sweep.limits.at_end == "destroy" and sweep.stack == "dev-sweep"
    path.write_text("base: dev\narms: {base: {}}\nlimits: {maxSpendUsd: 3, maxDuration: forever, atEnd: keep}\n")
    with pytest.raises(SweepFileError) as raised:
        read(path, project)
    assert f'{path}: limits.maxDuration = "forever": cannot read \'forever\' as a duration' in str(raised.value)
    assert f"{path}: limits.atEnd = \"keep\": Input should be 'destroy', 'keep-best' or 'restore-base'" in str(
        raised.value)


def test_every_event_the_fake_sends_is_one_the_sdks_event_classes_read():
    from pulumi.automation.events import EngineEvent, OpType

    from tests.fakes.pulumi_cli import EventSink

    sink = EventSink(None)
    sink.send({"preludeEvent": {"config": {"tpu-vllm:vllm": "{}"}}})
    sink.step("replace", "tpu-vllm:tpu:TpuNode", "tpu")
    sink.send({"diagnosticEvent": {"message": "update canceled", "severity": "error", "color": "never"}})
    sink.send({"summaryEvent": {"maybeCorrupt": False, "durationSeconds": 1, "resourceChanges": {"replace": 1},
                                "PolicyPacks": {}}})
    sink.close()
    parsed = [EngineEvent.from_json(json.loads(json.dumps(event))) for event in sink.sent]
    assert parsed[0].prelude_event.config == {"tpu-vllm:vllm": "{}"}
    assert parsed[1].resource_pre_event.metadata.op is OpType.REPLACE
    assert parsed[2].res_outputs_event.metadata.type == "tpu-vllm:tpu:TpuNode"
    assert parsed[3].diagnostic_event.severity == "error"
    assert parsed[4].summary_event.resource_changes == {"replace": 1}
    assert parsed[-1].cancel_event is not None and [e.sequence for e in parsed] == [1, 2, 3, 4, 5, 6]


# ---- the second reader's findings (docs/development.md outside contracts) ----

def _with_base(project, **tpu_and_cache):
    document = yaml.safe_load((project / "Pulumi.dev.yaml").read_text())
    for section, values in tpu_and_cache.items():
        document["config"][f"tpu-vllm:{section}"].update(values)
        for key in [key for key, value in values.items() if value is None]:
            document["config"][f"tpu-vllm:{section}"].pop(key)
    (project / "Pulumi.dev.yaml").write_text(yaml.safe_dump(document))


def test_a_base_that_keeps_its_cache_disk_does_not_keep_the_sweeps(no_plots, project, server, capsys):
    """retainOnDelete (components/vm/cache_disk.py `retain_on_delete=args.keep_on_destroy`): destroy would leave the
    disk billing, so the sweep's stack sets cache.keepOnDestroy false and says so; an arm may not set it."""
    _with_base(project, cache={"keepOnDestroy": True})
    fake = FakePulumiCli({"dev": base_stack(project)})
    assert run_sweep(project, write_sweep(project, {"base": {}}), fake, server) == 0
    err = capsys.readouterr().err
    assert "the sweep's stack dev-sweep sets it false, so its destroy deletes its cache disk" in err
    assert "nothing of the sweep is left billing" in err and fake.billing() == []
    with pytest.raises(SweepFileError, match="tpu-vllm:cache.keepOnDestroy: the sweep's stack never keeps"):
        read(write_sweep(project, {"kept": {"cache": {"keepOnDestroy": True}}}), project)


def test_the_fake_keeps_a_retained_disk_as_the_cli_does(project):
    fake = FakePulumiCli({"s": {"tpu-vllm:cache": {"keepOnDestroy": True}}})
    workspace = LocalWorkspace(work_dir=str(project), pulumi_command=fake)
    stack = Stack.select("s", workspace)
    stack.up()
    stack.destroy()
    assert [bill.split("#")[0] for bill in fake.billing()] == ["disk"]


def test_a_list_that_shrinks_by_two_is_the_arms_list(project):
    """config rm-all removes its keys one by one and a removed element shifts the later ones down (config.go rm-all,
    object.go Delete); the fake's _remove_path does the same."""
    base = {"access": {"sshSourceRanges": ["1.1.1.1/32", "2.2.2.2/32", "3.3.3.3/32"]}}
    arm = {"access": {"sshSourceRanges": ["9.9.9.9/32"]}}
    ranges = list(base["access"]["sshSourceRanges"])
    fake = FakePulumiCli({"dev": {}, "s": {"tpu-vllm:access": {"sshSourceRanges": ranges}}},
                         tags={"s": {"tpu-vllm:sweep": "a" * 32}})
    stack = stack_ops.SweepStack(project, "dev", "s", fake)
    stack.open(resume=True, mark="a" * 32)
    stack.apply(*config_paths.changes(base, arm))
    assert fake.stacks["s"].config["tpu-vllm:access"]["sshSourceRanges"] == ["9.9.9.9/32"]
    stack.apply(*config_paths.changes(arm, base))  # and growing back
    assert fake.stacks["s"].config["tpu-vllm:access"]["sshSourceRanges"] == base["access"]["sshSourceRanges"]


def test_a_base_stack_missing_from_the_backend_leaves_no_stack_behind(project, server, capsys):
    fake = FakePulumiCli({})
    assert run_sweep(project, write_sweep(project, {"base": {}}), fake, server) == 2
    err = capsys.readouterr().err
    assert "error: no stack named 'dev' found" in err and "Nothing was started" in err
    assert "dev-sweep" not in fake.stacks and not fake.ledger


def test_the_fake_answers_config_copy_of_a_missing_stack_as_the_cli_does(project):
    fake = FakePulumiCli({"s": {}})
    workspace = LocalWorkspace(work_dir=str(project), pulumi_command=fake)
    with pytest.raises(StackNotFoundError) as raised:
        workspace.cli_api.config_copy(stack="dev", dest="s", cwd=str(project), additional_env={})
    assert "code: 6" in str(raised.value)


@pytest.mark.parametrize("model", ["spot", "flex-start"])
def test_left_behind_says_until_when_the_node_bills_by_its_provisioning_model(project, server, capsys, model):
    """build-log.txt: "Spot and on-demand have no automatic stop. They bill until preempted or deleted."; a
    flex-start node is deleted at its run end."""
    if model == "spot":
        _with_base(project, tpu={"provisioningModel": "spot", "maxRunDuration": None, "queueTimeout": None})
    fake = FakePulumiCli({"dev": base_stack(project)})
    assert run_sweep(project, write_sweep(project, {"base": {}}), fake, server,
                     ticker=ctrl_c_in("cells", "destroy")) == 130
    err = capsys.readouterr().err
    assert "LEFT BEHIND" in err
    if model == "spot":
        assert "until you remove it (spot has no automatic stop)" in err and "run end" not in err
    else:
        assert "until its flex-start run end (4h after it started) or until you remove it" in err


def test_the_fakes_exit_codes_and_types_are_the_clis(project):
    """exit_codes.go ExitCodeFor: StackNotFoundError 6, an auth error 3; the node's type is the program's."""
    fake = FakePulumiCli({"dev": base_stack(project)})
    workspace = LocalWorkspace(work_dir=str(project), pulumi_command=fake)
    with pytest.raises(StackNotFoundError) as raised:
        Stack.select("missing", workspace)
    assert "code: 6" in str(raised.value)
    logged_out = LocalWorkspace(work_dir=str(project), pulumi_command=FakePulumiCli({}, logged_out=True))
    with pytest.raises(Exception) as raised:
        Stack.select("dev", logged_out)
    assert "code: 3" in str(raised.value)
    from tests.fakes.pulumi_cli import NODE_TYPE, QUEUED_RESOURCE_TYPE
    golden = {resource["type"] for resource in json.loads((ROOT / "tests" / "golden" / "dev.json").read_text())[
        "resources"]}
    assert {NODE_TYPE, QUEUED_RESOURCE_TYPE, "gcp:compute/disk:Disk", "command:remote:Command"} <= golden
