"""`python -m tools.fit`: one row per shape, every figure measured or computed, bad input refused in words; its
table is docs/models.md's; vLLM's own parser takes the arguments it decides for every model on every shape."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests import vllm_venv
from tools.fit import cli, docs, serve_commands

ROOT = Path(__file__).resolve().parent.parent


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_json_has_one_row_per_shape_and_reproduces_both_measured_pools(capsys):
    code, out, _ = run(capsys, "--model", "google/gemma-4-E2B-it", "--max-model-len", "32768", "--json")
    assert code == 0
    report = json.loads(out)
    rows = {row["shape"]: row for row in report["rows"]}
    assert list(rows) == ["v5litepod-1", "v5litepod-4", "v5litepod-8", "v6e-1", "v6e-4", "v6e-8",
                          "tpu7x-standard-1t", "tpu7x-standard-4t"]
    for shape, measured in (("v5litepod-1", 321_344), ("v6e-1", 1_151_744)):
        figures = rows[shape]["figures"]
        assert figures["kv_tokens_measured"] == {**figures["kv_tokens_measured"], "value": measured, "measured": True}
        assert abs(figures["kv_tokens"]["value"] - measured) / measured < 0.001
        assert figures["kv_tokens"]["measured"] is False and figures["kv_tokens"]["basis"]
    assert rows["v6e-1"]["usd_per_hour"]["flex-start"]["value"] == 1.35
    # A one-KV-head 2B model on four chips: four copies beat one split four ways (components/sizing/layouts.py).
    assert rows["v6e-4"]["serve_flags"]["--tensor-parallel-size"] == "1"
    assert rows["v6e-4"]["serve_flags"]["--data-parallel-size"] == "4"
    assert rows["v6e-4"]["layout"] == {"tensor_parallel_size": 1, "data_parallel_size": 4}
    assert rows["v5litepod-4"]["measured_on_this_shape"] is False


def test_the_text_report_marks_measured_and_says_why_not(capsys):
    code, out, _ = run(capsys, "--model", "Qwen/Qwen3-30B-A3B", "--clients", "16")
    assert code == 0
    assert "v6e-1 (1 chip(s), ct6e-standard-1t, v2-alpha-tpuv6e, data disk hyperdisk-balanced" in out
    assert "why not: weights (56.87 GiB) fill the cap" in out
    assert "computed: parameters counted from config.json" in out
    assert "unmeasured: nobody has booted this model on this shape" in out
    code, out, _ = run(capsys, "--model", "google/gemma-4-E2B-it")
    assert "1,151,744*" in out and "measured: github.com/xbill9/gemma4-dev" in out


def test_any_model_by_its_config(tmp_path, capsys):
    config = tmp_path / "mine" / "config.json"
    config.parent.mkdir()
    config.write_text((ROOT / "components/catalog/configs/Qwen--Qwen3-8B.json").read_text())
    code, out, _ = run(capsys, "--model-config", str(config), "--json")
    assert code == 0
    report = json.loads(out)
    assert report["model"] == str(config)  # the file the user named, not its folder
    assert report["rows"][3]["figures"]["weights"]["value"] == 16_381_470_720
    assert report["rows"][3]["serve_flags"]["--tool-call-parser"] == "hermes"


@pytest.mark.parametrize(("argv", "said"), [
    (["--model", "acme/nope"], "--model acme/nope is not catalogued"),
    (["--model-config", "/nonexistent/config.json"], "--model-config /nonexistent/config.json: cannot read"),
])
def test_bad_input_is_refused_with_the_fix(capsys, argv, said):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and said in err and "Traceback" not in err


def test_bad_numbers_are_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as caught:
        cli.main(["--model", "google/gemma-4-E2B-it", "--max-model-len", "0"])
    assert caught.value.code == 2
    assert "0 must be above 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["--model", "google/gemma-4-E2B-it", "--gpu-memory-utilization", "1.5"])
    assert "at most 1" in capsys.readouterr().err


def test_it_runs_as_a_module_with_the_light_install_only():
    # No vLLM, no JAX, no credentials: a child with only the project on its path.
    completed = subprocess.run([sys.executable, "-c", (
        "import sys, tools.fit.cli as c; sys.exit(c.main(['--model', 'google/gemma-4-E2B-it', '--json'])); ")],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    loaded = subprocess.run([sys.executable, "-c", "import sys, json, tools.fit.cli; "
                             "print(json.dumps(sorted({name.split('.')[0] for name in sys.modules})))"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert not {"vllm", "jax", "tpu_inference", "pulumi"} & set(json.loads(loaded.stdout))


def test_the_tables_in_docs_are_the_generated_ones():
    assert docs.main(["--check"]) == 0, "run python -m tools.fit.docs"


def test_the_tables_check_fails_on_a_hand_edit(tmp_path, monkeypatch):
    edited = tmp_path / "models.md"
    edited.write_text(docs.DOC.read_text().replace("(**measured 321,344**)", "(**measured 330,000**)"))
    monkeypatch.setattr(docs, "DOC", edited)
    assert docs.main(["--check"]) == 1
    assert docs.main([]) == 0 and docs.main(["--check"]) == 0


def test_vllm_parses_what_the_fit_decides_for_every_model_on_every_shape_it_fits():
    commands = serve_commands()
    assert len(commands) >= 20
    completed = vllm_venv.run([str(ROOT / "tests" / "vllm_cli_check.py")],
                              input=json.dumps({"commands": commands}), text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    verdict = json.loads(completed.stdout)
    for name, argv in commands.items():
        result = verdict["commands"][name]
        assert "error" not in result, (name, result.get("error"))
        parsed = result["parsed"]
        flags = dict(zip(argv[3::2], argv[4::2], strict=False))
        assert parsed["tensor_parallel_size"] == int(flags["--tensor-parallel-size"])
        assert parsed["max_model_len"] == int(flags["--max-model-len"])
        assert parsed["tool_call_parser"] == flags["--tool-call-parser"]
        assert parsed["tool_call_parser"] in verdict["tool_parsers"]
        assert parsed["reasoning_parser"] == flags.get("--reasoning-parser", "")
        assert flags.get("--reasoning-parser", "gemma4") in verdict["reasoning_parsers"]


def test_layouts_shows_every_split_and_marks_the_planned_one(capsys):
    code, out, _ = run(capsys, "--model", "google/gemma-4-E2B-it", "--layouts")
    assert code == 0
    lines = {tuple(line.split()[:3]): line for line in out.splitlines() if line.startswith(("v5litepod", "v6e"))}
    eight, split = lines[("v5litepod-8", "1", "8")], lines[("v5litepod-8", "8", "1")]
    assert eight.endswith("<- planned") and "2,570,752" in eight
    assert not split.endswith("<- planned") and "778,752" in split
    assert lines[("v6e-8", "1", "8")].endswith("<- planned") and "9,213,952" in lines[("v6e-8", "1", "8")]
    assert "rate and $/M computed: a decode step reads" in out
    # At another load the choice moves, and the command says at which.
    code, out, _ = run(capsys, "--model", "google/gemma-4-E2B-it", "--layouts", "--clients", "1",
                       "--context-tokens", "1024")
    assert "at 1 clients x 1,024 tokens" in out
    one_stream = {tuple(line.split()[:3]): line for line in out.splitlines() if line.startswith("v5litepod-8")}
    assert one_stream[("v5litepod-8", "8", "1")].endswith("<- planned")  # one stream: the fastest step wins


def test_layouts_json_marks_one_chosen_layout_per_shape(capsys):
    code, out, _ = run(capsys, "--model", "Qwen/Qwen3-32B", "--layouts", "--json")
    report = json.loads(out)
    for shape, candidates in report["layouts"].items():
        assert sum(candidate["chosen"] for candidate in candidates) == 1, shape
        row = next(row for row in report["rows"] if row["shape"] == shape)
        chosen = next(candidate for candidate in candidates if candidate["chosen"])
        assert row["layout"] == {"tensor_parallel_size": chosen["tensor_parallel_size"],
                                 "data_parallel_size": chosen["data_parallel_size"]}
    v6e_8 = next(candidate for candidate in report["layouts"]["v6e-8"] if candidate["chosen"])
    assert v6e_8["tensor_parallel_size"] >= 2 and v6e_8["fits"]
    assert v6e_8["output_rate"]["measured"] is False and v6e_8["output_rate"]["basis"].startswith("step = ")


def test_the_weights_are_the_safetensors_index_total_beside_the_config(tmp_path, capsys):
    # A family the config cannot count (Gemma 3): the index the checkpoint ships states the bytes.
    folder = tmp_path / "gemma-3"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
        "text_config": {"hidden_size": 2560, "num_hidden_layers": 34, "sliding_window": 1024}}))
    code, out, _ = run(capsys, "--model-config", str(folder / "config.json"), "--json")
    assert code == 0 and json.loads(out)["rows"][3]["figures"]["weights"]["value"] is None  # asks for them
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 8_600_000_000},
                                                                     "weight_map": {}}))
    code, out, _ = run(capsys, "--model-config", str(folder / "config.json"), "--json")
    weights = json.loads(out)["rows"][3]["figures"]["weights"]
    assert code == 0 and weights["value"] == 8_600_000_000 and weights["measured"] and not weights["given"]
    assert "model.safetensors.index.json metadata.total_size" in weights["basis"]
    # A typed figure still wins, and is given.
    code, out, _ = run(capsys, "--model-config", str(folder / "config.json"), "--weights-gib", "9", "--json")
    assert json.loads(out)["rows"][3]["figures"]["weights"]["given"]
    # An index that is there and wrong is refused by name, not ignored.
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": "8GB"}}))
    code, out, err = run(capsys, "--model-config", str(folder / "config.json"))
    assert code == 2 and out == "" and "metadata.total_size = '8GB'" in err and "Traceback" not in err
