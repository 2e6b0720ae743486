"""The token-bucket ladder against the batch budget, and one warning per untested arm (components/arms.py)."""

from __future__ import annotations

from components import arms, budget
from components.settings.facts import NAMESPACE
from components.settings.root import Settings


def _arm_checks(settings: Settings, warnings: list[str]) -> list[str]:
    errors: list[str] = []
    tokens, gap = settings.vllm.max_num_batched_tokens, settings.tpu_inference.bucket_padding_gap
    if gap and gap >= tokens:
        past = " and compiles buckets past the budget" if gap > tokens else ""
        errors.append(
            f"{NAMESPACE}:tpuInference.bucketPaddingGap = {gap}: not below vllm.maxNumBatchedTokens ({tokens}). "
            "tpu-inference doubles its token buckets up to the gap before it steps by the gap, so a gap this "
            f"large gives the powers-of-two ladder again{past}; "
            "use a gap well under the budget (the log's suggestion is 128), or 0"
        )
        return errors
    largest = budget.token_buckets(tokens, gap)[-1]
    if largest != tokens:
        ladder = (f"buckets step by {gap} past {gap}" if gap else "TPU precompiles powers of two")
        warnings.append(
            f"vllm.maxNumBatchedTokens={tokens} compiles as the {largest} bucket ({ladder}) and runs "
            f"{largest}-shaped kernels with less work in them: the log measured -24.7% throughput at 2496; "
            f"use {largest}"
        )
    warnings += [arm.warning for arm in arms.untested_arms(settings)]
    return errors
