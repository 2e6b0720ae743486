"""One wing contract: both wings are `Wing(name, WingArgs(settings, core), opts)` ComponentResources that
expose `outputs` and register them; the program is settings -> core -> wing -> export; the core knows no wing."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import sys
import typing
from pathlib import Path

import pulumi
import pytest

import components.settings
from components.core.shared_resources import Core
from components.gke.deployment import GkeWing, GkeWingArgs
from components.settings import Settings
from components.vm.deployment import VmWing, VmWingArgs
from tests import program as harness
from tests.test_plan_layout import import_graph

ROOT = Path(__file__).resolve().parent.parent
WINGS = [(VmWing, VmWingArgs), (GkeWing, GkeWingArgs)]


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
    assert sorted(made) == ["GkeWing", "GkeWingArgs", "VmWing", "VmWingArgs"], made
    assert "create_core" in calls and "pulumi.export" in calls


def test_the_core_imports_no_wing():
    graph = import_graph()
    reached, todo = set(), ["components.core.shared_resources"]
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


WING_ARGS = {VmWingArgs, GkeWingArgs}
AliasOfSettings = Settings


def component_dataclasses() -> list[type]:
    """Every dataclass defined in a module under components/ (the settings package aside): the components'
    Args and the value groups they hold."""
    found = []
    for path in sorted((ROOT / "components").rglob("*.py")):
        module_name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        if module_name.startswith("components.settings"):
            continue
        module = importlib.import_module(module_name)
        found += [value for value in vars(module).values()
                  if dataclasses.is_dataclass(value) and isinstance(value, type) and value.__module__ == module_name]
    return found


def fields_holding_settings(cls: type) -> list[str]:
    """Fields whose type is Settings or holds it (Settings | None, list[Settings], an alias of it, a
    module-qualified settings.Settings), read from the annotation's text: some annotations name types
    imported only for type checking, so they cannot all be evaluated."""
    module_globals = vars(sys.modules[cls.__module__])

    def names_settings(node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id == "Settings" or module_globals.get(node.id) is Settings
        return isinstance(node, ast.Attribute) and node.attr == "Settings"

    def holds(annotation: object) -> bool:
        text = annotation if isinstance(annotation, str) else repr(annotation)
        return any(names_settings(node) for node in ast.walk(ast.parse(text, mode="eval")))
    return [field.name for field in dataclasses.fields(cls) if holds(field.type)]


def test_the_settings_check_catches_settings_inside_another_type():
    @dataclasses.dataclass
    class Sneaky:
        plain: int
        maybe: Settings | None
        many: list[Settings]
        aliased: AliasOfSettings
        qualified: components.settings.Settings
        fine: dict[str, int]
    assert fields_holding_settings(Sneaky) == ["maybe", "many", "aliased", "qualified"]


def test_only_the_wings_args_hold_the_settings():
    """Components take Args of exactly the values they use; the wings map the settings to them."""
    classes = component_dataclasses()
    names = {cls.__name__ for cls in classes}
    assert {"ServingWorkloadArgs", "ExposureArgs", "AutoscalingArgs", "CompileCacheArgs", "ServingStepArgs"} <= names
    assert WING_ARGS <= set(classes)
    holding = {f"{cls.__module__}.{cls.__name__}": fields_holding_settings(cls)
               for cls in classes if cls not in WING_ARGS}
    assert {name: fields for name, fields in holding.items() if fields} == {}


WING_CONSTRUCTORS = {("components/vm/deployment.py", "VmWing.__init__"),
                     ("components/gke/deployment.py", "GkeWing.__init__")}
SETTINGS_PARAMETER_NAMES = {"settings", "cfg"}


def settings_takers(source: str) -> list[str]:
    """Every function (by qualified name) that takes the settings object: a parameter annotated `Settings`
    (also `Settings | None`, `settings.Settings`, a string annotation) or named settings/cfg, and every
    `<x>.settings` read, which only a wing's Args carries."""
    found: list[str] = []

    def names_settings(annotation: ast.AST | None) -> bool:
        if annotation is None:
            return False
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            annotation = ast.parse(annotation.value, mode="eval")
        return any((isinstance(node, ast.Name) and node.id == "Settings")
                   or (isinstance(node, ast.Attribute) and node.attr == "Settings") for node in ast.walk(annotation))

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                name = f"{scope}.{child.name}" if not isinstance(child, ast.Lambda) else f"{scope}.<lambda>"
                name = name.lstrip(".")
                arguments = child.args
                every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                         *([arguments.vararg] if arguments.vararg else []),
                         *([arguments.kwarg] if arguments.kwarg else [])]
                if any(arg.arg in SETTINGS_PARAMETER_NAMES or names_settings(arg.annotation) for arg in every):
                    found.append(name)
                visit(child, name)
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{scope}.{child.name}".lstrip("."))
            elif isinstance(child, ast.arguments):
                continue  # annotations (a module-qualified components.settings.Settings) were judged above
            else:
                if isinstance(child, ast.Attribute) and child.attr == "settings" and isinstance(child.ctx, ast.Load):
                    found.append(f"{scope or '<module>'} reads {ast.unparse(child)}")
                visit(child, scope)
    visit(ast.parse(source), "")
    return found


def test_the_settings_check_finds_every_way_of_taking_them():
    source = '''
def plain(settings): ...
def annotated(values: Settings): ...
def optional(values: "Settings | None" = None): ...
def qualified(*, values: components.settings.Settings): ...
def short(cfg, x): ...
class Thing:
    def method(self, other: int, *rest: Settings): ...
    def reads(self, args):
        return args.settings.vllm
def fine(spec: ServingSpec, gke: GkeSettings, port: int): ...
run = lambda settings: settings
'''
    assert settings_takers(source) == ["plain", "annotated", "optional", "qualified", "short", "Thing.method",
                                       "Thing.reads reads args.settings", "<lambda>"]


def test_only_the_wings_constructors_take_the_settings():
    """Below a wing's constructor, functions take the serving spec, a settings section or plain values: the
    server is derived once (components/serving/spec.py), and nothing under a wing re-derives it."""
    takers = []
    for folder in ("vm", "gke"):
        for path in sorted((ROOT / "components" / folder).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            for name in settings_takers(path.read_text()):
                qualified = name.split(" reads ")[0]
                if (relative, qualified) not in WING_CONSTRUCTORS:
                    takers.append(f"{relative}: {name}")
    assert takers == []
