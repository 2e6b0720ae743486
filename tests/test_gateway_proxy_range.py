"""The inference gateway's proxy-only range: the stack's own subnet in private space only, outside the default
network's 10.128.0.0/9 (refused before any cloud call), with a warning that says how to list the network's subnets
and peerings; an adopted subnet's range in whatever GCP takes, and stated."""

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
def test_on_the_default_network_a_private_range_outside_the_block_plans_with_the_subnet_and_peering_listing(proxies):
    # Outside the auto-mode block is free of the network's own subnets, not of a subnet a user added or a peering
    # (a private cluster's control plane, often 172.16.0.0/28): GCP refuses those overlaps at apply.
    raw = with_gke(inferenceGateway={"proxyOnlyRange": proxies}, minMasterVersion="1.35")
    assert settings.load(raw, "my-proj", "gke").settings.gke.inference_gateway.proxy_only_range == proxies
    [warning] = _gateway_warnings(raw)
    assert "gcloud compute networks subnets list --network default" in warning
    assert "gcloud compute networks peerings list --network default" in warning


def test_the_default_range_plans_on_the_default_network():
    raw = with_gke(inferenceGateway=True, minMasterVersion="1.35")
    assert settings.load(raw, "my-proj", "gke").settings.gke.inference_gateway.proxy_only_range == "172.16.0.0/23"
    [warning] = _gateway_warnings(raw)
    assert "peerings list" in warning


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


@pytest.mark.parametrize("proxies", ["10.129.0.0/23", "240.0.0.0/23", "198.18.0.0/23", "192.0.2.0/24",
                                     "34.120.0.0/23"])
def test_an_adopted_subnet_takes_any_range_gcp_subnets_take_and_is_not_judged_against_the_network(proxies):
    # Google's valid subnet ranges include class E, RFC 2544, the documentation nets and privately used public
    # ranges: a region's one active proxy-only subnet may already be in one, and the gateway must still adopt it.
    raw = with_gke(inferenceGateway={"proxyOnlySubnet": "shared-proxy", "proxyOnlyRange": proxies},
                   minMasterVersion="1.35")
    assert settings.load(raw, "my-proj", "gke").settings.gke.inference_gateway.proxy_only_subnet == "shared-proxy"
    assert _gateway_warnings(raw) == []


def test_an_adopted_subnet_without_its_range_is_refused_with_the_command_that_shows_it():
    # Else the network policy would admit the default 172.16.0.0/23, not the proxies: the gateway dead on arrival.
    raw = with_gke(inferenceGateway={"proxyOnlySubnet": "shared-proxy"}, minMasterVersion="1.35")
    [problem] = [p for p in problems_of(raw) if "proxyOnlyRange" in p]
    assert "proxyOnlySubnet" in problem
    assert "gcloud compute networks subnets describe shared-proxy --region us-west4" in problem


@pytest.mark.parametrize("proxies", ["100.63.0.0/23", "192.0.2.0/24", "172.32.0.0/23", "8.8.8.0/23",
                                     "240.0.0.0/23"])
def test_the_stacks_own_subnet_is_made_only_in_private_space(proxies):
    # The stack's rule, not GCP's: the range it picks is admitted to the front's port, so none another could own.
    [problem] = [p for p in problems_of(with_gke(inferenceGateway={"proxyOnlyRange": proxies}))
                 if "proxyOnlyRange" in p]
    assert f'proxyOnlyRange = "{proxies}"' in problem and "RFC 1918" in problem and "172.16.0.0/23" in problem
    assert "proxyOnlySubnet" in problem and "GCP itself takes other ranges" in problem


@pytest.mark.parametrize("proxies", ["127.0.0.0/23", "169.254.0.0/23", "0.0.0.0/23", "224.0.0.0/23",
                                     "255.255.255.255/32", "fd00::/64"])
@pytest.mark.parametrize("adopted", [{}, {"proxyOnlySubnet": "shared-proxy"}])
def test_ranges_gcp_refuses_to_every_subnet_are_refused_adopted_or_not(proxies, adopted):
    raw = with_gke(inferenceGateway={**adopted, "proxyOnlyRange": proxies})
    [problem] = [p for p in problems_of(raw) if "proxyOnlyRange" in p]
    assert f'proxyOnlyRange = "{proxies}"' in problem and "GCP refuses every subnet" in problem


