"""One wing contract: both wings are `Wing(name, WingArgs(settings, core), opts)` ComponentResources that
expose `outputs` and register them; the program is settings -> core -> wing -> export; the core knows no wing."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import typing
from pathlib import Path

import pulumi
import pytest

from components.core import Core
from components.gke.deployment import GkeDeployment, GkeDeploymentArgs
from components.settings import Settings
from components.vm.deployment import VmDeployment, VmDeploymentArgs
from tests import program as harness
from tests.test_plan_layout import import_graph

ROOT = Path(__file__).resolve().parent.parent
WINGS = [(VmDeployment, VmDeploymentArgs), (GkeDeployment, GkeDeploymentArgs)]


@pytest.mark.parametrize(("wing", "args"), WINGS, ids=["vm", "gke"])
def test_each_wing_takes_its_name_the_settings_and_the_core(wing, args):
    assert issubclass(wing, pulumi.ComponentResource)
    assert list(inspect.signature(wing.__init__).parameters) == ["self", "name", "args", "opts"]
    assert [field.name for field in dataclasses.fields(args)] == ["settings", "core"]
    assert typing.get_type_hints(args) == {"settings": Settings, "core": Core}
    source = inspect.getsource(wing.__init__)
    assert "self.register_outputs(" in source and "self.outputs = " in source


def test_the_program_is_settings_then_core_then_a_wing_then_exports():
    tree = ast.parse((ROOT / "__main__.py").read_text())
    run = next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "run")
    calls = [ast.unparse(node.func) for node in ast.walk(run) if isinstance(node, ast.Call)]
    made = [call for call in calls if call[:1].isupper()]
    assert sorted(made) == ["GkeDeployment", "GkeDeploymentArgs", "VmDeployment", "VmDeploymentArgs"], made
    assert "create_core" in calls and "pulumi.export" in calls


def test_the_core_imports_no_wing():
    graph = import_graph()
    reached, todo = set(), ["components.core"]
    while todo:
        module = todo.pop()
        for imported in graph.get(module, ()):
            if imported not in reached:
                reached.add(imported)
                todo.append(imported)
    assert not [m for m in reached if m.startswith(("components.vm", "components.gke"))], sorted(reached)


@pytest.mark.parametrize("platform", ["vm", "gke"])
def test_each_wing_is_a_component_holding_the_platforms_resources(platform):
    config = harness.dev_config() if platform == "vm" else harness.gke_config()
    program = harness.run(config, stack="dev" if platform == "vm" else "gke")
    assert program.problems is None
    [wing] = [r for r in program.registrations if r["type"] == f"tpu-vllm:{platform}:Deployment"]
    assert wing["parent"] in (None, f"tpu-vllm-{'dev' if platform == 'vm' else 'gke'}") and not wing["custom"]
    core = {"tpu-vllm:project:Services", "tpu-vllm:secrets:StackSecrets"}
    at_root = {r["type"] for r in program.registrations if r["parent_urn"] == "" or "::pulumi:pulumi:Stack::" in
               r["parent_urn"]}
    assert at_root == core | {"tpu-vllm:identity:ServiceIdentity", wing["type"]}, at_root
