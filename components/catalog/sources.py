"""Where each catalogued fact comes from: one named source and the date it was read or measured."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    """A document, a log or a repository file, and the date its figure holds for (ISO, or a month)."""

    where: str
    date: str

    def __str__(self) -> str:
        return f"{self.where}, {self.date}"


# The two measured logs, by their titles (the v5e copy names no place of publication).
V5E_LOG = "build log 'Self-hosting a lite agent backend on one TPU: Gemma 4 E2B + vLLM on a v5e-1'"
V5E_LOG_DATE = "2026-08-09"  # the day its flex-start command was verified (the log: "Verified 2026-08-09")
V6E_ARTICLE = ("'Serving Gemma 4 E2B on a TPU v6e-1' (github.com/xbill9/gemma4-dev, "
               "tpu-vllm-v6e1-2b/devto-vllm-gemma4-e2b-v6e1.md @ f15a44d)")
V6E_BOOT_LOG = ("github.com/xbill9/gemma4-dev tpu-vllm-v6e1-2b/benchmarks/runs/2026-08-10-config-validation-v6e1/"
                "logs/boot.log @ e68dd79")
V6E_DATE = "2026-08-10"  # the boot log's timestamps (08-10 17:53)

V5E_LOG_SOURCE = Source(V5E_LOG, V5E_LOG_DATE)
V6E_ARTICLE_SOURCE = Source(V6E_ARTICLE, V6E_DATE)
V6E_BOOT_SOURCE = Source(V6E_BOOT_LOG, V6E_DATE)

# Google's pages as stored by the project's search tool (read 2026-12).
TPU_REGIONS_PAGE = Source("cloud.google.com/tpu/docs/regions-zones (v5e and v6e rows)", "read 2026-12")
TPU_DISK_PAGE = Source("cloud.google.com/tpu/docs/setup-persistent-disk, 'TPU support for Hyperdisk and "
                       "Persistent Disk'", "read 2026-12")
V5E_CONFIG_PAGE = Source("cloud.google.com/tpu/docs/supported-versions, 'Cloud TPU v5e types for serving' "
                         "(AcceleratorType -> GKE machine type, topologies 1x1, 2x2, 2x4)", "read 2026-12")
V6E_CONFIG_PAGE = Source("cloud.google.com/tpu/docs/v6e, 'Supported configurations' (topology, chips, GKE "
                         "machine type)", "read 2026-12")
# The disk table of Google's storage-options page: "TPU v6e Hyperdisk Balanced, Hyperdisk ML", "TPU v5e Balanced
# Persistent Disk, Hyperdisk ML" (docs.cloud.google.com/tpu/docs/storage-options-compute, as stored).
TPU_STORAGE_PAGE = Source("cloud.google.com/tpu/docs/storage-options, 'TPU generation and supported disk types'",
                          "read 2026-12")
# Google's flex-start page, Limitations: "You can only request Flex-start TPU v6e and v5e in the specified zones:
# TPU v6e for training and serving: asia-northeast1-b, us-east5-a; TPU v5e for training: us-west4-a; TPU v5e for
# serving: us-central1-a" (cloud.google.com/tpu/docs/request-using-flex-start, as stored).
FLEX_START_PAGE = Source("cloud.google.com/tpu/docs/request-using-flex-start, Limitations", "read 2026-12")
# The hosts' vCPUs and memory: Google's VM-type tables (v5e: 24 vCPU / 48 GB, 112 / 192, 224 / 384; v6e: 44 / 176,
# 180 / 720, 180 / 1440). Not seen whole in a stored excerpt: confirm before relying on more than a share of them.
HOST_TABLE_PAGE = Source("cloud.google.com/tpu/docs/v5e and /v6e, 'VM types' (vCPUs and RAM per VM); not seen in a "
                         "stored excerpt", "read 2026-12")
# The same page, Before you begin: "You should also ensure you have sufficient preemptible quota to use Flex-start.
# The default preemptible quota for TPU v5e and v6e is 64 cores." Flex-start and spot draw on one quota.
FLEX_START_QUOTA_PAGE = Source("cloud.google.com/tpu/docs/request-using-flex-start, Before you begin ('sufficient "
                               "preemptible quota to use Flex-start')", "read 2026-12")
# Google's regions-and-zones page as stored (cloud-dot-devsite-v2-prod.appspot.com/tpu/docs/types-zones?hl=de), its
# v6e rows for the US: us-central1-b, us-east1-d, us-east5-a, us-east5-b, us-east5-c, us-east4-a, us-east4-b (the
# last three single-tenant), us-west1-c (single-tenant, except spot quota); its Europe and Asia rows are cut off
# in the stored copy.
TPU_ZONES_PAGE_V6E = Source("cloud.google.com/tpu/docs/types-zones (v6e, USA), as stored by the search tool",
                            "read 2026-12")
# Google's v6e page, 'System architecture' table as stored: "HBM bandwidth per chip 819 GBps (v5e) 1640 GBps (v6e)"
# (an older copy reads 800 / 1600). The v5e log's own spec table reads "HBM bandwidth 800 GiBps" and computes its
# 3.94 ms floor from it; it notes v5e is quoted in GiBps and v6e in GBps ("the real generational ratio is ~1.9x").
TPU_BANDWIDTH_PAGE = Source("cloud.google.com/tpu/docs/v6e, 'System architecture' ('HBM bandwidth per chip')",
                            "read 2026-12")
# Google's Compute Engine TPU pages (read 2026-12 through the search tool): "Compute Engine supports the following TPU
# versions: TPU7x, TPU v6e, TPU v5p" (no v5e), as VM instances of TPU machine types.
COMPUTE_TPU_MACHINES_PAGE = Source("cloud.google.com/compute/docs/tpus/tpu-machines ('Compute Engine supports the "
                                   "following TPU versions: TPU7x, TPU v6e, TPU v5p')", "read 2026-12")
# The Cloud TPU API's banner on its own pages: "The Cloud TPU API is not supported on TPU7x and later TPU versions"
# (docs.cloud.google.com/tpu/docs/queued-resources, attach-durable-block-storage).
CLOUD_TPU_API_FROZEN_PAGE = Source("cloud.google.com/tpu/docs/queued-resources, banner ('The Cloud TPU API is not "
                                   "supported on TPU7x and later TPU versions')", "read 2026-12")
# Google's TPU7x page, 'System architecture': "Each TPU7x chip contains two TensorCores and four SparseCores";
# "HBM capacity per chip (GiB) | 95 | 32 | 192" (v5p, v6e, TPU7x); its HBM bandwidth row (7,380 GBps per chip).
TPU7X_PAGE = Source("cloud.google.com/tpu/docs/tpu7x, 'System architecture' table", "read 2026-12")
# Google's regions-and-zones page as stored (docs.cloud.google.com/tpu/docs/types-zones and regions-zones.md.txt),
# North America: "All TPU7x configurations ... us-central1-ai1a, us-central1-c"; "All v6e configurations ...
# us-central1-ai1 (sic), us-central1-b, us-east1-d, us-east5-a, us-east5-b, us-south1-ai1b".
TPU_ZONES_PAGE_2026 = Source("docs.cloud.google.com/tpu/docs/types-zones (TPU7x and v6e rows, North America), as "
                             "stored by the search tool", "read 2026-12")
# Google's Flex-start VMs on Compute Engine (GA, announced 2025-09-25; "About Flex-start VMs"): a request waits in
# a queue for up to two hours, the VM runs at most seven days and draws preemptible quota.
COMPUTE_FLEX_START_PAGE = Source("cloud.google.com/compute/docs/instances/about-flex-start-vms ('About Flex-start "
                                 "VMs': at most 7 days of run, up to 2 hours in the queue, preemptible quota)",
                                 "read 2026-12")
# The build log author's own move of a v6e-1 rig to Compute Engine (measured: a FLEX_START ct6e-standard-1t instance
# RUNNING in europe-west4-a, the same KV cache as on the queued resource), with what failed on the way: the image
# ships no Docker ("sudo: docker: command not found"), its 10 GB default boot disk, the scopes; the quota ids each
# provisioning model spends; the Cloud Billing Catalog's v6e rates in europe-west4; v5e refused by name ("This user
# agent is not allowed to use the machine type [ct5lp-hightpu-1t]").
XBILL_REPO = "github.com/xbill9/gemma4-dev @ 4cf2d8b"
COMPUTE_MIGRATION_ARTICLE = ("'The unofficial TPU migration guide: Cloud TPU API to Compute Engine' "
                             f"({XBILL_REPO}, gce-vllm-v6e1-2b/devto-tpu-api-vs-gce-provisioning.md)")
COMPUTE_MIGRATION_SOURCE = Source(COMPUTE_MIGRATION_ARTICLE, "2026-08-11")
# The same repository's reading of Google's TPU OS images page (docs.cloud.google.com/tpu/docs/tpu-os-images): two
# current families in ubuntu-os-accelerator-images, ubuntu-accel-2204-amd64-tpu-v5e-v5p-v6e (v6e, v5p, v5e; Ubuntu
# 22.04) and ubuntu-accel-2404-amd64-tpu-tpu7x (TPU7x only; Ubuntu 24.04); "Pin the image FAMILY, never a dated
# build"; and its machine-type table (HARDWARE.md: TPU7x publishes tpu7x-standard-4t).
TPU_OS_IMAGES_SOURCE = Source(f"{XBILL_REPO}, gce-vllm-v5e1-2b/CLAUDE.md 'The image' (its reading of "
                              "docs.cloud.google.com/tpu/docs/tpu-os-images)", "2026-08-11")
# The same repository's hardware notes: "TPU7x adds an allowlist on spot, flex-start, and calendar-mode reservations;
# v5p and v6e are not gated" (its reading of compute/docs/instances/provisioning-models, a footnote there).
TPU7X_ALLOWLIST_SOURCE = Source(f"{XBILL_REPO}, HARDWARE.md 'Mapping between the two' (its reading of "
                                "docs.cloud.google.com/compute/docs/instances/provisioning-models)", "2026-08-19")
# GKE's own TPU7x page: "Ironwood (TPU7x) is available in GKE Standard clusters that run version 1.34.0-gke.2201000
# and later, and in Autopilot clusters that run version 1.34.1-gke.3084001 and later."
GKE_TPU7X_PAGE = Source("docs.cloud.google.com/kubernetes-engine/docs/concepts/tpu-ironwood, Availability",
                        "read 2026-12")
TPU_INFERENCE = "vllm-project/tpu-inference 0.32.0"
VLLM = "vllm-project/vllm 0.33.0"
