"""The gke wing: everything the gke platform adds to the shared core, and the outputs a newcomer needs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp

from components import catalog
from components.basis import naming
from components.basis.chip_memory import KvBudget
from components.core.identity import ServiceIdentity, ServiceIdentityArgs
from components.core.image_digest import pinned_image
from components.core.shared_resources import Core
from components.economics.costs import baseline, gke_costs, replica_usd_per_hour
from components.gke import compile_cache, compute_class, manifests, scale_to_zero
from components.gke.autoscaling import HPA_METRIC, Autoscaling, AutoscalingArgs, scale_up_latency
from components.gke.capacity import kv_outputs
from components.gke.cluster import NODE_ROLE, GkeCluster, GkeClusterArgs, credentials_command
from components.gke.compile_cache import CompileCache, CompileCacheArgs
from components.gke.exposure import CLUSTER_SERVICE, Exposure, ExposureArgs
from components.gke.gateway import InferenceGateway, InferenceGatewayArgs, gateway_endpoint
from components.gke.inference_pool import PICKER_IMAGE, PICKER_NAME
from components.gke.registry_mirror import DockerHubMirror, DockerHubMirrorArgs, repository_id, through_mirror
from components.gke.workload import (
    APP_NAME,
    SURGE_PODS,
    ServingPod,
    ServingWorkload,
    ServingWorkloadArgs,
    selector_labels,
)
from components.monitoring.promql import Scope, layout_note
from components.monitoring.resources import OperatorMonitoring, OperatorMonitoringArgs
from components.serving.serve_command import render_serve_args
from components.serving.spec import ServingSpec, serving_spec
from components.settings import Settings
from components.settings.access import AccessSettings
from components.settings.facts import gke_version_floor
from components.settings.gke import GkeSettings


def configuration_key(spec: ServingSpec) -> str:
    """The compile cache's key: the `vllm serve` flags and tpu-inference variables that change compiled programs
    (compile_cache.COMPILED_FLAGS, COMPILED_VARIABLES)."""
    return compile_cache.flags_key(list(spec.serve_args), dict(spec.backend_environment))


def write_prefixes(spec: ServingSpec, pinned_image: str) -> list[str]:
    """Where the pods may create compile-cache objects: this configuration's prefix (the shared checkpoint's prefix
    has a grant of its own: CompileCacheArgs.weights_on_disk)."""
    return [compile_cache.cache_prefix(pinned_image, configuration_key(spec))]


def serving_pod(spec: ServingSpec, *, resource_prefix: str, models: list[str], gke: GkeSettings,
                front_image: pulumi.Input[str] | None = None,
                shape: catalog.Shape = compute_class.DEFAULT_SHAPE) -> ServingPod:
    """One serving pod's values: the spec, and where it runs (the gke section, the class of `models` on nodes of
    `shape`, every chip of one node to the pod); front_image: the spec's front image pinned to its digest (as
    written when not given)."""
    name = compute_class.class_name(resource_prefix, shape)
    return ServingPod(
        selector_labels=selector_labels(resource_prefix), spec=spec,
        front_image=spec.front_image if front_image is None else front_image,
        node_selector=compute_class.node_selector(name, shape), tolerations=compute_class.tolerations(name, models),
        termination_grace_seconds=gke.termination_grace_seconds, tpu_chips=shape.gke_tpu_count)


def exposure_args(gke: GkeSettings, access: AccessSettings, *, resource_prefix: str, serving_port: int,
                  provider: pulumi.ProviderResource, workload: pulumi.Resource) -> ExposureArgs:
    return ExposureArgs(
        namespace=gke.namespace, selector_labels=selector_labels(resource_prefix),
        serving_port=serving_port, allow_external_load_balancer=gke.allow_external_load_balancer,
        internal_source_ranges=list(access.internal_source_ranges),
        serving_source_ranges=list(access.serving_source_ranges), provider=provider, workload=workload,
        passthrough_load_balancer=gke.inference_gateway is None)


def picker_series(cluster_name: str, namespace: str) -> dict[str, str]:
    """The labels of the picker's series in Managed Prometheus: its PodMonitoring's name is their `job`
    (components/gke/scale_to_zero.py); the dashboard, the alert and the HPA's AutoscalingMetric select by them."""
    return {"cluster": cluster_name, "namespace": namespace, "job": PICKER_NAME}


def engine_series(cluster_name: str, namespace: str) -> dict[str, str]:
    """The labels of the serving pods' series in Managed Prometheus (their PodMonitoring's name is the `job`)."""
    return {"cluster": cluster_name, "namespace": namespace, "job": APP_NAME}


def replica_text(shape) -> str:
    """What one replica runs on, for the dashboard's note: one chip, or one node of several."""
    if shape.chips == 1:
        return f"one {shape.generation.name} chip"
    return f"one {shape.accelerator_type} node ({shape.chips} {shape.generation.name} chips)"


def monitoring_scope(gke: GkeSettings, *, stack: str, cluster_name: str, provisioning_model: str,
                     max_run_duration: str, kv: KvBudget | None, replica_usd_per_hour: float | None,
                     baseline_usd_per_hour: float, devices: int = 1, engines: int = 1,
                     zero: scale_to_zero.ZeroPool | None = None, replica: str = "one v5e chip") -> Scope:
    """The serving pods' series: Managed Prometheus labels each with `cluster`, `namespace`, the PodMonitoring's name
    as `job` and `<pod>:<port name>` as `instance` (GoogleCloudPlatform/prometheus-engine
    pkg/operator/apis/monitoring/v1/pod_config.go @01e7efc); split by replica on `instance`."""
    model = provisioning_model
    rate = "price not found" if replica_usd_per_hour is None else f"${replica_usd_per_hour:.2f}/replica-hour"
    notes = [f"{gke.min_replicas}..{gke.max_replicas} replicas of {replica}, {model} at "
             f"{rate}; the cluster's baseline ${baseline_usd_per_hour:.2f}/hour"]
    if model == "flex-start":
        notes.append(f"Each node runs {max_run_duration}; its replacement comes up "
                     f"{gke.recycling_lead_time} before the end (node recycling)")
    if engines > 1:
        notes.append(layout_note(devices, engines) + " in each pod")
    if zero is not None:
        notes.append(f"The pool goes to zero after {gke.scale_to_zero_after} with nothing held or running; the "
                     f"gateway holds a request up to {zero.request_ttl_seconds} s while it wakes")
    picker_labels = picker_series(cluster_name, gke.namespace) if zero is not None else None
    return Scope(title=f"tpu-vllm {stack} (gke)", picker_labels=picker_labels,
                 labels=engine_series(cluster_name, gke.namespace),
                 kv=kv, replicas=True, usd_per_hour=replica_usd_per_hour,
                 baseline_usd_per_hour=baseline_usd_per_hour, notes=tuple(notes), engines=engines)


@dataclass
class GkeWingArgs:
    settings: Settings
    """The validated stack settings (platform gke)."""
    core: Core
    """The shared core: APIs (everything waits for them), the pods' identity (the secrets grant it access),
    the secrets, the labels."""


class GkeWing(pulumi.ComponentResource):
    """Node identity, cluster (or a reused one), the ComputeClass that makes every TPU node, the shared compile
    cache, the pinned image, serving workload, exposure and autoscaling."""

    outputs: dict[str, Any]

    def __init__(self, name: str, args: GkeWingArgs, opts: pulumi.ResourceOptions | None = None):
        # The type token keeps the name it had before the wing was called a wing: every child's URN is built
        # from it, so renaming it would replace the stack (or need an alias on every child).
        super().__init__("tpu-vllm:gke:Deployment", name, None, opts)
        cfg, gke, core = args.settings, args.settings.gke, args.core
        # The server, derived once; the pods render it (components/serving/spec.py).
        spec = serving_spec(cfg)
        shape = cfg.tpu.shape
        class_models = compute_class.models(cfg.tpu.provisioning_model, gke)
        after_services = pulumi.ResourceOptions(parent=self, depends_on=core.apis)
        cluster_name = gke.cluster_name or cfg.resource_prefix
        # The pool's zero, read by the picker, the HPA, the outputs and the dashboard (None at gke.minReplicas >= 1).
        zero = scale_to_zero.zero_pool(gke.min_replicas, gke.max_replicas,
                                       scale_to_zero_after=gke.scale_to_zero_after,
                                       waiting_requests_target=gke.waiting_requests_target,
                                       max_num_seqs=cfg.vllm.max_num_seqs)

        nodes = ServiceIdentity(
            f"{name}-nodes",
            ServiceIdentityArgs(project=cfg.project, account_id=naming.service_account_id(cfg.stack, "nodes"),
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
                use_existing=gke.use_existing_cluster, labels=core.labels,
                gateway_api=gke.inference_gateway is not None, scale_to_zero=zero is not None,
                version_floor=gke_version_floor(shape.generation)),
            pulumi.ResourceOptions(parent=self, depends_on=[*core.apis, node_role]))
        tpu_class = manifests.declare(
            "tpu-class", compute_class.compute_class(compute_class.class_name(cfg.resource_prefix, shape), class_models,
                                                     gke, cfg.tpu.run_seconds, nodes.email, shape),
            pulumi.ResourceOptions(parent=self, provider=cluster.provider, depends_on=cluster.ready))
        image = pinned_image("vllm-image", spec.vllm_image, pulumi.ResourceOptions(parent=self))
        # The front's nginx (and the metrics door's) pinned the same way: a recycled node runs the build the
        # first `pulumi up` saw, not whatever the tag points at by then.
        front_image = pinned_image("front-image", spec.front_image, pulumi.ResourceOptions(parent=self))
        # Through the mirror the digest stays the registry's (the cache's prefix keys on it); only where the node
        # pulls from changes.
        pulled_image, pulled_front_image = image, front_image
        if gke.docker_hub_mirror:
            mirror = DockerHubMirror("docker-hub-mirror", DockerHubMirrorArgs(
                project=cfg.project, region=gke.region, repository_id=repository_id(cfg.resource_prefix),
                node_service_account_email=nodes.email, labels=core.labels, services=core.apis),
                pulumi.ResourceOptions(parent=self))
            pulled_image = pulumi.Output.from_input(image).apply(lambda pinned: through_mirror(pinned, mirror.path))
            pulled_front_image = pulumi.Output.from_input(front_image).apply(
                lambda pinned: through_mirror(pinned, mirror.path))
        cache = CompileCache("compile-cache", CompileCacheArgs(
            project=cfg.project, bucket_name=compile_cache.bucket_name(cfg.resource_prefix, cfg.project),
            location=gke.region.upper(), keep_on_destroy=cfg.cache.keep_on_destroy,
            retention_days=gke.cache_retention_days,
            workload_service_account_email=core.identity.email,
            write_prefixes=pulumi.Output.from_input(image).apply(lambda pinned: write_prefixes(spec, pinned)),
            weights_on_disk=spec.weights_on_disk,
            labels=core.labels, services=core.apis), pulumi.ResourceOptions(parent=self))
        workload = ServingWorkload(
            "serving",
            ServingWorkloadArgs(
                project=cfg.project, namespace=gke.namespace,
                pod=serving_pod(spec, resource_prefix=cfg.resource_prefix, models=class_models, gke=gke,
                                front_image=pulled_front_image, shape=shape),
                ready_timeout_seconds=cfg.tpu.queue_seconds + spec.health_timeout_seconds,
                chip_quota=compute_class.chip_quota(gke.max_replicas, gke.namespace, SURGE_PODS, shape.gke_tpu_count),
                configuration_key=configuration_key(spec),
                google_service_account_email=core.identity.email,
                hf_token_secret_name=core.secrets.hf_token_secret_name,
                api_key_secret_name=core.secrets.api_key_secret_name,
                image=pulled_image, cache_bucket=cache.bucket, compute_class=tpu_class, cache=cache,
                provider=cluster.provider, cluster_ready=cluster.ready),
            pulumi.ResourceOptions(parent=self, depends_on=[core.secrets]))
        exposure = Exposure("exposure", exposure_args(gke, cfg.access, resource_prefix=cfg.resource_prefix,
                                                      serving_port=spec.listen_port, provider=cluster.provider,
                                                      workload=workload),
                            pulumi.ResourceOptions(parent=self))
        gateway = None
        if gke.inference_gateway is not None:
            picker_image = pinned_image("picker-image", PICKER_IMAGE, pulumi.ResourceOptions(parent=self))
            if gke.docker_hub_mirror:
                # A no-op while the picker's image is on ghcr.io (the mirror serves Docker Hub only).
                picker_image = pulumi.Output.from_input(picker_image).apply(
                    lambda pinned: through_mirror(pinned, mirror.path))
            gateway = InferenceGateway("inference-gateway", InferenceGatewayArgs(
                project=cfg.project, region=gke.region, network=cfg.tpu.network,
                subnetwork=cfg.tpu.subnetwork or cfg.tpu.network, resource_prefix=cfg.resource_prefix,
                namespace=gke.namespace, selector_labels=selector_labels(cfg.resource_prefix),
                front_port=spec.listen_port, adopted_subnet=gke.inference_gateway.proxy_only_subnet,
                proxy_only_range=gke.inference_gateway.proxy_only_range, picker_image=picker_image,
                provider=cluster.provider, workload=workload, services=core.apis,
                pool_grace_seconds=gke.termination_grace_seconds, zero=zero),
                pulumi.ResourceOptions(parent=self))
        Autoscaling("autoscaling", AutoscalingArgs(
            project=cfg.project, namespace=gke.namespace, selector_labels=selector_labels(cfg.resource_prefix),
            min_replicas=gke.min_replicas, max_replicas=gke.max_replicas,
            waiting_requests_target=gke.waiting_requests_target,
            adapter_account_id=naming.service_account_id(cfg.stack, "metrics"),
            provider=cluster.provider, workload=workload,
            install_adapter=gke.install_metrics_adapter, cluster_ready=cluster.ready, zero=zero,
            picker_series=picker_series(cluster_name, gke.namespace) if zero is not None else None,
            engine_series=engine_series(cluster_name, gke.namespace) if zero is not None else None),
            pulumi.ResourceOptions(parent=self))
        if cfg.monitoring.enabled:
            OperatorMonitoring("gke-monitoring", OperatorMonitoringArgs(
                project=cfg.project, settings=cfg.monitoring, labels=core.labels,
                scope=monitoring_scope(
                    gke, stack=cfg.stack, cluster_name=cluster_name, provisioning_model=cfg.tpu.provisioning_model,
                    max_run_duration=cfg.tpu.max_run_duration, kv=cfg.kv_budget(),
                    replica_usd_per_hour=replica_usd_per_hour(cfg, cfg.tpu.provisioning_model),
                    baseline_usd_per_hour=baseline(cfg).usd_per_hour, devices=cfg.tpu.shape.devices,
                    engines=cfg.data_parallel_size, zero=zero, replica=replica_text(cfg.tpu.shape)),
                depends_on=core.apis), pulumi.ResourceOptions(parent=self))

        port = spec.listen_port
        endpoint = (gateway_endpoint(gateway.address) if gateway is not None
                    else pulumi.Output.concat("http://", exposure.address, f":{port}/v1"))
        outputs: dict[str, Any] = {
            "platform": "gke",
            "clusterName": cluster.name,
            "clusterLocation": gke.location,
            "credentialsCommand": cluster.name.apply(lambda n: credentials_command(n, gke.location, cfg.project)),
            "namespace": gke.namespace,
            "computeClass": compute_class.class_name(cfg.resource_prefix, shape),
            "computeClassPriorities": class_models,
            "tpuZones": gke.tpu_zones,
            "nodeRunDuration": cfg.tpu.max_run_duration if cfg.tpu.provisioning_model == "flex-start" else None,
            "nodeRecyclingLeadTime": (gke.recycling_lead_time if cfg.tpu.provisioning_model == "flex-start"
                                      else None),
            "vllmImage": pulled_image,
            "frontImage": pulled_front_image,
            "compileCacheBucket": cache.bucket,
            "compileCachePath": pulumi.Output.all(cache.bucket, image).apply(
                lambda values: f"gs://{values[0]}/{compile_cache.cache_prefix(values[1], configuration_key(spec))}"),
            "replicas": {"min": gke.min_replicas, "max": gke.max_replicas},
            "externalEndpoint" if gke.allow_external_load_balancer else "internalEndpoint": endpoint,
            "inClusterEndpoint": exposure.in_cluster_url,
            **(gateway.outputs if gateway is not None else {}),
            "portForwardCommand": f"kubectl -n {gke.namespace} port-forward svc/{CLUSTER_SERVICE} {port}:{port}",
            "localEndpoint": f"http://127.0.0.1:{port}/v1",
            "apiKey": core.secrets.api_key,
            "hfTokenSource": core.secrets.hf_token_source,
            "vllmServeCommand": render_serve_args(spec.serve_args),
            "hpaMetric": (f"{HPA_METRIC} (average per pod, target {gke.waiting_requests_target})" if zero is None
                          else scale_to_zero.hpa_metric_text(zero)),
            "scaleUpLatency": scale_up_latency(list(gke.tpu_zones)),
            **({"scaleToZero": scale_to_zero.outputs(zero)} if zero is not None else {}),
            **gke_costs(cfg),
            **kv_outputs(cfg.kv_budget(), gke.min_replicas, gke.max_replicas, cfg.tpu.shape.gke_tpu_count),
        }
        self.outputs = {key: value for key, value in outputs.items() if value is not None}
        self.register_outputs(self.outputs)
