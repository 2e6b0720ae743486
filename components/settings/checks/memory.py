"""Cross-key rules of memory: the KV pool, context and planned load against the model's geometry."""

from __future__ import annotations

from components import budget
from components.settings.facts import NAMESPACE
from components.settings.root import Settings


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
