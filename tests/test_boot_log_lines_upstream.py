"""The boot-log line docs/models.md tells a person to grep for a measured KV pool, held to the vLLM that prints it:
vLLM 0.33.0 names the pool by the platform's device type (vllm/v1/core/kv_cache_utils.py _kv_cache_device_name,
run in the vLLM venv), and tpu-inference 0.32.0's platform says "tpu" (tpu_inference/platforms/tpu_platform.py,
read from the installed file: its module imports JAX, which the venv lacks)."""

from __future__ import annotations

import re
from pathlib import Path

from tests import vllm_venv

ROOT = Path(__file__).resolve().parent.parent
DEVICE_NAME = """
import importlib.util, pathlib, ast, types
from vllm.v1.core.kv_cache_utils import _kv_cache_device_name
package = pathlib.Path(importlib.util.find_spec("tpu_inference").submodule_search_locations[0])
tree = ast.parse((package / "platforms" / "tpu_platform.py").read_text())
device_type = next(node.value.value
                   for cls in tree.body if isinstance(cls, ast.ClassDef) and cls.name == "TpuPlatform"
                   for node in cls.body
                   if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "device_type")
print(_kv_cache_device_name(types.SimpleNamespace(device_config=types.SimpleNamespace(device_type=device_type))))
"""


def docs_grep_pattern() -> str:
    found = re.search(r'grep -E "([^"]+)"', (ROOT / "docs" / "models.md").read_text())
    assert found, "docs/models.md no longer shows the grep for a measured point"
    return found.group(1)


def test_the_docs_grep_finds_the_kv_cache_line_vllm_prints_on_tpu_and_the_older_nightlys():
    completed = vllm_venv.run(["-c", DEVICE_NAME], text=True)
    assert completed.returncode == 0, completed.stderr[-3000:]
    device = completed.stdout.strip()
    assert device == "TPU"
    pattern = docs_grep_pattern()
    assert re.search(pattern, f"{device} KV cache size: 1,151,744 tokens, Maximum concurrency for 32,768 tokens")
    # The 0.26.1rc1 nightly both measured logs ran (the v6e boot log's own line).
    assert re.search(pattern, "GPU KV cache size: 1,151,744 tokens")
    assert not re.search(pattern, "Maximum concurrency for 32,768 tokens per request")
