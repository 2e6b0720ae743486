"""The weights' bytes a checkpoint states: metadata.total_size of the safetensors index Hugging Face writes beside
config.json (transformers' SAFE_WEIGHTS_INDEX_NAME, `model.safetensors.index.json`): the bytes of every tensor of the
checkpoint. Read by the stack (vllm.modelConfig) and by tools.fit (--model-config) from the config's folder."""

from __future__ import annotations

from pathlib import Path

from components.catalog.config_checks import ConfigError
from components.catalog.models import Weights
from components.reading import bounded

# Hugging Face's sharded-checkpoint index, written beside config.json (transformers' SAFE_WEIGHTS_INDEX_NAME); its
# metadata.total_size is the bytes of every tensor of the checkpoint.
SAFETENSORS_INDEX = "model.safetensors.index.json"
# An index lists every tensor (a 671B MoE's is a few megabytes); its total is bytes of weights, below a pebibyte.
MAX_INDEX_BYTES = 32 * bounded.MIB
MAX_WEIGHTS_BYTES = 1 << 50


def index_total_size(config_path: str) -> int | None:
    """metadata.total_size of the safetensors index beside a config.json; None when there is no index;
    ConfigError (naming the file, the key, the value and the fix) for one that is there and cannot be read."""
    index = Path(config_path).expanduser().parent / SAFETENSORS_INDEX
    if not index.exists():
        return None
    try:
        document = bounded.read_json(index, MAX_INDEX_BYTES, SAFETENSORS_INDEX)
    except bounded.ReadError as error:
        raise ConfigError(str(error)) from None
    metadata = document.get("metadata") if isinstance(document, dict) else None
    total = metadata.get("total_size") if isinstance(metadata, dict) else None
    if isinstance(total, bool) or not isinstance(total, int) or not 0 < total <= MAX_WEIGHTS_BYTES:
        shown = bounded.ReadError(index, "").path
        raise ConfigError(
            f"{shown}: metadata.total_size = {total!r}: the checkpoint's bytes, a whole number from 1 to "
            f"{MAX_WEIGHTS_BYTES:,}; download the checkpoint's own index (hf download MODEL {SAFETENSORS_INDEX}) "
            "or remove it")
    return total


def index_weights(config_path: str, total: int | None = None) -> Weights | None:
    """The index's total as the weights' figure, its source named (read here unless `total` is given); None when
    there is no index."""
    total = index_total_size(config_path) if total is None else total
    if total is None:
        return None
    return Weights(total, True, f"{SAFETENSORS_INDEX} metadata.total_size beside {config_path} (the checkpoint's "
                                "own statement of its tensors' bytes)")
