"""`tpu-vllm:vllm`: the `vllm serve` command, and the model geometry it is checked with."""

from __future__ import annotations

import difflib
import re
from typing import Any, ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic.alias_generators import to_camel

from components import catalog
from components.basis import boot, chip_memory
from components.settings import fitting
from components.settings.facts import (
    DEFAULT_MODEL,
    KV_DTYPES_ACCEPTED,
    KV_DTYPES_FINE,
    KV_DTYPES_FP8_NO_GAIN,
    KV_DTYPES_KILL_AT_BOOT,
    KV_DTYPES_UNTESTED,
    VLLM_MODALITIES,
    VLLM_REASONING_PARSERS,
    VLLM_TOOL_CALL_PARSERS,
    _family_limits,
    family_of,
)
from components.settings.fields import Duration, Port, PublicHostName, _Section, image_reference, parse_duration, warn
from components.settings.findings import InvalidSettingError
from components.settings.speculative import SpeculativeSetting

# The release the suite's vLLM is (components/catalog/builds.py; tests/test_vllm_build.py holds the two together).
VLLM_IMAGE = catalog.RELEASE.image

# A Hugging Face repo id by the Hub's own rule (huggingface_hub 2.4.0, utils/_validators.py, validate_repo_id and
# REPO_ID_REGEX, compiled with re.ASCII): "repo_name" or "namespace/repo_name", each part 1-96 of [A-Za-z0-9_.-]
# starting and ending with a word character (its `\b` at both ends); "--" and ".." are refused, and so is a
# trailing ".git". Matched whole (its `$`-free fullmatch), so no trailing newline slips through.
HF_REPO_PART = r"\w(?:[\w.-]{0,94}\w)?"
HF_REPO_ID = re.compile(rf"(?:{HF_REPO_PART}/)?{HF_REPO_PART}", re.ASCII)
# A local checkpoint the container reads: an absolute path of plain segments, the same characters.
MODEL_PATH = re.compile(r"(?:/[A-Za-z0-9_.-]+)+")
MODEL_PATH_MAX = 1024


def model_id_problem(value: str) -> str | None:
    """Why vllm.model is neither a Hugging Face repo id nor a plain absolute path, or None."""
    if value.startswith("/"):
        if len(value) > MODEL_PATH_MAX or not MODEL_PATH.fullmatch(value):
            return (f"not a plain absolute path (at most {MODEL_PATH_MAX} characters of letters, digits, '.', '_', "
                    "'-' and '/')")
        if any(segment in (".", "..") for segment in value.split("/")):
            return "a path with '.' or '..' segments: name the checkpoint's directory as it is"
        return None
    if not HF_REPO_ID.fullmatch(value):
        return ("not a Hugging Face model id: 'name' or 'org/name', each 1 to 96 of letters, digits, '-', '_' and "
                "'.', starting and ending with a letter, digit or '_' (huggingface_hub's validate_repo_id)")
    if "--" in value or ".." in value:
        return "a Hugging Face model id cannot hold '--' or '..' (huggingface_hub's validate_repo_id)"
    if value.endswith(".git"):
        return "a Hugging Face model id cannot end in '.git' (huggingface_hub's validate_repo_id)"
    return None


class KvLayerGroupSetting(_Section):
    """Layers that own a KV cache and share one geometry (from the model's config.json)."""

    layers: int = Field(ge=1)
    kv_heads: int = Field(ge=1)
    """num_key_value_heads (or num_global_key_value_heads for full-attention layers, if set)."""
    head_dim: int = Field(ge=1)


class ModelGeometrySetting(_Section):
    """A model's memory geometry typed by hand (`vllm.modelGeometry`); `vllm.modelConfig` reads it from the model's
    config.json instead, by tpu-inference's own rules. Kept working, with a warning that points there."""

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

    def to_geometry(self) -> chip_memory.ModelGeometry:
        return chip_memory.ModelGeometry(
            weights_bytes=int(self.weights_gib * chip_memory.GIB),
            kv_layer_groups=tuple(chip_memory.KvLayerGroup(layers=group.layers, kv_heads=group.kv_heads,
                                                      head_dim=group.head_dim) for group in self.kv_layers),
            kv_element_bytes=self.kv_element_bytes,
            max_tokens_per_mm_item=self.max_tokens_per_mm_item,
            num_key_value_heads=max(group.kv_heads for group in self.kv_layers),
            max_context_tokens=self.max_context_tokens,
        )


class VllmSettings(_Section):
    """The `vllm serve` command (config key `tpu-vllm:vllm`); defaults are the log's final run."""

    config_key: ClassVar[str] = "vllm"

    image: image_reference(VLLM_IMAGE) = Field(VLLM_IMAGE, description=(
        "the container; the default is the vllm-tpu release the stack's tests judge (vLLM and tpu-inference "
        "0.32.0); must be a pullable reference (`repo:tag` or `repo@sha256:<manifest digest>`; a `docker images` ID "
        "is an error). On both platforms a tag is resolved to its manifest digest at the first `pulumi up` and "
        "pinned in state until this setting changes; a digest is used as written; a floating tag (`nightly`, "
        "`latest`) works and warns"))
    model: str = Field(DEFAULT_MODEL, description=(
        "a Hugging Face repo id (`name` or `org/name` by the Hub's own rule: letters, digits, `-`, `_`, `.`, no "
        "`--` or `..`) or an absolute path the container reads (letters, digits, `.`, `_`, `-`, `/`); anything else "
        "is an error; a catalogued id (docs/models.md) is sized on `tpu.acceleratorType` and refused, naming the "
        "smallest shape that fits, when it cannot fit; parsers and multimodal limits follow its family; any other "
        "model needs `modelConfig`, or warns what goes unchecked (see *Changing the model or the chip*)"))
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = Field("bfloat16", description=(
        "as in the log; the weights and an `auto` KV cache are sized at it (float32 doubles both: tpu-inference "
        "allocates an auto cache in the model's dtype)"))
    kv_cache_dtype: str = Field("auto", description=(
        "fp8 gives 1.000x capacity and is ~2% slower (warning); `int8` is not a CLI choice; others kill the "
        "server (errors)"))
    max_model_len: int = Field(32768, ge=256, description=(
        "costs no KV: block size scales to keep 512 blocks per request; at most the model's context (131072 for "
        "E2B; vLLM refuses more); above 32768 (the log's 65536 arm) warns as untested, with the KV budget"))
    max_num_batched_tokens: int = Field(4096, ge=16, description=(
        "powers of two only (2496 compiles as 4096, -24.7%); below 2496 the server refuses to start with "
        "multimodal on; above 4096 (the log's 8192 arm) warns as untested; with `tpuInference.bucketPaddingGap` "
        "the buckets step by the gap"))
    tensor_parallel_size: int | None = Field(None, ge=1, description=(
        "unset: the planned layout's (the lowest computed $ per million output tokens at `load.clients` x "
        "`load.contextTokens` among the tensor-parallel x data-parallel splits of the host that hold one "
        "maxModelLen request; `python -m tools.fit --layouts`); with `dataParallelSize` their product must be "
        "the host's devices; a size the model's heads cannot split over is an error naming the layouts that work"))
    data_parallel_size: int | None = Field(None, ge=1, description=(
        "replicas of the model on one host, each on its own `tensorParallelSize` chips (vLLM's "
        "`--data-parallel-size`: one engine per replica behind one endpoint); unset: the planned layout's, "
        "`tensorParallelSize` set alone makes it the host's devices over that"))
    # No `le=1`: a pydantic "at most 1" would send 92 to 1.0, which the check below refuses; it says the real bound.
    gpu_memory_utilization: float = Field(0.92, gt=0, description=(
        "0.95 fails XLA program allocation after ~691 s (error); 0.93-0.94 untested (warning)"))
    enable_prefix_caching: bool = Field(True, description="as in the log")
    disable_chunked_mm_input: bool = Field(True, description=(
        "keeps each multimodal item in one batch; with it, `maxNumBatchedTokens` must hold the largest item"))
    limit_mm_per_prompt: dict[str, int] = Field(default_factory=lambda: {"image": 4, "audio": 1}, description=(
        "the multimodal contract; zeros lift the 2496 floor (the log's text-only arm, which warns as untested); "
        "modalities are vLLM's `image`, `video`, `audio`, "
        "`vision_chunk`, counts 0 or more; the default follows the model (no `audio` for Gemma 4 26B/31B, `{}` "
        "for other families)"))
    enable_auto_tool_choice: bool = Field(True, description=(
        "native tool calling; `true` is required (the deploy's smoke test calls a tool)"))
    tool_call_parser: str | None = Field("gemma4", description=(
        "one vllm-tpu 0.32.0 registers; defaults to the model family's (`gemma4` only for Gemma 4)"))
    reasoning_parser: str | None = Field("gemma4", description=(
        "one vllm-tpu 0.32.0 registers; defaults to the model family's (`gemma4` only for Gemma 4)"))
    block_size: int | None = Field(None, description=(
        "not to be set: the backend scales it with `maxModelLen` (pinning it is an error)"))
    max_num_seqs: int | None = Field(None, ge=1, description=(
        "leave unset (256): pinning warns, a cap of 64 made every cell worse; at least 1"))
    kv_cache_memory_bytes: int | None = Field(None, description=(
        "passed as `--kv-cache-memory`, which the TPU backend ignores (tpu-inference 0.32.0 sizes the pool from "
        "`gpuMemoryUtilization` alone), so setting it warns and the plan sizes the pool from `gpuMemoryUtilization`; "
        "over one chip's HBM, or not positive, is an error"))
    # `model_config` is pydantic's own name: the field is hf_config, the key vllm.modelConfig.
    hf_config: str | None = Field(None, alias="modelConfig", description=(
        "a local path to the model's Hugging Face `config.json`, for a model the catalog does not hold: its "
        "geometry is read by tpu-inference's rules, its weights from a `model.safetensors.index.json` beside it "
        "(`metadata.total_size`) or counted from the config (Llama, Qwen3), and the fit, the memory budget, the "
        "parsers and `--tensor-parallel-size` follow (see docs/models.md); a relative path is read from the directory "
        "`pulumi` runs in; a missing file or bad JSON is an error"))
    model_geometry: ModelGeometrySetting | None = Field(None, description=(
        "hand-typed geometry (`weightsGib`, `kvLayers` (`layers`, `kvHeads`, `headDim`), `maxContextTokens`, "
        "optional `maxTokensPerMmItem`, `kvElementBytes` (2)), sized against one chip; still read, with a warning: "
        "use `modelConfig`"))
    server_port: Port = Field(8001, description=(
        "vLLM's own port, on 127.0.0.1 behind the front (was `front.upstreamPort`, still read, with a warning); "
        "not `front.listenPort` nor 22"))
    weights_on_disk: bool = Field(False, description=(
        "HF_HOME on the cache disk instead of `/dev/shm` (the 9.54 GiB download takes ~10 s)"))
    health_timeout: Duration = Field("30m", description=(
        "how long the deploy waits for `/health`; at least 15m (cold start 857 s)"))
    allowed_media_domains: list[PublicHostName] = Field(default_factory=list, description=(
        "hosts vLLM may fetch image/audio URLs from (exact public host names, no scheme); none means inline "
        "`data:` only (see *Security*)"))
    container_access: Literal["privileged", "devices"] = Field("privileged", description=(
        "how the container reaches the TPU: `privileged` (measured by the log) or `devices` (`/dev/vfio/*`, "
        "`/dev/accel*` + memlock; not measured)"))
    speculative_config: SpeculativeSetting | None = Field(None, description=(
        "n-gram speculative decoding, `--speculative-config` (`method: ngram`; `numSpeculativeTokens` / "
        "`promptLookupMax` / `promptLookupMin`, default 3 / 5 / 3, tpu-inference's own test sizes); other methods "
        "and a min above the max are errors; not measured by the log (warns; see [arms](arms.md))"))

    @model_validator(mode="before")
    @classmethod
    def _follow_the_model_family(cls, data: Any) -> Any:
        """Parsers and multimodal limits not set follow the model's family (none if unknown)."""
        if not isinstance(data, dict):
            return data
        model = data.get("model", DEFAULT_MODEL)
        if not isinstance(model, str):
            return data
        model_type = _config_model_type(data.get("modelConfig", data.get("hf_config")))
        family = family_of(model, model_type)
        derived = {
            "tool_call_parser": family.tool_call_parser if family else None,
            "reasoning_parser": family.reasoning_parser if family else None,
            "limit_mm_per_prompt": _family_limits(model, model_type),
        }
        filled = dict(data)
        for name, value in derived.items():
            if name not in data and to_camel(name) not in data:
                filled[name] = value
        return filled


    @field_validator("image")
    @classmethod
    def _floating_image(cls, value: str, info: ValidationInfo) -> str:
        tag = catalog.floating_tag(value)
        if tag:
            warn(cls, info, value,
                 f"`{tag}` moves: the first `pulumi up` pins the build it names that day (kept in state until this "
                 f"setting changes), and the stack's tests judged {catalog.RELEASE}, not it",
                 f"set it to {catalog.RELEASE.image}, or to a `nightly-DATE-SHA-SHA` tag or a digest to keep one "
                 "nightly")
        return value

    @field_validator("model")
    @classmethod
    def _model_id(cls, value: str) -> str:
        # It reaches `vllm serve`'s argv, the units' Description= and the dashboard: refused, never quoted there.
        problem = model_id_problem(value)
        if problem:
            raise InvalidSettingError(
                problem, f"write the id as the Hub shows it (e.g. {DEFAULT_MODEL}) or the checkpoint's absolute path "
                "in the container (e.g. /models/my-checkpoint)")
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
            raise InvalidSettingError("; ".join(problems), 'e.g. {"image": 4, "audio": 1}')
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
            raise InvalidSettingError(
                "the KV pool is a positive number of bytes",
                "remove the key (the TPU backend ignores it; gpuMemoryUtilization sizes the pool)",
            )
        # Against the chip's HBM: a cross-key rule (checks/memory.py), since the chip follows tpu.acceleratorType.
        return value

    @field_validator("gpu_memory_utilization")
    @classmethod
    def _memory_cap(cls, value: float, info: ValidationInfo) -> float:
        if value > 1:
            raise InvalidSettingError(
                "a fraction of the chip's HBM (0.92 is 92%), not a percentage; and 0.95 and above does not boot on "
                "this model/chip",
                "set it to 0.92 (the log's measured ceiling; 0.93-0.94 are accepted with a warning, untested)",
            )
        if value >= chip_memory.FAILING_GPU_MEMORY_UTILIZATION:
            raise InvalidSettingError(
                "0.95 and above does not boot on this model/chip: the KV pool sizes as "
                "predicted, then XLA program allocation fails ~691 s in "
                "(RuntimeProgramAllocationFailure, 384.11M wanted, ~347M free) because compiled "
                "programs live outside the cap",
                "set it to 0.92",
            )
        if value > chip_memory.HIGHEST_BOOTING_GPU_MEMORY_UTILIZATION:
            margin_mb = {0.93: 291, 0.94: 127}.get(round(value, 2))
            warn(cls, info, value,
                 f"untested: the estimated margin ({margin_mb or 'under 291'} MB) is thin against a failure that "
                 "was 37 MB short at 0.95, and finding out costs a ~11 min compile",
                 "0.92 is the measured ceiling")
        return value

    @field_validator("kv_cache_dtype")
    @classmethod
    def _kv_dtype(cls, value: str, info: ValidationInfo) -> str:
        if value == "int8":
            raise InvalidSettingError(
                "int8 is not one of vLLM's --kv-cache-dtype choices (the server rejects it: invalid choice: 'int8')",
                "set it to auto",
            )
        if value in KV_DTYPES_KILL_AT_BOOT or value.startswith("turboquant_"):
            raise InvalidSettingError(
                "the CLI accepts it, then it kills the server at boot on this stack "
                "(tpu-inference has no kernel for it)",
                "set it to auto",
            )
        if value in KV_DTYPES_FP8_NO_GAIN:
            warn(cls, info, value,
                 "buys nothing on v5e: the KV block layout is word-aligned, so capacity stays 1.000x, and it runs "
                 "~2% slower", "use auto")
        elif value in KV_DTYPES_UNTESTED:
            warn(cls, info, value, "was not tested by the build log", "auto is")
        elif value not in KV_DTYPES_FINE:
            raise InvalidSettingError(
                "unknown KV cache dtype; accepted values are "
                + ", ".join(sorted(KV_DTYPES_ACCEPTED)) + " and turboquant_*",
                "use auto",
            )
        return value

    @field_validator("hf_config")
    @classmethod
    def _readable_config(cls, value: str | None) -> str | None:
        if value is None:
            return value
        try:
            catalog.geometry_from_file(value)
            fitting.index_total_size(value)
        except catalog.ConfigError as error:
            raise InvalidSettingError(
                str(error),
                "point it at the model's config.json on this machine (e.g. downloaded with `hf download MODEL "
                "config.json model.safetensors.index.json --local-dir DIR`)",
            ) from None
        return value

    @field_validator("block_size")
    @classmethod
    def _no_block_size(cls, value: int | None) -> int | None:
        if value is not None:
            raise InvalidSettingError(
                "do not pin the block size: the Pallas backend scales it with maxModelLen to "
                "keep 512 blocks per request, which is what keeps long context free of KV "
                "cost (a 2048-blocks arm decoded slower, 8.32 vs 8.02 ms)",
                "remove the key",
            )
        return value

    @field_validator("max_num_seqs")
    @classmethod
    def _leave_max_num_seqs(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None:
            warn(cls, info, value, "pinned; the log capped it at 64 and every cell got worse",
                 "leave it unset (256) unless the logs show preemption")
        return value

    @field_validator("health_timeout")
    @classmethod
    def _timeout_readable(cls, value: str) -> str:
        seconds = parse_duration(value)
        if seconds < boot.COLD_BOOT_SECONDS:
            raise InvalidSettingError(
                f"a cold start takes ~{boot.COLD_BOOT_SECONDS} s (80% XLA compile)",
                "give it at least 15m, 30m is the default",
            )
        return value

    @property
    def health_timeout_seconds(self) -> int:
        return parse_duration(self.health_timeout)

    @property
    def multimodal_enabled(self) -> bool:
        return any(count > 0 for count in self.limit_mm_per_prompt.values())


def _config_model_type(path: Any) -> str | None:
    """The model_type of vllm.modelConfig's config.json, for the family; None when unreadable (its own validator
    says why)."""
    if not isinstance(path, str):
        return None
    try:
        return catalog.geometry_from_file(path).model_type
    except catalog.ConfigError:
        return None


def _registered(value: str | None, registered: frozenset[str], what: str) -> str | None:
    if value is None or value in registered:
        return value
    near = difflib.get_close_matches(value, sorted(registered), n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(near)}? " if near else ""
    raise InvalidSettingError(
        f"vLLM does not register this {what} (the server exits at start: 'invalid {what}: {value}')",
        f"{hint}vllm-tpu 0.32.0 registers {', '.join(sorted(registered))}",
    )
