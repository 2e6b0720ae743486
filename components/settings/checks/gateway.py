"""The inference gateway's proxy-only range against the network it is made in (gke.inferenceGateway, tpu.network).

A subnet may not overlap another of its network, nor a peered network's. The default network is auto mode as GCP
makes it, and an auto-mode network's own subnets take 10.128.0.0/9, which no added subnet may overlap
(components/settings/gateway.py cites Google's words); what else a network holds (subnets a user added, peerings
such as a private cluster's control plane) is not known offline, so the plan says how to list it. The stack makes
its own subnet only in private space; an adopted one is taken as the user states its range, which must be stated:
the network policy admits that range to the front's port.
"""

from __future__ import annotations

import ipaddress
import re

from components.settings.findings import NO_VALUE, Finding
from components.settings.gateway import DEFAULT_PROXY_ONLY_RANGE, PRIVATE_SUBNET_SPACE, InferenceGatewaySetting
from components.settings.root import Settings

AUTO_MODE_RANGE = ipaddress.ip_network("10.128.0.0/9")
"""The block an auto-mode network's regional subnets are taken from (vpc/docs/vpc, auto mode IPv4 ranges)."""
DEFAULT_NETWORK = re.compile(r"(?:(?:projects/[^/]+/)?global/networks/)?default")
NETWORK_PATH = re.compile(r"(?:(?:projects/(?P<project>[^/]+)/)?global/networks/)?(?P<name>[^/]+)")


def gateway_checks(settings: Settings) -> list[Finding]:
    gateway = settings.gke.inference_gateway if settings.platform == "gke" else None
    if gateway is None:
        return []
    if gateway.proxy_only_subnet is not None:
        return _adopted_subnet(settings, gateway)
    network, proxies = settings.tpu.network, ipaddress.ip_network(gateway.proxy_only_range)
    if not any(proxies.subnet_of(block) for block in PRIVATE_SUBNET_SPACE):
        return [Finding(
            "gke.inferenceGateway.proxyOnlyRange", gateway.proxy_only_range,
            "the stack makes its own proxy-only subnet only inside RFC 1918 (10.0.0.0/8, 172.16.0.0/12, "
            "192.168.0.0/16) or RFC 6598 (100.64.0.0/10), since its network policy admits that range to the "
            "front's port and the picker (GCP itself takes other ranges too, which an existing subnet may have: "
            "adopt it with gke.inferenceGateway.proxyOnlySubnet)",
            f"use a free private range, e.g. {DEFAULT_PROXY_ONLY_RANGE} (the default)")]
    path = NETWORK_PATH.fullmatch(network)
    name = path["name"] if path else network.rpartition("/")[2]
    in_project = f" --project {path['project']}" if path and path["project"] else ""
    listing = (f"gcloud compute networks subnets list --network {name}{in_project} "
               "--format='value(ipCidrRange,secondaryIpRanges[].ipCidrRange)' and gcloud compute networks "
               f"peerings list --network {name}{in_project}")
    if DEFAULT_NETWORK.fullmatch(network):
        if proxies.overlaps(AUTO_MODE_RANGE):
            return [Finding(
                "gke.inferenceGateway.proxyOnlyRange", gateway.proxy_only_range,
                f"overlaps {AUTO_MODE_RANGE}, the block the own subnets of tpu.network = {network!r} (auto mode) "
                "take, which GCP refuses to any subnet added to it (\"networks cannot overlap with 10.128.0.0/9\")",
                f"use a free range outside it, e.g. {DEFAULT_PROXY_ONLY_RANGE} (the default)",
                also_keys=("tpu.network",))]
        # Outside the auto-mode block is free of the network's own subnets, not of what a user added or peered.
        return [Finding.warning(
            "gke.inferenceGateway.proxyOnlyRange", gateway.proxy_only_range,
            f"outside the auto-mode block of tpu.network = {network!r}, but a subnet added to it or a peered "
            "network (a private cluster's control plane takes a /28, often in 172.16.0.0/12) may overlap it, "
            "which GCP refuses",
            f"check it against {listing}", also_keys=("tpu.network",))]
    return [Finding.warning(
        "gke.inferenceGateway.proxyOnlyRange", gateway.proxy_only_range,
        f"the plan cannot see the subnets of tpu.network = {network!r}, and GCP refuses a proxy-only subnet "
        "that overlaps one of them or a peered network's",
        f"check it against {listing}", also_keys=("tpu.network",))]


def _adopted_subnet(settings: Settings, gateway: InferenceGatewaySetting) -> list[Finding]:
    """An adopted subnet exists already; its range is what the network policy admits, so it is stated, never the
    default taken for it (a wrong range leaves the gateway dead: the proxies' packets dropped at the pods)."""
    if "proxy_only_range" in gateway.model_fields_set:
        return []
    return [Finding(
        "gke.inferenceGateway.proxyOnlyRange", NO_VALUE,
        f"unset while gke.inferenceGateway.proxyOnlySubnet = {gateway.proxy_only_subnet!r} is adopted: the network "
        "policy would admit the default range, not the subnet's proxies",
        f"state the subnet's range as gcloud compute networks subnets describe {gateway.proxy_only_subnet} "
        f"--region {settings.gke.region} --format='value(ipCidrRange)' shows it",
        also_keys=("gke.inferenceGateway.proxyOnlySubnet",))]
