"""Every file a user hands the stack, hostile (issue 48): a config.json, its safetensors index, a saved plan, a bench
run, and the bounded reader under them (components/reading/bounded.py), with Hypothesis-made variants. Each gets
exit 2 (or the reader's one error) with a one-line reason naming the key as written, never a traceback or a hang;
impossible geometry is refused, real configs still size."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components import catalog, sizing
from components.reading import bounded
from components.settings import SettingsError
from components.settings.loading import load
from tools.fit import cli as fit_cli
from tools.plan import diff as plan_diff

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "components" / "catalog" / "configs"
QWEN = json.loads((CONFIGS / "Qwen--Qwen3-8B.json").read_text())
MOE = json.loads((CONFIGS / "Qwen--Qwen3-30B-A3B.json").read_text())
GEMMA = json.loads((CONFIGS / "google--gemma-4-E2B-it.json").read_text())
LLAMA = json.loads((CONFIGS / "meta-llama--Llama-3.1-8B.json").read_text())


def with_value(config: dict, key: str, value: object) -> dict:
    """config with key (dotted for text_config.KEY) set, or removed when value is ...."""
    changed = json.loads(json.dumps(config))
    where, _, name = key.rpartition(".")
    target = changed[where] if where else changed
    if value is ...:
        target.pop(name, None)
    else:
        target[name] = value
    return changed


# (what, the config's text, the key the refusal names)
HOSTILE_CONFIGS = [
    ("head_dim-as-text", json.dumps(with_value(QWEN, "head_dim", "128")), 'head_dim = "128"'),
    ("head_dim-negative", json.dumps(with_value(QWEN, "head_dim", -128)), "head_dim = -128"),
    ("head_dim-fraction", json.dumps(with_value(QWEN, "head_dim", 127.5)), "head_dim = 127.5"),
    ("head_dim-zero", json.dumps(with_value(QWEN, "head_dim", 0)), "head_dim = 0"),
    ("head_dim-true", json.dumps(with_value(QWEN, "head_dim", True)), "head_dim = true"),
    # A family transformers does not define fills nothing (components/catalog/config_defaults.py): the key is refused.
    ("layers-missing-unknown-family", json.dumps(with_value({**QWEN, "model_type": "acme_lm"}, "num_hidden_layers",
                                                            ...)), "num_hidden_layers is missing"),
    ("positions-infinity", json.dumps(QWEN).replace('"max_position_embeddings": 40960',
                                                    '"max_position_embeddings": Infinity'), "Infinity"),
    ("positions-1e999", json.dumps(QWEN).replace('"max_position_embeddings": 40960',
                                                 '"max_position_embeddings": 1e999'), "too large for a float"),
    ("positions-text", json.dumps(with_value(QWEN, "max_position_embeddings", "40960")), "max_position_embeddings"),
    ("sparse-step-zero", json.dumps(with_value(MOE, "decoder_sparse_step", 0)), "decoder_sparse_step = 0"),
    ("short-layer-types-shared", json.dumps(with_value(GEMMA, "text_config.layer_types",
                                                       GEMMA["text_config"]["layer_types"][:20])),
     "text_config.layer_types"),
    ("layers-ten-million", json.dumps(with_value(QWEN, "num_hidden_layers", 10**7)), "num_hidden_layers = 10000000"),
    ("layers-1e400", json.dumps(QWEN).replace('"num_hidden_layers": 36', '"num_hidden_layers": 1' + "0" * 400),
     "num_hidden_layers = 1000"),
    ("layers-text", json.dumps(with_value(QWEN, "num_hidden_layers", "36")), 'num_hidden_layers = "36"'),
    ("layers-true", json.dumps(with_value(QWEN, "num_hidden_layers", True)), "num_hidden_layers = true"),
    ("layers-negative", json.dumps(with_value(QWEN, "num_hidden_layers", -1)), "num_hidden_layers = -1"),
    ("kv-heads-over-heads", json.dumps(with_value(QWEN, "num_key_value_heads", 64)), "num_key_value_heads = 64"),
    ("kv-heads-not-dividing", json.dumps(with_value(QWEN, "num_key_value_heads", 5)), "num_key_value_heads = 5"),
    ("kv-heads-zero", json.dumps(with_value(QWEN, "num_key_value_heads", 0)), "num_key_value_heads = 0"),
    ("heads-missing", json.dumps(with_value({**QWEN, "model_type": "acme_lm"}, "num_attention_heads", ...)),
     "num_attention_heads is missing"),
    ("tie-no", json.dumps(with_value(QWEN, "tie_word_embeddings", "no")), 'tie_word_embeddings = "no"'),
    ("bias-one", json.dumps(with_value(QWEN, "attention_bias", 1)), "attention_bias = 1"),
    ("k-eq-v-text", json.dumps(with_value(GEMMA, "text_config.attention_k_eq_v", "yes")),
     "text_config.attention_k_eq_v"),
    ("text-config-string", json.dumps(with_value(GEMMA, "text_config", "x")), 'text_config = "x"'),
    ("rope-factor-negative", json.dumps(with_value(LLAMA, "rope_scaling", {"rope_type": "linear", "factor": -2})),
     "rope_scaling.factor = -2"),
    ("rope-factor-text", json.dumps(with_value(LLAMA, "rope_scaling", {"rope_type": "linear", "factor": "4"})),
     'rope_scaling.factor = "4"'),
    ("rope-factor-nan", json.dumps(with_value(LLAMA, "rope_scaling", {"rope_type": "linear", "factor": 1})).replace(
        '"factor": 1', '"factor": NaN'), "NaN is no JSON number"),
    ("rope-a-list", json.dumps(with_value(LLAMA, "rope_scaling", [1, 2])), "rope_scaling = [1, 2]"),
    ("sliding-text", json.dumps(with_value(GEMMA, "text_config.sliding_window", "512")),
     'text_config.sliding_window = "512"'),
    ("mlp-only-out-of-range", json.dumps(with_value(MOE, "mlp_only_layers", [99])), "mlp_only_layers = [99]"),
    ("mlp-only-text", json.dumps(with_value(MOE, "mlp_only_layers", "1")), 'mlp_only_layers = "1"'),
    ("architectures-text", json.dumps(with_value(QWEN, "architectures", "Qwen3ForCausalLM")), "architectures"),
    ("dtype-number", json.dumps(with_value(QWEN, "torch_dtype", 16)), "torch_dtype = 16"),
    ("hidden-not-dividing", json.dumps(with_value(with_value(LLAMA, "head_dim", ...), "hidden_size", 4095)),
     "hidden_size = 4095"),
    ("experts-negative", json.dumps(with_value(MOE, "num_experts", -1)), "num_experts = -1"),
    ("intermediate-float", json.dumps(with_value(QWEN, "intermediate_size", 12288.0)), "intermediate_size"),
    ("layer-types-numbers", json.dumps(with_value(GEMMA, "text_config.layer_types", [1] * 35)),
     "text_config.layer_types"),
    ("key-twice", json.dumps(QWEN)[:-1] + ', "num_hidden_layers": 2}', 'key "num_hidden_layers" appears twice'),
    ("deep", "[" * 100_000 + "]" * 100_000, "nests deeper"),
    ("a-list", "[1, 2]", "holds a JSON list"),
    ("empty", "", "is not JSON"),
    ("shared-all", json.dumps(with_value(GEMMA, "text_config.num_kv_shared_layers", 35)),
     "text_config.num_kv_shared_layers = 35"),
]


@pytest.mark.parametrize(("text", "key"), [case[1:] for case in HOSTILE_CONFIGS], ids=[c[0] for c in HOSTILE_CONFIGS])
def test_a_hostile_config_json_is_exit_2_with_one_line_naming_the_key(tmp_path, capsys, text, key):
    path = tmp_path / "config.json"
    path.write_text(text)
    code = fit_cli.main(["--model-config", str(path)])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == "", captured.out[-500:]
    assert captured.err.count("\n") == 1 and captured.err.startswith("tools.fit: --model-config ")
    assert key in captured.err and "Traceback" not in captured.err


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory", "not-utf8", "too-big"])
def test_a_config_path_that_is_no_file_is_exit_2_at_once(tmp_path, kind):
    path = tmp_path / "config.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path = Path("/dev/zero")
    elif kind == "directory":
        path = tmp_path
    elif kind == "not-utf8":
        path.write_bytes(b'{"model_type": "\xff"}')
    else:
        path.write_bytes(b" " * (5 * bounded.MIB))
    # A child with a timeout: a reader that blocks on a FIFO or reads /dev/zero fails this test, not the session.
    done = subprocess.run([sys.executable, "-m", "tools.fit", "--model-config", str(path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    said = {"fifo": "is a FIFO, not a file", "dev-zero": "is a device, not a file",
            "directory": "is a directory, not a file", "not-utf8": "is not UTF-8 text",
            "too-big": "more than the 4,194,304 a config.json may be"}[kind]
    assert said in done.stderr and done.stderr.count("\n") == 1


@pytest.mark.parametrize("name", sorted(path.name for path in CONFIGS.glob("*.json")))
def test_every_catalogued_config_still_passes_the_checks(name):
    geometry = catalog.geometry_from_config(json.loads((CONFIGS / name).read_text()))
    assert all(geometry.num_attention_heads % layer.kv_heads == 0 for layer in geometry.kv_layers)


# ---- vllm.modelConfig and its index, through the settings (what the plan and `pulumi up` read) ----

def _settings(model_config: Path, **vllm: object):
    return load({"vllm": {"model": "acme/mine", "modelConfig": str(model_config), **vllm},
                 "access": {"sshSourceRanges": ["198.51.100.7/32"]}}, project="my-project", stack="dev")


def test_a_hostile_model_config_is_refused_by_its_key_not_in_pythons_words(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(with_value(QWEN, "num_key_value_heads", 64)))
    with pytest.raises(SettingsError) as caught:
        _settings(path)
    [problem] = [line for line in caught.value.problems if "modelConfig" in line]
    assert problem.startswith("tpu-vllm:vllm.modelConfig = ") and "num_key_value_heads = 64" in problem
    assert "validation error" not in problem and "Value error" not in problem and "Traceback" not in problem


@pytest.mark.parametrize(("index", "said"), [
    ('{"metadata": {"total_size": NaN}}', "NaN is no JSON number"),
    ('{"metadata": {"total_size": true}}', "metadata.total_size = True"),
    ('{"metadata": {"total_size": -1}}', "metadata.total_size = -1"),
    ('{"metadata": {"total_size": 1e300}}', "metadata.total_size = 1e+300"),
    ("fifo", "is a FIFO, not a file"),
])
def test_a_hostile_safetensors_index_beside_the_config_is_refused_by_name(tmp_path, index, said):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(QWEN))
    beside = tmp_path / "model.safetensors.index.json"
    if index == "fifo":
        os.mkfifo(beside)
    else:
        beside.write_text(index)
    with pytest.raises(SettingsError) as caught:
        _settings(path)
    assert any(said in problem and "modelConfig" in problem for problem in caught.value.problems), \
        caught.value.problems


def test_an_ordinary_index_beside_the_config_gives_the_weights(tmp_path):
    path = tmp_path / "config.json"
    path.write_text((CONFIGS / "meta-llama--Llama-3.2-3B.json").read_text())
    (tmp_path / "model.safetensors.index.json").write_text('{"metadata": {"total_size": 6425499648}}')
    settings_ = _settings(path, maxModelLen=8192).settings
    assert settings_.model_spec.weights.bytes == 6_425_499_648


def test_the_refusals_fit_command_runs_for_an_uncatalogued_model(tmp_path, capsys):
    """A model too big for v5litepod-1, known only by its config: the fix's command is tools.fit by --model-config,
    which runs (tools.fit --model acme/mine would not: it is not catalogued)."""
    path = tmp_path / "my model" / "config.json"
    path.parent.mkdir()
    path.write_text((CONFIGS / "Qwen--Qwen3-32B.json").read_text())
    with pytest.raises(SettingsError) as caught:
        _settings(path, maxModelLen=8192)
    [problem] = [line for line in caught.value.problems if "does not fit" in line]
    command = problem.split("(python -m tools.fit ", 1)[1].split(" compares them)")[0]
    assert command.startswith("--model-config ")
    assert fit_cli.main(shlex.split(command)) == 0
    capsys.readouterr()


# ---- a saved plan to diff ----

@pytest.mark.parametrize(("content", "said"), [
    ('{"resources": [], "x": NaN}', "NaN is no JSON number"),
    ('{"resources": [], "resources": []}', 'key "resources" appears twice'),
    ("fifo", "is a FIFO, not a file"),
    ("dev-zero", "is a device, not a file"),
])
def test_a_hostile_saved_plan_is_refused_in_one_line(tmp_path, content, said):
    path = tmp_path / "base.json"
    if content == "fifo":
        os.mkfifo(path)
    elif content == "dev-zero":
        path = Path("/dev/zero")
    else:
        path.write_text(content)
    with pytest.raises(plan_diff.PlanFileError) as caught:
        plan_diff.load_plan(path)
    assert said in str(caught.value) and "\n" not in str(caught.value)


# ---- the reader itself, and Hypothesis-made variants ----

def test_the_reader_takes_an_ordinary_file_and_refuses_past_its_cap(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"a": [1, 2.5, "three"]}')
    assert bounded.read_json(path, 100, "thing") == {"a": [1, 2.5, "three"]}
    with pytest.raises(bounded.ReadError, match="more than the 10 a thing may be"):
        bounded.read_json(path, 10, "thing")
    link = tmp_path / "link.json"
    link.symlink_to(path)
    assert bounded.read_json(link, 100, "thing")["a"][2] == "three"  # a link to a regular file is that file
    (tmp_path / "dev.json").symlink_to("/dev/zero")
    with pytest.raises(bounded.ReadError, match="is a device"):
        bounded.read_json(tmp_path / "dev.json", 100, "thing")


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12)
GEOMETRY_KEYS = st.sampled_from(sorted({*catalog.config_checks.COUNTS, *catalog.config_checks.LENGTHS,
                                        *catalog.config_checks.FLAGS, *catalog.config_checks.TEXTS, "layer_types",
                                        "rope_scaling", "rope_parameters", "mlp_only_layers", "architectures",
                                        "text_config"}))
BASES = st.sampled_from([QWEN, MOE, GEMMA, LLAMA])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(BASES, st.lists(st.tuples(GEOMETRY_KEYS, JSON_VALUES | st.just(...)), min_size=1, max_size=3))
def test_any_value_in_any_geometry_key_is_sized_honestly_or_refused_in_words(base, changes):
    config = json.loads(json.dumps(base))
    for key, value in changes:
        inner = config.get("text_config")
        target = inner if isinstance(inner, dict) and key != "text_config" else config
        if value is ...:
            target.pop(key, None)
        else:
            target[key] = value
    try:
        geometry = catalog.geometry_from_config(config)
    except catalog.ConfigError as error:
        assert "\n" not in str(error) and "Traceback" not in str(error)
        return
    assert all(isinstance(layer.head_dim, int) and layer.head_dim > 0 for layer in geometry.kv_layers)
    assert all(geometry.num_attention_heads % layer.kv_heads == 0 for layer in geometry.kv_layers)
    assert 0 < geometry.num_hidden_layers <= catalog.config_checks.MAX_LAYERS
    spec = sizing.ModelSpec("hypothesis/model", geometry, None, None)
    for fitted in sizing.fits_by_shape(spec, 4096):
        assert isinstance(fitted.fits, bool)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_are_read_or_refused_in_one_line(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("bytes") / "file"
    path.write_bytes(data)
    for reader in (bounded.read_json, bounded.read_yaml):
        try:
            reader(path, 1000, "file")
        except bounded.ReadError as error:
            assert "\n" not in str(error)
