"""What both platforms' status readings share: the report, its exit codes, and time as the APIs write it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

EXIT_READY, EXIT_NOT_READY, EXIT_ERROR = 0, 1, 2


class StatusError(Exception):
    """Could not find out; the message says why and what to do."""


@dataclass
class Report:
    state: str
    headline: str
    next_step: str
    exit_code: int = EXIT_NOT_READY
    facts: list[tuple[str, str]] = field(default_factory=list)


def parse_time(text: str) -> datetime | None:
    """RFC 3339 as the TPU API and docker write it (nanoseconds allowed); None if absent or zero."""
    match = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:\d\d)$", (text or "").strip())
    if not match or match.group(1).startswith("0001-"):
        return None
    zone = "+00:00" if match.group(2) == "Z" else match.group(2)
    return datetime.fromisoformat(match.group(1) + zone)


def span(seconds: float) -> str:
    seconds = int(abs(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"
