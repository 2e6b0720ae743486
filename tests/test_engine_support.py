"""Architectures the engine refuses, or serves with no KV cache, are refused by tools.fit with vLLM's own reason
before any figure (components/catalog/engine_support.py); the variants that get through do; a typed --weights-gib is
labelled given; the head_dim-64 formula as printed computes the value shown."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from components import catalog, sizing
from components.catalog import engine_support, geometry_from_config
from tools.fit import cli

ROOT = Path(__file__).resolve().parent.parent
QWEN = json.loads((ROOT / "components/catalog/configs/Qwen--Qwen3-8B.json").read_text())


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def config_file(tmp_path: Path, config: dict) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return str(path)


@pytest.mark.parametrize(("architectures", "extra", "said"), [
    (["MllamaForConditionalGeneration"], {}, "was supported in vLLM until v0.10.2, and is not supported anymore"),
    (["BartForConditionalGeneration"], {}, "Please install the plugin at https://github.com/vllm-project/bart-plugin"),
    (["AcmeNeverHeardOfForCausalLM"], {}, "are not supported for now"),
    (["BertModel"], {}, "encoder-only attention does not need KV cache"),
    (["Qwen3ForCausalLM"], {"is_causal": False}, "encoder-only"),
])
def test_refused_with_vllms_reason_before_any_figure(tmp_path, capsys, architectures, extra, said):
    path = config_file(tmp_path, {**QWEN, "architectures": architectures, **extra})
    code, out, err = run(capsys, "--model-config", path)
    assert code == 2 and out == "" and said in err and "Traceback" not in err
    assert "why not" not in err and "kv_tokens" not in err  # no report, no figure


@pytest.mark.parametrize(("architectures", "extra"), [
    (["Qwen3ForCausalLM"], {}),
    (["Qwen3ForCausalLM"], {"is_causal": True}),
    (["Qwen3ForSequenceClassification"], {}),  # vLLM's suffix swap finds Qwen3ForCausalLM
    ([], {}),  # no architecture named: not judged here
])
def test_the_variants_vllm_serves_get_through(tmp_path, capsys, architectures, extra):
    path = config_file(tmp_path, {**QWEN, "architectures": architectures, **extra})
    assert engine_support.refusal({**QWEN, "architectures": architectures, **extra}) is None
    code, out, _ = run(capsys, "--model-config", path)
    assert code == 0 and "v6e-1" in out


def test_a_typed_weights_figure_is_given_not_measured(tmp_path, capsys):
    code, out, _ = run(capsys, "--model", "Qwen/Qwen3-8B", "--weights-gib", "15", "--json")
    weights = json.loads(out)["rows"][0]["figures"]["weights"]
    assert code == 0 and weights["given"] and not weights["measured"] and weights["basis"] == "--weights-gib 15.0"
    code, text, _ = run(capsys, "--model", "Qwen/Qwen3-8B", "--weights-gib", "15")
    assert "given: --weights-gib 15.0" in text and "measured: given" not in text
    # Without the flag the catalogued figure keeps its own label.
    _, out, _ = run(capsys, "--model", "Qwen/Qwen3-8B", "--json")
    assert not json.loads(out)["rows"][0]["figures"]["weights"]["given"]


def printed_value(formula: str, heads_per_chip: int, packing: int) -> int:
    """The per-token formula as printed, evaluated term by term with the numbers it names."""
    total = 0
    for term in formula.split(" + "):
        layers = int(re.match(r"(\d+) cache-owning layers", term).group(1))
        tp = int(re.search(r"KV heads padded to TP (\d+) / TP", term).group(1))
        element = int(re.search(r"x (\d+) B x TP", term).group(1))
        if "(head_dim 64)" in term:  # align(heads, packing) x 128 lanes
            per_layer = -(-heads_per_chip // packing) * packing * 128
        else:  # align(2 x heads, packing) x head_dim padded to 128
            head_dim = int(re.search(r"head_dim (\d+) padded to 128", term).group(1))
            per_layer = -(-2 * heads_per_chip // packing) * packing * -(-head_dim // 128) * 128
        total += layers * per_layer * element * tp
    return total


@pytest.mark.parametrize("head_dim", [64, 128])
def test_the_per_token_formula_as_printed_is_the_value(head_dim):
    # 8 KV heads on one chip, bf16 (packing 2): head_dim 64 stores align(8, 2) x 128 lanes, K and V side by side;
    # 128 stores align(2 x 8, 2) x 128.
    config = {**QWEN, "head_dim": head_dim, "num_key_value_heads": 8}
    result = sizing.fit(sizing.ModelSpec("m", geometry_from_config(config), catalog.Weights(1, False, "t"), None),
                        catalog.shape("v6e-1"), 4096)
    figure = result.figures["kv_bytes_per_token"]
    layers = config["num_hidden_layers"]
    assert figure.value == layers * (8 if head_dim == 64 else 16) * 128 * 2
    assert figure.value == printed_value(figure.basis, heads_per_chip=8, packing=2)
    if head_dim == 64:  # the old formula (2 x heads for every head_dim) printed twice the value
        assert "(head_dim 64)" in figure.basis and "align(2 x" not in figure.basis
