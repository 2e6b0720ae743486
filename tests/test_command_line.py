"""The plan diff's argument changes: every changed option, flag and positional word, as data that can be applied."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tools.plan.command_line import (
    apply_changes,
    argument_changes,
    arguments,
    changes_between,
    describe,
    option_name,
    split,
)

ROOT = Path(__file__).resolve().parent.parent
# The real serve command, as the dev stack renders it (the checked-in golden plan).
SERVE_COMMAND = json.loads((ROOT / "tests/golden/dev.json").read_text())["outputs"]["vllmServeCommand"]
SERVE = arguments(split(SERVE_COMMAND))
HEAD, TAIL = SERVE[:3], SERVE[3:]  # vllm serve MODEL, then its options
MODELS = [SERVE[2], "google/gemma-3-1b-it", "Qwen/Qwen3-0.6B"]
VALUES = ["16384", "0.9", "fp8", "auto", "64", "1,024", "'{\"image\":1}'", "gemma4"]
# Real vLLM options the stack may add (settings it leaves unset by default).
EXTRA = ["--max-num-seqs 64", "--kv-cache-memory 6442450944", "--enforce-eager", "--seed 0",
         "--no-enable-prefix-caching", "--max-model-len 8192"]


# Built once, not per draw: hypothesis looks each strategy up in its cache on every call otherwise.
KEPT = st.lists(st.sampled_from(range(len(TAIL))), unique=True, max_size=len(TAIL))
CHANGED, VALUE = st.booleans(), st.sampled_from(VALUES)
ADDED = st.lists(st.sampled_from(EXTRA), unique=True, max_size=3)
MODEL = st.sampled_from(MODELS)
# An order of n options, as indices: the shuffle draws positions only, so it is the one st.permutations(options)
# draws.
ORDER = [st.permutations(range(n)) for n in range(len(TAIL) + len(EXTRA) + 1)]


@st.composite
def serve_arguments(draw) -> list[str]:
    """The serve command with options changed, added, removed and reordered, and maybe another model."""
    options = []
    for index in draw(KEPT):
        argument = TAIL[index]
        if " " in argument and draw(CHANGED):
            argument = f"{option_name(argument)} {draw(VALUE)}"
        options.append(argument)
    options += draw(ADDED)
    return [*HEAD[:2], draw(MODEL), *(options[index] for index in draw(ORDER[len(options)]))]


@settings(max_examples=300, deadline=None)
@given(serve_arguments(), serve_arguments())
def test_applying_the_reported_changes_to_the_old_command_gives_the_new_one(old, new):
    old_command, new_command = " ".join(old), " ".join(new)
    changes = argument_changes(old_command, new_command)
    assert apply_changes(arguments(split(old_command)), changes) == arguments(split(new_command))


@settings(max_examples=300, deadline=None)
@given(serve_arguments(), serve_arguments())
def test_every_changed_option_and_the_model_are_named(old, new):
    shown = [describe(change) for change in changes_between(old, new)]
    differs = Counter(old) - Counter(new) + (Counter(new) - Counter(old))
    for argument in differs:
        name = option_name(argument)
        if name is not None:
            assert any(name in line for line in shown), (argument, shown)
    if old[2] != new[2]:
        assert f"~ argument 3: {old[2]} -> {new[2]}" in shown
    assert (shown == []) == (old == new)


def test_two_changed_options_with_an_unchanged_one_between_are_both_reported():
    changes = argument_changes("vllm serve m --a 1 --b 2 --c 3", "vllm serve m --a 9 --b 2 --c 7")
    assert [describe(change) for change in changes] == ["~ --a: 1 -> 9", "~ --c: 3 -> 7"]


def test_a_model_change_and_three_changed_flags_are_all_reported():
    old, new = "vllm serve m --a 1 --b 2 --c 3 --d", "vllm serve x --a 9 --b 3 --c 7 --d=no"
    shown = [describe(change) for change in argument_changes(old, new)]
    assert shown == ["~ argument 3: m -> x", "~ --a: 1 -> 9", "~ --b: 2 -> 3", "~ --c: 3 -> 7",
                     "~ --d: (flag) -> no"]


def test_a_moved_argument_added_and_removed_ones_are_reported_and_apply():
    old, new = ["vllm", "serve", "m", "--a 1", "--b 2", "--c"], ["vllm", "serve", "m", "--c", "--a 1", "--e 5"]
    changes = changes_between(old, new)
    assert sorted(describe(change) for change in changes) == sorted(
        ["moved: --c (argument 6 -> 4)", "- --b 2", "+ --e 5"])
    assert apply_changes(old, changes) == new


def test_text_that_is_not_one_command_line_has_no_argument_changes():
    assert argument_changes("a\nb", "a b") is None and argument_changes("a 'b", "a b") is None
