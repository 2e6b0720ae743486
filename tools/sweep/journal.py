"""What a sweep has done, written after every step, so --resume goes on after the last finished arm and a second
Ctrl-C can say what is left."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


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

    @classmethod
    def load(cls, path: Path) -> Journal | None:
        if not path.is_file():
            return None
        data = json.loads(path.read_text())
        data["path"] = path
        return cls(**data)

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = asdict(self)
        data.pop("path")
        self.path.write_text(json.dumps(data, indent=2))
