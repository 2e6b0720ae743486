"""The measured facts the settings are checked against, each with its source: zones, vLLM's
registries, KV dtypes, model families, system paths and GKE's limits."""

from __future__ import annotations

import re
from dataclasses import dataclass

from components.catalog import models as catalog_models
from components.catalog import shapes as catalog_shapes

NAMESPACE = "tpu-vllm"

# Where every measured default comes from: the build log, by its title (the copy the project read names no place of
# publication). Its facts live here and in components/basis/, each beside its number; its text is not kept.
BUILD_LOG_TITLE = "Self-hosting a lite agent backend on one TPU: Gemma 4 E2B + vLLM on a v5e-1"

# Where flex-start v5litepod-1 was run to ACTIVE, where the API refused it, and where v5e exists at all: the
# catalog's (components/catalog/shapes.py, each observation with its source and date). Google adds zones: one
# missing there warns (issue 46), so add it with its source.
FLEX_START_VERIFIED_ZONES = catalog_shapes.SHAPES["v5litepod-1"].flex_start_accepted_zones
FLEX_START_REJECTING_ZONES = catalog_shapes.SHAPES["v5litepod-1"].flex_start_refused_zones
V5E_ZONES = catalog_shapes.V5E.zones
assert FLEX_START_VERIFIED_ZONES | FLEX_START_REJECTING_ZONES <= V5E_ZONES

# GCP allows 64 labels per resource; the stack sets two itself.
MAX_USER_LABELS = 62

MIN_RUN_SECONDS = 60
MAX_RUN_SECONDS = 7 * 24 * 3600
# Flex-start's longest run, by node API, with where each limit is read: the Cloud TPU API's ("for up to 7 days",
# cloud.google.com/tpu/docs/request-using-flex-start) and Compute Engine's Flex-start VMs ("About Flex-start VMs":
# a VM runs at most seven days). Equal today; kept apart because each API sets its own.
MAX_RUN_SECONDS_BY_API = {"queued-resource": MAX_RUN_SECONDS, "compute": 7 * 24 * 3600}
MAX_RUN_SOURCE_BY_API = {
    "queued-resource": "the Cloud TPU API's flex-start ('for up to 7 days', tpu/docs/request-using-flex-start)",
    "compute": "Compute Engine's Flex-start VMs (the run 'must be between 10 minutes and seven days', "
               "'About Flex-start VMs')",
}
# Flex-start's shortest run, by node API: Compute Engine's own limit (the same page), the stack's minute elsewhere.
MIN_RUN_SECONDS_BY_API = {"queued-resource": MIN_RUN_SECONDS, "compute": 10 * 60}

# sshd on the node; the container runs with --net=host, so vLLM shares the host's ports.
SSH_PORT = 22
# Linux lets only a privileged process bind a port below this (net.ipv4.ip_unprivileged_port_start, default 1024:
# linux Documentation/networking/ip-sysctl.rst). On vm the front runs as a user of its own, without capabilities.
UNPRIVILEGED_PORT_START = 1024

# What the image's vLLM registers (vllm-tpu 0.32.0, the build requirements-vllm.txt pins and the catalog cites;
# 0.33.0's beam, muse, musespark1x and step5 are not in it): the names in
# _TOOL_PARSERS_TO_REGISTER (vllm/tool_parsers/__init__.py, ToolParserManager.register_lazy_module) and
# _REASONING_PARSERS_TO_REGISTER (vllm/reasoning/__init__.py, ReasoningParserManager).
# tests/test_vllm_parser.py holds them equal to the installed vLLM's registries, so they cannot drift.
# Anything else makes the server exit at start: "invalid tool call parser: X (chose from {...})".
VLLM_TOOL_CALL_PARSERS = frozenset({
    "apertus", "cohere_command3", "cohere_command4", "deepseek_v3", "deepseek_v31", "deepseek_v32",
    "deepseek_v4", "deepseek_v41", "dots", "ernie45", "functiongemma", "gemma4", "gigachat3", "glm45", "glm47",
    "granite", "granite-20b-fc", "granite4", "hermes", "hf", "hunyuan_a13b", "hy_v3", "hy_v4", "inkling",
    "internlm", "jamba", "k2_horizon", "kimi_k2", "kimi_k3", "lfm2", "ling3", "llama3_json", "llama4_json",
    "llama4_pythonic", "longcat", "mimo", "minicpm5", "minimax_m2", "minimax_m3", "mistral", "muse_glimmer",
    "olmo3", "openai", "phi4_mini_json", "plamo3", "poolside_v1", "pythonic", "qwen3_coder",
    "qwen3_json", "qwen3_xml", "seed_oss", "step3", "step3p5", "xlam",
})
VLLM_REASONING_PARSERS = frozenset({
    "cohere_command3", "cohere_command4", "deepseek_r1", "deepseek_v3", "deepseek_v4", "deepseek_v41",
    "ernie45", "gemma4", "glm45", "glm47", "granite", "granite_thinking_parser", "hf", "holo2", "hunyuan_a13b",
    "hy_v3", "hy_v4", "inkling", "k2_horizon", "kimi_k2", "kimi_k3", "ling3", "mimo", "minicpmv", "minimax_m2",
    "minimax_m2_append_think", "minimax_m3", "mistral", "muse_glimmer", "nemotron_v3",
    "olmo3", "openai_gptoss", "plamo3", "poolside_v1", "qwen3", "seed_oss", "step3", "step3p5",
})
# Names vllm-tpu 0.32.0 registers for the same parser class as another (vllm/tool_parsers/__init__.py:
# "qwen3_json": ("hermes_tool_parser", "Hermes2ProToolParser"), "llama4_json": ("llama_tool_parser",
# "Llama3JsonToolParser")): a family that reads one reads the other.
VLLM_TOOL_CALL_PARSER_ALIASES = {"qwen3_json": "hermes", "llama4_json": "llama3_json"}
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
# The parsers and modalities are the catalog's (components/catalog/models.py, vllm-tpu 0.32.0's registries).
GEMMA_4 = ModelFamily(
    name="Gemma 4", pattern=re.compile(r"gemma[-_]?4", re.IGNORECASE),
    tool_call_parser=catalog_models.GEMMA_4.tool_call_parser, reasoning_parser=catalog_models.GEMMA_4.reasoning_parser,
    modalities=catalog_models.GEMMA_4.modalities, limit_mm_per_prompt={"image": 4, "audio": 1},
)
GEMMA_4_WITH_AUDIO = re.compile(r"gemma[-_]?4[-_]e\d+b", re.IGNORECASE)
# Qwen3 (dense and MoE): Hermes-style <tool_call> JSON and <think> reasoning; text only.
QWEN_3 = ModelFamily(
    name="Qwen3", pattern=re.compile(r"qwen[-_]?3(?![-_.]?(?:vl|omni|coder|next|\.5))", re.IGNORECASE),
    tool_call_parser=catalog_models.QWEN_3.tool_call_parser, reasoning_parser=catalog_models.QWEN_3.reasoning_parser,
    modalities=catalog_models.QWEN_3.modalities, limit_mm_per_prompt={},
)
# Llama 3.1/3.2 text models: JSON tool calls, no reasoning channel.
LLAMA_3 = ModelFamily(
    name="Llama 3", pattern=re.compile(r"llama[-_]?3\.[12](?![-_.]?\d*[-_]?vision)", re.IGNORECASE),
    tool_call_parser=catalog_models.LLAMA_3.tool_call_parser, reasoning_parser=catalog_models.LLAMA_3.reasoning_parser,
    modalities=catalog_models.LLAMA_3.modalities, limit_mm_per_prompt={},
)
# gpt-oss: OpenAI's harmony format (vLLM's openai tool parser, openai_gptoss reasoning); text only.
GPT_OSS = ModelFamily(
    name="gpt-oss", pattern=re.compile(r"gpt[-_]?oss", re.IGNORECASE),
    tool_call_parser=catalog_models.GPT_OSS.tool_call_parser, reasoning_parser=catalog_models.GPT_OSS.reasoning_parser,
    modalities=catalog_models.GPT_OSS.modalities, limit_mm_per_prompt={},
)
MODEL_FAMILIES = (GEMMA_4, QWEN_3, LLAMA_3, GPT_OSS)
_BY_CATALOG_FAMILY = {catalog_models.GEMMA_4: GEMMA_4, catalog_models.QWEN_3: QWEN_3, catalog_models.LLAMA_3: LLAMA_3,
                      catalog_models.GPT_OSS: GPT_OSS}
# Parsers that read one family's output format and nothing else (hermes and llama3_json read any model's JSON).
FAMILY_PARSERS = {"gemma4": GEMMA_4}


def family_of(model: str, model_type: str | None = None) -> ModelFamily | None:
    """The family of vllm.model: the catalog's for a catalogued id, the config's model_type for a vllm.modelConfig,
    else by the id's name."""
    catalogued = catalog_models.catalog_model(model)
    if catalogued is not None:
        return _BY_CATALOG_FAMILY.get(catalogued.family)
    if model_type is not None and (by_type := catalog_models.family_for(model_type)) is not None:
        return _BY_CATALOG_FAMILY.get(by_type)
    return next((family for family in MODEL_FAMILIES if family.pattern.search(model)), None)


def _family_limits(model: str, model_type: str | None = None) -> dict[str, int]:
    family = family_of(model, model_type)
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


@dataclass(frozen=True)
class VersionFloor:
    """The GKE version a stack's TPU node pools need, why, and a minor a user can pin that is surely past it."""

    version: str
    reason: str
    pin: str


STACK_VERSION_FLOOR = VersionFloor(GKE_MIN_VERSION, GKE_MIN_VERSION_REASON, "1.34")


def gke_version_floor(generation: catalog_shapes.Generation) -> VersionFloor:
    """The later of the stack's own floor and the one Google names for the generation's node pools (TPU7x)."""
    needed = generation.gke_min_version
    if needed is None or gke_version_at_least(GKE_MIN_VERSION, needed):
        return STACK_VERSION_FLOOR
    major, minor = (int(part) for part in needed.split(".")[:2])
    source = generation.gke_min_version_source
    return VersionFloor(needed, f"GKE's {generation.name} node pools need it"
                        + (f" ({source.where})" if source else ""), f"{major}.{minor + 1}")


# What a ComputeClass priority may fall back to when flex-start has no capacity, each an explicit opt-in.
GKE_FALLBACK_MODELS = ("spot", "on-demand")
# The CRD's bounds on flexStart.nodeRecycling.leadTimeSeconds (computeclasses.cloud.google.com v1).
GKE_LEAD_TIME_MAX_SECONDS = 604800
# A replacement node must be up and warm before the old one ends: the log's warm start (497 s) plus an allowance
# for GKE to create the node and pull the image. The allowance is not measured in the log; it is the
# order of a GKE node's boot (a few minutes) with room for a short flex-start queue.
GKE_NODE_UP_ALLOWANCE_SECONDS = 600
# A gke rollout replaces replicas surge-first: one new pod (one more chip) before an old one leaves
# (components/gke/workload.py ROLLOUT_STRATEGY). The chip quota and the cap make room for it.
GKE_ROLLOUT_SURGE_PODS = 1
# One v5e chip per node: the only v5e machine whose chip count matches this stack's memory budget.
GKE_V5E_ONE_CHIP_MACHINE = catalog_shapes.SHAPES["v5litepod-1"].gke_machine_type
GKE_RELEASE_CHANNELS = ("RAPID", "REGULAR", "STABLE")
# Google's custom metrics adapter lives here by its own contract (components/gke/autoscaling.py deploys it).
GKE_METRICS_ADAPTER_NAMESPACE = "custom-metrics"
# The gke pod's metrics door (components/gke/metrics_door.py) listens here for Managed Prometheus; vLLM and the
# front share the pod's network namespace, so neither may take it.
GKE_METRICS_PORT = 9090
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
