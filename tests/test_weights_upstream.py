"""Gemma 4's and Gemma 3 27B's counted weights (components/catalog/models.py GEMMA_4_*_PARAMETERS,
GEMMA_3_27B_PARAMETERS) recounted by transformers' own model class (Gemma4ForConditionalGeneration,
Gemma3ForConditionalGeneration) built from each catalogued config.json on the meta device, in the vLLM venv
(transformers 5.20.2, torch CPU). E2B's count is held against its measured resident bytes too, which is why E4B's
is labelled an upper estimate, not measured."""

from __future__ import annotations

import json

from components import catalog
from components.catalog import models as catalog_models
from tests import vllm_venv

COUNT = """
import json, sys, torch
from transformers import AutoConfig, AutoModelForImageTextToText
counts = {}
for path in json.load(sys.stdin):
    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(AutoConfig.for_model(**json.load(open(path))))
    counts[path] = sum(parameter.numel() for parameter in model.parameters())
json.dump(counts, sys.stdout)
"""


def test_gemma_4_weights_are_transformers_parameter_count_and_e2bs_is_above_its_measurement():
    paths = {name: str(catalog_models.CONFIGS / catalog.catalog_model(name).config_file)
             for name in ("google/gemma-4-E2B-it", "google/gemma-4-E4B-it", "google/gemma-4-31B-it")}
    completed = vllm_venv.run(["-c", COUNT], input=json.dumps(list(paths.values())), text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    counts = json.loads(completed.stdout)
    assert counts[paths["google/gemma-4-E4B-it"]] == catalog_models.GEMMA_4_E4B_PARAMETERS
    assert counts[paths["google/gemma-4-E2B-it"]] == catalog_models.GEMMA_4_E2B_PARAMETERS
    assert counts[paths["google/gemma-4-31B-it"]] == catalog_models.GEMMA_4_31B_PARAMETERS
    e4b = catalog.catalog_model("google/gemma-4-E4B-it").weights
    assert (e4b.bytes, e4b.measured) == (catalog_models.GEMMA_4_E4B_PARAMETERS * 2, False)
    assert "upper estimate" in e4b.basis
    e2b = catalog.catalog_model("google/gemma-4-E2B-it").weights
    assert e2b.measured and e2b.bytes < catalog_models.GEMMA_4_E2B_PARAMETERS * 2 < e2b.bytes * 1.07


def test_gemma_3_27b_weights_are_transformers_parameter_count():
    model = catalog.catalog_model("google/gemma-3-27b-it")
    path = str(catalog_models.CONFIGS / model.config_file)
    completed = vllm_venv.run(["-c", COUNT], input=json.dumps([path]), text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert json.loads(completed.stdout)[path] == catalog_models.GEMMA_3_27B_PARAMETERS
    assert (model.weights.bytes, model.weights.measured) == (catalog_models.GEMMA_3_27B_PARAMETERS * 2, False)
