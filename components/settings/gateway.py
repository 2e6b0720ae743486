"""`tpu-vllm:gke.inferenceGateway`: the opt-in request-level, prefix-aware gateway (components/gke/gateway.py).

`true` turns it on with a proxy-only subnet the stack makes; an object names an existing one to adopt, or another
range for the stack's own. A regional internal Application Load Balancer's proxies take their addresses from the
region's one active proxy-only subnet (purpose REGIONAL_MANAGED_PROXY); Google's guide sizes it /23 and accepts
/26 or larger (cloud.google.com/load-balancing/docs/proxy-only-subnets, "Planning the size of your proxy-only
subnet"). The range is also what the pods' network policy admits to the front's port, so an adopted subnet's
range is stated too.
"""

from __future__ import annotations

import ipaddress
from typing import ClassVar

from pydantic import Field, field_validator

from components.basis import naming
from components.settings.fields import _Section
from components.settings.findings import InvalidSettingError

# Google's examples use 10.129.0.0/23 for the proxy-only subnet (load-balancing/docs/l7-internal/setting-up-l7-
# internal, "Configure the proxy-only subnet"); it must not overlap the VPC's other subnets.
DEFAULT_PROXY_ONLY_RANGE = "10.129.0.0/23"
# From this GKE version GKE installs the Gateway API and Inference Extension CRDs itself (llm-d.ai
# docs/resources/gateway/gke, "GKE automatically installs all GA CRDs for Gateway API and Gateway API Inference
# Extension on GKE versions 1.34.0-gke.1626000 or later"); the stack installs none.
GATEWAY_CRDS_VERSION = "1.34.0-gke.1626000"
# The smallest proxy-only subnet the load balancers accept (proxy-only-subnets, "at least /26").
PROXY_ONLY_MIN_PREFIX = 26
# The endpoint picker's requests, sized for the system pool (gke.systemMachineType, e2-standard-2 by default:
# 2 vCPU, 8 GB, shared with kube-system, the metrics adapter and the collectors), not llm-d's chart's 8 CPUs and
# 8 GiB (config/charts/routerlib/values.yaml, v0.9.0), which no such node can place. A handful of replicas and the
# prefix index of a few agents' prompts fit well below this. Here, not in the wing, so the costs can price it.
PICKER_REQUESTS = {"cpu": "250m", "memory": "512Mi"}
PICKER_MEMORY_LIMIT = "1Gi"


class InferenceGatewaySetting(_Section):
    """The gateway's own settings; `gke.inferenceGateway: true` takes every default."""

    config_key: ClassVar[str] = "gke.inferenceGateway"

    proxy_only_subnet: str | None = Field(None, description=(
        "an existing proxy-only subnet (purpose REGIONAL_MANAGED_PROXY) in the cluster's region and network to "
        "adopt (the region has at most one active); unset: the stack makes one"))
    proxy_only_range: str = Field(DEFAULT_PROXY_ONLY_RANGE, description=(
        "the proxy-only subnet's range: the stack's own (/26 or larger, private, not overlapping the VPC's other "
        "subnets), or the adopted one's as it is (the network policy admits it to the front's port)"))

    @field_validator("proxy_only_subnet")
    @classmethod
    def _subnet_name(cls, value: str | None) -> str | None:
        if value is not None and not naming.COMPUTE_NAME.fullmatch(value):
            raise InvalidSettingError("not a subnetwork name",
                                      "write the subnet's name as `gcloud compute networks subnets list` shows it")
        return value

    @field_validator("proxy_only_range")
    @classmethod
    def _private_range(cls, value: str) -> str:
        try:
            network = ipaddress.ip_network(value.strip(), strict=True)
        except ValueError:
            raise InvalidSettingError("not a CIDR range without host bits", "write it like 10.129.0.0/23") from None
        if network.version != 4 or not network.is_private:
            raise InvalidSettingError("a proxy-only subnet takes a private IPv4 range",
                                      f"use a free private range, e.g. {DEFAULT_PROXY_ONLY_RANGE}")
        if network.prefixlen > PROXY_ONLY_MIN_PREFIX:
            raise InvalidSettingError(f"smaller than the /{PROXY_ONLY_MIN_PREFIX} a proxy-only subnet needs",
                                      f"use /{PROXY_ONLY_MIN_PREFIX} or larger; Google sizes it /23")
        return str(network)
