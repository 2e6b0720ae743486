"""The pack's real entry forked from the session's one pulumi-policy import (tests/policy_venv.py over
tests/venv_forks.py and tests/venv_fork_server.py) answers what a fresh process of the pack's venv answers, byte
for byte, for whichever pack directory it is given: the server imports pulumi-policy only, never the pack."""

from __future__ import annotations

import copy
import json
import shutil

import pytest
from pulumi.runtime import rpc

from tests import policy_venv, shared_runs, venv_forks
from tests.program import dev_config
from tests.test_policy import QR, program_resources

EDITED = "so NOTHING-IN-THIS-COPY stops"


@pytest.fixture(scope="module")
def request_for_the_entry():
    dev = program_resources(dev_config())
    no_stop = copy.deepcopy(dev)
    [queued] = [props for type_, props, _ in no_stop if type_ == QR]
    del queued["body"]["runDuration"]
    unknown = copy.deepcopy(dev)
    [queued] = [props for type_, props, _ in unknown if type_ == QR]
    queued["body"]["provisioningModel"] = rpc.UNKNOWN  # read by a rule: the analyzer's advisory note
    return {"cases": {"dev stack": {"resources": dev, "config": {}},
                      "no run duration": {"resources": no_stop, "config": {}},
                      "an unknown provisioning model": {"resources": unknown, "config": {"allowOpenSsh": True}}}}


@pytest.fixture(autouse=True)
def forks_on(monkeypatch):
    """These tests are about the forked path itself: it runs whatever TPU_VLLM_TEST_POLICY_FORKS says."""
    monkeypatch.delenv("TPU_VLLM_TEST_POLICY_FORKS", raising=False)


def answer(completed):
    return completed.returncode, completed.stdout, completed.stderr


def forked_server_listens():
    """The answer came from a fork server of this session (one listens on a policy socket in its directory)."""
    return any(venv_forks.listening(path) for path in shared_runs._directory.glob("policy-*.sock"))


def test_a_forked_check_answers_what_a_fresh_process_answers(request_for_the_entry):
    pack = policy_venv.ROOT / "policy"
    forked = policy_venv.run_entry_check(request_for_the_entry, pack)
    assert shared_runs._directory is not None and forked_server_listens()
    fresh = policy_venv.run_entry_check(request_for_the_entry, pack, fresh=True)
    assert answer(forked) == answer(fresh)
    reports = json.loads(forked.stdout)["cases"]
    assert "nothing stops" in reports["no run duration"]["tpu-billing-stops"][0]  # the cases do differ
    assert any("advisory" in message for messages in reports["an unknown provisioning model"].values()
               for message in messages)
    again = policy_venv.run_entry_check(request_for_the_entry, pack)  # a second child: nothing left by the first
    assert answer(again) == answer(fresh)


def test_a_copied_and_edited_pack_is_read_from_its_own_directory(tmp_path, request_for_the_entry):
    pack = tmp_path / "policy"
    shutil.copytree(policy_venv.ROOT / "policy", pack, ignore=shutil.ignore_patterns("__pycache__", "venv"))
    rule = pack / "tpu_billing.py"
    assert "so nothing stops" in rule.read_text()
    rule.write_text(rule.read_text().replace("so nothing stops", EDITED))
    request = {"cases": {"no run duration": request_for_the_entry["cases"]["no run duration"]}}
    original = policy_venv.run_entry_check(request, policy_venv.ROOT / "policy")
    edited = policy_venv.run_entry_check(request, pack)
    assert answer(edited) == answer(policy_venv.run_entry_check(request, pack, fresh=True))
    assert EDITED in edited.stdout and EDITED not in original.stdout
