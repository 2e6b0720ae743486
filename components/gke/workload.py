"""The serving workload: a Deployment of vLLM pods, replaced surge-first, one v5e chip each, behind the same
key-checking front as the VM, on nodes only its ComputeClass makes (components/gke/compute_class.py), with one
compile cache every replica shares (components/gke/compile_cache.py) and the tokens mounted as files by the
Secret Manager add-on.

Each pod runs three containers: vLLM (the VM's entry command and exact `vllm serve` flags, on 127.0.0.1), the
front (nginx, the only thing on the serving port) and the metrics door (components/gke/metrics_door.py), which
a NetworkPolicy (components/gke/network_policy.py) opens to Managed Prometheus's collectors only.
"""

from __future__ import annotations

import hashlib
import math
import posixpath
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s
import yaml

from components.gke import compile_cache, compute_class, manifests, metrics_door, network_policy, pod_resources
from components.serving import front
from components.serving.spec import ServingSpec
from components.settings.facts import GKE_ROLLOUT_SURGE_PODS

APP_NAME = "vllm"
KSA_NAME = "vllm"
HEADLESS_SERVICE = "vllm-pods"
CONFIG_MAP = "vllm-front"
HF_TOKEN_CLASS = "vllm-hf-token"
API_KEY_CLASS = "vllm-api-key"
# The Secret Manager add-on: its CSI driver and the SecretProviderClass it reads (provider "gke").
SECRETS_CSI_DRIVER = "secrets-store-gke.csi.k8s.io"
SECRET_PROVIDER_CLASS_API = "secrets-store.csi.x-k8s.io/v1"
WORKLOAD_IDENTITY_USER = "roles/iam.workloadIdentityUser"
TPU_RESOURCE = compute_class.TPU_RESOURCE
PROBE_PERIOD_SECONDS = 10
SHM_PATH = "/dev/shm"


def shm_size(shm_bytes: int) -> str:
    """The emptyDir's sizeLimit, a Kubernetes quantity: whole GiB as written before the spec held the size."""
    if shm_bytes % pod_resources.GIB == 0:
        return f"{shm_bytes // pod_resources.GIB}Gi"
    return f"{shm_bytes // pod_resources.MIB}Mi"


def selector_labels(resource_prefix: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "tpu-vllm", "app.kubernetes.io/instance": resource_prefix}


@dataclass
class ServingPod:
    """The values one serving pod is made of (components/gke/deployment.py): the server, and where it runs."""

    selector_labels: dict[str, str]
    """The labels that pick the stack's pods (selector_labels()); every Service, policy and the HPA select on them."""
    spec: ServingSpec
    """The server (components/serving/spec.py): vLLM's command, environment, ports, the front, the secret files."""
    front_image: pulumi.Input[str]
    """spec.front_image pinned to its digest (components/core/image_digest.py): the front's and the metrics door's."""
    node_selector: dict[str, str]
    """The ComputeClass's node label (compute_class.node_selector)."""
    tolerations: list[dict[str, str]]
    """The ComputeClass's taints the pods tolerate (compute_class.tolerations)."""
    termination_grace_seconds: int
    """gke.terminationGraceSeconds: how long a stopping pod may drain its streams."""
    tpu_chips: int = 1
    """google.com/tpu: every chip of the node (tpu.acceleratorType's, a single-host shape)."""


# Each secret file is 0400, owned by root (the add-on writes as root): only a root process of a container that
# mounts it can read it: vLLM's entry command (both files) and the front's (the key); not nginx's workers, and
# not the metrics door, which mounts neither. The add-on's provider takes a per-file `mode` (octal 0000-0777
# or decimal 0-511: GoogleCloudPlatform/secrets-store-csi-driver-provider-gcp config/config.go, Secret.Mode);
# written in decimal so no YAML reader can take it for the number 400.
SECRET_FILE_MODE = 0o400


def secrets_parameter(secret_name: str, file_name: str) -> str:
    """The add-on's `secrets` parameter: one Secret Manager secret (projects/<p>/secrets/<id>) as one file."""
    return yaml.safe_dump([{"resourceName": f"{secret_name}/versions/latest", "path": file_name,
                            "mode": SECRET_FILE_MODE}], sort_keys=False)


def secret_provider_class(name: str, namespace: str, secrets: pulumi.Input[str]) -> dict[str, Any]:
    """Names of secrets, never their values: the add-on reads them with the pod's Workload Identity."""
    return {
        "apiVersion": SECRET_PROVIDER_CLASS_API, "kind": "SecretProviderClass",
        "metadata": manifests.metadata(name, namespace),
        "spec": {"provider": "gke", "parameters": {"secrets": secrets}},
    }


def config_map_data(spec: ServingSpec) -> dict[str, str]:
    """The ConfigMap's data: the front's nginx.conf (the spec's, as on the VM) and the metrics door's."""
    return {
        posixpath.basename(spec.front_config_path): spec.front_config,
        metrics_door.CONFIG_KEY: metrics_door.nginx_config(upstream_port=spec.upstream_port),
    }


def config_hash(data: dict[str, str]) -> str:
    return hashlib.sha256("\0".join(f"{k}={v}" for k, v in sorted(data.items())).encode()).hexdigest()[:16]


# The pod's stop, inside terminationGracePeriodSeconds (gke.terminationGracePeriod, at most what GKE's cluster
# autoscaler grants a drained pod: components/settings/gke.py GKE_RECYCLE_DRAIN_MAX_SECONDS). The kubelet runs each
# container's preStop, sends SIGTERM when it returns, and SIGKILL when the grace period is over (kubernetes/website
# content/en/docs/concepts/workloads/pods/pod-lifecycle.md, "Termination of Pods"). So each hook returns by a
# deadline of its own, and the pod stops by itself before the kubelet, or the autoscaler, kills what is left.
ENDPOINT_LEAVE_SECONDS = 5
"""How long the front keeps accepting after the stop begins: the endpoint leaves the Services meanwhile."""
STOP_MARGIN_SECONDS = 10
"""The end of the grace period kept for stopping: nginx's fast stop on SIGTERM, then vLLM's."""


# Recycling drains a node through the cluster autoscaler, which by default never removes a node whose pods have a
# disk-backed emptyDir ("local storage"), unless the pod names those volumes as safe to lose (kubernetes/autoscaler
# cluster-autoscaler/utils/drain/drain.go HasBlockingLocalStorage, SafeToEvictLocalVolumesKey; config/flags/flags.go
# --skip-nodes-with-local-storage, default true; cluster-autoscaler-1.36.1). Our own emptyDirs are in memory, but
# the Cloud Storage FUSE webhook adds three on disk for its sidecar's scratch (GoogleCloudPlatform/gcs-fuse-csi-driver
# pkg/webhook/sidecar_spec.go GetSidecarContainerVolumeSpec, pkg/util/util.go, @5fcdc04a). GKE's own value of the
# flag is not published: naming them keeps the node drainable either way, and nothing else is waived.
FUSE_SIDECAR_SCRATCH_VOLUMES = ("gke-gcsfuse-buffer", "gke-gcsfuse-cache", "gke-gcsfuse-tmp")
DRAINABLE_ANNOTATIONS = {"cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes":
                         ",".join(FUSE_SIDECAR_SCRATCH_VOLUMES)}


def front_drain_deadline(grace_seconds: int) -> int:
    """Seconds after the stop begins at which the front stops waiting for its streams."""
    return grace_seconds - STOP_MARGIN_SECONDS


def vllm_drain_deadline(grace_seconds: int) -> int:
    """Seconds after the stop begins at which vLLM stops waiting for the front: after the front's deadline, and
    with half the margin left for vLLM's own exit."""
    return grace_seconds - STOP_MARGIN_SECONDS // 2


def front_drain_command(layout: front.FrontLayout, grace_seconds: int) -> list[str]:
    """preStop: a moment for the endpoint to leave the load balancers, then nginx's graceful quit, which waits for
    every in-flight request and stream, until the deadline; the kubelet's SIGTERM then stops nginx at once
    (streams still open are cut)."""
    pid = f"{layout.run_dir}/nginx.pid"
    deadline = front_drain_deadline(grace_seconds)
    return ["sh", "-c", f"end=$(($(date +%s) + {deadline})); sleep {ENDPOINT_LEAVE_SECONDS}; "
                        f"nginx -c '{layout.config_path}' -s quit; "
                        f"while [ -e '{pid}' ] && [ \"$(date +%s)\" -lt \"$end\" ]; do sleep 1; done"]


def vllm_drain_command(front_port: int, grace_seconds: int) -> list[str]:
    """preStop: vLLM keeps serving until the front has finished its streams and closed its port, or its deadline."""
    deadline = vllm_drain_deadline(grace_seconds)
    return ["bash", "-c", f"end=$(($(date +%s) + {deadline})); "
                          f"while (exec 3<>/dev/tcp/127.0.0.1/{front_port}) 2>/dev/null "
                          f"&& [ \"$(date +%s)\" -lt \"$end\" ]; do sleep 2; done"]


def tpu_container_resources(size: pod_resources.ContainerSize, chips: int = 1) -> dict[str, dict[str, str]]:
    """The chips (an extended resource: its request and limit must be equal) with the container's CPU and memory."""
    resources = size.resources()
    return {"requests": {TPU_RESOURCE: str(chips), **resources["requests"]},
            "limits": {TPU_RESOURCE: str(chips), **resources.get("limits", {})}}


def pod_template(pod: ServingPod, *, service_account: str, image: pulumi.Input[str], cache_bucket: pulumi.Input[str],
                 cache_prefix: pulumi.Input[str], hash_of_config: str) -> dict[str, Any]:
    """image: the pinned repository@sha256 reference; cache_prefix: this configuration's own prefix of the
    shared bucket (compile_cache.cache_prefix)."""
    spec = pod.spec
    config_dir = posixpath.dirname(spec.front_config_path)
    env = [{"name": name, "value": value} for name, value in spec.environment]
    mounts = [
        {"name": "dshm", "mountPath": SHM_PATH},
        {"name": compile_cache.VOLUME, "mountPath": spec.compile_cache_path},
        {"name": "hf-token", "mountPath": posixpath.dirname(spec.hf_token_file), "readOnly": True},
        # The entry command reads the key from here into VLLM_API_KEY, as on the VM.
        {"name": "api-key", "mountPath": posixpath.dirname(spec.api_key_file), "readOnly": True},
    ]
    options = (compile_cache.mount_options(cache_prefix) if isinstance(cache_prefix, str)
               else pulumi.Output.from_input(cache_prefix).apply(compile_cache.mount_options))
    cache_volumes = [compile_cache.csi_volume(compile_cache.VOLUME, cache_bucket, options)]
    if spec.weights_on_disk:
        # The checkpoint does not depend on the image or the flags: one copy for every configuration.
        mounts.append({"name": compile_cache.WEIGHTS_VOLUME, "mountPath": spec.hf_home})
        cache_volumes.append(compile_cache.csi_volume(
            compile_cache.WEIGHTS_VOLUME, cache_bucket, compile_cache.mount_options(compile_cache.WEIGHTS_PREFIX)))
    probe = {"exec": {"command": list(spec.health_command)}, "timeoutSeconds": 5}
    containers = [
        {
            "name": "vllm",
            "image": image,
            # The VM's entry command and arguments: vLLM gets the key from its file, then `vllm serve` runs.
            # vLLM's key check leaves /health and /metrics open (its PUBLIC_ENDPOINTS), so the probes and the
            # metrics door keep working behind it.
            "command": list(spec.vllm_entry),
            "args": list(spec.serve_args),
            "env": env,
            "resources": tpu_container_resources(pod_resources.vllm_size(spec.shm_bytes), pod.tpu_chips),
            "volumeMounts": mounts,
            # A cold start compiles for ~14 min; the probe gives it vllm.healthTimeout.
            "startupProbe": {**probe, "periodSeconds": PROBE_PERIOD_SECONDS,
                             "failureThreshold": math.ceil(spec.health_timeout_seconds / PROBE_PERIOD_SECONDS)},
            "livenessProbe": {**probe, "periodSeconds": 30, "failureThreshold": 3},
            "lifecycle": {"preStop": {"exec": {"command": vllm_drain_command(spec.listen_port,
                                                                              pod.termination_grace_seconds)}}},
        },
        {
            "name": "front",
            "image": pod.front_image,
            "command": list(spec.front_entry),
            "ports": [{"name": "http", "containerPort": spec.listen_port}],
            "readinessProbe": {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 5,
                               "failureThreshold": 2},
            "lifecycle": {"preStop": {"exec": {"command": front_drain_command(spec.front_layout,
                                                                               pod.termination_grace_seconds)}}},
            "resources": pod_resources.FRONT.resources(),
            "volumeMounts": [
                {"name": "front-config", "mountPath": config_dir, "readOnly": True},
                {"name": "api-key", "mountPath": posixpath.dirname(spec.api_key_file), "readOnly": True},
                {"name": "front-run", "mountPath": spec.front_run_dir},
            ],
        },
        {
            "name": "metrics",
            "image": pod.front_image,
            "command": metrics_door.command(f"{config_dir}/{metrics_door.CONFIG_KEY}"),
            "ports": [{"name": metrics_door.METRICS_PORT_NAME, "containerPort": metrics_door.METRICS_PORT}],
            "resources": pod_resources.METRICS_DOOR.resources(),
            "volumeMounts": [{"name": "front-config", "mountPath": config_dir, "readOnly": True}],
        },
    ]
    volumes = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shm_size(spec.shm_bytes)}},
        {"name": "front-run", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
        {"name": "front-config", "configMap": {"name": CONFIG_MAP}},
        {"name": "hf-token", "csi": {"driver": SECRETS_CSI_DRIVER, "readOnly": True,
                                     "volumeAttributes": {"secretProviderClass": HF_TOKEN_CLASS}}},
        {"name": "api-key", "csi": {"driver": SECRETS_CSI_DRIVER, "readOnly": True,
                                    "volumeAttributes": {"secretProviderClass": API_KEY_CLASS}}},
        *cache_volumes,
    ]
    return {
        "metadata": {"labels": dict(pod.selector_labels),
                     "annotations": {"tpu-vllm/front-config-sha256": hash_of_config, **compile_cache.POD_ANNOTATIONS,
                                     **DRAINABLE_ANNOTATIONS}},
        "spec": {
            "serviceAccountName": service_account,
            # No Service "links": by default the kubelet writes <NAME>_PORT=tcp://<ip>:<port> and more for every
            # Service of the namespace into every container (kubernetes/kubernetes pkg/kubelet/kubelet_pods.go
            # getServiceEnvVarMap, pkg/kubelet/envvars/envvars.go), so our Service `vllm` set VLLM_PORT, which
            # vLLM reads as its own port and refuses as a URI (vllm/envs.py get_vllm_port). Off, only the
            # `kubernetes` Service's variables remain (tests/test_gke_service_links.py).
            "enableServiceLinks": False,
            # Only nodes the stack's ComputeClass made carry its label (and taint).
            "nodeSelector": dict(pod.node_selector),
            "tolerations": [dict(toleration) for toleration in pod.tolerations],
            "terminationGracePeriodSeconds": pod.termination_grace_seconds,
            "containers": containers,
            "volumes": volumes,
        },
    }


# Surge-first: on a template change (a serve flag, the image, the front's config) the Deployment controller scales
# the new ReplicaSet up by maxSurge at once, and scales the old one down only as new pods become available, never
# below the wanted count with maxUnavailable 0 (kubernetes/website content/en/docs/concepts/workloads/controllers/
# deployment.md, "Max Surge" / "Max Unavailable"; kubernetes/kubernetes pkg/controller/deployment/rolling.go
# reconcileNewReplicaSet / reconcileOldReplicaSets, v1.33). And when a pod is evicted (a node drained at a run
# end), its ReplicaSet counts it gone from the moment it has a deletionTimestamp (pkg/controller/controller_utils.go
# IsPodActive, v1.33) and creates the replacement while the old pod still drains its streams.
# A StatefulSet does neither: its rolling update deletes a pod and creates its successor only after the old one has
# terminated, with no surge field at all (statefulset.md, "Rolling Updates"; pkg/apis/apps/types.go
# RollingUpdateStatefulSetStrategy has maxUnavailable only, v1.33), and it recreates an evicted `vllm-0` only once
# the old `vllm-0` is gone (same name). Nothing here needs its stable names or volume claims: every replica mounts
# the same bucket.
ROLLOUT_STRATEGY = {"type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": GKE_ROLLOUT_SURGE_PODS, "maxUnavailable": 0}}
SURGE_PODS = GKE_ROLLOUT_SURGE_PODS
# Only the Deployment's own pods carry this label: its selector (what the HPA's scale subresource reports, and
# so what the HPA averages over) never counts a pod of another controller that shares the Services' labels,
# such as the StatefulSet's pods while a stack moves from the StatefulSet to the Deployment.
CONTROLLER_LABEL = {"tpu-vllm/controller": "deployment"}
REVISION_HISTORY = 3


def deployment(pod: ServingPod, namespace: str, *, ready_timeout_seconds: int, service_account: str,
               image: pulumi.Input[str], cache_bucket: pulumi.Input[str], cache_prefix: pulumi.Input[str],
               hash_of_config: str) -> dict[str, Any]:
    """ready_timeout_seconds: how long `pulumi up` waits for a ready replica, and how long the controller lets a
    rollout make no progress before it reports ProgressDeadlineExceeded (its default, 600 s, is shorter than a
    flex-start queue plus a cold compile)."""
    labels = {**pod.selector_labels, **CONTROLLER_LABEL}
    template = pod_template(pod, service_account=service_account, image=image, cache_bucket=cache_bucket,
                            cache_prefix=cache_prefix, hash_of_config=hash_of_config)
    template["metadata"]["labels"] = dict(labels)
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": manifests.metadata(APP_NAME, namespace, dict(pod.selector_labels),
                                       {"pulumi.com/timeoutSeconds": str(ready_timeout_seconds)}),
        "spec": {
            # No `replicas`: the HPA owns it (Pulumi would reset it on every update otherwise).
            "selector": {"matchLabels": labels},
            "strategy": ROLLOUT_STRATEGY,
            "progressDeadlineSeconds": ready_timeout_seconds,
            "revisionHistoryLimit": REVISION_HISTORY,
            "template": template,
        },
    }


def serving_service(labels: dict[str, str], serving_port: int, name: str, namespace: str, spec: dict[str, Any],
                    annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A Service in front of the pods' front door (the serving port, named `http`); `spec` adds its kind."""
    labels = dict(labels)
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": manifests.metadata(name, namespace, labels, annotations),
        "spec": {**spec, "selector": labels,
                 "ports": [{"name": "http", "port": serving_port, "targetPort": "http", "protocol": "TCP"}]},
    }


def headless_service(pod: ServingPod, namespace: str) -> dict[str, Any]:
    return serving_service(pod.selector_labels, pod.spec.listen_port, HEADLESS_SERVICE, namespace,
                           {"clusterIP": "None"})


def disruption_budget(labels: dict[str, str], namespace: str) -> dict[str, Any]:
    """Voluntary evictions (a node drain, an upgrade, the autoscaler's scale-down) take one ready replica at a
    time: at 2 or more replicas the others keep serving while one moves. At 1 replica no budget can help: one that
    blocked (maxUnavailable 0) would only turn GKE's graceful drain into a stop at the node's end, so the single
    replica may be evicted, and the gap is the warm start the settings warn about (gke.minReplicas).
    A replica that is not ready (still compiling, or failing) never holds a drain up: AlwaysAllow evicts
    unhealthy pods whatever the budget (kubernetes/website content/en/docs/tasks/run-application/
    configure-pdb.md, "Unhealthy Pod Eviction Policy"; policy/v1 PodDisruptionBudgetSpec, GA in v1.31)."""
    labels = dict(labels)
    return {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": manifests.metadata(APP_NAME, namespace, labels),
        "spec": {"maxUnavailable": 1, "unhealthyPodEvictionPolicy": "AlwaysAllow",
                 "selector": {"matchLabels": labels}},
    }


def service_account(namespace: str, google_service_account: pulumi.Input[str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": manifests.metadata(KSA_NAME, namespace,
                                       annotations={"iam.gke.io/gcp-service-account": google_service_account}),
    }


def workload_identity_member(project: str, namespace: str, ksa: str) -> str:
    return f"serviceAccount:{project}.svc.id.goog[{namespace}/{ksa}]"


def bind_workload_identity(name: str, project: str, google_account_email: pulumi.Input[str], namespace: str,
                           ksa: str, opts: pulumi.ResourceOptions) -> gcp.serviceaccount.IAMMember:
    """Lets the Kubernetes service account `namespace/ksa` act as the Google service account."""
    return gcp.serviceaccount.IAMMember(
        name,
        service_account_id=pulumi.Output.concat("projects/", project, "/serviceAccounts/", google_account_email),
        role=WORKLOAD_IDENTITY_USER,
        member=workload_identity_member(project, namespace, ksa),
        opts=opts,
    )


@dataclass
class ServingWorkloadArgs:
    project: str
    """The project whose Workload Identity pool (<project>.svc.id.goog) the pods' service account is in."""
    namespace: str
    """The Kubernetes namespace the stack creates and deploys into."""
    pod: ServingPod
    """What each serving pod is made of."""
    ready_timeout_seconds: int
    """How long `pulumi up` waits for a ready replica: tpu.queueTimeout (a flex-start node may queue) plus
    vllm.healthTimeout (a cold compile)."""
    chip_quota: dict[str, Any]
    """The namespace's ResourceQuota on TPU chips (compute_class.chip_quota)."""
    configuration_key: str
    """The compile cache's key of the serve flags (compile_cache.flags_key); with the image's digest, the pods'
    own prefix of the shared bucket."""
    google_service_account_email: pulumi.Input[str]
    """The workload's Google identity: secretAccessor on the stack's two secrets and objectUser on the cache bucket."""
    hf_token_secret_name: pulumi.Input[str]
    """projects/<project>/secrets/<id> of the HF token."""
    api_key_secret_name: pulumi.Input[str]
    """projects/<project>/secrets/<id> of the API key."""
    image: pulumi.Input[str]
    """vllm.image pinned to its digest (components/core/image_digest.py), through the Docker Hub mirror when on."""
    cache_bucket: pulumi.Input[str]
    """The shared compile-cache bucket (components/gke/compile_cache.py)."""
    compute_class: pulumi.Resource
    """The ComputeClass the pods select (it must exist before they ask for a node)."""
    cache: pulumi.Resource
    """The bucket and its grant (the pods' mount needs both)."""
    provider: k8s.Provider
    """The cluster's Kubernetes provider."""
    cluster_ready: list[pulumi.Resource] = field(default_factory=list)
    """The cluster (its workload pool must exist before the Workload Identity binding)."""


class ServingWorkload(pulumi.ComponentResource):
    """Namespace, the chip quota, front ConfigMap, SecretProviderClasses, the Kubernetes service account
    bound by Workload Identity, the headless Service, the pods' NetworkPolicy, the Deployment and its
    PodDisruptionBudget."""

    namespace: pulumi.Output[str]
    deployment: pulumi.CustomResource

    def __init__(self, name: str, args: ServingWorkloadArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-vllm:gke:ServingWorkload", name, None, opts)
        ns, pod = args.namespace, args.pod
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider)

        namespace = manifests.declare(f"{name}-namespace", {
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": manifests.metadata(ns, labels=dict(pod.selector_labels))}, k8s_opts)
        in_namespace = pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=[namespace]))
        quota = manifests.declare(f"{name}-chip-quota", args.chip_quota, in_namespace)
        data = config_map_data(pod.spec)
        config_map = manifests.declare(f"{name}-front-config", {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": manifests.metadata(CONFIG_MAP, ns, dict(pod.selector_labels)), "data": data}, in_namespace)
        hf_class = manifests.declare(f"{name}-hf-token-class", secret_provider_class(
            HF_TOKEN_CLASS, ns, pulumi.Output.from_input(args.hf_token_secret_name).apply(
                lambda secret: secrets_parameter(secret, posixpath.basename(pod.spec.hf_token_file)))), in_namespace)
        api_class = manifests.declare(f"{name}-api-key-class", secret_provider_class(
            API_KEY_CLASS, ns, pulumi.Output.from_input(args.api_key_secret_name).apply(
                lambda secret: secrets_parameter(secret, posixpath.basename(pod.spec.api_key_file)))), in_namespace)
        ksa = manifests.declare(f"{name}-ksa", service_account(ns, args.google_service_account_email), in_namespace)
        binding = bind_workload_identity(
            f"{name}-workload-identity", args.project, args.google_service_account_email, ns, KSA_NAME,
            pulumi.ResourceOptions(parent=self, depends_on=args.cluster_ready))
        headless = manifests.declare(f"{name}-pods", headless_service(pod, ns), in_namespace)
        # Before the first pod: no moment where its metrics door is open to the cluster.
        ingress = manifests.declare(f"{name}-network-policy", network_policy.pod_network_policy(
            ns, dict(pod.selector_labels), pod.spec.listen_port), in_namespace)
        # A new Pulumi name (and kind) for the move from the StatefulSet of earlier versions: Pulumi creates this
        # Deployment, waits for its first replica to be ready, and deletes the StatefulSet only after every new
        # resource, so a stack that serves keeps serving through the move (docs/gke.md, "Changing a serving stack").
        self.deployment = manifests.declare(
            f"{name}-deployment",
            deployment(pod, ns, ready_timeout_seconds=args.ready_timeout_seconds, service_account=KSA_NAME,
                        image=args.image, cache_bucket=args.cache_bucket,
                        cache_prefix=pulumi.Output.from_input(args.image).apply(
                            lambda pinned: compile_cache.cache_prefix(pinned, args.configuration_key)),
                        hash_of_config=config_hash(data)),
            pulumi.ResourceOptions.merge(in_namespace, pulumi.ResourceOptions(
                depends_on=[quota, config_map, hf_class, api_class, ksa, binding, headless, ingress,
                            args.compute_class, args.cache])))
        manifests.declare(f"{name}-disruption-budget", disruption_budget(pod.selector_labels, ns), in_namespace)
        self.namespace = pulumi.Output.from_input(ns)
        self.register_outputs({"namespace": self.namespace})
