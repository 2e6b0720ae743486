"""The check in front of the serving step: the node's SSH port answers, or the deploy fails with what to do.

The unreachable case dials a closed loopback port for real; the message's content is read from the
resource the program registers (under mocks), so the setting's value and the run end are the stack's.
"""

from __future__ import annotations

import shlex
import socket
import threading

import pytest
from pulumi.dynamic import ResourceProvider

from components.settings.checks.access import NARROW_SSH_COMMAND
from components.vm import ssh_reachable
from components.vm.serving_step import SSH_DIAL_TIMEOUT_SECONDS, SSH_DIALS
from components.vm.ssh_reachable import SshReachableProvider
from tests import test_program
from tools.plan import engine

TYPE = "pulumi-python:dynamic/tpu-vllm:SshReachable"
# tests/test_program.py's run with SSH narrowed to one range, the same fixture: the same request, so
# tests/shared_runs.py runs the program once a session for both modules.
narrowed = test_program.narrowed


@pytest.fixture(scope="module")
def registered(narrowed):
    return narrowed.one(TYPE)["inputs"], narrowed


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # nothing listens once it is closed: the dial is refused


def test_an_unanswered_ssh_port_fails_with_the_setting_its_value_the_fix_and_the_bill(registered):
    inputs, program = registered
    # The stack's own value, as its firewall has it: narrowed, not the dev stack's 0.0.0.0/0.
    ssh_ranges = program.named("firewall-ssh")["inputs"]["sourceRanges"]
    assert ssh_ranges and "0.0.0.0/0" not in ssh_ranges
    props = {**inputs, "host": "127.0.0.1", "port": closed_port(), "dials": 3, "dialTimeoutSeconds": 1,
             "backoffSeconds": 0}
    with pytest.raises(Exception) as caught:
        SshReachableProvider().create(props)
    message = str(caught.value)
    assert message.startswith(f"SSH to the TPU node at 127.0.0.1:{props['port']} did not answer after 3 dials")
    assert f"tpu-vllm:access.sshSourceRanges = {ssh_ranges}" in message
    assert NARROW_SSH_COMMAND in message
    assert "The TPU node is running and billing ($0.60/hour) until its run ends at" in message
    assert "run `pulumi up` again" in message and "`pulumi destroy`" in message


def test_the_registered_check_carries_the_stacks_run_end_and_nothing_secret(registered):
    inputs, program = registered
    assert (inputs["dials"], inputs["dialTimeoutSeconds"], inputs["port"]) == (SSH_DIALS, SSH_DIAL_TIMEOUT_SECONDS, 22)
    # The node's outputs as the mocks give them (tools/plan/engine.py).
    assert (inputs["host"], inputs["nodeUid"]) == (engine.MOCK_EXTERNAL_IP, engine.MOCK_NODE_UID)
    assert f"until its run ends at {engine.MOCK_TERMINATION_TIME}, when GCP deletes it" in inputs["billing"]
    assert "PRIVATE KEY" not in str(inputs)
    serve = program.one("command:remote:Command")
    assert "vllm-ssh-reachable" in serve["dependencies"]  # the serving step dials only after the check passed
    # The serving step's own failures end with the same notice (serve.sh prints FAILURE_NOTE last).
    assert f"FAILURE_NOTE={shlex.quote(inputs['billing'])}\n" in serve["inputs"]["stdin"]


def test_a_listening_port_passes_at_the_first_dial():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        accepted = threading.Thread(target=lambda: server.accept()[0].close(), daemon=True)
        accepted.start()
        port = server.getsockname()[1]
        result = SshReachableProvider().create({"host": "127.0.0.1", "port": port, "dials": 1,
                                                "dialTimeoutSeconds": 5, "cause": "", "billing": ""})
        accepted.join(timeout=10)
    assert result.id == f"127.0.0.1:{port}" and not accepted.is_alive()


def test_the_dials_follow_the_serving_steps_bounds():
    """14 dials, 13 waits between them, none over pulumi-command's 5 s: under 5 minutes with 15 s dials."""
    waits, dialled = [], []
    original = ssh_reachable.dial_once
    ssh_reachable.dial_once = lambda host, port, timeout: dialled.append(timeout) or "no answer"
    try:
        reason = ssh_reachable.dial("192.0.2.1", 22, SSH_DIALS, SSH_DIAL_TIMEOUT_SECONDS, 1.0, sleep=waits.append)
    finally:
        ssh_reachable.dial_once = original
    assert reason == "no answer" and dialled == [SSH_DIAL_TIMEOUT_SECONDS] * SSH_DIALS
    assert len(waits) == SSH_DIALS - 1 and max(waits) <= ssh_reachable.MAX_BACKOFF_SECONDS
    assert sum(dialled) + sum(waits) < 300


def test_a_new_node_or_address_dials_again_and_a_new_text_does_not():
    provider: ResourceProvider = SshReachableProvider()
    olds = {"host": "34.0.0.7", "port": 22, "nodeUid": "1", "cause": "a", "billing": "b"}
    assert provider.diff("id", olds, {**olds, "nodeUid": "2"}).replaces == ["nodeUid"]
    assert provider.diff("id", olds, {**olds, "host": "34.0.0.8"}).replaces == ["host"]
    changed_text = provider.diff("id", olds, {**olds, "billing": "c"})
    assert changed_text.changes and changed_text.replaces == []
    assert not provider.diff("id", olds, dict(olds)).changes
    assert provider.read("id", olds).outs == olds  # a refresh never dials a node that may be gone
