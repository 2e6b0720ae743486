"""The inference gateway's proxy-only range: private subnet space only, outside the default network's 10.128.0.0/9
(refused before any cloud call), and on another network a warning that says how to list its subnets."""

from __future__ import annotations

import pytest

from components import settings
from tests.test_gke_settings import problems_of, with_gke


def _with_network(raw: dict, network: str) -> dict:
    return {**raw, "tpu": {**raw.get("tpu", {}), "network": network}}


def _gateway_warnings(raw: dict) -> list[str]:
    return [w for w in settings.load(raw, "my-proj", "gke").warnings
            if w.startswith("tpu-vllm:gke.inferenceGateway.proxyOnlyRange")]


@pytest.mark.parametrize("network", ["default", "global/networks/default", "projects/host/global/networks/default"])
@pytest.mark.parametrize("proxies", ["10.129.0.0/23", "10.128.0.0/9", "10.0.0.0/8", "10.200.4.0/26"])
def test_on_the_default_network_a_range_in_its_auto_mode_block_is_refused_naming_both_keys(network, proxies):
    # Google's own example range (10.129.0.0/23) is inside the auto-mode block: GCP would refuse it at apply.
    raw = _with_network(with_gke(inferenceGateway={"proxyOnlyRange": proxies}, minMasterVersion="1.35"), network)
    [problem] = [p for p in problems_of(raw) if "proxyOnlyRange" in p]
    assert f'tpu-vllm:gke.inferenceGateway.proxyOnlyRange = "{proxies}"' in problem
    assert "10.128.0.0/9" in problem and "tpu.network" in problem and "172.16.0.0/23" in problem


@pytest.mark.parametrize("proxies", ["172.16.0.0/23", "10.0.0.0/16", "192.168.8.0/23", "100.64.0.0/26"])
def test_on_the_default_network_a_private_range_outside_the_block_passes_without_a_warning(proxies):
    raw = with_gke(inferenceGateway={"proxyOnlyRange": proxies}, minMasterVersion="1.35")
    assert settings.load(raw, "my-proj", "gke").settings.gke.inference_gateway.proxy_only_range == proxies
    assert _gateway_warnings(raw) == []


def test_the_default_range_passes_on_the_default_network():
    raw = with_gke(inferenceGateway=True, minMasterVersion="1.35")
    assert settings.load(raw, "my-proj", "gke").settings.gke.inference_gateway.proxy_only_range == "172.16.0.0/23"
    assert _gateway_warnings(raw) == []


@pytest.mark.parametrize(("network", "listing"), [
    ("shared-vpc", "gcloud compute networks subnets list --network shared-vpc --format="),
    ("projects/host-proj/global/networks/shared-vpc",
     "gcloud compute networks subnets list --network shared-vpc --project host-proj --format="),
])
def test_on_another_network_even_the_auto_mode_block_is_only_warned_with_the_listing_command(network, listing):
    # A custom-mode network's subnets are the user's: the plan cannot see them, so it says how to look.
    raw = _with_network(with_gke(inferenceGateway={"proxyOnlyRange": "10.129.0.0/23"}, minMasterVersion="1.35"),
                        network)
    [warning] = _gateway_warnings(raw)
    assert listing in warning and "secondaryIpRanges[].ipCidrRange" in warning


def test_an_adopted_subnet_is_not_judged_against_the_network():
    raw = with_gke(inferenceGateway={"proxyOnlySubnet": "shared-proxy", "proxyOnlyRange": "10.129.0.0/23"},
                   minMasterVersion="1.35")
    assert settings.load(raw, "my-proj", "gke").settings.gke.inference_gateway.proxy_only_subnet == "shared-proxy"
    assert _gateway_warnings(raw) == []


@pytest.mark.parametrize("proxies", ["127.0.0.0/23", "169.254.0.0/23", "0.0.0.0/23", "100.63.0.0/23",
                                     "192.0.2.0/24", "172.32.0.0/23", "8.8.8.0/23", "fd00::/64"])
def test_ranges_no_gcp_subnet_takes_are_refused(proxies):
    # ipaddress calls loopback, link-local, 0/8 and the documentation nets "private"; GCP's subnets take none of them.
    [problem] = [p for p in problems_of(with_gke(inferenceGateway={"proxyOnlyRange": proxies}))
                 if "proxyOnlyRange" in p]
    assert f'proxyOnlyRange = "{proxies}"' in problem and "RFC 1918" in problem and "172.16.0.0/23" in problem


