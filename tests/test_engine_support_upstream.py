"""components/catalog/vllm_registry.json held to the installed vLLM's registry (vllm/model_executor/models/
registry.py, read from the file in the vLLM venv: importing it loads every model module), and the encoder-only modules
engine_support.py names held to their source: every attention they build is EncoderOnlyAttention."""

from __future__ import annotations

import json

from components.catalog import engine_support
from tests import vllm_venv

READ_REGISTRY = """
import ast, importlib.util, json, pathlib
package = pathlib.Path(importlib.util.find_spec("vllm").submodule_search_locations[0])
models = package / "model_executor" / "models"
tree = ast.parse((models / "registry.py").read_text())
tables = {}
for node in tree.body:
    if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Dict):
        table = {}
        for key, value in zip(node.value.keys, node.value.values):
            if isinstance(key, ast.Constant):
                literal = ast.literal_eval(value) if isinstance(value, (ast.Constant, ast.Tuple)) else None
                table[key.value] = literal[0] if isinstance(literal, tuple) else literal
        tables[node.targets[0].id] = table
union = [element.id for element in next(
    node for node in tree.body if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "_VLLM_MODELS"
).value.values]
module_of = {}
for name in union:
    module_of.update(tables[name])
sources = {name: (models / f"{name}.py").read_text() for name in %r}
print(json.dumps({"module_of": module_of, "previously": tables["_PREVIOUSLY_SUPPORTED_MODELS"],
                  "out_of_tree": tables["_OOT_SUPPORTED_MODELS"], "sources": sources,
                  "version": importlib.import_module("vllm.version").__version__}))
"""


# Registry entries of vLLM 0.32.0 that a later installed release dropped (none a model one serves for chat).
REMOVED_AFTER = {"0.33.0": {"MedusaModel": "medusa"}}


def installed() -> dict:
    modules = sorted(engine_support.ENCODER_ONLY_MODULES | engine_support.CAUSAL_SWITCH_MODULES)
    completed = vllm_venv.run(["-c", "import importlib.metadata\n" + READ_REGISTRY % (modules,)], text=True)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout)


def test_the_registry_data_is_vllms():
    upstream, ours = installed(), engine_support.registry()
    # Refusals quote vLLM's own tables: these must be the installed ones exactly.
    assert ours["previously_supported"] == upstream["previously"]
    assert ours["out_of_tree"] == upstream["out_of_tree"]
    # Every architecture the planner lets through, the installed vLLM serves, from the same module (a later vLLM
    # may add architectures: those the planner refuses until this file is regenerated from that release).
    missing = {name: module for name, module in ours["module_of"].items()
               if upstream["module_of"].get(name) != module}
    assert missing == ({} if upstream["version"] == ours["vllm"] else REMOVED_AFTER.get(upstream["version"], {}))
    if upstream["version"] == ours["vllm"]:
        assert set(ours["module_of"]) == set(upstream["module_of"])


def test_the_encoder_only_modules_build_no_decoder_attention():
    sources = installed()["sources"]
    for module in engine_support.ENCODER_ONLY_MODULES:
        text = sources[module]
        # Its own EncoderOnlyAttention, or bert.py's layers (roberta.py builds on them).
        assert "EncoderOnlyAttention(" in text or "from vllm.model_executor.models.bert import" in text, module
        assert "AttentionType.DECODER" not in text and " Attention(" not in text, module
    for module in engine_support.CAUSAL_SWITCH_MODULES:
        text = sources[module]
        assert 'getattr(config, "is_causal", True)' in text and "AttentionType.ENCODER_ONLY" in text, module
