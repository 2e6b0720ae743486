"""What the stack spends: the arithmetic on the price list (per hour, per run, per month). No Pulumi imports,
nothing of the project but the price list."""

from __future__ import annotations

from dataclasses import dataclass

from components.basis.price_list import (
    E2_USD_PER_GIB_HOUR,
    E2_USD_PER_VCPU_HOUR,
    GKE_CLUSTER_FEE_USD_PER_HOUR,
    HOURS_PER_MONTH,
    SYSTEM_MACHINE_SHAPES,
    USD_PER_ALERT_CONDITION_MONTH,
    USD_PER_CHIP_HOUR,
    USD_PER_GB_MONTH,
    USD_PER_MILLION_ALERT_SERIES_RETURNED,
    VLLM_SERIES_PER_SCRAPE,
)

# A forgotten weekend on a node that never stops itself (the log: 60 h).
FORGOTTEN_WEEKEND_HOURS = 60


# usd_per_chip_hour: the chip's price where the stack runs (components/settings/fitting.py chip_usd_per_hour, the
# catalog's per generation and region); unset, the log's v5e price in us-west4.
def cost_per_hour_usd(pricing: str, chips: int = 1, usd_per_chip_hour: float | None = None) -> float:
    return (USD_PER_CHIP_HOUR[pricing] if usd_per_chip_hour is None else usd_per_chip_hour) * chips


def max_spend_usd(pricing: str, run_seconds: int, chips: int = 1, usd_per_chip_hour: float | None = None) -> float:
    """The most one run can cost before its run duration stops it."""
    return cost_per_hour_usd(pricing, chips, usd_per_chip_hour) * run_seconds / 3600


def usd_per_million_output_tokens(pricing: str, output_tokens_per_second: float, chips: int = 1,
                                  usd_per_chip_hour: float | None = None) -> float:
    return cost_per_hour_usd(pricing, chips, usd_per_chip_hour) / (output_tokens_per_second * 3600) * 1_000_000


def forgotten_weekend_usd(pricing: str, chips: int = 1, usd_per_chip_hour: float | None = None) -> float:
    return cost_per_hour_usd(pricing, chips, usd_per_chip_hour) * FORGOTTEN_WEEKEND_HOURS


def disk_usd_per_gb_month(disk_type: str) -> float | None:
    """The price read for this disk type (us-west4), or None: no price read (Hyperdisk Balanced)."""
    return USD_PER_GB_MONTH.get(disk_type)


def disk_usd_per_month(disk_type: str, size_gb: int) -> float | None:
    """What the compile-cache disk costs every month it exists, run or no run (None: no price read)."""
    price = disk_usd_per_gb_month(disk_type)
    return None if price is None else price * size_gb


def disk_usd_for_seconds(disk_type: str, size_gb: int, seconds: int) -> float | None:
    """The disk's share of a period, e.g. of one run."""
    month = disk_usd_per_month(disk_type, size_gb)
    return None if month is None else month * seconds / (HOURS_PER_MONTH * 3600)


def max_spend_with_disk_usd(pricing: str, run_seconds: int, disk_type: str, size_gb: int, chips: int = 1,
                            usd_per_chip_hour: float | None = None) -> float | None:
    """One run at most, TPU and the cache disk's share of those hours (the disk bills on after it)."""
    share = disk_usd_for_seconds(disk_type, size_gb, run_seconds)
    return None if share is None else max_spend_usd(pricing, run_seconds, chips, usd_per_chip_hour) + share


def system_machine_usd_per_hour(machine_type: str) -> float:
    vcpus, gib = SYSTEM_MACHINE_SHAPES[machine_type]
    return vcpus * E2_USD_PER_VCPU_HOUR + gib * E2_USD_PER_GIB_HOUR


@dataclass(frozen=True)
class GkeCost:
    """What a GKE deployment costs per hour with `chips` TPU nodes up."""

    chips: int
    chips_usd_per_hour: float
    cluster_fee_usd_per_hour: float
    system_pool_usd_per_hour: float

    @property
    def baseline_usd_per_hour(self) -> float:
        """Paid while the cluster exists, even with no TPU node: the fee and the system pool."""
        return self.cluster_fee_usd_per_hour + self.system_pool_usd_per_hour

    @property
    def total_usd_per_hour(self) -> float:
        return self.chips_usd_per_hour + self.baseline_usd_per_hour

    def max_spend_usd(self, run_seconds: int) -> float:
        """One run of every node: each TPU node stops by itself after run_seconds; fee and system pool
        for the same span (they keep running until `pulumi destroy`)."""
        return self.total_usd_per_hour * run_seconds / 3600


def gke_cost(pricing: str, chips: int, system_machine_type: str, system_nodes: int,
             cluster_fee: bool = True, usd_per_chip_hour: float | None = None) -> GkeCost:
    """cluster_fee: False when the stack reuses a cluster it does not pay for."""
    return GkeCost(
        chips=chips,
        chips_usd_per_hour=cost_per_hour_usd(pricing, chips, usd_per_chip_hour),
        cluster_fee_usd_per_hour=GKE_CLUSTER_FEE_USD_PER_HOUR if cluster_fee else 0.0,
        system_pool_usd_per_hour=system_machine_usd_per_hour(system_machine_type) * system_nodes,
    )


def prometheus_samples_per_month(scrape_interval_seconds: int, targets: int = 1) -> int:
    return int(VLLM_SERIES_PER_SCRAPE * targets * HOURS_PER_MONTH * 3600 / scrape_interval_seconds)


def alert_usd_per_month(conditions: int, series_per_evaluation: int, evaluation_seconds: int) -> float:
    evaluations = HOURS_PER_MONTH * 3600 / evaluation_seconds
    returned = conditions * series_per_evaluation * evaluations
    return conditions * USD_PER_ALERT_CONDITION_MONTH + returned / 1e6 * USD_PER_MILLION_ALERT_SERIES_RETURNED
