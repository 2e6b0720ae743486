"""Every stack output is in one registry (components/core/stack_outputs.py), and the docs' table is written from it.

The wings' real exports are read by running both platforms' programs under the offline engine's mocks: a name a
wing exports that the registry lacks fails, and so does a name the registry gives a platform that never exports it.
"""

from __future__ import annotations

import dataclasses

import pytest

from components.core import outputs_docs, stack_outputs
from tests import test_gke_gateway, test_gke_program, test_program

# tests/test_gke_program.py's every-other-choice run (an external load balancer among them) and tests/test_program.py's
# run with a serving range: the same fixtures, the same requests, so tests/shared_runs.py runs each once a session.
variant = test_gke_program.variant
served_and_mailed = test_program.served_and_mailed


@pytest.fixture(scope="module")
def vm_runs(served_and_mailed):
    """The dev stack with a serving range, so that externalEndpoint is exported beside internalEndpoint; and the
    compute path's TPU7x stack (its instance's outputs, and the price it has none of)."""
    assert "externalEndpoint" in served_and_mailed.data["outputs"]
    from tests import test_compute_node

    compute = test_compute_node.tpu7x_program()
    assert "instanceName" in compute.data["outputs"]
    return [served_and_mailed, compute]


@pytest.fixture(scope="module")
def gke_runs(gke_program, variant):
    """The gke example stack (internalEndpoint), with an external load balancer (externalEndpoint instead), and with
    the inference gateway (its outputs), and with the pool at zero (scaleToZero)."""
    from tests import test_scale_to_zero

    assert variant.problems is None and "externalEndpoint" in variant.data["outputs"]
    gateway = test_gke_gateway.gateway_program()
    assert "inferenceGateway" in gateway.data["outputs"]
    zero = test_scale_to_zero.zero_program()
    assert "scaleToZero" in zero.data["outputs"]
    return [gke_program, variant, gateway, zero]


def exported(runs) -> list[set[str]]:
    return [set(run.data["outputs"]) for run in runs]


def unregistered(platform: str, runs: list[set[str]]) -> set[str]:
    return set().union(*runs) - stack_outputs.names_for(platform)


def never_exported(platform: str, runs: list[set[str]]) -> set[str]:
    return stack_outputs.names_for(platform) - set().union(*runs)


def test_the_docs_table_is_the_registrys():
    assert outputs_docs.main(["--check"]) == 0, "run python -m components.core.outputs_docs"


def test_a_docs_table_edited_by_hand_is_caught():
    page = outputs_docs.docs.DOC.read_text()
    edited = page.replace("| `apiKey` (secret) | both |", "| `apiKey` | both |")
    assert edited != page and outputs_docs.rendered(edited) == page


@pytest.mark.parametrize("platform", stack_outputs.PLATFORMS)
def test_each_platform_exports_exactly_the_registrys_names(platform, request):
    runs = exported(request.getfixturevalue(f"{platform}_runs"))
    assert unregistered(platform, runs) == set(), "add each to components/core/stack_outputs.py"
    assert never_exported(platform, runs) == set(), "the registry names outputs this platform never exports"
    always = {output.name for output in stack_outputs.OUTPUTS if platform in output.platforms and not output.only_when}
    for names in runs:
        assert always <= names, always - names


def test_an_unregistered_export_and_a_registered_name_never_exported_are_both_caught(vm_runs, monkeypatch):
    runs = exported(vm_runs)
    assert unregistered("vm", [runs[0] | {"newOutput"}]) == {"newOutput"}
    # A gke-only output registered for both platforms: the vm program never exports it.
    widened = dataclasses.replace(stack_outputs.BY_NAME["clusterName"], platforms=stack_outputs.PLATFORMS)
    monkeypatch.setattr(stack_outputs, "OUTPUTS", (*stack_outputs.OUTPUTS, widened))
    assert never_exported("vm", runs) == {"clusterName"}


def test_each_output_is_registered_once_for_known_platforms():
    names = [output.name for output in stack_outputs.OUTPUTS]
    assert len(names) == len(set(names))
    assert all(output.platforms and set(output.platforms) <= set(stack_outputs.PLATFORMS) and output.description
               for output in stack_outputs.OUTPUTS)
