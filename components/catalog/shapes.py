"""Single-host TPU shapes as dated data: chips, the HBM the runtime reports, runtime image, the node APIs a
generation has (the Cloud TPU API's queued resources, Compute Engine's instances) and each one's spelling, GKE machine
and topology, the data disks a node accepts, where flex-start was seen accepted or refused, and the quota ids."""

from __future__ import annotations

from dataclasses import dataclass

from components.catalog.sources import (
    CLOUD_TPU_API_FROZEN_PAGE,
    COMPUTE_MIGRATION_SOURCE,
    COMPUTE_TPU_MACHINES_PAGE,
    FLEX_START_PAGE,
    FLEX_START_QUOTA_PAGE,
    GKE_TPU7X_PAGE,
    HOST_TABLE_PAGE,
    TPU7X_ALLOWLIST_SOURCE,
    TPU7X_PAGE,
    TPU_BANDWIDTH_PAGE,
    TPU_DISK_PAGE,
    TPU_INFERENCE,
    TPU_OS_IMAGES_SOURCE,
    TPU_REGIONS_PAGE,
    TPU_STORAGE_PAGE,
    TPU_ZONES_PAGE_2026,
    TPU_ZONES_PAGE_V6E,
    V5E_CONFIG_PAGE,
    V5E_LOG_SOURCE,
    V6E_ARTICLE_SOURCE,
    V6E_BOOT_SOURCE,
    V6E_CONFIG_PAGE,
    Source,
)

GIB = 1024**3
GB = 10**9
# Which quota each provisioning model draws on (Cloud TPU API): flex-start takes the preemptible quota, as spot does
# (Google's flex-start page: "sufficient preemptible quota to use Flex-start"); on-demand its own. The committed-use
# models are not read here.
PREEMPTIBLE_QUOTA_MODELS = frozenset({"spot", "flex-start"})
ON_DEMAND_QUOTA_MODELS = frozenset({"on-demand"})
QUOTA_MODEL_SOURCE = FLEX_START_QUOTA_PAGE
# v5e's serving quota and the zones it applies in: cloud.google.com/tpu/docs/quota ("TPU v5e (training and
# inference)") and the flex-start page's Limitations ("TPU v5e for training: us-west4-a; TPU v5e for serving:
# us-central1-a").
SERVING_QUOTA_SOURCE = Source("cloud.google.com/tpu/docs/quota, TPU v5e (training and inference); "
                              "cloud.google.com/tpu/docs/request-using-flex-start, Limitations", "read 2026-12")

# The two ways a single TPU VM is made: the Cloud TPU API's queued resource (v2alpha1; frozen, "not supported on
# TPU7x") and a Compute Engine instance of a TPU machine type (tpu-machines: TPU7x, v6e, v5p; no v5e).
QUEUED_RESOURCE = "queued-resource"
COMPUTE = "compute"
NODE_APIS = (QUEUED_RESOURCE, COMPUTE)
NODE_APIS_SOURCE = Source(f"{COMPUTE_TPU_MACHINES_PAGE.where}; {CLOUD_TPU_API_FROZEN_PAGE.where}",
                          COMPUTE_TPU_MACHINES_PAGE.date)


@dataclass(frozen=True)
class ZoneObservation:
    """Whether a zone took a flex-start request for this accelerator type, when, and who saw it."""

    zone: str
    accepted: bool
    source: Source
    detail: str = ""
    api: str = "queued-resource"
    """The node API the request went through (every observation so far: the Cloud TPU API's queued resource)."""


@dataclass(frozen=True)
class Generation:
    """What every shape of one TPU generation shares."""

    name: str
    """Prose name: v5e, v6e."""
    hbm_bytes_per_chip: int
    """What the runtime reports per chip (`total_hbm_limit_gb` / chips), never the marketing figure."""
    hbm_measured: bool
    hbm_source: Source
    runtime_version: str
    runtime_source: Source
    gke_accelerator: str
    """The `cloud.google.com/gke-tpu-accelerator` node label value."""
    gke_accelerator_source: Source
    data_disk_types: tuple[str, ...]
    """Compute Engine disk types the TPU VM accepts as a data disk; the first is the one the stack uses."""
    data_disk_source: Source
    zones: frozenset[str]
    """Zones where the type exists at all (whatever the provisioning model)."""
    zones_source: Source
    flex_start: tuple[ZoneObservation, ...]
    quota_id: str
    """The per-zone chip quota on-demand draws on (Cloud TPU API). Flex-start does not: flex_start_quota_id."""
    spot_quota_id: str
    """The per-zone preemptible chip quota: spot and flex-start draw on it (QUOTA_MODEL_SOURCE)."""
    quota_source: Source
    price_region: str
    """The region the catalog's measured prices are for (components/catalog/prices.py)."""
    flex_start_listed: frozenset[str] = frozenset()
    """Zones Google's flex-start page lists for this generation (FLEX_START_PAGE); not an observation."""
    flex_start_observed_on: str = ""
    """The one shape the flex_start observations were made on (none ran the generation's other shapes)."""
    devices_per_chip: int = 1
    """JAX devices per chip: what tpu-inference's mesh and --tensor-parallel-size count (TPU7x: 2, else 1)."""
    hbm_bandwidth_bytes_per_second: int = 0
    """One chip's HBM bandwidth (0: not read; the layouts then predict no rate)."""
    hbm_bandwidth_source: Source | None = None
    node_apis: tuple[str, ...] = (QUEUED_RESOURCE,)
    """The node APIs this generation has (NODE_APIS_SOURCE); tpu.api picks one where there are two."""
    default_api: str = QUEUED_RESOURCE
    """tpu.api unset (docs/models.md says why per generation)."""
    compute_image: str | None = None
    """The Compute Engine boot image for this generation: an image family (InitializeParams.sourceImage takes
    "projects/PROJECT/global/images/family/FAMILY", the newest image of the family); None where none was read (the
    compute path then needs tpu.runtimeVersion to name one)."""
    compute_image_source: Source | None = None
    compute_image_booted: bool = False
    """Whether a VM of this generation was seen to boot the image (else it is read, not run)."""
    compute_quota: tuple[tuple[str, str], ...] = ()
    """(provisioning model, the Compute Engine quota it spends, per project and region, as the source spells it):
    Compute Engine's TPU quotas are not the Cloud TPU API's (quota_id, spot_quota_id), and are regional."""
    compute_quota_source: Source | None = None
    allowlisted_models: frozenset[str] = frozenset()
    """Provisioning models Compute Engine gives this generation only to projects on an allowlist (the account team
    adds them)."""
    allowlist_source: Source | None = None
    gke_boot_disk_type: str = "pd-balanced"
    """The boot disk type of this generation's GKE TPU nodes: GKE's default, pd-balanced, where the machine takes it
    (v5e); v6e and TPU7x machines take Hyperdisk, not Persistent Disk."""
    gke_min_version: str | None = None
    """The GKE version a Standard cluster needs for node pools of this generation (None: no more than the stack's
    own floor, components/settings/facts.py GKE_MIN_VERSION)."""
    gke_min_version_source: Source | None = None
    serving_zones: frozenset[str] = frozenset()
    """Zones where Google serves this generation from its separate serving quota ("TPU v5e uses separate quotas for
    training and serving"): there a node draws serving_quota, not quota_id / spot_quota_id (SERVING_QUOTA_SOURCE)."""
    serving_quota: tuple[tuple[str, str], ...] = ()
    """(provisioning model, the serving quota's name as Google's quota page spells it; its API id not read)."""

    @property
    def runtime_tag(self) -> str:
        """What every runtime image of this generation names: tpuv5-lite, tpuv6e."""
        return self.runtime_version.removeprefix("v2-alpha-")

    @property
    def flex_start_quota_id(self) -> str:
        """The quota a flex-start request consumes: the preemptible one (QUOTA_MODEL_SOURCE)."""
        return self.spot_quota_id

    def quota_id_for(self, provisioning_model: str, zone: str | None = None,
                     api: str = QUEUED_RESOURCE) -> str | None:
        """The quota this provisioning model draws on in `zone` through `api` (the serving quota in a serving zone;
        Compute Engine's own on the compute path), or None where the catalog has not read it."""
        if api == COMPUTE:
            return dict(self.compute_quota).get(provisioning_model)
        if zone in self.serving_zones:
            return dict(self.serving_quota).get(provisioning_model)
        if provisioning_model in PREEMPTIBLE_QUOTA_MODELS:
            return self.spot_quota_id or None
        if provisioning_model in ON_DEMAND_QUOTA_MODELS:
            return self.quota_id or None
        return None

    def zone_unknown(self, zone: str) -> str:
        """What to tell someone whose zone the catalog does not list: a warning, not a refusal (zone lists change
        every few months; only a zone seen refusing is an error)."""
        return self.zone_not_listed(zone) + "; the plan goes on, and the API answers at pulumi up"

    def zone_not_listed(self, zone: str) -> str:
        """What to tell someone whose zone is not in `zones`: the list is Google's pages as read, not the truth
        today (their stored copies cut the Asia rows off, and Google adds zones)."""
        return (f"{zone} is not in the zones Google's pages listed for TPU {self.name} as of "
                f"{self.zones_source.date.removeprefix('read ')} ({', '.join(sorted(self.zones))}; "
                f"{self.zones_source.where}); if Google lists it now, add it to components/catalog/shapes.py "
                f"({self.name}'s zones) with the source")


@dataclass(frozen=True)
class Shape:
    """One single-host TPU slice: what `tpu.acceleratorType` names on both platforms."""

    accelerator_type: str
    """The shape's one name: the Cloud TPU API's spelling where the generation has that API (v5litepod-1, never
    v5e-1; v6e-1), else its Compute Engine machine type (tpu7x-standard-4t)."""
    generation: Generation
    chips: int
    gke_machine_type: str
    gke_topology: str
    config_source: Source
    host_vcpus: int = 0
    host_memory_bytes: int = 0
    """The host VM's vCPUs and memory (GB counted as 10^9 bytes, the smaller reading); HOST_TABLE_PAGE."""
    machine_type: str | None = None
    """The Compute Engine machine type (ct6e-standard-1t, tpu7x-standard-4t); None where Compute Engine has none for
    the generation (v5e: GKE's ct5lp-hightpu-* machines are not listed among Compute Engine's TPU machines)."""
    host_source: Source | None = None
    """Where host_vcpus and host_memory_bytes were read (None: HOST_TABLE_PAGE)."""
    on_gke: bool = True
    """Whether the gke wing builds this shape's node pools: it sizes the pod to the node, so only a shape whose host
    vCPUs and memory were read."""

    @property
    def names(self) -> tuple[str, ...]:
        """Every spelling tpu.acceleratorType takes for this shape: its name, then its machine type."""
        return tuple(dict.fromkeys(name for name in (self.accelerator_type, self.machine_type) if name))

    @property
    def node_apis(self) -> tuple[str, ...]:
        return self.generation.node_apis

    @property
    def compute_image(self) -> str | None:
        return self.generation.compute_image

    @property
    def hbm_bytes_per_chip(self) -> int:
        return self.generation.hbm_bytes_per_chip

    @property
    def devices(self) -> int:
        """The JAX devices of the host: what tensor-parallel x data-parallel sizes multiply to."""
        return self.chips * self.generation.devices_per_chip

    @property
    def hbm_bytes_per_device(self) -> int:
        return self.generation.hbm_bytes_per_chip // self.generation.devices_per_chip

    @property
    def hbm_bytes(self) -> int:
        """Every chip of the host (what tpu-inference sums when all chips serve one model: worker/tpu_worker.py
        determine_available_memory). Assumed on 4- and 8-chip hosts: the per-chip limit was measured on 1-chip
        hosts only; Google's v6e page gives "HBM capacity per chip 16 GB (v5e), 32 GB (v6e)" whatever the slice,
        and tpu-inference's own table (TPU_INFERENCE_HBM_TABLE) is per chip too."""
        return self.generation.hbm_bytes_per_chip * self.chips

    @property
    def runtime_version(self) -> str:
        return self.generation.runtime_version

    @property
    def gke_tpu_count(self) -> int:
        """The pod's `google.com/tpu` request: every chip of the node (single-host slices only)."""
        return self.chips

    @property
    def cache_disk_type(self) -> str:
        return self.generation.data_disk_types[0]

    @property
    def flex_start_accepted_zones(self) -> frozenset[str]:
        return frozenset(seen.zone for seen in self.generation.flex_start if seen.accepted)

    @property
    def flex_start_refused_zones(self) -> frozenset[str]:
        return frozenset(seen.zone for seen in self.generation.flex_start if not seen.accepted)

    def flex_start_seen(self, api: str) -> tuple[ZoneObservation, ...]:
        """The flex-start observations made through this node API, in the order they were recorded."""
        return tuple(seen for seen in self.generation.flex_start if seen.api == api)


V5E = Generation(
    name="v5e",
    # "Memory statistics | total_hbm_limit_gb=15.75GiB" (the log, one chip): size against this.
    hbm_bytes_per_chip=int(15.75 * GIB),
    hbm_measured=True,
    hbm_source=V5E_LOG_SOURCE,
    runtime_version="v2-alpha-tpuv5-lite",
    runtime_source=V5E_LOG_SOURCE,
    gke_accelerator="tpu-v5-lite-podslice",
    gke_accelerator_source=Source("GoogleCloudPlatform accelerated-platforms custom-compute-tpu-v5e-1x1.yaml "
                                  "(components/gke/compute_class.py TPU_TYPE)", "read 2026-11"),
    # "TPU v5e: Balanced Persistent Disk, Hyperdisk ML" (the storage-options page; the Hyperdisk page lists only
    # Balanced Persistent Disk). Hyperdisk ML is read-mostly and unpriced here, so the stack keeps pd-balanced.
    data_disk_types=("pd-balanced", "hyperdisk-ml"),
    data_disk_source=Source(TPU_STORAGE_PAGE.where + "; " + TPU_DISK_PAGE.where, TPU_STORAGE_PAGE.date),
    # The v5e rows of Google's page as it has been published (current: us-central1-a, us-south1-a, us-west1-c,
    # us-west4-a; listed as single-tenant or in earlier versions: us-east5-a/-b/-c, us-west4-b, europe-west4-b),
    # and europe-west4-a, which no stored Google page lists for v5e: it is here only because the log's flex-start
    # refusal names v5litepod-1 in that zone (a refusal proves nothing about the zone's hardware). The stored copies
    # cut the Asia-Pacific rows off, so an Asia zone Google lists may be missing (zone_not_listed says so).
    zones=frozenset({
        "us-central1-a", "us-south1-a", "us-west1-c", "us-west4-a", "us-west4-b",
        "us-east5-a", "us-east5-b", "us-east5-c", "europe-west4-a", "europe-west4-b",
    }),
    zones_source=TPU_REGIONS_PAGE,
    flex_start=(
        ZoneObservation("us-west4-a", True, V5E_LOG_SOURCE, "queued resource reached ACTIVE (FLEX_START, 14400s)"),
        ZoneObservation("europe-west4-a", False, V5E_LOG_SOURCE,
                        'FLEX_START provisioning model is not supported for accelerator type "v5litepod-1"'),
        ZoneObservation("europe-west4-b", False, V5E_LOG_SOURCE,
                        'FLEX_START provisioning model is not supported for accelerator type "v5litepod-1"'),
    ),
    quota_id="TPUV5sLitepodPerProjectPerZoneForTPUAPI",
    spot_quota_id="TPUV5sPreemptibleLitepodPerProjectPerZoneForTPUAPI",
    quota_source=Source(V5E_LOG_SOURCE.where + "; the v6e article's spelling table", V5E_LOG_SOURCE.date),
    price_region="us-west4",
    # "TPU v5e for training: us-west4-a; TPU v5e for serving: us-central1-a"; the log served in us-west4-a.
    flex_start_listed=frozenset({"us-west4-a", "us-central1-a"}),
    flex_start_observed_on="v5litepod-1",
    # Compute Engine lists TPU7x, v6e and v5p, not v5e: the queued resource is v5e's only node API.
    node_apis=(QUEUED_RESOURCE,),
    default_api=QUEUED_RESOURCE,
    # Google's flex-start page lists us-central1-a for "TPU v5e for serving" and us-west4-a for training; the quota
    # page: inference "requires serving quota types: tpu-v5s-litepod-serving for on-demand TPUs,
    # tpu-v5s-litepod-serving-preemptible for preemptible TPUs". In us-west4-a the log's v5litepod-1 drew the
    # preemptible training quota, TPUV5sPreemptibleLitepodPerProjectPerZoneForTPUAPI.
    serving_zones=frozenset({"us-central1-a"}),
    serving_quota=(("on-demand", "tpu-v5s-litepod-serving"), ("spot", "tpu-v5s-litepod-serving-preemptible"),
                   ("flex-start", "tpu-v5s-litepod-serving-preemptible")),
    # The log's spec table, "HBM bandwidth 800 GiBps": its 3.94 ms floor (and so the efficiency the layouts are
    # calibrated on, components/sizing/rate.py) divides by this figure; Google's page now reads 819 GBps.
    hbm_bandwidth_bytes_per_second=800 * GIB,
    hbm_bandwidth_source=Source(f"{V5E_LOG_SOURCE.where} ('HBM bandwidth 800 GiBps', vendor); "
                                f"{TPU_BANDWIDTH_PAGE.where} reads 819 GBps", V5E_LOG_SOURCE.date),
)

V6E = Generation(
    name="v6e",
    # "Memory statistics | total_hbm_limit_gb=31.24GiB" on a v6e-1 (one chip); tpu-inference's own table
    # (tpu_inference/utils.py get_device_hbm_limit: on Pathways, and wherever no device reports memory_stats)
    # says 32 GiB, the runtime less.
    hbm_bytes_per_chip=int(31.24 * GIB),
    hbm_measured=True,
    hbm_source=V6E_BOOT_SOURCE,
    runtime_version="v2-alpha-tpuv6e",
    runtime_source=V6E_ARTICLE_SOURCE,
    gke_accelerator="tpu-v6e-slice",
    gke_accelerator_source=Source("cloud.google.com/kubernetes-engine/docs/concepts/plan-tpus (v6e row); not "
                                  "seen in a stored excerpt: confirm before relying on it", "read 2026-12"),
    # "v6e: Hyperdisk Balanced, Hyperdisk ML" (32 disks per VM with the boot disk): pd-balanced does not attach.
    data_disk_types=("hyperdisk-balanced", "hyperdisk-ml"),
    data_disk_source=TPU_DISK_PAGE,
    # Google's page (TPU_ZONES_PAGE_V6E), USA: us-central1-b, us-east1-d, us-east5-a, us-east5-b, and single-tenant
    # us-east5-c, us-east4-a, us-east4-b, us-west1-c; europe-west4-a (earlier versions of the page; the article ran
    # flex-start there); the article adds us-south1-a, where the API has v6e-1 hardware (and refuses flex-start);
    # Google's flex-start page lists asia-northeast1-b. The article counts 18 zones offering v6e-1 in `gcloud
    # compute tpus accelerator-types list` without naming them.
    # The page's later copy (TPU_ZONES_PAGE_2026) adds the AI zone us-south1-ai1b (and "us-central1-ai1", cut short
    # in the stored copy: not added, so it warns as any unlisted zone does).
    zones=frozenset({"us-central1-b", "us-east1-d", "us-east5-a", "us-east5-b", "us-east5-c", "us-east4-a",
                     "us-east4-b", "us-west1-c", "europe-west4-a", "us-south1-a", "asia-northeast1-b",
                     "us-south1-ai1b"}),
    zones_source=Source(TPU_ZONES_PAGE_V6E.where + "; " + TPU_ZONES_PAGE_2026.where + "; " + V6E_ARTICLE_SOURCE.where
                        + "; " + FLEX_START_PAGE.where, TPU_ZONES_PAGE_V6E.date),
    flex_start=(
        ZoneObservation("us-east5-a", True, V6E_ARTICLE_SOURCE, "accepted (the article's 'Confirmed accepting')"),
        ZoneObservation("us-east5-b", True, V6E_ARTICLE_SOURCE, "accepted; the article's runs"),
        ZoneObservation("europe-west4-a", True, V6E_ARTICLE_SOURCE, "accepted (refused v5litepod-1)"),
        ZoneObservation("us-central1-b", False, V6E_ARTICLE_SOURCE,
                        'FLEX_START provisioning model is not supported for accelerator type "v6e-1" in location '
                        '"us-central1-b"'),
        ZoneObservation("us-south1-a", False, V6E_ARTICLE_SOURCE, "refused by name, as us-central1-b"),
    ),
    quota_id="TPUV6EPerProjectPerZoneForTPUAPI",
    spot_quota_id="TPUV6EPreemptiblePerProjectPerZoneForTPUAPI",
    quota_source=V6E_ARTICLE_SOURCE,
    price_region="us-east5",
    flex_start_listed=frozenset({"asia-northeast1-b", "us-east5-a"}),
    flex_start_observed_on="v6e-1",
    # "HBM bandwidth per chip ... 1640 GBps" (GB: 10^9 bytes; the log: v6e is quoted in GBps).
    hbm_bandwidth_bytes_per_second=1640 * GB,
    hbm_bandwidth_source=TPU_BANDWIDTH_PAGE,
    # Both APIs. The default stays the queued resource: it is the path the article measured, and a v6e stack made
    # before tpu.api existed keeps its node (a new default would replace it). docs/models.md says when to pick compute.
    node_apis=(QUEUED_RESOURCE, COMPUTE),
    default_api=QUEUED_RESOURCE,
    # Booted: "gce-vllm-v6e1-2b europe-west4-a ct6e-standard-1t RUNNING FLEX_START", the image family pinned (its
    # builds ship about weekly). It has no Docker at first boot, so the compute path's boot script installs it
    # (components/vm/boot_script.py).
    compute_image="projects/ubuntu-os-accelerator-images/global/images/family/ubuntu-accel-2204-amd64-tpu-v5e-v5p-v6e",
    compute_image_source=COMPUTE_MIGRATION_SOURCE,
    compute_image_booted=True,
    # "FLEX_START: PREEMPTIBLE-TPU-V6E-per-project-region, falling back to the family quota; SPOT:
    # PREEMPTIBLE-TPU-V6E-per-project-region; STANDARD (on-demand): TPUS-PER-TPU-FAMILY-per-project-region,
    # tpu_family=CT6E" (the article, which quotes the provisioning-models page: "If your project lacks preemptible
    # quota, then standard quota is consumed"). Read through the Cloud Quotas API, not `regions describe`.
    compute_quota=(
        ("flex-start", "PREEMPTIBLE-TPU-V6E-per-project-region (then TPUS-PER-TPU-FAMILY-per-project-region, "
                       "tpu_family=CT6E)"),
        ("spot", "PREEMPTIBLE-TPU-V6E-per-project-region"),
        ("on-demand", "TPUS-PER-TPU-FAMILY-per-project-region (tpu_family=CT6E)"),
    ),
    compute_quota_source=COMPUTE_MIGRATION_SOURCE,
    # "v6e: Hyperdisk Balanced, Hyperdisk ML" (TPU_DISK_PAGE, the boot disk among them), as on the compute path; and
    # Google's cluster-toolkit v6e GKE blueprint sets `disk_type: hyperdisk-balanced` (the third second reader).
    gke_boot_disk_type="hyperdisk-balanced",
)

TPU7X = Generation(
    name="TPU7x",
    # "HBM capacity per chip (GiB) ... 192" (Google's TPU7x page, a vendor figure): no boot log has reported what the
    # runtime leaves (v5e's runtime reports 15.75 of 16 GiB, v6e's 31.24 of 32), so it is sized as given, not measured.
    hbm_bytes_per_chip=192 * GIB,
    hbm_measured=False,
    hbm_source=TPU7X_PAGE,
    # No Cloud TPU runtime: the Cloud TPU API does not make TPU7x nodes.
    runtime_version="",
    runtime_source=CLOUD_TPU_API_FROZEN_PAGE,
    gke_accelerator="tpu7x",
    gke_accelerator_source=Source("AI-Hypercomputer/xpk golden output (gke_accelerator='tpu7x', "
                                  "gce_machine_type='tpu7x-standard-4t', chips_per_vm=4) and AI-Hypercomputer "
                                  "accelerator-microbenchmarks' single-host Pod (nodeSelector gke-tpu-accelerator: "
                                  "tpu7x, gke-tpu-topology: 2x2x1), through the search tool", "read 2026-12"),
    # Not in a stored Google disk table (the Cloud TPU API's table stops at v6e); Compute Engine's TPU7x machines take
    # Hyperdisk as v6e's do, by the reading of the tpu-machines page: confirm before relying on it.
    data_disk_types=("hyperdisk-balanced",),
    data_disk_source=Source(f"{COMPUTE_TPU_MACHINES_PAGE.where}; not seen in a stored excerpt: confirm",
                            COMPUTE_TPU_MACHINES_PAGE.date),
    zones=frozenset({"us-central1-c", "us-central1-ai1a"}),
    zones_source=TPU_ZONES_PAGE_2026,
    flex_start=(),
    # The Compute Engine quota names for TPU7x were not read: the plan says so instead of naming one.
    quota_id="",
    spot_quota_id="",
    quota_source=COMPUTE_TPU_MACHINES_PAGE,
    # No TPU7x price has been read (components/catalog/prices.py): every cost says "price not found".
    price_region="",
    # "Each TPU7x chip contains two TensorCores" (Google's page), each one JAX device: tpu-inference 0.32.0 reads
    # device_kind "TPU7x" as "TPU v7" and gives each device half the chip's HBM (utils.py get_device_name,
    # get_device_hbm_limit). So --tensor-parallel-size counts TensorCores.
    devices_per_chip=2,
    hbm_bandwidth_bytes_per_second=7380 * GB,
    hbm_bandwidth_source=TPU7X_PAGE,
    node_apis=(COMPUTE,),
    default_api=COMPUTE,
    # Read, not booted: the TPU7x-only family of Google's TPU OS images page (Ubuntu 24.04). Docker is installed at
    # boot when the image has none, as on v6e's.
    compute_image="projects/ubuntu-os-accelerator-images/global/images/family/ubuntu-accel-2404-amd64-tpu-tpu7x",
    compute_image_source=TPU_OS_IMAGES_SOURCE,
    # On-demand spends the TPU family quota ("no non-preemptible v6e id at all ... this fallback is a v6e and TPU7x
    # quirk"); TPU7x's tpu_family value and its preemptible id were not read. TPU7x flex-start and spot sit behind an
    # allowlist ("TPU7x adds an allowlist on spot, flex-start, and calendar-mode reservations").
    compute_quota=(("on-demand", "TPUS-PER-TPU-FAMILY-per-project-region (its TPU7x tpu_family value not read)"),),
    compute_quota_source=COMPUTE_MIGRATION_SOURCE,
    allowlisted_models=frozenset({"spot", "flex-start"}),
    allowlist_source=TPU7X_ALLOWLIST_SOURCE,
    # Every TPU7x create read boots from hyperdisk-balanced (gcloud `--create-disk=...,boot=yes,...,
    # type=hyperdisk-balanced,image=.../ubuntu-accel-2404-amd64-tpu-tpu7x`; a Terraform tpu7x-standard-4t template's
    # `disk_type = "hyperdisk-balanced"`, through the search tool); none names pd-balanced.
    gke_boot_disk_type="hyperdisk-balanced",
    gke_min_version="1.34.0-gke.2201000",
    gke_min_version_source=GKE_TPU7X_PAGE,
)

# tpu-inference's own per-chip table, for the record: the limit a pool is sized against on Pathways, and on any host
# where no device reports memory_stats() (utils.py hbm_usage_bytes then counts live arrays against this table);
# elsewhere the pool follows the runtime's bytes_limit, the measured hbm_bytes_per_chip above. The stack sizes
# against the measured limit only: a node whose runtime reports no stats would get the table's larger pool.
# TPU7x's entry is per JAX device ("TPU v7": 96 GiB, "192 * GBYTES / 2 because each JAX device (v7x core) has 1/2 of
# the total chip HBM"), here per chip as the others are.
TPU_INFERENCE_HBM_TABLE = {"v5e": 16 * GIB, "v6e": 32 * GIB, "TPU7x": 2 * 96 * GIB}
TPU_INFERENCE_HBM_TABLE_SOURCE = Source(f"{TPU_INFERENCE} tpu_inference/utils.py get_device_hbm_limit, used by "
                                        "hbm_usage_bytes on Pathways and when no device reports memory_stats",
                                        "read 2026-12")

SHAPES: dict[str, Shape] = {shape.accelerator_type: shape for shape in (
    Shape("v5litepod-1", V5E, 1, "ct5lp-hightpu-1t", "1x1", V5E_CONFIG_PAGE, 24, 48 * GB),
    Shape("v5litepod-4", V5E, 4, "ct5lp-hightpu-4t", "2x2", V5E_CONFIG_PAGE, 112, 192 * GB),
    Shape("v5litepod-8", V5E, 8, "ct5lp-hightpu-8t", "2x4", V5E_CONFIG_PAGE, 224, 384 * GB),
    Shape("v6e-1", V6E, 1, "ct6e-standard-1t", "1x1", V6E_CONFIG_PAGE, 44, 176 * GB, "ct6e-standard-1t"),
    Shape("v6e-4", V6E, 4, "ct6e-standard-4t", "2x2", V6E_CONFIG_PAGE, 180, 720 * GB, "ct6e-standard-4t"),
    Shape("v6e-8", V6E, 8, "ct6e-standard-8t", "2x4", V6E_CONFIG_PAGE, 180, 1440 * GB, "ct6e-standard-8t"),
    # The 4-chip host: "224 vCPUs and 960 GB" (the tpu-machines page as the issue quotes it). The 1-chip host's
    # vCPUs and memory were not read (0: not shown); the build log author's machine-type table (TPU_OS_IMAGES_SOURCE's
    # repository, HARDWARE.md, 2026-08-19) lists tpu7x-standard-4t alone, so a 1t insert may be refused by name.
    # GKE's topology names 2x2x1 (the 3D spelling TPU7x uses).
    # GKE knows it (AI-Hypercomputer/xpk @ 073d687 system_characteristics.py: machine_type='tpu7x-standard-1t',
    # supported_topologies=['1x1x1'], gke_accelerator='tpu7x'), but its host's size was not read: not on gke yet.
    Shape("tpu7x-standard-1t", TPU7X, 1, "tpu7x-standard-1t", "1x1x1", COMPUTE_TPU_MACHINES_PAGE,
          machine_type="tpu7x-standard-1t", on_gke=False),
    Shape("tpu7x-standard-4t", TPU7X, 4, "tpu7x-standard-4t", "2x2x1", COMPUTE_TPU_MACHINES_PAGE, 224, 960 * GB,
          "tpu7x-standard-4t", host_source=COMPUTE_TPU_MACHINES_PAGE),
)}
HOST_SOURCE = HOST_TABLE_PAGE

GENERATIONS: dict[str, Generation] = {"v5e": V5E, "v6e": V6E, "TPU7x": TPU7X}

# Every spelling tpu.acceleratorType takes, to its shape: v6e-1 and ct6e-standard-1t are one shape.
_BY_NAME: dict[str, Shape] = {name: candidate for candidate in SHAPES.values() for name in candidate.names}


def shape(accelerator_type: str) -> Shape | None:
    """The catalogued shape this name spells (its accelerator type or its Compute Engine machine type), or None."""
    return _BY_NAME.get(accelerator_type)


def all_names() -> tuple[str, ...]:
    """Every spelling shape() takes, catalog order."""
    return tuple(_BY_NAME)


def all_shapes() -> tuple[Shape, ...]:
    """Every catalogued shape, smallest v5e first."""
    return tuple(SHAPES.values())


def shape_for_gke_machine(machine_type: str) -> Shape | None:
    """The shape whose GKE machine type this is, or None."""
    return next((candidate for candidate in SHAPES.values() if candidate.gke_machine_type == machine_type), None)


def region_of(zone: str) -> str:
    """us-east5-a -> us-east5."""
    return zone.rsplit("-", 1)[0]
