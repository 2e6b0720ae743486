"""The machinery that lets the suite pay once for a costly run: tests/shared_runs.py (one program or plan run
per request per session, across xdist workers) and tests/reused_build.py (the preview job's clone, built from
nothing once per set of build inputs)."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest

from tests import program, reused_build, shared_runs


@pytest.fixture
def own_store(tmp_path):
    """A store of this test's own, put back to the session's afterwards."""
    before = shared_runs._directory
    shared_runs.use_directory(tmp_path / "store")
    yield tmp_path / "store"
    shared_runs.use_directory(before)


def test_askers_of_one_request_at_once_compute_it_once_and_all_read_the_same(own_store):
    computed = []
    answers = []
    askers = 6
    start = threading.Barrier(askers)

    def compute():
        computed.append(1)
        # Long enough that the other askers arrive while this one computes.
        subprocess.run(["true"], check=True)
        return {"answer": len(computed)}

    def ask():
        start.wait()
        answers.append(shared_runs.once("test", {"request": 1}, compute))

    threads = [threading.Thread(target=ask) for _ in range(askers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(computed) == 1
    assert answers == [{"answer": 1}] * askers
    log = (own_store / "runs.log").read_text().split()
    assert log.count("computed") == 1 and log.count("shared") == askers - 1


def test_another_request_or_changed_sources_are_computed_again(own_store, monkeypatch):
    computed = []

    def compute():
        computed.append(1)
        return len(computed)

    assert shared_runs.once("test", {"stack": "dev"}, compute) == 1
    assert shared_runs.once("test", {"stack": "dev"}, compute) == 1
    assert shared_runs.once("test", {"stack": "gke"}, compute) == 2
    monkeypatch.setattr(shared_runs, "source_digest", lambda: "a program edited since")
    assert shared_runs.once("test", {"stack": "dev"}, compute) == 3
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "another environment")
    assert shared_runs.once("test", {"stack": "dev"}, compute) == 4


def test_the_key_covers_the_program_and_the_plan_tool():
    covered = {path.relative_to(shared_runs.ROOT).as_posix() for pattern in shared_runs.SOURCE_GLOBS
               for path in shared_runs.ROOT.glob(pattern)}
    assert {"__main__.py", "Pulumi.dev.yaml", "Pulumi.gke.yaml", "tools/plan/engine.py",
            "components/vm/queued_resource.py", "tests/program_harness.py"} <= covered


def test_outside_a_session_every_call_computes(own_store):
    shared_runs.use_directory(None)
    computed = []
    for _ in range(2):
        shared_runs.once("test", {"request": 1}, lambda: computed.append(1))
    assert len(computed) == 2


def test_a_plan_that_diffs_against_a_file_always_runs(own_store, monkeypatch):
    # The file --diff reads is not in the key: each call must start its own process.
    started = []

    def fake_run(argv, **_):
        started.append(argv)
        return subprocess.CompletedProcess(argv, 0, f"run {len(started)}", "")

    monkeypatch.setattr(program.subprocess, "run", fake_run)
    monkeypatch.setenv("TPU_VLLM_TEST_FORK_SERVER", "0")  # every run through subprocess.run, counted
    assert [program.plan(["--stack", "dev", "--diff", "base.json"]).stdout for _ in range(2)] == ["run 1", "run 2"]
    assert [program.plan(["--stack", "dev", "--json"]).stdout for _ in range(2)] == ["run 3", "run 3"]
    assert len(started) == 3


def test_a_reused_clone_is_brought_back_to_the_working_copy_but_keeps_its_venvs(tmp_path):
    clone = reused_build.fresh_clone(tmp_path / "repo")
    for kept in reused_build.KEEP_ON_REFRESH:
        (clone / kept).mkdir(parents=True)
        (clone / kept / "pyvenv.cfg").write_text("built\n")
    (clone / "stray.txt").write_text("left by an earlier session\n")
    (clone / "tools" / "stray").mkdir()
    (clone / "Pulumi.dev.yaml").write_text("config: {edited: by a test}\n")
    reused_build.refresh(clone)
    assert all((clone / kept / "pyvenv.cfg").read_text() == "built\n" for kept in reused_build.KEEP_ON_REFRESH)
    assert not (clone / "stray.txt").exists() and not (clone / "tools" / "stray").exists()
    assert (clone / "Pulumi.dev.yaml").read_bytes() == (reused_build.ROOT / "Pulumi.dev.yaml").read_bytes()
    changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all", "--ignored"], cwd=clone,
                             capture_output=True, text=True, check=True).stdout.splitlines()
    uncommitted = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=reused_build.ROOT,
                                 capture_output=True, text=True, check=True).stdout.splitlines()
    # Beyond the working copy's own changes, only the kept venvs.
    kept = tuple(f"{path}/" for path in reused_build.KEEP_ON_REFRESH)
    extra = {line[3:] for line in changed if not line[3:].startswith(kept)} - {line[3:] for line in uncommitted}
    assert extra == set(), extra


def test_any_build_input_changed_is_another_build(tmp_path, monkeypatch):
    (tmp_path / "requirements.txt").write_text("pulumi==3.272.0\n")
    monkeypatch.setattr(reused_build, "ROOT", tmp_path)
    before = reused_build.inputs_key(["requirements.txt"])
    assert reused_build.inputs_key(["requirements.txt"]) == before
    (tmp_path / "requirements.txt").write_text("pulumi==3.273.0\n")
    assert reused_build.inputs_key(["requirements.txt"]) != before


def test_a_build_not_marked_as_passed_is_built_again_from_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("TPU_VLLM_TEST_CACHE", str(tmp_path / "cache"))
    with reused_build.clone_built_once("t", ["requirements.txt"]) as (clone, built, _):
        assert not built
        (clone / "venv").mkdir()
        (clone / "venv" / "half-built").write_text("")
    with reused_build.clone_built_once("t", ["requirements.txt"]) as (clone, built, mark):
        assert not built and not (clone / "venv").exists()  # no mark: nothing of the failed build is trusted
        (clone / "venv").mkdir()
        mark.write_text("passed\n")
    with reused_build.clone_built_once("t", ["requirements.txt"]) as (clone, built, _):
        assert built and (clone / "venv").is_dir()
    monkeypatch.setenv("TPU_VLLM_TEST_FRESH_BUILD", "1")
    with reused_build.clone_built_once("t", ["requirements.txt"]) as (clone, built, _):
        assert not built and not (clone / "venv").exists()


def test_an_older_build_of_this_checkout_is_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("TPU_VLLM_TEST_CACHE", str(tmp_path / "cache"))
    with reused_build.clone_built_once("t", ["requirements.txt"]):
        pass
    with reused_build.clone_built_once("t", ["Pulumi.yaml"]) as (clone, _, _):
        builds = [path for path in (tmp_path / "cache" / "t").iterdir() if path.is_dir()]
        assert builds == [clone.parent]
    assert Path(clone).is_dir()
