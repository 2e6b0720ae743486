"""What a sweep has done, written after every step, so --resume goes on after the last finished arm and a second
Ctrl-C can say what is left. Read back as data, never trusted whole: a journal is a file anyone can edit, and its
figures switch the spend limit, so each is checked (schema, finite non-negative spend, arms by name, results
inside --out) before the sweep reads one; `mark` binds it to the stack it made (tools/sweep/ownership.py)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from components.reading import bounded
from components.settings.text import escaped

MAX_JOURNAL_BYTES = bounded.MIB


class JournalError(Exception):
    """A journal the sweep will not read: one line naming it, what is wrong and the fix."""


class _Schema(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    sweep_file: str
    stack: str = Field(min_length=1, max_length=300)
    arms: list[str] = Field(min_length=1, max_length=64)
    finished: dict[str, str] = Field(default_factory=dict)
    applied: dict[str, Any] | None = None
    deployed: bool = False
    spent_usd: float = Field(0.0, ge=0, allow_inf_nan=False)
    mark: str | None = Field(None, pattern=r"^[0-9a-f]{32}$")


@dataclass
class Journal:
    path: Path
    sweep_file: str
    stack: str
    arms: list[str]
    finished: dict[str, str] = field(default_factory=dict)
    """arm -> its bench JSON."""
    applied: dict[str, Any] | None = None
    """The whole `tpu-vllm:` config last set on the stack (None: the base's, as copied)."""
    deployed: bool = False
    """The stack may hold resources (an `up` started and no destroy finished since)."""
    spent_usd: float = 0.0
    """Computed spend of the finished arms (their node time x the hourly price)."""
    mark: str | None = None
    """The random id the sweep tagged its stack with at `stack init` (ownership.MARK_TAG)."""

    @classmethod
    def load(cls, path: Path) -> Journal | None:
        """The journal, checked; None when there is none; JournalError for one the sweep will not trust."""
        if not path.exists() and not path.is_symlink():
            return None
        fix = "it is not a journal this sweep wrote: move it away, or give another --out"
        try:
            data = bounded.read_json(path, MAX_JOURNAL_BYTES, "sweep journal")
        except bounded.ReadError as error:
            raise JournalError(f"{error}; {fix}") from None
        try:
            checked = _Schema.model_validate(data)
        except ValidationError as error:
            item = error.errors()[0]
            key = ".".join(escaped(str(part)) for part in item["loc"]) or "(the file)"
            shown = escaped(json.dumps(item.get("input"), default=str))[:120]
            raise JournalError(f"{escaped(str(path))}: {key} = {shown}: {item['msg']}; {fix}") from None
        unknown = sorted(set(checked.finished) - set(checked.arms))
        if unknown:
            raise JournalError(f"{escaped(str(path))}: finished names arm {escaped(unknown[0])!r}, which its arms do "
                               f"not list; {fix}")
        folder = path.parent.resolve()
        for arm, result in checked.finished.items():
            resolved = (path.parent / result).resolve() if not os.path.isabs(result) else Path(result).resolve()
            if folder not in resolved.parents:
                raise JournalError(f"{escaped(str(path))}: finished.{escaped(arm)} = {escaped(result)!r} is outside "
                                   f"{escaped(str(path.parent))}, where the sweep writes its results; {fix}")
        return cls(path=path, **checked.model_dump())

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = asdict(self)
        data.pop("path")
        # Written whole, then renamed over: a sweep stopped mid-write leaves the last journal, not half of one.
        partial = self.path.with_name(self.path.name + ".partial")
        partial.write_text(json.dumps(data, indent=2))
        os.replace(partial, self.path)
