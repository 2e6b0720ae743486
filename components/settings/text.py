"""Which characters no rendered file, command or message may carry, and how a message shows them instead."""

from __future__ import annotations

import unicodedata

# Unicode categories no rendered file may carry: controls (newline, NUL, ESC), format characters (zero-width,
# bidi overrides), line and paragraph separators, private use, surrogates and unassigned code points.
_UNPRINTABLE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"})


def _is_unprintable(character: str) -> bool:
    category = unicodedata.category(character)
    return category in _UNPRINTABLE_CATEGORIES or (category == "Zs" and character != " ")


def unprintable(value: str) -> str | None:
    """The first character of value that no unit file, script, config or query may carry (any control or format
    character, any separator but the plain space), as Python escapes it; None if there is none."""
    return next((ascii(character)[1:-1] for character in value if _is_unprintable(character)), None)


def escaped(text: str) -> str:
    """text with each such character written as its escape: a message that quotes a value stays one inert line."""
    return "".join(ascii(character)[1:-1] if _is_unprintable(character) else character for character in text)
