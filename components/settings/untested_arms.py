"""The build log's untested arms: which ones a stack's settings turn on, what each renders, and why.

The log ends with configurations it calls "untested and plausibly better" and a table of tpu-inference
variables it never changed. Each arm here is one of those, read off the validated settings; the same
list makes the settings' warnings (one per arm) and the plan's "untested arms" lines, so what the
plan says is what `pulumi up` warned. No Pulumi imports.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from components.basis import chip_memory
from components.settings.findings import Finding

if TYPE_CHECKING:
    from components.settings.root import Settings

# What the log booted and measured.
MEASURED_MAX_MODEL_LENS = (16384, 32768)
MEASURED_MAX_NUM_BATCHED_TOKENS = 4096
# The floor multimodal input sets with chunked multimodal input off (the log's ValueError), and the bucket
# the text-only trade can reach below it.
MULTIMODAL_FLOOR_TOKENS = 2496
TEXT_ONLY_BUCKET = 2048
UNTESTED = "untested: the build log did not measure it"
# Decode at single stream: 8.02 ms measured against the 3.94 ms bandwidth floor (the log).
DECODE_BANDWIDTH_SHARE = "49%"


@dataclass(frozen=True)
class Arm:
    """One untested configuration change, as the stack renders it."""

    key: str
    """The setting, e.g. vllm.maxModelLen."""
    value: Any
    renders: str
    """What reaches the server: a flag or an environment variable."""
    why: str
    """What the log says and what it did not measure, with the arithmetic that applies."""

    @property
    def setting(self) -> str:
        return f"{self.key}={json.dumps(self.value, separators=(',', ':'))}"

    @property
    def finding(self) -> Finding:
        return Finding.warning(
            self.key, self.value, f"{UNTESTED}. {self.why}. It renders {self.renders}",
            "benchmark it as a whole configuration against the default (docs/arms.md)")

    def as_plan(self) -> dict[str, str]:
        return {"setting": self.setting, "renders": self.renders, "why": self.why}


def untested_arms(settings: Settings) -> list[Arm]:
    """Every arm these settings turn on, in the log's order; empty for the log's own configuration."""
    vllm, tpu_inference = settings.vllm, settings.tpu_inference
    arms: list[Arm] = []
    if vllm.max_model_len > max(MEASURED_MAX_MODEL_LENS):
        arms.append(_long_context_arm(settings))
    if vllm.max_num_batched_tokens > MEASURED_MAX_NUM_BATCHED_TOKENS:
        tokens = vllm.max_num_batched_tokens
        next_bucket = tokens == 2 * MEASURED_MAX_NUM_BATCHED_TOKENS
        where = ("The log's arm, the next bucket above its measured 4096" if next_bucket
                 else f"Above the log's measured {MEASURED_MAX_NUM_BATCHED_TOKENS}")
        arms.append(Arm(
            "vllm.maxNumBatchedTokens", tokens, f"--max-num-batched-tokens {tokens}",
            f"{where}: bigger prefill chunks favour time-to-first-token, and stall every in-flight decode for longer "
            "(inter-token latency); the largest bucket's compiled programs grow with it, and compiled programs "
            "live in the 1.26 GiB outside gpuMemoryUtilization's cap, where the 0.95 run died"))
    if tpu_inference.bucket_padding_gap:
        arms.append(_padding_gap_arm(settings))
    if vllm.speculative_config is not None:
        spec = vllm.speculative_config
        arms.append(Arm(
            "vllm.speculativeConfig", spec.model_dump(by_alias=True), f"--speculative-config {spec.flag_value()}",
            f"Proposes {spec.num_speculative_tokens} token(s) a step from n-grams of {spec.prompt_lookup_min}-"
            f"{spec.prompt_lookup_max} prompt tokens, checked in the same forward pass; it needs no draft "
            f"checkpoint and tpu-inference marks it fully passing, and decode here sits at "
            f"{DECODE_BANDWIDTH_SHARE} of memory bandwidth (8.02 ms against a 3.94 ms floor), so there is "
            "headroom; what it buys depends on how often replies repeat the prompt (tool arguments do)"))
    family = settings.family
    # A text-only family (Qwen3, Llama 3) serves text only by nature: no trade, no arm.
    if not vllm.multimodal_enabled and (family is None or family.modalities):
        arms.append(_text_only_arm(settings))
    if tpu_inference.attn_bucketized_num_reqs:
        arms.append(Arm(
            "tpuInference.attnBucketizedNumReqs", True, "ATTN_BUCKETIZED_NUM_REQS=1 in vLLM's environment",
            "Attention is precompiled at power-of-two request counts instead of one shape at max_num_seqs: "
            "more programs to compile on a cold boot, and compiled programs live in the 1.26 GiB outside "
            "gpuMemoryUtilization's cap, where the 0.95 run died"))
    if tpu_inference.slice_rope_cache:
        arms.append(Arm(
            "tpuInference.sliceRopeCache", True, "SLICE_ROPE_CACHE=1 in vLLM's environment",
            "The rotary cache is sliced to maxModelLen at load, which frees HBM; the log did not measure how "
            "much, or whether the KV pool (sized inside the cap) or the programs outside it get the room"))
    if tpu_inference.num_precompile_workers > 1:
        arms.append(Arm(
            "tpuInference.numPrecompileWorkers", tpu_inference.num_precompile_workers,
            f"NUM_PRECOMPILE_WORKERS={tpu_inference.num_precompile_workers} in vLLM's environment",
            f"Compile is 685 s of the log's 857 s cold boot, one program at a time; "
            f"{tpu_inference.num_precompile_workers} threads may shorten it (a warm cache skips it: 497 s), "
            "sharing the node's 24 vCPUs. On memory errors or stack overflows during precompilation, "
            "tpu-inference says to lower it"))
    return arms


def _long_context_arm(settings: Settings) -> Arm:
    length = settings.vllm.max_model_len
    kv = settings.kv_budget()
    named = "The log's arm. " if length == 65536 else ""
    if kv is None:
        sums = "with no measured geometry for this model the KV pool cannot be shown"
    else:
        held = kv.block_size * kv.blocks_per_request
        covers = f"= {length}" if held == length else f"= {held}, the first whole block past {length}"
        sums = (f"block size {kv.block_size} x {kv.blocks_per_request} blocks per request {covers}, and the KV "
                f"pool stays {chip_memory.gib(kv.kv_pool_bytes):.2f} GiB: {kv.kv_blocks:,} blocks x {kv.block_size} "
                f"= {kv.kv_tokens:,} tokens (at 32768: 5,021 x 64 = 321,344)")
    return Arm(
        "vllm.maxModelLen", length, f"--max-model-len {length}",
        f"{named}Past 8192 tokens the backend raises the block size with the context so a request takes at most "
        f"{chip_memory.BLOCKS_PER_REQUEST} blocks (exactly that at a power of two), which is why 16384 and 32768 cost "
        f"no KV (321,376 and 321,344 tokens, TPOT 8.05 and 8.02 ms); so {sums}, and it may be free too")


def _padding_gap_arm(settings: Settings) -> Arm:
    gap, tokens = settings.tpu_inference.bucket_padding_gap, settings.vllm.max_num_batched_tokens
    ladder, doubling = chip_memory.token_buckets(tokens, gap), chip_memory.token_buckets(tokens)
    named = "The log's suggestion. " if gap == 128 else ""
    floor = ""
    if tokens >= MULTIMODAL_FLOOR_TOKENS:
        floor = (f"; a {MULTIMODAL_FLOOR_TOKENS}-token step runs as "
                 f"{chip_memory.compiled_bucket(MULTIMODAL_FLOOR_TOKENS, ladder)}, not "
                 f"{chip_memory.compiled_bucket(MULTIMODAL_FLOOR_TOKENS, doubling)}")
    return Arm(
        "tpuInference.bucketPaddingGap", gap, f"VLLM_TPU_BUCKET_PADDING_GAP={gap} in vLLM's environment",
        f"{named}Token buckets double to {max(size for size in ladder if size <= gap)}, then step by {gap}: "
        f"{len(ladder)} shapes up to {ladder[-1]} instead of {len(doubling)} powers of two, each its own XLA "
        f"programs on a cold compile (685 s with the powers of two){floor}")


def _text_only_arm(settings: Settings) -> Arm:
    vllm = settings.vllm
    tokens = vllm.max_num_batched_tokens
    if tokens < MULTIMODAL_FLOOR_TOKENS:
        budget_note = (f"maxNumBatchedTokens {tokens} runs below the {MULTIMODAL_FLOOR_TOKENS}-token floor "
                       "multimodal input sets, the only route to a lower latency floor on this stack")
    else:
        budget_note = (f"maxNumBatchedTokens may now go down to the {TEXT_ONLY_BUCKET} bucket (the "
                       f"{MULTIMODAL_FLOOR_TOKENS}-token floor is gone), the only route to a lower latency floor")
    limits = json.dumps(vllm.limit_mm_per_prompt, separators=(",", ":"))
    return Arm(
        "vllm.limitMmPerPrompt", dict(vllm.limit_mm_per_prompt), f"--limit-mm-per-prompt {limits}",
        f"The log's text-only trade: requests with images or audio are refused, and {budget_note}")


def plan_summary(settings: Settings) -> dict[str, Any]:
    """The offline plan's budget lines for the arms a stack turns on, with the KV and bucket arithmetic they
    change, and tpu-inference's environment; nothing for the log's own configuration (its plan stays as it was)."""
    summary: dict[str, Any] = {}
    environment = settings.tpu_inference.environment()
    if environment:
        summary["tpu_inference_environment"] = environment
    turned_on = untested_arms(settings)
    if not turned_on:
        return summary
    summary["untested_arms"] = [arm.as_plan() for arm in turned_on]
    kv = settings.kv_budget()
    if kv is not None:
        summary["blocks_per_request"] = kv.blocks_per_request
    gap = settings.tpu_inference.bucket_padding_gap
    ladder = chip_memory.token_buckets(settings.vllm.max_num_batched_tokens, gap)
    summary["token_buckets"] = {"count": len(ladder), "largest": ladder[-1], "padding_gap": gap}
    return summary
