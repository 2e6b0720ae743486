"""Whether a model fits a shape, and every figure of its budget, each marked measured (with its source) or
computed (with its formula): HBM, cap, weights, KV bytes per token, pool, pages, tokens, clients, $/hour.

The pool follows tpu-inference 0.32.0's worker (worker/tpu_worker.py determine_available_memory): the HBM limit
summed over the TP chips, times --gpu-memory-utilization, minus the bytes in use after loading the weights; vLLM
then allocates whole pages: pages = pool // (page size x KV bytes per token), and reports
tokens = pages / pages per max-model-len request x max-model-len (pages x page size when the page divides it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from components.catalog import engine_support, paging, weights_index
from components.catalog import measured as catalog_measured
from components.catalog import prices as catalog_prices
from components.catalog.geometry import ConfigError, ModelGeometry, geometry_from_config, read_config
from components.catalog.models import CatalogModel, Family, Weights, family_for
from components.catalog.shapes import Shape, all_shapes
from components.sizing import kv, kv_groups, load_transients, rate

GIB = 1024**3
# vLLM 0.33.0's default (vllm/config/cache.py CacheConfig.gpu_memory_utilization = 0.92); the log measured 0.92
# as the highest that boots on v5e (0.95 died at XLA program allocation), and the v6e run left it at the default.
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92
# The log: "keep clients x context < 250,000 tokens - about 78% of the 321,344-token KV pool". The v6e article
# found no knee at 78% on v6e (TTFT grows linearly with concurrency, no preemption up to 157%).
LOAD_RULE = catalog_measured.KV_LOAD_RULE_OF_THUMB
# tools.fit's default run length for the most one run can cost: the stack's default tpu.maxRunDuration (4h).
DEFAULT_RUN_HOURS = 4.0


@dataclass(frozen=True)
class Figure:
    """One number and how it is known."""

    value: float | int | None
    unit: str
    measured: bool
    basis: str
    """The source when measured; the formula when computed; the flag as typed when given."""
    given: bool = False
    """The user typed it (a --weights-gib): shown as given, never as measured."""

    @property
    def how(self) -> str:
        return f"{'given' if self.given else 'measured' if self.measured else 'computed'}: {self.basis}"


@dataclass(frozen=True)
class ModelSpec:
    """What fit needs of a model, catalogued or read from a config.json."""

    name: str
    geometry: ModelGeometry
    weights: Weights | None
    family: Family | None

    @classmethod
    def of(cls, model: CatalogModel) -> ModelSpec:
        return cls(model.name, model.geometry, model.weights, model.family)

    @classmethod
    def from_config_file(cls, path: str | Path, name: str | None = None,
                         weights_bytes: int | None = None, index: bool = True) -> ModelSpec:
        """Any model by its config.json: weights as given (labelled given), else the safetensors index's total
        beside it (`index`), else counted from the config where its layout allows (Llama, Qwen3 dense and MoE),
        else unknown. Named by the path as given. Raises catalog
        ConfigError in a user's words, vLLM's own for an architecture it refuses or sizes no KV cache for."""
        config = read_config(path)
        geometry = geometry_from_config(config)
        refused = engine_support.refusal(config)
        if refused is not None:
            raise ConfigError(f"architectures {list(geometry.architectures)}: {refused}")
        if weights_bytes is not None:
            weights = Weights(weights_bytes, False, "the bytes given with the config", given=True)
        elif index and (stated := weights_index.index_weights(str(path))) is not None:
            weights = stated
        elif geometry.parameter_count is not None:
            # At the checkpoint's dtype, as the index's total is: fit_layout scales both to the dtype served.
            element = kv.MODEL_DTYPE_BITS.get(geometry.dtype, 16) // 8
            weights = Weights(geometry.parameter_count * element, False,
                              f"parameters counted from config.json x {element} bytes ({geometry.dtype})")
        else:
            weights = None
        return cls(name or str(path), geometry, weights, family_for(geometry.model_type))


@dataclass(frozen=True)
class Fit:
    """One model on one shape at one max-model-len."""

    model: str
    shape: Shape
    max_model_len: int
    kv_cache_dtype: str
    gpu_memory_utilization: float
    tensor_parallel_size: int | None
    fits: bool
    reasons: tuple[str, ...]
    """Why it does not fit (empty when it does)."""
    figures: dict[str, Figure]
    """hbm, cap, weights, kv_bytes_per_token, kv_pool, block_size, kv_blocks, kv_tokens, clients (in this order);
    kv_tokens_measured when a boot measured this pair."""
    usd_per_hour: dict[str, Figure]
    """Per provisioning model, the host's chips in its priced region."""
    max_run_usd: dict[str, Figure]
    """Flex-start: $/hour x the run's hours; the others have no automatic stop (value None)."""
    region: str
    measured_point: catalog_measured.MeasuredPool | None
    family: Family | None
    kv_replication: int = 1
    """How many copies of each KV head the TP padding stores (TP / KV heads when KV heads < TP)."""
    notes: tuple[str, ...] = field(default=())
    data_parallel_size: int = 1
    """Replicas of the model on the host, each on tensor_parallel_size devices (vLLM's --data-parallel-size)."""
    output_rate: Figure | None = None
    """The layout's predicted output tokens/s at the planned load (computed: components/sizing/rate.py)."""
    usd_per_million_output: dict[str, Figure] = field(default_factory=dict)
    """Per provisioning model: the host's $/hour over output_rate."""

    @property
    def kv_tokens_per_replica(self) -> int:
        """One replica's pool in tokens: the measured figure where a boot measured this pair, else the computed one."""
        chosen = self.figures.get("kv_tokens_measured") or self.figures.get("kv_tokens")
        return int(chosen.value or 0) if chosen is not None else 0

    @property
    def kv_tokens(self) -> int:
        """The host's pool in tokens: every replica's."""
        return self.kv_tokens_per_replica * self.data_parallel_size

    @property
    def layout(self) -> str:
        """How the stack names the layout to a user: TP t x DP d."""
        return f"tensor-parallel {self.tensor_parallel_size or '-'} x data-parallel {self.data_parallel_size}"

    @property
    def measured_here(self) -> bool:
        """Whether anyone booted this model on this shape (any context)."""
        return catalog_measured.measured_on(self.model, self.shape.accelerator_type)

    def serve_flags(self) -> dict[str, str]:
        """The `vllm serve` flags that follow from this fit (for the serving spec and vLLM's parser check)."""
        flags = {"--max-model-len": str(self.max_model_len)}
        if self.tensor_parallel_size is not None:
            flags["--tensor-parallel-size"] = str(self.tensor_parallel_size)
        if self.data_parallel_size > 1:
            flags["--data-parallel-size"] = str(self.data_parallel_size)
        if self.family is not None and self.family.tool_call_parser:
            flags["--tool-call-parser"] = self.family.tool_call_parser
        if self.family is not None and self.family.reasoning_parser:
            flags["--reasoning-parser"] = self.family.reasoning_parser
        return flags


def _gib(value: int) -> str:
    return f"{value / GIB:.2f} GiB"


def fit_layout(model: ModelSpec | CatalogModel, shape: Shape, max_model_len: int, *,
               gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION, kv_cache_dtype: str = "auto",
               context_tokens: int | None = None, clients: int | None = None, region: str | None = None,
               run_hours: float = DEFAULT_RUN_HOURS, tensor_parallel_size: int | None = None,
               data_parallel_size: int | None = None,
               max_num_batched_tokens: int = kv_groups.DEFAULT_MAX_NUM_BATCHED_TOKENS,
               max_num_seqs: int | None = None, dtype: str = "auto") -> Fit:
    """Size `model` on `shape` at one layout: `tensor_parallel_size` and/or `data_parallel_size` (the other
    follows from the host's devices; components/sizing/layouts.py fit() plans them when neither is given).
    `context_tokens` (default max_model_len) is what each client holds for the 78% rule; `clients` adds a check
    of that many and is the load the output rate is predicted at (default rate.DEFAULT_PLANNED_CLIENTS);
    `max_num_batched_tokens` sets the in-flight tokens a sliding-window group holds beyond its window;
    `max_num_seqs` (vLLM's default when None) bounds the page table, so it can raise the page size; `dtype` is
    vLLM's --dtype: the weights and an "auto" KV cache are sized at the dtype it serves (kv.served_dtype)."""
    if tensor_parallel_size is None and data_parallel_size is None:
        raise ValueError("fit_layout sizes a given layout: give tensor_parallel_size or data_parallel_size")
    spec = model if isinstance(model, ModelSpec) else ModelSpec.of(model)
    geometry = spec.geometry
    reasons: list[str] = []
    notes: list[str] = []
    context = context_tokens or max_model_len
    devices = shape.devices
    # What tensor parallelism counts: chips, or a TPU7x chip's two TensorCores (v5e and v6e keep their words).
    unit = "device(s)" if shape.generation.devices_per_chip > 1 else "chip(s)"
    tp = tensor_parallel_size or (devices // data_parallel_size if devices % data_parallel_size == 0 else None)
    dp = data_parallel_size or (devices // tp if tp and devices % tp == 0 else 1)
    if tp is None or tp * dp != devices:
        reasons.append(f"tensor-parallel {tp or '?'} x data-parallel {dp} is not this host's {devices} devices")
        tp = None
    elif (split := whole_chips_per_rank(tp, dp, shape)) is not None:
        reasons.append(split)
        tp = None
    elif tp not in kv.tensor_parallel_choices(geometry, devices):
        reasons.append(f"{geometry.num_attention_heads} attention heads and KV heads {sorted(geometry.kv_heads)} "
                       f"split over none of this host's tensor-parallel sizes"
                       if not kv.tensor_parallel_choices(geometry, devices) else
                       f"tensor-parallel size {tp} does not split this model on "
                       + (f"{shape.chips} chips" if unit == "chip(s)" else f"{devices} devices"))
        tp = None
    if geometry.max_context_tokens and max_model_len > geometry.max_context_tokens:
        reasons.append(f"max-model-len {max_model_len} is past the model's context ({geometry.max_context_tokens}, "
                       "max_position_embeddings): vLLM refuses it")
    figures: dict[str, Figure] = {}
    replication = 1
    used_chips = tp or devices
    hbm = shape.hbm_bytes_per_device * used_chips
    per_chip = shape.generation.devices_per_chip
    if per_chip > 1:
        # TensorCores as JAX devices (TPU7x): tensor parallelism counts devices, and each has half its chip's HBM.
        figures["hbm"] = Figure(hbm, "bytes", False,
                                f"{used_chips} devices x {_gib(shape.hbm_bytes_per_device)} per device (a chip's "
                                f"{_gib(shape.hbm_bytes_per_chip)} over its {per_chip} devices; "
                                f"{shape.generation.hbm_source.where}, "
                                f"{'measured' if shape.generation.hbm_measured else 'given, not measured'})")
    else:
        figures["hbm"] = Figure(hbm, "bytes", shape.generation.hbm_measured and used_chips == 1,
                                str(shape.generation.hbm_source) if used_chips == 1 else
                                f"{used_chips} chips x {_gib(shape.hbm_bytes_per_chip)} per chip "
                                f"({shape.generation.hbm_source.where}; assumed the same per chip on a "
                                f"{shape.chips}-chip host: measured on 1-chip hosts only)")
    cap = hbm * gpu_memory_utilization
    figures["cap"] = Figure(int(cap), "bytes", False, f"HBM x --gpu-memory-utilization {gpu_memory_utilization}")
    served = kv.served_dtype(dtype, geometry.dtype, geometry.model_type)
    if served not in kv.MODEL_DTYPE_BITS:
        reasons.append(f"--dtype {dtype} serves this model at {served}, which is not sized here (sized: "
                       f"{', '.join(kv.MODEL_DTYPE_BITS)})")
        tp = None
    weights = _weights_served(spec.weights, geometry.dtype, served, dtype)
    if weights is None:
        reasons.append("the weights' size is not known: give it (a measured figure or the safetensors index's "
                       "metadata.total_size)")
        figures["weights"] = Figure(None, "bytes", False, "unknown")
    else:
        figures["weights"] = Figure(weights.bytes, "bytes", weights.measured, weights.basis, given=weights.given)
        if tp and tp > 1:
            notes.append("weights split over the chips; tensors replicated per chip (e.g. KV projections padded to "
                         "the TP size) add to them and are not counted")
        notes.extend(load_transients.notes(geometry))
    block = kv.block_size(max_model_len, max_num_seqs or paging.DEFAULT_MAX_NUM_SEQS)
    figures["block_size"] = Figure(block, "tokens", False, "tpu-inference's page size: 16 past 8192 tokens, else "
                                   "next_pow2(len)/16 in [16, 256]; at least next_pow2(len / (131,072 // "
                                   f"max_num_seqs {max_num_seqs or paging.DEFAULT_MAX_NUM_SEQS}))")
    kv_plan = None
    if tp is not None:
        try:
            kv_plan = kv_groups.plan(geometry, tp, kv_cache_dtype, block, max_model_len, max_num_batched_tokens,
                                     dtype)
        except kv_groups.UnsizedKvCacheError as error:
            reasons.append(str(error))
    if kv_plan is not None:
        per_token = kv.kv_bytes_per_token(geometry, tp, kv_cache_dtype, dtype)
        heads = min(geometry.kv_heads)
        replication = max(1, tp // heads) if heads < tp else 1
        figures["kv_bytes_per_token"] = Figure(per_token, "bytes", False, _per_token_formula(
            geometry, tp, kv.kv_bits(kv_cache_dtype, served)))
        if replication > 1:
            notes.append(f"{heads} KV head(s) padded to TP {tp}: every token's KV is stored {replication} times")
        if kv_plan.hybrid:
            figures["kv_groups"] = Figure(len(kv_plan.groups), "groups", False, _groups_basis(kv_plan))
            figures["kv_block_bytes"] = Figure(kv_plan.bytes_per_block, "bytes", False,
                                               "the largest group's pages summed (one block of the shared pool)")
            figures["kv_blocks_per_request"] = Figure(kv_plan.blocks_per_request, "pages", False, (
                f"full groups ceil(max_model_len / block_size) each; window groups ceil(min(window - 1 + "
                f"{kv_plan.in_flight_tokens:,} in-flight tokens (2 x --max-num-batched-tokens "
                f"{max_num_batched_tokens:,}), max_model_len) / block_size) + 1 each"))
    if kv_plan is not None and weights is not None:
        pool = int(cap - weights.bytes)
        figures["kv_pool"] = Figure(pool, "bytes", False, "cap - weights")
        if pool <= 0:
            reasons.append(f"weights ({_gib(weights.bytes)}) fill the cap ({_gib(int(cap))} = "
                           f"{gpu_memory_utilization} x {_gib(hbm)} over {used_chips} {unit})")
        blocks = kv_plan.blocks(pool)
        figures["kv_blocks"] = Figure(blocks, "pages", False, "kv_pool // kv_block_bytes" if kv_plan.hybrid else
                                      "kv_pool // (block_size x kv_bytes_per_token)")
        # vLLM's "GPU KV cache size" (v1/core/kv_cache_utils.py get_kv_cache_capacity): the pages over the pages
        # one max-model-len request takes, times max-model-len (kv_blocks x block_size when it divides evenly).
        tokens = kv_plan.capacity_tokens(blocks, max_model_len)
        figures["kv_tokens"] = Figure(tokens, "tokens", False,
                                      "int(kv_blocks / kv_blocks_per_request x max_model_len)" if kv_plan.hybrid else
                                      "int(kv_blocks / ceil(max_model_len / block_size) x max_model_len)")
        if pool > 0 and not kv_plan.one_request_fits(blocks):
            reasons.append(f"the KV pool holds {blocks:,} pages ({tokens:,} tokens), less than one "
                           f"{max_model_len:,}-token request's {kv_plan.blocks_per_request:,} pages plus the null "
                           "block vLLM holds back: vLLM refuses to start")
    # A replica of t chips sizes its pool from its own chips (tpu_worker.py determine_available_memory over
    # self.devices), as a t-chip host of the same generation does: that host's boot measures it.
    replica_shape = shape if dp == 1 else next(
        (candidate for candidate in all_shapes() if candidate.generation == shape.generation
         and candidate.devices == tp), None)
    # The boots measured the model at its default dtype: served otherwise, the pool is computed only.
    measured_dtype = served == kv.served_dtype("auto", geometry.dtype, geometry.model_type)
    point = None if replica_shape is None or not measured_dtype else catalog_measured.measured_pool(
        spec.name, replica_shape.accelerator_type, max_model_len, gpu_memory_utilization, kv_cache_dtype)
    if point is not None and tp == point.tensor_parallel_size:
        figures["kv_tokens_measured"] = Figure(point.kv_tokens, "tokens", True, point.cited if dp == 1 else (
            f"{point.cited}: a {point.accelerator_type} boot, per replica (each of the {dp} replicas here sizes its "
            f"pool from {tp} {unit} as that host does; the per-chip HBM assumed the same)"))
    else:
        point = None
    pool_tokens = int((figures.get("kv_tokens_measured") or figures.get("kv_tokens")
                       or Figure(0, "tokens", False, "")).value or 0)
    per_replica_clients = int(pool_tokens * LOAD_RULE) // context
    if dp > 1:
        notes.append(f"{dp} data-parallel replicas of {tp} {unit}: hbm, cap, weights, kv_pool, kv_blocks and "
                     "kv_tokens are one replica's; kv_tokens_all and clients are the host's")
        figures["kv_tokens_all"] = Figure(pool_tokens * dp, "tokens", False,
                                          f"{dp} data-parallel replicas x kv_tokens (each replica its own pool)")
        figures["clients"] = Figure(per_replica_clients * dp, "clients", False,
                                    f"{dp} replicas x (int(kv_tokens x {LOAD_RULE}) // {context:,}-token context): "
                                    "the log's 78% rule per replica, a client's KV never spans two")
    else:
        figures["clients"] = Figure(per_replica_clients, "clients", False,
                                    f"int(kv_tokens x {LOAD_RULE}) // {context:,}-token context (the log's 78% rule)")
    host_tokens = pool_tokens * dp
    if clients is not None and clients * context > int(host_tokens * LOAD_RULE):
        notes.append(f"{clients} clients x {context:,} tokens = {clients * context:,}, over 78% of the "
                     f"{host_tokens:,}-token pool")
    chosen_region = region or shape.generation.price_region
    usd, run_usd = _costs(shape, chosen_region, run_hours)
    if not usd:
        priced = catalog_prices.priced_regions(shape.generation.name)
        notes.append(f"no {shape.generation.name} price read for {chosen_region} (priced: {', '.join(priced)})"
                     if priced else price_not_found(shape.generation.name, chosen_region))
    predicted = None
    if kv_plan is not None and weights is not None and pool_tokens > 0:
        predicted = rate.predict(spec.name, weights.bytes, int(figures["kv_bytes_per_token"].value), shape, tp, dp,
                                 pool_tokens, clients or rate.DEFAULT_PLANNED_CLIENTS, context)
    output_rate = None if predicted is None else Figure(round(predicted.output_tokens_per_second, 1), "tokens/s",
                                                        False, predicted.basis)
    per_million = {} if output_rate is None else {
        name: Figure(round(rate.usd_per_million(hourly.value, predicted.output_tokens_per_second), 4),
                     "USD per million output tokens", False, f"{name} $/hour / (output tokens/s x 3600) x 10^6")
        for name, hourly in usd.items()}
    return Fit(model=spec.name, shape=shape, max_model_len=max_model_len, kv_cache_dtype=kv_cache_dtype,
               gpu_memory_utilization=gpu_memory_utilization, tensor_parallel_size=tp, fits=not reasons,
               reasons=tuple(reasons), figures=figures, usd_per_hour=usd, max_run_usd=run_usd, region=chosen_region,
               measured_point=point, family=spec.family, kv_replication=replication, notes=tuple(notes),
               data_parallel_size=dp, output_rate=output_rate, usd_per_million_output=per_million)


def _weights_served(weights: Weights | None, checkpoint: str, served: str, dtype: str) -> Weights | None:
    """The weights at the dtype served: the checkpoint's bytes (measured, indexed or counted at its dtype) scaled
    by the served dtype's bits over the checkpoint's (vLLM loads them cast; float32 doubles a bf16 checkpoint). Bytes
    given stay as typed: they are the resident bytes."""
    if weights is None or weights.given or checkpoint not in kv.MODEL_DTYPE_BITS or served not in kv.MODEL_DTYPE_BITS:
        return weights
    served_bits, checkpoint_bits = kv.MODEL_DTYPE_BITS[served], kv.MODEL_DTYPE_BITS[checkpoint]
    if served_bits == checkpoint_bits:
        return weights
    return Weights(weights.bytes * served_bits // checkpoint_bits, False,
                   f"{weights.basis}, x {served_bits}/{checkpoint_bits}: --dtype {dtype} loads the {checkpoint} "
                   f"checkpoint as {served}")


def _per_token_formula(geometry: ModelGeometry, tp: int, bits: int) -> str:
    """The formula as computed: head_dim 64 has its own kernel, K and V side by side in 128 lanes (kv.py)."""
    element = f"{bits // 8} B x TP"
    heads = f"KV heads padded to TP {tp} / TP"
    terms = []
    for head_dim in sorted(geometry.head_dims):
        layers = sum(1 for layer in geometry.kv_layers if layer.head_dim == head_dim)
        if kv.padded_head_dim(head_dim) == 64:
            terms.append(f"{layers} cache-owning layers (head_dim 64) x align({heads}, packing) x 128 lanes (K and "
                         f"V side by side) x {element}")
        else:
            terms.append(f"{layers} cache-owning layers x align(2 x {heads}, packing) x head_dim {head_dim} padded "
                         f"to 128 x {element}")
    return " + ".join(terms)


def _groups_basis(kv_plan: kv_groups.KvPlan) -> str:
    full = [group for group in kv_plan.groups if group.sliding_window is None]
    window = [group for group in kv_plan.groups if group.sliding_window is not None]
    parts = []
    if full:
        parts.append(f"{len(full)} full-attention")
    if window:
        sizes = sorted({group.sliding_window for group in window})
        parts.append(f"{len(window)} sliding-window ({', '.join(f'{size:,}' for size in sizes)} tokens)")
    return (f"vLLM's get_kv_cache_groups: {' + '.join(parts)} group(s) of up to "
            f"{max(len(group.layers) for group in kv_plan.groups)} layers sharing one block pool")


def _costs(shape: Shape, region: str, run_hours: float) -> tuple[dict[str, Figure], dict[str, Figure]]:
    usd: dict[str, Figure] = {}
    run_usd: dict[str, Figure] = {}
    for model_name, price in catalog_prices.chip_prices(shape.generation.name, region).items():
        hourly = price.usd_per_chip_hour * shape.chips
        usd[model_name] = Figure(hourly, "USD/hour", False,
                                 f"{shape.chips} chip(s) x ${price.usd_per_chip_hour}/chip-hour ({price.source})")
        if model_name in catalog_prices.SELF_STOPPING_MODELS:
            run_usd[model_name] = Figure(hourly * run_hours, "USD", False,
                                         f"USD/hour x {run_hours:g} h (--max-run-duration stops it)")
        else:
            run_usd[model_name] = Figure(None, "USD", False, "no automatic stop: bills until deleted or preempted")
    return usd, run_usd


def price_not_found(generation: str, region: str, provisioning_model: str | None = None) -> str:
    """The words every cost line uses where no price was read for the chip: no figure stands in for it."""
    what = " ".join(part for part in (generation, provisioning_model) if part)
    where = f" in {region}" if region else " in any region"
    return (f"price not found ({what}{where}: components/catalog/prices.py holds only prices someone read, each "
            "with its source)")


def whole_chips_per_rank(tensor_parallel_size: int, data_parallel_size: int, shape: Shape) -> str | None:
    """Why t x d does not fit the host's chips, or None. tpu-inference 0.32.0 isolates each multi-process
    data-parallel rank on whole chips, ceil(t / cores per chip) of them (worker/tpu_worker.py
    _setup_dp_chip_isolation: chips_per_rank = math.ceil(num_devices / cores_per_chip)), so on a chip of two devices
    (TPU7x) a rank of one device still takes a chip: d ranks then need more chips than the host has, or leave
    devices idle."""
    per_chip = shape.generation.devices_per_chip
    if data_parallel_size == 1 or per_chip == 1:
        return None
    chips_per_rank = -(-tensor_parallel_size // per_chip)
    if chips_per_rank * data_parallel_size * per_chip == shape.devices:
        return None
    return (f"tpu-inference gives each of the {data_parallel_size} data-parallel ranks whole chips (ceil("
            f"{tensor_parallel_size} / {per_chip} devices per chip) = {chips_per_rank}): "
            f"{chips_per_rank * data_parallel_size} chips, the host has {shape.chips}; use a tensor-parallel size "
            f"that is a multiple of {per_chip}")
