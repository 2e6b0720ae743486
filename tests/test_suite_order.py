"""The files go to the workers costliest first (tests/suite_order.py), and a run can record the costs."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from tests import suite_order

ROOT = Path(__file__).resolve().parent.parent


def items(*nodeids: str) -> list[SimpleNamespace]:
    return [SimpleNamespace(nodeid=nodeid) for nodeid in nodeids]


def test_the_costliest_file_goes_first_and_each_file_keeps_its_own_order():
    collected = items("tests/test_a.py::one", "tests/test_a.py::two", "tests/test_vllm.py::only",
                      "tests/test_b.py::one", "tests/test_b.py::two[x]", "tests/test_b.py::two[y]")
    weights = {"tests/test_a.py": 3.0, "tests/test_vllm.py": 20.0, "tests/test_b.py": 5.0}
    assert [item.nodeid for item in suite_order.ordered(collected, weights)] == [
        "tests/test_vllm.py::only", "tests/test_b.py::one", "tests/test_b.py::two[x]", "tests/test_b.py::two[y]",
        "tests/test_a.py::one", "tests/test_a.py::two"]


def test_a_new_file_counts_as_the_median_one_and_ties_keep_the_collection_order():
    collected = items("tests/test_new.py::t", "tests/test_light.py::t", "tests/test_mid.py::t",
                      "tests/test_heavy.py::t", "tests/test_mid2.py::t")
    weights = {"tests/test_light.py": 1.0, "tests/test_mid.py": 4.0, "tests/test_mid2.py": 4.0,
               "tests/test_heavy.py": 9.0}
    assert [item.nodeid for item in suite_order.ordered(collected, weights)] == [
        "tests/test_heavy.py::t", "tests/test_new.py::t", "tests/test_mid.py::t", "tests/test_mid2.py::t",
        "tests/test_light.py::t"]
    # No weights at all (a missing file): the collection's order, untouched.
    assert suite_order.ordered(collected, {}) == collected


def test_the_recorder_sums_setup_call_and_teardown_per_file(tmp_path):
    recorder = suite_order.WeightRecorder(tmp_path / "weights.json")
    for nodeid, duration in (("tests/test_a.py::one", 1.25), ("tests/test_a.py::one", 2.0),
                             ("tests/test_a.py::two[p]", 0.5), ("tests/test_b.py::one", 0.04)):
        recorder.pytest_runtest_logreport(SimpleNamespace(nodeid=nodeid, duration=duration))
    recorder.pytest_sessionfinish(session=None, exitstatus=0)
    written = json.loads((tmp_path / "weights.json").read_text())
    assert written == {"tests/test_a.py": 3.8, "tests/test_b.py": 0.0}
    assert suite_order.load_weights(tmp_path / "weights.json") == written
    assert suite_order.load_weights(tmp_path / "absent.json") == {}


def test_the_recorded_weights_name_test_files_that_exist():
    weights = suite_order.load_weights()
    assert weights, "tests/suite_weights.json is empty: record it (tests/suite_order.py)"
    assert [name for name in weights if not (ROOT / name).is_file()] == []


def test_the_test_command_keeps_xdist_from_reordering_the_files_by_test_count():
    # Without the flag xdist sorts the files by their number of tests, whatever the collection's order.
    assert "--no-loadscope-reorder" in (ROOT / "scripts/test.sh").read_text()
