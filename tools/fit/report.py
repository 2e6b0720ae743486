"""The fit report: one row per catalogued shape, as text or JSON, from components/sizing."""

from __future__ import annotations

import dataclasses
from typing import Any

from components import catalog, sizing
from components.catalog.models import Weights
from components.settings.text import escaped
from components.sizing import Figure, Fit, ModelSpec

GIB = 1024**3


class FitInputError(ValueError):
    """A bad --model / --model-config / number: the message names the flag, the value and the fix."""


def resolve_model(name: str | None = None, config_path: str | None = None,
                  weights_gib: float | None = None) -> ModelSpec:
    """A catalogued model by its Hugging Face id, or any model by its config.json (weights counted from the config
    where its layout allows, else from --weights-gib)."""
    if (name is None) == (config_path is None):
        raise FitInputError("give exactly one of --model NAME (catalogued) or --model-config PATH (a config.json)")
    if name is not None:
        model = catalog.catalog_model(name)
        if model is None:
            known = ", ".join(candidate.name for candidate in catalog.catalog_models())
            raise FitInputError(f"--model {name} is not catalogued ({known}); for any other model give its "
                                "config.json: --model-config PATH")
        spec = ModelSpec.of(model)
        if weights_gib is not None:
            spec = dataclasses.replace(spec, weights=_given_weights(weights_gib))
        return spec
    try:
        weights_bytes = None if weights_gib is None else _given_weights(weights_gib).bytes
        spec = ModelSpec.from_config_file(config_path, weights_bytes=weights_bytes)
    except catalog.ConfigError as error:
        shown = str(error) if str(error).startswith(str(config_path)) else f"{config_path}: {error}"
        raise FitInputError(f"--model-config {escaped(shown)}") from None
    if weights_gib is not None:
        spec = dataclasses.replace(spec, weights=_given_weights(weights_gib))
    return spec


def _given_weights(weights_gib: float) -> Weights:
    if weights_gib <= 0:
        raise FitInputError(f"--weights-gib {weights_gib}: the weights' resident size in GiB, above 0")
    return Weights(int(weights_gib * GIB), False, f"--weights-gib {weights_gib}", given=True)


def rows(model: ModelSpec, max_model_len: int, **options: Any) -> tuple[Fit, ...]:
    try:
        return sizing.fits_by_shape(model, max_model_len, **options)
    except sizing.SizingError as error:
        raise FitInputError(str(error)) from None


def _figure_json(figure: Figure) -> dict[str, Any]:
    return {"value": figure.value, "unit": figure.unit, "measured": figure.measured, "given": figure.given,
            "basis": figure.basis}


def report_json(model: ModelSpec, max_model_len: int, fits: tuple[Fit, ...]) -> dict[str, Any]:
    return {
        "model": model.name,
        "max_model_len": max_model_len,
        "rows": [{
            "shape": result.shape.accelerator_type,
            "chips": result.shape.chips,
            "fits": result.fits,
            "reasons": list(result.reasons),
            "tensor_parallel_size": result.tensor_parallel_size,
            "layout": _layout_json(result),
            "output_rate": None if result.output_rate is None else _figure_json(result.output_rate),
            "usd_per_million_output": {name: _figure_json(figure)
                                       for name, figure in result.usd_per_million_output.items()},
            "figures": {name: _figure_json(figure) for name, figure in result.figures.items()},
            "usd_per_hour": {name: _figure_json(figure) for name, figure in result.usd_per_hour.items()},
            "max_run_usd": {name: _figure_json(figure) for name, figure in result.max_run_usd.items()},
            "region": result.region,
            "measured_on_this_shape": result.measured_here,
            "serve_flags": result.serve_flags(),
            "notes": list(result.notes),
        } for result in fits],
    }


def _layout_json(result: Fit) -> dict[str, Any]:
    return {"tensor_parallel_size": result.tensor_parallel_size, "data_parallel_size": result.data_parallel_size}


def layouts_json(model: ModelSpec, max_model_len: int, fits: tuple[Fit, ...], **options: Any) -> dict[str, list]:
    """Per shape, every layout (the chosen one marked), for --layouts --json."""
    return {result.shape.accelerator_type: [{
        **_layout_json(candidate), "chosen": _same_layout(candidate, result), "fits": candidate.fits,
        "reasons": list(candidate.reasons), "kv_tokens_per_replica": candidate.kv_tokens_per_replica,
        "kv_tokens": candidate.kv_tokens, "clients": _figure_json(candidate.figures["clients"])
        if "clients" in candidate.figures else None,
        "output_rate": None if candidate.output_rate is None else _figure_json(candidate.output_rate),
        "usd_per_million_output": {name: _figure_json(figure)
                                   for name, figure in candidate.usd_per_million_output.items()},
    } for candidate in _layouts(model, result, max_model_len, **options)] for result in fits}


def _same_layout(candidate: Fit, chosen: Fit) -> bool:
    return (candidate.tensor_parallel_size, candidate.data_parallel_size) == (chosen.tensor_parallel_size,
                                                                              chosen.data_parallel_size)


def _layouts(model: ModelSpec, result: Fit, max_model_len: int, **options: Any) -> tuple[Fit, ...]:
    try:
        return sizing.all_layouts(model, result.shape, max_model_len, **options)
    except sizing.SizingError as error:
        raise FitInputError(str(error)) from None


def layouts_text(model: ModelSpec, max_model_len: int, fits: tuple[Fit, ...], **options: Any) -> str:
    """Every layout of every shape: KV per replica and in all, clients, the computed rate and $/M output tokens."""
    clients = options.get("clients") or sizing.DEFAULT_PLANNED_CLIENTS
    context = options.get("context_tokens") or max_model_len
    lines = [f"Layouts (tensor-parallel t x data-parallel d = the host's devices), at {clients} clients x "
             f"{context:,} tokens; rate and $/M computed: {sizing.RATE_FORMULA_SUMMARY}\n",
             f"{'shape':<12} {'t':>2} {'d':>2} {'fits':<5} {'KV/replica':>11} {'KV in all':>11} {'clients':>7} "
             f"{'tokens/s':>9} {'flex $/M':>9} {'spot $/M':>9}"]
    for result in fits:
        for candidate in _layouts(model, result, max_model_len, **options):
            mark = " <- planned" if _same_layout(candidate, result) and candidate.fits else ""
            lines.append(
                f"{result.shape.accelerator_type:<12} {candidate.tensor_parallel_size or '-':>2} "
                f"{candidate.data_parallel_size:>2} {'yes' if candidate.fits else 'no':<5} "
                f"{candidate.kv_tokens_per_replica:>11,} {candidate.kv_tokens:>11,} "
                f"{_value(candidate.figures.get('clients')):>7} {_value(candidate.output_rate):>9} "
                f"{_per_million(candidate, 'flex-start'):>9} {_per_million(candidate, 'spot'):>9}{mark}")
    lines.append("\nThe planned layout: the lowest $ per million output tokens among those that hold one "
                 "max-model-len request; ties to fewer replicas (components/sizing/layouts.py).")
    return "\n".join(lines)


def _per_million(result: Fit, provisioning_model: str) -> str:
    figure = result.usd_per_million_output.get(provisioning_model)
    return "-" if figure is None or figure.value is None else f"${figure.value:.3f}"


def _value(figure: Figure | None) -> str:
    if figure is None or figure.value is None:
        return "-"
    if figure.unit == "bytes":
        return f"{figure.value / GIB:.2f} GiB" if figure.value >= GIB else f"{figure.value:,} B"
    if figure.unit in ("USD/hour", "USD"):
        return f"${figure.value:,.2f}"
    return f"{figure.value:,}"


def _tokens(result: Fit) -> str:
    """The host's pool (every replica's), starred where a boot measured the replica's."""
    if "kv_tokens" not in result.figures:
        return "-"
    return f"{result.kv_tokens:,}" + ("*" if "kv_tokens_measured" in result.figures else "")


def report_text(model: ModelSpec, max_model_len: int, fits: tuple[Fit, ...], context_tokens: int | None = None) -> str:
    context = context_tokens or max_model_len
    header = (f"{model.name} at --max-model-len {max_model_len:,} (KV dtype {fits[0].kv_cache_dtype}, "
              f"--gpu-memory-utilization {fits[0].gpu_memory_utilization}); clients at {context:,} tokens each\n")
    # The shape column fits the longest name (Compute Engine's machine types are longer than v5litepod-8).
    width = max(12, *(len(result.shape.accelerator_type) for result in fits))
    lines = [header,
             f"{'shape':<{width}} {'fits':<5} {'TP':>2} {'DP':>2} {'KV B/token':>11} {'KV tokens':>11} {'clients':>7} "
             f"{'flex $/h':>9} {'spot $/h':>9} {'flex run':>9} {'flex $/M':>9}"]
    for result in fits:
        lines.append(
            f"{result.shape.accelerator_type:<{width}} {'yes' if result.fits else 'no':<5} "
            f"{result.tensor_parallel_size or '-':>2} {result.data_parallel_size:>2} "
            f"{_value(result.figures.get('kv_bytes_per_token')):>11} "
            f"{_tokens(result):>11} {_value(result.figures.get('clients')):>7} "
            f"{_value(result.usd_per_hour.get('flex-start')):>9} {_value(result.usd_per_hour.get('spot')):>9} "
            f"{_value(result.max_run_usd.get('flex-start')):>9} {_per_million(result, 'flex-start'):>9}")
    unpriced = [result for result in fits if not result.usd_per_hour]
    lines.append("* measured: a boot logged the pool of each replica (the computed figure is below); KV tokens and "
                 "clients are the host's, every replica's; $/M: computed (the layout's rate, below)"
                 + "".join(f"\n- ({result.shape.accelerator_type}): "
                           f"{sizing.price_not_found(result.shape.generation.name, result.region)}"
                           for result in unpriced) + "\n")
    for result in fits:
        lines.append(f"{result.shape.accelerator_type} ({_host(result.shape)}, data disk "
                     f"{result.shape.cache_disk_type}, prices {result.region if result.usd_per_hour else 'not found'})"
                     f": {'fits' if result.fits else 'does not fit'}, {result.layout} "
                     "(planned: python -m tools.fit --layouts shows the others)")
        for reason in result.reasons:
            lines.append(f"  why not: {reason}")
        for name, figure in result.figures.items():
            lines.append(f"  {name:<19} {_value(figure):>14}  {figure.how}")
        if result.output_rate is not None:
            lines.append(f"  {'output tokens/s':<19} {_value(result.output_rate):>14}  {result.output_rate.how}")
        for name, figure in result.usd_per_hour.items():
            lines.append(f"  {name + ' $/hour':<19} {_value(figure):>14}  {figure.how}")
        for name, figure in result.usd_per_million_output.items():
            lines.append(f"  {name + ' $/M out':<19} {'$' + format(figure.value, '.4f'):>14}  {figure.how}")
        for name, figure in result.max_run_usd.items():
            lines.append(f"  {name + ' one run':<19} {_value(figure) if figure.value is not None else 'unbounded':>14}"
                         f"  {figure.how}")
        for note in result.notes:
            lines.append(f"  note: {note}")
        if not result.measured_here:
            lines.append("  unmeasured: nobody has booted this model on this shape; the first deploy is the "
                         "measurement (docs/models.md, Recording a measured point)")
        lines.append("")
    return "\n".join(lines)


def serve_commands(max_model_len: int = 32768) -> dict[str, list[str]]:
    """`vllm serve` arguments for every catalogued model on every shape it fits, named MODEL@SHAPE: what the fit
    alone decides (TP, max-model-len, parsers), for vLLM's own parser to judge (tests/vllm_cli_check.py)."""
    commands = {}
    for model in catalog.catalog_models():
        for result in sizing.fits_by_shape(model, max_model_len):
            if not result.fits:
                continue
            argv = ["vllm", "serve", model.name]
            for flag, value in result.serve_flags().items():
                argv += [flag, value]
            if result.family is not None and result.family.tool_call_parser:
                argv.append("--enable-auto-tool-choice")
            commands[f"{model.name}@{result.shape.accelerator_type}"] = argv
    return commands


def _host(shape: catalog.Shape) -> str:
    """Chips (and devices where a chip is more than one), machine and runtime, as the header names them."""
    devices = f" = {shape.devices} devices" if shape.generation.devices_per_chip > 1 else ""
    runtime = shape.runtime_version or f"{', '.join(shape.node_apis)} only"
    return f"{shape.chips} chip(s){devices}, {shape.gke_machine_type}, {runtime}"
