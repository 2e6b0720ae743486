"""No resource of a live stack is replaced by a refactor: every URN recorded in tests/golden/urns/ (the state
a stack deployed from an earlier commit holds) is still found by the program, as its URN or through an alias,
the way the engine looks it up (tools/plan/urns.py follows pkg/resource/deploy/step_generator.go)."""

from __future__ import annotations

import pytest

from tests import program as harness
from tests.golden import STACKS
from tests.golden.urns import recorded_urns
from tools.plan.stack_file import read_stack_config
from tools.plan.urns import AliasSpec, Registered, candidate_aliases, make_urn, match_state


def registered(program) -> list[Registered]:
    return [Registered(urn=r["urn"], type=r["type"], name=r["name"], parent_urn=r["parent_urn"],
                       aliases=tuple(AliasSpec(**alias) for alias in r["aliases"]))
            for r in program.registrations]


@pytest.mark.parametrize("stack", STACKS, ids=[stack.name for stack in STACKS])
def test_every_recorded_urn_is_found_and_none_twice(stack):
    config, secret_keys = read_stack_config(stack.config_dir / f"Pulumi.{stack.name}.yaml")
    # A URN names the stack and Pulumi's project, never the GCP project (urn:pulumi:<stack>::tpu-vllm::...): the
    # shipped stacks (no project set) run in the one the other tests give them, so they share that run
    # (tests/shared_runs.py) instead of running once more in a project of their own.
    config.setdefault("gcp:project", "my-proj")
    program = harness.run(config, secret_keys=secret_keys, stack=stack.name)
    assert not program.problems, program.problems
    match = match_state(recorded_urns(stack), registered(program))
    assert match.deleted == [], (f"{stack.name}: the engine would delete (replace) these; alias them "
                                 f"(pulumi.Alias) or remove them from {stack.urns_path.name} on purpose")
    assert match.claimed_twice == []
    # The aliases the plan shows are where the matches came from.
    candidates = candidate_aliases(registered(program))
    for new, old in match.updated.items():
        assert old == new or old in candidates[new]


def urn(type_chain: str, name: str) -> str:
    return f"urn:pulumi:dev::tpu-vllm::{type_chain}::{name}"


WING = Registered(urn=urn("tpu-vllm:vm:Deployment", "vm-wing"), type="tpu-vllm:vm:Deployment", name="vm-wing",
                  parent_urn="")
OLD_CACHE = [urn("tpu-vllm:storage:CacheDisk", "cache"), urn("tpu-vllm:storage:CacheDisk$gcp:compute/disk:Disk",
                                                            "cache-disk")]


def moved_cache(aliases: tuple[AliasSpec, ...]) -> list[Registered]:
    cache_urn = make_urn("dev", "tpu-vllm", WING.urn, "tpu-vllm:storage:CacheDisk", "cache")
    disk_urn = make_urn("dev", "tpu-vllm", cache_urn, "gcp:compute/disk:Disk", "cache-disk")
    return [WING, Registered(cache_urn, "tpu-vllm:storage:CacheDisk", "cache", WING.urn, aliases),
            Registered(disk_urn, "gcp:compute/disk:Disk", "cache-disk", cache_urn)]


def test_a_component_moved_under_a_new_parent_without_an_alias_replaces_what_it_holds():
    match = match_state(OLD_CACHE, moved_cache(()))
    assert match.deleted == sorted(OLD_CACHE)
    assert len(match.created) == 3


def test_an_alias_to_the_root_keeps_the_component_and_its_children_inherit_it():
    match = match_state(OLD_CACHE, moved_cache((AliasSpec(no_parent=True),)))
    assert match.deleted == []
    assert match.created == [WING.urn]
    assert sorted(match.updated.values()) == sorted(OLD_CACHE)


def test_an_alias_naming_another_parent_or_type_does_not_find_the_root_resource():
    for alias in (AliasSpec(parent_urn=WING.urn), AliasSpec(type="tpu-vllm:storage:Disk", no_parent=True),
                  AliasSpec(name="cache-old", no_parent=True)):
        assert match_state(OLD_CACHE, moved_cache((alias,))).deleted == sorted(OLD_CACHE), alias


def test_a_child_named_after_its_parent_inherits_the_parents_old_name():
    """inheritedChildAlias: `<parent>-x` under a renamed parent was `<old parent>-x`."""
    old = [urn("tpu-vllm:identity:VmIdentity", "vm"),
           urn("tpu-vllm:identity:VmIdentity$gcp:serviceaccount/account:Account", "vm-sa")]
    parent = Registered(urn("tpu-vllm:identity:ServiceIdentity", "vm-account"), "tpu-vllm:identity:ServiceIdentity",
                        "vm-account", "", (AliasSpec(name="vm", type="tpu-vllm:identity:VmIdentity"),))
    child = Registered(urn("tpu-vllm:identity:ServiceIdentity$gcp:serviceaccount/account:Account", "vm-account-sa"),
                       "gcp:serviceaccount/account:Account", "vm-account-sa", parent.urn)
    match = match_state(old, [parent, child])
    assert match.deleted == []
    assert match.updated[child.urn] == old[1]


def test_two_resources_claiming_one_old_urn_are_reported():
    first = Registered(urn("tpu-vllm:a:A", "one"), "tpu-vllm:a:A", "one", "", (AliasSpec(name="old"),))
    second = Registered(urn("tpu-vllm:a:A", "two"), "tpu-vllm:a:A", "two", "", (AliasSpec(name="old"),))
    assert match_state([urn("tpu-vllm:a:A", "old")], [first, second]).claimed_twice == [urn("tpu-vllm:a:A", "old")]


def _plan(*resources):
    return {"resources": [{"component": False, "inputs": {}, "parent": None, "retain_on_delete": False, **r}
                          for r in resources]}


def test_the_plan_diff_says_whether_a_changed_urn_is_kept_or_replaced():
    from tools.plan.diff import render_diff

    old_disk = urn("tpu-vllm:storage:CacheDisk$gcp:compute/disk:Disk", "cache-disk")
    new_disk = urn("tpu-vllm:vm:Deployment$tpu-vllm:storage:CacheDisk$gcp:compute/disk:Disk", "cache-disk")
    base = _plan({"type": "gcp:compute/disk:Disk", "name": "cache-disk", "urn": old_disk, "aliases": []})
    kept = render_diff(base, _plan({"type": "gcp:compute/disk:Disk", "name": "cache-disk", "urn": new_disk,
                                    "aliases": [old_disk]}))
    assert "(kept: the old URN is an alias, updated in place)" in kept and "REPLACED" not in kept
    replaced = render_diff(base, _plan({"type": "gcp:compute/disk:Disk", "name": "cache-disk", "urn": new_disk,
                                        "aliases": []}))
    assert "(REPLACED: no alias names the old URN)" in replaced


def test_the_plan_diff_pairs_a_renamed_type_through_its_alias_instead_of_removed_and_added():
    from tools.plan.diff import render_diff

    old = urn("tpu-vllm:identity:VmIdentity", "vm")
    base = _plan({"type": "tpu-vllm:identity:VmIdentity", "name": "vm", "urn": old, "aliases": []})
    head = _plan({"type": "tpu-vllm:identity:ServiceIdentity", "name": "vm",
                  "urn": urn("tpu-vllm:identity:ServiceIdentity", "vm"), "aliases": [old]})
    shown = render_diff(base, head)
    assert "0 added, 0 removed, 1 changed" in shown
    assert ('(type, name): ["tpu-vllm:identity:VmIdentity", "vm"] -> '
            '["tpu-vllm:identity:ServiceIdentity", "vm"]') in shown
