"""One vLLM build: the image the stack pulls by default, the shipped stacks' images and the suite's vLLM
(requirements-vllm.txt, installed in the vLLM venv) are one release (components/catalog/builds.py RELEASE); a floating
tag still loads, and says once that the tests did not judge it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from components import catalog
from components import settings as s
from components.settings.vllm import VLLM_IMAGE
from tests import vllm_venv

ROOT = Path(__file__).resolve().parents[1]
SSH = {"access": {"sshSourceRanges": ["198.51.100.7/32"]}}


def lock_pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements-vllm.txt").read_text().splitlines():
        name, sep, version = line.partition("==")
        if sep and not line.startswith("#"):
            pins[name.strip().lower()] = version.strip()
    return pins


def release_of(image: str) -> str | None:
    """`vllm/vllm-tpu:vX.Y.Z` -> X.Y.Z; None for any other reference."""
    match = re.fullmatch(rf"(?:docker\.io/)?{re.escape(catalog.VLLM_TPU_REPOSITORY)}:v(\d+\.\d+\.\d+)", image)
    return match.group(1) if match else None


def oracle_disagreement(image: str, pins: dict[str, str]) -> str | None:
    """Why the suite's vLLM is not the image's, or None."""
    version = release_of(image)
    if version is None:
        return None if catalog.floating_tag(image) or "@" in image else f"{image} names no vllm-tpu release"
    locked = pins.get("vllm-tpu", "")
    if locked != version:
        return f"{image} is vllm-tpu {version}; requirements-vllm.txt installs vllm-tpu {locked or 'none'}"
    return None


def test_the_default_image_is_the_release_the_lock_installs():
    pins = lock_pins()
    assert VLLM_IMAGE == catalog.RELEASE.image == f"vllm/vllm-tpu:v{catalog.RELEASE.vllm}"
    assert pins["vllm-tpu"] == catalog.RELEASE.vllm
    assert pins["tpu-inference"] == catalog.RELEASE.tpu_inference
    assert "vllm" not in pins  # the release's own vLLM source, not the `vllm` wheel of the same number
    assert oracle_disagreement(VLLM_IMAGE, pins) is None


@pytest.mark.parametrize("stack_file", sorted(path.name for path in ROOT.glob("Pulumi.*.yaml")))
def test_every_shipped_stacks_image_is_the_oracles_release(stack_file):
    config = yaml.safe_load((ROOT / stack_file).read_text())["config"]
    image = (config.get("tpu-vllm:vllm") or {}).get("image", VLLM_IMAGE)
    assert release_of(image) == catalog.RELEASE.vllm, image
    assert oracle_disagreement(image, lock_pins()) is None


def test_an_image_of_another_release_than_the_oracle_is_a_disagreement():
    pins = lock_pins()
    assert "requirements-vllm.txt installs vllm-tpu 0.32.0" in oracle_disagreement("vllm/vllm-tpu:v0.31.0", pins)
    assert "installs vllm-tpu 0.31.0" in oracle_disagreement(VLLM_IMAGE, {**pins, "vllm-tpu": "0.31.0"})


def test_the_installed_vllm_and_tpu_inference_are_the_releases():
    code = ("import importlib.metadata as m, json, vllm.version as v\n"
            "print(json.dumps({'vllm': v.__version__, 'dist': m.version('vllm-tpu'),"
            " 'tpu_inference': m.version('tpu-inference')}))")
    completed = vllm_venv.run(["-c", code], text=True)
    assert completed.returncode == 0, completed.stderr[-2000:]
    installed = json.loads(completed.stdout)
    assert installed["vllm"] == catalog.RELEASE.vllm
    assert installed["dist"] == catalog.RELEASE.vllm
    assert installed["tpu_inference"] == catalog.RELEASE.tpu_inference


def load(image: str):
    return s.load({**SSH, "vllm": {"image": image}}, project="my-proj", stack="dev")


@pytest.mark.parametrize(("image", "tag"), [("vllm/vllm-tpu:nightly", "nightly"), ("vllm/vllm-tpu", "latest"),
                                            ("vllm/vllm-tpu:latest", "latest")])
def test_a_floating_tag_loads_and_warns_once(image, tag):
    loaded = load(image)
    assert loaded.settings.vllm.image == image
    said = [warning for warning in loaded.warnings if "tpu-vllm:vllm.image" in warning]
    assert len(said) == 1 and f"`{tag}` moves" in said[0] and catalog.RELEASE.image in said[0]


@pytest.mark.parametrize("image", [VLLM_IMAGE, "vllm/vllm-tpu:nightly-20260810-abcdef1-a7a204c",
                                   "vllm/vllm-tpu@sha256:" + "a" * 64, "vllm/vllm-tpu:nightly@sha256:" + "b" * 64])
def test_a_tag_that_names_one_build_says_nothing(image):
    assert not [warning for warning in load(image).warnings if "vllm.image" in warning]


def test_every_measured_point_names_the_build_that_booted():
    for point in catalog.measured_pools():
        assert point.build is catalog.MEASURED
        assert "vLLM 0.26.1rc1.dev125+ga7a204cc6" in point.cited and str(point.source) in point.cited
