"""Cross-key rules of memory: the KV pool, context and planned load against the model's geometry, and the
cache disk's room for the weights."""

from __future__ import annotations

from components.basis import chip_memory
from components.settings.findings import NO_VALUE, Finding
from components.settings.root import Settings


def memory_checks(settings: Settings) -> list[Finding]:
    """KV pool, context and planned load against the model's geometry, or say what is unchecked."""
    findings: list[Finding] = []
    vllm, geometry, load = settings.vllm, settings.geometry, settings.load
    if vllm.weights_on_disk and settings.cache.size_gb < 20:
        findings.append(Finding(
            "cache.sizeGb", settings.cache.size_gb,
            "weightsOnDisk needs room for the 9.54 GiB checkpoint and the compile cache", "use at least 20",
            also_keys=("vllm.weightsOnDisk",),
        ))
    if vllm.model_geometry is not None and chip_memory.geometry_for(vllm.model) is not None:
        findings.append(Finding.warning(
            "vllm.modelGeometry", NO_VALUE, f"replaces the log's measured geometry of {vllm.model}",
            "remove it to use the measured one",
        ))
    if geometry is None:
        findings.append(Finding.warning(
            "vllm.model", vllm.model,
            "no measured geometry, so these go unchecked: whether the weights fit the chip, the KV pool and its "
            "token count (kvTokens), the planned load against it, maxModelLen against the model's context, "
            "kvCacheMemoryBytes against what is left, and the multimodal batch floor",
            "supply it as vllm.modelGeometry (weightsGib, kvLayers, maxContextTokens; see docs/settings.md, "
            "Changing the model)",
        ))
        return findings

    floor = geometry.max_tokens_per_mm_item
    if (vllm.disable_chunked_mm_input and vllm.multimodal_enabled and floor
            and vllm.max_num_batched_tokens < floor):
        findings.append(Finding(
            "vllm.maxNumBatchedTokens", vllm.max_num_batched_tokens,
            "the server refuses to start: 'ValueError: Chunked MM input disabled but "
            f"max_tokens_per_mm_item ({floor}) is larger than max_num_batched_tokens "
            f"({vllm.max_num_batched_tokens}). Please increase max_num_batched_tokens.'",
            f"use {chip_memory.next_power_of_two(floor)}, or set limitMmPerPrompt to zeros for text only",
            also_keys=("vllm.limitMmPerPrompt", "vllm.disableChunkedMmInput", "vllm.modelGeometry"),
        ))
    context = geometry.max_context_tokens
    if context and vllm.max_model_len > context:
        findings.append(Finding(
            "vllm.maxModelLen", vllm.max_model_len,
            f"longer than {vllm.model}'s context ({context} tokens, max_position_embeddings in its config.json); "
            f"the server refuses to start ('User-specified max_model_len ({vllm.max_model_len}) is greater than "
            "the derived max_model_len')",
            f"set it to {context} or less (the log's is 32768)", also_keys=("vllm.modelGeometry",),
        ))

    pinned = vllm.kv_cache_memory_bytes
    if pinned is not None:
        measured = chip_memory.kv_pool_bytes(geometry, chip_memory.HIGHEST_BOOTING_GPU_MEMORY_UTILIZATION)
        failing = chip_memory.kv_pool_bytes(geometry, chip_memory.FAILING_GPU_MEMORY_UTILIZATION)
        if pinned >= failing:
            findings.append(Finding(
                "vllm.kvCacheMemoryBytes", pinned,
                f"with {chip_memory.gib(geometry.weights_bytes):.2f} GiB of weights that leaves less HBM for compiled "
                f"XLA programs than the 0.95 run, whose {chip_memory.gib(failing):.2f} GiB pool died at XLA program "
                "allocation ~691 s in (RuntimeProgramAllocationFailure)",
                f"use {max(measured, 0)} or less (the pool gpuMemoryUtilization 0.92 leaves)",
                also_keys=("vllm.modelGeometry",),
            ))
        elif pinned > measured:
            findings.append(Finding.warning(
                "vllm.kvCacheMemoryBytes", pinned,
                f"larger than the measured-good {measured} (0.92's pool) and untested: the margin for compiled "
                "programs shrinks toward the 0.95 failure, and finding out costs a ~11 min compile",
                f"use {measured} or less",
            ))

    kv = settings.kv_budget()
    if pinned is None and kv.kv_tokens <= 0:
        findings.append(Finding(
            "vllm.gpuMemoryUtilization", vllm.gpu_memory_utilization,
            f"the cap ({chip_memory.gib(kv.hbm_cap_bytes):.2f} GiB) leaves no room for KV after "
            f"{chip_memory.gib(geometry.weights_bytes):.2f} GiB of weights",
            "use 0.92", also_keys=("vllm.modelGeometry",),
        ))
    planned = load.clients * load.context_tokens
    if kv.kv_tokens > 0 and planned > kv.load_limit_tokens:
        findings.append(Finding.warning(
            "load", {"clients": load.clients, "contextTokens": load.context_tokens},
            f"{load.clients} clients x {load.context_tokens} tokens = {planned:,} KV tokens, over ~78% of the "
            f"{kv.kv_tokens:,}-token pool ({kv.load_limit_tokens:,}); past it you pay in tail latency for "
            "throughput you don't get (the log's 8K x 64 cell: TTFT 11.7 s)",
            "keep clients x context under that",
        ))
    if load.context_tokens > vllm.max_model_len:
        findings.append(Finding(
            "load.contextTokens", load.context_tokens, f"longer than vllm.maxModelLen ({vllm.max_model_len})",
            "lower it or raise maxModelLen", also_keys=("vllm.maxModelLen",),
        ))
    return findings
