"""An agent that uses the endpoint: the official `openai` SDK, a tool-calling loop over a real local function,
streamed, with the model's reasoning kept apart from its answer.

Where the endpoint is, either from the environment the README's tunnel step exports
(OPENAI_BASE_URL=http://127.0.0.1:8000/v1, OPENAI_API_KEY), or from the stack's outputs with `--stack NAME`
(`pulumi stack output --json --show-secrets`: localEndpoint and apiKey; the tunnel must be open).

    python examples/agent.py "What time is it in Tokyo?"

vLLM streams what the gemma4 reasoning parser separates out in `delta.reasoning` (vLLM 0.33.0,
vllm/entrypoints/generate/base/protocol.py DeltaMessage; older servers and other clients say
`reasoning_content`), and a tool call as deltas of `tool_calls` by index: the id and name first, then the
arguments in pieces (vllm/entrypoints/openai/chat_completion/serving.py).

Whatever the server sends, the agent ends: every turn has a deadline and the client a timeout and few retries
(openai 3.57.0's defaults, openai/_constants.py, are a 600 s read timeout and 2 retries: a silent server would
hold it ~30 minutes); every answer's body is read to a cap; what the server says is shown with each character a
terminal would obey written as its escape (components/settings/text.py, the project's one sanitizer, loaded from
its file); a request the gateway dropped after holding it is not retried; and a failure is one line on stderr and
exit status 1, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

if TYPE_CHECKING:
    from openai import OpenAI

MODEL = "google/gemma-4-E2B-it"
MAX_TURNS = 4
MAX_TOKENS = 2048
"""Output tokens per turn, sent as `max_completion_tokens` (vLLM 0.33 reads it before the deprecated `max_tokens`,
vllm/entrypoints/openai/chat_completion/protocol.py)."""
MAX_TURN_CHARS = 200_000
"""Reasoning plus answer text in one turn: far beyond MAX_TOKENS tokens, so only a runaway server reaches it."""
MAX_CALLS_PER_TURN = 8
MAX_ARGUMENT_CHARS = 16_384
"""One tool call's name plus arguments; a time zone is a few dozen characters."""
ERROR_BODY_BYTES = 1 << 20
"""Of an error's body: vLLM's errors are a few hundred bytes; the rest of a longer one is not read."""
STREAM_BYTES = 8 * MAX_TURN_CHARS
"""Of one reply's stream: its text is capped at MAX_TURN_CHARS, and each chunk's JSON wraps a few characters in
a few hundred bytes, so a stream this long is a runaway even before its text is parsed."""
TIMEOUT_SECONDS = 60.0
RETRIES = 2
TURN_SECONDS = 180.0


# The gateway's endpoint picker says why it dropped a request in this header (llm-d/llm-d-router v0.10.0
# pkg/common/error/error.go RequestDroppedReasonHeaderKey and the reasons; pkg/epp/requestcontrol/admission.go
# translateFlowControlOutcome: 503 when the pool has no endpoint, 429 when it is only busy). What each means, in words
# any client of the gateway can show (tools/bench reads them too).
DROPPED_REASON_HEADER = "x-llm-d-request-dropped-reason"
DROPPED_REASONS = {
    # Also the answer, at once, to a request that finds the band full while the pool is empty (processor.go).
    "rejected-no-endpoints": ("no replica was ready: the gateway held it for its time-to-live, or turned it away "
                              "at once with its queue full (a pool at zero wakes in minutes: retry, with a client "
                              "timeout of the stack's scaleToZero.requestTtlSeconds or more)"),
    "rejected-ttl-expired": "the gateway held it past its time-to-live while every replica was busy; retry later",
    "rejected-saturated": "the gateway's queue is full; retry later",
}
HELD_A_WHOLE_TTL = frozenset({"rejected-no-endpoints", "rejected-ttl-expired"})
"""Drops that come after the picker held the request for its whole TTL, where a retry would be held as long again
(rejected-no-endpoints also answers a full band at zero at once: a retry would meet the same full band)."""


def dropped_hint(reason: str) -> str:
    """What a dropped request's reason means, the reason itself shown inertly when it is not one of the picker's."""
    return DROPPED_REASONS.get(reason, f"the gateway dropped it ({one_line(reason, 80)})")


def bounded_answer(response) -> None:
    """The SDK's HTTP client's response hook (httpx2, openai 3.57.0's dependency): every answer gets a final verdict
    on retries (final_when_held_a_whole_ttl) and a bounded body. The SDK reads an error's body whole
    (_base_client.py: err.response.read()) and a stream's event whole however long (_streaming.py SSEDecoder), so a
    server could fill memory with one 2 GB answer: an error's body is cut at ERROR_BODY_BYTES, and a stream past
    STREAM_BYTES is stopped as a runaway reply."""
    final_when_held_a_whole_ttl(response)
    error = response.status_code >= 400
    encoding = response.headers.get("content-encoding", "").strip().lower()
    if encoding not in ("", "identity"):
        # httpx2 decodes after this stream (_models.py _get_content_decoder, at read), so these caps would count
        # compressed bytes: a 300 KB gzip body is 300 MB in memory. The client asks for identity (main); a server
        # that compresses anyway is not read.
        del response.headers["content-encoding"]
        response.stream = _unread_stream(response.stream, encoding, error)
        return
    limit = ERROR_BODY_BYTES if error else STREAM_BYTES
    response.stream = _bounded_stream(response.stream, limit, cut=error)


def _unread_stream(stream, encoding: str, error: bool):
    import httpx2

    said = one_line(encoding, 40)

    class Unread(httpx2.SyncByteStream):
        def __iter__(self):
            if not error:
                raise MalformedReplyError(f"a reply in Content-Encoding {said}, though the agent asked for identity")
            yield f"(a body in Content-Encoding {said}, which the agent did not ask for: not read)".encode()

        def close(self) -> None:
            stream.close()

    return Unread()


def _bounded_stream(stream, limit: int, cut: bool):
    import httpx2

    class Bounded(httpx2.SyncByteStream):
        def __iter__(self):
            size = 0
            for part in stream:
                size += len(part)
                if size > limit:
                    if not cut:
                        raise RunawayReplyError(f"a stream of more than {limit} bytes in one turn")
                    yield part[:len(part) - (size - limit)]
                    return
                yield part

        def close(self) -> None:
            stream.close()

    return Bounded()


def final_when_held_a_whole_ttl(response) -> None:
    """An httpx response hook: the SDK retries a 503 or a 429 twice by default (openai 3.57.0 _constants.py
    DEFAULT_MAX_RETRIES, _base_client.py _should_retry) but obeys the answer's own `x-should-retry: false` first.
    A request the gateway held for its whole TTL and then dropped would be held that long again on each retry,
    so the user would wait three TTLs for this line: it is marked final, and the reason is said at once. A full
    queue (rejected-saturated, refused before queueing) is still retried, as any 429 is."""
    if response.headers.get(DROPPED_REASON_HEADER) in HELD_A_WHOLE_TTL:
        response.headers["x-should-retry"] = "false"


class AgentError(Exception):
    """Ends the run: its message is printed as one line on stderr, and the exit status is 1."""


class MalformedReplyError(AgentError):
    """The server sent something no OpenAI-compatible server sends."""

    def __init__(self, what: str):
        super().__init__(f"the server sent a malformed reply: {what}")


class RunawayReplyError(AgentError):
    """The reply went past one of the caps above."""

    def __init__(self, what: str):
        super().__init__(f"stopped a runaway reply: {what}")


# --- The tool: runs on this machine, and whatever it raises is the model's to read, not a crash.

def current_time(zone: str) -> str:
    """The wall-clock time in an IANA time zone, computed here, on the agent's machine."""
    if not isinstance(zone, str):
        return f"zone must be a string such as Asia/Tokyo, not {json.dumps(zone)[:80]}"
    # ZoneInfo opens the name as a file under the tz database: a directory ("America") or a name too long for
    # the file system is an OSError, not a ZoneInfoNotFoundError (CPython 3.11 Lib/zoneinfo/_common.py).
    try:
        return datetime.now(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M %Z")
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return f"unknown time zone {zone[:80]!r}; use an IANA name such as Asia/Tokyo"


TOOLS = [{"type": "function", "function": {
    "name": "current_time", "description": "The current local time in an IANA time zone.",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string", "description": "e.g. Asia/Tokyo"}},
                   "required": ["zone"]}}}]
FUNCTIONS = {"current_time": current_time}


def call_tool(name: str, arguments: str) -> str:
    """The tool's result, or what went wrong, as the text the model reads next."""
    function = FUNCTIONS.get(name)
    if function is None:
        return f"no tool named {name[:80]!r}; the tools are {', '.join(FUNCTIONS)}"
    try:
        parsed = json.loads(arguments or "{}")
    except (ValueError, RecursionError) as error:  # RecursionError: JSON nested thousands deep
        return (f"the arguments of {name} are not JSON ({type(error).__name__}); send an object such as "
                '{"zone": "Asia/Tokyo"}')
    if not isinstance(parsed, dict):
        return f"the arguments of {name} must be a JSON object, not {type(parsed).__name__}"
    try:
        return function(**parsed)
    except Exception as error:  # noqa: BLE001 - a tool's failure is an observation for the model
        return f"{name} failed: {type(error).__name__}: {str(error)[:200]}"


# --- What reaches the terminal: the server's text through the project's one sanitizer, every character a terminal
# would obey (ESC, CR, C1, bidi overrides, lone surrogates) written as its escape.

def _text_rules():
    """components/settings/text.py, loaded from its file: the settings package around it imports the whole stack
    (pydantic and more), and this example needs only the openai SDK."""
    path = Path(__file__).resolve().parent.parent / "components" / "settings" / "text.py"
    spec = importlib.util.spec_from_file_location("tpu_vllm_text_rules", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_TEXT = _text_rules()
printable = _TEXT.shown
"""A reply's prose for the terminal: its line breaks kept, nothing else a terminal obeys."""
one_line = _TEXT.one_line
"""For a line about the server's text: inert, on one line, and short."""


# --- Where the endpoint is.

def endpoint(stack: str | None) -> tuple[str, str]:
    """(base URL, API key): the stack's outputs, or the environment the README exports."""
    if stack:
        return stack_endpoint(stack)
    # Unset, the SDK falls back to api.openai.com and would send it the stack's key (openai 3.57.0
    # lib/_client_auth.py: only None falls back); empty, it takes "" as the URL and fails at the first request.
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        if not os.environ.get(name, "").strip():
            raise AgentError(f"{name} is not set: export it as the README's 'Using the endpoint' shows, "
                             "or pass --stack NAME")
    return checked_url(os.environ["OPENAI_BASE_URL"].strip(), "OPENAI_BASE_URL"), os.environ["OPENAI_API_KEY"].strip()


def checked_url(url: str, source: str) -> str:
    """The base URL, if it is one the SDK can use (its HTTP client raises a bare InvalidURL at the first
    request otherwise)."""
    try:
        parts = urlsplit(url)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # a bad port or IPv6 address
        valid = False
    if not valid or any(not character.isprintable() or character.isspace() for character in url):
        raise AgentError(f"{source} {one_line(url, 100)!r} is not an http(s) URL: use the tunnel's, "
                         "such as http://127.0.0.1:8000/v1")
    return url


def stack_endpoint(stack: str) -> tuple[str, str]:
    # The key arrives on stdout, never on a command line; nothing read from stdout is ever printed.
    try:
        shown = subprocess.run(["pulumi", "stack", "output", "--json", "--show-secrets", "--stack", stack],
                               stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        raise AgentError("--stack needs the Pulumi CLI (pulumi) on PATH: install it "
                         "(https://www.pulumi.com/docs/install/) or export OPENAI_BASE_URL and OPENAI_API_KEY "
                         "instead") from None
    except subprocess.TimeoutExpired:
        raise AgentError(f"pulumi stack output --stack {stack} did not finish in 120 s") from None
    if shown.returncode != 0:
        said = (shown.stderr.strip().splitlines() or ["no message"])[-1]
        raise AgentError(f"pulumi stack output --stack {stack} failed: {one_line(said)}")
    try:
        outputs = json.loads(shown.stdout)
        base_url, api_key = outputs["localEndpoint"], outputs["apiKey"]
    except (ValueError, TypeError, KeyError):
        raise AgentError(f"stack {stack} has no localEndpoint and apiKey outputs: is it deployed "
                         "(pulumi up)?") from None
    if not (isinstance(base_url, str) and isinstance(api_key, str)):
        raise AgentError(f"stack {stack}'s localEndpoint and apiKey outputs are not strings")
    return checked_url(base_url, f"stack {stack}'s localEndpoint output"), api_key


# --- One turn: the reply streamed, checked as it comes.

@dataclass
class ToolCall:
    """One call assembled from its deltas; pieces joined once at the end (`+=` on a growing string is quadratic)."""

    id: str = ""
    names: list[str] = field(default_factory=list)
    arguments: list[str] = field(default_factory=list)
    size: int = 0

    def add(self, name: str | None, arguments: str | None) -> None:
        self.size += len(name or "") + len(arguments or "")
        if self.size > MAX_ARGUMENT_CHARS:
            raise RunawayReplyError(f"a tool call longer than {MAX_ARGUMENT_CHARS} characters")
        self.names.append(name or "")
        self.arguments.append(arguments or "")

    def message(self) -> dict:
        return {"id": self.id, "type": "function",
                "function": {"name": "".join(self.names), "arguments": "".join(self.arguments)}}


def expect(value: object, kind: type, what: str, required: bool = False) -> object:
    """`value` if it is a `kind` (or an optional None). The SDK builds chunks without validating them
    (openai/_base_client.py _process_response_data: construct_type), so a `null` or an object where a string
    belongs would otherwise surface later as an AttributeError or a TypeError."""
    if (value is None and not required) or isinstance(value, kind):
        return value
    raise MalformedReplyError(f"{what} is {json_kind(value)}")


def json_kind(value: object) -> str:
    kinds = {type(None): "null", bool: "a boolean", int: "a number", float: "a number", str: "a string",
             list: "an array", dict: "an object"}
    return kinds.get(type(value), "an object")


def delta_of(chunk: object):
    """The first choice's delta; None for a chunk without choices (the usage chunk vLLM sends last)."""
    # Imported where used, as `openai` is in main: after the endpoint's checks.
    from openai.types.chat.chat_completion_chunk import ChatCompletionChunk, Choice, ChoiceDelta

    choices = expect(expect(chunk, ChatCompletionChunk, "an event", required=True).choices, list, "choices")
    if not choices:
        return None
    choice = expect(choices[0], Choice, "choices[0]", required=True)
    return expect(choice.delta, ChoiceDelta, "choices[0].delta", required=True)


def add_tool_call_deltas(calls: dict[int, ToolCall], delta) -> None:
    from openai.types.chat.chat_completion_chunk import ChoiceDeltaToolCall, ChoiceDeltaToolCallFunction

    for piece in expect(delta.tool_calls, list, "tool_calls") or []:
        piece = expect(piece, ChoiceDeltaToolCall, "a tool call", required=True)
        index = expect(piece.index, int, "a tool call's index", required=True)
        if not 0 <= index < MAX_CALLS_PER_TURN:
            raise RunawayReplyError(f"tool call index {index}: more than {MAX_CALLS_PER_TURN} calls in one turn")
        call = calls.setdefault(index, ToolCall())
        call.id = expect(piece.id, str, "a tool call's id") or call.id
        function = expect(piece.function, ChoiceDeltaToolCallFunction, "a tool call's function")
        if function is not None:
            call.add(expect(function.name, str, "a function name"), expect(function.arguments, str, "arguments"))


class Deadline:
    """A turn's wall-clock limit. Checked between chunks, and where the OS has SIGALRM also by a timer that
    interrupts the turn wherever it waits: for the first byte, in the SDK's sleep before a retry (a server's
    Retry-After may ask for 120 s, openai/_constants.py MAX_RETRY_AFTER_DELAY), or inside an event that never
    ends (the SDK's SSE decoder sets no line limit, openai/_streaming.py SSEDecoder)."""

    def __init__(self, seconds: float):
        self.seconds, self.end = seconds, time.monotonic() + seconds
        self.armed = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()

    def check(self) -> None:
        if time.monotonic() > self.end:
            self.expire()

    def expire(self, *_: object) -> None:
        raise AgentError(f"no complete reply within {self.seconds:g} s (the turn's deadline, --turn-seconds)")

    def __enter__(self) -> Deadline:
        if self.armed:
            self.previous = signal.signal(signal.SIGALRM, self.expire)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, *_: object) -> None:
        if self.armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)


def checked_chunks(stream):
    """The stream's chunks; data that is not JSON (or not UTF-8) is the server's fault. The SDK parses each
    event with json.loads and lets its error through (openai/_streaming.py Stream.__stream__, sse.json())."""
    try:
        yield from stream
    except UnicodeDecodeError:
        raise MalformedReplyError("an event that is not UTF-8") from None
    except ValueError:  # json.JSONDecodeError
        raise MalformedReplyError("an event that is not JSON") from None


class Reply:
    """What one turn's stream has brought so far: the answer printed as it comes, the reasoning beside it."""

    def __init__(self) -> None:
        self.answer: list[str] = []
        self.calls: dict[int, ToolCall] = {}
        self.size = 0
        self.thought = False

    def take(self, delta) -> None:
        thinking = getattr(delta, "reasoning", None) or getattr(delta, "reasoning_content", None)
        thinking = expect(thinking, str, "reasoning") or ""
        text = expect(delta.content, str, "content") or ""
        self.size += len(thinking) + len(text)
        if self.size > MAX_TURN_CHARS:
            raise RunawayReplyError(f"more than {MAX_TURN_CHARS} characters in one turn "
                                    f"(max_completion_tokens is {MAX_TOKENS})")
        if thinking:
            self.thought = True
            print(printable(thinking), end="", file=sys.stderr, flush=True)
        if text:
            self.answer.append(text)
            print(printable(text), end="", flush=True)
        add_tool_call_deltas(self.calls, delta)

    def end_lines(self) -> None:
        """End the streamed lines, so what comes next (a [tool] line, the next turn, an error) starts a line."""
        if self.thought:
            print(file=sys.stderr)
        if self.answer:
            print()


def stream_turn(client: OpenAI, messages: list[dict], seconds: float) -> tuple[str, list[dict]]:
    """Stream one reply: reasoning to stderr, the answer to stdout; returns (answer, tool calls)."""
    reply = Reply()
    try:
        with Deadline(seconds) as deadline:
            stream = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS,
                                                    tool_choice="auto", max_completion_tokens=MAX_TOKENS,
                                                    stream=True)
            for chunk in checked_chunks(stream):
                deadline.check()
                delta = delta_of(chunk)
                if delta is not None:  # None: the usage chunk, which has no choices
                    reply.take(delta)
    finally:
        reply.end_lines()
    return "".join(reply.answer), [reply.calls[index].message() for index in sorted(reply.calls)]


# --- The loop: turns until an answer without tool calls.

def run(question: str, client: OpenAI, turn_seconds: float = TURN_SECONDS) -> str:
    messages: list[dict] = [{"role": "user", "content": question}]
    for _ in range(MAX_TURNS):
        answer, calls = stream_turn(client, messages, turn_seconds)
        if not calls:
            return answer
        messages.append({"role": "assistant", "content": answer or None, "tool_calls": calls})
        for call in calls:
            name, arguments = call["function"]["name"], call["function"]["arguments"]
            result = call_tool(name, arguments)
            print(f"[tool] {one_line(name, 200)}({one_line(arguments, 200)}) -> {one_line(result)}", file=sys.stderr)
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    raise AgentError(f"no final answer after {MAX_TURNS} turns of tool calls")


def explain(error: Exception, base_url: str, timeout: float) -> str:
    """One line for an error of the SDK (openai 3.57.0, openai/_exceptions.py): a status error carries the
    server's `error` value as `body`; a timeout is a kind of connection error; an `{"error": ...}` event inside
    a stream is a plain APIError (openai/_streaming.py)."""
    import openai

    if isinstance(error, openai.APITimeoutError):
        return f"the server at {base_url} sent nothing for {timeout:g} s (--timeout)"
    if isinstance(error, openai.APIConnectionError):
        cause = one_line(str(error.__cause__ or error), 200).rstrip(".")
        return f"the connection to {base_url} failed: {cause}; is the tunnel open?"
    if isinstance(error, openai.APIStatusError):
        body = error.body.get("message", error.body) if isinstance(error.body, dict) else error.body
        said = one_line(str(body or "")) or "no message"
        hint = "; check OPENAI_API_KEY (the stack's apiKey output)" if error.status_code in (401, 403) else ""
        dropped = error.response.headers.get(DROPPED_REASON_HEADER)
        if dropped:
            hint = f"; {dropped_hint(dropped)}" + (" (here --timeout and --turn-seconds)"
                                                   if dropped == "rejected-no-endpoints" else "")
        return f"the server answered HTTP {error.status_code}: {said}{hint}"
    return f"the server reported an error: {one_line(str(error))}"


def positive_seconds(text: str) -> float:
    value = float(text)
    if not 0 < value < 86400:
        raise argparse.ArgumentTypeError(f"{text} is not a number of seconds between 0 and 86400")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("question", nargs="?", default="What time is it in Tokyo?")
    parser.add_argument("--stack", help="read the endpoint and key from this stack's outputs")
    parser.add_argument("--timeout", type=positive_seconds, default=TIMEOUT_SECONDS, metavar="SECONDS",
                        help=f"seconds to wait to connect and for each read (default: {TIMEOUT_SECONDS:g})")
    parser.add_argument("--retries", type=int, choices=range(6), default=RETRIES, metavar="0-5",
                        help="retries of a request that failed to connect, timed out or got a 408, 409, 429 or "
                             f"5xx, as the SDK retries (default: {RETRIES})")
    parser.add_argument("--turn-seconds", type=positive_seconds, default=TURN_SECONDS, metavar="SECONDS",
                        help=f"seconds one reply may take, retries included (default: {TURN_SECONDS:g})")
    args = parser.parse_args(argv)
    # The server's text may hold characters this terminal's encoding lacks: shown as '?', not a crash.
    sys.stdout.reconfigure(errors="replace")
    try:
        base_url, api_key = endpoint(args.stack)
        import openai  # after the endpoint's checks: a missing setting is said without the SDK's ~1 s import

        # Identity, so the response hook's caps count the bytes that reach memory (bounded_answer).
        http_client = openai.DefaultHttpxClient(headers={"Accept-Encoding": "identity"},
                                                event_hooks={"response": [bounded_answer]})
        client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=args.timeout, max_retries=args.retries,
                               http_client=http_client)
        try:
            run(args.question, client, args.turn_seconds)
            # Inside the try, as Python's "Note on SIGPIPE" does: a reader gone before the last line is caught here,
            # not at the interpreter's own flush at exit ("Exception ignored", status 120).
            sys.stdout.flush()
        except openai.APIError as error:
            raise AgentError(explain(error, one_line(base_url, 100), args.timeout)) from None
    except AgentError as error:
        sys.exit(f"agent: {one_line(str(error), 2000)}")
    except KeyboardInterrupt:
        print("\nagent: interrupted", file=sys.stderr)
        return 130  # the shell's status for a command ended by SIGINT (128 + 2)
    except BrokenPipeError:
        # The reader (| head) is gone: as Python's signal docs advise, point stdout at /dev/null so the
        # interpreter's final flush cannot raise again, and end quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
