"""Which vLLM build: the one the stack pulls by default, and the one the measured points ran. One value each, so the
image setting, the suite's oracle (requirements-vllm.txt) and every measured figure name the same build.

- The stack's build is a release of `vllm/vllm-tpu`: vllm-tpu 0.32.0, the newest TPU release (PyPI's vllm-tpu lists
  0.32.0 last, beside vLLM 0.33.0 and 0.34.0, which have no TPU release). Its sdist says what it carries:
  `vllm/_version.py` `__version__ = '0.32.0'`, PKG-INFO `Requires-Dist: tpu-inference==0.32.0`, the same pin in
  `requirements/tpu.txt`; tpu-inference's `.buildkite/scripts/build_vllm_tpu.sh` builds it so (vLLM at a tag, its
  `requirements/tpu.txt` pinned to one tpu-inference). tpu-inference 0.32.0 serves every catalogued architecture
  (`tpu_inference/models/common/model_loader.py`: Gemma4ForConditionalGeneration, LlamaForCausalLM,
  Qwen3ForCausalLM in its registry; Qwen3MoeForCausalLM in `_VLLM_PREFERRED_ARCHITECTURES`, vLLM's own model).
- The measured build: both boot logs ran `vllm/vllm-tpu:nightly` of 2026-08, whose version string the v5e log
  prints (`vLLM 0.26.1rc1.dev125+ga7a204cc6`); its tpu-inference commit is not in the log.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.catalog.sources import V5E_LOG_SOURCE, Source

VLLM_TPU_REPOSITORY = "vllm/vllm-tpu"
# Tags that move (tpu-inference .buildkite/nightly_releases.yml pushes `nightly` every night; `latest` follows the
# release); `nightly-DATE-SHA-SHA` and `vX.Y.Z` name one build.
FLOATING_TAGS = frozenset({"nightly", "latest"})


def floating_tag(image: str) -> str | None:
    """The tag of `image` when it is one that moves, else None (a digest pins whatever tag stands beside it; no tag
    is docker's `latest`)."""
    if "@" in image:
        return None
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else "latest"
    return tag if tag in FLOATING_TAGS else None


@dataclass(frozen=True)
class Build:
    """One vLLM build: the image as pulled, and the vLLM and tpu-inference versions inside it."""

    image: str
    vllm: str
    tpu_inference: str | None
    """None when the source does not say."""
    source: Source

    def __str__(self) -> str:
        inference = f", tpu-inference {self.tpu_inference}" if self.tpu_inference else ""
        return f"{self.image} (vLLM {self.vllm}{inference})"


RELEASE = Build(f"{VLLM_TPU_REPOSITORY}:v0.32.0", vllm="0.32.0", tpu_inference="0.32.0",
                source=Source("PyPI vllm-tpu 0.32.0 sdist (vllm/_version.py, PKG-INFO Requires-Dist); tpu-inference "
                              ".buildkite/scripts/build_vllm_tpu.sh", "read 2026-12"))
"""The stack's default image, and what requirements-vllm.txt installs for the tests (tests/test_vllm_build.py)."""

MEASURED = Build(f"{VLLM_TPU_REPOSITORY}:nightly", vllm="0.26.1rc1.dev125+ga7a204cc6", tpu_inference=None,
                 source=V5E_LOG_SOURCE)
"""What every measured point ran (components/catalog/measured.py)."""
