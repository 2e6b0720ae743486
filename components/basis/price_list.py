"""Google's prices the stack's costs use, each with its source: TPU chips, disks, secrets, GKE, Cloud Storage,
Cloud Monitoring. Numbers only; the arithmetic on them is components/basis/spending.py."""

from __future__ import annotations

from components.catalog.prices import CHIP_PRICES, DISK_PRICES

# USD per chip-hour of one v5e chip in us-west4 (the log's cost table), by provisioning model: the catalog's
# (components/catalog/prices.py, where each price keeps its source and date).
USD_PER_CHIP_HOUR = {price.provisioning_model: price.usd_per_chip_hour
                     for price in CHIP_PRICES if (price.generation, price.region) == ("v5e", "us-west4")}

# USD per provisioned GB-month of zonal disk in us-west4 (components/catalog/prices.py DISK_PRICES: its source).
# A disk bills for its provisioned size, per second, from creation until it is deleted: whether or not a node is
# attached, whether or not a run is active.
USD_PER_GB_MONTH = {price.disk_type: price.usd_per_gb_month for price in DISK_PRICES if price.region == "us-west4"}

# USD per active secret version per month (cloud.google.com/secret-manager/pricing: $0.06 per
# version and location, automatic replication billed as one location; the first 6 active
# versions a month are free per billing account). Versions bill until destroyed, run or no run.
USD_PER_SECRET_VERSION_MONTH = 0.06
FREE_SECRET_VERSIONS_PER_MONTH = 6

# The billing month the per-month prices assume (Google prorates them by the second;
# the same catalog's monthly instance prices are its hourly ones x 730).
HOURS_PER_MONTH = 730


# --- GKE (the scale-out platform) -------------------------------------------------------------
# TPU chips in a GKE node pool bill at the same per-chip-hour rates as above (USD_PER_CHIP_HOUR):
# ct5lp-hightpu-1t is one v5e chip and its host; GKE adds no charge per TPU node.

# GKE Standard cluster management fee, USD per cluster-hour, whatever the size or topology
# (cloud.google.com/kubernetes-engine/pricing). The free tier ($74.40 a month per billing account)
# covers one zonal cluster; the plan counts the fee anyway, since that credit may already be in use.
GKE_CLUSTER_FEE_USD_PER_HOUR = 0.10

# Every GKE node's boot disk (the system pool's and the ComputeClass's TPU nodes'): GKE's default, written out in
# the stack so the costs price exactly what runs (pd-balanced at USD_PER_GB_MONTH: $11 a month per node).
GKE_BOOT_DISK_GB = 100
GKE_BOOT_DISK_TYPE = "pd-balanced"

# The CPU system pool (kube-system, the metrics adapter, Managed Prometheus collectors), on-demand
# USD per node-hour in us-west4: E2 predefined, $0.024553/vCPU-h + $0.003291/GiB-h
# (cloud.google.com/compute/vm-instance-pricing, us-west4). Only machine types priced here are accepted.
E2_USD_PER_VCPU_HOUR = 0.024553
E2_USD_PER_GIB_HOUR = 0.003291
SYSTEM_MACHINE_SHAPES = {"e2-standard-2": (2, 8), "e2-standard-4": (4, 16)}  # vCPUs, GiB

# Cloud Storage, Standard class, regional us-west4: USD per GB-month (cloud.google.com/storage/pricing, "Regional"
# table). Operations are left out: a compile writes a few hundred objects once per configuration, a warm start
# reads them, cents per month at most.
STORAGE_USD_PER_GB_MONTH = 0.023

# --- Cloud Monitoring (monitoring.enabled: the dashboard and alerts) -----------------------------------------
# Google Cloud Observability pricing (cloud.google.com/stackdriver/pricing), Cloud Monitoring: Prometheus samples
# ingested (the Ops Agent's Prometheus receiver and Managed Service for Prometheus alike) $0.06 per million for the
# first 50 billion a month, with no free allotment (the free 150 MiB a month is for non-Prometheus chargeable
# metrics); an alerting policy condition $1.50 a month, plus $0.35 per million time series its query returns;
# dashboards and Google's own metrics cost nothing. What could be read here (2026-12, the search tool's stored pages):
# the page as archived 2023-06-05 lists Managed Service for Prometheus at $0.15/million for the first 50 billion
# samples (effective 2022-05-16) and $0.06 only past 500 billion; the newer copies stored are cut before that table.
# The $0.06 here is the later list as the team knew it, unverified: at $0.15 the samples line is 2.5x.
USD_PER_MILLION_PROMETHEUS_SAMPLES = 0.06
USD_PER_ALERT_CONDITION_MONTH = 1.50
USD_PER_MILLION_ALERT_SERIES_RETURNED = 0.35
# Series one scrape of vLLM's /metrics holds: its gauges and counters, and a histogram's buckets for each of its
# ~15 histograms (vllm/v1/metrics/loggers.py, 0.33.0). An estimate of the order, not measured on the log's build.
VLLM_SERIES_PER_SCRAPE = 400
