"""Tables in the docs that are written from their single source (the settings' descriptions, the stack's outputs,
the catalog): the markers they live between, and the rewrite-or-check every generator's command runs.
Nothing of the project: tools.fit uses it with the light install."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path


def replaced_between(document: str, start: str, end: str, lines: list[str], where: Path | str = "the page") -> str:
    """The document with `lines` written again between the two marker lines."""
    head, found_start, rest = document.partition(start)
    _, found_end, tail = rest.partition(end)
    if not found_start or not found_end:
        raise ValueError(f"{where} lacks the markers {start!r} and {end!r} around a generated table")
    return head + start + "\n" + "\n".join(lines) + "\n" + end + tail


def rewrite_or_check(doc: Path, render: Callable[[str], str], argv: list[str], source: str, command: str) -> int:
    """Rewrite `doc` from its source; with --check in argv, exit status 1 when the page differs instead."""
    current = doc.read_text()
    wanted = render(current)
    if "--check" in argv:
        if current != wanted:
            print(f"{doc} differs from {source}; run {command}", file=sys.stderr)
            return 1
        return 0
    doc.write_text(wanted)
    return 0
