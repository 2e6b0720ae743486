"""`tpu-vllm:tpuInference`: tpu-inference's environment variables (the build log's table), typed.

They come from tpu-inference (tpu_inference/envs.py), not vLLM's CLI, so they reach the server as its
container's environment on both platforms (components/serving/serve_command.py, backend_environment). A key is
rendered only when it is set, even to its default: unset keys leave the backend's own default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import Field, ValidationInfo, field_validator

from components import catalog
from components.basis import chip_memory
from components.settings.fields import _Section, warn
from components.settings.findings import InvalidSettingError

# The host of one v5e chip, on both platforms (v5litepod-1's VM and GKE's node): ct5lp-hightpu-1t,
# 24 vCPUs and 48 GB (the catalog's, cloud.google.com/tpu/docs/v5e, "VM types"): the smallest host of any shape,
# so a bound that holds on every one.
V5E_ONE_CHIP_HOST_VCPUS = catalog.shape("v5litepod-1").host_vcpus


@dataclass(frozen=True)
class TpuInferenceVariable:
    """One row of the build log's table of tpu-inference variables."""

    key: str
    """The setting's name under tpu-vllm:tpuInference."""
    env: str
    default: bool | int
    description: str
    """The log's description."""
    measured: bool
    """Whether the log measured a boot with it changed."""


TPU_INFERENCE_VARIABLES = (
    TpuInferenceVariable(
        "attnBucketizedNumReqs", "ATTN_BUCKETIZED_NUM_REQS", False,
        "precompile attention at power-of-two request buckets instead of a single shape at max_num_seqs", False),
    TpuInferenceVariable(
        "sliceRopeCache", "SLICE_ROPE_CACHE", False,
        "slice the rotary cache to max_model_len at load: free HBM", False),
    TpuInferenceVariable(
        "numPrecompileWorkers", "NUM_PRECOMPILE_WORKERS", 1,
        "parallel XLA precompilation; compile is 685 s of an 857 s boot", False),
    TpuInferenceVariable(
        "bucketPaddingGap", "VLLM_TPU_BUCKET_PADDING_GAP", 0,
        "linear bucket increments (use 128) instead of powers of two: the fix for the 2496-pads-to-4096 problem",
        False),
    TpuInferenceVariable(
        "xlaCheckRecompilation", "VLLM_XLA_CHECK_RECOMPILATION", False,
        "error on a runtime recompile; turn on for one validation boot", False),
)
VARIABLE_BY_KEY = {variable.key: variable for variable in TPU_INFERENCE_VARIABLES}


class TpuInferenceSettings(_Section):
    """tpu-inference's variables (config key `tpu-vllm:tpuInference`); the defaults are the backend's."""

    config_key: ClassVar[str] = "tpuInference"

    attn_bucketized_num_reqs: bool = Field(False, description=(
        "`ATTN_BUCKETIZED_NUM_REQS`: precompile attention at power-of-two request buckets instead of a single "
        "shape at max_num_seqs; not measured by the log (warns when on; see [arms](arms.md))"))
    slice_rope_cache: bool = Field(False, description=(
        "`SLICE_ROPE_CACHE`: slice the rotary cache to max_model_len at load, freeing HBM; not measured by the log "
        "(warns when on)"))
    num_precompile_workers: int = Field(1, description=(
        "`NUM_PRECOMPILE_WORKERS`: parallel XLA precompilation (compile is 685 s of an 857 s boot); 1 to 24, the "
        "vCPUs of ct5lp-hightpu-1t; above 1 not measured by the log (warns)"))
    bucket_padding_gap: int = Field(0, description=(
        "`VLLM_TPU_BUCKET_PADDING_GAP`: linear token buckets instead of powers of two (the log suggests 128, the "
        "fix for 2496 padding to 4096); 0 or a multiple of 16 below `vllm.maxNumBatchedTokens`; not measured "
        "(warns)"))
    xla_check_recompilation: bool = Field(False, description=(
        "`VLLM_XLA_CHECK_RECOMPILATION`: a runtime recompile is an error; for one validation boot (warns while "
        "on). Each key is rendered into vLLM's container environment only when set"))

    @field_validator("num_precompile_workers", "bucket_padding_gap", mode="before")
    @classmethod
    def _a_number_not_a_switch(cls, value: Any) -> Any:
        # pydantic would read true as 1: `numPrecompileWorkers: true` meant "on", and would silently stay serial.
        if isinstance(value, bool):
            raise InvalidSettingError(
                "a number, not true or false (it would be read as 1 or 0, which is not what a switch means here)",
                "set a count, e.g. numPrecompileWorkers: 8 or bucketPaddingGap: 128")
        return value

    @field_validator("num_precompile_workers")
    @classmethod
    def _workers_on_the_host(cls, value: int) -> int:
        if value < 1:
            raise InvalidSettingError(
                "NUM_PRECOMPILE_WORKERS counts compile threads: 1 compiles one program at a time in the main "
                "thread (the default, and what the log's 685 s compile ran with), more compile in parallel; "
                "below 1 tpu-inference cannot start its pool",
                f"use 1 to {V5E_ONE_CHIP_HOST_VCPUS}")
        if value > V5E_ONE_CHIP_HOST_VCPUS:
            raise InvalidSettingError(
                f"more compile threads than the node has vCPUs ({V5E_ONE_CHIP_HOST_VCPUS} on ct5lp-hightpu-1t, "
                "the host of one v5e chip): XLA compilation runs on the host's CPUs, so the extra threads only "
                "wait for a core, each with its own 64 MiB stack and compile memory (tpu-inference's advice on "
                "memory errors or stack overflows during precompilation is to lower this)",
                f"use at most {V5E_ONE_CHIP_HOST_VCPUS}, e.g. 8")
        return value

    @field_validator("bucket_padding_gap")
    @classmethod
    def _gap_on_the_token_grid(cls, value: int) -> int:
        if value < 0 or value % chip_memory.MIN_TOKEN_BUCKET:
            raise InvalidSettingError(
                "0 (the default: token buckets double, 16, 32 ... 4096) or a positive multiple of "
                f"{chip_memory.MIN_TOKEN_BUCKET}: tpu-inference's buckets start at its smallest, "
                f"{chip_memory.MIN_TOKEN_BUCKET} tokens, double up to the gap, then grow by the gap, so any other "
                f"gap puts every bucket after it off the {chip_memory.MIN_TOKEN_BUCKET}-token grid the others keep",
                "use the log's suggestion, 128 (2496 tokens then run as 2560, not 4096), or 0")
        return value

    @field_validator("xla_check_recompilation")
    @classmethod
    def _one_validation_boot(cls, value: bool, info: ValidationInfo) -> bool:
        if value:
            warn(cls, info, value,
                 "VLLM_XLA_CHECK_RECOMPILATION=1 is for one validation boot: every request shape outside the "
                 "precompiled buckets becomes an error instead of a compile, so a shape the warm-up missed fails "
                 "requests for as long as it stays on",
                 "once the boot and a benchmark pass, turn it off: pulumi config set --path "
                 "tpu-vllm:tpuInference.xlaCheckRecompilation false")
        return value

    def environment(self) -> dict[str, str]:
        """The variables set (even to a default), in the table's order, as both backends read them:
        booleans as 1/0 (vLLM reads VLLM_XLA_CHECK_RECOMPILATION with int(); tpu-inference takes 1/0 too)."""
        values: dict[str, Any] = self.model_dump(by_alias=True)
        set_keys = {type(self).model_fields[name].alias for name in self.model_fields_set}
        return {variable.env: _env_text(values[variable.key])
                for variable in TPU_INFERENCE_VARIABLES if variable.key in set_keys}


def _env_text(value: bool | int) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)
