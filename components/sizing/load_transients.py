"""What loading a quantized checkpoint may hold in HBM beyond its resident weights, read from tpu-inference 0.32.0.

MXFP4 (gpt-oss): tpu_inference/layers/vllm/quantization/mxfp4.py process_weights_after_loading, for each MoE layer,
copies the layer's packed experts to JAX (utils.t2j), and in one jitted
function dequantizes them to float32 (dequantize_tensor_from_mxfp4_packed(..., jnp.float32)) and requantizes them to
float4_e2m1fn in blocks of MXFP4_REQUANTIZED_BLOCK_SIZE (512) before shard_moe_weights spreads them over the mesh.
No branch looks at the TPU generation: v5e and v6e take the same path. The resident result is 4-bit with scales
(the checkpoint's bytes are the estimate). Whether XLA holds the float32 intermediate of a whole layer at once is
not in the source: a compiler decision, unknown until measured, so the plan says so and does not charge it.
"""

from __future__ import annotations

from components.catalog.geometry import ModelGeometry

GIB = 1024**3
FLOAT32_BYTES = 4
MXFP4 = "mxfp4"


def notes(geometry: ModelGeometry) -> tuple[str, ...]:
    """The plan's word on a load-time transient it cannot settle (empty when there is none to speak of)."""
    elements = geometry.expert_weight_elements_per_layer
    if geometry.quant_method != MXFP4 or elements is None:
        return ()
    transient = elements * FLOAT32_BYTES
    return (f"unknown: tpu-inference dequantizes each MoE layer's MXFP4 experts to float32 and requantizes them to "
            f"4 bits while loading, before sharding them (layers/vllm/quantization/mxfp4.py, every TPU generation); "
            f"if XLA holds a whole layer's float32 experts at once that is {transient / GIB:.2f} GiB (computed: "
            f"{elements:,} expert weights x 4 bytes) beyond the weights during the load, not counted here; measure "
            "a load before relying on a fit within that margin",)
