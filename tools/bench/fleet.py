"""The agent-fleet mode: a few long-lived agents, each resending its own long system prompt and tool schemas on
every call, as tool-calling agents do, each over its own pool of kept connections (aiohttp's here, which keeps an
idle one 15 s; the openai SDK's keeps one 5 s, so an SDK agent that pauses longer reconnects and is placed afresh).
What it measures is the time to first token, on an agent's first call (nothing of its prefix cached anywhere) and
on its later ones (its prefix cached on whichever replica served it before, if the call lands there).

Behind a connection-level balancer (the passthrough load balancer) an agent's calls stay on the replicas its
connections first reached, while they stay open; behind the inference gateway each call goes where the picker
sends it, which prefers the replica holding the agent's prefix, so an agent's calls stay on one replica there too,
by choice, while new agents (new prefixes) and load spread over every replica (docs/gke.md, *Inference gateway*).
Run against both endpoints (--base-url and --compare-url) it prints the TTFT of each side by side. On one chip, or
a fake server, it only shows the fleet's shape.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from components.settings.text import escaped
from tools.bench.request import FILLER, Endpoint, RequestResult
from tools.bench.results import percentile

DEFAULT_AGENTS = 8
DEFAULT_TURNS = 6
DEFAULT_SYSTEM_TOKENS = 4096
DEFAULT_TOOLS = 12
DEFAULT_CONNECTIONS = 2


@dataclass
class FleetOptions:
    agents: int = DEFAULT_AGENTS
    turns: int = DEFAULT_TURNS
    system_tokens: int = DEFAULT_SYSTEM_TOKENS
    """About this many tokens of system prompt per agent (calibrated as the sweep's prompts are)."""
    tools: int = DEFAULT_TOOLS
    connections_per_agent: int = DEFAULT_CONNECTIONS
    """The agent's kept connections (its HTTP pool), reused call after call."""


def tool_schemas(agent: int, count: int) -> list[dict[str, Any]]:
    """The agent's own tools, the same on every call: OpenAI's function-tool shape."""
    return [{"type": "function", "function": {
        "name": f"agent{agent}_tool{index}",
        "description": f"Tool {index} of agent {agent}: looks up a record and returns its fields as JSON.",
        "parameters": {"type": "object", "properties": {
            "record_id": {"type": "string", "description": "the record's identifier"},
            "fields": {"type": "array", "items": {"type": "string"}, "description": "which fields to return"}},
            "required": ["record_id"]}}} for index in range(count)]


def system_prompt(agent: int, words: int) -> str:
    """The agent's own long instructions: a head naming it, so no two agents share a prefix."""
    return f"[agent {agent:04d}] You are a careful assistant with tools. " + FILLER * words


def agent_messages(agent: int, turn: int, words: int) -> list[dict[str, str]]:
    """What the agent sends on its `turn`-th call: the same system prompt, then a short new question."""
    return [{"role": "system", "content": system_prompt(agent, words)},
            {"role": "user", "content": f"Step {turn}: look up record {agent}-{turn} and summarise it."}]


@dataclass
class FleetResult:
    label: str
    base_url: str
    calls: list[tuple[int, int, RequestResult]] = field(default_factory=list)
    """(agent, turn, result) of every call."""

    def _ttft_ms(self, first: bool) -> list[float]:
        return [r.ttft * 1000 for _, turn, r in self.calls if (turn == 0) == first and r.ttft is not None
                and r.error is None]

    @property
    def errors(self) -> int:
        return sum(1 for _, _, r in self.calls if r.error)

    @property
    def first_error(self) -> str | None:
        """The first failed call's reason (already one inert line: tools/bench/request.py), by agent and turn."""
        return next((r.error for _, _, r in sorted(self.calls, key=lambda call: call[:2]) if r.error), None)

    def summary(self) -> dict[str, Any]:
        first, later = self._ttft_ms(True), self._ttft_ms(False)
        return {"label": self.label, "base_url": self.base_url, "calls": len(self.calls), "errors": self.errors,
                "first_error": self.first_error,
                "first_call_median_ttft_ms": percentile(first, 0.5),
                "later_calls_median_ttft_ms": percentile(later, 0.5),
                "later_calls_p90_ttft_ms": percentile(later, 0.9)}


async def run_agent(base_url: str, api_key: str, model: str, output_tokens: int, timeout: float, agent: int,
                    words: int, options: FleetOptions) -> list[tuple[int, int, RequestResult]]:
    """One agent: its own session and kept connections, its calls one after another."""
    connector = aiohttp.TCPConnector(limit=options.connections_per_agent, force_close=False)
    async with aiohttp.ClientSession(connector=connector) as session:
        endpoint = Endpoint(session, base_url, api_key, model, output_tokens, timeout)
        tools = tool_schemas(agent, options.tools)
        calls = []
        for turn in range(options.turns):
            calls.append((agent, turn, await endpoint.request(0, agent_messages(agent, turn, words), tools)))
        return calls


async def run_fleet(label: str, base_url: str, api_key: str, model: str, output_tokens: int, timeout: float,
                    options: FleetOptions) -> FleetResult:
    async with aiohttp.ClientSession() as session:
        words = await Endpoint(session, base_url, api_key, model, output_tokens, timeout).calibrate(
            options.system_tokens)
    result = FleetResult(label, base_url)
    for calls in await asyncio.gather(*(run_agent(base_url, api_key, model, output_tokens, timeout, agent, words,
                                                  options) for agent in range(options.agents))):
        result.calls.extend(calls)
    return result


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def render(results: list[FleetResult], options: FleetOptions) -> str:
    lines = [f"agent fleet: {options.agents} agents x {options.turns} calls, each resending ~{options.system_tokens:,} "
             f"tokens of its own system prompt and {options.tools} tool schemas over {options.connections_per_agent} "
             "kept connection(s); TTFT measured here, at the client",
             f"{'endpoint':<28} {'calls':>6} {'errors':>6} {'1st call TTFT ms':>17} {'later TTFT ms':>14} "
             f"{'later p90 ms':>13}"]
    for result in results:
        s = result.summary()
        lines.append(f"{escaped(result.label):<28} {s['calls']:>6} {s['errors']:>6} "
                     f"{_ms(s['first_call_median_ttft_ms']):>17} "
                     f"{_ms(s['later_calls_median_ttft_ms']):>14} {_ms(s['later_calls_p90_ttft_ms']):>13}")
    if len(results) == 2:
        mine, other = (r.summary()["later_calls_median_ttft_ms"] for r in results)
        if mine and other:
            lines.append(f"later calls' median TTFT, {escaped(results[0].label)} / {escaped(results[1].label)}: "
                         f"{mine / other:.2f}x")
    # A failed call is said in one line per endpoint, in the server's (or the gateway's) words.
    lines += [f"{escaped(r.label)}: {r.errors} of {len(r.calls)} call(s) failed; the first: {escaped(r.first_error)}"
              for r in results if r.first_error]
    return "\n".join(lines)


def to_json(results: list[FleetResult], options: FleetOptions) -> str:
    return json.dumps({"mode": "agent-fleet", "options": options.__dict__,
                       "endpoints": [r.summary() for r in results]}, indent=2)
