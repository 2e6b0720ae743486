"""The GKE Standard cluster (or one you already run), its small CPU system pool, and a Kubernetes provider
that talks to it with the gke-gcloud-auth-plugin (no token ever lands in the kubeconfig or in state)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.basis import price_list
from components.settings import NAMESPACE, gke_version_at_least
from components.settings.checks.scale_to_zero import ZERO_MIN_VERSION_REASON, ZERO_MIN_VERSION_TEXT, minor_at_least
from components.settings.facts import STACK_VERSION_FLOOR, VersionFloor
from components.settings.gateway import GATEWAY_CRDS_VERSION

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
# What GKE's nodes need to write logs and metrics, and nothing else (a project-level role by design).
NODE_ROLE = "roles/container.defaultNodeServiceAccount"
SYSTEM_POOL_NAME = "system"
# Every node's boot disk (priced in components/basis/price_list.py).
BOOT_DISK_GB = price_list.GKE_BOOT_DISK_GB
BOOT_DISK_TYPE = price_list.GKE_BOOT_DISK_TYPE
# GKE Dataplane V2 enforces Kubernetes NetworkPolicy (components/gke/network_policy.py) with no add-on.
DATAPATH_PROVIDER = "ADVANCED_DATAPATH"
AUTH_PLUGIN_HINT = ("Install gke-gcloud-auth-plugin: gcloud components install gke-gcloud-auth-plugin "
                    "(cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl)")


def kubeconfig(cluster_name: str, endpoint: str, ca_certificate: str) -> str:
    """A kubeconfig whose user runs gke-gcloud-auth-plugin for a short-lived token at each call."""
    return json.dumps({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name,
                      "cluster": {"server": f"https://{endpoint}", "certificate-authority-data": ca_certificate}}],
        "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": cluster_name}}],
        "current-context": cluster_name,
        "users": [{"name": cluster_name, "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "gke-gcloud-auth-plugin",
            "installHint": AUTH_PLUGIN_HINT,
            "provideClusterInfo": True,
        }}}],
    }, indent=2)


def credentials_command(cluster_name: str, location: str, project: str) -> str:
    return f"gcloud container clusters get-credentials {cluster_name} --location {location} --project {project}"


# Why the gateway needs GATEWAY_CRDS_VERSION (components/settings/gateway.py): the stack installs no CRDs.
GATEWAY_VERSION_REASON = ("from it GKE installs the Gateway API and InferencePool CRDs gke.inferenceGateway's "
                          "objects need; the stack installs none")
# The Gateway API channels that serve the v1 Gateway and HTTPRoute (pulumi-gcp 10.2.0 container/outputs.py,
# gateway_api_config.channel: CHANNEL_DISABLED, CHANNEL_EXPERIMENTAL or CHANNEL_STANDARD).
GATEWAY_API_ON = ("CHANNEL_STANDARD", "CHANNEL_EXPERIMENTAL")


def check_channel_version(channel: str, default_version: str | None, gateway: bool = False,
                          scale_to_zero: bool = False, floor: VersionFloor = STACK_VERSION_FLOOR) -> str | None:
    """The problem with a release channel whose default is too old for the stack's TPU node pools (`floor`: the
    ComputeClass's, or the generation's, TPU7x's), or, with gke.inferenceGateway, for the CRDs GKE installs from
    GATEWAY_CRDS_VERSION; with gke.minReplicas 0, for the HPA at zero), or None."""
    if default_version is None:
        return None
    if scale_to_zero and minor_at_least(default_version) is not True:
        return (f"{NAMESPACE}:gke.releaseChannel = {channel!r}: its default version here is {default_version}, "
                f"older than {ZERO_MIN_VERSION_TEXT} ({ZERO_MIN_VERSION_REASON}), which gke.minReplicas: 0 needs; "
                f"set gke.minMasterVersion to {ZERO_MIN_VERSION_TEXT}, use a channel whose default is that recent "
                "(RAPID), or set gke.minReplicas to 1")
    if gke_version_at_least(default_version, floor.version) is False:
        return (f"{NAMESPACE}:gke.releaseChannel = {channel!r}: its default version here is {default_version}, "
                f"older than {floor.version} ({floor.reason}); use RAPID or REGULAR, "
                f"or set gke.minMasterVersion to {floor.pin}")
    if gateway and gke_version_at_least(default_version, GATEWAY_CRDS_VERSION) is False:
        return (f"{NAMESPACE}:gke.releaseChannel = {channel!r}: its default version here is {default_version}, "
                f"older than {GATEWAY_CRDS_VERSION} ({GATEWAY_VERSION_REASON}); set gke.minMasterVersion to "
                f"{GATEWAY_CRDS_VERSION} or later (e.g. 1.35), use a channel whose default is that recent "
                "(RAPID or REGULAR), or turn off gke.inferenceGateway")
    return None


def network_policy_enforced(cluster: gcp.container.GetClusterResult) -> bool:
    """Dataplane V2 enforces NetworkPolicy itself; otherwise GKE's Calico add-on must be on."""
    if cluster.datapath_provider == DATAPATH_PROVIDER:
        return True
    return any(policy.enabled for policy in cluster.network_policies or [])


def existing_cluster_problems(cluster: gcp.container.GetClusterResult, project: str, gateway: bool = False,
                              scale_to_zero: bool = False, floor: VersionFloor = STACK_VERSION_FLOOR) -> list[str]:
    """What a reused cluster lacks for this stack (with gke.inferenceGateway, also for the gateway), each with
    the gcloud fix."""
    where = f"{cluster.name} --location {cluster.location} --project {project}"
    problems = []
    if cluster.enable_autopilot:
        # Autopilot runs Managed Prometheus's collectors in gke-gmp-system (llm-d-router v0.10.0
        # config/charts/epplib/templates/_gke.yaml: `if $isAutopilot`, `$gmpNamespace = "gke-gmp-system"`), not in
        # the gmp-system the pods' network policies admit: the HPA's metrics would never be scraped.
        problems.append("it is an Autopilot cluster, whose Managed Prometheus collectors run in gke-gmp-system, "
                        "which the stack's network policies do not admit (the autoscaler's metrics would never "
                        "arrive): name a Standard cluster, or set gke.useExistingCluster to false to let the stack "
                        "make one")
    pools = [c.workload_pool for c in cluster.workload_identity_configs or [] if c.workload_pool]
    if not pools:
        problems.append("Workload Identity is off (pods could not read their secrets): gcloud container clusters "
                        f"update {where} --workload-pool={project}.svc.id.goog")
    if not any(c.enabled for c in cluster.secret_manager_configs or []):
        problems.append("the Secret Manager add-on is off (it mounts the tokens as files): gcloud container "
                        f"clusters update {where} --enable-secret-manager")
    prometheus = [p for c in cluster.monitoring_configs or [] for p in c.managed_prometheuses or []]
    if not any(p.enabled for p in prometheus):
        problems.append("Managed Service for Prometheus is off (the HPA's queue metric comes from it): gcloud "
                        f"container clusters update {where} --enable-managed-prometheus")
    if not network_policy_enforced(cluster):
        problems.append(
            "network policy is not enforced (the pods' NetworkPolicy keeps the unauthenticated metrics port for "
            "Managed Prometheus only; without enforcement every pod in the cluster can read it): gcloud container "
            f"clusters update {where} --update-addons=NetworkPolicy=ENABLED, then gcloud container clusters "
            f"update {where} --enable-network-policy (Dataplane V2, which enforces it by itself, is chosen when "
            "a cluster is created: --enable-dataplane-v2)")
    gcs_fuse = [c for a in cluster.addons_configs or [] for c in a.gcs_fuse_csi_driver_configs or []]
    if not any(c.enabled for c in gcs_fuse):
        problems.append("the Cloud Storage FUSE CSI driver is off (every replica mounts the shared compile cache "
                        f"with it): gcloud container clusters update {where} --update-addons GcsFuseCsiDriver=ENABLED")
    if cluster.master_version and gke_version_at_least(cluster.master_version, floor.version) is False:
        problems.append(f"it runs GKE {cluster.master_version}, older than {floor.version} "
                        f"({floor.reason}): gcloud container clusters upgrade {where} --master "
                        f"--cluster-version {floor.version}")
    if gateway:
        problems.extend(_gateway_problems(cluster, where))
    if scale_to_zero and cluster.master_version and minor_at_least(cluster.master_version) is not True:
        problems.append(f"it runs GKE {cluster.master_version}, older than {ZERO_MIN_VERSION_TEXT} "
                        f"({ZERO_MIN_VERSION_REASON}), which gke.minReplicas: 0 needs: gcloud container clusters "
                        f"upgrade {where} --master --cluster-version {ZERO_MIN_VERSION_TEXT}, or set gke.minReplicas "
                        "to 1")
    return problems


def _gateway_problems(cluster: gcp.container.GetClusterResult, where: str) -> list[str]:
    """What a reused cluster lacks for gke.inferenceGateway: GKE's Gateway controller and the CRDs."""
    problems = []
    if not any(c.channel in GATEWAY_API_ON for c in cluster.gateway_api_configs or []):
        problems.append("the Gateway API is off (gke.inferenceGateway's Gateway needs GKE's Gateway controller): "
                        f"gcloud container clusters update {where} --gateway-api=standard")
    if cluster.master_version and gke_version_at_least(cluster.master_version, GATEWAY_CRDS_VERSION) is False:
        problems.append(f"it runs GKE {cluster.master_version}, older than {GATEWAY_CRDS_VERSION} "
                        f"({GATEWAY_VERSION_REASON}): gcloud container clusters upgrade {where} --master "
                        f"--cluster-version {GATEWAY_CRDS_VERSION}, or turn off gke.inferenceGateway")
    return problems


@dataclass
class GkeClusterArgs:
    project: str
    """The project of the cluster and its node service account."""
    name: str
    """The cluster's name (created, or looked up with use_existing)."""
    location: str
    """A zone (zonal cluster) or a region (regional control plane)."""
    release_channel: str
    """RAPID, REGULAR or STABLE; its default must support flex-start TPU."""
    min_master_version: str | None
    """A pinned minimum version, already checked against the flex-start minimum; None takes the channel's."""
    network: str
    """The VPC (the same setting as the VM's, tpu.network)."""
    subnetwork: str | None
    """Optional subnetwork of that VPC."""
    system_machine_type: str
    """The CPU system pool's machine (priced in components/basis/price_list.py)."""
    system_node_count: int
    """Nodes in the system pool (per zone it lists, which is one)."""
    system_node_zone: str
    """The one zone of the system pool."""
    node_service_account_email: pulumi.Input[str]
    """The nodes' own identity (logs and metrics only)."""
    use_existing: bool = False
    """Reuse the named cluster instead of creating one: no cluster, no system pool, no fee in the plan."""
    labels: dict[str, str] = field(default_factory=dict)
    """GCP labels for the cluster and the system pool's VMs."""
    gateway_api: bool = False
    """Turn on GKE's Gateway controller, standard channel (gke.inferenceGateway): it runs the Gateway's load
    balancer, and from 1.34.0-gke.1626000 GKE installs the Gateway API and InferencePool CRDs with it."""
    scale_to_zero: bool = False
    """gke.minReplicas is 0: the channel's default or the reused cluster must be GKE 1.37 or later."""
    version_floor: VersionFloor = STACK_VERSION_FLOOR
    """The version the TPU node pools need (components/settings/facts.py gke_version_floor)."""


class GkeCluster(pulumi.ComponentResource):
    """A Standard cluster with Workload Identity, the Secret Manager add-on, Managed Prometheus and Dataplane V2
    (NetworkPolicy enforcement), the default pool removed and a small CPU system pool; `provider` deploys
    into it."""

    name: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    provider: k8s.Provider
    system_pool: gcp.container.NodePool | None
    """None when reusing a cluster (it has its own system nodes)."""
    ready: list[pulumi.Resource]
    """What node pools and workloads must wait for."""

    def __init__(self, name: str, args: GkeClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-vllm:gke:Cluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.system_pool = None
        if args.use_existing:
            existing = gcp.container.get_cluster(name=args.name, location=args.location, project=args.project)
            problems = existing_cluster_problems(existing, args.project, gateway=args.gateway_api,
                                                 scale_to_zero=args.scale_to_zero, floor=args.version_floor)
            if problems:
                raise pulumi.RunError(
                    f"{NAMESPACE}:gke.clusterName = {args.name!r} (useExistingCluster): the cluster cannot host "
                    "this stack yet:\n  - " + "\n  - ".join(problems))
            self.name = pulumi.Output.from_input(existing.name)
            self.endpoint = pulumi.Output.from_input(existing.endpoint)
            ca_certificate = pulumi.Output.from_input(existing.master_auths[0].cluster_ca_certificate)
            self.ready = []
        else:
            self._check_channel(args)
            cluster = gcp.container.Cluster(
                name,
                project=args.project,
                name=args.name,
                location=args.location,
                # A cluster starts with a default pool; the separately managed pools below replace it.
                remove_default_node_pool=True,
                initial_node_count=1,
                node_config={"service_account": args.node_service_account_email,
                             "oauth_scopes": [CLOUD_PLATFORM_SCOPE]},
                release_channel={"channel": args.release_channel},
                min_master_version=args.min_master_version,
                networking_mode="VPC_NATIVE",
                datapath_provider=DATAPATH_PROVIDER,
                ip_allocation_policy={},
                network=args.network,
                subnetwork=args.subnetwork,
                workload_identity_config={"workload_pool": f"{args.project}.svc.id.goog"},
                secret_manager_config={"enabled": True},
                # Mounts the shared compile-cache bucket in every pod (components/gke/compile_cache.py).
                addons_config={"gcs_fuse_csi_driver_config": {"enabled": True}},
                monitoring_config={"managed_prometheus": {"enabled": True}},
                resource_labels=args.labels,
                # Only when asked, so the default cluster's plan is unchanged (terraform-provider-google
                # container_cluster gateway_api_config.channel, CHANNEL_STANDARD).
                **({"gateway_api_config": {"channel": "CHANNEL_STANDARD"}} if args.gateway_api else {}),
                # `pulumi destroy` must be able to remove what `pulumi up` made.
                deletion_protection=False,
                opts=child,
            )
            self.system_pool = gcp.container.NodePool(
                f"{name}-system",
                project=args.project,
                cluster=cluster.name,
                location=args.location,
                name=SYSTEM_POOL_NAME,
                node_locations=[args.system_node_zone],
                node_count=args.system_node_count,
                management={"auto_repair": True, "auto_upgrade": True},
                node_config={
                    "machine_type": args.system_machine_type,
                    "disk_size_gb": BOOT_DISK_GB,
                    "disk_type": BOOT_DISK_TYPE,
                    "service_account": args.node_service_account_email,
                    "oauth_scopes": [CLOUD_PLATFORM_SCOPE],
                    "resource_labels": args.labels,
                    "workload_metadata_config": {"mode": "GKE_METADATA"},
                },
                opts=child,
            )
            self.name = cluster.name
            self.endpoint = cluster.endpoint
            ca_certificate = cluster.master_auth.cluster_ca_certificate
            self.ready = [cluster, self.system_pool]

        config = pulumi.Output.all(self.name, self.endpoint, ca_certificate).apply(
            lambda values: kubeconfig(*values))
        self.provider = k8s.Provider(
            f"{name}-k8s", kubeconfig=config,
            opts=pulumi.ResourceOptions(parent=self, depends_on=self.ready))
        self.register_outputs({"name": self.name, "endpoint": self.endpoint})

    @staticmethod
    def _check_channel(args: GkeClusterArgs) -> None:
        """At preview, before the cluster exists: the channel's default must run flex-start TPU pools (and, with
        the gateway, come with its CRDs)."""
        if args.min_master_version is not None:
            return  # checked by the settings already
        try:
            versions = gcp.container.get_engine_versions(location=args.location, project=args.project)
        except Exception as error:  # the API may not be enabled yet on a fresh project
            pulumi.log.warn(f"gke.releaseChannel: could not read {args.release_channel}'s default version ({error}); "
                            f"if it is older than {args.version_floor.version} ({args.version_floor.reason}), "
                            "the ComputeClass cannot create its TPU nodes")
            return
        default = (versions.release_channel_default_version or {}).get(args.release_channel)
        problem = check_channel_version(args.release_channel, default, gateway=args.gateway_api,
                                        scale_to_zero=args.scale_to_zero, floor=args.version_floor)
        if problem:
            raise pulumi.RunError(problem)
