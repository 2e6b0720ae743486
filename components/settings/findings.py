"""One Finding per problem or warning, and the one place they are rendered.

Every check (a field validator, a cross-key rule, pydantic's own type errors) says what it found as data:
the key, the value, why it is wrong, and the fix. Errors and warnings are then spelled alike, and `load()`
removes duplicates by comparing findings, not their text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from components.settings.facts import NAMESPACE
from components.settings.text import escaped

SECRET_SHOWN = "[secret]"
MAX_SHOWN_VALUE = 120


class NoValue:
    """The finding is about a key as a whole (a section, an unknown key), not one value of it."""

    def __repr__(self) -> str:
        return "NO_VALUE"


NO_VALUE: Any = NoValue()


def full_key(key: str) -> str:
    """'front.listenPort' -> 'tpu-vllm:front.listenPort'; a key of another namespace ('gcp:project') stays as it is."""
    return key if ":" in key else f"{NAMESPACE}:{key}"


def shown_value(value: Any, secret: bool = False) -> str:
    """The value as the user wrote it in YAML/JSON, a secret never, a long one cut."""
    if secret:
        return SECRET_SHOWN
    shown = json.dumps(value, default=str)
    if len(shown) > MAX_SHOWN_VALUE:
        shown = shown[:100] + f"... ({len(shown)} characters)"
    return shown


@dataclass(frozen=True, eq=False)
class Finding:
    """A problem (severity error: the stack refuses to deploy) or a warning (it deploys, and says so)."""

    key: str
    """The config key, e.g. 'front.listenPort' (under tpu-vllm:) or 'gcp:project'."""
    value: Any
    """What it holds (NO_VALUE when the finding is about the key as a whole)."""
    message: str
    """Why it is wrong or poor: the measured reason."""
    fix: str
    """What to do about it."""
    severity: Literal["error", "warning"] = "error"
    secret: bool = False
    """The value is secret: rendered as [secret], never as itself."""
    also_keys: tuple[str, ...] = field(default=())
    """Other keys the rule reads: a finding is dropped when one of its keys already failed on its own."""

    @classmethod
    def warning(cls, key: str, value: Any, message: str, fix: str, **extra: Any) -> Finding:
        return cls(key, value, message, fix, "warning", **extra)

    def _identity(self) -> tuple[Any, ...]:
        # Values may be lists or maps: compare them as the data they are, in JSON.
        return (self.key, json.dumps(self.value, sort_keys=True, default=repr), self.message, self.fix,
                self.severity, self.secret, self.also_keys)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Finding) and self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())

    @property
    def keys(self) -> tuple[str, ...]:
        return (full_key(self.key), *(full_key(key) for key in self.also_keys))

    def render(self) -> str:
        head = escaped(full_key(self.key))
        if self.value is not NO_VALUE:
            head += f" = {shown_value(self.value, self.secret)}"
        # A message may quote what the user wrote: a newline or an escape in it is shown, never written.
        return escaped(f"{head}: {self.message}; {self.fix}" if self.fix else f"{head}: {self.message}")


class InvalidSettingError(ValueError):
    """Raised by a field validator: pydantic keeps it (ctx['error']), and errors.py makes a Finding of it."""

    def __init__(self, message: str, fix: str):
        self.message, self.fix = message, fix
        super().__init__(f"{message}; {fix}")


def is_under(key: str, failed: str) -> bool:
    """tpu-vllm:vllm.limitMmPerPrompt.image is under tpu-vllm:vllm.limitMmPerPrompt (and under itself)."""
    return key == failed or key.startswith((failed + ".", failed + "["))


class SettingsError(Exception):
    """Every problem with the stack's configuration, found in one pass."""

    def __init__(self, problems: list[Finding | str]):
        # A plain string is a problem with no key of its own (a stack file that cannot be read at all).
        self.findings = [problem for problem in problems if isinstance(problem, Finding)]
        self.problems = [problem.render() if isinstance(problem, Finding) else problem for problem in problems]
        super().__init__(self.render())

    def render(self) -> str:
        lines = [f"{len(self.problems)} problem(s) in the stack configuration:"]
        lines += [f"  - {problem}" for problem in self.problems]
        return "\n".join(lines)
