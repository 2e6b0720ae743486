"""Cross-key rules of the token buckets (the batch budget against tpu-inference's ladder), and one warning
per untested arm (components/settings/untested_arms.py)."""

from __future__ import annotations

from components.basis import chip_memory
from components.settings import untested_arms
from components.settings.findings import Finding
from components.settings.root import Settings


def arm_checks(settings: Settings) -> list[Finding]:
    findings: list[Finding] = []
    tokens, gap = settings.vllm.max_num_batched_tokens, settings.tpu_inference.bucket_padding_gap
    if gap and gap >= tokens:
        past = " and compiles buckets past the budget" if gap > tokens else ""
        findings.append(Finding(
            "tpuInference.bucketPaddingGap", gap,
            f"not below vllm.maxNumBatchedTokens ({tokens}): tpu-inference doubles its token buckets up to the "
            f"gap before it steps by the gap, so a gap this large gives the powers-of-two ladder again{past}",
            "use a gap well under the budget (the log's suggestion is 128), or 0",
            also_keys=("vllm.maxNumBatchedTokens",),
        ))
        return findings
    largest = chip_memory.token_buckets(tokens, gap)[-1]
    if largest != tokens:
        ladder = f"buckets step by {gap} past {gap}" if gap else "TPU precompiles powers of two"
        findings.append(Finding.warning(
            "vllm.maxNumBatchedTokens", tokens,
            f"compiles as the {largest} bucket ({ladder}) and runs {largest}-shaped kernels with less work in "
            "them: the log measured -24.7% throughput at 2496",
            f"use {largest}", also_keys=("tpuInference.bucketPaddingGap",) if gap else (),
        ))
    findings += [arm.finding for arm in untested_arms.untested_arms(settings)]
    return findings
