"""The check in front of the serving step: an SSH server answers on the node's port, or the deploy fails with
what to do.

The unreachable case dials a closed loopback port for real; the message's content is read from the
resource the program registers (under mocks), so the setting's value and the run end are the stack's. A peer
that accepts and never speaks is a real listener on 127.0.0.1; the server that must pass is the real sshd of
tests/test_host_key.py.
"""

from __future__ import annotations

import contextlib
import shlex
import socket
import threading

import pytest
from pulumi.dynamic import ResourceProvider

from components.settings.checks.access import NARROW_SSH_COMMAND
from components.vm import ssh_reachable
from components.vm.serving_step import SSH_DIAL_TIMEOUT_SECONDS, SSH_DIALS
from components.vm.ssh_reachable import DialFailure, SshReachableProvider
from tests import test_program
from tests.test_host_key import keygen, needs_sshd, start_sshd
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


@contextlib.contextmanager
def peer(answer: bytes | None):
    """A real listener on 127.0.0.1 that accepts one connection, then sends `answer` and keeps it open, or
    (None) reads the client's line and closes it. Yields its port."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        done = threading.Event()

        def serve():
            connection = server.accept()[0]
            with connection:
                if answer is None:
                    connection.recv(1024)  # read first: closing on unread data would be a reset instead
                    return
                connection.sendall(answer)
                done.wait(timeout=60)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        try:
            yield server.getsockname()[1]
        finally:
            done.set()
            thread.join(timeout=10)


def check(port: int, timeout: float = 0.5) -> str | None:
    """The provider's create with one dial of `timeout` seconds: None when it passed, else its message."""
    props = {"host": "127.0.0.1", "port": port, "dials": 1, "dialTimeoutSeconds": timeout, "backoffSeconds": 0,
             "cause": "FIREWALL-CAUSE", "billing": "BILLING-NOTE"}
    try:
        SshReachableProvider().create(props)
    except Exception as error:  # noqa: BLE001 - the provider's failure is an Exception with the user's message
        return str(error)
    return None


def test_a_peer_that_accepts_and_never_speaks_fails_within_the_bound_saying_no_ssh_server_answered():
    """pulumi-command's client would wait for this peer's identification for good (x/crypto reads it with no
    deadline): the check must fail instead, within the bound it is given, and not blame the firewall."""
    with peer(b"") as port:
        message = check(port, timeout=0.3)
    assert message is not None
    assert message.startswith(f"SSH to the TPU node at 127.0.0.1:{port} reached no SSH server after 1 dials of 0.3 s "
                              "(it accepted the connection but sent no SSH identification within 0.3 s)")
    assert "would wait for the server's identification with no time limit" in message
    assert "FIREWALL-CAUSE" not in message and message.endswith("BILLING-NOTE")


@pytest.mark.parametrize(("answer", "reason"), [
    (None, "it accepted the connection and closed it without an SSH identification"),
    (b"SSH-1.5-OldServer\r\n", "it identified itself as 'SSH-1.5-OldServer', not SSH 2.0"),
    (b"HTTP/1.1 400 Bad Request\r\n" * 12, "its first 255 bytes hold no SSH identification line"),
])
def test_a_peer_that_is_not_an_ssh_2_server_fails_saying_what_it_did(answer, reason):
    with peer(answer) as port:
        message = check(port)
    assert message is not None and f"reached no SSH server after 1 dials of 0.5 s ({reason})" in message


@pytest.mark.parametrize("answer", [b"SSH-2.0-OpenSSH_9.6\r\n", b"SSH-1.99-Compatible\n",
                                    b"a banner line first\r\nanother\r\nSSH-2.0-Server comment\r\n"])
def test_an_ssh_2_identification_passes_even_after_other_lines(answer):
    """RFC 4253 4.2: "The server MAY send other lines of data before sending the version string"; 1.99 is a
    server that also speaks 2.0 (section 5.1); the CR is optional to x/crypto's readVersion."""
    with peer(answer) as port:
        assert check(port) is None


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    directory = tmp_path_factory.mktemp("reachable-sshd")
    keygen(directory / "host")
    _, client_public = keygen(directory / "client")
    server = start_sshd(directory, [directory / "host"], client_public)
    yield server
    server.stop()


@needs_sshd
def test_a_real_sshd_passes_at_the_first_dial(sshd):
    result = SshReachableProvider().create({"host": "127.0.0.1", "port": sshd.port, "dials": 1,
                                            "dialTimeoutSeconds": 15, "cause": "", "billing": ""})
    assert result.id == f"127.0.0.1:{sshd.port}"


def test_the_dials_follow_the_serving_steps_bounds():
    """14 dials, 13 waits between them, none over pulumi-command's 5 s: under 5 minutes with 15 s dials."""
    waits, dialled = [], []
    original = ssh_reachable.dial_once
    silent = DialFailure("no answer", connected=False)
    ssh_reachable.dial_once = lambda host, port, timeout: dialled.append(timeout) or silent
    try:
        reason = ssh_reachable.dial("192.0.2.1", 22, SSH_DIALS, SSH_DIAL_TIMEOUT_SECONDS, 1.0, sleep=waits.append)
    finally:
        ssh_reachable.dial_once = original
    assert reason == silent and dialled == [SSH_DIAL_TIMEOUT_SECONDS] * SSH_DIALS
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
