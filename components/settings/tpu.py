"""`tpu-vllm:tpu`: where and how the chip is rented."""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator

from components import catalog
from components.basis import naming
from components.settings.facts import MAX_USER_LABELS
from components.settings.fields import PROJECT_IN_PATH, ZONE, Duration, _Section, parse_duration
from components.settings.findings import InvalidSettingError

SHAPE_NAMES = tuple(shape.accelerator_type for shape in catalog.all_shapes())
NodeApi = Literal["queued-resource", "compute"]


class TpuSettings(_Section):
    """Where and how the chip is rented (config key `tpu-vllm:tpu`)."""

    config_key: ClassVar[str] = "tpu"

    accelerator_type: str = Field("v5litepod-1", description=(
        "the shape on both platforms: `v5litepod-1`, `-4`, `-8` (v5e; `v5e-1` is an error: the API spells it "
        "v5litepod), `v6e-1`, `-4`, `-8` (or their Compute Engine machine types `ct6e-standard-1t`, `-4t`, `-8t`: "
        "the same shapes) or `tpu7x-standard-1t`, `-4t` (TPU7x, Compute Engine only; `tpu7x-8` is an error: it "
        "counts TensorCores); the runtime, the cache disk's type, GKE's machine, topology and chip count, "
        "`--tensor-parallel-size` (JAX devices: two per TPU7x chip) and the memory budget follow from it "
        "(`python -m tools.fit` compares them; see docs/models.md)"))
    api: NodeApi | None = Field(None, description=(
        "the node API on the vm platform: `queued-resource` (the Cloud TPU API's queued resource) or `compute` (a "
        "Compute Engine instance of the TPU machine type); unset: the generation's default (v5e: queued-resource, "
        "its only one; v6e: queued-resource, either is accepted; TPU7x: compute, its only one; docs/models.md says "
        "why); a generation without the API named is an error"))
    zone: str = Field("us-west4-a", description=(
        "the vm platform's zone (gke reads gke.location and gke.nodeLocations instead); one the catalog does not "
        "list for the generation warns (Google's regions page changes; TPU7x: `us-central1-c`, "
        "`us-central1-ai1a`), and the default left on another generation is an error; with flex-start, zones "
        "where the API refused it are errors (v5e: `europe-west4-a/-b`; v6e: `us-central1-b`, `us-south1-a`) and "
        "zones nobody ran it in warn (v5e ran in `us-west4-a`, and Google's flex-start page lists v5e for serving "
        "in `us-central1-a`; v6e ran in `us-east5-a/-b` and `europe-west4-a`)"))
    runtime_version: str | None = Field(None, description=(
        "the TPU VM image; unset: the shape's (`v2-alpha-tpuv5-lite` for v5e, `v2-alpha-tpuv6e` for v6e); one of "
        "another generation is an error; with `tpu.api: compute`, the Compute Engine boot image (a name or "
        "`projects/P/global/images/[family/]NAME`; unset: the catalog's image family for the generation, "
        "`ubuntu-accel-2204-amd64-tpu-v5e-v5p-v6e` for v6e, `ubuntu-accel-2404-amd64-tpu-tpu7x` for TPU7x)"))
    provisioning_model: Literal["flex-start", "spot", "on-demand"] = Field("flex-start", description=(
        "the only model that stops billing by itself; `spot`/`on-demand` warn with the forgotten-weekend cost"))
    max_run_duration: Duration = Field("4h", description=(
        "`90m`, `2d`...; 1 minute to 7 days; flex-start only: GCP deletes the node after this long, so at least "
        "a cold start (857 s) plus `vllm.healthTimeout` (45m with the default)"))
    queue_timeout: Duration = Field("1h", description=(
        "how long a request may wait for capacity; `0s` is an error (no deadline for the API, while "
        "`pulumi up` gives up)"))
    network: str = Field("default", description=(
        "the VPC network: a name GCP takes (lowercase letters, digits, `-`) or `projects/P/global/networks/N`"))
    subnetwork: str | None = Field(None, description=(
        "a subnetwork of the zone's region, by name or `projects/P/regions/R/subnetworks/S`; unset: the "
        "network's default"))
    node_id: str | None = Field(None, description="the node and queued resource id; unset: `tpu-vllm-<stack>`")
    labels: dict[str, str] = Field(default_factory=dict, description=(
        "on every labelled resource, with `app` and `stack`; keys and values lowercase, at most 63 characters, "
        "at most 62 labels"))

    @field_validator("provisioning_model", mode="before")
    @classmethod
    def _provisioning_spelling(cls, value: Any) -> Any:
        spelled = {"flex_start": "flex-start", "spot": "spot", "standard": "on-demand",
                   "on_demand": "on-demand", "ondemand": "on-demand"}
        normal = str(value).strip().lower().replace("-", "_")
        if normal in spelled and spelled[normal] != value:
            raise InvalidSettingError("not spelled as the API spells it",
                          f"write it as {spelled[normal]!r} (one of flex-start, spot, on-demand)")
        return value

    @field_validator("accelerator_type")
    @classmethod
    def _accelerator_spelling(cls, value: str) -> str:
        if (fix := _trap_spelling(value)) is not None:
            raise InvalidSettingError(*fix)
        if re.search(r"v5\s*e|v5lite(?!pod)", value, re.IGNORECASE):
            chips = re.search(r"(\d+)$", value)
            raise InvalidSettingError(
                f"v5e is spelled v5litepod-{chips.group(1) if chips else 1} in every API call and CLI argument "
                "('v5e' is prose only)",
                f"set it to v5litepod-{chips.group(1) if chips else 1}",
            )
        if catalog.shape(value) is None:
            raise InvalidSettingError(
                "not a single-host shape this stack knows (the catalog, components/catalog/shapes.py, holds each "
                "one's HBM, runtime, disks, GKE machine and prices)",
                f"set it to one of {', '.join(catalog.all_names())} (python -m tools.fit says which fit your "
                "model)",
            )
        return value

    @field_validator("zone")
    @classmethod
    def _zone_shape(cls, value: str) -> str:
        if not ZONE.fullmatch(value):
            raise InvalidSettingError("not a zone", "a zone looks like us-west4-a")
        return value

    @field_validator("runtime_version")
    @classmethod
    def _runtime_for_the_shape(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return value
        shape = catalog.shape(info.data.get("accelerator_type") or "")
        api = info.data.get("api") or (shape.generation.default_api if shape else None)
        if api == catalog.COMPUTE:
            # The compute path's boot image: an image or image family of Compute Engine, by name or path. The Cloud
            # TPU API's runtime versions (v2-alpha-tpuv6e, tpu-ubuntu2204-base) are not Compute Engine images.
            if re.fullmatch(r"v2-alpha-[a-z0-9-]+|tpu-vm-[a-z0-9.-]+|tpu-ubuntu[0-9]+-base", value):
                raise InvalidSettingError(
                    "a Cloud TPU API runtime version; with tpu.api compute the node boots a Compute Engine image",
                    "name the boot image Google's Compute Engine TPU pages give for the machine type, or set "
                    "tpu.api to queued-resource")
            if not re.fullmatch(rf"(?:projects/{PROJECT_IN_PATH}/global/images/(?:family/)?)?[a-z]([-a-z0-9]{{0,61}}"
                                r"[a-z0-9])?", value):
                raise InvalidSettingError(
                    "not a Compute Engine image (a name, or projects/PROJECT/global/images/[family/]NAME)",
                    "name the boot image Google's Compute Engine TPU pages give for the machine type")
            return value
        # It is a field of the TPU API's body, and is shown in the plan: a plain image name only.
        if not re.fullmatch(r"[a-z0-9][a-z0-9.-]{0,62}", value):
            raise InvalidSettingError("not a TPU runtime version name (lowercase letters, digits, '.' and '-')",
                                      "set it to v2-alpha-tpuv5-lite, or remove the key to follow "
                                      "tpu.acceleratorType")
        if shape is None:
            return value
        if shape.generation.runtime_tag not in value:
            raise InvalidSettingError(
                f"a {shape.accelerator_type} node needs a {shape.generation.name} runtime image (its name says "
                f"{shape.generation.runtime_tag}); another generation's image does not drive its chips",
                f"set it to {shape.runtime_version}, or remove the key to follow tpu.acceleratorType",
            )
        return value

    @field_validator("queue_timeout")
    @classmethod
    def _queue_has_time(cls, value: str) -> str:
        if parse_duration(value) == 0:
            raise InvalidSettingError(
                "a queued request needs time to find capacity: 0 sends no deadline to the API, "
                "so the request would wait forever while pulumi up gives up",
                "set it like 1h",
            )
        return value

    @field_validator("network")
    @classmethod
    def _network_shape(cls, value: str) -> str:
        name = re.fullmatch(rf"(?:(?:projects/{PROJECT_IN_PATH}/)?global/networks/)?([^/]*)", value)
        if not name or not naming.COMPUTE_NAME.fullmatch(name.group(1)):
            raise InvalidSettingError(
                "a VPC network is named with 1-63 lowercase letters, digits and '-', starting "
                "with a letter and not ending with '-' (or given as projects/PROJECT/global/networks/NAME)",
                "the default one is default",
            )
        return value

    @field_validator("subnetwork")
    @classmethod
    def _subnetwork_shape(cls, value: str | None) -> str | None:
        if value is None:
            return value
        name = re.fullmatch(rf"(?:(?:projects/{PROJECT_IN_PATH}/)?regions/[a-z]+-[a-z]+[0-9]+/subnetworks/)?([^/]*)",
                            value)
        if not name or not naming.COMPUTE_NAME.fullmatch(name.group(1)):
            raise InvalidSettingError(
                "a subnetwork is named with 1-63 lowercase letters, digits and '-', starting "
                "with a letter and not ending with '-' (or given as "
                "projects/PROJECT/regions/REGION/subnetworks/NAME)",
                "remove the key for the network's default",
            )
        return value

    @field_validator("labels")
    @classmethod
    def _labels_gcp_accepts(cls, value: dict[str, str]) -> dict[str, str]:
        problems = [problem for key, item in value.items() if (problem := naming.label_problem(key, item))]
        if len(value) > MAX_USER_LABELS:
            problems.append(f"at most {MAX_USER_LABELS} labels (GCP allows 64, the stack sets app and stack)")
        if problems:
            raise InvalidSettingError("; ".join(problems), "e.g. team: agents")
        return value

    @field_validator("node_id")
    @classmethod
    def _node_id_shape(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?", value):
            raise InvalidSettingError("not an id the TPU API takes",
                          "use lowercase letters, digits and hyphens, starting with a letter")
        return value

    @property
    def node_api(self) -> str:
        """tpu.api, else the shape's generation's default: "queued-resource" or "compute" (the vm platform's)."""
        return self.api or self.shape.generation.default_api

    @property
    def machine_type(self) -> str | None:
        """The Compute Engine machine type of the shape (None on v5e, which Compute Engine does not list)."""
        return self.shape.machine_type

    @property
    def boot_image(self) -> str | None:
        """The compute path's boot image: tpu.runtimeVersion, else the catalog's for the generation (every
        generation Compute Engine makes names one; None on v5e, which it does not)."""
        return self.runtime_version or self.shape.compute_image

    @property
    def run_seconds(self) -> int:
        return parse_duration(self.max_run_duration)

    @property
    def queue_seconds(self) -> int:
        return parse_duration(self.queue_timeout)

    @property
    def region(self) -> str:
        return self.zone.rsplit("-", 1)[0]

    @property
    def shape(self) -> catalog.Shape:
        """The catalogued shape tpu.acceleratorType names (validated to exist)."""
        found = catalog.shape(self.accelerator_type)
        assert found is not None
        return found

    @property
    def runtime(self) -> str:
        """tpu.runtimeVersion, else the shape's runtime image."""
        return self.runtime_version or self.shape.runtime_version


def _trap_spelling(value: str) -> tuple[str, str] | None:
    """A spelling that names a shape the wrong way, with the right one: TPU7x's TensorCore counts (tpu7x-8 is one
    4-chip host: Google's Compute Engine machine type is chips per VM, `tpu7x-standard-4t`), and GKE's v5e machine
    types, which Compute Engine does not list (its TPU machines: TPU7x, v6e, v5p)."""
    tensor_cores = re.fullmatch(r"(?:tpu-?)?v?7x?-(\d+)", value.strip().lower())
    if tensor_cores and "7" in value:
        chips = int(tensor_cores.group(1)) // catalog.shape("tpu7x-standard-1t").generation.devices_per_chip
        right = f"tpu7x-standard-{chips}t"
        fix = (f"set it to {right}" if catalog.shape(right) else
               "set it to tpu7x-standard-1t or tpu7x-standard-4t (single-host TPU7x; a larger slice spans VMs)")
        return (f"{value} counts TensorCores (two per TPU7x chip), not chips; Compute Engine names the VM by its "
                "machine type", fix)
    v5e_machine = re.fullmatch(r"ct5lp?-hightpu-(\d+)t", value.strip().lower())
    if v5e_machine:
        return (f"{value} is GKE's v5e machine; Compute Engine does not list v5e among its TPU machines (TPU7x, v6e, "
                "v5p), so a v5e node is a queued resource, spelled by its accelerator type",
                f"set it to v5litepod-{v5e_machine.group(1)}")
    return None
