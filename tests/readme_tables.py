"""The docs' tables (docs/settings.md), read back so tests can hold them to what the code does."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "docs" / "settings.md"


def documented_outputs(platform: str) -> set[str]:
    """Output names in the *Stack outputs* table whose platform column is `platform` or `both`."""
    section = README.read_text().split("## Stack outputs", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for row in section.splitlines():
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        if len(cells) == 3 and cells[1] in (platform, "both"):
            names |= set(re.findall(r"`([A-Za-z]+)`", cells[0]))
    return names
