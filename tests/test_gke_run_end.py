"""A flex-start node's run end on GKE: the pod's grace period is what GKE's cluster autoscaler grants a pod when it
drains a recycled node, and the pod's stop (the front's drain, then vLLM's) ends inside it, by itself."""

from __future__ import annotations

import os
import re
import socket
import stat
import subprocess
from pathlib import Path

import pytest

from components import settings
from components.gke import workload
from components.serving import front
from components.settings import gke as gke_settings
from tests.test_gke_program import SERVING, container, pod_spec
from tests.test_gke_settings import problems_of, with_gke

# The stubs stand in for the clock, sleep and nginx, so a hook's deadline is counted, not waited for: each `date +%s`
# is one second later than the one before.
CLOCK_START = 1000
STUBS = {
    "date": f'n=$(cat "$STUBS/clock" 2>/dev/null || echo 0); echo $((n + 1)) > "$STUBS/clock"; '
            f"echo $(({CLOCK_START} + n))",
    "sleep": "exit 0",
    "nginx": 'echo "$*" >> "$STUBS/nginx.log"; [ -z "$STREAMS_FINISH" ] || rm -f "$RUN_DIR/nginx.pid"',
}


@pytest.fixture
def stubs(tmp_path: Path) -> Path:
    for name, body in STUBS.items():
        path = tmp_path / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return tmp_path


def run_hook(command: list[str], stubs: Path, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "STUBS": str(stubs), **env}
    return subprocess.run(command, env=environment, capture_output=True, text=True, timeout=60, check=False)


def clock_reads(stubs: Path) -> int:
    return int((stubs / "clock").read_text())


def test_the_pods_grace_is_what_gke_grants_a_drained_pod_and_each_hook_ends_inside_it(gke_program):
    gke = gke_program
    grace = pod_spec(gke)["terminationGracePeriodSeconds"]
    assert grace == gke_settings.GKE_RECYCLE_DRAIN_MAX_SECONDS == 600
    front_hook = container(gke, "front")["lifecycle"]["preStop"]["exec"]["command"][-1]
    vllm_hook = container(gke, "vllm")["lifecycle"]["preStop"]["exec"]["command"][-1]
    [front_deadline] = re.findall(r"\$\(date \+%s\) \+ (\d+)", front_hook)
    [vllm_deadline] = re.findall(r"\$\(date \+%s\) \+ (\d+)", vllm_hook)
    # The front gives up on its streams first, vLLM after the front has stopped, both before the kubelet's SIGKILL.
    assert workload.ENDPOINT_LEAVE_SECONDS < int(front_deadline) < int(vllm_deadline) < grace
    assert grace - int(front_deadline) == workload.STOP_MARGIN_SECONDS
    assert f"sleep {workload.ENDPOINT_LEAVE_SECONDS};" in front_hook


def test_even_the_shortest_grace_leaves_the_streams_time_after_the_endpoint_has_left():
    shortest = gke_settings.GKE_GRACE_MIN_SECONDS
    assert workload.front_drain_deadline(shortest) > workload.ENDPOINT_LEAVE_SECONDS
    assert workload.front_drain_deadline(shortest) < workload.vllm_drain_deadline(shortest) < shortest


@pytest.mark.parametrize(("grace", "refused", "fix"), [
    ("11m", True, "use at most 10m"), ("601s", True, "use at most 10m"), ("1h", True, "use at most 10m"),
    ("29s", True, "use at least 30s"), ("10s", True, "use at least 30s"),
    ("10m", False, ""), ("600s", False, ""), ("30s", False, ""), ("5m", False, "")])
def test_a_grace_period_past_what_gke_grants_or_too_short_to_drain_is_refused(grace, refused, fix):
    raw = with_gke(terminationGracePeriod=grace)
    if not refused:
        loaded = settings.load(raw, "my-proj", "gke")
        assert loaded.settings.gke.termination_grace_period == grace
        return
    [problem] = [p for p in problems_of(raw) if p.startswith("tpu-vllm:gke.terminationGracePeriod")]
    assert f'"{grace}"' in problem and fix in problem, problem


def test_the_front_hook_returns_once_nginx_has_finished_its_streams(stubs, tmp_path):
    layout = front.FrontLayout(config_path="/etc/nginx/nginx.conf", run_dir=str(tmp_path))
    (tmp_path / "nginx.pid").write_text("1\n")
    done = run_hook(workload.front_drain_command(layout, 30), stubs, RUN_DIR=str(tmp_path), STREAMS_FINISH="1")
    assert done.returncode == 0, done.stderr
    assert (stubs / "nginx.log").read_text() == "-c /etc/nginx/nginx.conf -s quit\n"
    assert clock_reads(stubs) == 1  # the deadline was set, and never reached


def test_the_front_hook_gives_up_at_its_deadline_when_a_stream_never_ends(stubs, tmp_path):
    layout = front.FrontLayout(config_path="/etc/nginx/nginx.conf", run_dir=str(tmp_path))
    (tmp_path / "nginx.pid").write_text("1\n")
    done = run_hook(workload.front_drain_command(layout, 30), stubs, RUN_DIR=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "-s quit" in (stubs / "nginx.log").read_text()
    # One read sets the deadline; the loop reads the clock once a turn until it reaches it.
    assert clock_reads(stubs) == 1 + workload.front_drain_deadline(30)


@pytest.fixture
def front_port():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)  # never accepted: each of the hook's probes waits in the queue
    yield listener
    listener.close()


def test_vllm_waits_for_the_front_until_its_own_deadline(stubs, front_port):
    port = front_port.getsockname()[1]
    done = run_hook(workload.vllm_drain_command(port, 30), stubs)
    assert done.returncode == 0, done.stderr
    assert clock_reads(stubs) == 1 + workload.vllm_drain_deadline(30)


def test_vllm_stops_waiting_as_soon_as_the_front_has_closed_its_port(stubs, front_port):
    port = front_port.getsockname()[1]
    front_port.close()
    done = run_hook(workload.vllm_drain_command(port, 30), stubs)
    assert done.returncode == 0, done.stderr
    assert clock_reads(stubs) == 1


def blocks_a_drain(pod: dict) -> bool:
    """The cluster autoscaler's local-storage rule with --skip-nodes-with-local-storage (its default): a disk-backed
    emptyDir or hostPath the pod does not name in safe-to-evict-local-volumes keeps the node (kubernetes/autoscaler
    cluster-autoscaler/utils/drain/drain.go HasBlockingLocalStorage, cluster-autoscaler-1.36.1)."""
    named = set(pod["metadata"].get("annotations", {}).get(
        "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes", "").split(","))
    return any(("hostPath" in volume or ("emptyDir" in volume and volume["emptyDir"].get("medium") != "Memory"))
               and volume["name"] not in named for volume in pod["spec"]["volumes"])


def with_fuse_sidecar_scratch(pod: dict) -> dict:
    """The pod as the Cloud Storage FUSE webhook admits it: three disk-backed emptyDirs for its sidecar
    (GoogleCloudPlatform/gcs-fuse-csi-driver pkg/webhook/sidecar_spec.go GetSidecarContainerVolumeSpec, @5fcdc04a)."""
    names = ("gke-gcsfuse-tmp", "gke-gcsfuse-buffer", "gke-gcsfuse-cache")
    scratch = [{"name": name, "emptyDir": {}} for name in names]
    return {**pod, "spec": {**pod["spec"], "volumes": scratch + pod["spec"]["volumes"]}}


def test_the_fuse_sidecars_scratch_volumes_never_keep_a_recycled_node_from_its_drain(gke_program):
    template = gke_program.named(SERVING)["inputs"]["spec"]["template"]
    assert not blocks_a_drain(with_fuse_sidecar_scratch(template))
    # Only the sidecar's scratch is waived: a disk-backed volume of our own would still keep the node, as it should.
    ours = {**template, "spec": {**template["spec"], "volumes": [{"name": "scratch", "emptyDir": {}},
                                                                 *template["spec"]["volumes"]]}}
    assert blocks_a_drain(with_fuse_sidecar_scratch(ours))
    unannotated = {**template, "metadata": {**template["metadata"], "annotations": {}}}
    assert blocks_a_drain(with_fuse_sidecar_scratch(unannotated))
