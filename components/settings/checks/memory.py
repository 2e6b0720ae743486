"""Cross-key rules of memory: the KV pool, context and planned load against the model's geometry, and the
cache disk's room for the weights."""

from __future__ import annotations

import math
import shlex

from components import sizing
from components.basis import chip_memory
from components.settings import fitting
from components.settings.findings import NO_VALUE, Finding
from components.settings.root import Settings

WEIGHTS_DISK_GB = 20
LOG_CHECKPOINT_BYTES = int(9.54 * chip_memory.GIB)


def memory_checks(settings: Settings) -> list[Finding]:
    """KV pool, context and planned load against the model's geometry, or say what is unchecked."""
    findings: list[Finding] = []
    vllm, geometry = settings.vllm, settings.geometry
    weights = settings.fit.figures["weights"].value if settings.fit is not None else None
    # The log's room: 20 GB for its 9.54 GiB checkpoint and the compile cache; a larger checkpoint, the same ratio.
    need = max(WEIGHTS_DISK_GB, math.ceil(WEIGHTS_DISK_GB * (weights or 0) / LOG_CHECKPOINT_BYTES))
    if vllm.weights_on_disk and settings.cache.size_gb < need:
        checkpoint = "the 9.54 GiB checkpoint" if need == WEIGHTS_DISK_GB else \
            f"the {chip_memory.gib(int(weights)):.2f} GiB checkpoint"
        findings.append(Finding(
            "cache.sizeGb", settings.cache.size_gb,
            f"weightsOnDisk needs room for {checkpoint} and the compile cache", f"use at least {need}",
            also_keys=("vllm.weightsOnDisk",),
        ))
    # vLLM's --kv-cache-memory is "Size of KV Cache per GPU in bytes" (vllm/config/cache.py, 0.33.0): per chip.
    hbm = settings.tpu.shape.hbm_bytes_per_chip
    if vllm.kv_cache_memory_bytes is not None and vllm.kv_cache_memory_bytes >= hbm:
        findings.append(Finding(
            "vllm.kvCacheMemoryBytes", vllm.kv_cache_memory_bytes,
            f"more than one {settings.tpu.accelerator_type} chip's whole HBM ({hbm} bytes, "
            f"{chip_memory.gib(hbm):.2f} GiB) before any weights: vLLM sizes this pool per chip",
            "remove the key (the TPU backend ignores it; gpuMemoryUtilization sizes the pool)",
            also_keys=("tpu.acceleratorType",),
        ))
    pinned = vllm.kv_cache_memory_bytes
    if pinned is not None and pinned < hbm:
        # vLLM 0.33.0 reads kv_cache_memory_bytes only in its GPU/CPU/XPU workers (vllm/v1/worker/gpu_worker.py);
        # tpu-inference 0.32.0's determine_available_memory (tpu_inference/worker/tpu_worker.py) sizes the pool
        # from gpu_memory_utilization alone.
        findings.append(Finding.warning(
            "vllm.kvCacheMemoryBytes", pinned,
            "ignored on TPU: tpu-inference 0.32.0 sizes the KV pool from gpuMemoryUtilization alone "
            "(tpu_worker.py determine_available_memory), so the pool, kvTokens and the load checks here are "
            "gpuMemoryUtilization's",
            "remove it; set vllm.gpuMemoryUtilization to change the pool",
        ))
    if vllm.model_geometry is not None:
        measured = chip_memory.geometry_for(vllm.model) is not None or settings.model_spec is not None
        findings.append(Finding.warning(
            "vllm.modelGeometry", NO_VALUE,
            ("replaces the catalog's geometry of " + vllm.model if measured else "hand-typed geometry")
            + ", sized against one chip with no tensor-parallel padding; vllm.modelConfig reads it from the "
            "model's config.json by tpu-inference's own rules",
            "replace it with vllm.modelConfig: PATH/config.json (docs/models.md)" if not measured else
            "remove it to use the catalog's",
        ))
    else:
        findings += fit_checks(settings)
    if geometry is None and settings.fit is None:
        findings.append(Finding.warning(
            "vllm.model", vllm.model,
            "not in the catalog and no vllm.modelConfig, so these go unchecked: whether the weights fit the chip, "
            "the KV pool and its token count (kvTokens), the planned load against it, maxModelLen against the "
            "model's context, the multimodal batch floor, and "
            "--tensor-parallel-size (1 unless vllm.tensorParallelSize says)",
            "set vllm.modelConfig to the model's config.json (docs/models.md, Moving to another model)",
        ))
        return findings
    if geometry is None:
        return findings + context_checks(settings) + load_checks(settings)

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
    findings += context_checks(settings)

    kv = settings.kv_budget()
    if kv is not None and kv.kv_tokens <= 0 and vllm.model_geometry is not None:
        findings.append(Finding(
            "vllm.gpuMemoryUtilization", vllm.gpu_memory_utilization,
            f"the cap ({chip_memory.gib(kv.hbm_cap_bytes):.2f} GiB) leaves no room for KV after "
            f"{chip_memory.gib(geometry.weights_bytes):.2f} GiB of weights",
            "use 0.92", also_keys=("vllm.modelGeometry",),
        ))
    return findings + load_checks(settings)


def context_checks(settings: Settings) -> list[Finding]:
    """vllm.maxModelLen against the model's context (config.json max_position_embeddings)."""
    vllm, geometry, spec = settings.vllm, settings.geometry, settings.model_spec
    context = geometry.max_context_tokens if geometry is not None else spec.geometry.max_context_tokens if spec \
        else None
    if context and vllm.max_model_len > context:
        return [Finding(
            "vllm.maxModelLen", vllm.max_model_len,
            f"longer than {vllm.model}'s context ({context} tokens, max_position_embeddings in its config.json); "
            f"the server refuses to start ('User-specified max_model_len ({vllm.max_model_len}) is greater than "
            "the derived max_model_len')",
            f"set it to {context} or less (the log's is 32768)", also_keys=("vllm.modelGeometry",),
        )]
    return []


def load_checks(settings: Settings) -> list[Finding]:
    """The planned load against 78% of the pool (the log's rule), and each client's context against the model's."""
    findings: list[Finding] = []
    vllm, load, kv = settings.vllm, settings.load, settings.kv_budget()
    planned = load.clients * load.context_tokens
    if kv is not None and kv.kv_tokens > 0 and planned > kv.load_limit_tokens:
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


def fit_command(settings: Settings) -> str:
    """The tools.fit command that sizes this very model: by its config.json when vllm.modelConfig gives one (an
    uncatalogued model has no --model), else by its catalogued id."""
    vllm = settings.vllm
    which = (f"--model-config {shlex.quote(vllm.hf_config)}" if vllm.hf_config is not None
             else f"--model {shlex.quote(vllm.model)}")
    return f"python -m tools.fit {which} --max-model-len {vllm.max_model_len}"


def fit_checks(settings: Settings) -> list[Finding]:
    """The model on tpu.acceleratorType as tools.fit sizes it: refused when it cannot fit (naming the smallest
    shape that can), an explicit tensor-parallel size the shape does not allow, and a pair nobody measured."""
    fitted, vllm, tpu = settings.fit, settings.vllm, settings.tpu
    if fitted is None:
        return []
    findings: list[Finding] = []
    geometry = settings.model_spec.geometry
    devices = tpu.shape.devices
    choices = sizing.tensor_parallel_choices(geometry, devices)
    working = ", ".join(f"tensorParallelSize {size} x dataParallelSize {devices // size}" for size in choices)
    which = f"--model-config {vllm.hf_config}" if vllm.hf_config is not None else f"--model {vllm.model}"
    planned = f"remove the key{'s' if vllm.tensor_parallel_size and vllm.data_parallel_size else ''} for the planned " \
              f"layout ({fitting.planned_layout_name(settings)}; python -m tools.fit {which} --layouts)"
    if vllm.tensor_parallel_size is not None and vllm.tensor_parallel_size not in choices:
        findings.append(Finding(
            "vllm.tensorParallelSize", vllm.tensor_parallel_size,
            f"{tpu.accelerator_type} has {devices} device(s), and {vllm.model}'s attention and KV heads split "
            f"over tensor-parallel sizes {', '.join(map(str, choices)) or 'none'} there",
            (f"{planned}, or use one that works: {working}" if choices else
             "remove the key, or pick another tpu.acceleratorType (python -m tools.fit)"),
            also_keys=("tpu.acceleratorType",),
        ))
        return findings
    replicas = vllm.data_parallel_size
    if replicas is not None and (devices % replicas or (vllm.tensor_parallel_size or devices // replicas)
                                 * replicas != devices or devices // replicas not in choices):
        size = vllm.tensor_parallel_size
        findings.append(Finding(
            "vllm.dataParallelSize", replicas,
            (f"tensorParallelSize {size} x dataParallelSize {replicas} = {size * replicas} is not the {devices} "
             f"device(s) of {tpu.accelerator_type}" if size is not None else
             f"{tpu.accelerator_type}'s {devices} device(s) do not split into {replicas} replicas that "
             f"{vllm.model}'s heads split over (tensor-parallel sizes {', '.join(map(str, choices)) or 'none'})"),
            f"{planned}, or use one that works: {working}" if choices else
            "remove the key, or pick another tpu.acceleratorType (python -m tools.fit)",
            also_keys=("vllm.tensorParallelSize", "tpu.acceleratorType"),
        ))
        return findings
    # The context's own check (context_checks) says what is wrong with maxModelLen past the model's context.
    reasons = [reason for reason in fitted.reasons if "max_position_embeddings" not in reason]
    if reasons:
        smallest = fitting.smallest_shape(settings)
        fix = (f"put the checkpoint's {fitting.SAFETENSORS_INDEX} beside {vllm.hf_config} (its "
               "metadata.total_size is the weights' bytes)" if fitted.figures["weights"].value is None else
               f"set tpu.acceleratorType to {smallest.accelerator_type}, the smallest shape it fits "
               f"({fit_command(settings)} compares them)" if smallest is not None and
               smallest.accelerator_type != tpu.accelerator_type else
               "no catalogued shape holds it at this vllm.maxModelLen: lower it, or pick a smaller model "
               "(python -m tools.fit)")
        findings.append(Finding(
            "vllm.model", vllm.model,
            f"does not fit {tpu.accelerator_type} at maxModelLen {vllm.max_model_len}: " + "; ".join(reasons)
            + " (computed by tpu-inference's rules, before any cloud call)",
            fix, also_keys=("tpu.acceleratorType",),
        ))
    elif not fitted.measured_here:
        findings.append(Finding.warning(
            "vllm.model", vllm.model,
            f"nobody has measured {vllm.model} on {tpu.accelerator_type}: its {fitted.kv_tokens:,}-token KV pool "
            + (f"is {fitted.data_parallel_size} x the {fitted.measured_point.accelerator_type} boot's "
               f"{fitted.kv_tokens_per_replica:,} (measured there; assumed the same per replica here)"
               if fitted.measured_point is not None else "is computed by tpu-inference's rules, not read from a boot")
            + "; the first deploy is the measurement",
            "after it boots, record the boot log's 'Memory statistics' and 'TPU KV cache size' lines as a measured "
            "point in the catalog (docs/models.md, Recording a measured point)",
            also_keys=("tpu.acceleratorType",),
        ))
    return findings
