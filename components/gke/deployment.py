"""The gke wing: everything the gke platform adds to the shared core, and the outputs a newcomer needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_gcp as gcp

from components import serve_command
from components.costs import gke_costs, kv_outputs
from components.gke import compile_cache, compute_class, manifests
from components.gke.autoscaling import HPA_METRIC, Autoscaling, AutoscalingArgs, scale_up_latency
from components.gke.cluster import NODE_ROLE, GkeCluster, GkeClusterArgs, credentials_command
from components.gke.compile_cache import CompileCache, CompileCacheArgs
from components.gke.exposure import CLUSTER_SERVICE, Exposure, ExposureArgs
from components.gke.image_digest import pinned_image
from components.gke.workload import ServingWorkload, ServingWorkloadArgs
from components.identity import VmIdentity, VmIdentityArgs, account_id
from components.secrets import StackSecrets
from components.settings import Settings


@dataclass
class GkeDeploymentArgs:
    settings: Settings
    """The validated stack settings (platform gke)."""
    services: list[gcp.projects.Service]
    """The project's APIs; everything waits for them."""
    workload_identity: VmIdentity
    """The workload's Google service account (the shared core made it; the secrets grant it access)."""
    secrets: StackSecrets
    """The Secret Manager secrets (HF token, API key)."""
    labels: dict[str, str] = field(default_factory=dict)
    """GCP labels of the stack."""


class GkeDeployment(pulumi.ComponentResource):
    """Node identity, cluster (or a reused one), the ComputeClass that makes every TPU node, the shared compile
    cache, the pinned image, serving workload, exposure and autoscaling."""

    outputs: dict[str, Any]

    def __init__(self, name: str, args: GkeDeploymentArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-vllm:gke:Deployment", name, None, opts)
        cfg, gke = args.settings, args.settings.gke
        after_services = pulumi.ResourceOptions(parent=self, depends_on=args.services)
        cluster_name = gke.cluster_name or cfg.resource_prefix

        nodes = VmIdentity(
            f"{name}-nodes",
            VmIdentityArgs(project=cfg.project, account_id=account_id(cfg.resource_prefix, "nodes"),
                           display_name="tpu-vllm GKE nodes",
                           description="The GKE nodes' own identity: logs and metrics. Pods use their own."),
            after_services)
        node_role = gcp.projects.IAMMember(
            f"{name}-nodes-role", project=cfg.project, role=NODE_ROLE,
            member=pulumi.Output.concat("serviceAccount:", nodes.email), opts=pulumi.ResourceOptions(parent=self))
        cluster = GkeCluster(
            f"{name}-cluster",
            GkeClusterArgs(
                project=cfg.project, name=cluster_name, location=gke.location,
                release_channel=gke.release_channel, min_master_version=gke.min_master_version,
                network=cfg.tpu.network, subnetwork=cfg.tpu.subnetwork,
                system_machine_type=gke.system_machine_type, system_node_count=gke.system_node_count,
                system_node_zone=gke.tpu_zones[0], node_service_account_email=nodes.email,
                use_existing=gke.use_existing_cluster, labels=args.labels),
            pulumi.ResourceOptions(parent=self, depends_on=[*args.services, node_role]))
        tpu_class = manifests.declare(
            "tpu-class", compute_class.compute_class(cfg, nodes.email),
            pulumi.ResourceOptions(parent=self, provider=cluster.provider, depends_on=cluster.ready))
        cache = CompileCache("compile-cache", CompileCacheArgs(
            settings=cfg, workload_service_account_email=args.workload_identity.email, labels=args.labels,
            services=args.services), pulumi.ResourceOptions(parent=self))
        image = pinned_image("vllm-image", cfg.vllm.image, pulumi.ResourceOptions(parent=self))
        workload = ServingWorkload(
            "serving",
            ServingWorkloadArgs(
                settings=cfg, namespace=gke.namespace,
                google_service_account_email=args.workload_identity.email,
                hf_token_secret_name=args.secrets.hf_token_secret_name,
                api_key_secret_name=args.secrets.api_key_secret_name,
                image=image, cache_bucket=cache.bucket, compute_class=tpu_class, cache=cache,
                provider=cluster.provider, cluster_ready=cluster.ready),
            pulumi.ResourceOptions(parent=self, depends_on=[args.secrets]))
        exposure = Exposure("exposure", ExposureArgs(settings=cfg, provider=cluster.provider, workload=workload),
                            pulumi.ResourceOptions(parent=self))
        Autoscaling("autoscaling", AutoscalingArgs(
            settings=cfg, provider=cluster.provider, workload=workload,
            install_adapter=gke.install_metrics_adapter, cluster_ready=cluster.ready),
            pulumi.ResourceOptions(parent=self))

        port = cfg.vllm.port
        endpoint = pulumi.Output.concat("http://", exposure.address, f":{port}/v1")
        outputs: dict[str, Any] = {
            "platform": "gke",
            "clusterName": cluster.name,
            "clusterLocation": gke.location,
            "credentialsCommand": cluster.name.apply(lambda n: credentials_command(n, gke.location, cfg.project)),
            "namespace": gke.namespace,
            "computeClass": compute_class.class_name(cfg),
            "computeClassPriorities": compute_class.models(cfg),
            "tpuZones": gke.tpu_zones,
            "nodeRunDuration": cfg.tpu.max_run_duration if cfg.tpu.provisioning_model == "flex-start" else None,
            "nodeRecyclingLeadTime": (gke.recycling_lead_time if cfg.tpu.provisioning_model == "flex-start"
                                      else None),
            "vllmImage": image,
            "compileCacheBucket": cache.bucket,
            "compileCachePath": pulumi.Output.all(cache.bucket, image).apply(
                lambda values: f"gs://{values[0]}/{compile_cache.cache_prefix(values[1], cfg)}"),
            "replicas": {"min": gke.min_replicas, "max": gke.max_replicas},
            "externalEndpoint" if gke.allow_external_load_balancer else "internalEndpoint": endpoint,
            "inClusterEndpoint": exposure.in_cluster_url,
            "portForwardCommand": f"kubectl -n {gke.namespace} port-forward svc/{CLUSTER_SERVICE} {port}:{port}",
            "localEndpoint": f"http://127.0.0.1:{port}/v1",
            "apiKey": args.secrets.api_key,
            "hfTokenSource": args.secrets.hf_token_source,
            "vllmServeCommand": serve_command.render_serve_command(cfg),
            "hpaMetric": f"{HPA_METRIC} (average per pod, target {gke.waiting_requests_target})",
            "scaleUpLatency": scale_up_latency(cfg),
            **gke_costs(cfg),
            **kv_outputs(cfg),
        }
        self.outputs = {key: value for key, value in outputs.items() if value is not None}
        self.register_outputs({"clusterName": cluster.name, "endpoint": endpoint})
