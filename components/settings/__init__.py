"""The stack's configuration: pydantic models of every `tpu-vllm:` key.

Every rule the build log learned the hard way is a validator here, so a bad
value fails before any cloud call, with the key, the value, the measured reason
and the fix. All problems are reported together; valid but poor choices become
warnings.

One file per concern: facts.py (the measured facts and their sources), fields.py (shared
types), one file per section (tpu, vllm, cache, access, front, gke, planned_load), root.py
(the whole configuration and its derived ids), fitting.py (the model on tpu.acceleratorType as
components/sizing sizes it: TP, KV budget, chip price), checks/ (cross-key rules by subject),
findings.py (Finding, the one rendering, SettingsError), errors.py (pydantic's errors as findings),
loading.py (from Pulumi config), docs.py (docs/settings.md's table, from the fields' descriptions).
This module re-exports the names the rest of the stack uses.
"""

from components.settings.access import AccessSettings
from components.settings.cache import CacheSettings
from components.settings.checks.access import NARROW_SSH_COMMAND
from components.settings.facts import (
    DEFAULT_MODEL,
    FAMILY_PARSERS,
    FLEX_START_REJECTING_ZONES,
    FLEX_START_VERIFIED_ZONES,
    GEMMA_4,
    GEMMA_4_WITH_AUDIO,
    GKE_CLASS_AUTO_CREATION_MIN_VERSION,
    GKE_FALLBACK_MODELS,
    GKE_FLEX_START_TPU_MIN_VERSION,
    GKE_FOREIGN_NAMESPACE_PREFIXES,
    GKE_FOREIGN_NAMESPACES,
    GKE_METRICS_ADAPTER_NAMESPACE,
    GKE_METRICS_PORT,
    GKE_MIN_VERSION,
    GKE_MIN_VERSION_REASON,
    GKE_RELEASE_CHANNELS,
    GKE_V5E_ONE_CHIP_MACHINE,
    KV_DTYPES_ACCEPTED,
    KV_DTYPES_FINE,
    KV_DTYPES_FP8_NO_GAIN,
    KV_DTYPES_KILL_AT_BOOT,
    KV_DTYPES_UNTESTED,
    MAX_RUN_SECONDS,
    MAX_USER_LABELS,
    MIN_RUN_SECONDS,
    MODEL_FAMILIES,
    NAMESPACE,
    NO_MEDIA_DOMAIN,
    SSH_PORT,
    SYSTEM_MOUNT_ROOTS,
    V5E_ZONES,
    VLLM_MODALITIES,
    VLLM_REASONING_PARSERS,
    VLLM_TOOL_CALL_PARSERS,
    ModelFamily,
    family_of,
    gke_version_at_least,
)
from components.settings.fields import (
    HOSTNAME,
    INWARD_SUFFIXES,
    Duration,
    Port,
    PublicHostName,
    SourceRanges,
    Zone,
    image_reference,
    parse_duration,
    pullable_image,
)
from components.settings.findings import NO_VALUE, Finding, InvalidSettingError, SettingsError
from components.settings.front import FrontSettings
from components.settings.gke import GkeSettings
from components.settings.loading import (
    Loaded,
    from_pulumi_config,
    load,
    raw_from_pulumi_config,
    secret_keys_from_pulumi_config,
)
from components.settings.planned_load import LoadSettings
from components.settings.root import SECRET_BY_NATURE, TOP_LEVEL_KEYS, Settings
from components.settings.speculative import SpeculativeSetting
from components.settings.tpu import TpuSettings
from components.settings.tpu_inference import TpuInferenceSettings
from components.settings.vllm import KvLayerGroupSetting, ModelGeometrySetting, VllmSettings

__all__ = [
    "DEFAULT_MODEL", "FAMILY_PARSERS", "FLEX_START_REJECTING_ZONES", "FLEX_START_VERIFIED_ZONES",
    "GEMMA_4", "GEMMA_4_WITH_AUDIO", "GKE_CLASS_AUTO_CREATION_MIN_VERSION", "GKE_FALLBACK_MODELS",
    "GKE_FLEX_START_TPU_MIN_VERSION", "GKE_FOREIGN_NAMESPACES", "GKE_FOREIGN_NAMESPACE_PREFIXES",
    "GKE_METRICS_ADAPTER_NAMESPACE", "GKE_METRICS_PORT", "GKE_MIN_VERSION", "GKE_MIN_VERSION_REASON",
    "GKE_RELEASE_CHANNELS",
    "GKE_V5E_ONE_CHIP_MACHINE", "HOSTNAME", "INWARD_SUFFIXES", "KV_DTYPES_ACCEPTED", "KV_DTYPES_FINE",
    "KV_DTYPES_FP8_NO_GAIN", "KV_DTYPES_KILL_AT_BOOT", "KV_DTYPES_UNTESTED", "MAX_RUN_SECONDS",
    "MAX_USER_LABELS", "MIN_RUN_SECONDS", "MODEL_FAMILIES", "NAMESPACE", "NARROW_SSH_COMMAND", "NO_MEDIA_DOMAIN",
    "SECRET_BY_NATURE", "SSH_PORT", "SYSTEM_MOUNT_ROOTS", "TOP_LEVEL_KEYS", "V5E_ZONES",
    "VLLM_MODALITIES", "VLLM_REASONING_PARSERS", "VLLM_TOOL_CALL_PARSERS",
    "NO_VALUE", "Duration", "Finding", "InvalidSettingError", "Port", "PublicHostName", "SourceRanges", "Zone",
    "image_reference",
    "AccessSettings", "CacheSettings", "FrontSettings", "GkeSettings", "KvLayerGroupSetting", "LoadSettings",
    "Loaded", "ModelFamily", "ModelGeometrySetting", "Settings", "SettingsError", "SpeculativeSetting",
    "TpuInferenceSettings", "TpuSettings", "VllmSettings",
    "family_of", "from_pulumi_config", "gke_version_at_least", "load", "parse_duration",
    "pullable_image", "raw_from_pulumi_config", "secret_keys_from_pulumi_config",
]
