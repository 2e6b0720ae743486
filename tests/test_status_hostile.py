"""tools.status against a cluster and a stack that say hostile things (the fake kubectl and pulumi of
tests/test_status_gke.py, the fake node of tests/test_status.py): what they say reaches the terminal as inert text
through components/settings/text.py, one line per fact, and a stack output that is not a name never reaches kubectl's
or ssh's command line."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.settings.text import unprintable
from tests.test_status import OUTPUTS as VM_OUTPUTS
from tests.test_status import run as run_vm
from tests.test_status import stack  # noqa: F401 - the fixture
from tests.test_status_gke import GATEWAY_OUTPUTS, OUTPUTS, cluster, hpa, pod, run  # noqa: F401 - cluster: the fixture
from tools import status, status_report

# A terminal's title set and screen cleared, a forged line, NUL, and text shown reversed.
HOSTILE = "\x1b]0;owned\x07\x1b[2J\nnext: rm -rf ~\r\x00\u202etxt.exe\u2066\x9b"


def printed_lines(capsys) -> list[str]:
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    lines = (captured.out + captured.err).splitlines()
    for line in lines:
        assert unprintable(line) is None, line
    return lines


def test_what_the_cluster_says_is_shown_inertly_one_line_per_fact(cluster, capsys):  # noqa: F811
    crashing = pod(f"vllm-0{HOSTILE}", "crash")
    crashing["status"]["containerStatuses"][0]["state"]["waiting"]["message"] = HOSTILE
    queued = pod("vllm-1", "queued")
    queued["status"]["conditions"][0]["message"] = HOSTILE
    cluster.put("pods", {"items": [crashing, queued]})
    status_ = hpa(active=False)
    status_["status"]["conditions"] = [{"type": "ScalingActive", "status": "False", "reason": HOSTILE,
                                        "message": HOSTILE}]
    cluster.put("hpa", status_)
    assert run() == status_report.EXIT_NOT_READY
    lines = printed_lines(capsys)
    assert [line for line in lines if line.startswith("next:")] == [lines[-1]]  # no forged line
    assert any("\\x1b]0;owned\\x07\\x1b[2J\\nnext: rm -rf ~\\r\\x00\\u202etxt.exe" in line for line in lines)
    # A pod name no API server allows is quoted in the command the user may paste.
    assert any("describe pod 'vllm-0\\x1b]0;owned" in line for line in lines)


@pytest.mark.parametrize(("output", "value", "said"), [
    ("namespace", "--all-namespaces", "namespace output '--all-namespaces' is not a Kubernetes namespace"),
    ("computeClass", "-A", "computeClass output '-A' is not a Kubernetes object name"),
    ("namespace", f"ns{HOSTILE}", "namespace output 'ns\\\\x1b]0;owned"),
    ("clusterName", "--kubeconfig=/tmp/x", "clusterName output '--kubeconfig=/tmp/x' is not a Google Cloud name"),
])
def test_a_stack_output_that_is_not_a_name_never_reaches_kubectl(cluster, capsys, output, value, said):  # noqa: F811
    cluster.put("outputs", {**OUTPUTS, output: value})
    assert run() == status_report.EXIT_ERROR
    [line] = printed_lines(capsys)
    assert line.startswith("error: stack gke's ") or line.startswith("error: the stack's "), line
    assert said in line, line
    assert "kubectl" not in (cluster.log.read_text() if cluster.log.exists() else "")


@pytest.mark.parametrize("key", ["gateway", "inferencePool", "endpointPicker"])
def test_a_gateway_output_that_is_not_a_name_never_reaches_kubectl(cluster, capsys, key):  # noqa: F811
    cluster.put("outputs", {**GATEWAY_OUTPUTS, "inferenceGateway": {**GATEWAY_OUTPUTS["inferenceGateway"],
                                                                    key: "--all-namespaces"}})
    assert run() == status_report.EXIT_ERROR
    [line] = printed_lines(capsys)
    assert f"inferenceGateway.{key} output '--all-namespaces' is not a Kubernetes object name" in line
    assert "kubectl" not in (cluster.log.read_text() if cluster.log.exists() else "")


def test_an_ssh_user_that_is_an_option_never_reaches_ssh(stack, capsys):  # noqa: F811
    stack.outputs({**VM_OUTPUTS, "sshCommand": "ssh -i ~/.ssh/k -oProxyCommand=touch${IFS}/tmp/owned@34.0.0.99"})
    stack.active()
    assert run_vm(stack) == status_report.EXIT_ERROR
    [line] = printed_lines(capsys)
    assert "names the user '-i ~/.ssh/k -oProxyCommand" in line or "names the user '-oProxyCommand" in line, line
    assert not (stack.node / "target").exists()  # ssh never ran


@settings(max_examples=200, deadline=None)
@given(texts=st.lists(st.text(), min_size=5, max_size=5))
def test_any_text_renders_as_one_inert_line_per_piece(texts):
    state, headline, label, value, next_step = texts
    shown = status.render(status_report.Report(state, headline, next_step, facts=[(label, value)]), "stack x")
    lines = shown.split("\n")
    assert len(lines) == 4 + ("ssh -i " in next_step)
    assert all(unprintable(line) is None for line in lines)


def test_a_revision_annotation_of_non_ascii_digits_is_no_revision_not_a_crash():
    # str.isdigit() is True for '²' and int('²') raises; an annotation is free text anyone who may patch the
    # ReplicaSet writes.
    from tools.status_gke import revisions
    [revision] = revisions([{"metadata": {"annotations": {"deployment.kubernetes.io/revision": "²"}},
                             "status": {"replicas": 1, "readyReplicas": 1}}])
    assert revision.revision == 0
