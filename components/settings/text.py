"""Which characters no rendered file, command or message may carry, and how a message shows them instead.

The project's one sanitizer: whatever an outside party wrote (a user's name for an arm, a server's error, a
model's reply, a cluster's condition message) reaches a terminal, a table, a path or a command line only through
`escaped` (one line) or `shown` (prose that keeps its line breaks). Each character is judged alone, so text that
arrives in pieces (a stream) is made inert piece by piece: an escape sequence split across two reads is still
two escaped characters, never a sequence the terminal obeys.
"""

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


# Prose keeps these: a reply's line breaks and indentation are its own, and a terminal obeys nothing else of them.
_PROSE_KEEPS = frozenset("\n\t")


def shown(text: str) -> str:
    """Prose from outside (a model's streamed answer) for a terminal: line feeds and tabs kept, every other such
    character (ESC, CR, BEL, C1, bidi overrides, lone surrogates) written as its escape."""
    return "".join(ascii(character)[1:-1] if character not in _PROSE_KEEPS and _is_unprintable(character)
                   else character for character in text)


def one_line(text: str, limit: int = 300) -> str:
    """What a server or a cluster said, for one line of a message: its whitespace (line breaks too) made single
    spaces, every other such character escaped, and cut to `limit` characters."""
    flat = escaped(" ".join(text.split()))
    return flat if len(flat) <= limit else flat[:limit - 3] + "..."
