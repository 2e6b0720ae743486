"""One reader for every file a user hands the stack (a stack file, a sweep file, a config.json and its
safetensors index, a plan to diff, a journal, a bench result): a regular file only, at most a stated size, UTF-8,
JSON without non-finite numbers or keys given twice, YAML without alias bombs or keys given twice.

Why each bound:
- Regular files only, opened without blocking: `open()` of a FIFO waits for a writer, and `/dev/zero` never ends
  (POSIX open(2): O_NONBLOCK on a FIFO returns at once; fstat's S_ISREG tells a regular file).
- A size cap, read as at most cap + 1 bytes: a file that grows while it is read is caught too.
- UTF-8, strictly (JSON is UTF-8: RFC 8259 section 8.1; a YAML file here is too).
- JSON: CPython's json module reads `NaN`, `Infinity` and `-Infinity` unless `parse_constant` refuses them (3.11
  Lib/json/__init__.py `parse_constant`), keeps the last of two equal keys unless `object_pairs_hook` sees both, and
  raises ValueError past 4,300 digits of an integer (sys.get_int_max_str_digits) and RecursionError past its depth.
- YAML (PyYAML 6.0.4, the pinned one): the composer hands every alias back as the very node its anchor named
  (yaml/composer.py compose_node `return self.anchors[anchor]`) and registers a collection's anchor before its
  children (compose_sequence_node / compose_mapping_node), so nine lines can name a billion scalars, and a node can
  contain itself; the constructor keeps the last of two equal keys (constructor.py construct_mapping). So aliases
  are counted, the document's size with every alias expanded is bounded, a node inside itself is refused, and a
  key given twice in one map is refused where the mapping is constructed.
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path
from typing import Any

import yaml

KIB, MIB = 1 << 10, 1 << 20
MAX_YAML_ALIASES = 64
"""Aliases one YAML document may hold: a hand-written file uses a few, a bomb needs many."""
MAX_YAML_NODES = 100_000
"""Nodes of a YAML document with every alias expanded: a stack or sweep file has a few hundred."""


class ReadError(ValueError):
    """A file the reader refuses: `str()` is one line naming the file, what is wrong and the fix."""

    def __init__(self, path: str | Path, problem: str, line: int | None = None, column: int | None = None):
        problem = _shown(" ".join(problem.split()))  # one line, inert, whatever the parser quoted of the file
        self.path, self.problem, self.line, self.column = str(path), problem, line, column
        where = f", line {line}" + (f", column {column}" if column is not None else "") if line is not None else ""
        super().__init__(f"{_shown(self.path)}{where}: {problem}")


def _shown(text: str) -> str:
    """A path as one inert line (a file name may hold any byte but NUL and '/')."""
    return "".join(ascii(character)[1:-1] if not character.isprintable() else character for character in text)


def read_bytes(path: str | Path, max_bytes: int, what: str) -> bytes:
    """At most max_bytes of a regular file; ReadError for anything else."""
    shown = str(path)
    if "\x00" in shown:
        raise ReadError(path, f"a path with a NUL byte names no file; give the {what}'s path")
    try:
        descriptor = os.open(shown, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as error:
        raise ReadError(path, f"cannot read it ({error.strerror or error}); give the {what}'s path") from None
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            kind = ("a directory" if stat.S_ISDIR(status.st_mode) else "a FIFO" if stat.S_ISFIFO(status.st_mode)
                    else "a device" if stat.S_ISCHR(status.st_mode) or stat.S_ISBLK(status.st_mode)
                    else "a socket" if stat.S_ISSOCK(status.st_mode) else "not a regular file")
            raise ReadError(path, f"is {kind}, not a file; give the {what}'s path")
        if status.st_size > max_bytes:
            raise ReadError(path, f"is {status.st_size:,} bytes, more than the {max_bytes:,} a {what} may be; "
                            f"give the {what} itself")
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(descriptor, min(MIB, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > max_bytes:
            raise ReadError(path, f"grew past the {max_bytes:,} bytes a {what} may be while it was read")
        return b"".join(chunks)
    except OSError as error:
        raise ReadError(path, f"cannot read it ({error.strerror or error}); give the {what}'s path") from None
    finally:
        os.close(descriptor)


def read_text(path: str | Path, max_bytes: int, what: str) -> str:
    data = read_bytes(path, max_bytes, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ReadError(path, f"is not UTF-8 text (byte {error.start}); a {what} is UTF-8") from None


# ---- JSON ----

def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is no JSON number")


def _refuse_twice(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise ValueError(f"key {json.dumps(key)} appears twice in one object")
        found[key] = value
    return found


def parse_json(text: str, where: str | Path, what: str) -> Any:
    """JSON as RFC 8259 has it: no NaN or Infinity, no key twice in one object, no integer past 4,300 digits."""
    try:
        value = json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_refuse_twice)
    except json.JSONDecodeError as error:
        raise ReadError(where, f"is not JSON ({error.msg}); a {what} is JSON", error.lineno, error.colno) from None
    except RecursionError:
        raise ReadError(where, f"nests deeper than any {what} does: not a {what}") from None
    except ValueError as error:  # a constant, a key twice, an integer too long
        raise ReadError(where, f"{str(error).splitlines()[0]}; a {what} holds none") from None
    _finite(value, where, what)
    return value


def _finite(value: Any, where: str | Path, what: str) -> None:
    """1e999 reads as inf without any constant: refuse it too."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise ReadError(where, f"holds a number too large for a float ({item}); a {what} holds none")
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def read_json(path: str | Path, max_bytes: int, what: str) -> Any:
    return parse_json(read_text(path, max_bytes, what), path, what)


# ---- YAML ----

class BoundedLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader, with aliases counted, expanded size bounded, and keys given twice refused."""

    def __init__(self, stream: Any):
        super().__init__(stream)
        self.aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_YAML_ALIASES:
                raise yaml.composer.ComposerError(
                    None, None, f"more than {MAX_YAML_ALIASES} aliases (*name): write the values out",
                    self.peek_event().start_mark)
        return super().compose_node(parent, index)

    def compose_document(self) -> Any:
        node = super().compose_document()
        _expanded_size(node)
        return node

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Mark] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<`: SafeConstructor's flatten_mapping merges it
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                continue  # left to the constructor, which says what is wrong
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice (first on line {seen[key].line + 1}); YAML would "
                    "silently keep only the last value, so delete one", key_node.start_mark)
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def _expanded_size(root: yaml.Node) -> int:
    """Nodes with every alias expanded (memoised per node), refusing a node inside itself."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in on_path:
            raise yaml.composer.ComposerError(None, None, "a node that contains itself (an alias inside its own "
                                              "anchor)", node.start_mark)
        if isinstance(node, yaml.ScalarNode):
            return 1
        on_path.add(key)
        children = (node.value if isinstance(node, yaml.SequenceNode)
                    else [part for pair in node.value for part in pair])
        total = 1 + sum(size(child) for child in children)
        on_path.discard(key)
        if total > MAX_YAML_NODES:
            raise yaml.composer.ComposerError(None, None, f"more than {MAX_YAML_NODES:,} values once its aliases "
                                              "are expanded: write it without them", node.start_mark)
        sizes[key] = total
        return total

    return size(root)


def parse_yaml(text: str, where: str | Path, what: str) -> Any:
    """One YAML document by BoundedLoader; ReadError with the line and column of what is wrong."""
    try:
        return yaml.load(text, Loader=BoundedLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        problem = " ".join(part for part in (error.context, error.problem) if part)
        if not isinstance(error, (yaml.constructor.ConstructorError, yaml.composer.ComposerError)):
            problem = f"not valid YAML ({problem}); fix that line"
        raise ReadError(where, problem, mark.line + 1 if mark else None,
                        mark.column + 1 if mark else None) from None
    except yaml.reader.ReaderError as error:
        raise ReadError(where, f"holds {error.character!r} at character {error.position}, which YAML does not "
                        f"allow ({error.reason}); a {what} is printable text") from None
    except yaml.YAMLError as error:
        raise ReadError(where, f"cannot be read as YAML ({error}); a {what} is YAML") from None
    except RecursionError:
        raise ReadError(where, f"nests deeper than any {what} does: not a {what}") from None


def read_yaml(path: str | Path, max_bytes: int, what: str) -> Any:
    return parse_yaml(read_text(path, max_bytes, what), path, what)
