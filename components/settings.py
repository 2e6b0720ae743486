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
import posixpath
import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic.alias_generators import to_camel

from components import budget, front

NAMESPACE = "tpu-vllm"

# The log: flex-start v5litepod-1 is accepted here and was run to ACTIVE.
FLEX_START_VERIFIED_ZONES = frozenset({"us-west4-a"})
# The log: these reject it at the API whatever the quota.
FLEX_START_REJECTING_ZONES = frozenset({"europe-west4-a", "europe-west4-b"})

MIN_RUN_SECONDS = 60
MAX_RUN_SECONDS = 7 * 24 * 3600

# vLLM's --kv-cache-dtype choices on the log's build, by what they do on this stack.
KV_DTYPES_FINE = frozenset({"auto", "bfloat16"})
KV_DTYPES_FP8_NO_GAIN = frozenset({"fp8", "fp8_e4m3", "fp8_e5m2"})
KV_DTYPES_KILL_AT_BOOT = frozenset({"int8_per_token_head", "nvfp4", "fp8_inc", "fp8_ds_mla"})
KV_DTYPES_UNTESTED = frozenset({"float16", "fp8_per_token_head", "int4_per_token_head"})
KV_DTYPES_ACCEPTED = (
    KV_DTYPES_FINE | KV_DTYPES_FP8_NO_GAIN | KV_DTYPES_KILL_AT_BOOT | KV_DTYPES_UNTESTED
)

DEFAULT_MODEL = "google/gemma-4-E2B-it"

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
    max_num_seqs: int | None = None
    """Leave unset (256); the log's cap at 64 made things worse."""
    kv_cache_memory_bytes: int | None = None
    """Pins the KV pool in bytes (--kv-cache-memory); the log's measured-good value is 5923602432."""
    port: int = Field(8000, ge=1, le=65535)
    weights_on_disk: bool = False
    """Keep HF_HOME on the cache disk instead of /dev/shm (slower to load, saves the download)."""
    health_timeout: str = "30m"
    """How long the deploy waits for /health; a cold start is ~14 min."""
    allowed_media_domains: list[str] = Field(default_factory=list)
    """Hosts vLLM may fetch image/audio URLs from (exact names); none by default: inline data only."""
    container_access: Literal["privileged", "devices"] = "privileged"
    """How the container reaches the TPU: --privileged (measured by the log) or only the device nodes."""

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
        return values

    @property
    def health_timeout_seconds(self) -> int:
        return parse_duration(self.health_timeout)

    @property
    def multimodal_enabled(self) -> bool:
        return any(count > 0 for count in self.limit_mm_per_prompt.values())


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


def _check_cidrs(values: list[str]) -> list[str]:
    for value in values:
        try:
            ipaddress.ip_network(value, strict=False)
        except ValueError:
            raise ValueError(f"{value!r} is not a CIDR range; write it like 203.0.113.7/32") from None
    return values


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
    def _cidrs(cls, values: list[str]) -> list[str]:
        return _check_cidrs(values)

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


class FrontSettings(_Section):
    """The key-checking front on the serving port (config key `tpu-vllm:front`); vLLM itself listens on loopback."""

    image: str = front.DEFAULT_IMAGE
    """The proxy's container: nginx's official image."""
    upstream_port: int = Field(8001, ge=1, le=65535)
    """vLLM's port on 127.0.0.1, behind the front; vllm.port is the front's."""


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
    "hfToken": None,
    "hfTokenSecret": None,
    "sshPrivateKey": None,
}


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
    hf_token: SecretStr | None = None
    """If set (as a Pulumi secret), the stack keeps it in its own Secret Manager secret."""
    hf_token_secret: str = "hf-token"
    """Otherwise, the id of a secret you created with gcloud (the log's way)."""
    ssh_private_key: SecretStr | None = None

    @property
    def node_id(self) -> str:
        return self.tpu.node_id or f"tpu-vllm-{self.stack}".lower()[:63]

    @property
    def resource_prefix(self) -> str:
        return f"tpu-vllm-{self.stack}".lower()[:40]

    @property
    def stack_manages_hf_token(self) -> bool:
        return self.hf_token is not None

    @property
    def geometry(self) -> budget.ModelGeometry | None:
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


def _config_key(loc: tuple[Any, ...]) -> str:
    """('vllm', 'gpuMemoryUtilization') -> 'tpu-vllm:vllm.gpuMemoryUtilization'."""
    head, *rest = [str(part) for part in loc] or ["?"]
    key = f"{NAMESPACE}:{head}"
    for part in rest:
        key += f"[{part}]" if part.isdigit() else f".{part}"
    return key


def _valid_keys_at(loc: tuple[Any, ...]) -> list[str]:
    """The keys allowed where an unknown one was found: top level, or inside one section."""
    if len(loc) == 1:
        return list(TOP_LEVEL_KEYS)
    section = TOP_LEVEL_KEYS.get(str(loc[0])) if len(loc) == 2 else None
    return [field.alias or name for name, field in section.model_fields.items()] if section else []


def _describe(error: dict[str, Any]) -> str:
    loc = tuple(error["loc"])
    key = _config_key(loc)
    if error["type"] == "extra_forbidden":
        valid = _valid_keys_at(loc)
        near = difflib.get_close_matches(str(loc[-1]), valid, n=1, cutoff=0.6)
        hint = f"did you mean {near[0]!r}?" if near else "valid keys: " + ", ".join(valid)
        return f"{key}: unknown key ({hint}); remove or rename it"
    value = error.get("input")
    message = str(error["msg"]).removeprefix("Value error, ")
    shown = "[secret]" if "token" in key.lower() or "private" in key.lower() else json.dumps(value, default=str)
    return f"{key} = {shown}: {message}"


def _cross_checks(settings: Settings, warnings: list[str]) -> list[str]:
    """Rules that read more than one key."""
    errors: list[str] = []
    tpu, vllm = settings.tpu, settings.vllm
    fields_set = tpu.model_fields_set

    if tpu.provisioning_model == "flex-start":
        seconds = tpu.run_seconds
        if not MIN_RUN_SECONDS <= seconds <= MAX_RUN_SECONDS:
            errors.append(
                f"{NAMESPACE}:tpu.maxRunDuration = {tpu.max_run_duration!r}: flex-start runs "
                "between 1 minute and 7 days; set something like 4h"
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

    geometry = settings.geometry
    floor = geometry.max_tokens_per_mm_item if geometry else None
    if (vllm.disable_chunked_mm_input and vllm.multimodal_enabled and floor
            and vllm.max_num_batched_tokens < floor):
        errors.append(
            f"{NAMESPACE}:vllm.maxNumBatchedTokens = {vllm.max_num_batched_tokens}: the server "
            "refuses to start: 'ValueError: Chunked MM input disabled but "
            f"max_tokens_per_mm_item ({floor}) is larger than max_num_batched_tokens "
            f"({vllm.max_num_batched_tokens}). Please increase max_num_batched_tokens.' Use "
            f"{budget.next_power_of_two(floor)}, or set limitMmPerPrompt to zeros for text only"
        )
    if vllm.enable_auto_tool_choice and not vllm.tool_call_parser:
        errors.append(
            f"{NAMESPACE}:vllm.toolCallParser = null: enableAutoToolChoice needs a parser; "
            "set it to gemma4"
        )

    kv = settings.kv_budget()
    if kv is None:
        warnings.append(
            f"vllm.model={vllm.model}: no measured geometry, so KV tokens and load checks are unknown"
        )
    else:
        if kv.kv_tokens <= 0:
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

    if settings.front.upstream_port in (vllm.port, 22):
        errors.append(
            f"{NAMESPACE}:front.upstreamPort = {settings.front.upstream_port}: vLLM's loopback port must differ "
            f"from the front's serving port (vllm.port = {vllm.port}) and from SSH (22); keep the default 8001"
        )

    access = settings.access
    if "0.0.0.0/0" in access.serving_source_ranges and not access.allow_public_serving:
        errors.append(
            f"{NAMESPACE}:access.servingSourceRanges = {access.serving_source_ranges}: opens "
            "the model endpoint to the whole internet; use the SSH tunnel or your own "
            "ranges, or set access.allowPublicServing true if you mean it"
        )
    elif "0.0.0.0/0" in access.serving_source_ranges:
        warnings.append(
            "access.allowPublicServing: the endpoint is open to the internet; only the API key stands in front of it"
        )
    narrow_ssh = ("pulumi config set --path 'tpu-vllm:access.sshSourceRanges[0]' "
                  "\"$(curl -s ifconfig.me)/32\"")
    if not access.ssh_source_ranges:
        errors.append(
            f"{NAMESPACE}:access.sshSourceRanges = []: Pulumi starts the container over SSH from "
            f"this machine, so the firewall must let it in; set your address: {narrow_ssh}"
        )
    elif "0.0.0.0/0" in access.ssh_source_ranges and not access.allow_ssh_from_anywhere:
        errors.append(
            f"{NAMESPACE}:access.sshSourceRanges = {access.ssh_source_ranges}: opens SSH to the whole "
            f"internet; use your address ({narrow_ssh}), or set access.allowSshFromAnywhere true "
            "if you mean it (key-only auth)"
        )
    elif "0.0.0.0/0" in access.ssh_source_ranges:
        warnings.append(
            f"access.allowSshFromAnywhere: SSH (key-only) is open to any address; narrow it with {narrow_ssh}"
        )
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


def load(raw: dict[str, Any], project: str, stack: str, explicit_hf_secret: bool = False) -> Loaded:
    """Validate raw config values (already JSON-decoded). Raises SettingsError with every problem."""
    context: dict[str, Any] = {"warnings": []}
    problems: list[str] = []
    if raw.get("hfToken") is not None and explicit_hf_secret:
        problems.append(
            f"{NAMESPACE}:hfToken and {NAMESPACE}:hfTokenSecret are both set: either the stack "
            "keeps the token (hfToken) or it uses your secret (hfTokenSecret); remove one"
        )
    document = {"project": project, "stack": stack, **raw}
    failed_keys: list[str] = []
    try:
        settings = Settings.model_validate(document, context=context)
    except ValidationError as error:
        problems += [_describe(item) for item in error.errors()]
        failed_keys = [_config_key(tuple(item["loc"])) for item in error.errors()]
        # Drop the failing keys and check the rest too, so every problem shows in one run.
        settings = _validate_without(document, [item["loc"] for item in error.errors()])
    warnings = list(context["warnings"])
    if settings is not None:
        # A key already reported stands at its default in the pruned copy; say nothing more of it.
        problems += [p for p in _cross_checks(settings, warnings)
                     if not any(p.startswith(f"{key} ") for key in failed_keys)]
    if problems:
        raise SettingsError(problems)
    # One warning once, however many validators saw it.
    return Loaded(settings=settings, warnings=list(dict.fromkeys(warnings)))


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
    return load(raw, project=project, stack=pulumi.get_stack(), explicit_hf_secret=explicit_hf_secret)
