"""A shell command line as a reviewer reads it: one argument a line, compared argument by argument.

An "argument" is an option with its value (`--max-model-len 32768`, `-v /a:/b`, `--net=host`)
or one positional word. Shapes are not known in advance (the program decides what it runs),
so this only relies on the usual convention: a value follows its option and does not start
with "-". A flag followed by a positional word is shown as one argument; the text is the same.
"""

from __future__ import annotations

import difflib


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


def _option_and_value(argument: str) -> tuple[str, str] | None:
    """`--opt value` or `--opt=value` -> (option, value); None for a flag or a positional word."""
    first, _, rest = argument.partition(" ")
    if not _is_option(first):
        return None
    if rest:
        return first, rest
    name, equals, value = first.partition("=")
    return (name, value) if equals else None


def argument_changes(old: str, new: str) -> list[str] | None:
    """Argument-level difference: `~ --opt: old -> new`, `- arg`, `+ arg`; None if not commands."""
    old_words, new_words = split(old), split(new)
    if old_words is None or new_words is None:
        return None
    before, after = arguments(old_words), arguments(new_words)
    changes: list[str] = []
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    for tag, a_start, a_end, b_start, b_end in matcher.get_opcodes():
        if tag == "equal":
            continue
        removed, added = before[a_start:a_end], after[b_start:b_end]
        # The same option with a new value reads best as one line.
        while removed and added:
            before, after = _option_and_value(removed[0]), _option_and_value(added[0])
            if before is None or after is None or before[0] != after[0]:
                break
            changes.append(f"~ {before[0]}: {before[1]} -> {after[1]}")
            removed, added = removed[1:], added[1:]
        changes += [f"- {argument}" for argument in removed]
        changes += [f"+ {argument}" for argument in added]
    return changes
