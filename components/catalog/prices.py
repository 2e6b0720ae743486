"""TPU chip and data-disk prices by generation, region and provisioning model, each with its source and date.
Only prices someone read are here: a missing (generation, region, model) is None, never a guess."""

from __future__ import annotations

from dataclasses import dataclass

from components.catalog.sources import COMPUTE_MIGRATION_SOURCE, V5E_LOG_SOURCE, V6E_ARTICLE_SOURCE, Source

# The provisioning models a price can be for, in the order the tables print them.
PROVISIONING_MODELS = ("flex-start", "spot", "on-demand", "1-year", "3-year")
# Only flex-start stops billing on its own (--max-run-duration); the others bill until deleted or preempted.
SELF_STOPPING_MODELS = frozenset({"flex-start"})


@dataclass(frozen=True)
class ChipPrice:
    generation: str
    region: str
    provisioning_model: str
    usd_per_chip_hour: float
    source: Source


@dataclass(frozen=True)
class DiskPrice:
    disk_type: str
    region: str
    usd_per_gb_month: float
    source: Source


_V5E_US_WEST4 = Source(V5E_LOG_SOURCE.where + ", cost table ('Live rates from the Cloud Billing Catalog for "
                       "us-west4, per chip-hour')", V5E_LOG_SOURCE.date)
_V6E_US_EAST5 = Source(V6E_ARTICLE_SOURCE.where + ", Part 6 ('Rates from the Cloud Billing Catalog, per chip-hour'; "
                       "flex-start is the SKU 'DWS Defined Duration V6e')", V6E_ARTICLE_SOURCE.date)

_V6E_EUROPE_WEST4 = Source(COMPUTE_MIGRATION_SOURCE.where + ", 'A primer on the four provisioning models' ('v6e, "
                           "europe-west4' column, per chip-hour)", COMPUTE_MIGRATION_SOURCE.date)

CHIP_PRICES: tuple[ChipPrice, ...] = (
    ChipPrice("v5e", "us-west4", "spot", 0.5779, _V5E_US_WEST4),
    ChipPrice("v5e", "us-west4", "flex-start", 0.6000, _V5E_US_WEST4),
    ChipPrice("v5e", "us-west4", "on-demand", 1.2000, _V5E_US_WEST4),
    ChipPrice("v5e", "us-west4", "1-year", 0.8400, _V5E_US_WEST4),
    ChipPrice("v5e", "us-west4", "3-year", 0.5400, _V5E_US_WEST4),
    # Spot is dearer than flex-start on this chip, the reverse of v5e.
    ChipPrice("v6e", "us-east5", "flex-start", 1.3500, _V6E_US_EAST5),
    ChipPrice("v6e", "us-east5", "spot", 1.4033, _V6E_US_EAST5),
    ChipPrice("v6e", "us-east5", "on-demand", 2.7000, _V6E_US_EAST5),
    # The Compute Engine article's table ("Prices read live from the Cloud Billing Catalog on 2026-08-11"), where its
    # flex-start instance ran; the same chip on either node API.
    ChipPrice("v6e", "europe-west4", "flex-start", 1.35, _V6E_EUROPE_WEST4),
    ChipPrice("v6e", "europe-west4", "spot", 1.78, _V6E_EUROPE_WEST4),
    ChipPrice("v6e", "europe-west4", "on-demand", 2.97, _V6E_EUROPE_WEST4),
)

# USD per provisioned GB-month of zonal disk, from the Cloud Billing Catalog as compiled in
# github.com/Cyclenerd/google-cloud-pricing-cost-calculator pricing.yml (compute.storage.balanced, `type: pd-balanced`,
# cost.us-west4.month: 0.11; generated 2025-03-06, commit 0166a59e; re-read 2026-12 through the search tool's
# stored copy). A disk bills for its provisioned size, per second, from creation until
# it is deleted, node or no node. Hyperdisk Balanced (v6e's data disk) bills capacity plus IOPS and throughput
# above a free baseline; no price for it has been read, so it is not here.
DISK_PRICES: tuple[DiskPrice, ...] = (
    DiskPrice("pd-balanced", "us-west4", 0.11, Source(
        "github.com/Cyclenerd/google-cloud-pricing-cost-calculator pricing.yml @ 0166a59e", "2025-03-06")),
)


def chip_price(generation: str, region: str, provisioning_model: str) -> ChipPrice | None:
    return next((price for price in CHIP_PRICES if (price.generation, price.region, price.provisioning_model)
                 == (generation, region, provisioning_model)), None)


def chip_prices(generation: str, region: str) -> dict[str, ChipPrice]:
    """The prices known for a generation in a region, by provisioning model, in PROVISIONING_MODELS order."""
    found = {price.provisioning_model: price for price in CHIP_PRICES
             if (price.generation, price.region) == (generation, region)}
    return {model: found[model] for model in PROVISIONING_MODELS if model in found}


def priced_regions(generation: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(price.region for price in CHIP_PRICES if price.generation == generation))


def disk_price(disk_type: str, region: str) -> DiskPrice | None:
    return next((price for price in DISK_PRICES if (price.disk_type, price.region) == (disk_type, region)), None)
