"""A layout's output rate and $ per million output tokens: computed, calibrated on the build log's one chip.

The formula (every figure it prints says it):

    step(B) = (W / t + B x context x kv_bytes_per_token / t) / bandwidth + fixed + (B - 1) x per_sequence
    rate    = min(clients, d x B_max) / step(B),  B = min(ceil(clients / d), B_max)  per replica
    $/M     = host $/hour / (rate x 3600) x 10^6

- a decode step reads each chip's share of the weights (W / t) and of its batch's KV (the replica's KV bytes per
  token, summed over its t chips, over t) from HBM at the generation's bandwidth (components/catalog/shapes.py,
  cited there);
- the efficiency the log measured on one v5e chip, "3.94 ms floor against 8.02 ms measured - 49% of peak" (its W
  is the "~3.15 GiB per step derived from the model's layer geometry": the per-layer embedding tables are
  gathered, not streamed), enters as the log itself reads it: "roughly 2x of headroom sitting in fixed per-step
  cost, not in memory bandwidth", so fixed = 8.02 - 3.94 ms a step pays whatever it reads (scaling the reads by
  0.49 instead would let eight chips decode one stream 8x faster, which the fixed cost forbids); other models
  stream every weight byte (an upper bound: an MoE reads only its active experts);
- per_sequence is what each further sequence of a batch adds: the log's 64-client cell at 128 tokens (1,496.5
  output tokens/s aggregate) minus the bandwidth term, over its 63 further sequences; one engine per replica
  (vLLM's --data-parallel-size starts one engine core and one API server per rank), so replicas do not share it;
- B_max is what a replica's pool admits at the context by the 78% rule (at most vLLM's 256 sequences).

Not modelled (said wherever the figure is shown): prefill and time to first token, the all-reduce tensor
parallelism adds to every layer (so the rate flatters TP), and any other chip than v5e's efficiency.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from components.catalog import catalog_model
from components.catalog.measured import KV_LOAD_RULE_OF_THUMB
from components.catalog.shapes import Shape, shape
from components.catalog.sources import V5E_LOG_SOURCE
from components.sizing import kv

GIB = 1024**3
CALIBRATION_MODEL = "google/gemma-4-E2B-it"
CALIBRATION_SHAPE = "v5litepod-1"
# The log: "Decode moves ~3.15 GiB per step ... a 3.94 ms floor against 8.02 ms measured - 49% of peak".
LOG_STEP_BYTES = int(3.15 * GIB)
LOG_FLOOR_MS = 3.94
LOG_SINGLE_STREAM_MS = 8.02
EFFICIENCY = LOG_FLOOR_MS / LOG_SINGLE_STREAM_MS
# The log places the other 51% in "fixed per-step cost, not in memory bandwidth": 8.02 - 3.94 ms a step pays
# whatever it reads, so splitting the weights over t chips shortens only the floor.
FIXED_STEP_SECONDS = (LOG_SINGLE_STREAM_MS - LOG_FLOOR_MS) / 1000
# The log's aggregate table, 128-token context, 64 clients: 1,496.5 output tokens/s.
LOG_AGGREGATE = (64, 128, 1496.5)
# What a step reads of the weights, where the log derived it (any other model: every weight byte).
STEP_BYTES = {CALIBRATION_MODEL: (LOG_STEP_BYTES, f"~3.15 GiB per step, derived in {V5E_LOG_SOURCE.where}")}
MAX_NUM_SEQS = kv.DEFAULT_MAX_NUM_SEQS
# The load a layout is chosen at when none is given: tpu-vllm:load's default clients (components/settings/
# planned_load.py reads this), each holding the fit's context.
DEFAULT_PLANNED_CLIENTS = 16
FORMULA_SUMMARY = ("a decode step reads each chip's share of the weights and of its batch's KV at the HBM bandwidth, "
                   "plus the log's fixed per-step and per-sequence costs (v5litepod-1, measured); "
                   "components/sizing/rate.py")
FORMULA = ("step = (W/t + B x context x KV B/token / t) / bandwidth + {fixed:.2f} ms fixed + (B-1) x {seq:.3f} ms; "
           "rate = min(clients, d x B_max) / step, B = min(ceil(clients/d), B_max)")


@dataclass(frozen=True)
class Rate:
    """One layout's predicted decode at one load; every value computed."""

    step_seconds: float
    output_tokens_per_second: float
    batch_per_replica: int
    clients_served: int
    basis: str


def _bandwidth_seconds(step_bytes: int, kv_bytes_per_token: int, tensor_parallel: int, batch: int, context: int,
                       bandwidth: int) -> float:
    read = step_bytes / tensor_parallel + batch * context * kv_bytes_per_token / tensor_parallel
    return read / bandwidth + FIXED_STEP_SECONDS


def _calibrated_per_sequence_seconds() -> float:
    model, chip = catalog_model(CALIBRATION_MODEL), shape(CALIBRATION_SHAPE)
    clients, context, rate = LOG_AGGREGATE
    measured_step = clients / rate
    bandwidth_part = _bandwidth_seconds(LOG_STEP_BYTES, kv.kv_bytes_per_token(model.geometry, 1), 1, clients,
                                        context, chip.generation.hbm_bandwidth_bytes_per_second)
    return (measured_step - bandwidth_part) / (clients - 1)


PER_SEQUENCE_SECONDS = _calibrated_per_sequence_seconds()


def step_bytes(model_name: str, weights_bytes: int) -> tuple[int, str]:
    """What a decode step reads of the weights, and how that is known."""
    return STEP_BYTES.get(model_name, (weights_bytes, "every weight byte (computed upper bound)"))


def predict(model_name: str, weights_bytes: int, kv_bytes_per_token: int, host: Shape, tensor_parallel: int,
            data_parallel: int, replica_kv_tokens: int, clients: int, context: int) -> Rate | None:
    """The layout's decode at `clients` clients of `context` tokens; None where the generation's bandwidth is not
    read."""
    bandwidth = host.generation.hbm_bandwidth_bytes_per_second // host.generation.devices_per_chip
    if not bandwidth:
        return None
    streamed, streamed_basis = step_bytes(model_name, weights_bytes)
    admitted = max(1, min(MAX_NUM_SEQS, int(replica_kv_tokens * KV_LOAD_RULE_OF_THUMB) // max(context, 1)))
    batch = max(1, min(math.ceil(clients / data_parallel), admitted))
    served = min(clients, data_parallel * batch)
    step = (_bandwidth_seconds(streamed, kv_bytes_per_token, tensor_parallel, batch, context, bandwidth)
            + (batch - 1) * PER_SEQUENCE_SECONDS)
    basis = (FORMULA.format(fixed=FIXED_STEP_SECONDS * 1000, seq=PER_SEQUENCE_SECONDS * 1000)
             + f"; W {streamed / GIB:.2f} GiB ({streamed_basis}), t {tensor_parallel}, d {data_parallel}, "
             f"B {batch}, {clients} clients x {context:,} tokens, {host.generation.name} "
             f"{host.generation.hbm_bandwidth_bytes_per_second / GIB:,.0f} GiB/s per chip "
             f"({host.generation.hbm_bandwidth_source.where if host.generation.hbm_bandwidth_source else 'unread'}); "
             f"fixed = {LOG_SINGLE_STREAM_MS} ms measured - {LOG_FLOOR_MS} ms floor, per-sequence from "
             f"{LOG_AGGREGATE[2]:,} tokens/s at {LOG_AGGREGATE[0]} x {LOG_AGGREGATE[1]} (the log's v5litepod-1, "
             "measured); prefill and the TP all-reduce not counted")
    return Rate(step, served / step, batch, served, basis)


def usd_per_million(usd_per_hour: float, output_tokens_per_second: float) -> float:
    return usd_per_hour / (output_tokens_per_second * 3600) * 1e6
