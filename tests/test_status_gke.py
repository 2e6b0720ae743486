"""tools.status on a gke stack, against a fake `pulumi` and a fake `kubectl` on PATH that answer from files the
test writes (objects shaped as the API server returns them). Canary secrets must never be printed."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.shims import make_shims
from tools import status, status_gke, status_report

CANARY_API_KEY = "canary-gke-api-key-4b9e2d7f1a"
NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
CLASS = "tpu-vllm-gke-tpu-v5e-1x1"
CONTEXT = "gke_proj_us-west4-a_tpu-vllm-gke"
OUTPUTS = {
    "platform": "gke", "clusterName": "tpu-vllm-gke", "clusterLocation": "us-west4-a", "namespace": "tpu-vllm",
    "computeClass": CLASS,
    "credentialsCommand": "gcloud container clusters get-credentials tpu-vllm-gke --location us-west4-a "
                          "--project proj",
    "apiKey": CANARY_API_KEY,
}

FAKE_PULUMI = r"""
[[ "$1 $2 $3 $4" == "stack output --json --show-secrets" ]] || { echo "fake pulumi: unexpected $*" >&2; exit 3; }
cat "$FAKE_KUBE/outputs.json"
"""
# kubectl --context C get <what> [-n NS] [-l SEL] [NAME] -o json: answers from $FAKE_KUBE/<what>.json, and fails in
# kubectl 1.36.3's own words (tools/status_gke.py cites where each is made): a context its kubeconfig lacks, a named
# object the server does not have (a list by selector is never NotFound: an empty List), and, with $FAKE_KUBE/
# no-auth-plugin, the exec credential plugin missing (client-go plugin/pkg/client/auth/exec/exec.go
# wrapCmdRunErrorLocked and RoundTrip, printed by kubectl's StandardErrorMessage for a *url.Error).
FAKE_KUBECTL = r"""
[[ "$1" == --context ]] || { echo "fake kubectl: no --context" >&2; exit 3; }
if [[ ! -f "$FAKE_KUBE/contexts/$2" ]]; then
  echo "Error in configuration: context was not found for specified context: $2" >&2; exit 1
fi
[[ "$3" == get ]] || { echo "fake kubectl: only get (got $3)" >&2; exit 3; }
[[ "${@: -2}" == "-o json" ]] || { echo "fake kubectl: -o json expected" >&2; exit 3; }
if [[ -f "$FAKE_KUBE/no-auth-plugin" ]]; then
  echo "Unable to connect to the server: getting credentials: exec: executable gke-gcloud-auth-plugin not found" >&2
  exit 1
fi
what="$4"
if [[ -f "$FAKE_KUBE/$what.json" ]]; then cat "$FAKE_KUBE/$what.json"
elif [[ " $* " == *" -l "* ]]; then
  echo '{"apiVersion": "v1", "items": [], "kind": "List", "metadata": {"resourceVersion": ""}}'
else
  case "$what" in
    computeclass) resource=computeclasses.cloud.google.com ;;
    hpa) resource=horizontalpodautoscalers.autoscaling ;;
    deployment) resource=deployments.apps ;;
    *.*) resource="$what" ;;
    *) echo "fake kubectl: no NotFound wording for $what" >&2; exit 3 ;;
  esac
  name="${@: -3:1}"
  echo "Error from server (NotFound): $resource \"$name\" not found" >&2; exit 1
fi
"""


class Cluster:
    def __init__(self, root: Path):
        self.dir = root / "kube"
        (self.dir / "contexts").mkdir(parents=True)
        (self.dir / "contexts" / CONTEXT).write_text("")
        self.log = root / "argv.log"
        self.env = make_shims(root / "bin", self.log, {"pulumi": FAKE_PULUMI, "kubectl": FAKE_KUBECTL})
        self.put("outputs", OUTPUTS)
        self.put("computeclass", compute_class_object())
        self.put("nodes", {"items": []})
        self.put("pods", {"items": []})
        self.put("hpa", hpa())

    def put(self, what: str, value) -> None:
        (self.dir / f"{what}.json").write_text(json.dumps(value))

    def remove(self, what: str) -> None:
        (self.dir / f"{what}.json").unlink()


def compute_class_object(health: str = "True", message: str = "") -> dict:
    return {"apiVersion": "cloud.google.com/v1", "kind": "ComputeClass", "metadata": {"name": CLASS},
            "spec": {"priorities": [
                {"flexStart": {"enabled": True, "nodeRecycling": {"leadTimeSeconds": 3600}},
                 "maxRunDurationSeconds": 86400, "tpu": {"type": "tpu-v5-lite-podslice", "count": 1}},
                {"spot": True, "tpu": {"type": "tpu-v5-lite-podslice", "count": 1}}]},
            "status": {"conditions": [{"type": "Health", "status": health, "message": message}]}}


# The VM starts before its node registers: GKE's annotated end is that much earlier than creation + the run.
REGISTERED_AFTER = timedelta(minutes=6)


def node(name: str, created: datetime, *, model: str = "flex-start", zone: str = "us-west4-a",
         annotated: bool = True) -> dict:
    """A node as GKE labels it; a flex-start one of a class with nodeRecycling is also labelled with the lead time
    and annotated with its end, RFC 3339 (GoogleCloudPlatform/cluster-autoscaler 7d25050,
    pkg/cloudprovider/gke/labels/system_labels.go; its own tests write it with `time.RFC3339`)."""
    labels = {"cloud.google.com/compute-class": CLASS, "topology.kubernetes.io/zone": zone}
    annotations = {}
    if model == "flex-start":
        labels["cloud.google.com/gke-flex-start"] = "true"
        if annotated:
            labels["cloud.google.com/gke-node-recycle-lead-time-seconds"] = "3600"
            annotations["node.gke.io/machine-termination-datetime"] = \
                f"{created - REGISTERED_AFTER + timedelta(days=1):%Y-%m-%dT%H:%M:%SZ}"
    elif model == "spot":
        labels["cloud.google.com/gke-spot"] = "true"
    return {"metadata": {"name": name, "labels": labels, "annotations": annotations,
                         "creationTimestamp": f"{created:%Y-%m-%dT%H:%M:%SZ}"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, state: str, template_hash: str = "6d4f8b9c7") -> dict:
    meta = {"name": name, "labels": {"app.kubernetes.io/name": "tpu-vllm", "pod-template-hash": template_hash}}
    if state == "queued":
        return {"metadata": meta, "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."}]}}
    running = {"running": {"startedAt": f"{NOW - timedelta(minutes=6):%Y-%m-%dT%H:%M:%SZ}"}}
    vllm = {"name": "vllm", "state": running, "ready": state == "ready"}
    if state == "crash":
        vllm["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s restarting"}}
    conditions = [{"type": "PodScheduled", "status": "True"},
                  {"type": "Ready", "status": "True" if state == "ready" else "False"}]
    return {"metadata": meta, "spec": {"nodeName": "gke-node-1"},
            "status": {"phase": "Running", "conditions": conditions, "containerStatuses": [vllm]}}


def hpa(current: int = 1, desired: int = 1, metric: str | None = "3", active: bool = True) -> dict:
    status_ = {"currentReplicas": current, "desiredReplicas": desired,
               "conditions": [{"type": "ScalingActive", "status": "True" if active else "False",
                               "reason": "ValidMetricFound" if active else "FailedGetPodsMetric",
                               "message": "" if active else "unable to get metric prometheus.googleapis.com"}]}
    if metric is not None:
        status_["currentMetrics"] = [{"type": "Pods", "pods": {"current": {"averageValue": metric}}}]
    return {"metadata": {"name": "vllm", "namespace": "tpu-vllm"},
            "spec": {"minReplicas": 1, "maxReplicas": 4,
                     "metrics": [{"type": "Pods", "pods": {"target": {"averageValue": "10"}}}]},
            "status": status_}


@pytest.fixture
def cluster(tmp_path, monkeypatch, capsys):
    made = Cluster(tmp_path)
    monkeypatch.setenv("PATH", made.env["PATH"])
    monkeypatch.setenv("FAKE_KUBE", str(made.dir))
    yield made
    printed = capsys.readouterr()
    assert CANARY_API_KEY not in printed.out + printed.err, "a secret was printed"
    assert CANARY_API_KEY not in made.log.read_text(), "a secret reached a command line"


def run() -> int:
    return status.main(["--stack", "gke"], clock=lambda: NOW)


def shown(capsys) -> str:
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return captured.out + captured.err


def test_a_replica_waiting_for_a_node_is_queued_for_capacity(cluster, capsys):
    cluster.put("pods", {"items": [pod("vllm-0", "queued")]})
    assert run() == status_report.EXIT_NOT_READY
    out = shown(capsys)
    assert "status, stack gke: QUEUED FOR CAPACITY" in out
    assert f"{CLASS}: flex-start (run 24h 00m, replacement 1h 00m before the end) -> spot" in out
    assert "nodes" in out and "none yet" in out
    assert "replica vllm-0" in out and "didn't match Pod's node affinity" in out
    assert "next: wait: the ComputeClass asks for a flex-start node" in out and "gke.fallback" in out
    argv = cluster.log.read_text()
    assert f"kubectl --context {CONTEXT} get computeclass {CLASS} -o json" in argv
    assert f"cloud.google.com/compute-class={CLASS}" in argv


def test_compiling_says_how_long_and_how_to_follow(cluster, capsys):
    cluster.put("nodes", {"items": [node("gke-node-1", NOW - timedelta(minutes=10))]})
    cluster.put("pods", {"items": [pod("vllm-0", "compiling")]})
    assert run() == status_report.EXIT_NOT_READY
    out = shown(capsys)
    assert "status, stack gke: COMPILING" in out and "for 6m 00s" in out
    assert "kubectl -n tpu-vllm logs vllm-0 -c vllm -f" in out
    # The node's run end: GKE's annotation, which its recycling plugin reads.
    assert "node gke-node-1" in out and "flex-start, us-west4-a, Ready, run ends ~2026-11-30 09:44 UTC (in 23h 44m; " \
        "node.gke.io/machine-termination-datetime); its replacement is asked for from ~08:44 UTC" in out


def test_a_node_without_the_end_annotation_gets_a_computed_end_that_says_so(cluster, capsys):
    """Before GKE annotates a node (or a class without nodeRecycling): creation + the class's maxRunDurationSeconds,
    later than the annotated end by the VM's time to register (the stack read only this, second reader, row 48)."""
    cluster.put("nodes", {"items": [node("gke-node-1", NOW - timedelta(minutes=10), annotated=False)]})
    cluster.put("pods", {"items": [pod("vllm-0", "compiling")]})
    run()
    assert "flex-start, us-west4-a, Ready, run ends ~2026-11-30 09:50 UTC (in 23h 50m; computed: creation + " \
        "maxRunDurationSeconds); its replacement is asked for from ~08:50 UTC" in shown(capsys)


def test_the_annotated_end_and_the_nodes_lead_label_are_what_gke_recycles_by():
    """The node's own lead-time label over the class's (a class edited after the node was made), and an end that is
    GKE's, not the class's run (the run may have changed too)."""
    flex = node("gke-node-1", NOW - timedelta(hours=2))
    flex["metadata"]["labels"]["cloud.google.com/gke-node-recycle-lead-time-seconds"] = "1800"
    flex["metadata"]["annotations"]["node.gke.io/machine-termination-datetime"] = "2026-11-30T05:00:00Z"
    [(_, fact)] = status_gke.node_facts([flex], compute_class_object(), NOW)
    assert fact == ("flex-start, us-west4-a, Ready, run ends ~2026-11-30 05:00 UTC (in 19h 00m; "
                    "node.gke.io/machine-termination-datetime); its replacement is asked for from ~04:30 UTC")
    # An annotation that is no RFC 3339 time is not believed: the computed end, said to be computed.
    flex["metadata"]["annotations"]["node.gke.io/machine-termination-datetime"] = "tomorrow"
    [(_, fact)] = status_gke.node_facts([flex], compute_class_object(), NOW)
    assert "(in 22h 00m; computed: creation + maxRunDurationSeconds); its replacement is asked for from ~07:30" in fact


def test_ready_with_the_hpa_and_its_queue_metric(cluster, capsys):
    cluster.put("nodes", {"items": [node("gke-node-1", NOW - timedelta(hours=23, minutes=30)),
                                    node("gke-node-2", NOW - timedelta(minutes=5), model="spot", zone="us-west4-b")]})
    cluster.put("pods", {"items": [pod("vllm-1", "compiling"), pod("vllm-0", "ready")]})
    cluster.put("hpa", hpa(current=2, desired=3, metric="14"))
    assert run() == status_report.EXIT_READY
    out = shown(capsys)
    assert "status, stack gke: READY" in out and "1 of 2 replica(s) serving; 1 on the way" in out
    assert "replica vllm-0" in out and "READY: serving on gke-node-1" in out
    assert "autoscaler" in out and "2 replica(s), wants 3 (1..4)" in out
    assert "14 waiting requests per pod (target 10)" in out
    assert "in 24m 00s" in out  # the first node's run ends soon (GKE's annotated end): its replacement is due
    assert "spot, us-west4-b, Ready, no run end: bills until the autoscaler removes it" in out
    assert out.index("replica vllm-0") < out.index("replica vllm-1")


def test_a_crashing_replica_says_where_to_read_why(cluster, capsys):
    cluster.put("pods", {"items": [pod("vllm-0", "crash")]})
    assert run() == status_report.EXIT_NOT_READY
    out = shown(capsys)
    assert "status, stack gke: FAILING" in out and "CrashLoopBackOff" in out
    assert "kubectl -n tpu-vllm describe pod vllm-0" in out and "--previous" in out


def test_a_metric_the_hpa_cannot_read_needs_action(cluster, capsys):
    cluster.put("pods", {"items": [pod("vllm-0", "compiling")]})
    cluster.put("hpa", hpa(metric=None, active=False))
    assert run() == status_report.EXIT_NOT_READY
    out = shown(capsys)
    assert "status, stack gke: NEEDS ACTION" in out and "FailedGetPodsMetric" in out
    assert "queue metric" in out and "unknown waiting requests per pod" in out
    assert "kubectl -n custom-metrics get pods" in out


def test_an_unhealthy_class_needs_action(cluster, capsys):
    cluster.put("computeclass", compute_class_object("False", "tpu-v5-lite-podslice not available in zone"))
    cluster.put("pods", {"items": [pod("vllm-0", "queued")]})
    assert run() == status_report.EXIT_NOT_READY
    out = shown(capsys)
    assert "NEEDS ACTION" in out and "ComputeClass reports a problem: tpu-v5-lite-podslice not available" in out


def test_a_missing_class_and_hpa_say_pulumi_up(cluster, capsys):
    cluster.remove("computeclass")
    cluster.remove("hpa")
    assert run() == status_report.EXIT_NOT_READY
    out = shown(capsys)
    assert f"the ComputeClass {CLASS} is missing" in out and "the HPA is missing" in out


def test_a_missing_class_is_kubectls_notfound_from_the_server(cluster, capsys):
    cluster.remove("computeclass")
    cluster.put("pods", {"items": [pod("vllm-0", "queued")]})
    run()
    out = shown(capsys)
    assert f"the ComputeClass {CLASS} is missing" in out and "credentials" not in out
    argv = cluster.log.read_text()
    assert f"get computeclass {CLASS} -o json" in argv


def test_without_credentials_it_says_so_and_prints_the_get_credentials_command(cluster, capsys):
    """kubectl's "context was not found" is the kubeconfig's, not the server's: no word of a missing class."""
    (cluster.dir / "contexts" / CONTEXT).unlink()
    assert run() == status_report.EXIT_ERROR
    out = " ".join(shown(capsys).split())
    assert (f"kubectl has no credentials for this cluster (its kubeconfig has no context {CONTEXT}): run gcloud "
            "container clusters get-credentials tpu-vllm-gke --location us-west4-a --project proj") in out
    assert "missing" not in out and "ComputeClass" not in out


def test_a_not_found_that_is_not_the_servers_is_kubectls_failure_not_a_missing_class(cluster, capsys):
    (cluster.dir / "no-auth-plugin").write_text("")
    assert run() == status_report.EXIT_ERROR
    out = " ".join(shown(capsys).split())
    assert ("kubectl failed: Unable to connect to the server: getting credentials: exec: executable "
            "gke-gcloud-auth-plugin not found") in out
    assert "is missing" not in out


def test_no_kubectl_is_an_error_with_the_install(cluster, capsys, monkeypatch):
    from tools import status_gke

    real_which = status_gke.shutil.which
    monkeypatch.setattr(status_gke.shutil, "which", lambda name: None if name == "kubectl" else real_which(name))
    assert run() == status_report.EXIT_ERROR
    assert "kubectl is not on PATH: gcloud components install kubectl" in shown(capsys)


def replica_set(template_hash: str, revision: int, replicas: int, ready: int) -> dict:
    """A ReplicaSet as the Deployment controller writes it: its template hash label and revision annotation."""
    return {"metadata": {"name": f"vllm-{template_hash}", "namespace": "tpu-vllm",
                         "labels": {"app.kubernetes.io/name": "tpu-vllm", "pod-template-hash": template_hash},
                         "annotations": {"deployment.kubernetes.io/revision": str(revision)}},
            "spec": {"replicas": replicas}, "status": {"replicas": replicas, "readyReplicas": ready}}


def test_a_surge_shows_the_old_replica_serving_and_the_new_one_compiling(cluster, capsys):
    cluster.put("replicasets", {"items": [replica_set("5b7c9d", 2, 1, 0), replica_set("6d4f8b9c7", 1, 1, 1),
                                          replica_set("1a2b3c", 0, 0, 0)]})
    cluster.put("pods", {"items": [pod("vllm-6d4f8b9c7-abcde", "ready", "6d4f8b9c7"),
                                   pod("vllm-5b7c9d-fghij", "compiling", "5b7c9d")]})
    cluster.put("hpa", hpa(current=2, desired=1))
    assert run() == status_report.EXIT_READY
    out = shown(capsys)
    assert ("rollout in progress (surge): new revision 2 (5b7c9d) 0 of 1 ready; old revision 1 (6d4f8b9c7) 1 of 1 "
            "ready, serving until the new one is") in " ".join(out.split())
    assert "replica vllm-6d4f8b9c7-abcde [old, revision 1]" in out and "READY" in out
    assert "replica vllm-5b7c9d-fghij [new, revision 2]" in out
    argv = cluster.log.read_text()
    assert "get replicasets -n tpu-vllm -l app.kubernetes.io/name=tpu-vllm -o json" in argv


def test_no_rollout_says_so_and_marks_no_replica(cluster, capsys):
    cluster.put("replicasets", {"items": [replica_set("6d4f8b9c7", 3, 1, 1), replica_set("5b7c9d", 2, 0, 0)]})
    cluster.put("pods", {"items": [pod("vllm-6d4f8b9c7-abcde", "ready", "6d4f8b9c7")]})
    assert run() == status_report.EXIT_READY
    out = " ".join(shown(capsys).split())
    assert "rollout revision 3 (6d4f8b9c7), 1 of 1 ready; nothing rolling out" in out
    assert "[old" not in out and "[new" not in out


def test_no_pods_names_the_deployment(cluster, capsys):
    assert run() == status_report.EXIT_NOT_READY
    out = shown(capsys)
    assert "the Deployment has no pods" in out and "describe deployment vllm" in out
    assert "StatefulSet" not in out and "statefulset" not in out


# The gateway's objects as the API server returns them: the Gateway API v1.5.1 and Inference Extension v1.5.0 CRDs'
# status fields (tests/schemas), what tools/status_gateway.py reads.
GATEWAY_OUTPUTS = {**OUTPUTS, "inferenceGateway": {
    "address": "10.128.0.60", "gateway": "vllm-gateway", "inferencePool": "vllm-pool",
    "endpointPicker": "vllm-pool-epp", "failureMode": "FailOpen"}}


def gateway_object(programmed: str = "True", message: str = "") -> dict:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "vllm-gateway", "namespace": "tpu-vllm"},
            "status": {"addresses": [{"type": "IPAddress", "value": "10.128.0.60"}],
                       "conditions": [{"type": "Programmed", "status": programmed,
                                       "reason": "Programmed" if programmed == "True" else "Invalid",
                                       "message": message}]}}


def pool_object(resolved: str = "True") -> dict:
    return {"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
            "metadata": {"name": "vllm-pool", "namespace": "tpu-vllm"},
            "spec": {"targetPorts": [{"number": 8000}]},
            "status": {"parents": [{"parentRef": {"kind": "Gateway", "name": "vllm-gateway"}, "conditions": [
                {"type": "Accepted", "status": "True"}, {"type": "ResolvedRefs", "status": resolved}]}]}}


def ready_pod_at(name: str, ip: str) -> dict:
    made = pod(name, "ready")
    made["status"]["podIP"] = ip
    return made


def test_the_gateway_shows_its_address_the_pools_endpoints_and_the_picker(cluster, capsys):
    cluster.put("outputs", GATEWAY_OUTPUTS)
    cluster.put("pods", {"items": [ready_pod_at("vllm-a", "10.8.0.11"), ready_pod_at("vllm-b", "10.8.0.12"),
                                   pod("vllm-c", "compiling")]})
    cluster.put("gateways.gateway.networking.k8s.io", gateway_object())
    cluster.put("inferencepools.inference.networking.k8s.io", pool_object())
    cluster.put("deployment", {"status": {"readyReplicas": 1}})
    assert run() == status_report.EXIT_READY
    out = shown(capsys)
    assert "10.128.0.60 (reserved 10.128.0.60), programmed" in out
    assert "accepted by the gateway; 2 endpoint(s): 10.8.0.11:8000 (vllm-a), 10.8.0.12:8000 (vllm-b)" in out
    assert "endpoint picker" in out and "ready (failure mode FailOpen" in out
    assert (f"kubectl --context {CONTEXT} get gateways.gateway.networking.k8s.io -n tpu-vllm vllm-gateway -o json"
            in cluster.log.read_text())


def test_an_unprogrammed_gateway_or_a_missing_pool_needs_action(cluster, capsys):
    cluster.put("outputs", GATEWAY_OUTPUTS)
    cluster.put("pods", {"items": [ready_pod_at("vllm-a", "10.8.0.11")]})
    cluster.put("gateways.gateway.networking.k8s.io", gateway_object("False", "no proxy-only subnet in us-west4"))
    cluster.put("deployment", {"status": {}})
    assert run() == status_report.EXIT_READY  # a replica serves; the way in does not
    out = shown(capsys)
    assert "GKE has not programmed the Gateway: no proxy-only subnet in us-west4" in out
    assert "the InferencePool is missing" in out and "not ready (failure mode FailOpen" in out


def test_a_stack_without_the_gateway_reads_no_gateway(cluster, capsys):
    cluster.put("pods", {"items": [ready_pod_at("vllm-a", "10.8.0.11")]})
    assert run() == status_report.EXIT_READY
    assert "gateway" not in shown(capsys)
    assert "gateway" not in cluster.log.read_text()


def test_a_gateway_programmed_on_another_address_than_the_reserved_one_needs_action(cluster, capsys):
    """Whether GKE takes the reserved SHARED_LOADBALANCER_VIP address is read from no page (issue 46): checked."""
    cluster.put("outputs", GATEWAY_OUTPUTS)
    cluster.put("pods", {"items": [ready_pod_at("vllm-a", "10.8.0.11")]})
    moved = gateway_object()
    moved["status"]["addresses"] = [{"type": "IPAddress", "value": "10.128.0.77"}]
    cluster.put("gateways.gateway.networking.k8s.io", moved)
    cluster.put("inferencepools.inference.networking.k8s.io", pool_object())
    cluster.put("deployment", {"status": {"readyReplicas": 1}})
    run()
    out = shown(capsys)
    assert "GKE programmed the Gateway on 10.128.0.77, not the reserved address 10.128.0.60" in out
    assert "http://10.128.0.77/v1" in out


ZERO_OUTPUTS = {**GATEWAY_OUTPUTS, "scaleToZero": {"requestTtlSeconds": 1560, "coldStartSeconds": 1240}}


def zero_hpa(held: str = "0", running: str = "0", active: bool = True) -> dict:
    """The HPA at zero as it reports itself: External metrics, the AutoscalingMetric's names (scale_to_zero.py)."""
    metrics = [{"type": "External", "external": {"metric": {"name": f"autoscaling.gke.io|picker-demand|{name}"},
                                                 "current": {"averageValue": value}}}
               for name, value in (("held-requests", held), ("running-requests", running))]
    return {"metadata": {"name": "vllm", "namespace": "tpu-vllm"},
            "spec": {"minReplicas": 0, "maxReplicas": 4, "metrics": []},
            "status": {"currentReplicas": 0, "desiredReplicas": 0, "currentMetrics": metrics,
                       "conditions": [{"type": "ScalingActive", "status": "True" if active else "False",
                                       "reason": "ValidMetricFound" if active else "FailedGetExternalMetric",
                                       "message": "" if active else "unable to get external metric"}]}}


def at_zero(cluster, **hpa_values) -> None:
    cluster.put("outputs", ZERO_OUTPUTS)
    cluster.put("pods", {"items": []})
    cluster.put("hpa", zero_hpa(**hpa_values))
    cluster.put("gateways.gateway.networking.k8s.io", gateway_object())
    cluster.put("inferencepools.inference.networking.k8s.io", pool_object())
    cluster.put("deployment", {"status": {"readyReplicas": 1}})


def test_a_pool_at_zero_is_its_healthy_idle_state_and_says_what_wakes_it(cluster, capsys):
    at_zero(cluster)
    assert run() == status_report.EXIT_READY
    out = shown(capsys)
    assert "AT ZERO" in out and "needs action" not in out.lower()
    assert "idle at zero replicas, as set (gke.minReplicas 0): no TPU node is left" in out
    assert "nothing to do. A request wakes it: the gateway holds it (up to 1560 s)" in out and "~1240 s" in out
    assert "0 held, 0 running per replica (the picker's, read by the AutoscalingMetric picker-demand)" in out
    assert "none (at zero: the picker holds a request until a replica is ready)" in out
    assert "queue metric" not in out  # vLLM's queue has no pod to report it at zero


def test_at_zero_a_picker_or_demand_that_cannot_wake_the_pool_needs_action(cluster, capsys):
    at_zero(cluster, active=False)
    assert run() != status_report.EXIT_READY
    out = shown(capsys)
    assert "the HPA cannot read the picker's demand (FailedGetExternalMetric" in out
    assert "describe autoscalingmetric picker-demand" in out and "metrics adapter" not in out
    at_zero(cluster)
    cluster.put("deployment", {"status": {}})  # the picker not ready: fail-open has no replica to fall back on
    assert run() != status_report.EXIT_READY
    assert "the endpoint picker is not ready, and at zero it is what holds a request" in shown(capsys)


def test_without_the_zero_no_pods_is_still_a_missing_deployment(cluster, capsys):
    cluster.put("outputs", GATEWAY_OUTPUTS)
    cluster.put("pods", {"items": []})
    cluster.put("gateways.gateway.networking.k8s.io", gateway_object())
    cluster.put("inferencepools.inference.networking.k8s.io", pool_object())
    cluster.put("deployment", {"status": {"readyReplicas": 1}})
    assert run() != status_report.EXIT_READY
    assert "the Deployment has no pods" in shown(capsys)
