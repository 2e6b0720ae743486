"""Where a gke stack stands: its ComputeClass, the TPU nodes it made (with their run ends), the Deployment's
rollout (the old and the new ReplicaSet while a surge runs), each replica (queued for capacity, compiling, ready,
failing) with its revision, the HPA's replicas and queue metric, and with the inference gateway its address, the
pool's endpoints and the picker (tools/status_gateway.py), each with the next step. Reads the cluster
with kubectl, in the context `gcloud container clusters get-credentials` makes
(the stack's credentialsCommand output); reads only.

Called by tools/status.py for a stack whose `platform` output is gke.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from components.gke import compute_class, scale_to_zero
from components.gke.cluster import credentials_command as get_credentials_command
from components.settings.text import escaped
from tools.status_gateway import gateway_facts
from tools.status_report import EXIT_READY, Report, StatusError, parse_time, span

KUBECTL_TIMEOUT_SECONDS = 60
APP_SELECTOR = "app.kubernetes.io/name=tpu-vllm"
HPA_NAME = "vllm"
VLLM_CONTAINER = "vllm"
# Container waits that do not clear by themselves.
STUCK_REASONS = {"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError",
                 "CreateContainerError", "InvalidImageName"}
PROJECT_FLAG = re.compile(r"--project\s+(\S+)")
# The Deployment controller labels each ReplicaSet it makes, and that ReplicaSet's pods, with the hash of the pod
# template (apps/v1 DefaultDeploymentUniqueLabelKey), and annotates the ReplicaSet with its revision
# (kubernetes/kubernetes pkg/controller/deployment/util/deployment_util.go RevisionAnnotation, v1.33).
TEMPLATE_HASH_LABEL = "pod-template-hash"
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"


# kubectl's words on stderr, exit 1 (kubernetes/kubectl pkg/cmd/util/helpers.go checkErr and StandardErrorMessage,
# kubernetes-1.36.3). A --context its kubeconfig lacks: client-go tools/clientcmd validation.go errContextNotFound
# ("context was not found for specified context: NAME"), the one error of DirectClientConfig.ConfirmUsable
# (client_config.go; kubectl's ClusterDefaults, cli-runtime genericclioptions/config_flags.go 1.36.2, give the empty
# cluster a server, so no second error), which checkErr unwraps and prints as "Error in configuration: " + it, with
# no "error: " prefix. An object the server does not have: apimachinery pkg/api/errors NewNotFound
# ("<resource>.<group> \"NAME\" not found") as "Error from server (NotFound): " + it.
CONFIGURATION_ERROR = "Error in configuration: "
CONTEXT_NOT_FOUND = "context was not found for specified context: "
SERVER_NOT_FOUND = "Error from server (NotFound): "


# What kubectl is given from the stack's outputs is a name, checked as one before any command runs, so an output such
# as `--all-namespaces` never becomes a flag: a namespace is an RFC 1123 label, other objects' names RFC 1123
# subdomains (kubernetes/apimachinery pkg/util/validation/validation.go IsDNS1123Label, IsDNS1123Subdomain).
_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL = re.compile(rf"(?=.{{1,63}}\Z){_LABEL}\Z")
DNS1123_SUBDOMAIN = re.compile(rf"(?=.{{1,253}}\Z){_LABEL}(?:\.{_LABEL})*\Z")
# Its cluster coordinates become the context name (gke_<project>_<location>_<cluster>) and gcloud's arguments.
GCLOUD_PART = re.compile(r"[a-z0-9][-a-z0-9.:]{0,126}\Z")


def kube_name(value: Any, output: str, stack_label: str, namespace: bool = False) -> str:
    """The output's value, if it is a name Kubernetes allows; else a StatusError naming the output."""
    if isinstance(value, str) and (DNS1123_LABEL if namespace else DNS1123_SUBDOMAIN).match(value):
        return value
    shown = escaped(str(value))[:120]
    raise StatusError(f"{stack_label}'s {output} output {shown!r} is not a Kubernetes "
                      f"{'namespace' if namespace else 'object name'}; run `pulumi up` to rewrite the outputs")


def _cluster(outputs: dict[str, Any]) -> tuple[str, str, str]:
    """(project, location, cluster name) from the stack's outputs."""
    project = PROJECT_FLAG.search(str(outputs.get("credentialsCommand", "")))
    if not project or not outputs.get("clusterName") or not outputs.get("clusterLocation"):
        raise StatusError("the stack's outputs lack credentialsCommand, clusterName or clusterLocation; run "
                          "`pulumi up` again to write them")
    parts = project.group(1), str(outputs["clusterLocation"]), str(outputs["clusterName"])
    for output, part in zip(("credentialsCommand's --project", "clusterLocation", "clusterName"), parts, strict=True):
        if not GCLOUD_PART.match(part):
            raise StatusError(f"the stack's {output} output {escaped(part)[:120]!r} is not a Google Cloud name; "
                              "run `pulumi up` to rewrite the outputs")
    return parts


def kube_context(outputs: dict[str, Any]) -> str:
    """The context name gcloud's get-credentials writes: gke_<project>_<location>_<cluster>."""
    project, location, name = _cluster(outputs)
    return f"gke_{project}_{location}_{name}"


def credentials_command(outputs: dict[str, Any]) -> str:
    """What writes that context into kubectl's kubeconfig (the stack's credentialsCommand output, from its parts)."""
    project, location, name = _cluster(outputs)
    return get_credentials_command(name, location, project)


@dataclass
class Kubectl:
    """`kubectl get ... -o json` in the stack's context, never anything that writes."""

    context: str
    credentials_command: str

    def get(self, *args: str) -> dict[str, Any] | None:
        """The object (or list); None when it does not exist."""
        if shutil.which("kubectl") is None:
            raise StatusError("kubectl is not on PATH: gcloud components install kubectl gke-gcloud-auth-plugin")
        command = ["kubectl", "--context", self.context, "get", *args, "-o", "json"]
        try:
            done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=KUBECTL_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            raise StatusError(f"kubectl did not answer in {KUBECTL_TIMEOUT_SECONDS} s; is the cluster "
                              "reachable from here?") from None
        if done.returncode != 0:
            said = done.stderr.strip().splitlines()
            if any(line.startswith(CONFIGURATION_ERROR) and CONTEXT_NOT_FOUND in line for line in said):
                raise StatusError(f"kubectl has no credentials for this cluster (its kubeconfig has no context "
                                  f"{self.context}): run {self.credentials_command}")
            if any(line.startswith(SERVER_NOT_FOUND) for line in said):
                return None
            raise StatusError(f"kubectl failed: {(said or [f'exit {done.returncode}'])[-1]}")
        try:
            return json.loads(done.stdout or "null")
        except json.JSONDecodeError:
            raise StatusError("kubectl did not print JSON") from None


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), {})


def class_facts(tpu_class: dict[str, Any] | None, name: str) -> tuple[list[tuple[str, str]], str | None]:
    """Facts about the class and, when it is unhealthy, the problem."""
    if tpu_class is None:
        return [("compute class", f"{name}: missing")], (
            f"the ComputeClass {name} is missing: `pulumi up` creates it (pulumi refresh first if it was deleted)")
    priorities = []
    for rule in (tpu_class.get("spec") or {}).get("priorities") or []:
        if (rule.get("flexStart") or {}).get("enabled"):
            lead = (rule["flexStart"].get("nodeRecycling") or {}).get("leadTimeSeconds")
            run = rule.get("maxRunDurationSeconds")
            priorities.append(f"flex-start (run {span(run) if run else '7d'}"
                              f"{f', replacement {span(lead)} before the end' if lead else ''})")
        else:
            priorities.append("spot" if rule.get("spot") else "on-demand")
    facts = [("compute class", f"{name}: {' -> '.join(priorities) or 'no priorities'}")]
    health = _condition(tpu_class, "Health")
    if health.get("status") == "False":
        return facts, f"the ComputeClass reports a problem: {health.get('message') or health.get('reason')}"
    return facts, None


def _run_seconds(tpu_class: dict[str, Any] | None, model: str) -> int | None:
    for rule in ((tpu_class or {}).get("spec") or {}).get("priorities") or []:
        is_flex = bool((rule.get("flexStart") or {}).get("enabled"))
        if (model == "flex-start") == is_flex and (is_flex or bool(rule.get("spot")) == (model == "spot")):
            return rule.get("maxRunDurationSeconds")
    return None


def _lead_seconds(tpu_class: dict[str, Any] | None) -> int | None:
    for rule in ((tpu_class or {}).get("spec") or {}).get("priorities") or []:
        if (rule.get("flexStart") or {}).get("enabled"):
            return (rule["flexStart"].get("nodeRecycling") or {}).get("leadTimeSeconds")
    return None


TERMINATION_ANNOTATION = "node.gke.io/machine-termination-datetime"
RECYCLE_LEAD_LABEL = "cloud.google.com/gke-node-recycle-lead-time-seconds"


def _node_lead_seconds(labels: dict[str, str], tpu_class: dict[str, Any] | None) -> int | None:
    """The lead time GKE's recycling plugin reads (the node's label, `strconv.Atoi`), else the class's."""
    text = labels.get(RECYCLE_LEAD_LABEL, "")
    return int(text) if text.isdigit() else _lead_seconds(tpu_class)


def node_model(labels: dict[str, str]) -> str:
    if labels.get("cloud.google.com/gke-flex-start") == "true":
        return "flex-start"
    return "spot" if labels.get("cloud.google.com/gke-spot") == "true" else "on-demand"


def node_facts(nodes: list[dict[str, Any]], tpu_class: dict[str, Any] | None,
               now: datetime) -> list[tuple[str, str]]:
    facts = []
    for node in nodes:
        meta = node.get("metadata") or {}
        labels = meta.get("labels") or {}
        model = node_model(labels)
        zone = labels.get("topology.kubernetes.io/zone", "?")
        created = parse_time(meta.get("creationTimestamp", ""))
        run = _run_seconds(tpu_class, model)
        # GKE annotates a node with its end, and its recycling plugin reads that and the node's lead-time label
        # (GoogleCloudPlatform/cluster-autoscaler 7d25050, pkg/cloudprovider/gke/labels/system_labels.go
        # InstanceTerminationAnnotationKey, NodeRecycleLeadTimeSecondsLabelKey; pkg/defrag/plugins/recycling,
        # `time.Parse(time.RFC3339, terminationTimeStamp)`). Without it: the node's creation plus the class's
        # maxRunDurationSeconds, later than the real end by the VM's time to register, and said to be computed.
        annotated = parse_time((meta.get("annotations") or {}).get(TERMINATION_ANNOTATION, ""))
        if annotated or (created and run):
            ends = annotated.timestamp() if annotated else created.timestamp() + run
            how = TERMINATION_ANNOTATION if annotated else "computed: creation + maxRunDurationSeconds"
            left = ends - now.timestamp()
            when = datetime.fromtimestamp(ends, now.tzinfo)
            lead = _node_lead_seconds(labels, tpu_class) if model == "flex-start" else None
            replacement = (f"; its replacement is asked for from ~"
                           f"{datetime.fromtimestamp(ends - lead, now.tzinfo):%H:%M} UTC" if lead else "")
            end = (f"run ends ~{when:%Y-%m-%d %H:%M} UTC (in {span(left)}; {how}){replacement}" if left > 0
                   else "run over: GKE is removing it")
        else:
            end = "no run end: bills until the autoscaler removes it"
        ready = _condition(node, "Ready").get("status") == "True"
        facts.append((f"node {meta.get('name', '?')}", f"{model}, {zone}, {'Ready' if ready else 'not ready'}, {end}"))
    return facts


@dataclass
class Replica:
    name: str
    state: str
    """queued for capacity, starting, compiling, ready, failing, stopping."""
    detail: str
    next_step: str


def replica(pod: dict[str, Any], now: datetime, namespace: str) -> Replica:
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    name = str(meta.get("name", "?"))
    # The pod's name as the cluster said it, in a command the user may paste: quoted if it is not a plain name.
    pod_name = shlex.quote(name)
    logs = f"kubectl -n {namespace} logs {pod_name} -c {VLLM_CONTAINER} -f"
    if meta.get("deletionTimestamp"):
        return Replica(name, "stopping", "finishing its streams (run end, scale-down or update)",
                       "nothing: its replacement starts on another node")
    scheduled = _condition(pod, "PodScheduled")
    if status.get("phase") == "Pending" and scheduled.get("status") == "False":
        return Replica(name, "queued for capacity", scheduled.get("message") or "waiting for a TPU node",
                       "wait: the ComputeClass asks for a flex-start node in gke.nodeLocations (queued until there "
                       "is capacity); `kubectl get events -n " + namespace + "` shows the autoscaler's attempts; "
                       "gke.fallback lists what it may take instead")
    vllm = next((c for c in status.get("containerStatuses") or [] if c.get("name") == VLLM_CONTAINER), {})
    waiting = (vllm.get("state") or {}).get("waiting") or {}
    if waiting.get("reason") in STUCK_REASONS:
        return Replica(name, "failing", f"{waiting['reason']}: {waiting.get('message', '')}".strip(": "),
                       f"read why: kubectl -n {namespace} describe pod {pod_name}; "
                       f"{logs.removesuffix(' -f')} --previous")
    if _condition(pod, "Ready").get("status") == "True":
        return Replica(name, "ready", f"serving on {pod.get('spec', {}).get('nodeName', '?')}", "nothing")
    running = (vllm.get("state") or {}).get("running")
    if running:
        started = parse_time(running.get("startedAt", ""))
        since = f" for {span((now - started).total_seconds())}" if started else ""
        return Replica(name, "compiling", f"vLLM loading and compiling{since} (startup probe not passed yet)",
                       f"wait: ~8 min warm (497 s, the shared cache has this configuration), ~14 cold (857 s); "
                       f"follow it: {logs}")
    return Replica(name, "starting", waiting.get("reason") or status.get("phase") or "being created",
                   "wait: the node pulls the image and mounts the cache and secrets")


@dataclass
class Revision:
    template_hash: str
    revision: int
    replicas: int
    ready: int


def revisions(replica_sets: list[dict[str, Any]]) -> list[Revision]:
    """The Deployment's ReplicaSets that still have pods, newest first."""
    found = []
    for replica_set in replica_sets:
        meta, status = replica_set.get("metadata") or {}, replica_set.get("status") or {}
        replicas = int(status.get("replicas") or 0)
        if not replicas and not int((replica_set.get("spec") or {}).get("replicas") or 0):
            continue
        revision = str((meta.get("annotations") or {}).get(REVISION_ANNOTATION, "0"))
        found.append(Revision((meta.get("labels") or {}).get(TEMPLATE_HASH_LABEL, "?"),
                              int(revision) if revision.isascii() and revision.isdigit() else 0, replicas,
                              int(status.get("readyReplicas") or 0)))
    return sorted(found, key=lambda r: r.revision, reverse=True)


def rollout_facts(active: list[Revision]) -> list[tuple[str, str]]:
    if not active:
        return []
    newest = active[0]
    if len(active) == 1:
        return [("rollout", f"revision {newest.revision} ({newest.template_hash}), {newest.ready} of "
                            f"{newest.replicas} ready; nothing rolling out")]
    old = ", ".join(f"revision {r.revision} ({r.template_hash}) {r.ready} of {r.replicas} ready, serving until the "
                    "new one is" for r in active[1:])
    return [("rollout", f"in progress (surge): new revision {newest.revision} ({newest.template_hash}) "
                        f"{newest.ready} of {newest.replicas} ready; old {old}")]


def hpa_facts(hpa: dict[str, Any] | None, zero: bool = False) -> tuple[list[tuple[str, str]], str | None]:
    """zero: the pool may stand at zero (the scaleToZero output), so the HPA reads the picker's demand, External
    metrics through GKE's AutoscalingMetric (components/gke/scale_to_zero.py), not vLLM's queue."""
    if hpa is None:
        return [("autoscaler", "missing")], "the HPA is missing: `pulumi up` creates it"
    status, spec = hpa.get("status") or {}, hpa.get("spec") or {}
    namespace = str((hpa.get("metadata") or {}).get("namespace", ""))
    facts = [("autoscaler", f"{status.get('currentReplicas', 0)} replica(s), wants {status.get('desiredReplicas', 0)} "
                            f"({spec.get('minReplicas', '?')}..{spec.get('maxReplicas', '?')})")]
    active = _condition(hpa, "ScalingActive")
    if zero:
        current = {m.get("external", {}).get("metric", {}).get("name", "").rsplit("|", 1)[-1]:
                   m.get("external", {}).get("current", {}).get("averageValue")
                   for m in status.get("currentMetrics") or [] if m.get("type") == "External"}
        held, running = (current.get(scale_to_zero.HELD_DEMAND), current.get(scale_to_zero.RUNNING_DEMAND))
        facts.append(("gateway demand", f"{'unknown' if held is None else held} held, "
                                        f"{'unknown' if running is None else running} running per replica "
                                        f"(the picker's, read by the AutoscalingMetric {scale_to_zero.DEMAND_OBJECT})"))
        if active.get("status") == "False":
            return facts, (f"the HPA cannot read the picker's demand ({active.get('reason')}: "
                           f"{active.get('message')}), so a held request would not wake the pool: kubectl -n "
                           f"{namespace} describe autoscalingmetric {scale_to_zero.DEMAND_OBJECT}, and that Managed "
                           f"Prometheus scrapes the picker (kubectl -n {namespace} get podmonitoring)")
        return facts, None
    metric = next((m.get("pods", {}).get("current", {}).get("averageValue")
                   for m in status.get("currentMetrics") or [] if m.get("type") == "Pods"), None)
    target = next((m.get("pods", {}).get("target", {}).get("averageValue")
                   for m in spec.get("metrics") or [] if m.get("type") == "Pods"), "?")
    facts.append(("queue metric", f"{metric if metric is not None else 'unknown'} waiting requests per pod "
                                  f"(target {target})"))
    if active.get("status") == "False":
        return facts, (f"the HPA cannot read the queue metric ({active.get('reason')}: {active.get('message')}); "
                       "check the metrics adapter: kubectl -n custom-metrics get pods, and that Managed "
                       f"Prometheus scrapes the pods (kubectl -n {namespace} get podmonitoring)")
    return facts, None


def decide(outputs: dict[str, Any], stack_label: str, now: datetime,
           kubectl_factory: Callable[[str, str], Kubectl] = Kubectl) -> Report:
    name, namespace = outputs.get("computeClass"), outputs.get("namespace")
    if not name or not namespace:
        raise StatusError(f"{stack_label}'s outputs lack computeClass or namespace: run `pulumi up` to update them")
    name = kube_name(name, "computeClass", stack_label)
    namespace = kube_name(namespace, "namespace", stack_label, namespace=True)
    wanted = outputs.get("inferenceGateway")
    if wanted:
        for key in ("gateway", "inferencePool", "endpointPicker"):
            kube_name((wanted if isinstance(wanted, dict) else {}).get(key), f"inferenceGateway.{key}", stack_label)
    kube = kubectl_factory(kube_context(outputs), credentials_command(outputs))
    tpu_class = kube.get("computeclass", name)
    facts, class_problem = class_facts(tpu_class, name)
    nodes = (kube.get("nodes", "-l", f"{compute_class.COMPUTE_CLASS_LABEL}={name}") or {}).get("items") or []
    zero = outputs.get("scaleToZero")
    facts += node_facts(nodes, tpu_class, now) or [
        ("nodes", "none: the pool may stand at zero, and GKE removes the TPU node then" if zero else "none yet")]
    active = revisions((kube.get("replicasets", "-n", namespace, "-l", APP_SELECTOR) or {}).get("items") or [])
    facts += rollout_facts(active)
    revision_of = {r.template_hash: r.revision for r in active}
    newest = active[0].revision if active else None
    pods = (kube.get("pods", "-n", namespace, "-l", APP_SELECTOR) or {}).get("items") or []
    replicas = sorted((replica(pod, now, namespace) for pod in pods), key=lambda r: r.name)
    hashes = {(p.get("metadata") or {}).get("name"): ((p.get("metadata") or {}).get("labels") or {}).get(
        TEMPLATE_HASH_LABEL) for p in pods}
    for one in replicas:
        revision = revision_of.get(hashes.get(one.name))
        which = ("" if revision is None or len(active) < 2
                 else f" [{'new' if revision == newest else 'old'}, revision {revision}]")
        facts.append((f"replica {one.name}{which}", f"{one.state.upper()}: {one.detail}"
                      + ("" if one.next_step == "nothing" else f"; next: {one.next_step}")))
    more, hpa_problem = hpa_facts(kube.get("hpa", "-n", namespace, HPA_NAME), zero=bool(zero))
    facts += more
    gateway_problem = None
    if outputs.get("inferenceGateway"):
        more, gateway_problem = gateway_facts(kube, outputs, namespace, pods, zero=bool(zero))
        facts += more
    ready = [r for r in replicas if r.state == "ready"]
    problems = [p for p in (class_problem, hpa_problem, gateway_problem) if p]
    if ready:
        waiting = len(replicas) - len(ready)
        return Report("ready", f"{len(ready)} of {len(replicas)} replica(s) serving"
                      + (f"; {waiting} on the way" if waiting else ""),
                      "; ".join(problems) or "use $(pulumi stack output internalEndpoint) from the VPC, or "
                      "$(pulumi stack output portForwardCommand) & then localEndpoint, with the apiKey output",
                      exit_code=EXIT_READY, facts=facts)
    if problems:
        return Report("needs action", problems[0], "; ".join(problems), facts=facts)
    for state in ("failing", "compiling", "starting", "queued for capacity", "stopping"):
        found = [r for r in replicas if r.state == state]
        if found:
            return Report(state, f"no replica serving yet; {len(found)} {state}", found[0].next_step, facts=facts)
    if zero and not replicas:
        # gke.minReplicas 0 and no pod: the healthy idle state, not a fault; the gateway holds what arrives.
        ttl, cold = zero.get("requestTtlSeconds", "?"), zero.get("coldStartSeconds", "?")
        billed = ("no TPU node is left, so only the cluster's baseline is billed" if not nodes else
                  "its TPU node goes once GKE's cluster autoscaler finds it unneeded, then only the baseline is billed")
        return Report("at zero", f"idle at zero replicas, as set (gke.minReplicas 0): {billed}",
                      f"nothing to do. A request wakes it: the gateway holds it (up to {ttl} s) while a TPU node and "
                      f"a replica start (~{cold} s, the scaleToZero output's coldStartSeconds), then serves it; give "
                      "clients a timeout past that (the scaleToZero output's clients line)",
                      exit_code=EXIT_READY, facts=facts)
    return Report("no replicas", "the Deployment has no pods",
                  f"kubectl -n {namespace} describe deployment vllm; `pulumi up` recreates what is missing",
                  facts=facts)
