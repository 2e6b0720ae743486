"""docs/development.md's outside-contracts table holds: every test it names exists, every row names the version
it read, and every fake the tests use is covered by a row."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "development.md"
TEST_REFERENCE = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")
# A version read: a release (v7.45.0, 0.33.0, 3.272.0), a commit (`001a80e`), a discovery revision, an RFC or AIP.
VERSION = re.compile(r"\d+\.\d+(\.\d+)?|`[0-9a-f]{7,40}`|rev \d{8}|RFC \d+|AIP-\d+|`components/serving/front\.py`")
# http.py is only the loopback server the fakes are built on; it answers nothing of its own.
FAKES = sorted(
    [f"tests/fakes/{path.name}" for path in (ROOT / "tests" / "fakes").glob("*.py")
     if path.name not in ("__init__.py", "http.py")]
    + ["tools/plan/provider_answers.py", "tools/plan/engine.py"])


def rows() -> list[list[str]]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("\n## Outside contracts\n", 1)[1].split("\n## ", 1)[0]
    found = []
    for line in section.splitlines():
        if not line.startswith("| ") or line.startswith(("| behaviour", "|---")):
            continue
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        found.append(cells)
    return found


# The second reader's verdict: holds, wrong (and what was fixed), or unknown (where it looked).
VERDICT = re.compile(r"(holds|wrong, fixed|unknown)\b")


def test_the_table_has_rows_of_five_cells():
    table = rows()
    assert len(table) >= 25
    assert all(len(cells) == 5 for cells in table), [cells[0][:60] for cells in table if len(cells) != 5]


def test_every_row_carries_its_second_readers_verdict():
    """A fresh reader, given the code and not the citations, tried to refute each row (docs/development.md, "The
    second reader"); a row it found wrong stays only once fixed."""
    unread = [cells[0][:80] for cells in rows() if not VERDICT.match(cells[4]) or len(cells[4]) < 20]
    assert unread == []


def test_a_row_without_a_verdict_is_caught():
    assert not VERDICT.match("wrong") and not VERDICT.match("MISSING") and VERDICT.match("wrong, fixed: x")


def test_every_row_names_the_version_of_the_source_it_read():
    unversioned = [cells[0][:80] for cells in rows() if not VERSION.search(cells[1])]
    assert unversioned == []


def functions_defined_in(path: str) -> set[str]:
    file = ROOT / path
    return {node.name for node in ast.walk(ast.parse(file.read_text(encoding="utf-8")))
            if isinstance(node, ast.FunctionDef)} if file.exists() else set()


def test_every_test_a_row_names_exists():
    missing = []
    defined: dict[str, set[str]] = {}  # each file parsed once, however many rows name it
    for cells in rows():
        references = TEST_REFERENCE.findall(cells[3])
        assert references, f"no test named for: {cells[0][:80]}"
        for path, name in references:
            if path not in defined:
                defined[path] = functions_defined_in(path)
            if name not in defined[path]:
                missing.append(f"{path}::{name}")
    assert missing == []


def test_every_fake_is_covered_by_a_row():
    where = " ".join(cells[2] for cells in rows())
    assert [fake for fake in FAKES if f"`{fake}`" not in where] == []


def test_a_row_without_a_real_test_is_caught():
    # The check itself: a made-up reference is reported, not passed over.
    fake_row = "`tests/test_provider_answers.py::no_such_test`"
    path, name = TEST_REFERENCE.findall(fake_row)[0]
    assert (ROOT / path).exists() and name not in functions_defined_in(path)
