"""Server-sent events from a byte stream, split as the WHATWG event-stream format says.

Lines end at CR, LF or CRLF and nowhere else: a token holding U+2028, U+2029 or U+0085 (vLLM writes them
raw, as pydantic's model_dump_json does) is inside a line, not the end of one, which is why this works on
bytes (`bytes.splitlines` knows only CR and LF) and never decodes a line. A CR at the end of one read may be
the first half of a CRLF, so an LF that starts the next read is dropped. `data:` fields join with LF, a
blank line dispatches the event, a line starting with a colon is a comment, the space after the colon is
optional.
"""

from __future__ import annotations

MAX_LINE_BYTES = 1 << 20
"""A line this long without its end is no chat chunk (vLLM's are well under a kilobyte): stop, do not buffer on."""


class LineTooLongError(ValueError):
    pass


class SseParser:
    def __init__(self) -> None:
        self._tail = b""
        self._after_cr = False
        self._data: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        """Take the next bytes read; returns the data of every event they complete."""
        if self._after_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._after_cr = False
        if not chunk:
            return []
        # vLLM's usual read: one whole event, one data line, LF endings. Same result as the general path.
        if (not self._tail and not self._data and chunk.startswith(b"data: ") and chunk.endswith(b"\n\n")
                and chunk.count(b"\n") == 2 and b"\r" not in chunk):
            return [chunk[6:-2]]
        buffer = self._tail + chunk if self._tail else chunk
        lines = buffer.splitlines(True)
        last = lines[-1]
        if last.endswith((b"\n", b"\r")):
            self._tail = b""
            self._after_cr = last.endswith(b"\r")
        else:
            self._tail = lines.pop()
            if len(self._tail) > MAX_LINE_BYTES:
                raise LineTooLongError(f"a stream line over {MAX_LINE_BYTES:,} bytes without a line end")
        events: list[bytes] = []
        for line in lines:
            event = self._line(line.rstrip(b"\r\n"))
            if event is not None:
                events.append(event)
        return events

    def close(self) -> bytes | None:
        """At the end of the stream: the event left without its final blank line, if any."""
        if self._tail:
            self._line(self._tail)
            self._tail = b""
        return self._dispatch()

    def _line(self, line: bytes) -> bytes | None:
        if not line:
            return self._dispatch()
        if line.startswith(b":"):
            return None
        name, _, value = line.partition(b":")
        if name == b"data":
            self._data.append(value[1:] if value.startswith(b" ") else value)
        return None

    def _dispatch(self) -> bytes | None:
        if not self._data:
            return None
        data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
        self._data = []
        return data
