"""tools.sweep under attack (issue 48): the sweep touches only a stack it made, every way it can end leaves nothing
billing, its journal and its sweep file are read as data, and arm names are inert. Each attack runs against the
project's own fakes (tests/fakes/pulumi_cli.py behind the Automation API's seam, the vLLM-like server)."""
# test_sweep's fixtures, imported by name, are each test's arguments:
# ruff: noqa: F811

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fakes.pulumi_cli import FakePulumiCli, adjusted
from tests.test_sweep import (  # noqa: F401 (fixtures)
    ROOT,
    TINY_CELLS,
    base_stack,
    ctrl_c_at_second_cells,
    no_plots,
    project,
    run_sweep,
    server,
    short_graces,
)
from tools.sweep import config_paths, ownership, runner

MARK = "ab" * 16


def write(project: Path, **document) -> Path:
    body = {"base": "dev", "arms": {"base": {}}, "cells": TINY_CELLS,
            "limits": {"maxSpendUsd": 20, "maxDuration": "8h", "atEnd": "destroy"}, **document}
    path = project / "sweep.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False, allow_unicode=True))
    return path


def dry_run(project: Path, sweep: Path, capsys, *extra: str) -> tuple[int, str]:
    fake = FakePulumiCli({})
    code = run_sweep(project, sweep, fake, None, "--dry-run", *extra)
    captured = capsys.readouterr()
    assert fake.calls == []
    return code, captured.out + captured.err


def one_line_refusal(text: str) -> str:
    assert "Traceback" not in text
    lines = [line for line in text.splitlines() if line.strip().startswith(("- ", "error:"))]
    assert lines, text
    return "\n".join(lines)


# ---- the sweep's stack: only one it made ----

@pytest.mark.parametrize("spelling", ["dev", "Dev", "organization/dev", "organization/tpu-vllm/dev", "my-org/dev",
                                      "my-org/tpu-vllm/dev"])
def test_the_base_stack_in_any_spelling_pulumi_resolves_is_refused_in_the_dry_run(project, capsys, spelling):
    code, text = dry_run(project, write(project, stack=spelling), capsys)
    assert code == 2
    assert "resolves it to the base stack dev itself" in one_line_refusal(text)


@pytest.mark.parametrize(("spelling", "words"), [
    ("--force", "a leading '-' is read as a flag"),
    ("../../x", "is no organization Pulumi accepts"),
    ("a/b/c/d", "has 4 parts"),
    ("x y", "a stack name is 1 to 100 letters"),
    ("x" * 101, "a stack name is 1 to 100 letters"),
    ("organization/other-project/x", "a stack of project 'other-project'"),
    ("evil\x1b]0;owned\x07", "a stack name is 1 to 100 letters"),
])
def test_a_stack_name_pulumi_or_the_sweep_refuses_is_refused_in_the_dry_run(project, capsys, spelling, words):
    code, text = dry_run(project, write(project, stack=spelling), capsys)
    assert code == 2 and words in one_line_refusal(text)
    assert "\x1b" not in text and "\x07" not in text


def test_another_stack_of_the_project_is_refused_in_the_dry_run(project, capsys):
    (project / "Pulumi.gke.yaml").write_text("config: {}\n")
    code, text = dry_run(project, write(project, stack="gke"), capsys)
    assert code == 2 and "Pulumi.gke.yaml is a stack of this project that no journal of this sweep names" in text


@pytest.mark.parametrize("spelling", ["dev-sweep", "organization/tpu-vllm/dev-sweep", "sweep.2026_12"])
def test_a_new_stack_of_its_own_passes_the_dry_run(project, capsys, spelling):
    code, text = dry_run(project, write(project, stack=spelling), capsys)
    assert code == 0, text


def test_a_stack_the_sweep_did_not_make_is_never_touched(project, server, capsys):
    """The user's own stack, named as the sweep's, with a journal that says the sweep made it: refused before any
    `up`, and the fake's ledger shows nothing of the user's touched."""
    fake = FakePulumiCli({"dev": base_stack(project), "mine": {"tpu-vllm:vllm": {"maxModelLen": 8192}}})
    out = project / "out"
    out.mkdir()
    (out / "journal.json").write_text(json.dumps({
        "sweep_file": "sweep.yaml", "stack": "mine", "arms": ["base"], "finished": {}, "applied": None,
        "deployed": True, "spent_usd": 0.0, "mark": MARK}))
    assert run_sweep(project, write(project, stack="mine"), fake, server, "--resume") == 2
    err = capsys.readouterr().err
    assert "stack mine exists and carries no tpu-vllm:sweep tag: the sweep did not make it" in err
    words = {word for call in fake.calls for word in call}
    assert not words & {"up", "destroy", "rm", "refresh", "set-all", "rm-all", "cancel"}
    assert "mine" in fake.stacks and not fake.ledger


def test_a_stack_another_sweep_made_is_not_resumed_by_this_one(project, server, capsys):
    fake = FakePulumiCli({"dev": base_stack(project), "dev-sweep": {}},
                         tags={"dev-sweep": {ownership.MARK_TAG: "cd" * 16}})
    out = project / "out"
    out.mkdir()
    (out / "journal.json").write_text(json.dumps({
        "sweep_file": "sweep.yaml", "stack": "dev-sweep", "arms": ["base"], "mark": MARK}))
    assert run_sweep(project, write(project), fake, server, "--resume") == 2
    assert "was made by another sweep" in capsys.readouterr().err
    assert not any("up" in call or "destroy" in call for call in fake.calls)


def test_the_sweep_marks_the_stack_it_makes_and_resumes_only_with_that_mark(no_plots, project, server, capsys):
    fake = FakePulumiCli({"dev": base_stack(project)})
    sweep = write(project, arms={"base": {}, "ngram": {"vllm": {"speculativeConfig": {"method": "ngram"}}}})
    assert run_sweep(project, sweep, fake, server, ticker=ctrl_c_at_second_cells()) == 130
    journal = json.loads((project / "out" / "journal.json").read_text())
    assert ownership.MARK.fullmatch(journal["mark"])
    tag_sets = [call for call in fake.calls if call[1:4] == ["stack", "tag", "set"]]
    assert tag_sets == [["--non-interactive", "stack", "tag", "set", ownership.MARK_TAG, journal["mark"],
                         "--stack", "dev-sweep"]]
    init = next(index for index, call in enumerate(fake.calls) if call[1:3] == ["stack", "init"])
    assert fake.calls.index(tag_sets[0]) == init + 1  # marked before its config is copied or anything is set
    assert run_sweep(project, sweep, fake, server, "--resume") == 0
    assert fake.billing() == []


# ---- the journal is data ----

def journal_text(extra: str) -> str:
    return f'{{"sweep_file": "s", "stack": "dev-sweep", "arms": ["base"], "mark": "{MARK}", {extra}}}'


@pytest.mark.parametrize(("body", "words"), [
    (journal_text('"spent_usd": NaN'), "NaN is no JSON number"),
    (journal_text('"spent_usd": -5'), "spent_usd = -5: Input should be greater than or equal to 0"),
    (journal_text('"spent_usd": 1e999'), "too large for a float"),
    (journal_text('"spent_usd": "0"'), "spent_usd"),
    ('{"sweep_file": "s", "stack": "dev-sweep", "arms": ["base"', "is not JSON"),
    ('[1, 2]', "Input should be"),
    (journal_text('"finished": {"base": "/etc/passwd"}'), "is outside"),
    (journal_text('"surprise": 1'), "Extra inputs are not permitted"),
])
def test_a_malformed_journal_is_one_line_and_nothing_starts(project, server, capsys, body, words):
    fake = FakePulumiCli({"dev": base_stack(project)})
    (project / "out").mkdir()
    (project / "out" / "journal.json").write_text(body)
    assert run_sweep(project, write(project), fake, server, "--resume") == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err and fake.calls == []
    assert len([line for line in err.splitlines() if line.startswith("error:")]) == 1


# ---- arm names are inert ----

@pytest.mark.parametrize("name", ["../../../../tmp/x", "row\n| forged | 1 |", "\x1b]0;owned\x07\x1b[2J", "nul\x00",
                                  "x" * 300, "-flag", ""])
def test_an_arm_name_that_is_a_path_a_row_or_an_escape_is_refused_before_anything(project, capsys, name):
    code, text = dry_run(project, write(project, arms={name: {}}), capsys)
    assert code == 2 and "an arm's name is 1 to 40 ASCII letters" in text
    assert "\x1b" not in text and "\x07" not in text and "\x00" not in text
    assert not (project / "out").exists()


def test_two_arm_names_that_read_the_same_are_refused(project, capsys):
    code, text = dry_run(project, write(project, arms={"base": {}, "b\u0430se": {}}), capsys)  # Cyrillic а
    assert code == 2 and "an arm's name is 1 to 40 ASCII letters" in text and "\\u0430" in text
    code, text = dry_run(project, write(project, arms={"base": {}, "BASE": {}}), capsys)
    assert code == 2 and "differ only in case" in text


def test_ordinary_arm_names_pass(project, capsys):
    code, text = dry_run(project, write(project, arms={"base": {}, "ngram-4": {}, "pad_128.v2": {}}), capsys)
    assert code == 0, text


# ---- the sweep file is read with bounds ----

ALIAS_BOMB = "".join(f"{chr(98 + level)}: &{chr(98 + level)} [" + ", ".join([f"*{chr(97 + level)}"] * 9) + "]\n"
                     for level in range(9))


@pytest.mark.parametrize(("kind", "words"), [
    ("alias-bomb", "more than 64 aliases"),
    ("duplicate-limits", "key 'limits' appears twice"),
    ("not-utf8", "is not UTF-8 text"),
    ("fifo", "is a FIFO, not a file"),
    ("dev-zero", "is a device, not a file"),
    ("directory", "is a directory, not a file"),
    ("self-alias", "contains itself"),
    ("infinite-spend", "maxSpendUsd"),
])
def test_a_hostile_sweep_file_is_exit_2_with_one_line(project, tmp_path, kind, words):
    path = project / "sweep.yaml"
    limits = "limits: {maxSpendUsd: 3, maxDuration: 4h}\n"
    if kind == "alias-bomb":
        path.write_text("a: &a [x]\n" + ALIAS_BOMB + "base: dev\narms: {base: {}}\n" + limits)
    elif kind == "duplicate-limits":
        path.write_text("base: dev\narms: {base: {}}\n" + limits + "limits: {maxSpendUsd: 3000, maxDuration: 400h}\n")
    elif kind == "not-utf8":
        path.write_bytes(b"base: dev\narms: {base: {}}\n# \xff\xfe\n" + limits.encode())
    elif kind == "fifo":
        path = tmp_path / "fifo.yaml"
        os.mkfifo(path)
    elif kind == "dev-zero":
        path = Path("/dev/zero")
    elif kind == "directory":
        path = tmp_path
    elif kind == "self-alias":
        path.write_text("base: dev\narms: &x {base: {more: *x}}\n" + limits)
    elif kind == "infinite-spend":
        path.write_text("base: dev\narms: {base: {}}\nlimits: {maxSpendUsd: .inf, maxDuration: 4h}\n")
    # A child with a timeout: a reader that hangs (a FIFO, an alias bomb) fails the test instead of the session.
    done = subprocess.run([sys.executable, "-m", "tools.sweep", str(path), "--project-dir", str(project), "--dry-run"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stderr[-2000:]
    assert words in done.stderr and "Traceback" not in done.stderr
    problems = [line for line in done.stderr.splitlines() if line.startswith("  - ")]
    assert len(problems) == 1


def test_a_few_aliases_and_merge_keys_still_read(project, capsys):
    path = project / "sweep.yaml"
    path.write_text("base: dev\ncells: {contexts: [128], clients: &c [1, 2], reps: 1, requestsPerClient: 1, "
                    "outputTokens: 4}\narms:\n  base: {}\n  ngram: &arm {vllm: {speculativeConfig: {method: ngram}}}"
                    "\n  ngram-again: {<<: *arm}\nlimits: {maxSpendUsd: 20, maxDuration: 8h}\n")
    code, text = dry_run(project, path, capsys)
    assert code == 0, text


# ---- every way a sweep can end leaves nothing billing ----

def _signal_in(phase: str, number: int, fake: FakePulumiCli):
    def ticker(now):
        if now == phase and (phase != "up" or fake.up_in_flight.is_set()):
            if number == signal.SIGHUP and phase == "up":
                fake.hangup()  # the closed terminal hangs up the CLI's process group too
            os.kill(os.getpid(), number)
    return ticker


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
@pytest.mark.parametrize("phase", ["config", "up", "tunnel", "health", "cells"])
def test_a_signal_in_each_phase_leaves_nothing_billing(project, server, capsys, short_graces, phase, number):
    fake = FakePulumiCli({"dev": base_stack(project)}, hold_up=(phase == "up"))
    code = run_sweep(project, write(project), fake, server, ticker=_signal_in(phase, number, fake))
    assert code == 128 + number
    err = capsys.readouterr().err
    assert f"sweep stopped in phase {phase}: stopped by {signal.Signals(number).name}" in err
    assert fake.billing() == [] and "dev-sweep" not in fake.stacks
    assert fake.up_process is None  # no `pulumi up` runs on
    if phase == "up":
        assert [item["kind"] for item in fake.cleared_pending_creates] == ["node"]
        if number == signal.SIGHUP:  # the CLI died by it: its lock cleared only once it was gone
            assert ["--non-interactive", "cancel", "--yes", "--stack", "dev-sweep"] in fake.calls
            assert not fake.cancelled_while_up_ran
    log = (project / "out" / "sweep.log").read_text()
    assert f"stopped by {signal.Signals(number).name}" in log


def test_a_sigterm_during_ctrl_cs_clean_up_says_what_is_left(project, server, capsys):
    fake = FakePulumiCli({"dev": base_stack(project)})

    def ticker(now):
        if now == "cells":
            raise KeyboardInterrupt
        if now == "destroy":
            os.kill(os.getpid(), signal.SIGTERM)

    assert run_sweep(project, write(project), fake, server, ticker=ticker) == 130
    err = capsys.readouterr().err
    assert "the clean-up was stopped too (stopped by SIGTERM)" in err
    assert "LEFT BEHIND: stack dev-sweep" in err
    assert f"pulumi destroy --yes --stack dev-sweep --cwd {project}" in err
    assert "LEFT BEHIND" in (project / "out" / "sweep.log").read_text()


def test_the_signal_handlers_are_the_callers_again_after_the_sweep(project, server):
    before = {number: signal.getsignal(number) for number in runner.HANDLED_SIGNALS}
    fake = FakePulumiCli({"dev": base_stack(project)})
    run_sweep(project, write(project), fake, server)
    assert {number: signal.getsignal(number) for number in runner.HANDLED_SIGNALS} == before


# ---- `pulumi config set --path` as object.go coerce stores a value ----

@pytest.mark.parametrize(("text", "stored"), [
    ("8192", 8192), ("+5", 5), ("-0", 0), ("9223372036854775807", 9223372036854775807),
    ("9223372036854775808", 9223372036854775808),  # past int64: ParseUint takes it
    ("18446744073709551615", 18446744073709551615), ("18446744073709551616", "18446744073709551616"),
    ("-9223372036854775809", "-9223372036854775809"), ("+18446744073709551615", "+18446744073709551615"),
    ("\u0661\u0662\u0663", "\u0661\u0662\u0663"), ("\uff11\uff12", "\uff11\uff12"),  # Arabic-Indic, full-width
    ("0.9", "0.9"), ("012", "012"), ("1_000", "1_000"), ("true", True), ("True", "True"), ("9" * 5000, "9" * 5000),
])
def test_the_model_of_config_set_by_path_is_object_gos_coerce(text, stored):
    assert config_paths.stored_as(text) == stored
    assert adjusted(text) == stored


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=24), st.from_regex(r"[+-]?[0-9]{1,22}", fullmatch=True)))
def test_the_sweeps_model_and_the_fake_agree_on_every_text(text):
    assert config_paths.stored_as(text) == adjusted(text)
    assert type(config_paths.stored_as(text)) is type(adjusted(text))


def test_text_pulumi_keeps_as_text_is_an_arm_value_the_sweep_takes():
    """Digits of other scripts and numbers past 64 bits stay text, so the sweep no longer refuses them as numbers."""
    for text in ("\u0661\u0662", "18446744073709551616"):
        assert config_paths.misread(text) is None
    assert config_paths.misread("8192") == "text that `pulumi config set --path` stores as int"
