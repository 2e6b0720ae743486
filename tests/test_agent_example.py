"""examples/agent.py against the vLLM-like test server: a tool call streamed as vLLM streams one, the real local
function run, its result sent back with the call's id, the final answer streamed; reasoning kept off stdout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dev.fake_openai_server import FakeOpenAIServer, FakeTiming

ROOT = Path(__file__).resolve().parent.parent
KEY_CANARY = "CANARYagentKEY0123456789abcdef"
THINKING = "The user wants a clock; I will call the tool."


@pytest.fixture
def server():
    started = FakeOpenAIServer(FakeTiming(ttft=0, tpot=0, tool_call_arguments={"zone": "Asia/Tokyo"},
                                          reasoning_text=THINKING)).start_in_thread()
    yield started
    started.stop()


def run_agent(server, *args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI_")}
    environment.update({"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": KEY_CANARY, **env})
    return subprocess.run([sys.executable, "examples/agent.py", *args], cwd=ROOT, env=environment,
                          capture_output=True, text=True, timeout=120)


def test_the_agent_calls_the_tool_sends_its_result_back_and_streams_the_answer(server):
    done = run_agent(server, "What time is it in Tokyo?")
    assert done.returncode == 0, done.stderr
    first, second = server.chat_bodies
    assert first["stream"] is True and first["tools"][0]["function"]["name"] == "current_time"
    call = second["messages"][1]["tool_calls"][0]
    result = second["messages"][2]
    assert result["role"] == "tool" and result["tool_call_id"] == call["id"]
    assert call["id"].startswith("chatcmpl-tool-") and call["function"]["arguments"] == '{"zone": "Asia/Tokyo"}'
    assert "JST" in result["content"]  # the real function ran: Tokyo's zone abbreviation
    assert done.stdout.strip() == f"The tool answered: {result['content']}"
    assert THINKING in done.stderr and THINKING not in done.stdout  # reasoning is not the answer
    assert KEY_CANARY not in done.stdout + done.stderr


def test_a_bad_zone_goes_back_to_the_model_as_the_tools_answer_not_a_crash(server):
    server.timing.tool_call_arguments = {"zone": "Mars/Olympus"}
    done = run_agent(server)
    assert done.returncode == 0, done.stderr
    assert "unknown time zone 'Mars/Olympus'" in server.chat_bodies[1]["messages"][2]["content"]


@pytest.mark.parametrize("unset", [{"OPENAI_BASE_URL": ""}, {"OPENAI_BASE_URL": "  "}, {"OPENAI_API_KEY": ""}])
def test_without_the_endpoint_it_says_what_to_export_and_never_falls_back_to_openai(server, unset):
    # An empty base URL would send the stack's key to api.openai.com: it must stop first.
    done = run_agent(server, **unset)
    assert done.returncode != 0 and f"{next(iter(unset))} is not set" in done.stderr
    assert server.chat_bodies == []
