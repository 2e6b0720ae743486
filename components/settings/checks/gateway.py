"""The inference gateway's proxy-only range against the network it is made in (gke.inferenceGateway, tpu.network).

A subnet may not overlap another of its network. The default network is auto mode, and an auto-mode network's own
subnets take 10.128.0.0/9, which no added subnet may overlap (components/settings/gateway.py cites Google's words);
another network's subnets are the user's, not known offline, so the plan says how to list them.
"""

from __future__ import annotations

import ipaddress
import re

from components.settings.findings import Finding
from components.settings.gateway import DEFAULT_PROXY_ONLY_RANGE
from components.settings.root import Settings

AUTO_MODE_RANGE = ipaddress.ip_network("10.128.0.0/9")
"""The block an auto-mode network's regional subnets are taken from (vpc/docs/vpc, auto mode IPv4 ranges)."""
DEFAULT_NETWORK = re.compile(r"(?:(?:projects/[^/]+/)?global/networks/)?default")
NETWORK_PATH = re.compile(r"(?:(?:projects/(?P<project>[^/]+)/)?global/networks/)?(?P<name>[^/]+)")


def gateway_checks(settings: Settings) -> list[Finding]:
    gateway = settings.gke.inference_gateway if settings.platform == "gke" else None
    if gateway is None or gateway.proxy_only_subnet is not None:
        return []  # off, or an adopted subnet: it exists already, its range is stated as it is
    network, proxies = settings.tpu.network, ipaddress.ip_network(gateway.proxy_only_range)
    if DEFAULT_NETWORK.fullmatch(network):
        if proxies.overlaps(AUTO_MODE_RANGE):
            return [Finding(
                "gke.inferenceGateway.proxyOnlyRange", gateway.proxy_only_range,
                f"overlaps {AUTO_MODE_RANGE}, the block the own subnets of tpu.network = {network!r} (auto mode) "
                "take, which GCP refuses to any subnet added to it (\"networks cannot overlap with 10.128.0.0/9\")",
                f"use a free range outside it, e.g. {DEFAULT_PROXY_ONLY_RANGE} (the default)",
                also_keys=("tpu.network",))]
        return []
    path = NETWORK_PATH.fullmatch(network)
    in_project = f" --project {path['project']}" if path and path["project"] else ""
    return [Finding.warning(
        "gke.inferenceGateway.proxyOnlyRange", gateway.proxy_only_range,
        f"the plan cannot see the subnets of tpu.network = {network!r}, and GCP refuses a proxy-only subnet "
        "that overlaps one of them",
        f"check it against gcloud compute networks subnets list --network {network.rpartition('/')[2]}"
        f"{in_project} --format='value(ipCidrRange,secondaryIpRanges[].ipCidrRange)'",
        also_keys=("tpu.network",))]
