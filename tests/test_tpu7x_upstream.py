"""TPU7x's devices and HBM against tpu-inference's own code (the release `.venv-vllm` holds): each JAX device of a
TPU7x chip is one TensorCore with half the chip's HBM, which is what the catalog's devices_per_chip and
hbm_bytes_per_device say."""

from __future__ import annotations

import ast
import types
from pathlib import Path

from components import catalog
from tests import vllm_venv


def _tpu_inference_utils() -> Path:
    python = Path(vllm_venv.vllm_python())
    found = sorted(python.parent.parent.glob("lib/python3*/site-packages/tpu_inference/utils.py"))
    assert found, f"no tpu_inference/utils.py beside {python}"
    return found[0]


def _functions(path: Path, names: tuple[str, ...], jax_kind: str) -> dict:
    """The named functions of tpu-inference's utils.py, run as written with jax.devices() answering one device of
    `jax_kind` (the venv is a CPU build without jax; the functions read only device_kind)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    body = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in names]
    assert {node.name for node in body} == set(names)
    fake_jax = types.SimpleNamespace(devices=lambda *args, **kwargs: [types.SimpleNamespace(device_kind=jax_kind)])
    namespace = {"jax": fake_jax, "GBYTES": 1024**3, "Any": object}
    exec(compile(ast.Module(body=body, type_ignores=[]), str(path), "exec"), namespace)  # noqa: S102
    return namespace


def test_tpu_inference_gives_a_tpu7x_device_half_its_chips_hbm():
    utils = _functions(_tpu_inference_utils(), ("get_device_name", "get_device_hbm_limit"), "TPU7x")
    assert utils["get_device_name"]() == "TPU v7"
    shape = catalog.shape("tpu7x-standard-4t")
    assert utils["get_device_hbm_limit"]() == shape.hbm_bytes_per_device == 96 * 1024**3
    assert shape.generation.devices_per_chip * shape.hbm_bytes_per_device == shape.hbm_bytes_per_chip
