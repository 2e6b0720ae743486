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

# Google's example proxy-only range, 10.129.0.0/23 (load-balancing/docs/l7-internal/setting-up-l7-internal), is on a
# custom-mode network; the stack's default network is auto mode, whose subnets take 10.128.0.0/9, and a subnet added
# to it may not overlap that ("you can create a new subnet ... in the auto mode VPC network as long as none of its
# ranges overlap with 10.128.0.0/9", cloud.google.com vpc/docs/alias-ip, updated 2026-04-08; the API's refusal,
# "networks cannot overlap with 10.128.0.0/9", as GoogleCloudPlatform/gcpdiag's lint rule for it matches it). So
# the default is a /23 (Google's size) of RFC 1918's 172.16.0.0/12: outside the auto-mode block and outside
# 10.0.0.0/8, where a VPC-native cluster's own pod ranges are allocated when none is given.
DEFAULT_PROXY_ONLY_RANGE = "172.16.0.0/23"
# What GCP refuses to any subnet (vpc/docs/subnets, "Prohibited IPv4 subnet ranges" beside "Valid IPv4 ranges"):
# this-network, loopback, link-local, multicast and broadcast. Everything else is some subnet's, an adopted
# proxy-only subnet's too (Google's valid list also has RFC 6890's 192.0.0.0/24, RFC 5737's documentation nets,
# RFC 2544's 198.18.0.0/15, class E and privately used public ranges).
PROHIBITED_SUBNET_SPACE = tuple(ipaddress.ip_network(block) for block in (
    "0.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "224.0.0.0/4", "255.255.255.255/32"))
# Where the stack makes its own proxy-only subnet: private space, RFC 1918 and RFC 6598's shared 100.64.0.0/10. The
# stack's rule, narrower than GCP's: the network policy admits this range to the front's port and the picker, so a
# range the stack picks for itself is never one another network could own (components/settings/checks/gateway.py).
PRIVATE_SUBNET_SPACE = tuple(ipaddress.ip_network(block) for block in (
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10"))
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
        "the proxy-only subnet's range: the stack's own (/26 or larger, inside RFC 1918 or RFC 6598, not "
        "overlapping the VPC's other subnets: with `tpu.network` default, not 10.128.0.0/9), or, stated whenever "
        "`proxyOnlySubnet` is, the adopted one's as it is (the network policy admits it to the front's port)"))

    @field_validator("proxy_only_subnet")
    @classmethod
    def _subnet_name(cls, value: str | None) -> str | None:
        if value is not None and not naming.COMPUTE_NAME.fullmatch(value):
            raise InvalidSettingError("not a subnetwork name",
                                      "write the subnet's name as `gcloud compute networks subnets list` shows it")
        return value

    @field_validator("proxy_only_range")
    @classmethod
    def _subnet_range(cls, value: str) -> str:
        try:
            network = ipaddress.ip_network(value.strip(), strict=True)
        except ValueError:
            raise InvalidSettingError("not a CIDR range without host bits",
                                      f"write it like {DEFAULT_PROXY_ONLY_RANGE}") from None
        if network.version != 4 or any(network.overlaps(block) for block in PROHIBITED_SUBNET_SPACE):
            raise InvalidSettingError(
                "a proxy-only subnet takes an IPv4 range, and GCP refuses every subnet in 0.0.0.0/8, loopback "
                "(127.0.0.0/8), link-local (169.254.0.0/16), multicast (224.0.0.0/4) and broadcast",
                f"use a free private range, e.g. {DEFAULT_PROXY_ONLY_RANGE}")
        if network.prefixlen > PROXY_ONLY_MIN_PREFIX:
            raise InvalidSettingError(f"smaller than the /{PROXY_ONLY_MIN_PREFIX} a proxy-only subnet needs",
                                      f"use /{PROXY_ONLY_MIN_PREFIX} or larger; Google sizes it /23")
        return str(network)
