"""`tpu-vllm:vllm.speculativeConfig`: n-gram speculative decoding, the build log's untested arm.

Rendered as vLLM's `--speculative-config` JSON (vllm/config/speculative.py, SpeculativeConfig). Only the
n-gram method: it drafts from the prompt itself, so it needs no draft checkpoint, and tpu-inference runs
it (tpu_inference/runner/tpu_runner.py, NgramProposer; "Speculative Decoding: Ngram" passes in its
support matrices).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from pydantic import Field, field_validator, model_validator

from components.settings.fields import _Section
from components.settings.findings import InvalidSettingError

# tpu-inference's own n-gram correctness test (tests/e2e/test_speculative_decoding.py,
# test_ngram_correctness_greedy): the sizes it verifies on TPU.
NGRAM_TEST_SIZES = {"num_speculative_tokens": 3, "prompt_lookup_max": 5, "prompt_lookup_min": 3}


class SpeculativeSetting(_Section):
    """vLLM's speculative decoding, n-gram only."""

    config_key: ClassVar[str] = "vllm.speculativeConfig"

    method: str = Field(description="ngram: proposes the tokens that followed the last matching n-gram of the prompt")
    num_speculative_tokens: int = Field(NGRAM_TEST_SIZES["num_speculative_tokens"], description=(
        "tokens proposed per step, each checked by the same forward pass"))
    prompt_lookup_max: int = Field(NGRAM_TEST_SIZES["prompt_lookup_max"], description=(
        "the longest n-gram looked up in the prompt"))
    prompt_lookup_min: int = Field(NGRAM_TEST_SIZES["prompt_lookup_min"], description=(
        "the shortest; at most promptLookupMax (vLLM refuses more)"))

    @field_validator("method")
    @classmethod
    def _ngram_only(cls, value: str) -> str:
        if value != "ngram":
            raise InvalidSettingError(
                "only ngram: it drafts from the prompt, so it needs no draft checkpoint, and it is the arm the "
                "log names (marked fully passing on TPU, against a workload at 49% of memory bandwidth). "
                "draft_model, eagle3, mtp and dflash each need draft weights this stack does not deploy, and "
                "ngram_gpu is the GPU proposer",
                "set it to ngram")
        return value

    @field_validator("num_speculative_tokens", "prompt_lookup_max", "prompt_lookup_min", mode="before")
    @classmethod
    def _a_number_not_a_switch(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise InvalidSettingError("a number of tokens, not true or false (pydantic would read it as 1 or 0)",
                                      "set a count, e.g. 3")
        return value

    @field_validator("num_speculative_tokens", "prompt_lookup_max", "prompt_lookup_min")
    @classmethod
    def _positive(cls, value: int) -> int:
        if value < 1:
            raise InvalidSettingError(
                "at least 1 (vLLM's SpeculativeConfig refuses 0 or less)",
                "tpu-inference's n-gram test uses numSpeculativeTokens 3, promptLookupMax 5, promptLookupMin 3")
        return value

    @model_validator(mode="after")
    def _window_in_order(self) -> SpeculativeSetting:
        if self.prompt_lookup_min > self.prompt_lookup_max:
            raise InvalidSettingError(
                f"promptLookupMin ({self.prompt_lookup_min}) is above promptLookupMax ({self.prompt_lookup_max}): "
                f"vLLM refuses it at start ('prompt_lookup_min={self.prompt_lookup_min} must be <= "
                f"prompt_lookup_max={self.prompt_lookup_max}')",
                "lower promptLookupMin or raise promptLookupMax")
        return self

    def flag_value(self) -> str:
        """--speculative-config's JSON, in vLLM's own field names."""
        fields: dict[str, Any] = {"method": self.method, **{
            name: getattr(self, name) for name in ("num_speculative_tokens", "prompt_lookup_max", "prompt_lookup_min")}}
        return json.dumps(fields, separators=(",", ":"))
