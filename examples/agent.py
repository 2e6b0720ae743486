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
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from datetime import datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

if TYPE_CHECKING:
    from openai import OpenAI

MODEL = "google/gemma-4-E2B-it"
MAX_ROUNDS = 4


def current_time(zone: str) -> str:
    """The tool: the wall-clock time in an IANA time zone, computed here, on the agent's machine."""
    try:
        return datetime.now(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M %Z")
    except (ZoneInfoNotFoundError, ValueError):
        return f"unknown time zone {zone!r}; use an IANA name such as Asia/Tokyo"


TOOLS = [{"type": "function", "function": {
    "name": "current_time", "description": "The current local time in an IANA time zone.",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string", "description": "e.g. Asia/Tokyo"}},
                   "required": ["zone"]}}}]
FUNCTIONS = {"current_time": current_time}


def endpoint(stack: str | None) -> tuple[str, str]:
    """(base URL, API key): the stack's outputs, or the environment the README exports."""
    if stack:
        # The key arrives on stdout, never on a command line.
        shown = subprocess.run(["pulumi", "stack", "output", "--json", "--show-secrets", "--stack", stack],
                               capture_output=True, text=True, check=True)
        outputs = json.loads(shown.stdout)
        return outputs["localEndpoint"], outputs["apiKey"]
    # An empty one counts as unset: the SDK would otherwise fall back to api.openai.com with the stack's key.
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        if not os.environ.get(name, "").strip():
            sys.exit(f"{name} is not set: export it as the README's 'Using the endpoint' shows, or pass --stack NAME")
    return os.environ["OPENAI_BASE_URL"].strip(), os.environ["OPENAI_API_KEY"].strip()


def one_turn(client: OpenAI, messages: list[dict]) -> tuple[str, list[dict]]:
    """Stream one reply: reasoning to stderr, the answer to stdout; returns (answer, tool calls)."""
    answer, calls = "", {}
    stream = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, tool_choice="auto",
                                            stream=True)
    for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        thinking = getattr(delta, "reasoning", None) or getattr(delta, "reasoning_content", None)
        if thinking:
            print(thinking, end="", file=sys.stderr, flush=True)
        if delta.content:
            answer += delta.content
            print(delta.content, end="", flush=True)
        for call in delta.tool_calls or []:
            entry = calls.setdefault(call.index, {"id": "", "type": "function",
                                                  "function": {"name": "", "arguments": ""}})
            entry["id"] = call.id or entry["id"]
            if call.function is not None:
                entry["function"]["name"] += call.function.name or ""
                entry["function"]["arguments"] += call.function.arguments or ""
    return answer, [calls[index] for index in sorted(calls)]


def run(question: str, client: OpenAI) -> str:
    messages: list[dict] = [{"role": "user", "content": question}]
    for _ in range(MAX_ROUNDS):
        answer, calls = one_turn(client, messages)
        if not calls:
            print()
            return answer
        messages.append({"role": "assistant", "content": answer or None, "tool_calls": calls})
        for call in calls:
            function = FUNCTIONS.get(call["function"]["name"])
            try:
                arguments = json.loads(call["function"]["arguments"] or "{}")
                result = function(**arguments) if function else f"no tool named {call['function']['name']!r}"
            except (json.JSONDecodeError, TypeError) as error:
                result = f"bad arguments for {call['function']['name']}: {error}"
            print(f"[tool] {call['function']['name']}({call['function']['arguments']}) -> {result}", file=sys.stderr)
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    sys.exit(f"no final answer after {MAX_ROUNDS} rounds of tool calls")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("question", nargs="?", default="What time is it in Tokyo?")
    parser.add_argument("--stack", help="read the endpoint and key from this stack's outputs")
    args = parser.parse_args(argv)
    base_url, api_key = endpoint(args.stack)
    from openai import OpenAI  # after the endpoint's checks: a missing setting is said without the SDK's ~1 s import

    run(args.question, OpenAI(base_url=base_url, api_key=api_key))
    return 0


if __name__ == "__main__":
    sys.exit(main())
