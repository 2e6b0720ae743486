"""`tpu-vllm:gke`: the scale-out platform."""

from __future__ import annotations

import json
import re
from typing import ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator

from components import catalog
from components.basis import price_list
from components.settings.facts import (
    GKE_FALLBACK_MODELS,
    GKE_FOREIGN_NAMESPACE_PREFIXES,
    GKE_FOREIGN_NAMESPACES,
    GKE_LEAD_TIME_MAX_SECONDS,
    GKE_MIN_VERSION,
    GKE_MIN_VERSION_REASON,
    GKE_RELEASE_CHANNELS,
    gke_version_at_least,
)
from components.settings.fields import Duration, Zone, _Section, parse_duration
from components.settings.findings import InvalidSettingError
from components.settings.gateway import DEFAULT_PROXY_ONLY_RANGE, GATEWAY_CRDS_VERSION, InferenceGatewaySetting

# A flex-start node's recycling is a scale-down by GKE's cluster autoscaler: its recycling plugin picks the node
# once its run's end is nearer than nodeRecycling.leadTimeSeconds, and scales it down like any other
# (GoogleCloudPlatform/cluster-autoscaler pkg/defrag/plugins/recycling/recycling.go and pkg/defrag/processor/
# actuation.go ScaleDownActuator.StartDeletion, not the forced deletion, @7d25050). That drain asks each pod's
# eviction for a grace of at most --max-graceful-termination-sec, 600 s by default (kubernetes/autoscaler
# cluster-autoscaler/core/scaledown/actuation/drain.go evictPod, config/flags/flags.go, cluster-autoscaler-1.36.1),
# so a longer pod grace is cut to it; GKE: "For scale-down events, the grace period can be up to 10 minutes"
# (kubernetes-engine/docs/how-to/extended-duration-pods). Whatever its FAQ says ("terminated anyway"), it does not
# remove the node whatever is left: a pod still on the node 30 s after that grace fails the drain (drain.go
# waitPodsToDisappear) and the deletion is aborted, the node kept (group_deletion_scheduler.go scheduleDeletion);
# only a forced deletion removes it regardless. The kubelet kills a pod when its grace ends, so a pod within the
# ceiling is gone in time.
GKE_RECYCLE_DRAIN_MAX_SECONDS = 600
# The front's drain: 5 s for the endpoint to leave the load balancers, 10 s for nginx and vLLM to stop after the
# streams (components/gke/workload.py ENDPOINT_LEAVE_SECONDS, STOP_MARGIN_SECONDS), and some time for the streams.
GKE_GRACE_MIN_SECONDS = 30


class GkeSettings(_Section):
    """The scale-out platform (config key `tpu-vllm:gke`), used when `tpu-vllm:platform` is gke."""

    config_key: ClassVar[str] = "gke"

    cluster_name: str | None = Field(None, description=(
        "the GKE cluster; unset: `tpu-vllm-<stack>`; with `useExistingCluster`, the cluster to reuse"))
    use_existing_cluster: bool = Field(False, description=(
        "reuse a cluster by name (checked at preview; it needs Workload Identity, the Secret Manager add-on and "
        "Managed Prometheus)"))
    location: str = Field("us-west4-a", description=(
        "a zone (zonal cluster; one per billing account is free of the fee) or a region (regional control plane; "
        "then list `nodeLocations`)"))
    node_locations: list[Zone] = Field(default_factory=list, description=(
        "zones the TPU pool may use (several: the autoscaler's fallback when one has no capacity); unset: the "
        "location's zone; zones outside the cluster's region are an error, zones other than us-west4-a warn"))
    release_channel: str = Field("REGULAR", description=(
        "`RAPID`, `REGULAR` or `STABLE`; the ComputeClass's node pool auto-creation without node "
        "auto-provisioning needs 1.33.3-gke.1136000 or later (flex-start TPU alone 1.33.0-gke.1712000), and an "
        "older channel default stops the preview"))
    min_master_version: str | None = Field(None, description=(
        "pin the cluster's minimum version (e.g. `1.34`); older or uncomparable pins are errors; unset takes the "
        "channel's default"))
    machine_type: str | None = Field(None, description=(
        "unset: `tpu.acceleratorType`'s GKE machine (`ct5lp-hightpu-1t/-4t/-8t`, `ct6e-standard-1t/-4t/-8t`), "
        "one per replica with every chip of it; one that names another shape is an error (set "
        "`tpu.acceleratorType` instead)"))
    min_replicas: int = Field(1, ge=0, description=(
        "replicas the HPA keeps (each is one chip, billed while it runs), at most `maxReplicas`; 0 only with "
        "`inferenceGateway`, whose endpoint picker holds what arrives while the pool is at zero (GKE 1.37 or later; "
        "docs/gke.md, *Scale to zero*)"))
    scale_to_zero_after: Duration = Field("15m", description=(
        "with `minReplicas: 0`: how long the pool serves nothing and holds nothing before the HPA removes its last "
        "replica and GKE its TPU node (the HPA's scale-down window); 1m to 1h"))
    max_replicas: int = Field(4, ge=1, description=(
        "replicas (and TPU nodes) the HPA and the node pool's autoscaler may reach; at most `maxTpuChips`"))
    max_tpu_chips: int = Field(8, ge=1, description=(
        "a cap on chips: `maxReplicas` above it is refused (the policy pack enforces the same cap)"))
    waiting_requests_target: int = Field(10, ge=1, description=(
        "HPA target: average `vllm:num_requests_waiting` per pod before it adds a replica"))
    system_machine_type: str = Field("e2-standard-2", description=(
        "the small CPU pool for kube-system, the metrics adapter and the Prometheus collectors (priced machines "
        "only)"))
    system_node_count: int = Field(1, ge=1, le=10, description="nodes in the system pool")
    namespace: str = Field("tpu-vllm", description=(
        "where the workload runs; the stack creates and deletes it, so `default`, `custom-metrics`, `kube-*`, "
        "`gke-*`, `gmp-*` are refused. On gke, `front.listenPort` and `vllm.serverPort` may not be 9090 (the metrics "
        "door's), and `vllm.containerAccess` is ignored (warned): the chip comes through the pod's "
        "`google.com/tpu` request"))
    termination_grace_period: Duration = Field("10m", description=(
        "how long a stopping pod may keep serving in-flight streams: 30s to 10m, the most GKE's cluster "
        "autoscaler grants a pod when it drains a recycled flex-start node (docs/gke.md, run ends)"))
    allow_external_load_balancer: bool = Field(False, description=(
        "explicit opt-in: an external load balancer (needs `access.servingSourceRanges`, which limit it) instead "
        "of an internal one"))
    inference_gateway: InferenceGatewaySetting | None = Field(None, description=(
        "opt-in: a GKE Gateway (regional internal Application Load Balancer) whose endpoint picker sends each "
        "request to a replica by queue, KV-cache use and prefix match, instead of the passthrough load balancer, "
        "which keeps each keep-alive connection on one replica (docs/gke.md, *Inference gateway*); `true` (the stack "
        "makes the region's proxy-only subnet), or `proxyOnlySubnet` (an existing one to adopt) and `proxyOnlyRange` "
        f"(its range, required when adopting; for the stack's own: default {DEFAULT_PROXY_ONLY_RANGE}, /26 or "
        "larger, private, outside the default network's 10.128.0.0/9); internal only, not with "
        "`allowExternalLoadBalancer`"))
    allow_unbounded_billing: bool = Field(False, description=(
        "explicit opt-in for spot or on-demand as the first priority (`tpu.provisioningModel`) on gke: nothing "
        "stops their billing"))
    install_metrics_adapter: bool = Field(True, description=(
        "deploy Google's custom metrics adapter (the HPA's path to the queue metric); off if a reused cluster "
        "runs one; not read at `gke.minReplicas: 0`, where GKE's AutoscalingMetric is the path"))
    fallback: list[Literal["spot", "on-demand"]] = Field(default_factory=list, description=(
        "ComputeClass priorities after `tpu.provisioningModel` when it has no capacity, in order: `spot`, "
        "`on-demand`; each an explicit opt-in, priced in the plan and the `fallbackCostPerHourUsd` output; "
        "nothing stops their billing"))
    cache_retention: Duration = Field("30d", description=(
        "how long the compile cache keeps an entry after it was written (a bucket lifecycle rule on `xla/`; JAX "
        "records no last use, so a configuration still running past it recompiles once at its next cold start, "
        "~14 min); 1d to 3650d, whole days"))
    docker_hub_mirror: bool = Field(False, description=(
        "pull the Docker Hub images (`vllm.image`, `front.image`) through an Artifact Registry remote repository "
        "in the cluster's region, which the nodes' service account may read: recycled nodes pull from the region, "
        "not from Docker Hub's rate-limited anonymous pulls. Every spelling of Docker Hub goes through it (`name`, "
        "`org/name`, `docker.io/`, `index.docker.io/`, `registry-1.docker.io/`); images of other registries are "
        "pulled as written"))
    recycling_lead_time: Duration = Field("1h", description=(
        "how long before a flex-start node's run ends GKE brings up its replacement "
        "(`nodeRecycling.leadTimeSeconds`; Google's v5e class uses 1h); at least a node (~600 s allowance) plus "
        "the log's warm start (497 s), at most half of `tpu.maxRunDuration`; read only with flex-start"))

    @field_validator("fallback")
    @classmethod
    def _distinct_fallbacks(cls, values: list[str]) -> list[str]:
        if len(set(values)) != len(values):
            raise InvalidSettingError("a fallback is listed twice",
                                      f"list each fallback once, in the order to try them, e.g. "
                                      f"{json.dumps(list(GKE_FALLBACK_MODELS))}")
        return values

    @field_validator("inference_gateway", mode="before")
    @classmethod
    def _gateway_switch(cls, value: object, info: ValidationInfo) -> object:
        """`true` is every default, `false` is off; the gateway is internal, so not with an external balancer."""
        if value is True:
            value = {}
        if value is False or value is None:
            return None
        if info.data.get("allow_external_load_balancer"):
            raise InvalidSettingError(
                "the inference gateway is a regional internal Application Load Balancer; it has no external form "
                "here", "turn off gke.allowExternalLoadBalancer, or turn off gke.inferenceGateway")
        pinned = info.data.get("min_master_version")
        if pinned and gke_version_at_least(pinned, GATEWAY_CRDS_VERSION) is False:
            raise InvalidSettingError(
                f"gke.minMasterVersion {pinned} is older than {GATEWAY_CRDS_VERSION}, from which GKE installs the "
                "Gateway API and InferencePool CRDs the gateway's objects need",
                f"pin {GATEWAY_CRDS_VERSION} or later (e.g. 1.35), or remove gke.minMasterVersion")
        return value

    @field_validator("recycling_lead_time")
    @classmethod
    def _lead_time(cls, value: str) -> str:
        seconds = parse_duration(value)
        if not 1 <= seconds <= GKE_LEAD_TIME_MAX_SECONDS:
            raise InvalidSettingError("outside the ComputeClass CRD's bounds", "use between 1s and 7d, e.g. 1h")
        return value

    @field_validator("machine_type")
    @classmethod
    def _catalogued_machine(cls, value: str | None) -> str | None:
        if value is None or catalog.shape_for_gke_machine(value) is not None:
            return value
        machines = ", ".join(shape.gke_machine_type for shape in catalog.all_shapes())
        raise InvalidSettingError(
            "not the GKE machine of a single-host TPU shape this stack knows",
            f"remove the key to follow tpu.acceleratorType, or use one of {machines}",
        )

    @field_validator("location")
    @classmethod
    def _zone_or_region(cls, value: str) -> str:
        if len(value) > 63 or not re.fullmatch(r"[a-z]+-[a-z]+[0-9]+(-[a-z])?", value):
            raise InvalidSettingError("neither a zone nor a region",
                          "write a zone (us-west4-a) for a zonal cluster or a region (us-west4) for a regional one")
        return value

    @field_validator("release_channel")
    @classmethod
    def _channel(cls, value: str) -> str:
        if value not in GKE_RELEASE_CHANNELS:
            raise InvalidSettingError("not a release channel (flex-start TPU needs one)",
                                      f"use one of {', '.join(GKE_RELEASE_CHANNELS)}")
        return value

    @field_validator("min_master_version")
    @classmethod
    def _new_enough(cls, value: str | None) -> str | None:
        if value is None:
            return value
        # A field of the cluster's body, shown in the plan: a version's characters only.
        if not re.fullmatch(r"[0-9A-Za-z.-]{1,64}", value):
            raise InvalidSettingError("not a GKE version (digits, letters, '.' and '-')",
                                      f"write a full version like {GKE_MIN_VERSION}, a newer minor like 1.34, or "
                                      "remove the key to take the channel's default")
        newer = gke_version_at_least(value)
        if newer is None:
            raise InvalidSettingError(
                f"cannot tell whether {value!r} is {GKE_MIN_VERSION} or later ({GKE_MIN_VERSION_REASON})",
                f"write a full version like {GKE_MIN_VERSION}, a newer minor like 1.34, or remove the "
                "key to take the channel's default",
            )
        if not newer:
            raise InvalidSettingError(
                f"GKE {GKE_MIN_VERSION} or later is needed ({GKE_MIN_VERSION_REASON})",
                "set 1.34 (or a 1.33 patch at or past that build), or remove the key to take the channel's default",
            )
        return value

    @field_validator("cluster_name")
    @classmethod
    def _cluster_name(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[a-z]([-a-z0-9]{0,38}[a-z0-9])?", value):
            raise InvalidSettingError("not a GKE cluster name",
                                      "use lowercase letters, digits and hyphens, starting with a letter, at most 40")
        return value

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", value):
            raise InvalidSettingError("not a Kubernetes namespace name",
                                      "use lowercase letters, digits and hyphens, e.g. tpu-vllm")
        if value in GKE_FOREIGN_NAMESPACES or value.startswith(GKE_FOREIGN_NAMESPACE_PREFIXES):
            raise InvalidSettingError(
                "the stack creates this namespace and deletes it on pulumi destroy, so it must be its own; "
                f"{value} belongs to Kubernetes, GKE, Managed Prometheus or the metrics adapter",
                "use a name of your own, e.g. tpu-vllm",
            )
        return value

    @field_validator("system_machine_type")
    @classmethod
    def _priced_machine(cls, value: str) -> str:
        if value not in price_list.SYSTEM_MACHINE_SHAPES:
            raise InvalidSettingError(
                f"the plan prices {', '.join(price_list.SYSTEM_MACHINE_SHAPES)} only",
                "use one of them (e2-standard-2 is enough for the system pods)",
            )
        return value

    @field_validator("cache_retention")
    @classmethod
    def _retention(cls, value: str) -> str:
        seconds = parse_duration(value)
        if seconds % 86400 or not 1 <= seconds // 86400 <= 3650:
            raise InvalidSettingError("a lifecycle rule counts whole days, from 1 to 3650",
                                      "use whole days, e.g. 30d")
        return value

    @field_validator("termination_grace_period")
    @classmethod
    def _grace(cls, value: str) -> str:
        seconds = parse_duration(value)
        if seconds > GKE_RECYCLE_DRAIN_MAX_SECONDS:
            raise InvalidSettingError(
                f"longer than the {GKE_RECYCLE_DRAIN_MAX_SECONDS // 60}m GKE's cluster autoscaler grants a pod when "
                "it drains a recycled node (it cuts the eviction's grace to that)",
                f"use at most {GKE_RECYCLE_DRAIN_MAX_SECONDS // 60}m, e.g. 10m")
        if seconds < GKE_GRACE_MIN_SECONDS:
            raise InvalidSettingError(
                f"shorter than {GKE_GRACE_MIN_SECONDS}s: the front's drain needs 5 s for the endpoint to leave the "
                "load balancers and 10 s to stop after its streams", f"use at least {GKE_GRACE_MIN_SECONDS}s, e.g. 10m")
        return value

    @property
    def region(self) -> str:
        return self.location if self.is_regional else self.location.rsplit("-", 1)[0]

    @property
    def is_regional(self) -> bool:
        return not re.fullmatch(r".*-[a-z]", self.location)

    @property
    def tpu_zones(self) -> list[str]:
        """Where TPU nodes may come up."""
        return list(self.node_locations) or ([] if self.is_regional else [self.location])

    @property
    def termination_grace_seconds(self) -> int:
        return parse_duration(self.termination_grace_period)

    @property
    def cache_retention_days(self) -> int:
        return parse_duration(self.cache_retention) // 86400

    @property
    def recycling_lead_seconds(self) -> int:
        return parse_duration(self.recycling_lead_time)
