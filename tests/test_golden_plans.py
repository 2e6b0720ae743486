"""The checked-in plans of the example stacks are exactly what the code renders now.

A difference fails with the plan diff a reviewer would read. Meant changes rewrite them with
`python -m tests.golden --update`, so every infrastructure change shows in the pull request.
"""

from __future__ import annotations

import json

import pytest

from tests.golden import STACKS, render


@pytest.mark.parametrize("stack", STACKS, ids=[stack.name for stack in STACKS])
def test_the_plan_is_the_golden_one(stack):
    completed = render(stack)
    assert completed.returncode == 0, completed.stderr
    golden = stack.plan_path.read_text(encoding="utf-8")
    if completed.stdout != golden:
        from tools.plan import diff as plan_diff

        try:
            shown = plan_diff.render_diff(json.loads(golden), json.loads(completed.stdout),
                                          base_label=f"golden {stack.name}.json")
        except Exception as error:  # noqa: BLE001 - the byte difference still fails the test below
            shown = f"(the plan diff itself failed: {error!r})"
        pytest.fail(f"the {stack.name} plan differs from {stack.plan_path.name} ({stack.covers}).\n{shown}\n"
                    "If the change is meant, rewrite it: python -m tests.golden --update", pytrace=False)


def test_every_variant_stack_file_has_a_golden_plan_and_back():
    from tests.golden import GOLDEN_DIR, VARIANT_STACKS_DIR

    names = {stack.name for stack in STACKS}
    variants = {path.name[len("Pulumi."):-len(".yaml")] for path in VARIANT_STACKS_DIR.glob("Pulumi.*.yaml")}
    assert variants <= names, f"variant stack files without a golden plan: {sorted(variants - names)}"
    plans = {path.stem for path in GOLDEN_DIR.glob("*.json")}
    assert plans == names, f"golden plans and stacks differ: {sorted(plans ^ names)}"
