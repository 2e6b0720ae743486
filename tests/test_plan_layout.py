"""The offline plan's shape: a package without import cycles, calling the program's run(), costs from the core.

The import graph is read from the source (ast), so an import inside a function counts as much as one at the top.
"""

from __future__ import annotations

import ast
import functools
import json
from pathlib import Path

import pytest

from tests import program as harness

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("components", "tools")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _project_modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "node_modules" not in path.parts:
                modules[_module_name(path)] = path
    return modules


def import_graph() -> dict[str, set[str]]:
    """Project module -> the project modules it imports (`from a.b import c` is a.b.c when c is a module)."""
    modules = _project_modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for module, imported in _imports(path.read_text(encoding="utf-8")):
            targets = [module] if imported is None else [
                f"{module}.{alias}" if f"{module}.{alias}" in modules else module for alias in imported]
            graph[name].update(target for target in targets if target in modules and target != name)
    return graph


@functools.cache
def _imports(source: str) -> tuple[tuple[str, tuple[str, ...] | None], ...]:
    """(module, None) for `import module`, (module, names) for `from module import names`; parsed once per
    source text (several tests read the graph, and the text is read again each time)."""
    found: list[tuple[str, tuple[str, ...] | None]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, tuple(alias.name for alias in node.names)))
    return tuple(found)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle_through_a_function_level_import():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_in_the_tools_or_the_components():
    assert cycles(import_graph()) == []


def test_no_component_imports_a_tool():
    graph = import_graph()
    wrong = {module: sorted(t for t in targets if t.startswith("tools"))
             for module, targets in graph.items() if module.startswith("components")}
    assert {module: targets for module, targets in wrong.items() if targets} == {}


def test_the_plan_renders_costs_it_does_not_compute():
    graph = import_graph()
    plan_modules = {module for module in graph if module.startswith("tools.plan")}
    assert plan_modules >= {"tools.plan.engine", "tools.plan.model", "tools.plan.render", "tools.plan.diff"}
    computing = {module for module in plan_modules
                 if any(target.startswith("components.basis") for target in graph[module])}
    assert computing == set()
    # Both platforms' cost lines come from one module of the economics room, which no wing owns.
    assert "components.economics.cost_lines" in graph["tools.plan.render"]
    assert not (ROOT / "components/gke/costs.py").exists()


# Runs the program in a process of its own (Pulumi's runtime is process-global: a fresh one, or a child forked
# from tests/fork_server.py's server before any run) under the plan's own engine.
PROGRAM_ENTRY = """
import json, runpy, sys
import pulumi
from pulumi.runtime import config as runtime_config
from pulumi.runtime.stack import wait_for_rpcs
from pulumi.runtime.sync_await import _sync_await
from tools.plan import engine

request = json.load(sys.stdin)
mocks = engine.install(project=request["config"]["gcp:project"], stack="dev")
runtime_config.set_all_config(request["config"], [])
result = {}
if request["how"] == "import":
    program = engine.load_program()
    _sync_await(wait_for_rpcs())
    result["registered_on_import"] = len(mocks.registrations)
    result["has_run"] = callable(getattr(program, "run", None))
else:
    # As pulumi-language-python-exec does: the project directory, run as __main__.
    try:
        runpy.run_path(request["root"], run_name="__main__")
        _sync_await(wait_for_rpcs())
    except pulumi.RunError as error:
        result["run_error"] = str(error)
    result["types"] = sorted({r.type for r in mocks.registrations})
print(json.dumps(result))
"""


def _program_entry(how: str, config: dict[str, str]) -> dict:
    completed = harness.python_c(PROGRAM_ENTRY, json.dumps({"how": how, "config": config, "root": str(ROOT)}))
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.splitlines()[-1])


def test_importing_the_program_registers_nothing_until_the_plan_calls_run():
    result = _program_entry("import", harness.dev_config())
    assert result == {"registered_on_import": 0, "has_run": True}


def test_under_the_cli_the_program_runs_itself_and_reports_bad_settings_as_a_run_error():
    good = _program_entry("cli", harness.dev_config())
    assert "run_error" not in good
    assert any(registered.endswith(":QueuedResource") for registered in good["types"]), good["types"]
    bad = _program_entry("cli", harness.dev_config(project="Not_A_Project"))
    assert bad["types"] == []
    assert bad["run_error"].count('gcp:project = "Not_A_Project"') == 1 and "Traceback" not in bad["run_error"]


@pytest.mark.parametrize("project", ["PLACEHOLDER-set-gcp-project"])
def test_the_settings_do_not_accept_the_plans_placeholder_as_a_project(project):
    from components import settings

    with pytest.raises(settings.SettingsError) as caught:
        settings.load({"access": {"sshSourceRanges": ["198.51.100.7/32"]}}, project, "dev")
    assert f'gcp:project = "{project}"' in caught.value.problems[0]


# The rooms of components/, lowest floor first. A module imports only from its own room or a lower floor: the
# bounded reader knows nothing else, the catalog's data only it, the figures and the sizing nothing of settings,
# settings nothing of what is served, neither wing of the other.
FLOORS = (
    ("components.reading",),
    ("components.catalog",),
    ("components.basis", "components.sizing"),
    ("components.settings",),
    ("components.core", "components.serving"),
    ("components.monitoring",),
    ("components.economics",),
    ("components.vm", "components.gke"),
)
# Kept where Pulumi's state names it (a dynamic provider is stored by module path): an alias, not a room.
STATE_CONTRACT_ALIASES = {"components.queued_resource"}


def room_of(module: str) -> tuple[int, str] | None:
    for floor, rooms in enumerate(FLOORS):
        for room in rooms:
            if module == room or module.startswith(room + "."):
                return floor, room
    return None


def upward_imports(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    wrong: dict[str, list[str]] = {}
    for module, targets in graph.items():
        here = room_of(module)
        if here is None:
            continue
        for target in sorted(targets):
            there = room_of(target)
            if there is not None and there[1] != here[1] and there[0] >= here[0]:
                wrong.setdefault(module, []).append(target)
    return wrong


def test_the_floor_check_catches_an_upward_and_a_sideways_import():
    graph = {"components.basis.chip_memory": {"components.settings.root"},
             "components.vm.deployment": {"components.gke.workload", "components.core.identity"},
             "components.settings.root": {"components.basis.chip_memory"}}
    assert upward_imports(graph) == {"components.basis.chip_memory": ["components.settings.root"],
                                     "components.vm.deployment": ["components.gke.workload"]}


def test_every_component_module_lives_in_a_room():
    loose = {module for module in import_graph() if module.startswith("components.") and room_of(module) is None}
    assert loose == STATE_CONTRACT_ALIASES


def test_no_room_imports_from_its_own_floor_or_above():
    assert upward_imports(import_graph()) == {}
