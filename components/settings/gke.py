"""`tpu-vllm:gke`: the scale-out platform."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from components import budget
from components.settings.facts import (
    GKE_FLEX_START_TPU_MIN_VERSION,
    GKE_FOREIGN_NAMESPACE_PREFIXES,
    GKE_FOREIGN_NAMESPACES,
    GKE_RELEASE_CHANNELS,
    GKE_V5E_ONE_CHIP_MACHINE,
    gke_version_at_least,
)
from components.settings.fields import _Section, parse_duration


class GkeSettings(_Section):
    """The scale-out platform (config key `tpu-vllm:gke`), used when `tpu-vllm:platform` is gke."""

    cluster_name: str | None = None
    """The GKE cluster; defaults to tpu-vllm-<stack>. With useExistingCluster, the cluster to reuse."""
    use_existing_cluster: bool = False
    """Reuse a cluster by name (it needs Workload Identity, the Secret Manager add-on and Managed Prometheus)."""
    location: str = "us-west4-a"
    """A zone (zonal cluster; one per billing account is free of the fee) or a region (regional control plane)."""
    node_locations: list[str] = Field(default_factory=list)
    """Zones the TPU pool may use (several: the autoscaler's fallback when one has no capacity); default the zone."""
    release_channel: str = "REGULAR"
    """RAPID, REGULAR or STABLE; its default version must be 1.33.0-gke.1712000 or later (checked at preview)."""
    min_master_version: str | None = None
    """Pin the cluster's minimum version (e.g. 1.34); unset takes the channel's default."""
    machine_type: str = GKE_V5E_ONE_CHIP_MACHINE
    """The TPU node: ct5lp-hightpu-1t, one v5e chip (the only shape this stack's memory budget fits)."""
    min_replicas: int = Field(1, ge=1)
    """Replicas the HPA keeps (each is one chip, billed while it runs); at least 1."""
    max_replicas: int = Field(4, ge=1)
    """Replicas (and TPU nodes) the HPA and the node pool's autoscaler may reach."""
    max_tpu_chips: int = Field(8, ge=1)
    """A cap on chips: maxReplicas above it is refused (the policy pack enforces the same cap)."""
    waiting_requests_target: int = Field(10, ge=1)
    """HPA target: average vllm:num_requests_waiting per pod before it adds a replica."""
    system_machine_type: str = "e2-standard-2"
    """The small CPU pool for kube-system, the metrics adapter and the Prometheus collectors."""
    system_node_count: int = Field(1, ge=1, le=10)
    """Nodes in the system pool."""
    namespace: str = "tpu-vllm"
    """The Kubernetes namespace of the workload."""
    termination_grace_period: str = "5m"
    """How long a stopping pod may keep serving in-flight streams."""
    allow_external_load_balancer: bool = False
    """Explicit opt-in: an external load balancer (limited to access.servingSourceRanges) instead of an internal one."""
    allow_unbounded_billing: bool = False
    """Explicit opt-in for spot or on-demand TPU nodes on GKE: nothing stops their billing."""
    install_metrics_adapter: bool = True
    """Deploy Google's custom metrics adapter (the HPA's path to the queue metric); off if the cluster has one."""

    @field_validator("machine_type")
    @classmethod
    def _one_v5e_chip(cls, value: str) -> str:
        if value == GKE_V5E_ONE_CHIP_MACHINE:
            return value
        if value.startswith("ct5lp-"):
            raise ValueError(
                "one replica is one v5e chip here (the memory budget is measured on one chip, and the model's "
                f"single KV head is replicated, not sharded, across chips); set it to {GKE_V5E_ONE_CHIP_MACHINE}"
            )
        raise ValueError(
            f"not a TPU v5e machine; this stack serves on v5e only (v5litepod-1 on the VM path); set it to "
            f"{GKE_V5E_ONE_CHIP_MACHINE}"
        )

    @field_validator("location")
    @classmethod
    def _zone_or_region(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z]+-[a-z]+\d+(-[a-z])?", value):
            raise ValueError("a zone (us-west4-a) for a zonal cluster or a region (us-west4) for a regional one")
        return value

    @field_validator("node_locations")
    @classmethod
    def _zones(cls, values: list[str]) -> list[str]:
        for value in values:
            if not re.fullmatch(r"[a-z]+-[a-z]+\d+-[a-z]", value):
                raise ValueError(f"{value!r} is not a zone; list zones like us-west4-a")
        return values

    @field_validator("release_channel")
    @classmethod
    def _channel(cls, value: str) -> str:
        if value not in GKE_RELEASE_CHANNELS:
            raise ValueError(f"use one of {', '.join(GKE_RELEASE_CHANNELS)} (flex-start TPU needs a channel)")
        return value

    @field_validator("min_master_version")
    @classmethod
    def _new_enough(cls, value: str | None) -> str | None:
        if value is None:
            return value
        newer = gke_version_at_least(value)
        if newer is None:
            raise ValueError(
                f"cannot tell whether {value!r} is {GKE_FLEX_START_TPU_MIN_VERSION} or later (flex-start TPU "
                f"node pools need that); write a full version like {GKE_FLEX_START_TPU_MIN_VERSION}, a newer "
                "minor like 1.34, or remove the key to take the channel's default"
            )
        if not newer:
            raise ValueError(
                f"flex-start TPU node pools need GKE {GKE_FLEX_START_TPU_MIN_VERSION} or later; set "
                "1.34 (or a 1.33 patch at or past that build), or remove the key to take the channel's default"
            )
        return value

    @field_validator("cluster_name")
    @classmethod
    def _cluster_name(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[a-z]([-a-z0-9]{0,38}[a-z0-9])?", value):
            raise ValueError("lowercase letters, digits and hyphens, starting with a letter, at most 40")
        return value

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", value):
            raise ValueError("a Kubernetes namespace: lowercase letters, digits and hyphens, e.g. tpu-vllm")
        if value in GKE_FOREIGN_NAMESPACES or value.startswith(GKE_FOREIGN_NAMESPACE_PREFIXES):
            raise ValueError(
                "the stack creates this namespace and deletes it on pulumi destroy, so it must be its own; "
                f"{value} belongs to Kubernetes, GKE, Managed Prometheus or the metrics adapter. Use a name "
                "of your own, e.g. tpu-vllm"
            )
        return value

    @field_validator("system_machine_type")
    @classmethod
    def _priced_machine(cls, value: str) -> str:
        if value not in budget.SYSTEM_MACHINE_SHAPES:
            raise ValueError(
                f"the plan prices {', '.join(budget.SYSTEM_MACHINE_SHAPES)} only; use one of them "
                "(e2-standard-2 is enough for the system pods)"
            )
        return value

    @field_validator("termination_grace_period")
    @classmethod
    def _grace(cls, value: str) -> str:
        seconds = parse_duration(value)
        if not 10 <= seconds <= 3600:
            raise ValueError("between 10s and 1h; in-flight streams get this long to finish, e.g. 5m")
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
