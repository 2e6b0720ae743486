"""A shell command line as a reviewer reads it: one argument a line, compared argument by argument.

An "argument" is an option with its value (`--max-model-len 32768`, `-v /a:/b`, `--net=host`)
or one positional word. Shapes are not known in advance (the program decides what it runs),
so this only relies on the usual convention: a value follows its option and does not start
with "-". A flag followed by a positional word is shown as one argument; the text is the same.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass


def split(command: str) -> list[str] | None:
    """The words of a one-line command exactly as written (quotes kept), or None when it is not one.

    Written text, not shlex's unquoted words: re-quoting would change `~/.ssh/key` into '~/.ssh/key'.
    """
    if not command.strip() or "\n" in command.strip():
        return None
    words: list[str] = []
    current: list[str] = []
    quote = None
    index = 0
    while index < len(command):
        char = command[index]
        if quote is None and char in " \t":
            if current:
                words.append("".join(current))
                current = []
        elif quote is None and char == "\\" and index + 1 < len(command):
            current.append(command[index:index + 2])
            index += 1
        elif quote == '"' and char == "\\" and index + 1 < len(command):
            current.append(command[index:index + 2])
            index += 1
        elif quote is None and char in "'\"":
            quote = char
            current.append(char)
        elif char == quote:
            quote = None
            current.append(char)
        else:
            current.append(char)
        index += 1
    if quote is not None:
        return None
    if current:
        words.append("".join(current))
    return words


def _is_option(word: str) -> bool:
    return word.startswith("-") and word != "-" and word != "--"


def arguments(words: list[str]) -> list[str]:
    """Group written words into arguments: an option with its value, or one word."""
    grouped: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        takes_value = (_is_option(word) and "=" not in word and index + 1 < len(words)
                       and not words[index + 1].startswith("-"))
        if takes_value:
            grouped.append(f"{word} {words[index + 1]}")
            index += 2
        else:
            grouped.append(word)
            index += 1
    return grouped


def wrap(command: str, indent: str) -> list[str]:
    """The command one argument a line (continued with backslashes); as is if it is not one line."""
    words = split(command)
    if not words:
        return [indent + line for line in command.splitlines()] or [indent]
    head_length = next((i for i, word in enumerate(words) if word.startswith("-")), len(words))
    head = " ".join(words[:head_length])
    rest = arguments(words[head_length:])
    lines = ([head] if head else []) + rest
    if len(lines) == 1:
        return [indent + lines[0]]
    return ([indent + lines[0] + " \\"]
            + [f"{indent}  {line} \\" for line in lines[1:-1]]
            + [f"{indent}  {lines[-1]}"])


def option_name(argument: str) -> str | None:
    """`--opt value`, `--opt=value` or `--flag` -> the option; None for a positional word."""
    first = argument.partition(" ")[0]
    return first.partition("=")[0] if _is_option(first) else None


def _option_value(argument: str) -> str:
    """What follows the option (`--opt value`, `--opt=value`); "" for a flag."""
    first, _, rest = argument.partition(" ")
    return rest or first.partition("=")[2]


@dataclass(frozen=True)
class ArgumentChange:
    """One changed argument of a command line, with where it was and where it is.

    kind: "changed" (the same option, or the positional word in the same place, with another value),
    "moved" (the same argument elsewhere), "removed" or "added". Positions index the argument lists
    (`arguments(split(command))`); apply_changes rebuilds the new list from the old one with them.
    """

    kind: str
    before: str | None
    after: str | None
    old_index: int | None
    new_index: int | None


def changes_between(old: list[str], new: list[str]) -> list[ArgumentChange]:
    """Every difference between two argument lists, whatever their number and positions.

    Arguments outside difflib's matching blocks are paired up: the same argument is a move, the same
    option is a new value, a positional word replaced in the same region is a new value; the rest is
    removed or added.
    """
    removed: list[tuple[int, int]] = []  # (old index, region)
    added: list[tuple[int, int]] = []  # (new index, region)
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for region, (tag, a_start, a_end, b_start, b_end) in enumerate(matcher.get_opcodes()):
        if tag != "equal":
            removed += [(index, region) for index in range(a_start, a_end)]
            added += [(index, region) for index in range(b_start, b_end)]
    changes: list[ArgumentChange] = []

    def pair(kind: str, same: Callable[[tuple[int, int], tuple[int, int]], bool]) -> None:
        for gone in list(removed):
            match = next((came for came in added if same(gone, came)), None)
            if match is not None:
                removed.remove(gone)
                added.remove(match)
                changes.append(ArgumentChange(kind, old[gone[0]], new[match[0]], gone[0], match[0]))

    pair("moved", lambda gone, came: old[gone[0]] == new[came[0]])
    pair("changed", lambda gone, came: option_name(old[gone[0]]) is not None
         and option_name(old[gone[0]]) == option_name(new[came[0]]))
    pair("changed", lambda gone, came: gone[1] == came[1] and option_name(old[gone[0]]) is None
         and option_name(new[came[0]]) is None)
    changes += [ArgumentChange("removed", old[index], None, index, None) for index, _ in removed]
    changes += [ArgumentChange("added", None, new[index], None, index) for index, _ in added]
    return sorted(changes, key=lambda change: (change.new_index if change.new_index is not None
                                               else change.old_index, change.kind != "removed"))


def apply_changes(old: list[str], changes: list[ArgumentChange]) -> list[str]:
    """The new argument list: the old one's untouched arguments, in order, around the changes' new ones."""
    touched = {change.old_index for change in changes if change.old_index is not None}
    placed = {change.new_index: change.after for change in changes if change.new_index is not None}
    kept = iter([argument for index, argument in enumerate(old) if index not in touched])
    size = len(old) - len(touched) + len(placed)
    return [placed[index] if index in placed else next(kept) for index in range(size)]


def describe(change: ArgumentChange) -> str:
    """One change as a reviewer reads it: `~ --opt: old -> new`, `~ argument 3: a -> b`, `- arg`, `+ arg`."""
    if change.kind == "removed":
        return f"- {change.before}"
    if change.kind == "added":
        return f"+ {change.after}"
    assert change.before is not None and change.after is not None
    assert change.old_index is not None and change.new_index is not None
    if change.kind == "moved":
        return f"moved: {change.after} (argument {change.old_index + 1} -> {change.new_index + 1})"
    name = option_name(change.before)
    if name is None:
        return f"~ argument {change.new_index + 1}: {change.before} -> {change.after}"
    before, after = _option_value(change.before) or "(flag)", _option_value(change.after) or "(flag)"
    return f"~ {name}: {before} -> {after}"


def argument_changes(old: str, new: str) -> list[ArgumentChange] | None:
    """Argument-level difference of two command lines; None if either is not one."""
    old_words, new_words = split(old), split(new)
    if old_words is None or new_words is None:
        return None
    return changes_between(arguments(old_words), arguments(new_words))
