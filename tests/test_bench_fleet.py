"""tools.bench's agent-fleet mode against vLLM-like fake servers on 127.0.0.1: each agent resends its own prefix
(system prompt and tool schemas) on every call over its own kept connections, and the TTFT of first and later
calls is reported per endpoint, side by side."""

from __future__ import annotations

import json

import pytest

from dev.fake_openai_server import FakeOpenAIServer, FakeTiming
from tools.bench import cli, fleet

AGENTS, TURNS, CONNECTIONS = 3, 3, 2


@pytest.fixture
def two_servers():
    servers = [FakeOpenAIServer(FakeTiming(ttft=0.005, tpot=0.001)).start_in_thread() for _ in range(2)]
    yield servers
    for server in servers:
        server.stop()


def test_each_agent_resends_its_own_prefix_and_no_one_elses():
    calls = {(agent, turn): (fleet.agent_messages(agent, turn, 50), fleet.tool_schemas(agent, 4))
             for agent in range(2) for turn in range(3)}
    for agent in range(2):
        systems = {calls[agent, turn][0][0]["content"] for turn in range(3)}
        tools = {json.dumps(calls[agent, turn][1]) for turn in range(3)}
        assert len(systems) == 1 and len(tools) == 1  # the same prefix every call
        assert len({calls[agent, turn][0][-1]["content"] for turn in range(3)}) == 3  # a new question each call
    assert calls[0, 0][0][0]["content"] != calls[1, 0][0][0]["content"]
    assert calls[0, 0][1] != calls[1, 0][1]
    assert calls[0, 0][0][0]["content"].startswith("[agent 0000] ")


def test_the_fleet_reports_ttft_per_endpoint_side_by_side(two_servers, tmp_path, capsys):
    gateway, balancer = two_servers
    out = tmp_path / "fleet.json"
    code = cli.main(["--agent-fleet", "--base-url", gateway.url, "--compare-url", balancer.url, "--api-key", "k",
                     "--agents", str(AGENTS), "--turns", str(TURNS), "--system-tokens", "64", "--tools", "2",
                     "--connections-per-agent", str(CONNECTIONS), "--output-tokens", "3", "--label", "with gateway",
                     "--compare-label", "without", "--json", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "3 agents x 3 calls" in printed and "with gateway" in printed and "without" in printed
    assert "later calls' median TTFT, with gateway / without" in printed
    endpoints = json.loads(out.read_text())["endpoints"]
    assert [(e["label"], e["calls"], e["errors"]) for e in endpoints] == [("with gateway", 9, 0), ("without", 9, 0)]
    assert all(e["first_call_median_ttft_ms"] and e["later_calls_median_ttft_ms"] for e in endpoints)
    for server in two_servers:
        assert server.chat_requests == AGENTS * TURNS
        # Kept connections: each agent reuses its pool call after call (plus the calibration's session).
        assert server.connections <= AGENTS * CONNECTIONS + 1
