"""Resource URNs and alias URNs as the Pulumi engine computes them, and what a stack's state would match.

The mock monitor's own URNs keep only the parent's last type (pulumi/runtime/mocks.py, make_urn), so a
grandchild's URN would be wrong; these follow the engine (pulumi/pulumi v3.272.0):
- sdk/go/common/resource/urn/urn.go, New: `urn:pulumi:<stack>::<project>::<parent type chain>$<type>::<name>`,
  the root stack's type left out;
- pkg/resource/deploy/step_generator.go, collapseAliasToUrn: an alias spec's unset name/type/parent default
  to the resource's own; `noParent` (Python `Alias(parent=ROOT_STACK_RESOURCE)`, which
  sdk/python/lib/pulumi/runtime/resource.py create_alias_spec sends as noParent) means "was at the root";
- step_generator.go, generateAliases and inheritedChildAlias: a child inherits its parent's matched alias
  (its name re-prefixed when it starts with the parent's name), and getOldResource looks the URN up
  first, then each alias, in the old state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

ROOT_STACK_TYPE = "pulumi:pulumi:Stack"


@dataclass(frozen=True)
class AliasSpec:
    """One alias as the SDK sends it (alias_pb2.Alias): a whole URN, or a spec whose "" fields default."""

    urn: str = ""
    name: str = ""
    type: str = ""
    parent_urn: str = ""
    no_parent: bool = False
    stack: str = ""
    project: str = ""


@dataclass(frozen=True)
class Registered:
    """What the URN rules need of one registration: in the order the engine received them (parents first)."""

    urn: str
    type: str
    name: str
    parent_urn: str
    """"" at the root (the stack resource is not recorded)."""
    aliases: tuple[AliasSpec, ...] = field(default_factory=tuple)


def qualified_type(urn: str) -> str:
    return urn.split("::")[2]


def urn_name(urn: str) -> str:
    return urn.split("::", 3)[3]


def make_urn(stack: str, project: str, parent_urn: str, type_: str, name: str) -> str:
    parent_type = qualified_type(parent_urn) if parent_urn else ""
    chain = f"{parent_type}${type_}" if parent_type and parent_type != ROOT_STACK_TYPE else type_
    return f"urn:pulumi:{stack}::{project}::{chain}::{name}"


def _stack_and_project(urn: str) -> tuple[str, str]:
    stack, project = urn[len("urn:pulumi:"):].split("::")[:2]
    return stack, project


def collapse_alias(resource: Registered, alias: AliasSpec, matched: Mapping[str, str]) -> str:
    """The alias's URN; `matched` maps a new URN to the old one its resource was found by."""
    if alias.urn:
        return alias.urn
    stack, project = _stack_and_project(resource.urn)
    parent = alias.parent_urn or resource.parent_urn
    if alias.parent_urn:
        parent = matched.get(parent, parent)
    if alias.no_parent or (parent and qualified_type(parent) == ROOT_STACK_TYPE):
        parent = ""
    return make_urn(alias.stack or stack, alias.project or project, parent,
                    alias.type or resource.type, alias.name or resource.name)


def inherited_alias(child_type: str, child_name: str, parent_name: str, parent_alias: str) -> str:
    stack, project = _stack_and_project(parent_alias)
    name = urn_name(parent_alias) + child_name[len(parent_name):] if child_name.startswith(parent_name) else child_name
    return make_urn(stack, project, parent_alias, child_type, name)


def alias_urns(resource: Registered, parent_aliases: Sequence[str], matched: Mapping[str, str]) -> list[str]:
    """generateAliases: the resource's own aliases, then each of its parent's aliases multiplied out."""
    found: list[str] = []

    def add(urn: str) -> None:
        if urn not in found:
            found.append(urn)

    own = [collapse_alias(resource, alias, matched) for alias in resource.aliases]
    for urn in own:
        add(urn)
    parent_name = urn_name(resource.parent_urn) if resource.parent_urn else ""
    for parent_alias in parent_aliases:
        add(inherited_alias(resource.type, resource.name, parent_name, parent_alias))
        for urn in own:
            add(inherited_alias(qualified_type(urn).split("$")[-1], urn_name(urn), parent_name, parent_alias))
    return found


def candidate_aliases(resources: Iterable[Registered]) -> dict[str, list[str]]:
    """Every URN each resource may be found by in a state, with no state to match against: a parent's every
    alias is multiplied out (what the SDK computes itself for an engine without alias specs, all_aliases)."""
    candidates: dict[str, list[str]] = {}
    for resource in resources:
        candidates[resource.urn] = alias_urns(resource, candidates.get(resource.parent_urn, []), {})
    return candidates


@dataclass
class StateMatch:
    """What the engine would do with an old state: which old URN each new resource updates."""

    updated: dict[str, str]
    """new URN -> the old URN it was found by (itself, or an alias)."""
    created: list[str]
    """New URNs found under no old URN: created."""
    deleted: list[str]
    """Old URNs no new resource claimed: the engine deletes them (a replacement, for a live resource)."""
    claimed_twice: list[str]


def match_state(old_urns: Iterable[str], resources: Iterable[Registered]) -> StateMatch:
    """getOldResource for each registration in order: the URN first, then its aliases."""
    olds = set(old_urns)
    matched: dict[str, str] = {}
    """new URN -> old URN, only where an alias matched (the engine's sg.aliases)."""
    updated: dict[str, str] = {}
    created: list[str] = []
    claimed_twice: list[str] = []
    claimed: set[str] = set()
    for resource in resources:
        parent_alias = matched.get(resource.parent_urn)
        aliases = alias_urns(resource, [parent_alias] if parent_alias else [], matched)
        old = next((urn for urn in (resource.urn, *aliases) if urn in olds), None)
        if old is None:
            created.append(resource.urn)
            continue
        if old in claimed:
            claimed_twice.append(old)
        claimed.add(old)
        updated[resource.urn] = old
        if old != resource.urn:
            matched[resource.urn] = old
    deleted = sorted(olds - claimed)
    return StateMatch(updated=updated, created=created, deleted=deleted, claimed_twice=claimed_twice)
