"""Run in the vLLM venv: vLLM 0.33.0's own derived max_model_len for each config.json, as `vllm serve` derives it
with no --max-model-len. stdin: JSON [PATH, ...]; stdout: JSON {PATH: tokens or null}.

The config is loaded by vLLM's get_config (transformers' AutoConfig, then patch_rope_parameters on the config and its
text config), the text config taken by get_hf_text_config, the length keys read by vLLM's convertor
(derive_max_model_len_and_key), and the length computed by vllm/config/model.py _get_and_verify_max_len itself:
nothing of it is restated here. null: no length key (vLLM then assumes 2048 or takes the user's).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import types
from pathlib import Path


def derived_max_len(path: str) -> int | None:
    import vllm.config  # noqa: F401 - imported first: the convertor module is circular with it
    from vllm.config import model as model_config
    from vllm.transformers_utils.config import get_config, get_hf_text_config
    from vllm.transformers_utils.model_arch_config_convertor import (
        MODEL_ARCH_CONFIG_CONVERTORS,
        ModelArchConfigConvertorBase,
    )
    with tempfile.TemporaryDirectory() as directory:
        shutil.copy(path, Path(directory) / "config.json")
        config = get_config(directory, trust_remote_code=False)
    text = get_hf_text_config(config)
    convertor = MODEL_ARCH_CONFIG_CONVERTORS.get(config.model_type, ModelArchConfigConvertorBase)(config, text)
    derived, _ = convertor.derive_max_model_len_and_key()
    if derived == float("inf"):
        return None
    arch = types.SimpleNamespace(derived_max_model_len_and_key=convertor.derive_max_model_len_and_key())
    # max_model_len=None: the derived length itself (the platform's check_max_model_len passes it through on CPU).
    return int(model_config._get_and_verify_max_len(hf_config=text, model_arch_config=arch, tokenizer_config=None,
                                                    max_model_len=None, disable_sliding_window=False,
                                                    sliding_window=None))


def main() -> int:
    paths = json.load(sys.stdin)
    json.dump({path: derived_max_len(path) for path in paths}, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
