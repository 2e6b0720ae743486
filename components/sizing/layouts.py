"""Every tensor-parallel t x data-parallel d layout the engine serves on a host, and the one the stack plans.

The engine: vLLM 0.33.0's `--data-parallel-size d --tensor-parallel-size t` under `vllm serve`, where
tpu-inference 0.32.0 turns on multi-process data parallelism (platforms/tpu_platform.py _resolve_multiprocess_dp:
TPU_MULTIPROCESS_DP=1 for online serving with DP > 1), so each of the d engine cores builds a mesh of t devices
(layers/common/sharding.py ShardingConfigManager.from_vllm_config: data_parallelism = 1 under
TPU_MULTIPROCESS_DP) on chips [rank x t, (rank + 1) x t) of the host (worker/tpu_worker.py
_setup_dp_chip_isolation: TPU_VISIBLE_CHIPS, TPU_CHIPS_PER_PROCESS_BOUNDS=1,t,1, a libtpu port per rank), and
sizes its own pool from those chips (determine_available_memory). t x d must be the host's devices (the stack
leaves none idle) and t a size the model's heads split over (components/sizing/kv.py tensor_parallel_choices).

The plan: among the layouts that hold one request at max-model-len, the lowest $ per million output tokens at the
planned load (components/sizing/rate.py, computed); the host's price is the same for every layout, so this is the
highest predicted rate; ties (the same $ to the thousandth of a cent) go to fewer replicas. A model too large
for one device keeps the tensor parallelism it needs: the layouts that do not hold it fail and are never chosen.
"""

from __future__ import annotations

from typing import Any

from components.catalog.models import CatalogModel
from components.catalog.shapes import Shape, all_shapes
from components.sizing import kv
from components.sizing.fit import Fit, ModelSpec, fit_layout, whole_chips_per_rank

PROVISIONING_FOR_CHOICE = "flex-start"
"""The price the choice is shown at (the stack's default); any other scales every layout alike."""


def layout_sizes(model: ModelSpec | CatalogModel, shape: Shape) -> tuple[tuple[int, int], ...]:
    """(t, d) for every tensor-parallel size the model's heads split over on this host, fewest replicas first;
    a host whose heads split over no size still gets its whole-host layout, which says why it does not fit."""
    spec = model if isinstance(model, ModelSpec) else ModelSpec.of(model)
    choices = kv.tensor_parallel_choices(spec.geometry, shape.devices)
    sizes = tuple((size, shape.devices // size) for size in sorted(choices, reverse=True)
                  if whole_chips_per_rank(size, shape.devices // size, shape) is None)
    return sizes or ((shape.devices, 1),)



def all_layouts(model: ModelSpec | CatalogModel, shape: Shape, max_model_len: int,
                **options: Any) -> tuple[Fit, ...]:
    """One Fit per layout, fewest replicas first (fit()'s options; the layout's own sizes)."""
    return tuple(fit_layout(model, shape, max_model_len, tensor_parallel_size=size, data_parallel_size=replicas,
                             **options) for size, replicas in layout_sizes(model, shape))


def choice_key(result: Fit) -> tuple[float, int]:
    """Lower is better: $ per million output tokens (rounded to $0.00001), then replicas."""
    per_million = result.usd_per_million_output.get(PROVISIONING_FOR_CHOICE) or next(
        iter(result.usd_per_million_output.values()), None)
    if per_million is not None and per_million.value is not None:
        cost = round(float(per_million.value), 5)
    elif result.output_rate is not None and result.output_rate.value:
        cost = round(1.0 / float(result.output_rate.value), 9)
    else:
        cost = float("inf")
    return cost, result.data_parallel_size


def chosen(candidates: tuple[Fit, ...]) -> Fit:
    """The planned layout among `candidates`: the cheapest per output token that fits, else the first."""
    fitting_ones = [candidate for candidate in candidates if candidate.fits]
    return min(fitting_ones, key=choice_key) if fitting_ones else candidates[0]


def fit(model: ModelSpec | CatalogModel, shape: Shape, max_model_len: int, *,
        tensor_parallel_size: int | None = None, data_parallel_size: int | None = None, **options: Any) -> Fit:
    """The model on `shape` at the planned layout, or at the one the sizes given make (components/sizing/fit.py
    fit_layout's options)."""
    if tensor_parallel_size is None and data_parallel_size is None:
        return chosen(all_layouts(model, shape, max_model_len, **options))
    return fit_layout(model, shape, max_model_len, tensor_parallel_size=tensor_parallel_size,
                      data_parallel_size=data_parallel_size, **options)


def fits_by_shape(model: ModelSpec | CatalogModel, max_model_len: int, **options: Any) -> tuple[Fit, ...]:
    """One Fit per catalogued shape, in catalog order, each at its planned layout."""
    return tuple(fit(model, candidate, max_model_len, **options) for candidate in all_shapes())


def smallest_fitting_shape(model: ModelSpec | CatalogModel, max_model_len: int, **options: Any) -> Shape | None:
    """The shape with the fewest chips (then the cheapest flex-start hour) on which the model fits, or None."""
    fitting = [result for result in fits_by_shape(model, max_model_len, **options) if result.fits]
    if not fitting:
        return None

    def cost(result: Fit) -> float:
        flex = result.usd_per_hour.get("flex-start")
        return flex.value if flex is not None and flex.value is not None else float("inf")

    return min(fitting, key=lambda result: (result.shape.chips, cost(result))).shape
