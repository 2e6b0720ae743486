"""What the opt-in inference gateway (gke.inferenceGateway) adds to the bill: the regional internal Application
Load Balancer's proxies and the data they process, and the endpoint picker's share of the system pool. Computed,
not measured: no gateway has been billed for this stack.

Prices: Google's Cloud Load Balancing pricing page (cloud.google.com/load-balancing/pricing). Its first section
gives $0.008 per GiB processed, inbound and outbound alike, for the regional load balancers it lists; regional
internal Application Load Balancers are priced in its own "Internal Application Load Balancer" section, per proxy
instance-hour (the load balancer "automatically allocates Envoy proxies to meet your traffic needs",
load-balancing/docs/l7-internal) and per GiB. That section could not be read in the stored copies this was
written from, so $0.025 per proxy instance-hour is the list price as Google's section states it to our knowledge,
at one proxy (the least GCP runs): check the page (and your bill's SKU "Internal Application Load Balancer
Proxy Instance") before relying on the figure. Prices in USD, us-west4 taken as the page's default region.
"""

from __future__ import annotations

from typing import Any

from components.basis import price_list
from components.settings.gateway import PICKER_REQUESTS

PROXY_USD_PER_INSTANCE_HOUR = 0.025
# Said beside every figure built on it: the proxy-hour price is not read from a page (docstring).
PROXY_PRICE_SOURCE = ("the proxy-hour price is not read from Google's pricing page (its Internal Application Load "
                      "Balancer section could not be read here): check it, and your bill's SKU")
PROCESSED_USD_PER_GIB = 0.008
MIN_PROXY_INSTANCES = 1


def _quantity(text: str) -> float:
    """A Kubernetes CPU ("250m") or memory ("512Mi") request as cores or GiB."""
    if text.endswith("m"):
        return int(text[:-1]) / 1000
    if text.endswith("Mi"):
        return int(text[:-2]) / 1024
    if text.endswith("Gi"):
        return float(text[:-2])
    return float(text)


def picker_share_usd_per_hour() -> float:
    """The picker's requests at the system pool's E2 prices per vCPU-hour and GiB-hour: a share of a node the stack
    pays for anyway, not an extra bill while the requests fit beside the system pods."""
    requests = PICKER_REQUESTS
    return (_quantity(requests["cpu"]) * price_list.E2_USD_PER_VCPU_HOUR
            + _quantity(requests["memory"]) * price_list.E2_USD_PER_GIB_HOUR)


def gateway_usd_per_hour() -> float:
    """The proxies at their least, every hour from pulumi up to pulumi destroy, with or without requests."""
    return MIN_PROXY_INSTANCES * PROXY_USD_PER_INSTANCE_HOUR


def gateway_costs() -> dict[str, Any]:
    """The stack output's lines (camelCase)."""
    return {"inferenceGatewayCost": {
        "proxyUsdPerHourAtLeast": round(gateway_usd_per_hour(), 4),
        "proxyUsdPerInstanceHour": PROXY_USD_PER_INSTANCE_HOUR,
        "processedUsdPerGib": PROCESSED_USD_PER_GIB,
        "pickerShareOfSystemPoolUsdPerHour": round(picker_share_usd_per_hour(), 4),
        "how": f"computed (components/economics/gateway_costs.py), not measured; {PROXY_PRICE_SOURCE}",
    }}


def gateway_summary() -> dict[str, Any]:
    """The plan's budget lines (snake_case)."""
    return {
        "gke_gateway_proxy_usd_per_hour_at_least": round(gateway_usd_per_hour(), 4),
        "gke_gateway_proxy_usd_per_instance_hour": PROXY_USD_PER_INSTANCE_HOUR,
        "gke_gateway_processed_usd_per_gib": PROCESSED_USD_PER_GIB,
        "gke_gateway_picker_share_usd_per_hour": round(picker_share_usd_per_hour(), 4),
        "gke_gateway_picker_requests": dict(PICKER_REQUESTS),
    }


def gateway_cost_lines(summary: dict[str, Any]) -> list[str]:
    if "gke_gateway_proxy_usd_per_hour_at_least" not in summary:
        return []
    requests = summary["gke_gateway_picker_requests"]
    return [
        f"  inference gateway (gke.inferenceGateway), computed from list prices: the regional internal Application "
        f"Load Balancer's proxies at ${summary['gke_gateway_proxy_usd_per_instance_hour']}/proxy-hour, at least "
        f"${summary['gke_gateway_proxy_usd_per_hour_at_least']:.4f}/hour from pulumi up to pulumi destroy (GCP adds "
        f"proxies with traffic; counted in the totals below), plus "
        f"${summary['gke_gateway_processed_usd_per_gib']}/GiB processed each way; {PROXY_PRICE_SOURCE}",
        f"  endpoint picker: no node of its own; its requests ({requests['cpu']} CPU, {requests['memory']}) take "
        f"~${summary['gke_gateway_picker_share_usd_per_hour']:.4f}/hour of the system pool the stack already pays for",
    ]
