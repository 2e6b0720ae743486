"""Commands, read as a shell and vLLM's argument parser read them."""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Mapping
from typing import Any

VLLM_DEFAULT_PORT = 8000  # what `vllm serve` listens on without --port


def shell_words(text: str) -> list[str]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes: the shell would refuse it too; read it word by word
        return text.split()


def flags_of(words: list[str]) -> Iterator[tuple[int, str, str | None]]:
    """(position, name, value) of each --flag; vLLM accepts `--a_b` for `--a-b` and `--flag=value`."""
    for position, word in enumerate(words):
        if not word.startswith("--") or word == "--":
            continue
        name, equals, value = word.partition("=")
        if not equals:
            following = words[position + 1] if position + 1 < len(words) else None
            value = following if following is not None and not following.startswith("-") else None
        yield position, name.replace("_", "-").lower(), value


def command_texts(props: Mapping[str, Any]) -> list[str]:
    return [str(props.get(field)) for field in ("create", "update") if props.get(field)]


def listening_ports(text: str) -> set[int]:
    """Every --port in the command, and vLLM's default when `vllm serve` has none of its own."""
    words = shell_words(text)
    flags = list(flags_of(words))
    ports = {int(value) for _, name, value in flags if name == "--port" and value and value.isdigit()}
    serve_at = next((i for i in range(len(words) - 1) if words[i].endswith("vllm") and words[i + 1] == "serve"),
                    None)
    if serve_at is not None and not any(name == "--port" and position > serve_at for position, name, _ in flags):
        ports.add(VLLM_DEFAULT_PORT)
    return ports
