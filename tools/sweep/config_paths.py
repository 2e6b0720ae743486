"""An arm's `tpu-vllm:` settings as config leaves, set and removed by path, as `pulumi config set --path` stores them.

Pulumi stores a value set by path as a bool for "true"/"false", as text when it has more than one character and
starts with "0" (so "0.92" stays text), as an integer when Go's `strconv.ParseInt(v, 10, 64)` reads it (an
optional sign, ASCII digits, within int64) or else `strconv.ParseUint(v, 10, 64)` (no sign, within uint64), else
as text: so text past 64 bits and digits of other scripts stay text (pulumi/pulumi
sdk/go/common/resource/config/object.go `coerce`, called by value.go `coerceObject`, at 1b59498 after v3.259.0;
the pinned 3.272.0's Go source is in no stored snapshot; golang/go src/strconv/atoi.go: ParseUint takes no sign,
ParseInt "+" or "-" then ASCII digits; tests/fakes/pulumi_cli.py applies the same rule). The settings model reads
"0.92" and "16384" as numbers, so every leaf round-trips, except text that the CLI would turn into a bool or a
number: `misread` refuses it.
"""

from __future__ import annotations

import re
from typing import Any

NAMESPACE = "tpu-vllm"


def deep_merge(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    """overlay over base, maps merged key by key (an arm names only what it changes)."""
    merged = dict(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _path(prefix: str, key: str | int) -> str:
    return f"{prefix}[{key}]" if isinstance(key, int) else (f"{prefix}.{key}" if prefix else key)


def leaves(settings: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{'vllm': {'speculativeConfig': {'method': 'ngram'}}} -> {'vllm.speculativeConfig.method': 'ngram'}."""
    found: dict[str, Any] = {}
    items = settings.items() if isinstance(settings, dict) else enumerate(settings)
    for key, value in items:
        path = _path(prefix, key)
        if isinstance(value, (dict, list)) and value:
            found.update(leaves(value, path))
        else:
            found[path] = value
    return found


INT64 = range(-(1 << 63), 1 << 63)
UINT64 = range(0, 1 << 64)


def stored_as(text: str) -> Any:
    """What `pulumi config set --path K TEXT` stores (object.go coerce)."""
    if text in ("true", "false"):
        return text == "true"
    if len(text) > 1 and text.startswith("0"):
        return text
    # ASCII digits only: Python's \d and int() also take other scripts' digits, Go's strconv does not. A 64-bit
    # number has at most 20 significant digits (zeros after a sign count for nothing), so nothing longer is converted
    # (Python refuses 4,300 digits).
    if not re.fullmatch(r"[+-]?[0-9]+", text) or len(text.lstrip("+-").lstrip("0")) > 20:
        return text
    number = int(text)
    if number in INT64 or (text[0] not in "+-" and number in UINT64):
        return number
    return text


def as_text(value: Any) -> str:
    """The text to hand the CLI for a leaf value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return "{}" if isinstance(value, dict) else "[]"
    return str(value)


def misread(value: Any) -> str | None:
    """Why the CLI would not store this leaf as the value it is, or None."""
    if isinstance(value, str) and stored_as(value) != value:
        return f"text that `pulumi config set --path` stores as {type(stored_as(value)).__name__}"
    if value is None or isinstance(value, (dict, list)):
        return "an empty value, which `pulumi config set --path` cannot store"
    return None


def full(path: str) -> str:
    return f"{NAMESPACE}:{path}"


def changes(current: dict[str, Any], wanted: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """From one overlay's leaves to another's: (leaves to set, as text; leaves to remove), both keyed in full.
    A leaf the new overlay drops goes back to the base's value, so `current` and `wanted` are full configs."""
    now, then = leaves(current), leaves(wanted)
    to_set = {full(path): as_text(value) for path, value in then.items() if now.get(path, object()) != value}
    # Removing a leaf leaves its map behind (an empty `speculativeConfig: {}` still turns the arm on): remove the
    # highest part of the path the wanted config does not have at all.
    to_remove = list(dict.fromkeys(full(_highest_absent(path, wanted)) for path in now if path not in then))
    return to_set, to_remove


def _parts(path: str) -> list[str | int]:
    return [int(index) if index else name for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", path)]


def natural_key(key: str) -> list[tuple[int, int | str]]:
    """A full key's path parts, list indices as numbers: sorted in reverse, a list's later elements come first."""
    return [(0, part) if isinstance(part, int) else (1, part) for part in _parts(key)]


def _highest_absent(path: str, wanted: dict[str, Any]) -> str:
    node: Any = wanted
    shown = ""
    for part in _parts(path):
        shown = _path(shown, part)
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return shown
    return path
