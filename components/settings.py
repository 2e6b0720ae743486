"""The stack's configuration: pydantic models of every `tpu-vllm:` key.

Every rule the build log learned the hard way is a validator here, so a bad
value fails before any cloud call, with the key, the value, the measured reason
and the fix. All problems are reported together; valid but poor choices become
warnings.
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import math
import posixpath
import re
from dataclasses import dataclass
from typing import Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from components import budget, front, naming
from components.gke.metrics_door import METRICS_PORT as GKE_METRICS_PORT
from policy import address_ranges

NAMESPACE = "tpu-vllm"

# The log: flex-start v5litepod-1 is accepted here and was run to ACTIVE.
FLEX_START_VERIFIED_ZONES = frozenset({"us-west4-a"})
# The log: these reject it at the API whatever the quota.
FLEX_START_REJECTING_ZONES = frozenset({"europe-west4-a", "europe-west4-b"})

# Zones with TPU v5e at all: the v5e ("All v5litepod configurations") rows of Google's "TPU
# regions and zones" page (cloud.google.com/tpu/docs/regions-zones) as it has been published:
# us-central1-a, us-south1-a, us-west1-c, us-west4-a (current), us-east5-a/-b/-c (listed as
# single-tenant), us-west4-b and europe-west4-b (earlier versions). europe-west4-a is the log's:
# the API refuses flex-start there for v5litepod-1 by name, with v5e quota in the zone.
# Google adds zones: one missing here is refused, so add it with its source.
V5E_ZONES = frozenset({
    "us-central1-a", "us-south1-a", "us-west1-c", "us-west4-a", "us-west4-b",
    "us-east5-a", "us-east5-b", "us-east5-c", "europe-west4-a", "europe-west4-b",
})
assert FLEX_START_VERIFIED_ZONES | FLEX_START_REJECTING_ZONES <= V5E_ZONES

# GCP allows 64 labels per resource; the stack sets two itself.
MAX_USER_LABELS = 62

MIN_RUN_SECONDS = 60
MAX_RUN_SECONDS = 7 * 24 * 3600

# sshd on the node; the container runs with --net=host, so vLLM shares the host's ports.
SSH_PORT = 22

# What vLLM registers on the log's build, vLLM 0.26.1rc1.dev125+ga7a204cc6 (main at
# a7a204cc6ec99b375985e564f4f271e68ee8f5b8, 2026-07-30): the names in _TOOL_PARSERS_TO_REGISTER
# (vllm/tool_parsers/__init__.py, ToolParserManager.register_lazy_module) and
# _REASONING_PARSERS_TO_REGISTER (vllm/reasoning/__init__.py, ReasoningParserManager). Read from
# the releases either side of that commit, 0.26.0 (2026-07-25) and 0.27.0 (2026-08-10), which
# register exactly these; 0.27.0 adds only kimi_k3, left out as it may postdate the build.
# Anything else makes the server exit at start: "invalid tool call parser: X (chose from {...})".
VLLM_TOOL_CALL_PARSERS = frozenset({
    "apertus", "cohere_command3", "cohere_command4", "deepseek_v3", "deepseek_v31", "deepseek_v32",
    "deepseek_v4", "ernie45", "functiongemma", "gemma4", "gigachat3", "glm45", "glm47", "granite",
    "granite-20b-fc", "granite4", "hermes", "hunyuan_a13b", "hy_v3", "inkling", "internlm", "jamba",
    "kimi_k2", "lfm2", "llama3_json", "llama4_json", "llama4_pythonic", "longcat", "mimo", "minicpm5",
    "minimax_m2", "minimax_m3", "mistral", "olmo3", "openai", "phi4_mini_json", "poolside_v1",
    "pythonic", "qwen3_coder", "qwen3_xml", "seed_oss", "step3", "step3p5", "xlam",
})
VLLM_REASONING_PARSERS = frozenset({
    "cohere_command3", "cohere_command4", "deepseek_r1", "deepseek_v3", "deepseek_v4", "ernie45",
    "gemma4", "glm45", "glm47", "granite", "holo2", "hunyuan_a13b", "hy_v3", "inkling", "kimi_k2",
    "mimo", "minimax_m2", "minimax_m2_append_think", "minimax_m3", "mistral", "nemotron_v3", "olmo3",
    "openai_gptoss", "poolside_v1", "qwen3", "seed_oss", "step3", "step3p5",
})
# vLLM's built-in modalities on that build (MultiModalDataBuiltins, vllm/inputs/llm.py). It
# takes any other key in --limit-mm-per-prompt and ignores it, so a typo limits nothing.
VLLM_MODALITIES = frozenset({"image", "video", "audio", "vision_chunk"})

# vLLM's --kv-cache-dtype choices on the log's build, by what they do on this stack.
KV_DTYPES_FINE = frozenset({"auto", "bfloat16"})
KV_DTYPES_FP8_NO_GAIN = frozenset({"fp8", "fp8_e4m3", "fp8_e5m2"})
KV_DTYPES_KILL_AT_BOOT = frozenset({"int8_per_token_head", "nvfp4", "fp8_inc", "fp8_ds_mla"})
KV_DTYPES_UNTESTED = frozenset({"float16", "fp8_per_token_head", "int4_per_token_head"})
KV_DTYPES_ACCEPTED = (
    KV_DTYPES_FINE | KV_DTYPES_FP8_NO_GAIN | KV_DTYPES_KILL_AT_BOOT | KV_DTYPES_UNTESTED
)

DEFAULT_MODEL = "google/gemma-4-E2B-it"

# The offline plan's marked stand-in for an unset gcp:project (tools/plan.py); it never reaches GCP.
OFFLINE_PLAN_PROJECT = "PLACEHOLDER-set-gcp-project"


@dataclass(frozen=True)
class ModelFamily:
    """What follows from a model's family: the parsers that read its output, what it can take in."""

    name: str
    pattern: re.Pattern[str]
    """Matched against vllm.model (a Hugging Face id or a local path)."""
    tool_call_parser: str
    reasoning_parser: str | None
    modalities: frozenset[str]
    """What vLLM's model class accepts (its get_supported_mm_limits)."""
    limit_mm_per_prompt: dict[str, int]
    """The default multimodal contract."""


# vLLM's gemma4_mm.py: image and video always, audio only with an audio tower (the E2B/E4B
# checkpoints). The log's contract is {"image": 4, "audio": 1}.
GEMMA_4 = ModelFamily(
    name="Gemma 4", pattern=re.compile(r"gemma[-_]?4", re.IGNORECASE),
    tool_call_parser="gemma4", reasoning_parser="gemma4",
    modalities=frozenset({"image", "video", "audio"}), limit_mm_per_prompt={"image": 4, "audio": 1},
)
GEMMA_4_WITH_AUDIO = re.compile(r"gemma[-_]?4[-_]e\d+b", re.IGNORECASE)
MODEL_FAMILIES = (GEMMA_4,)
# Parsers that read one family's output format and nothing else.
FAMILY_PARSERS = {"gemma4": GEMMA_4}


def family_of(model: str) -> ModelFamily | None:
    return next((family for family in MODEL_FAMILIES if family.pattern.search(model)), None)


def _family_limits(model: str) -> dict[str, int]:
    family = family_of(model)
    if family is None:
        return {}
    if family is GEMMA_4 and not GEMMA_4_WITH_AUDIO.search(model):
        return {key: count for key, count in family.limit_mm_per_prompt.items() if key != "audio"}
    return dict(family.limit_mm_per_prompt)


# Directories a cache disk must never be mounted on or under: the mount would hide the OS's own files
# (/usr/lib, /var/lib/docker, a user's ~/.ssh), or the directory is cleaned or virtual (/tmp, /proc, /run).
SYSTEM_MOUNT_ROOTS = ("/etc", "/usr", "/var", "/root", "/home", "/boot", "/bin", "/sbin", "/opt", "/proc",
                      "/sys", "/dev", "/run", "/tmp", "/snap")  # and /lib, /lib64, /lib32, /libx32
# vLLM fetches an http(s) media URL when its host is listed (exact match), or when the list is empty:
# an empty --allowed-media-domains means "any host" (vllm/multimodal/media/connector.py). No flag turns
# URL fetching off, so "none" is rendered as one host under the reserved .invalid TLD (RFC 6761), which
# no resolver answers: every media URL is refused or fails to resolve; inline data: URLs still work.
NO_MEDIA_DOMAIN = "media-urls-disabled.invalid"
HOSTNAME = re.compile(r"(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*")


class SettingsError(Exception):
    """Every problem with the stack's configuration, found in one pass."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__(self.render())

    def render(self) -> str:
        lines = [f"{len(self.problems)} problem(s) in the stack configuration:"]
        lines += [f"  - {problem}" for problem in self.problems]
        return "\n".join(lines)


def parse_duration(text: str) -> int:
    """'4h', '90m', '2d', '1h30m', '3600s' -> seconds."""
    cleaned = str(text).strip().lower()
    parts = re.findall(r"(\d+)\s*([dhms])", cleaned)
    if not parts or re.sub(r"\d+\s*[dhms]", "", cleaned).strip():
        raise ValueError(
            f"cannot read {text!r} as a duration; write it like 4h, 90m, 2d or 1h30m"
        )
    unit_seconds = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    return sum(int(number) * unit_seconds[unit] for number, unit in parts)


def _warn(info: ValidationInfo, message: str) -> None:
    if info.context is not None:
        info.context.setdefault("warnings", []).append(message)


class _Section(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class TpuSettings(_Section):
    """Where and how the chip is rented (config key `tpu-vllm:tpu`)."""

    zone: str = "us-west4-a"
    """The zone; flex-start v5litepod-1 is only accepted in us-west4-a."""
    accelerator_type: str = "v5litepod-1"
    """One v5e chip, spelled as the API spells it."""
    runtime_version: str = "v2-alpha-tpuv5-lite"
    """The TPU VM image for v5e."""
    provisioning_model: Literal["flex-start", "spot", "on-demand"] = "flex-start"
    """flex-start is the only model that stops billing by itself."""
    max_run_duration: str = "4h"
    """flex-start only: GCP deletes the node after this long (1m to 7d)."""
    queue_timeout: str = "1h"
    """How long a request may wait in the queue before it is given up."""
    network: str = "default"
    subnetwork: str | None = None
    node_id: str | None = None
    """Defaults to tpu-vllm-<stack>."""
    labels: dict[str, str] = Field(default_factory=dict)

    @field_validator("provisioning_model", mode="before")
    @classmethod
    def _provisioning_spelling(cls, value: Any) -> Any:
        spelled = {"flex_start": "flex-start", "spot": "spot", "standard": "on-demand",
                   "on_demand": "on-demand", "ondemand": "on-demand"}
        normal = str(value).strip().lower().replace("-", "_")
        if normal in spelled and spelled[normal] != value:
            raise ValueError(
                f"write it as {spelled[normal]!r} (one of flex-start, spot, on-demand)"
            )
        return value

    @field_validator("accelerator_type")
    @classmethod
    def _accelerator_spelling(cls, value: str) -> str:
        if re.search(r"v5\s*e|v5lite(?!pod)", value, re.IGNORECASE):
            chips = re.search(r"(\d+)$", value)
            raise ValueError(
                "v5e is spelled v5litepod-1 in every API call and CLI argument "
                f"('v5e' is prose only); set it to v5litepod-{chips.group(1) if chips else 1}"
            )
        if value != "v5litepod-1":
            raise ValueError(
                "this stack serves on exactly one v5e chip, v5litepod-1: its memory budget "
                "is measured there, and gemma-4-E2B has one KV head, so more chips "
                "replicate the KV cache instead of sharding it; set it to v5litepod-1"
            )
        return value

    @field_validator("runtime_version")
    @classmethod
    def _runtime_for_v5e(cls, value: str) -> str:
        if "tpuv5-lite" not in value:
            raise ValueError(
                "a v5litepod node needs a v5e runtime image; set it to v2-alpha-tpuv5-lite"
            )
        return value

    @field_validator("zone")
    @classmethod
    def _zone_shape(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z]+-[a-z]+\d+-[a-z]", value):
            raise ValueError("a zone looks like us-west4-a")
        if value not in V5E_ZONES:
            raise ValueError(
                "there is no TPU v5e in this zone (Google's TPU regions and zones page lists v5e "
                f"in {', '.join(sorted(V5E_ZONES))}); set it to us-west4-a, the only zone where "
                "flex-start v5litepod-1 was run"
            )
        return value

    @field_validator("queue_timeout")
    @classmethod
    def _queue_has_time(cls, value: str) -> str:
        if parse_duration(value) == 0:
            raise ValueError(
                "a queued request needs time to find capacity: 0 sends no deadline to the API, "
                "so the request would wait forever while pulumi up gives up; set it like 1h"
            )
        return value

    @field_validator("network")
    @classmethod
    def _network_shape(cls, value: str) -> str:
        name = re.fullmatch(r"(?:(?:projects/[^/]+/)?global/networks/)?([^/]*)", value)
        if not name or not naming.COMPUTE_NAME.fullmatch(name.group(1)):
            raise ValueError(
                "a VPC network is named with 1-63 lowercase letters, digits and '-', starting "
                "with a letter and not ending with '-' (or given as "
                "projects/PROJECT/global/networks/NAME); the default one is default"
            )
        return value

    @field_validator("subnetwork")
    @classmethod
    def _subnetwork_shape(cls, value: str | None) -> str | None:
        if value is None:
            return value
        name = re.fullmatch(r"(?:(?:projects/[^/]+/)?regions/[a-z]+-[a-z]+\d+/subnetworks/)?([^/]*)", value)
        if not name or not naming.COMPUTE_NAME.fullmatch(name.group(1)):
            raise ValueError(
                "a subnetwork is named with 1-63 lowercase letters, digits and '-', starting "
                "with a letter and not ending with '-' (or given as "
                "projects/PROJECT/regions/REGION/subnetworks/NAME); remove the key for the "
                "network's default"
            )
        return value

    @field_validator("labels")
    @classmethod
    def _labels_gcp_accepts(cls, value: dict[str, str]) -> dict[str, str]:
        problems = [problem for key, item in value.items() if (problem := naming.label_problem(key, item))]
        if len(value) > MAX_USER_LABELS:
            problems.append(f"at most {MAX_USER_LABELS} labels (GCP allows 64, the stack sets app and stack)")
        if problems:
            raise ValueError("; ".join(problems) + "; e.g. team: agents")
        return value

    @field_validator("max_run_duration", "queue_timeout")
    @classmethod
    def _duration_readable(cls, value: str) -> str:
        parse_duration(value)
        return value

    @field_validator("node_id")
    @classmethod
    def _node_id_shape(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?", value):
            raise ValueError("use lowercase letters, digits and hyphens, starting with a letter")
        return value

    @property
    def run_seconds(self) -> int:
        return parse_duration(self.max_run_duration)

    @property
    def queue_seconds(self) -> int:
        return parse_duration(self.queue_timeout)

    @property
    def region(self) -> str:
        return self.zone.rsplit("-", 1)[0]


class KvLayerGroupSetting(_Section):
    """Layers that own a KV cache and share one geometry (from the model's config.json)."""

    layers: int = Field(ge=1)
    kv_heads: int = Field(ge=1)
    """num_key_value_heads (or num_global_key_value_heads for full-attention layers, if set)."""
    head_dim: int = Field(ge=1)


class ModelGeometrySetting(_Section):
    """A model's memory geometry, for a model the log did not measure (`vllm.modelGeometry`)."""

    weights_gib: float = Field(gt=0)
    """Resident weights in GiB: the boot log's total_hbm_used_gb (`Memory statistics` line)."""
    kv_layers: list[KvLayerGroupSetting] = Field(min_length=1)
    """Only the layers that own a cache (not KV-shared ones), grouped by head_dim."""
    max_context_tokens: int = Field(ge=256)
    """config.json max_position_embeddings (text_config's for multimodal models)."""
    max_tokens_per_mm_item: int | None = Field(None, ge=1)
    """The largest multimodal item in tokens: the server's 'max_tokens_per_mm_item (N)' error."""
    kv_element_bytes: Literal[1, 2, 4] = 2
    """2 for bf16/fp16 KV (auto on a bf16 checkpoint)."""

    @field_validator("weights_gib")
    @classmethod
    def _fits_the_chip(cls, value: float) -> float:
        cap = budget.gib(budget.hbm_cap_bytes(budget.HIGHEST_BOOTING_GPU_MEMORY_UTILIZATION))
        if value >= cap:
            raise ValueError(
                f"the weights alone fill the {cap:.2f} GiB one v5e chip can give weights and KV "
                "(15.75 GiB x 0.92); pick a smaller model (the log's E2B is 8.97 GiB)"
            )
        return value

    def to_geometry(self) -> budget.ModelGeometry:
        return budget.ModelGeometry(
            weights_bytes=int(self.weights_gib * budget.GIB),
            kv_layer_groups=tuple(budget.KvLayerGroup(layers=group.layers, kv_heads=group.kv_heads,
                                                      head_dim=group.head_dim) for group in self.kv_layers),
            kv_element_bytes=self.kv_element_bytes,
            max_tokens_per_mm_item=self.max_tokens_per_mm_item,
            num_key_value_heads=max(group.kv_heads for group in self.kv_layers),
            max_context_tokens=self.max_context_tokens,
        )


# Docker's image reference grammar (distribution/reference): [host[:port]/]path[:tag][@digest].
_IMAGE_REFERENCE = re.compile(
    r"(?:(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*"
    r"(?::[0-9]+)?|localhost(?::[0-9]+)?)/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[\w][\w.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?"
)


class VllmSettings(_Section):
    """The `vllm serve` command (config key `tpu-vllm:vllm`); defaults are the log's final run."""

    image: str = "vllm/vllm-tpu:nightly"
    """The container; pin a tag or digest for repeatable boots."""
    model: str = DEFAULT_MODEL
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "bfloat16"
    kv_cache_dtype: str = "auto"
    max_model_len: int = Field(32768, ge=256)
    max_num_batched_tokens: int = Field(4096, ge=16)
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = Field(0.92, gt=0, le=1)
    enable_prefix_caching: bool = True
    disable_chunked_mm_input: bool = True
    limit_mm_per_prompt: dict[str, int] = Field(default_factory=lambda: {"image": 4, "audio": 1})
    enable_auto_tool_choice: bool = True
    tool_call_parser: str | None = "gemma4"
    reasoning_parser: str | None = "gemma4"
    block_size: int | None = None
    """Not to be set: the backend scales it with max-model-len."""
    max_num_seqs: int | None = Field(None, ge=1)
    """Leave unset (256); the log's cap at 64 made things worse."""
    kv_cache_memory_bytes: int | None = None
    """Pins the KV pool in bytes (--kv-cache-memory); the log's measured-good value is 5923602432."""
    model_geometry: ModelGeometrySetting | None = None
    """For a model the log did not measure: what the memory and KV checks need."""
    port: int = Field(8000, ge=1, le=65535)
    weights_on_disk: bool = False
    """Keep HF_HOME on the cache disk instead of /dev/shm (slower to load, saves the download)."""
    health_timeout: str = "30m"
    """How long the deploy waits for /health; a cold start is ~14 min."""
    allowed_media_domains: list[str] = Field(default_factory=list)
    """Hosts vLLM may fetch image/audio URLs from (exact names); none by default: inline data only."""
    container_access: Literal["privileged", "devices"] = "privileged"
    """How the container reaches the TPU: --privileged (measured by the log) or only the device nodes."""

    @model_validator(mode="before")
    @classmethod
    def _follow_the_model_family(cls, data: Any) -> Any:
        """Parsers and multimodal limits not set follow the model's family (none if unknown)."""
        if not isinstance(data, dict):
            return data
        model = data.get("model", DEFAULT_MODEL)
        if not isinstance(model, str):
            return data
        family = family_of(model)
        derived = {
            "tool_call_parser": family.tool_call_parser if family else None,
            "reasoning_parser": family.reasoning_parser if family else None,
            "limit_mm_per_prompt": _family_limits(model),
        }
        filled = dict(data)
        for name, value in derived.items():
            if name not in data and to_camel(name) not in data:
                filled[name] = value
        return filled

    @field_validator("image")
    @classmethod
    def _image_reference(cls, value: str) -> str:
        return pullable_image(value, "vllm/vllm-tpu:nightly")

    @field_validator("port")
    @classmethod
    def _port_free_on_the_node(cls, value: int) -> int:
        if value == SSH_PORT:
            raise ValueError(
                "sshd listens on 22 on the node, and the container shares the host's network "
                "(--net=host): vLLM could not bind it, and the firewall rule for it would open "
                "SSH to the serving ranges; use 8000"
            )
        return value

    @field_validator("limit_mm_per_prompt")
    @classmethod
    def _known_modalities(cls, value: dict[str, int]) -> dict[str, int]:
        unknown = sorted(set(value) - VLLM_MODALITIES)
        negative = sorted(key for key, count in value.items() if count < 0)
        problems = []
        if unknown:
            problems.append(
                f"{', '.join(unknown)} is not a modality vLLM knows (it would be ignored and limit "
                f"nothing); vLLM's are {', '.join(sorted(VLLM_MODALITIES))}"
            )
        if negative:
            problems.append(
                f"{', '.join(negative)}: a count is 0 or more (0 turns the modality off; vLLM "
                "refuses a negative one at start)"
            )
        if problems:
            raise ValueError("; ".join(problems) + '; e.g. {"image": 4, "audio": 1}')
        return value

    @field_validator("tool_call_parser")
    @classmethod
    def _registered_tool_parser(cls, value: str | None) -> str | None:
        return _registered(value, VLLM_TOOL_CALL_PARSERS, "tool call parser")

    @field_validator("reasoning_parser")
    @classmethod
    def _registered_reasoning_parser(cls, value: str | None) -> str | None:
        return _registered(value, VLLM_REASONING_PARSERS, "reasoning parser")

    @field_validator("kv_cache_memory_bytes")
    @classmethod
    def _pool_on_the_chip(cls, value: int | None) -> int | None:
        if value is None:
            return value
        if value <= 0:
            raise ValueError(
                "the KV pool is a positive number of bytes; the log's measured-good value is "
                "5923602432, or remove the key to let gpuMemoryUtilization size it"
            )
        if value >= budget.V5E_HBM_BYTES:
            raise ValueError(
                f"more than the chip's whole HBM ({budget.V5E_HBM_BYTES} bytes, 15.75 GiB) before "
                "any weights; the log's measured-good value is 5923602432"
            )
        return value

    @field_validator("gpu_memory_utilization")
    @classmethod
    def _memory_cap(cls, value: float, info: ValidationInfo) -> float:
        if value >= budget.FAILING_GPU_MEMORY_UTILIZATION:
            raise ValueError(
                "0.95 and above does not boot on this model/chip: the KV pool sizes as "
                "predicted, then XLA program allocation fails ~691 s in "
                "(RuntimeProgramAllocationFailure, 384.11M wanted, ~347M free) because compiled "
                "programs live outside the cap; set it to 0.92"
            )
        if value > budget.HIGHEST_BOOTING_GPU_MEMORY_UTILIZATION:
            margin_mb = {0.93: 291, 0.94: 127}.get(round(value, 2))
            _warn(info, (
                f"vllm.gpuMemoryUtilization={value} is untested: the estimated margin "
                f"({margin_mb or 'under 291'} MB) is thin against a failure that was 37 MB "
                "short at 0.95, and finding out costs a ~11 min compile; 0.92 is the "
                "measured ceiling"
            ))
        return value

    @field_validator("kv_cache_dtype")
    @classmethod
    def _kv_dtype(cls, value: str, info: ValidationInfo) -> str:
        if value == "int8":
            raise ValueError(
                "int8 is not one of vLLM's --kv-cache-dtype choices (the server rejects it: "
                "invalid choice: 'int8'); set it to auto"
            )
        if value in KV_DTYPES_KILL_AT_BOOT or value.startswith("turboquant_"):
            raise ValueError(
                "the CLI accepts it, then it kills the server at boot on this stack "
                "(tpu-inference has no kernel for it); set it to auto"
            )
        if value in KV_DTYPES_FP8_NO_GAIN:
            _warn(info, (
                f"vllm.kvCacheDtype={value} buys nothing on v5e: the KV block layout is "
                "word-aligned, so capacity stays 1.000x, and it runs ~2% slower; use auto"
            ))
        elif value in KV_DTYPES_UNTESTED:
            _warn(info, f"vllm.kvCacheDtype={value} was not tested by the build log; auto is")
        elif value not in KV_DTYPES_FINE:
            raise ValueError(
                "unknown KV cache dtype; accepted values are "
                + ", ".join(sorted(KV_DTYPES_ACCEPTED)) + " and turboquant_*; use auto"
            )
        return value

    @field_validator("max_num_batched_tokens")
    @classmethod
    def _bucketed(cls, value: int, info: ValidationInfo) -> int:
        bucket = budget.next_power_of_two(value)
        if bucket != value:
            _warn(info, (
                f"vllm.maxNumBatchedTokens={value} compiles as the {bucket} bucket (TPU "
                f"precompiles powers of two) and runs {bucket}-shaped kernels with less work "
                f"in them: the log measured -24.7% throughput at 2496; use {bucket}"
            ))
        return value

    @field_validator("tensor_parallel_size")
    @classmethod
    def _one_chip(cls, value: int) -> int:
        if value != 1:
            raise ValueError(
                "there is one chip; and gemma-4-E2B has one KV head (full MQA), which "
                "cannot be sharded: runtimes replicate it to a multiple of the TP size, so "
                "more chips multiply KV memory instead of dividing it; set it to 1"
            )
        return value

    @field_validator("block_size")
    @classmethod
    def _no_block_size(cls, value: int | None) -> int | None:
        if value is not None:
            raise ValueError(
                "do not pin the block size: the Pallas backend scales it with maxModelLen to "
                "keep 512 blocks per request, which is what keeps long context free of KV "
                "cost (a 2048-blocks arm decoded slower, 8.32 vs 8.02 ms); remove the key"
            )
        return value

    @field_validator("max_num_seqs")
    @classmethod
    def _leave_max_num_seqs(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None:
            _warn(info, (
                f"vllm.maxNumSeqs={value} is pinned; the log capped it at 64 and every cell "
                "got worse. Leave it unset (256) unless the logs show preemption"
            ))
        return value

    @field_validator("health_timeout")
    @classmethod
    def _timeout_readable(cls, value: str) -> str:
        seconds = parse_duration(value)
        if seconds < budget.COLD_BOOT_SECONDS:
            raise ValueError(
                f"a cold start takes ~{budget.COLD_BOOT_SECONDS} s (80% XLA compile); "
                "give it at least 15m, 30m is the default"
            )
        return value

    @field_validator("allowed_media_domains")
    @classmethod
    def _media_hosts(cls, values: list[str]) -> list[str]:
        for value in values:
            if value == NO_MEDIA_DOMAIN:
                raise ValueError(f"{value!r} is what an empty list renders to; leave the list empty instead")
            if not HOSTNAME.fullmatch(value):
                raise ValueError(
                    f"{value!r} is not a host name: write lowercase host names only, no scheme, port, path "
                    "or wildcard (vLLM matches the URL's host exactly, so list each subdomain), e.g. "
                    "images.example.com; leave the list empty to allow no media URLs at all"
                )
            inward = _inward_host(value)
            if inward:
                raise ValueError(
                    f"{value!r} {inward}: whoever holds the API key could make vLLM fetch from the node itself, "
                    "its metadata server or your VPC (vLLM's own loopback port answers without the key); list "
                    "public host names only"
                )
        return values

    @property
    def health_timeout_seconds(self) -> int:
        return parse_duration(self.health_timeout)

    @property
    def multimodal_enabled(self) -> bool:
        return any(count > 0 for count in self.limit_mm_per_prompt.values())


def _registered(value: str | None, registered: frozenset[str], what: str) -> str | None:
    if value is None or value in registered:
        return value
    near = difflib.get_close_matches(value, sorted(registered), n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(near)}? " if near else ""
    raise ValueError(
        f"vLLM does not register this {what} (the server exits at start: 'invalid {what}: "
        f"{value}'); {hint}the log's build registers {', '.join(sorted(registered))}"
    )


class CacheSettings(_Section):
    """The persistent disk for the XLA compile cache (config key `tpu-vllm:cache`)."""

    size_gb: int = Field(50, ge=10, le=65536)
    """Holds the ~197 MB compile cache with room; 50 also fits the 9.54 GiB weights."""
    disk_type: Literal["pd-balanced"] = "pd-balanced"
    """v5e attaches Balanced PD."""
    keep_on_destroy: bool = False
    """Keep the disk (and the warm cache) when the stack is destroyed."""
    device_name: str = "persistent-disk-1"
    """How the VM names the first data disk: /dev/disk/by-id/google-persistent-disk-1."""
    mount_point: str = "/mnt/tpu-vllm-cache"

    @field_validator("mount_point")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/") or not re.fullmatch(r"[A-Za-z0-9._/-]+", value):
            raise ValueError("use an absolute path of letters, digits, '.', '_', '-' and '/', "
                             "e.g. /mnt/tpu-vllm-cache")
        # //usr/../etc and /etc/ are /etc: judge the directory the kernel would mount on.
        normal = "/" + posixpath.normpath(value).lstrip("/")
        system = next((root for root in SYSTEM_MOUNT_ROOTS
                       if normal == root or normal.startswith(root + "/")), None)
        if normal == "/" or system or re.match(r"/lib(32|64|x32)?(/|$)", normal):
            shown = f" (that is {normal})" if normal != value else ""
            raise ValueError(
                f"a system directory{shown}: mounting the cache disk there would hide the OS's own files "
                "or land on a directory that is cleaned or virtual; use a path under /mnt, e.g. "
                "/mnt/tpu-vllm-cache"
            )
        return normal


def _check_cidrs(values: list[str], info: ValidationInfo) -> list[str]:
    """Each range as GCP will read it (host bits dropped, '/00' is '/0'), so checks and rules see one spelling."""
    canonical = []
    for value in values:
        network = address_ranges.parse(value)
        if address_ranges.has_host_bits(value):
            _warn(info, (
                f"access.{to_camel(info.field_name or '')}: {value} has host bits set, so it means {network} "
                f"({network.num_addresses:,} addresses); for one address write {value.strip().split('/')[0]}/"
                f"{network.max_prefixlen}"
            ))
        canonical.append(str(network))
    return canonical


class AccessSettings(_Section):
    """Who can reach the node (config key `tpu-vllm:access`)."""

    ssh_source_ranges: list[str] = Field(default_factory=list)
    """Where Pulumi's SSH connection comes from: your address, e.g. 203.0.113.7/32."""
    allow_ssh_from_anywhere: bool = False
    """Explicit opt-in for 0.0.0.0/0 on SSH (key-only auth)."""
    serving_source_ranges: list[str] = Field(default_factory=list)
    """Outside ranges that may call the endpoint directly; none by default (use the tunnel)."""
    internal_source_ranges: list[str] = Field(default_factory=lambda: ["10.128.0.0/9"])
    """VPC ranges that may call the endpoint (the default network's auto-mode range)."""
    allow_public_serving: bool = False
    """Explicit opt-in for 0.0.0.0/0 on the serving port."""
    ssh_user: str = "tpu-vllm"
    ssh_public_key: str | None = None
    """Your own key instead of the generated one (set sshPrivateKey as a secret too)."""

    @field_validator("ssh_source_ranges", "serving_source_ranges", "internal_source_ranges")
    @classmethod
    def _cidrs(cls, values: list[str], info: ValidationInfo) -> list[str]:
        return _check_cidrs(values, info)

    @field_validator("internal_source_ranges")
    @classmethod
    def _internal_is_private(cls, values: list[str]) -> list[str]:
        public = [value for value in values if not address_ranges.is_private(address_ranges.parse(value))]
        if public:
            raise ValueError(
                f"{', '.join(public)} {'is' if len(public) == 1 else 'are'} not private: internal ranges are your "
                f"VPC's own addresses, inside {address_ranges.PRIVATE_RANGES_TEXT}. List outside ranges in "
                "access.servingSourceRanges instead (one that opens the endpoint to the internet also needs "
                "access.allowPublicServing true)"
            )
        return values

    @field_validator("ssh_user")
    @classmethod
    def _user_shape(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", value):
            raise ValueError("use a lowercase Linux user name, e.g. tpu-vllm")
        return value

    @field_validator("ssh_public_key")
    @classmethod
    def _public_key_shape(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"(ssh-ed25519|ssh-rsa|ecdsa-sha2-\S+) \S+", value):
            raise ValueError("paste an OpenSSH public key line, e.g. 'ssh-ed25519 AAAA...'")
        return value


def pullable_image(value: str, example: str) -> str:
    """An image reference docker (and the kubelet) can pull; it also lands in `docker run`'s argv, so
    nothing option-like or with spaces gets through."""
    if not value.strip():
        raise ValueError(f"the node pulls this container; set it to {example} or a pinned tag")
    if re.fullmatch(r"(sha256:)?[0-9a-f]{12,64}", value):
        raise ValueError(
            "an image ID from `docker images` is a config-blob ID, not a manifest digest: "
            "docker pull by it fails with 'unexpected media type'; use the repository and a "
            f"tag, e.g. {example}, or repository@sha256:<manifest digest>"
        )
    if not _IMAGE_REFERENCE.fullmatch(value):
        raise ValueError(
            f"not an image reference docker can pull; write it like {example}, "
            "registry.example.com/team/image:v1 or repository@sha256:<digest>"
        )
    return value


# Names that resolve inside the node or the VPC: GCE's metadata server and internal DNS, mDNS, loopback.
INWARD_SUFFIXES = (".internal", ".localhost", ".local", ".home.arpa", ".localdomain")


def _inward_host(host: str) -> str | None:
    """Why a media host would point vLLM's fetcher back inside, or None for a public name or address."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if address is not None:
        return None if address.is_global else "is not a public address"
    if host == "localhost" or host.endswith(INWARD_SUFFIXES):
        return "names the node, the metadata server or the VPC"
    if "." not in host:
        return "is a single label, which the node's resolver completes with its own search domains"
    # getaddrinfo reads 2130706433 or 0x7f000001 as 127.0.0.1: a real domain's last label has a letter first.
    if not re.fullmatch(r"[a-z][a-z0-9-]*", host.rsplit(".", 1)[1]):
        return "reads as a numeric address to the resolver"
    return None


class FrontSettings(_Section):
    """The key-checking front on the serving port (config key `tpu-vllm:front`); vLLM itself listens on loopback."""

    image: str = front.DEFAULT_IMAGE
    """The proxy's container: nginx's official image."""

    @field_validator("image")
    @classmethod
    def _image_reference(cls, value: str) -> str:
        return pullable_image(value, front.DEFAULT_IMAGE)
    upstream_port: int = Field(8001, ge=1, le=65535)
    """vLLM's port on 127.0.0.1, behind the front; vllm.port is the front's."""


# GKE: flex-start for TPU nodes needs this version or later (GKE's flex-start page, TPU requirements).
GKE_FLEX_START_TPU_MIN_VERSION = "1.33.0-gke.1712000"
# A ComputeClass creates its own node pools (nodePoolAutoCreation) on a Standard cluster without cluster-level
# node auto-provisioning from this version on (GKE's "Configure node pool auto-creation", Limitations and
# Requirements). The stack needs both, so this later one is its minimum.
GKE_CLASS_AUTO_CREATION_MIN_VERSION = "1.33.3-gke.1136000"
GKE_MIN_VERSION = GKE_CLASS_AUTO_CREATION_MIN_VERSION
# Why GKE_MIN_VERSION, for every message that names it.
GKE_MIN_VERSION_REASON = ("the ComputeClass creates its flex-start TPU node pools itself (node pool auto-creation "
                          "without node auto-provisioning)")
# What a ComputeClass priority may fall back to when flex-start has no capacity, each an explicit opt-in.
GKE_FALLBACK_MODELS = ("spot", "on-demand")
# The CRD's bounds on flexStart.nodeRecycling.leadTimeSeconds (computeclasses.cloud.google.com v1).
GKE_LEAD_TIME_MAX_SECONDS = 604800
# A replacement node must be up and warm before the old one ends: the log's warm start (497 s) plus an allowance
# for GKE to create the node and pull the image. The allowance is not measured in the log; it is the
# order of a GKE node's boot (a few minutes) with room for a short flex-start queue.
GKE_NODE_UP_ALLOWANCE_SECONDS = 600
# One v5e chip per node: the only v5e machine whose chip count matches this stack's memory budget.
GKE_V5E_ONE_CHIP_MACHINE = "ct5lp-hightpu-1t"
GKE_RELEASE_CHANNELS = ("RAPID", "REGULAR", "STABLE")
# Google's custom metrics adapter lives here by its own contract (components/gke/autoscaling.py deploys it).
GKE_METRICS_ADAPTER_NAMESPACE = "custom-metrics"
# Namespaces the stack must not declare as its own Namespace (it would fail to create an existing one, and
# `pulumi destroy` would delete it): Kubernetes' own, GKE's, Managed Prometheus's and the adapter's.
GKE_FOREIGN_NAMESPACES = frozenset({"default", GKE_METRICS_ADAPTER_NAMESPACE})
GKE_FOREIGN_NAMESPACE_PREFIXES = ("kube-", "gke-", "gmp-")
_GKE_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+)(?:-gke\.(\d+))?)?")


def gke_version_at_least(version: str, minimum: str = GKE_MIN_VERSION) -> bool | None:
    """True or False when the version says; None when it cannot (an alias like '1.33' may mean any patch)."""
    if version.strip().lower() == "latest":
        return True
    have, want = _GKE_VERSION.fullmatch(version.strip()), _GKE_VERSION.fullmatch(minimum)
    if have is None or want is None:
        return None
    have_parts = [None if part is None else int(part) for part in have.groups()]
    want_parts = [int(part) for part in want.groups()]
    for mine, theirs in zip(have_parts, want_parts, strict=True):
        if mine is None:
            return None  # every version from here on shares the prefix: could be either side
        if mine != theirs:
            return mine > theirs
    return True


class GkeSettings(_Section):
    """The scale-out platform (config key `tpu-vllm:gke`), used when `tpu-vllm:platform` is gke."""

    cluster_name: str | None = None
    """The GKE cluster; defaults to tpu-vllm-<stack>. With useExistingCluster, the cluster to reuse."""
    use_existing_cluster: bool = False
    """Reuse a cluster by name (it needs Workload Identity, the Secret Manager add-on and Managed Prometheus)."""
    location: str = "us-west4-a"
    """A zone (zonal cluster; one per billing account is free of the fee) or a region (regional control plane)."""
    node_locations: list[str] = Field(default_factory=list)
    """Zones the TPU pool may use (several: the autoscaler's fallback when one has no capacity); default the zone."""
    release_channel: str = "REGULAR"
    """RAPID, REGULAR or STABLE; its default version must be 1.33.3-gke.1136000 or later (checked at preview)."""
    min_master_version: str | None = None
    """Pin the cluster's minimum version (e.g. 1.34); unset takes the channel's default."""
    machine_type: str = GKE_V5E_ONE_CHIP_MACHINE
    """The TPU node: ct5lp-hightpu-1t, one v5e chip (the only shape this stack's memory budget fits)."""
    min_replicas: int = Field(1, ge=1)
    """Replicas the HPA keeps (each is one chip, billed while it runs); at least 1."""
    max_replicas: int = Field(4, ge=1)
    """Replicas (and TPU nodes) the HPA and the node pool's autoscaler may reach."""
    max_tpu_chips: int = Field(8, ge=1)
    """A cap on chips: maxReplicas above it is refused (the policy pack enforces the same cap)."""
    waiting_requests_target: int = Field(10, ge=1)
    """HPA target: average vllm:num_requests_waiting per pod before it adds a replica."""
    system_machine_type: str = "e2-standard-2"
    """The small CPU pool for kube-system, the metrics adapter and the Prometheus collectors."""
    system_node_count: int = Field(1, ge=1, le=10)
    """Nodes in the system pool."""
    namespace: str = "tpu-vllm"
    """The Kubernetes namespace of the workload."""
    termination_grace_period: str = "5m"
    """How long a stopping pod may keep serving in-flight streams."""
    allow_external_load_balancer: bool = False
    """Explicit opt-in: an external load balancer (limited to access.servingSourceRanges) instead of an internal one."""
    allow_unbounded_billing: bool = False
    """Explicit opt-in for spot or on-demand TPU nodes on GKE: nothing stops their billing."""
    install_metrics_adapter: bool = True
    """Deploy Google's custom metrics adapter (the HPA's path to the queue metric); off if the cluster has one."""
    fallback: list[Literal["spot", "on-demand"]] = Field(default_factory=list)
    """ComputeClass priorities after tpu.provisioningModel, in order, when it has no capacity: spot and/or
    on-demand. Each is an explicit, priced opt-in: nothing stops their billing."""
    recycling_lead_time: str = "1h"
    """How long before a flex-start node's run ends GKE brings up its replacement (nodeRecycling)."""

    @field_validator("fallback")
    @classmethod
    def _distinct_fallbacks(cls, values: list[str]) -> list[str]:
        if len(set(values)) != len(values):
            raise ValueError("each fallback once, in the order to try them, e.g. "
                             f"{json.dumps(list(GKE_FALLBACK_MODELS))}")
        return values

    @field_validator("recycling_lead_time")
    @classmethod
    def _lead_time(cls, value: str) -> str:
        seconds = parse_duration(value)
        if not 1 <= seconds <= GKE_LEAD_TIME_MAX_SECONDS:
            raise ValueError("between 1s and 7d (the ComputeClass CRD's bounds), e.g. 1h")
        return value

    @field_validator("machine_type")
    @classmethod
    def _one_v5e_chip(cls, value: str) -> str:
        if value == GKE_V5E_ONE_CHIP_MACHINE:
            return value
        if value.startswith("ct5lp-"):
            raise ValueError(
                "one replica is one v5e chip here (the memory budget is measured on one chip, and the model's "
                f"single KV head is replicated, not sharded, across chips); set it to {GKE_V5E_ONE_CHIP_MACHINE}"
            )
        raise ValueError(
            f"not a TPU v5e machine; this stack serves on v5e only (v5litepod-1 on the VM path); set it to "
            f"{GKE_V5E_ONE_CHIP_MACHINE}"
        )

    @field_validator("location")
    @classmethod
    def _zone_or_region(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z]+-[a-z]+\d+(-[a-z])?", value):
            raise ValueError("a zone (us-west4-a) for a zonal cluster or a region (us-west4) for a regional one")
        return value

    @field_validator("node_locations")
    @classmethod
    def _zones(cls, values: list[str]) -> list[str]:
        for value in values:
            if not re.fullmatch(r"[a-z]+-[a-z]+\d+-[a-z]", value):
                raise ValueError(f"{value!r} is not a zone; list zones like us-west4-a")
        return values

    @field_validator("release_channel")
    @classmethod
    def _channel(cls, value: str) -> str:
        if value not in GKE_RELEASE_CHANNELS:
            raise ValueError(f"use one of {', '.join(GKE_RELEASE_CHANNELS)} (flex-start TPU needs a channel)")
        return value

    @field_validator("min_master_version")
    @classmethod
    def _new_enough(cls, value: str | None) -> str | None:
        if value is None:
            return value
        newer = gke_version_at_least(value)
        if newer is None:
            raise ValueError(
                f"cannot tell whether {value!r} is {GKE_MIN_VERSION} or later ({GKE_MIN_VERSION_REASON}); "
                f"write a full version like {GKE_MIN_VERSION}, a newer "
                "minor like 1.34, or remove the key to take the channel's default"
            )
        if not newer:
            raise ValueError(
                f"GKE {GKE_MIN_VERSION} or later is needed ({GKE_MIN_VERSION_REASON}); set "
                "1.34 (or a 1.33 patch at or past that build), or remove the key to take the channel's default"
            )
        return value

    @field_validator("cluster_name")
    @classmethod
    def _cluster_name(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[a-z]([-a-z0-9]{0,38}[a-z0-9])?", value):
            raise ValueError("lowercase letters, digits and hyphens, starting with a letter, at most 40")
        return value

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", value):
            raise ValueError("a Kubernetes namespace: lowercase letters, digits and hyphens, e.g. tpu-vllm")
        if value in GKE_FOREIGN_NAMESPACES or value.startswith(GKE_FOREIGN_NAMESPACE_PREFIXES):
            raise ValueError(
                "the stack creates this namespace and deletes it on pulumi destroy, so it must be its own; "
                f"{value} belongs to Kubernetes, GKE, Managed Prometheus or the metrics adapter. Use a name "
                "of your own, e.g. tpu-vllm"
            )
        return value

    @field_validator("system_machine_type")
    @classmethod
    def _priced_machine(cls, value: str) -> str:
        if value not in budget.SYSTEM_MACHINE_SHAPES:
            raise ValueError(
                f"the plan prices {', '.join(budget.SYSTEM_MACHINE_SHAPES)} only; use one of them "
                "(e2-standard-2 is enough for the system pods)"
            )
        return value

    @field_validator("termination_grace_period")
    @classmethod
    def _grace(cls, value: str) -> str:
        seconds = parse_duration(value)
        if not 10 <= seconds <= 3600:
            raise ValueError("between 10s and 1h; in-flight streams get this long to finish, e.g. 5m")
        return value

    @property
    def region(self) -> str:
        return self.location if self.is_regional else self.location.rsplit("-", 1)[0]

    @property
    def is_regional(self) -> bool:
        return not re.fullmatch(r".*-[a-z]", self.location)

    @property
    def tpu_zones(self) -> list[str]:
        """Where TPU nodes may come up."""
        return list(self.node_locations) or ([] if self.is_regional else [self.location])

    @property
    def termination_grace_seconds(self) -> int:
        return parse_duration(self.termination_grace_period)

    @property
    def recycling_lead_seconds(self) -> int:
        return parse_duration(self.recycling_lead_time)


class LoadSettings(_Section):
    """The load you plan to put on it (config key `tpu-vllm:load`), checked against the KV pool."""

    clients: int = Field(16, ge=1)
    context_tokens: int = Field(1024, ge=1)


TOP_LEVEL_KEYS = {
    "tpu": TpuSettings,
    "vllm": VllmSettings,
    "cache": CacheSettings,
    "access": AccessSettings,
    "load": LoadSettings,
    "front": FrontSettings,
    "gke": GkeSettings,
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
    platform: Literal["vm", "gke"] = "vm"
    """vm: one flex-start TPU VM (the default); gke: a GKE cluster that scales 1..N chips."""
    gke: GkeSettings = Field(default_factory=GkeSettings)
    hf_token: SecretStr | None = None
    """If set (as a Pulumi secret), the stack keeps it in its own Secret Manager secret."""
    hf_token_secret: str = "hf-token"
    """Otherwise, the id of a secret you created with gcloud (the log's way)."""
    ssh_private_key: SecretStr | None = None

    @field_validator("hf_token")
    @classmethod
    def _hf_token_not_empty(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().strip():
            raise ValueError(
                "it is empty, and an empty token cannot download the model; paste your token with "
                f"`pulumi config set --secret {NAMESPACE}:hfToken`, or remove the key "
                f"(`pulumi config rm {NAMESPACE}:hfToken`) to use your own secret ({NAMESPACE}:hfTokenSecret)"
            )
        return value

    @field_validator("ssh_private_key")
    @classmethod
    def _private_key_not_empty(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().strip():
            raise ValueError(
                f"it is empty, so {NAMESPACE}:access.sshPublicKey has no private half to log in with; set it "
                f"from the key file (`pulumi config set --secret {NAMESPACE}:sshPrivateKey < ~/.ssh/id_ed25519`), "
                f"or remove both keys and the stack generates one"
            )
        return value

    @field_validator("hf_token_secret")
    @classmethod
    def _secret_id_shape(cls, value: str) -> str:
        # Empty, spaces or a resource path: the common slips. Anything else is looked up at preview.
        if not value.strip() or re.search(r"[\s/]", value):
            raise ValueError(
                "a Secret Manager secret id is one word of letters, digits, - or _ (e.g. hf-token; the stack adds "
                "projects/<project>/secrets/ itself); set the id of the secret that holds your token"
            )
        return value

    @field_validator("project")
    @classmethod
    def _project_id(cls, value: str) -> str:
        # Resource Manager: "6 to 30 lowercase ASCII letters, digits, or hyphens. It must start
        # with a letter. Trailing hyphens are prohibited." Legacy domain-scoped projects
        # (example.com:my-project) can no longer be made but still exist, and Google's APIs
        # address them by that id, so the domain prefix is accepted.
        if value == OFFLINE_PLAN_PROJECT:
            return value
        if not re.fullmatch(r"(?:[a-z0-9-]+(?:\.[a-z0-9-]+)+:)?[a-z][-a-z0-9]{4,28}[a-z0-9]", value):
            raise ValueError(
                "a project ID is 6-30 lowercase letters, digits and hyphens, starting with a "
                "letter and not ending with a hyphen (the ID, not the display name or number: "
                "gcloud projects list shows it); run pulumi config set gcp:project YOUR_PROJECT_ID"
            )
        return value

    # Every id derived from the stack name, valid for its API (components/naming.py).
    @property
    def node_id(self) -> str:
        """The queued resource and its node (TPU API; also the VM's host name)."""
        return self.tpu.node_id or naming.stack_id(self.stack)

    @property
    def resource_prefix(self) -> str:
        """At most 46 characters, so `<prefix>-<suffix>` fits 63 for every suffix the stack adds
        (the longest is the firewall rule serving-external); also the node's network tag."""
        return naming.stack_id(self.stack, limit=naming.LIMITS["compute"] - len("-serving-external"))

    @property
    def service_account_id(self) -> str:
        return naming.stack_id(self.stack, "vm", limit=naming.LIMITS["service_account"])

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
        return family_of(self.vllm.model)

    @property
    def geometry(self) -> budget.ModelGeometry | None:
        """The geometry given in vllm.modelGeometry, else the log's measured one, else None."""
        if self.vllm.model_geometry is not None:
            return self.vllm.model_geometry.to_geometry()
        return budget.geometry_for(self.vllm.model)

    def kv_budget(self) -> budget.KvBudget | None:
        if self.geometry is None:
            return None
        return budget.kv_budget(
            self.geometry,
            self.vllm.gpu_memory_utilization,
            self.vllm.max_model_len,
            self.vllm.kv_cache_memory_bytes,
        )


@dataclass(frozen=True)
class Loaded:
    settings: Settings
    warnings: list[str]
    secret_keys: frozenset[str] = frozenset()
    """Top-level keys set with --secret (e.g. hfTokenSecret): their values flow only as Pulumi secrets."""


def _config_key(loc: tuple[Any, ...]) -> str:
    """('vllm', 'gpuMemoryUtilization') -> 'tpu-vllm:vllm.gpuMemoryUtilization'."""
    head, *rest = [str(part) for part in loc] or ["?"]
    if head == "project":
        return "gcp:project"
    key = f"{NAMESPACE}:{head}"
    for part in rest:
        key += f"[{part}]" if part.isdigit() else f".{part}"
    return key


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The settings model inside an annotation (X, X | None, list[X]), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((found for arg in get_args(annotation) if (found := _model_in(arg))), None)


def _field_at(loc: tuple[Any, ...]) -> tuple[Any, type[BaseModel] | None]:
    """The field a location names (None at the top) and the model it holds, if it is a section."""
    model: type[BaseModel] | None = Settings
    field = None
    for part in loc:
        if model is None or isinstance(part, int):
            continue  # a list item or a map entry: the field stays the one that holds it
        match = next((info for name, info in model.model_fields.items() if part in (name, info.alias)), None)
        if match is None:
            return field, None
        field, model = match, _model_in(match.annotation)
    return field, model


def _valid_keys_at(loc: tuple[Any, ...]) -> list[str]:
    """The keys allowed where an unknown one was found: top level, or inside a section."""
    if len(loc) == 1:
        return list(TOP_LEVEL_KEYS)
    _, model = _field_at(loc[:-1])
    return [info.alias or name for name, info in model.model_fields.items()] if model else []


DURATION_KEYS = frozenset({"maxRunDuration", "queueTimeout", "healthTimeout"})
MAP_EXAMPLE = ', e.g. {"team": "agents"}'


def _example(field: Any) -> Any:
    if field is None or field.is_required():
        return None
    default = field.get_default(call_default_factory=True)
    return None if default in (None, {}, []) or isinstance(default, BaseModel) else default


def _fix(error: dict[str, Any], key: str) -> str:
    """Pydantic's bare 'Input should be ...' said as the rule and the way to meet it."""
    kind, ctx, loc = error["type"], error.get("ctx") or {}, tuple(error["loc"])
    field, section = _field_at(loc)
    example = _example(field)
    eg = f", e.g. {json.dumps(example)}" if example is not None else ""
    default = f" (the default is {json.dumps(example)})" if example is not None else ""
    if str(loc[-1]) in DURATION_KEYS and kind in ("string_type", "string_sub_type"):
        return "write durations like 4h, 90m, 2d or 1h30m"
    if section is not None and kind in ("model_type", "model_attributes_type", "dict_type"):
        first = next(iter(section.model_fields.values()))
        return (f"must be a map of settings, not {type(error.get('input')).__name__}; set each key "
                f"with pulumi config set --path '{key}.{first.alias}' VALUE")
    messages = {
        "greater_than_equal": f"at least {ctx.get('ge')}; set it to {ctx.get('ge')} or more{default}",
        "greater_than": f"must be more than {ctx.get('gt')}{eg}",
        "less_than_equal": f"at most {ctx.get('le')}; set it to {ctx.get('le')} or less{default}",
        "less_than": f"must be less than {ctx.get('lt')}{eg}",
        "int_parsing": f"must be a whole number{eg}",
        "int_type": f"must be a whole number{eg}",
        "int_from_float": f"must be a whole number, without a fraction{eg}",
        "int_parsing_size": f"must be a whole number of a sensible size{eg}",
        "float_parsing": f"must be a number{eg}",
        "float_type": f"must be a number{eg}",
        "finite_number": f"must be a finite number{eg}",
        "bool_parsing": f"must be true or false{default}",
        "bool_type": f"must be true or false{default}",
        "string_type": f"must be text (quote it in YAML){eg}",
        "literal_error": f"must be one of {ctx.get('expected')}{default}",
        "dict_type": (f"must be a map{eg or MAP_EXAMPLE}; set entries with "
                      f"pulumi config set --path '{key}.NAME' VALUE"),
        "list_type": (f"must be a list{eg}; set items with pulumi config set --path '{key}[0]' VALUE"),
        "too_short": f"needs at least {ctx.get('min_length')} item(s); see docs/settings.md, Changing the model",
        "missing": (f"is required; set it with pulumi config set --path '{key}' VALUE (see "
                    "docs/settings.md, Changing the model)"),
        "value_error": str(error["msg"]).removeprefix("Value error, "),
    }
    return messages.get(kind) or f"{error['msg']}; docs/settings.md lists the values it takes"


def _describe(error: dict[str, Any], secret_keys: frozenset[str] = frozenset()) -> str:
    loc = tuple(error["loc"])
    key = _config_key(loc)
    if error["type"] == "extra_forbidden":
        valid = _valid_keys_at(loc)
        # A dotted top-level key (vlm.maxModelLen) is matched by its section part.
        name = re.split(r"[.\[]", str(loc[-1]))[0] if len(loc) == 1 else str(loc[-1])
        near = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
        hint = f"did you mean {near[0]!r}?" if near else "valid keys: " + ", ".join(valid)
        return f"{key}: unknown key ({hint}); remove or rename it"
    if error["type"] == "missing":
        return f"{key}: {_fix(error, key)}"
    hidden = str(loc[0]) in secret_keys | SECRET_BY_NATURE
    shown = "[secret]" if hidden else json.dumps(error.get("input"), default=str)
    if len(shown) > 120:
        shown = shown[:100] + f"... ({len(shown)} characters)"
    return f"{key} = {shown}: {_fix(error, key)}"


# One line that narrows SSH to this machine's IPv4 address (the node has no IPv6) and drops the opt-in.
NARROW_SSH_COMMAND = (
    "pulumi config rm --path 'tpu-vllm:access.sshSourceRanges' && "
    "pulumi config set --path 'tpu-vllm:access.sshSourceRanges[0]' \"$(curl -4 -s ifconfig.me)/32\" && "
    "pulumi config rm --path 'tpu-vllm:access.allowSshFromAnywhere'"
)


def _access_checks(access: AccessSettings, warnings: list[str], needs_ssh: bool = True) -> list[str]:
    """Who can reach the node, judged by the addresses the ranges cover (policy/address_ranges.py)."""
    errors: list[str] = []
    serving = address_ranges.internet_exposure(access.serving_source_ranges)
    if serving and not access.allow_public_serving:
        errors.append(
            f"{NAMESPACE}:access.servingSourceRanges = {access.serving_source_ranges}: opens the model "
            f"endpoint to the internet ({serving.describe()}); use the SSH tunnel or narrower ranges, or set "
            f"{NAMESPACE}:access.allowPublicServing true if you mean it"
        )
    elif serving:
        warnings.append(
            f"access.allowPublicServing: the endpoint is open to the internet ({serving.describe()}); only the "
            "API key stands in front of it"
        )
    # Only the vm platform deploys over SSH; GKE has no node to log in to.
    if needs_ssh and not access.ssh_source_ranges:
        errors.append(
            f"{NAMESPACE}:access.sshSourceRanges = []: Pulumi starts the container over SSH from "
            f"this machine, so the firewall must let it in; set your address: {NARROW_SSH_COMMAND}"
        )
        return errors
    ssh = address_ranges.internet_exposure(access.ssh_source_ranges)
    if ssh and not access.allow_ssh_from_anywhere:
        errors.append(
            f"{NAMESPACE}:access.sshSourceRanges = {access.ssh_source_ranges}: opens SSH to the internet "
            f"({ssh.describe()}); use your address ({NARROW_SSH_COMMAND}), or set "
            f"{NAMESPACE}:access.allowSshFromAnywhere true if you mean it (key-only auth)"
        )
    elif ssh:
        # Logged by every `pulumi up` until the ranges are narrowed.
        warnings.append(
            f"access.allowSshFromAnywhere: SSH (key-only) is open to any address ({ssh.describe()}); "
            f"narrow it to this machine: {NARROW_SSH_COMMAND}"
        )
    return errors


def _cross_checks(settings: Settings, warnings: list[str]) -> list[str]:
    """Rules that read more than one key."""
    errors: list[str] = []
    tpu, vllm = settings.tpu, settings.vllm
    fields_set = tpu.model_fields_set

    if tpu.provisioning_model == "flex-start":
        seconds = tpu.run_seconds
        deploy_seconds = budget.COLD_BOOT_SECONDS + vllm.health_timeout_seconds
        if not MIN_RUN_SECONDS <= seconds <= MAX_RUN_SECONDS:
            errors.append(
                f"{NAMESPACE}:tpu.maxRunDuration = {tpu.max_run_duration!r}: flex-start runs "
                "between 1 minute and 7 days; set something like 4h"
            )
        elif seconds < deploy_seconds:
            errors.append(
                f"{NAMESPACE}:tpu.maxRunDuration = {tpu.max_run_duration!r}: GCP deletes the node "
                f"{seconds} s after it starts, before the deploy can be sure to finish: a cold "
                f"start takes ~{budget.COLD_BOOT_SECONDS} s (the log) and the deploy waits up to "
                f"vllm.healthTimeout ({vllm.health_timeout_seconds} s) for /health; set it to at "
                f"least {math.ceil(deploy_seconds / 60)}m (the default is 4h), or lower "
                "vllm.healthTimeout"
            )
        if tpu.zone in FLEX_START_REJECTING_ZONES:
            errors.append(
                f"{NAMESPACE}:tpu.zone = {tpu.zone!r}: the API rejects this there, whatever "
                "the quota: 'FLEX_START provisioning model is not supported for accelerator "
                f"type \"{tpu.accelerator_type}\"'; set it to us-west4-a"
            )
        elif tpu.zone not in FLEX_START_VERIFIED_ZONES:
            warnings.append(
                f"tpu.zone={tpu.zone}: flex-start {tpu.accelerator_type} is only verified in "
                "us-west4-a; other zones may reject it at the API"
            )
    else:
        if "max_run_duration" in fields_set:
            errors.append(
                f"{NAMESPACE}:tpu.maxRunDuration = {tpu.max_run_duration!r}: only flex-start "
                f"accepts a run duration, not {tpu.provisioning_model}; remove the key or use "
                "flex-start"
            )
        weekend = budget.forgotten_weekend_usd(tpu.provisioning_model)
        warnings.append(
            f"tpu.provisioningModel={tpu.provisioning_model}: nothing stops its billing until "
            f"you run pulumi destroy; a forgotten weekend ({budget.FORGOTTEN_WEEKEND_HOURS} h) "
            f"costs ${weekend:.0f}. flex-start costs 3.8% more than spot and stops by itself"
        )

    if tpu.subnetwork and (region := re.search(r"regions/([^/]+)/", tpu.subnetwork)) \
            and region.group(1) != tpu.region:
        errors.append(
            f"{NAMESPACE}:tpu.subnetwork = {tpu.subnetwork!r}: the subnetwork is in "
            f"{region.group(1)} but the node is in {tpu.zone} ({tpu.region}); use a subnetwork of "
            f"{tpu.region}"
        )
    errors += _model_checks(settings, warnings)
    errors += _memory_checks(settings, warnings)

    if settings.front.upstream_port in (vllm.port, 22):
        errors.append(
            f"{NAMESPACE}:front.upstreamPort = {settings.front.upstream_port}: vLLM's loopback port must differ "
            f"from the front's serving port (vllm.port = {vllm.port}) and from SSH (22); use another free port, "
            f"e.g. {8002 if vllm.port == 8001 else 8001}"
        )

    access = settings.access
    errors += _access_checks(access, warnings, needs_ssh=settings.platform == "vm")
    if (access.ssh_public_key is None) != (settings.ssh_private_key is None):
        errors.append(
            f"{NAMESPACE}:access.sshPublicKey / {NAMESPACE}:sshPrivateKey: set both (the private "
            "key with --secret) or neither (the stack generates an ED25519 key)"
        )
    if vllm.weights_on_disk and settings.cache.size_gb < 20:
        errors.append(
            f"{NAMESPACE}:cache.sizeGb = {settings.cache.size_gb}: weightsOnDisk needs room "
            "for the 9.54 GiB checkpoint and the compile cache; use at least 20"
        )
    errors += _gke_cross_checks(settings, warnings)
    return errors


def _gke_cross_checks(settings: Settings, warnings: list[str]) -> list[str]:
    """Rules of the gke platform that read more than one key."""
    gke = settings.gke
    if settings.platform != "gke":
        if "gke" in settings.model_fields_set:
            warnings.append("gke: this section is read only with tpu-vllm:platform: gke; the vm platform ignores it")
        return []
    errors: list[str] = []
    key = f"{NAMESPACE}:gke"
    if gke.max_replicas < gke.min_replicas:
        errors.append(
            f"{key}.maxReplicas = {gke.max_replicas}: below gke.minReplicas ({gke.min_replicas}); the HPA "
            f"needs min <= max. Raise maxReplicas to at least {gke.min_replicas} or lower minReplicas"
        )
    if gke.max_replicas > gke.max_tpu_chips:
        errors.append(
            f"{key}.maxReplicas = {gke.max_replicas}: each replica is one chip, over the gke.maxTpuChips cap "
            f"({gke.max_tpu_chips}); lower maxReplicas or raise maxTpuChips if you mean to pay for "
            f"{gke.max_replicas} chips"
        )
    if gke.is_regional and not gke.node_locations:
        errors.append(
            f"{key}.nodeLocations = []: a regional cluster ({gke.location}) needs the zones its TPU nodes may "
            f"use; list v5e zones, e.g. pulumi config set --path 'tpu-vllm:gke.nodeLocations[0]' {gke.location}-a"
        )
    outside = [zone for zone in gke.node_locations if zone.rsplit("-", 1)[0] != gke.region]
    if outside:
        errors.append(
            f"{key}.nodeLocations = {json.dumps(gke.node_locations)}: {', '.join(outside)} not in the cluster's "
            f"region {gke.region} (gke.location = {gke.location}); a node pool only spans zones of its cluster's "
            f"region. Use zones like {gke.region}-a, or move gke.location"
        )
    model = settings.tpu.provisioning_model
    if model != "flex-start" and not gke.allow_unbounded_billing:
        errors.append(
            f"{NAMESPACE}:tpu.provisioningModel = {model!r}: on gke the pool can hold {gke.max_replicas} chips "
            f"with nothing to stop their billing (${budget.cost_per_hour_usd(model, gke.max_replicas):.2f}/h); use "
            "flex-start, or set gke.allowUnboundedBilling true if you mean it"
        )
    errors += _gke_class_checks(settings, warnings)
    if model == "flex-start":
        unverified = [zone for zone in gke.tpu_zones if zone not in FLEX_START_VERIFIED_ZONES]
        if unverified:
            warnings.append(
                "gke.nodeLocations: flex-start v5e is only verified in "
                f"{', '.join(sorted(FLEX_START_VERIFIED_ZONES))}; {', '.join(unverified)} may have no v5e "
                "capacity or no flex-start for it"
            )
    errors += _gke_port_checks(settings)
    if "container_access" in settings.vllm.model_fields_set:
        warnings.append(
            f"vllm.containerAccess = {settings.vllm.container_access!r} is read only by the vm platform (docker "
            "run); on gke the chip reaches the pod through its google.com/tpu resource request (GKE's TPU device "
            "plugin, no privileged container), so the key changes nothing there; remove it"
        )
    access = settings.access
    if gke.allow_external_load_balancer and not access.serving_source_ranges:
        errors.append(
            f"{key}.allowExternalLoadBalancer = true: an external load balancer with no "
            "access.servingSourceRanges would answer the whole internet; list the ranges that may call it "
            "(pulumi config set --path 'tpu-vllm:access.servingSourceRanges[0]' 203.0.113.0/24)"
        )
    kv = settings.kv_budget()
    if kv is not None and kv.kv_tokens > 0:
        planned = settings.load.clients * settings.load.context_tokens
        if planned > kv.load_limit_tokens * gke.max_replicas:
            warnings.append(
                f"load: {planned:,} KV tokens planned, over ~78% of the KV pool of {gke.max_replicas} replicas "
                f"({kv.load_limit_tokens * gke.max_replicas:,}); raise gke.maxReplicas or plan less load"
            )
    return errors


def _gke_class_checks(settings: Settings, warnings: list[str]) -> list[str]:
    """The ComputeClass's priorities: fallbacks after the primary model, and a recycling lead time that brings a
    warm replacement before each run ends without replacing a node that has barely started."""
    gke, model = settings.gke, settings.tpu.provisioning_model
    errors: list[str] = []
    if model in gke.fallback:
        errors.append(
            f"{NAMESPACE}:gke.fallback = {json.dumps(gke.fallback)}: {model!r} is already the first priority "
            f"(tpu.provisioningModel); list only what to try after it, e.g. "
            f"{json.dumps([m for m in GKE_FALLBACK_MODELS if m != model])}")
    if model != "flex-start":
        if "recycling_lead_time" in gke.model_fields_set:
            warnings.append(
                f"gke.recyclingLeadTime = {gke.recycling_lead_time!r} is read only with flex-start (its nodes end "
                f"after tpu.maxRunDuration); {model} nodes have no run end, so nothing is recycled")
        return errors
    lead, run = gke.recycling_lead_seconds, settings.tpu.run_seconds
    least = budget.WARM_BOOT_SECONDS + GKE_NODE_UP_ALLOWANCE_SECONDS
    if lead < least:
        errors.append(
            f"{NAMESPACE}:gke.recyclingLeadTime = {gke.recycling_lead_time!r} ({lead} s): too short for the "
            f"replacement to be up and warm before the run ends (a node, ~{GKE_NODE_UP_ALLOWANCE_SECONDS} s, "
            f"plus the log's warm start, {budget.WARM_BOOT_SECONDS} s: {least} s); use at least "
            f"{math.ceil(least / 60)}m, e.g. 1h (Google's v5e class)")
    if lead * 2 > run:
        errors.append(
            f"{NAMESPACE}:gke.recyclingLeadTime = {gke.recycling_lead_time!r} ({lead} s): over half of "
            f"tpu.maxRunDuration ({settings.tpu.max_run_duration}, {run} s), so two chips would bill for most of "
            f"every run; use at most {run // 2 // 60}m, or raise tpu.maxRunDuration (e.g. 1d)")
    return errors


def _gke_port_checks(settings: Settings) -> list[str]:
    """A pod's containers share one network namespace: vLLM and the front must not take the metrics door's port."""
    errors = []
    ports = {"vllm.port": settings.vllm.port, "front.upstreamPort": settings.front.upstream_port}
    for key, port in ports.items():
        if port == GKE_METRICS_PORT:
            taken = set(ports.values())
            free = next(p for p in (8000, 8001, 8002) if p not in taken)
            errors.append(
                f"{NAMESPACE}:{key} = {port}: on gke the pod's metrics door (GET /metrics for Managed "
                f"Prometheus) listens on {GKE_METRICS_PORT} in the same network namespace, so two containers "
                f"would bind it and one would crash-loop; use another port, e.g. {free}"
            )
    return errors


def _model_checks(settings: Settings, warnings: list[str]) -> list[str]:
    """Parsers and multimodal limits against what vLLM registers and what the model family reads."""
    errors: list[str] = []
    vllm, family = settings.vllm, settings.family
    registered = ", ".join(sorted(VLLM_TOOL_CALL_PARSERS))
    if not vllm.enable_auto_tool_choice:
        errors.append(
            f"{NAMESPACE}:vllm.enableAutoToolChoice = false: the serving step's smoke test asks "
            "for a tool call (startup/serve.sh), so the deploy would fail after the whole cold "
            "start; this stack serves tool-calling agents: set it true with the model's "
            "toolCallParser"
        )
    elif not vllm.tool_call_parser:
        errors.append(
            f"{NAMESPACE}:vllm.toolCallParser = null: enableAutoToolChoice needs a parser (vLLM "
            "exits: '--enable-auto-tool-choice requires --tool-call-parser'), and no model family "
            f"is known for {vllm.model}; set the one its chat template writes, one of {registered}"
        )
    for key, parser, own in (("toolCallParser", vllm.tool_call_parser, family and family.tool_call_parser),
                             ("reasoningParser", vllm.reasoning_parser, family and family.reasoning_parser)):
        owner = FAMILY_PARSERS.get(parser) if parser else None
        if owner is not None and owner is not family:
            errors.append(
                f"{NAMESPACE}:vllm.{key} = {parser!r}: it reads only {owner.name} output, and "
                f"{vllm.model} is not a {owner.name} model (its id does not say gemma-4); set the "
                "parser for your model's family, or remove the key to follow the model (a Gemma 4 "
                "checkpoint under another name: put gemma-4 in its name)"
            )
        elif family is not None and parser and own and parser != own:
            errors.append(
                f"{NAMESPACE}:vllm.{key} = {parser!r}: {family.name} writes its own format, which "
                f"only the {own} parser reads; set it to {own} or remove the key"
            )
    if family is not None:
        unsupported = sorted(key for key, count in vllm.limit_mm_per_prompt.items()
                             if count > 0 and key not in _family_modalities(vllm.model, family))
        if unsupported:
            warnings.append(
                f"vllm.limitMmPerPrompt: {vllm.model} takes no {', '.join(unsupported)} (vLLM "
                f"ignores the limit, and requests with it fail); {family.name} here takes "
                f"{', '.join(sorted(_family_modalities(vllm.model, family)))}"
            )
    return errors


def _family_modalities(model: str, family: ModelFamily) -> frozenset[str]:
    if family is GEMMA_4 and not GEMMA_4_WITH_AUDIO.search(model):
        return family.modalities - {"audio"}
    return family.modalities


def _memory_checks(settings: Settings, warnings: list[str]) -> list[str]:
    """KV pool, context and planned load against the model's geometry, or say what is unchecked."""
    errors: list[str] = []
    vllm, geometry = settings.vllm, settings.geometry
    if vllm.model_geometry is not None and budget.geometry_for(vllm.model) is not None:
        warnings.append(
            f"vllm.modelGeometry replaces the log's measured geometry of {vllm.model}; remove it "
            "to use the measured one"
        )
    if geometry is None:
        warnings.append(
            f"vllm.model={vllm.model}: no measured geometry, so these go unchecked: whether the "
            "weights fit the chip, the KV pool and its token count (kvTokens), the planned load "
            "against it, maxModelLen against the model's context, kvCacheMemoryBytes against "
            "what is left, and the multimodal batch floor. Supply it as vllm.modelGeometry "
            "(weightsGib, kvLayers, maxContextTokens; see docs/settings.md, Changing the model)"
        )
        return errors

    floor = geometry.max_tokens_per_mm_item
    if (vllm.disable_chunked_mm_input and vllm.multimodal_enabled and floor
            and vllm.max_num_batched_tokens < floor):
        errors.append(
            f"{NAMESPACE}:vllm.maxNumBatchedTokens = {vllm.max_num_batched_tokens}: the server "
            "refuses to start: 'ValueError: Chunked MM input disabled but "
            f"max_tokens_per_mm_item ({floor}) is larger than max_num_batched_tokens "
            f"({vllm.max_num_batched_tokens}). Please increase max_num_batched_tokens.' Use "
            f"{budget.next_power_of_two(floor)}, or set limitMmPerPrompt to zeros for text only"
        )
    context = geometry.max_context_tokens
    if context and vllm.max_model_len > context:
        errors.append(
            f"{NAMESPACE}:vllm.maxModelLen = {vllm.max_model_len}: longer than {vllm.model}'s "
            f"context ({context} tokens, max_position_embeddings in its config.json); the server "
            f"refuses to start ('User-specified max_model_len ({vllm.max_model_len}) is greater "
            f"than the derived max_model_len'); set it to {context} or less (the log's is 32768)"
        )

    pinned = vllm.kv_cache_memory_bytes
    if pinned is not None:
        measured = budget.kv_pool_bytes(geometry, budget.HIGHEST_BOOTING_GPU_MEMORY_UTILIZATION)
        failing = budget.kv_pool_bytes(geometry, budget.FAILING_GPU_MEMORY_UTILIZATION)
        if pinned >= failing:
            errors.append(
                f"{NAMESPACE}:vllm.kvCacheMemoryBytes = {pinned}: with "
                f"{budget.gib(geometry.weights_bytes):.2f} GiB of weights that leaves less HBM "
                "for compiled XLA programs than the 0.95 run, whose "
                f"{budget.gib(failing):.2f} GiB pool died at XLA program allocation ~691 s in "
                f"(RuntimeProgramAllocationFailure); use {max(measured, 0)} or less (the pool "
                "gpuMemoryUtilization 0.92 leaves)"
            )
        elif pinned > measured:
            warnings.append(
                f"vllm.kvCacheMemoryBytes={pinned} is larger than the measured-good {measured} "
                "(0.92's pool) and untested: the margin for compiled programs shrinks toward the "
                "0.95 failure, and finding out costs a ~11 min compile"
            )

    kv = settings.kv_budget()
    if pinned is None and kv.kv_tokens <= 0:
        errors.append(
            f"{NAMESPACE}:vllm.gpuMemoryUtilization = {vllm.gpu_memory_utilization}: the "
            f"cap ({budget.gib(kv.hbm_cap_bytes):.2f} GiB) leaves no room for KV after "
            f"{budget.gib(geometry.weights_bytes):.2f} GiB of weights; use 0.92"
        )
    planned = settings.load.clients * settings.load.context_tokens
    if kv.kv_tokens > 0 and planned > kv.load_limit_tokens:
        warnings.append(
            f"load: {settings.load.clients} clients x {settings.load.context_tokens} tokens "
            f"= {planned:,} KV tokens, over ~78% of the {kv.kv_tokens:,}-token pool "
            f"({kv.load_limit_tokens:,}); past it you pay in tail latency for throughput "
            "you don't get (the log's 8K x 64 cell: TTFT 11.7 s). Keep clients x context "
            "under that"
        )
    if settings.load.context_tokens > vllm.max_model_len:
        errors.append(
            f"{NAMESPACE}:load.contextTokens = {settings.load.context_tokens}: longer than "
            f"vllm.maxModelLen ({vllm.max_model_len}); lower it or raise maxModelLen"
        )
    return errors


def _validate_without(document: dict[str, Any], locs: list[tuple[Any, ...]]) -> Settings | None:
    pruned = json.loads(json.dumps(document, default=str))
    for loc in locs:
        parent = pruned
        for part in loc[:-1]:
            parent = parent.get(part) if isinstance(parent, dict) else None
        if isinstance(parent, dict):
            parent.pop(loc[-1], None)
    try:
        return Settings.model_validate(pruned, context={"warnings": []})
    except ValidationError:
        return None


def _without_flat_keys(raw: dict[str, Any], secret_keys: frozenset[str]) -> tuple[dict[str, Any], list[str]]:
    """`pulumi config set tpu-vllm:vllm.maxModelLen 16384` (no --path) makes a key literally named
    `vllm.maxModelLen`, which the stack never reads; say so with the --path command instead."""
    kept: dict[str, Any] = {}
    problems = []
    for key, value in raw.items():
        section = re.split(r"[.\[]", key, maxsplit=1)[0]
        if key != section and TOP_LEVEL_KEYS.get(section) is not None:
            hidden = section in SECRET_BY_NATURE or key in secret_keys or section in secret_keys
            shown = "[secret]" if hidden else (
                value if isinstance(value, str) else json.dumps(value))
            problems.append(
                f"{NAMESPACE}:{key} = {json.dumps(shown)}: a flat key (pulumi config set without "
                f"--path), which the stack never reads: its settings live inside the {section} "
                f"map. Move it: pulumi config rm '{NAMESPACE}:{key}' && pulumi config set --path "
                f"'{NAMESPACE}:{key}' {shown if shown == '[secret]' else _shell_word(str(shown))}"
            )
        else:
            kept[key] = value
    return kept, problems


def _shell_word(text: str) -> str:
    return text if re.fullmatch(r"[\w./:@+-]+", text) else "'" + text.replace("'", "'\\''") + "'"


def _secrecy_problems(raw: dict[str, Any], secret_keys: frozenset[str]) -> list[str]:
    """A value set with --secret must stay one; a token or key set without it sits in plaintext in the file."""
    problems = []
    for key in sorted(secret_keys & raw.keys()):
        if TOP_LEVEL_KEYS.get(key) is not None:
            problems.append(
                f"{NAMESPACE}:{key} is set with --secret (or holds a secret value), but the stack writes its "
                "values into resources, commands and outputs in plaintext; set them again without --secret "
                f"(`pulumi config rm {NAMESPACE}:{key}`, then `pulumi config set --path {NAMESPACE}:{key}.NAME VALUE`)"
            )
    for key in sorted(SECRET_BY_NATURE & raw.keys() - secret_keys):
        problems.append(
            f"{NAMESPACE}:{key} is stored in plaintext in Pulumi.<stack>.yaml; set it again with "
            f"`pulumi config set --secret {NAMESPACE}:{key}` (paste it at the prompt), and replace it if that "
            "file was shared"
        )
    return problems


def load(raw: dict[str, Any], project: str, stack: str, explicit_hf_secret: bool = False,
         secret_keys: frozenset[str] | None = None) -> Loaded:
    """Validate raw config values (already JSON-decoded). Raises SettingsError with every problem.

    secret_keys: the top-level keys set with --secret (None when the caller cannot know, e.g. pure rule tests).
    """
    context: dict[str, Any] = {"warnings": []}
    problems: list[str] = []
    if secret_keys is not None:
        problems += _secrecy_problems(raw, secret_keys)
        if any(TOP_LEVEL_KEYS.get(key) is not None for key in secret_keys & raw.keys()):
            # Any further message could quote a value of the secret section: stop here.
            raise SettingsError(problems)
    secret_keys = secret_keys or frozenset()
    if raw.get("hfToken") is not None and explicit_hf_secret:
        problems.append(
            f"{NAMESPACE}:hfToken and {NAMESPACE}:hfTokenSecret are both set: either the stack "
            "keeps the token (hfToken) or it uses your secret (hfTokenSecret); remove one"
        )
    raw, flat_problems = _without_flat_keys(raw, secret_keys)
    problems += flat_problems
    document = {"project": project, "stack": stack, **raw}
    failed_keys: list[str] = []
    try:
        settings = Settings.model_validate(document, context=context)
    except ValidationError as error:
        problems += [_describe(item, secret_keys) for item in error.errors()]
        failed_keys = [_config_key(tuple(item["loc"])) for item in error.errors()]
        # Drop the failing keys and check the rest too, so every problem shows in one run.
        settings = _validate_without(document, [item["loc"] for item in error.errors()])
    warnings = list(context["warnings"])
    if settings is not None:
        # A key already reported stands at its default in the pruned copy; say nothing more of it.
        problems += [p for p in _cross_checks(settings, warnings)
                     if not any(p.startswith(f"{key} ") or p.startswith(f"{key}:") or f" / {key}:" in p
                                for key in failed_keys)]
    if problems:
        raise SettingsError(problems)
    # One warning once, however many validators saw it.
    return Loaded(settings=settings, warnings=list(dict.fromkeys(warnings)), secret_keys=secret_keys)


def raw_from_pulumi_config() -> tuple[dict[str, Any], bool]:
    """Every `tpu-vllm:` key set on the stack, decoded; unknown keys included so typos are caught."""
    from pulumi.runtime import config as runtime_config

    keys = set(runtime_config.CONFIG.get()) | set(runtime_config.get_config_env())
    raw: dict[str, Any] = {}
    for full_key in sorted(keys):
        namespace, _, key = full_key.partition(":")
        if namespace != NAMESPACE:
            continue
        value = runtime_config.get_config(full_key)
        if isinstance(value, str) and key in TOP_LEVEL_KEYS and TOP_LEVEL_KEYS[key] is not None:
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                pass  # reported by the model as not an object
        raw[key] = value
    return raw, "hfTokenSecret" in raw


def from_pulumi_config() -> Loaded:
    """Load and validate the running stack's config; raises SettingsError."""
    import pulumi

    project = pulumi.Config("gcp").get("project")
    if not project:
        raise SettingsError([
            "gcp:project is not set: run `pulumi config set gcp:project YOUR_PROJECT` "
            "(the project that pays for the TPU)"
        ])
    raw, explicit_hf_secret = raw_from_pulumi_config()
    return load(raw, project=project, stack=pulumi.get_stack(), explicit_hf_secret=explicit_hf_secret,
                secret_keys=secret_keys_from_pulumi_config())


def secret_keys_from_pulumi_config() -> frozenset[str]:
    """The `tpu-vllm:` keys the stack holds as secrets, as Pulumi itself tells them apart."""
    from pulumi.runtime import config as runtime_config

    keys = set(runtime_config.CONFIG.get()) | set(runtime_config.get_config_env())
    secret = {key for key in keys if runtime_config.is_config_secret(key)}
    secret |= set(runtime_config.get_config_secret_keys_env())
    return frozenset(key.partition(":")[2] for key in secret if key.startswith(f"{NAMESPACE}:"))
