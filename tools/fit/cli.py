"""The command line of `python -m tools.fit` (tools/fit/__init__.py says what it prints)."""

from __future__ import annotations

import argparse
import json
import sys

from components import sizing
from tools.fit.report import (
    FitInputError,
    layouts_json,
    layouts_text,
    report_json,
    report_text,
    resolve_model,
    rows,
)


def _read(text: str, convert: type, what: str) -> int | float:
    try:
        return convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None


def _positive_int(text: str) -> int:
    value = _read(text, int, "a whole number")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} must be above 0")
    return value


def _fraction(text: str) -> float:
    value = _read(text, float, "a number")
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{value} must be above 0 and at most 1 (vLLM's range)")
    return value


def _positive_float(text: str) -> float:
    value = _read(text, float, "a number")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} must be above 0")
    return value


def parser() -> argparse.ArgumentParser:
    command = argparse.ArgumentParser(prog="python -m tools.fit", description=(
        "Does a model fit each single-host TPU shape (v5litepod-1/-4/-8, v6e-1/-4/-8)? Every figure says whether "
        "it is measured (and where) or computed (and how)."))
    which = command.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", help="a catalogued Hugging Face id (docs/models.md lists them)")
    which.add_argument("--model-config", metavar="PATH", help="any model's config.json")
    command.add_argument("--max-model-len", type=_positive_int, default=32768, help="default 32768, the log's")
    command.add_argument("--clients", type=_positive_int, help=(
        f"check this many clients at the context; the load the layout is planned at (default "
        f"{sizing.DEFAULT_PLANNED_CLIENTS}, tpu-vllm:load's)"))
    command.add_argument("--context-tokens", type=_positive_int,
                         help="what each client holds, for the 78%% rule (default: --max-model-len)")
    command.add_argument("--weights-gib", type=_positive_float,
                         help="the weights' resident size, when the config cannot say (or to override)")
    command.add_argument("--max-num-batched-tokens", type=_positive_int,
                         default=sizing.kv_groups.DEFAULT_MAX_NUM_BATCHED_TOKENS,
                         help="vLLM's per-step token budget (default 4096, the stack's vllm.maxNumBatchedTokens): a "
                              "sliding-window layer holds its window plus two steps of it")
    command.add_argument("--kv-cache-dtype", default="auto", choices=sorted(sizing.KV_DTYPE_BITS))
    command.add_argument("--dtype", default="auto", choices=["auto", *sorted(sizing.MODEL_DTYPE_BITS)], help=(
        "vLLM's --dtype (the stack's vllm.dtype): the weights and an auto KV cache are sized at it (float32 "
        "doubles a bf16 checkpoint's)"))
    command.add_argument("--gpu-memory-utilization", type=_fraction, default=sizing.DEFAULT_GPU_MEMORY_UTILIZATION)
    command.add_argument("--region", help="price the chips in this region (default: where each was priced)")
    command.add_argument("--run-hours", type=_positive_float, default=sizing.DEFAULT_RUN_HOURS,
                         help="flex-start's --max-run-duration for the most one run can cost (default 4, the "
                              "stack's tpu.maxRunDuration)")
    command.add_argument("--layouts", action="store_true", help=(
        "every tensor-parallel x data-parallel layout of each shape, the planned one marked"))
    command.add_argument("--json", action="store_true", help="one JSON object instead of the text report")
    return command


def main(argv: list[str] | None = None) -> int:
    arguments = parser().parse_args(argv)
    try:
        model = resolve_model(arguments.model, arguments.model_config, arguments.weights_gib)
        fits = rows(model, arguments.max_model_len, gpu_memory_utilization=arguments.gpu_memory_utilization,
                    kv_cache_dtype=arguments.kv_cache_dtype, context_tokens=arguments.context_tokens,
                    clients=arguments.clients, region=arguments.region, run_hours=arguments.run_hours,
                    max_num_batched_tokens=arguments.max_num_batched_tokens, dtype=arguments.dtype)
    except FitInputError as error:
        print(f"tools.fit: {error}", file=sys.stderr)
        return 2
    options = {"gpu_memory_utilization": arguments.gpu_memory_utilization, "kv_cache_dtype": arguments.kv_cache_dtype,
               "context_tokens": arguments.context_tokens, "clients": arguments.clients, "region": arguments.region,
               "run_hours": arguments.run_hours, "dtype": arguments.dtype}
    if arguments.json:
        report = report_json(model, arguments.max_model_len, fits)
        if arguments.layouts:
            report["layouts"] = layouts_json(model, arguments.max_model_len, fits, **options)
        print(json.dumps(report, indent=2))
    elif arguments.layouts:
        print(layouts_text(model, arguments.max_model_len, fits, **options))
    else:
        print(report_text(model, arguments.max_model_len, fits, arguments.context_tokens))
    return 0
