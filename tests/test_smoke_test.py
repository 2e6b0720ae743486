"""startup/smoke_test.py as serve.sh runs it (python3, its flags), against the fake front and the fake vLLM."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from components import settings
from components.vm import serving_step
from tests.fakes.vllm import FakeFront, FakeVllm
from tests.wing_values import vm_serving

SCRIPT = Path(__file__).resolve().parent.parent / "startup" / "smoke_test.py"
KEY = "CANARYsmokeKEY0123456789abcdefghijklmnopqrs"
MODEL = "google/gemma-4-E2B-it"


@pytest.fixture
def servers():
    started: list[FakeVllm] = []

    def start(no_front: bool = False, vllm_key: str | None = KEY, **front_options):
        # no_front: vLLM itself on the serving port, as if the front were missing.
        front = (FakeVllm if no_front else FakeFront)(KEY, MODEL, **front_options).__enter__()
        vllm = FakeVllm(vllm_key, MODEL).__enter__()
        started.extend([front, vllm])
        return front, vllm

    yield start
    for server in started:
        server.__exit__(None, None, None)


def smoke(tmp_path: Path, front: FakeVllm | str, vllm: FakeVllm | str, key: str | None = KEY,
          model: str = MODEL) -> subprocess.CompletedProcess:
    key_file = tmp_path / "api-key"
    if key is not None:
        key_file.write_text(key + "\n")
    urls = [server if isinstance(server, str) else server.url for server in (front, vllm)]
    return subprocess.run([sys.executable, str(SCRIPT), "--front-url", urls[0], "--vllm-url", urls[1],
                           "--model", model, "--api-key-file", str(key_file)],
                          capture_output=True, text=True, timeout=120)


def test_a_healthy_node_passes_every_check_in_order_and_the_key_stays_in_its_header(tmp_path, servers):
    front, vllm = servers()
    result = smoke(tmp_path, front, vllm)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "[tpu-vllm] refused without the key: /invocations and /v1/models at the front, /v1/models at vLLM itself",
        "[tpu-vllm] chat ok: Hi there, lovely to meet you.",
        '[tpu-vllm] tool call ok: get_weather({"city": "Paris"})',
    ]
    assert [(r.method, r.path, "Authorization" in r.headers) for r in front.requests] == [
        ("POST", "/invocations", False), ("GET", "/v1/models", False), ("GET", "/v1/models", True),
        ("POST", "/v1/chat/completions", True), ("POST", "/v1/chat/completions", True)]
    assert [(r.method, r.path, "Authorization" in r.headers) for r in vllm.requests] == [
        ("GET", "/v1/models", False)]
    chat, tools = (r.json() for r in front.requests[3:])
    assert chat["model"] == MODEL and "tools" not in chat
    assert tools["tools"][0]["function"]["name"] == "get_weather" and tools["tool_choice"] == "auto"
    assert KEY not in result.stdout + result.stderr


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
def test_a_reply_that_is_only_reasoning_counts_as_a_chat(tmp_path, servers, field):
    front, vllm = servers(reply_field=field)
    result = smoke(tmp_path, front, vllm)
    assert result.returncode == 0, result.stderr
    assert "[tpu-vllm] chat ok: Hi there" in result.stdout


@pytest.mark.parametrize(("options", "message"), [
    # vLLM's key guards /v1 but not /invocations, which chats for anyone.
    ({"no_front": True}, "the front's /invocations answered 200 without the API key; expected 401"),
    ({"vllm_key": None}, "vLLM's own /v1/models on 127.0.0.1:"),
    ({"tool_calls_work": False}, "no get_weather tool call came back"),
])
def test_each_failed_check_fails_with_its_reason(tmp_path, servers, options, message):
    front, vllm = servers(**options)
    result = smoke(tmp_path, front, vllm)
    assert result.returncode == 1
    assert message in result.stderr and result.stderr.startswith("[tpu-vllm] FAILED: ")


def test_a_reasoning_model_thinking_past_256_tokens_still_calls_the_tool(tmp_path, servers):
    # Qwen3 thinks first by default; the old 256-token limit cut it off before the call.
    front, vllm = servers(thinking_tokens=600)
    result = smoke(tmp_path, front, vllm)
    assert result.returncode == 0, result.stderr
    assert front.requests[-1].json()["max_tokens"] == 1024


def test_a_tool_call_cut_off_by_max_tokens_says_so(tmp_path, servers):
    front, vllm = servers(thinking_tokens=5000)
    result = smoke(tmp_path, front, vllm)
    assert result.returncode == 1
    assert "used all 1024 of its max_tokens (finish_reason length" in result.stderr


def test_a_missing_tool_call_that_was_not_cut_off_names_its_finish_reason(tmp_path, servers):
    front, vllm = servers(tool_calls_work=False, thinking_tokens=10)
    result = smoke(tmp_path, front, vllm)
    assert result.returncode == 1
    assert "no get_weather tool call came back (finish_reason stop;" in result.stderr
    assert "max_tokens" not in result.stderr


def test_a_model_the_server_does_not_list_fails(tmp_path, servers):
    front, vllm = servers()
    result = smoke(tmp_path, front, vllm, model="google/other")
    assert result.returncode == 1
    assert "/v1/models does not list google/other" in result.stderr


def test_a_front_that_does_not_answer_is_reported_as_000(tmp_path, servers):
    _, vllm = servers()
    result = smoke(tmp_path, "http://127.0.0.1:9", vllm)
    assert result.returncode == 1
    assert "the front's /invocations answered 000 without the API key; expected 401" in result.stderr


def test_the_wrong_key_is_a_failed_models_check(tmp_path, servers):
    front, vllm = servers()
    result = smoke(tmp_path, front, vllm, key="wrong")
    assert result.returncode == 1
    assert "/v1/models answered 401" in result.stderr


@pytest.mark.parametrize("content", [None, ""])
def test_a_missing_or_empty_key_file_fails_before_any_request(tmp_path, servers, content):
    front, vllm = servers()
    if content is not None:
        (tmp_path / "api-key").write_text(content)
    result = smoke(tmp_path, front, vllm, key=None)
    assert result.returncode == 1
    assert "the API key file" in result.stderr
    assert front.requests == [] and vllm.requests == []


def test_serve_sh_is_sent_this_program_and_told_where_it_is():
    cfg = settings.load({"access": {"sshSourceRanges": ["198.51.100.7/32"]}}, "my-proj", "dev").settings
    assert (serving_step.SMOKE_TEST_FILE, SCRIPT.read_text()) in serving_step.installed_files(vm_serving(cfg))
    assert f"--smoke-test {serving_step.SMOKE_TEST_FILE} " in serving_step.remote_command_text(vm_serving(cfg))
