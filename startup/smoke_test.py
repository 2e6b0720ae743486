#!/usr/bin/env python3
"""tpu-vllm smoke test, run on the node by serve.sh after vLLM and the front are healthy.

    python3 smoke_test.py --front-url URL --vllm-url URL --model ID --api-key-file FILE

Checks, in order: the front refuses `/invocations` and `/v1/models` without the key, and vLLM itself refuses
`/v1/models` without it (its entry command read the key file); with the key, `/v1/models` lists the model,
a chat comes back non-empty, and a tool call comes back as `get_weather`. Prints one `[tpu-vllm]` line per
check; on the first failure prints `[tpu-vllm] FAILED: <why>` to stderr and exits 1.

Standard library only (the TPU VM image's python3). The key is read from its file into a request header:
never an argument, never printed.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request

PREFIX = "[tpu-vllm]"
TIMEOUT_SECONDS = 300
REFUSAL_TIMEOUT_SECONDS = 30
TOOL_CALL_MAX_TOKENS = 1024
# A request without a body (GET). A sentinel, not a null: the plan shows this file, and its text is checked.
NO_BODY = object()


class SmokeTestError(Exception):
    pass


def say(message: str):
    print(f"{PREFIX} {message}", flush=True)


def request(method: str, url: str, *, key: str = "", body: object = NO_BODY,
            timeout: float = TIMEOUT_SECONDS) -> tuple[int, bytes]:
    """(status, body); an HTTP error status is an answer, not an exception; no answer at all is 0."""
    headers, payload = {}, {}
    if body is not NO_BODY:
        headers["Content-Type"] = "application/json"
        payload["data"] = json.dumps(body).encode()
    if key:
        headers["Authorization"] = f"Bearer {key}"
    req = urllib.request.Request(url, headers=headers, method=method, **payload)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except (urllib.error.URLError, OSError):
        return 0, b""


def expect_refused(method: str, url: str, what: str):
    status, _ = request(method, url, body={} if method == "POST" else NO_BODY, timeout=REFUSAL_TIMEOUT_SECONDS)
    if status != 401:
        raise SmokeTestError(f"{what} answered {status:03d} without the API key; expected 401")


def read_key(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            key = handle.read().strip()
    except OSError as error:
        raise SmokeTestError(f"cannot read the API key file {path}") from error
    if not key:
        raise SmokeTestError(f"the API key file {path} is empty")
    return key


def keyed_json(method: str, url: str, key: str, what: str, body: object = NO_BODY) -> dict:
    status, raw = request(method, url, key=key, body=body)
    if status != 200:
        raise SmokeTestError(f"{what} answered {status:03d}: {raw[:300].decode(errors='replace')}")
    try:
        return json.loads(raw)
    except ValueError as error:
        raise SmokeTestError(f"{what} answered 200 with a body that is not JSON: "
                             f"{raw[:300].decode(errors='replace')}") from error


def chat_reply(response: dict) -> str:
    """The reply's text; a reasoning model may spend the smoke test's tokens thinking, which vLLM puts in
    `reasoning` (older releases: `reasoning_content`) and still proves the chat path works."""
    try:
        message = response["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        return ""
    for field in ("content", "reasoning", "reasoning_content"):
        if message.get(field):
            return str(message[field])
    return ""


def tool_call(response: dict) -> tuple[str, str]:
    try:
        function = response["choices"][0]["message"]["tool_calls"][0]["function"]
        return str(function["name"]), str(function.get("arguments", ""))
    except (KeyError, IndexError, TypeError):
        return "", ""


def finish_reason(response: dict) -> str:
    try:
        return str(response["choices"][0]["finish_reason"])
    except (KeyError, IndexError, TypeError):
        return "missing"


def run(front_url: str, vllm_url: str, model: str, api_key_file: str):
    key = read_key(api_key_file)
    # vLLM's --api-key guards only /v1, /v2 and /inference: the front must refuse the rest, /invocations
    # (which chats) first of all; and vLLM itself must have the key.
    expect_refused("POST", f"{front_url}/invocations", "the front's /invocations")
    expect_refused("GET", f"{front_url}/v1/models", "the front's /v1/models")
    expect_refused("GET", f"{vllm_url}/v1/models",
                   f"vLLM's own /v1/models on {vllm_url.removeprefix('http://')} (is VLLM_API_KEY set?)")
    say("refused without the key: /invocations and /v1/models at the front, /v1/models at vLLM itself")

    models = keyed_json("GET", f"{front_url}/v1/models", key, "/v1/models")
    ids = [entry.get("id") for entry in models.get("data", []) if isinstance(entry, dict)]
    if model not in ids:
        raise SmokeTestError(f"/v1/models does not list {model} (it lists {ids})")

    # Chat, never /v1/completions: raw completions return "" on -it models.
    chat = keyed_json("POST", f"{front_url}/v1/chat/completions", key, "chat completion", {
        "model": model, "max_tokens": 64, "messages": [{"role": "user", "content": "Say hi in five words."}]})
    reply = chat_reply(chat)
    if not reply:
        raise SmokeTestError("chat completion came back empty")
    say(f"chat ok: {reply[:80]}")

    # A reasoning model (Qwen3 thinks by default) spends tokens thinking before it calls the tool; nobody has
    # measured how many for this prompt, so the limit leaves room, and running out is said as such.
    tools = keyed_json("POST", f"{front_url}/v1/chat/completions", key, "tool-call request", {
        "model": model, "max_tokens": TOOL_CALL_MAX_TOKENS, "tool_choice": "auto",
        "messages": [{"role": "user", "content": "What is the weather in Paris? Use the tool."}],
        "tools": [{"type": "function", "function": {
            "name": "get_weather", "description": "Current weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]})
    name, arguments = tool_call(tools)
    if name != "get_weather":
        if finish_reason(tools) == "length":
            raise SmokeTestError(f"no get_weather tool call came back: the reply used all {TOOL_CALL_MAX_TOKENS} "
                                 "of its max_tokens (finish_reason length; a reasoning model still thinking?) "
                                 f"(got: {json.dumps(tools)[:300]})")
        raise SmokeTestError(f"no get_weather tool call came back (finish_reason {finish_reason(tools)}; "
                             f"got: {json.dumps(tools)[:300]})")
    say(f"tool call ok: {name}({arguments})")


def main(argv: list[str] = sys.argv[1:]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--front-url", required=True)
    parser.add_argument("--vllm-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--api-key-file", required=True)
    args = parser.parse_args(argv)
    try:
        run(args.front_url.rstrip("/"), args.vllm_url.rstrip("/"), args.model, args.api_key_file)
    except SmokeTestError as failure:
        print(f"{PREFIX} FAILED: {failure}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
