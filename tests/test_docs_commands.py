"""The commands README.md and docs/ tell a user to run hold on a fresh clone.

Each `VENV/bin/python -m tools.X` runs in a venv the docs (or the test command) make; every file a
command writes with `>` or an output flag lands where git ignores it; the quick start shows the
offline plan before `pulumi up`.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# scripts/test.sh's own venv (VENV="${TPU_VLLM_TEST_VENV:-.venv-test}").
TEST_COMMAND_VENV = ".venv-test"


def shell_lines(page: Path) -> list[str]:
    """The lines of a page's ```bash blocks, comments dropped."""
    lines, inside = [], False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            inside = line.strip() in ("```bash", "```sh") if not inside else False
            continue
        if inside and line.strip() and not line.lstrip().startswith("#"):
            lines.append(line.split(" #", 1)[0].strip())
    return lines


ALL_LINES = [(page.relative_to(ROOT).as_posix(), line) for page in PAGES for line in shell_lines(page)]
TOOL_RUNS = [(page, line) for page, line in ALL_LINES if re.search(r"-m tools\.", line)]


def made_venvs() -> set[str]:
    made = {TEST_COMMAND_VENV}
    for _, line in ALL_LINES:
        made |= set(re.findall(r"-m venv (\S+)", line))
    return made


def test_the_docs_have_tool_commands_to_check():
    assert len(TOOL_RUNS) >= 5, TOOL_RUNS


@pytest.mark.parametrize(("page", "line"), TOOL_RUNS)
def test_each_tool_runs_in_a_venv_the_docs_make(page, line):
    interpreter = line.split(" -m tools.", 1)[0].split()[-1]
    venv = interpreter.removesuffix("/bin/python")
    assert interpreter.endswith("/bin/python") and venv in made_venvs(), (
        f"{page}: `{line}` runs {interpreter!r}, which neither ./scripts/test.sh nor a command in the docs "
        f"makes (made: {sorted(made_venvs())})")


# What writes the next word: a redirection, or a tool's output option (tools.bench --json/--plot, tools.plan
# --json-out/--diff-out).
OUTPUT_FLAGS = (">", ">>", "--json", "--plot", "--json-out", "--diff-out")


def written_paths(line: str) -> list[str]:
    try:
        words = shlex.split(line)
    except ValueError:
        return []
    paths = [words[i + 1] for i, word in enumerate(words[:-1]) if word in OUTPUT_FLAGS]
    paths += [word[1:] for word in words if word.startswith(">") and len(word) > 1 and word[1] not in ">&"]
    return [path for path in paths if not path.startswith(("/", "~", "$", "-", ">", "&"))]


WRITES = [(page, line, path) for page, line in ALL_LINES for path in written_paths(line)]


def test_the_docs_write_files_to_check():
    assert any(path.endswith(".json") for _, _, path in WRITES), WRITES


@pytest.mark.parametrize(("page", "line", "path"), WRITES)
def test_files_the_docs_write_are_git_ignored(page, line, path):
    ignored = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT)
    assert ignored.returncode == 0, f"{page}: `{line}` writes {path}, which git would offer to commit"


def test_the_quick_start_reads_the_plan_before_pulumi_up():
    quick_start = (ROOT / "README.md").read_text(encoding="utf-8").split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert "-m tools.plan --stack dev" in quick_start and "pulumi up" in quick_start
    assert quick_start.index("-m tools.plan --stack dev") < quick_start.index("\npulumi up"), quick_start
    for words in ("pulumi login --local", "PULUMI_CONFIG_PASSPHRASE", "Commit your `Pulumi.dev.yaml`"):
        assert words in quick_start


@pytest.mark.parametrize("tool", sorted({re.search(r"-m (tools\.[a-z_.]+)", line).group(1) for _, line in TOOL_RUNS}))
def test_each_documented_tool_starts_in_the_test_venv(tool):
    """This interpreter is the test command's venv: the tool's imports are all installed there."""
    completed = subprocess.run([sys.executable, "-m", tool, "--help"], capture_output=True, text=True, cwd=ROOT,
                               timeout=120)
    assert completed.returncode == 0, completed.stderr
    assert "usage:" in completed.stdout


def test_the_readme_names_the_build_log_by_its_title_and_where_its_facts_live():
    """ "a measured build log" was all the README said (issue 29): the title, and the modules that keep its facts."""
    from components.settings.facts import BUILD_LOG_TITLE

    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert f"*{BUILD_LOG_TITLE}*" in readme
    for module in ("components/basis/", "components/settings/facts.py"):
        assert f"`{module}`" in readme and (ROOT / module).exists()


def test_the_readme_shows_the_agent_after_the_tunnel():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    tunnel, agent = readme.index("sshTunnelCommand"), readme.index("python examples/agent.py")
    assert tunnel < agent and (ROOT / "examples/agent.py").is_file()


def test_the_light_path_to_the_plan_installs_only_the_programs_requirements_into_pulumis_venv():
    """The plan without the ~18-minute test install (issue 29): the program's requirements.txt into the virtualenv
    Pulumi.yaml names. That this venv runs the plan is held by tests/test_preview_job.py
    (test_the_preview_job_builds_every_venv_the_language_host_runs runs tools.plan in exactly such a venv)."""
    import yaml

    runtime = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["runtime"]
    venv = runtime["options"]["virtualenv"]
    readme = shell_lines(ROOT / "README.md")
    assert f"python3.11 -m venv {venv} && {venv}/bin/pip install -r requirements.txt" in readme
    plan = readme.index(f"{venv}/bin/python -m tools.plan --stack dev")
    assert plan < readme.index("./scripts/test.sh")  # the light path comes first


def test_the_policy_table_in_review_md_is_one_table_naming_every_policy_once():
    """docs/review.md had the table's last rows headerless after a paragraph, two rows twice, the "Policy config"
    paragraph twice and servingPort's default as both "unset" and 8000 (issue 29)."""
    from policy import gke_rules, resource_view, rules

    page = (ROOT / "docs" / "review.md").read_text(encoding="utf-8")
    lines = page.splitlines()
    header = lines.index("| policy | blocks |")
    rows = []
    for line in lines[header + 2:]:
        if not line.startswith("| `"):
            break
        rows.append(re.match(r"\| `([\w-]+)`", line).group(1))
    every = {*rules.RESOURCE_RULES, *rules.STACK_RULES, *gke_rules.RESOURCE_RULES, *gke_rules.STACK_RULES}
    assert sorted(rows) == sorted(every)  # each once, all under the header
    assert not [line for line in lines[header + 2 + len(rows):] if line.startswith("| `")]
    assert page.count("Policy config (`--policy-pack-config`)") == 1
    assert resource_view.DEFAULT_CONFIG["servingPort"] is None and "`servingPort` (unset" in page
    assert "`servingPort` (`8000`)" not in page


def test_one_policy_venv_path_for_the_test_command_the_packs_readme_the_preview_job_and_pulumi():
    """scripts/test.sh built .venv-policy while everything else used policy/venv: the pack's README example
    exited 127 after the test command (issue 29)."""
    virtualenv = yaml.safe_load((ROOT / "policy" / "PulumiPolicy.yaml").read_text())["runtime"]["options"]["virtualenv"]
    where = f"policy/{virtualenv}"
    test_command = (ROOT / "scripts" / "test.sh").read_text()
    assert re.search(r'^POLICY_VENV="\$\{TPU_VLLM_POLICY_VENV:-' + re.escape(where) + r'\}"$', test_command, re.M)
    assert f"build_venv {where} policy/requirements.txt" in (ROOT / "scripts" / "preview-prepare.sh").read_text()
    assert f"-m venv {where}" in (ROOT / "policy" / "README.md").read_text()
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "policy" / "README.md"]:
        assert ".venv-policy" not in page.read_text(encoding="utf-8"), page.name
