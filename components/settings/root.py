"""The whole stack configuration: the sections composed, the top-level keys, and every id derived from them."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, SecretStr, field_validator

from components import sizing
from components.basis import chip_memory, naming
from components.settings import fitting
from components.settings.access import AccessSettings
from components.settings.cache import CacheSettings
from components.settings.facts import NAMESPACE, ModelFamily, family_of
from components.settings.fields import _Section
from components.settings.findings import InvalidSettingError
from components.settings.front import FrontSettings
from components.settings.gke import GkeSettings
from components.settings.monitoring import MonitoringSettings
from components.settings.planned_load import LoadSettings
from components.settings.tpu import TpuSettings
from components.settings.tpu_inference import TpuInferenceSettings
from components.settings.vllm import VllmSettings

TOP_LEVEL_KEYS = {
    "tpu": TpuSettings,
    "vllm": VllmSettings,
    "cache": CacheSettings,
    "access": AccessSettings,
    "load": LoadSettings,
    "front": FrontSettings,
    "gke": GkeSettings,
    "tpuInference": TpuInferenceSettings,
    "monitoring": MonitoringSettings,
    "platform": None,
    "hfToken": None,
    "hfTokenSecret": None,
    "sshPrivateKey": None,
}

# Always kept as secrets, and must be set with --secret. hfTokenSecret (a name) may be; the sections may not,
# since their values are written into firewall rules, commands and outputs.
SECRET_BY_NATURE = frozenset({"hfToken", "sshPrivateKey"})


class Settings(_Section):
    """The whole stack configuration, validated once."""

    project: str
    stack: str
    tpu: TpuSettings = Field(default_factory=TpuSettings)
    vllm: VllmSettings = Field(default_factory=VllmSettings)
    cache: CacheSettings = Field(default_factory=CacheSettings)
    access: AccessSettings = Field(default_factory=AccessSettings)
    load: LoadSettings = Field(default_factory=LoadSettings)
    front: FrontSettings = Field(default_factory=FrontSettings)
    tpu_inference: TpuInferenceSettings = Field(default_factory=TpuInferenceSettings)
    monitoring: MonitoringSettings = Field(default_factory=MonitoringSettings)
    platform: Literal["vm", "gke"] = Field("vm", description=(
        "`vm`: one flex-start TPU VM; `gke`: a GKE cluster that scales 1..N chips (see docs/gke.md). "
        "`tpu.provisioningModel`, `tpu.maxRunDuration`, `tpu.queueTimeout`, `tpu.network`, `vllm.*`, `front.*`, "
        "`cache.keepOnDestroy` (gke: the cache bucket) and `access.*Ranges` apply to both; `cache.sizeGb` is the "
        "VM's disk only (gke warns: its cache is a bucket)"))
    gke: GkeSettings = Field(default_factory=GkeSettings)
    hf_token: SecretStr | None = Field(None, description=(
        "secret: if set (with `--secret`, not empty), the stack keeps the token in its own Secret Manager secret "
        "(see docs/security.md)"))
    hf_token_secret: str = Field("hf-token", description=(
        "otherwise, the bare id of a Secret Manager secret you created with gcloud (the log's way: letters, digits, "
        "`-`, `_`); may be set with `--secret`"))
    ssh_private_key: SecretStr | None = Field(None, description=(
        "secret: the private half of `access.sshPublicKey` (`pulumi config set --secret tpu-vllm:sshPrivateKey "
        "< KEY_FILE`); not empty"))

    @field_validator("hf_token")
    @classmethod
    def _hf_token_not_empty(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().strip():
            raise InvalidSettingError(
                "it is empty, and an empty token cannot download the model",
                f"paste your token with `pulumi config set --secret {NAMESPACE}:hfToken`, or remove the key "
                f"(`pulumi config rm {NAMESPACE}:hfToken`) to use your own secret ({NAMESPACE}:hfTokenSecret)",
            )
        return value

    @field_validator("ssh_private_key")
    @classmethod
    def _private_key_not_empty(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().strip():
            raise InvalidSettingError(
                f"it is empty, so {NAMESPACE}:access.sshPublicKey has no private half to log in with",
                f"set it from the key file (`pulumi config set --secret {NAMESPACE}:sshPrivateKey < "
                "~/.ssh/id_ed25519`), or remove both keys and the stack generates one",
            )
        return value

    @field_validator("hf_token_secret")
    @classmethod
    def _secret_id_shape(cls, value: str) -> str:
        # Secret Manager's secret id: "a string with a maximum length of 255 characters and can contain uppercase
        # and lowercase letters, numerals, and the hyphen (-) and underscore (_) characters" (google.cloud.
        # secretmanager_v1 CreateSecretRequest.secret_id, googleapis' secretmanager v1 service.proto). Empty, spaces
        # or a resource path are the common slips; nothing else may reach the node's metadata and the boot script.
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,255}", value):
            raise InvalidSettingError(
                "a Secret Manager secret id is one word of letters, digits, - or _ (e.g. hf-token; the stack adds "
                "projects/<project>/secrets/ itself)",
                "set the id of the secret that holds your token",
            )
        return value

    @field_validator("project")
    @classmethod
    def _project_id(cls, value: str) -> str:
        # Resource Manager: "6 to 30 lowercase ASCII letters, digits, or hyphens. It must start
        # with a letter. Trailing hyphens are prohibited." Legacy domain-scoped projects
        # (example.com:my-project) can no longer be made but still exist, and Google's APIs
        # address them by that id, so the domain prefix is accepted.
        if not re.fullmatch(r"(?:[a-z0-9-]+(?:\.[a-z0-9-]+)+:)?[a-z][-a-z0-9]{4,28}[a-z0-9]", value):
            raise InvalidSettingError(
                "a project ID is 6-30 lowercase letters, digits and hyphens, starting with a "
                "letter and not ending with a hyphen (the ID, not the display name or number: "
                "gcloud projects list shows it)",
                "run pulumi config set gcp:project YOUR_PROJECT_ID",
            )
        return value

    # Every id derived from the stack name, valid for its API (components/basis/naming.py).
    @property
    def node_id(self) -> str:
        """The queued resource and its node (TPU API; also the VM's host name)."""
        return self.tpu.node_id or naming.stack_id(self.stack)

    @property
    def resource_prefix(self) -> str:
        """At most 46 characters, so `<prefix>-<suffix>` fits 63 for every suffix the stack adds
        (the longest is the firewall rule serving-external); also the node's network tag."""
        return naming.resource_prefix(self.stack)

    @property
    def vm_service_account_id(self) -> str:
        """The TPU VM's service account (the vm platform's only); the gke wing's are named in core/ and gke/."""
        return naming.service_account_id(self.stack, "vm")

    @property
    def cache_disk_name(self) -> str:
        return f"{self.resource_prefix}-cache"

    @property
    def network_tag(self) -> str:
        return self.resource_prefix

    @property
    def labels(self) -> dict[str, str]:
        """On every labelled resource; the user's tpu.labels win."""
        return {"app": naming.APP, "stack": naming.label_value(self.stack), **self.tpu.labels}

    @property
    def stack_manages_hf_token(self) -> bool:
        return self.hf_token is not None

    @property
    def family(self) -> ModelFamily | None:
        return family_of(self.vllm.model, self.model_spec.geometry.model_type if self.model_spec else None)

    @property
    def model_spec(self) -> sizing.ModelSpec | None:
        """The model as sizing reads it: vllm.modelConfig's, the catalog's, or None (unknown)."""
        return fitting.model_spec(self)

    @property
    def fit(self) -> sizing.Fit | None:
        """The model on tpu.acceleratorType, as `python -m tools.fit` says (None: an unknown model)."""
        return fitting.deployed_fit(self)

    @property
    def tensor_parallel_size(self) -> int:
        """vllm.tensorParallelSize, else the planned layout's, else the host's devices over vllm.dataParallelSize,
        else 1 (an unknown model)."""
        if self.vllm.tensor_parallel_size is not None:
            return self.vllm.tensor_parallel_size
        fitted = self.fit
        if fitted is not None and fitted.tensor_parallel_size:
            return fitted.tensor_parallel_size
        replicas = self.vllm.data_parallel_size
        return max(1, self.tpu.shape.devices // replicas) if replicas else 1

    @property
    def data_parallel_size(self) -> int:
        """vllm.dataParallelSize, else the planned layout's, else the host's devices over vllm.tensorParallelSize,
        else 1 (an unknown model: one replica on tensorParallelSize chips)."""
        if self.vllm.data_parallel_size is not None:
            return self.vllm.data_parallel_size
        fitted = self.fit
        if fitted is not None and fitted.tensor_parallel_size:
            return fitted.data_parallel_size
        return 1

    def usd_per_chip_hour(self, provisioning_model: str | None = None) -> float | None:
        """One chip of the shape at this provisioning model (tpu.provisioningModel's by default): the catalog's
        price in the zone's region, else in the region it has prices for; None where no price was read (TPU7x):
        every cost then says price_not_found, never a figure of another chip."""
        price = fitting.chip_usd_per_hour(self, provisioning_model or self.tpu.provisioning_model)
        return None if price is None else price.usd_per_chip_hour

    def tpu_usd_per_hour(self, provisioning_model: str | None = None) -> float | None:
        """The host's chips (one VM, or one gke replica's node) per hour; None where no price was read."""
        rate = self.usd_per_chip_hour(provisioning_model)
        return None if rate is None else rate * self.tpu.shape.chips

    def price_not_found(self, provisioning_model: str | None = None) -> str:
        """What every cost line says where usd_per_chip_hour is None."""
        return fitting.price_not_found(self.tpu.shape.generation, self.tpu.region,
                                       provisioning_model or self.tpu.provisioning_model)

    @property
    def cache_disk_type(self) -> str:
        """cache.diskType, else the shape's data disk (pd-balanced on v5e, hyperdisk-balanced on v6e)."""
        return self.cache.disk_type or self.tpu.shape.cache_disk_type

    @property
    def gke_machine_type(self) -> str:
        """gke.machineType, else the shape's GKE machine."""
        return self.gke.machine_type or self.tpu.shape.gke_machine_type

    @property
    def geometry(self) -> chip_memory.ModelGeometry | None:
        """The geometry given in vllm.modelGeometry, else the log's measured one, else None (the v5e budget's
        hand-typed form; any other model is sized by `fit`)."""
        if self.vllm.model_geometry is not None:
            return self.vllm.model_geometry.to_geometry()
        return chip_memory.geometry_for(self.vllm.model)

    def kv_budget(self) -> chip_memory.KvBudget | None:
        """The KV budget the stack plans with: vllm.modelGeometry's (one chip of the shape), else the fit's. Sized
        from gpuMemoryUtilization alone, as tpu-inference 0.32.0 sizes the pool (tpu_inference/worker/
        tpu_worker.py determine_available_memory never reads --kv-cache-memory), whatever kvCacheMemoryBytes says."""
        if self.vllm.model_geometry is not None:
            return chip_memory.kv_budget(self.vllm.model_geometry.to_geometry(), self.vllm.gpu_memory_utilization,
                                         self.vllm.max_model_len, hbm_bytes=self.tpu.shape.hbm_bytes_per_chip)
        fitted = self.fit
        return fitting.kv_budget_of(fitted) if fitted is not None else None
