"""examples/agent.py against the vLLM-like test server: a tool call streamed as vLLM streams one, the real local
function run, its result sent back with the call's id, the final answer streamed; reasoning kept off stdout.

Then against servers that attack their client (dev/fake_openai_server.py HOSTILE_ANSWERS, each a real HTTP server
on 127.0.0.1): whatever the server sends, the agent prints no terminal control sequence and ends, either with an
answer or with one line on stderr saying what went wrong and exit status 1, never a traceback."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from components.settings.text import unprintable
from dev.fake_openai_server import ESCAPES, FakeOpenAIServer, FakeTiming

ROOT = Path(__file__).resolve().parent.parent
KEY_CANARY = "CANARYagentKEY0123456789abcdef"
THINKING = "The user wants a clock; I will call the tool."
# What a terminal obeys, as UTF-8 bytes: C0 but tab and newline (ESC, BEL, CR, BS, NUL...), DEL, and C1.
TERMINAL_CONTROL = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]")


@pytest.fixture
def server():
    started = FakeOpenAIServer(FakeTiming(ttft=0, tpot=0, tool_call_arguments={"zone": "Asia/Tokyo"},
                                          reasoning_text=THINKING)).start_in_thread()
    yield started
    started.stop()


@pytest.fixture
def serve():
    """serve(**FakeTiming fields): a started fake server, stopped after the test."""
    started: list[FakeOpenAIServer] = []

    def start(**timing: object) -> FakeOpenAIServer:
        started.append(FakeOpenAIServer(FakeTiming(ttft=0, tpot=0, **timing)).start_in_thread())
        return started[-1]

    yield start
    for each in started:
        each.stop()


# Each run is a process of its own, running examples/agent.py as `python examples/agent.py ARGS` does (runpy as
# __main__, its argv, its environment, its stdout and stderr, its exit status), forked from one parent per test
# worker that has already imported the openai SDK: a fresh interpreter spends ~1 s of CPU on that import, which
# thirty runs would pay thirty times. The parent reads one request a line and answers the run's exit status.
FORKING_PARENT = r"""
import json, os, runpy, signal, sys, time, traceback
import openai.types.chat  # what every run imports
for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
        sys.argv = request["argv"]
        code = 0
        try:
            runpy.run_path(sys.argv[0], run_name="__main__")
        except SystemExit as exit:  # as the interpreter ends on one
            code = exit.code if isinstance(exit.code, int) or exit.code is None else 1
            if not isinstance(exit.code, int) and exit.code is not None:
                print(exit.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code or 0)
    end = time.monotonic() + request["timeout"]
    while not (ended := os.waitpid(pid, os.WNOHANG))[0] and time.monotonic() < end:
        time.sleep(0.01)
    if not ended[0]:  # timed out
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    print(json.dumps(os.waitstatus_to_exitcode(ended[1]) if ended[0] else None), flush=True)
"""


@pytest.fixture(scope="module")
def forking_parent():
    parent = subprocess.Popen([sys.executable, "-c", FORKING_PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              cwd=ROOT, text=True)
    yield parent
    parent.stdin.close()
    parent.wait(10)


@pytest.fixture
def run_agent(forking_parent, tmp_path):
    """run_agent(server, *args, url=, **env): the agent as a user runs it. stdout and stderr as the bytes it wrote
    (text mode would turn a CR into a newline), checked for control bytes, then decoded."""
    def run(server, *args: str, url: str | None = None, **env: str) -> subprocess.CompletedProcess:
        environment = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI_")}
        environment.update({"OPENAI_BASE_URL": url or server.url, "OPENAI_API_KEY": KEY_CANARY, **env})
        argv = ["examples/agent.py", *args]
        out, err = tmp_path / "stdout", tmp_path / "stderr"
        request = {"argv": argv, "env": environment, "cwd": str(ROOT), "stdout": str(out), "stderr": str(err),
                   "timeout": 60}
        forking_parent.stdin.write(json.dumps(request) + "\n")
        forking_parent.stdin.flush()
        returncode = json.loads(forking_parent.stdout.readline())
        if returncode is None:
            raise subprocess.TimeoutExpired(argv, 60)
        stdout, stderr = out.read_bytes(), err.read_bytes()
        for stream in (stdout, stderr):
            assert not TERMINAL_CONTROL.search(stream), stream[-2000:]
            # Nor a format character (bidi overrides, zero-width), a separator or a surrogate: no C0/C1 byte,
            # yet the terminal shows the text reordered or hidden.
            assert unprintable(stream.decode(errors="replace").replace("\n", "").replace("\t", "")) is None, stream
        return subprocess.CompletedProcess(argv, returncode, stdout.decode(), stderr.decode())
    return run


def the_one_line(done: subprocess.CompletedProcess) -> str:
    """The failure's line: exit status 1, no traceback, and stderr's last line the only one the agent wrote."""
    assert done.returncode == 1, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    said = [line for line in done.stderr.splitlines() if line.startswith("agent: ")]
    assert len(said) == 1 and done.stderr.splitlines()[-1] == said[0], done.stderr[-2000:]
    assert KEY_CANARY not in done.stdout + done.stderr
    return said[0]


def test_the_agent_calls_the_tool_sends_its_result_back_and_streams_the_answer(server, run_agent):
    done = run_agent(server, "What time is it in Tokyo?")
    assert done.returncode == 0, done.stderr
    first, second = server.chat_bodies
    assert first["stream"] is True and first["tools"][0]["function"]["name"] == "current_time"
    assert first["max_completion_tokens"] == 2048  # a bound on each turn the server honours
    call = second["messages"][1]["tool_calls"][0]
    result = second["messages"][2]
    assert result["role"] == "tool" and result["tool_call_id"] == call["id"]
    assert call["id"].startswith("chatcmpl-tool-") and call["function"]["arguments"] == '{"zone": "Asia/Tokyo"}'
    assert "JST" in result["content"]  # the real function ran: Tokyo's zone abbreviation
    assert done.stdout.strip() == f"The tool answered: {result['content']}"
    assert THINKING in done.stderr and THINKING not in done.stdout  # reasoning is not the answer
    assert KEY_CANARY not in done.stdout + done.stderr


def test_a_bad_zone_goes_back_to_the_model_as_the_tools_answer_not_a_crash(server, run_agent):
    server.timing.tool_call_arguments = {"zone": "Mars/Olympus"}
    done = run_agent(server)
    assert done.returncode == 0, done.stderr
    assert "unknown time zone 'Mars/Olympus'" in server.chat_bodies[1]["messages"][2]["content"]


@pytest.mark.parametrize(("arguments", "told"), [
    ({"zone": "America"}, "unknown time zone 'America'"),  # a directory of the tz database: IsADirectoryError
    ({"zone": "A" * 300}, "unknown time zone 'AAAA"),  # a file name too long: OSError
    ("[" * 5000, "not JSON (RecursionError)"),  # nested past the parser's recursion limit
])
def test_what_the_tool_raises_goes_back_to_the_model_as_its_answer(serve, arguments, told, run_agent):
    server = serve(tool_call_arguments=arguments)
    done = run_agent(server)
    assert done.returncode == 0, done.stderr
    assert told in server.chat_bodies[1]["messages"][2]["content"]
    assert "Traceback" not in done.stderr


def test_the_servers_terminal_control_sequences_never_reach_the_terminal(serve, run_agent):
    server = serve(hostile="escapes")
    done = run_agent(server)  # run_agent refuses any control byte on either stream
    assert done.returncode == 0, done.stderr
    assert "calling" in done.stdout and "answer" in done.stdout and "thinking" in done.stderr
    tool_lines = [line for line in done.stderr.splitlines() if line.startswith("[tool] ")]
    assert len(tool_lines) == 2 and "current_time(" in tool_lines[0] and "clock(" in tool_lines[1]
    # The model still gets the text as it was sent: only the terminal is spared it.
    assert server.chat_bodies[1]["messages"][1]["tool_calls"][1]["function"]["arguments"] == ESCAPES


def test_a_character_no_encoding_can_print_is_shown_escaped_not_a_crash(serve, run_agent):
    done = run_agent(serve(hostile="surrogate"))
    assert done.returncode == 0 and done.stdout == "lone \\ud800 half\n", done.stderr


def test_bidi_overrides_and_invisible_characters_are_shown_as_their_escapes(serve, run_agent):
    # components/settings/text.py, the project's one sanitizer: what reorders or hides text is written escaped.
    done = run_agent(serve(hostile="bidi"))  # run_agent refuses any format character on either stream
    assert done.returncode == 0, done.stderr
    assert done.stdout == "run \\u202etxt.exe\\u202c \\u2066x\\u2069\\u200b\\u2028end\n"


@pytest.mark.parametrize("attack", ["endless", "trickle", "retry_later"])
def test_a_reply_that_never_completes_ends_at_the_turns_deadline(serve, attack, run_agent):
    # endless: events forever; trickle: one event that never ends, a byte at a time, so no read times out;
    # retry_later: a 503 asking for a 120 s wait, which the SDK would sleep through.
    server = serve(hostile=attack)
    line = the_one_line(run_agent(server, "--turn-seconds", "0.5"))
    assert "no complete reply within 0.5 s" in line


def test_a_silent_server_times_out_after_the_bounded_retries(serve, run_agent):
    server = serve(hostile="silent")
    line = the_one_line(run_agent(server, "--timeout", "0.3", "--retries", "1"))
    assert f"the server at {server.url} sent nothing for 0.3 s" in line
    # The request and one retry. The server's thread may read the retry after the agent has gone (it got no
    # answer to wait for), so the count is awaited, not read at once.
    for _ in range(500):
        if server.chat_requests >= 2:
            break
        time.sleep(0.01)
    assert server.chat_requests == 2


@pytest.mark.parametrize(("attack", "said"), [
    ("flood", "more than 200000 characters in one turn (max_completion_tokens is 2048)"),
    ("huge_arguments", "a tool call longer than 16384 characters"),
    ("many_calls", "more than 8 calls in one turn"),
])
def test_a_runaway_reply_is_stopped_at_its_cap(serve, attack, said, run_agent):
    server = serve(hostile=attack)
    line = the_one_line(run_agent(server))
    assert line.startswith("agent: stopped a runaway reply: ") and said in line
    assert server.chat_requests == 1  # no tool ran, nothing was sent back


@pytest.mark.parametrize(("attack", "said"), [
    ("index_null", "a tool call's index is null"),
    ("arguments_object", "arguments is an object"),
    ("delta_null", "choices[0].delta is null"),
    ("not_json", "an event that is not JSON"),
    ("not_utf8", "an event that is not UTF-8"),
    ("not_an_object", "an event is a number"),
])
def test_a_malformed_reply_is_one_clear_line(serve, attack, said, run_agent):
    line = the_one_line(run_agent(serve(hostile=attack)))
    assert line == f"agent: the server sent a malformed reply: {said}"


def test_a_wrong_key_is_one_line_that_says_which_setting_to_check(serve, run_agent):
    line = the_one_line(run_agent(serve(fail_every=1, fail_status=401)))
    assert line == ("agent: the server answered HTTP 401: missing or wrong API key: send Authorization: Bearer <key>;"
                    " check OPENAI_API_KEY (the stack's apiKey output)")


def test_a_servers_error_message_is_shown_short_and_without_control_sequences(serve, run_agent):
    server = serve(fail_every=1, fail_status=400, fail_message=f"bad{ESCAPES}request " + "x" * 100_000)
    line = the_one_line(run_agent(server))
    assert line.startswith("agent: the server answered HTTP 400: bad\\x1b]0;owned\\x07") and len(line) < 400
    assert "request xxx" in line


def test_a_server_error_is_retried_a_bounded_number_of_times_then_said(serve, run_agent):
    server = serve(fail_every=1, fail_status=500)
    line = the_one_line(run_agent(server, "--retries", "1"))
    assert line == "agent: the server answered HTTP 500: injected failure" and server.chat_requests == 2


@pytest.mark.parametrize(("fault", "said"), [
    ({"error_event_every": 1}, "the server reported an error: The model ran out of KV cache"),
    ({"reset_every": 1}, "the connection to"),
])
def test_a_stream_that_fails_midway_is_one_clear_line(serve, fault, said, run_agent):
    line = the_one_line(run_agent(serve(cut_after=1, **fault)))
    assert said in line


def test_a_closed_tunnel_is_one_clear_line(serve, run_agent):
    # Nothing listening (the tunnel is down), and a listener that hangs up at once (an SSH tunnel up, with
    # nothing listening at its far end).
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    for url in (closed, serve(hostile="hang_up").url):
        line = the_one_line(run_agent(None, "--retries", "0", url=url))
        assert line.startswith(f"agent: the connection to {url} failed: ") and line.endswith("is the tunnel open?")


@pytest.mark.parametrize(("pulumi", "said"), [
    (None, "agent: --stack needs the Pulumi CLI (pulumi) on PATH"),
    ("echo \"error: no stack named 'dev' found\" >&2; exit 255",
     "agent: pulumi stack output --stack dev failed: error: no stack named 'dev' found"),
    ("echo '{}'", "agent: stack dev has no localEndpoint and apiKey outputs: is it deployed (pulumi up)?"),
])
def test_a_stack_whose_outputs_cannot_be_read_is_one_clear_line(serve, tmp_path, pulumi, said, run_agent):
    if pulumi:
        (tmp_path / "pulumi").write_text(f"#!/bin/sh\n{pulumi}\n")
        (tmp_path / "pulumi").chmod(0o755)
    line = the_one_line(run_agent(serve(), "--stack", "dev", PATH=str(tmp_path)))
    assert line.startswith(said)


def test_a_stacks_outputs_are_the_endpoint(server, tmp_path, run_agent):
    outputs = json.dumps({"localEndpoint": server.url, "apiKey": KEY_CANARY})
    (tmp_path / "pulumi").write_text(f"#!/bin/sh\necho '{outputs}'\n")
    (tmp_path / "pulumi").chmod(0o755)
    done = run_agent(server, "--stack", "dev", url="http://127.0.0.1:9/v1", PATH=str(tmp_path))
    assert done.returncode == 0 and "The tool answered" in done.stdout, done.stderr
    assert server.last_headers["authorization"] == f"Bearer {KEY_CANARY}"
    assert KEY_CANARY not in done.stdout + done.stderr


@pytest.mark.parametrize("url", ["127.0.0.1:8000/v1", "http://[::1/v1", "http://127.0.0.1:8000:1/v1",
                                 "http://127.0.0.1:8000/v1\x1b]0;owned\x07"])
def test_a_base_url_the_sdk_cannot_use_is_refused_before_any_request(server, url, run_agent):
    line = the_one_line(run_agent(server, url=url))
    assert line.startswith("agent: OPENAI_BASE_URL '") and line.endswith(
        "' is not an http(s) URL: use the tunnel's, such as http://127.0.0.1:8000/v1")
    assert server.chat_bodies == []


@pytest.mark.parametrize("unset", [{"OPENAI_BASE_URL": ""}, {"OPENAI_BASE_URL": "  "}, {"OPENAI_API_KEY": ""}])
def test_without_the_endpoint_it_says_what_to_export_and_never_falls_back_to_openai(server, unset, run_agent):
    # An empty base URL would send the stack's key to api.openai.com: it must stop first.
    done = run_agent(server, **unset)
    assert done.returncode != 0 and f"{next(iter(unset))} is not set" in done.stderr
    assert server.chat_bodies == []


def _agent_process(server, **popen) -> subprocess.Popen:
    """The agent as `python examples/agent.py` in a process of its own (a signal or a closed pipe needs one)."""
    # Without PYTHONUNBUFFERED (some shells set it): a user's stdout to a pipe is block-buffered.
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith("OPENAI_") and key != "PYTHONUNBUFFERED"}
    environment.update({"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": KEY_CANARY})
    return subprocess.Popen([sys.executable, "examples/agent.py", "--timeout", "30"], cwd=ROOT, env=environment,
                            stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, **popen)


def test_ctrl_c_while_waiting_is_one_line_and_the_shells_status(serve):
    server = serve(hostile="silent")
    agent = _agent_process(server, stdout=subprocess.PIPE)
    try:
        for _ in range(3000):  # until the request is in, so the signal lands while the SDK waits
            if server.chat_requests or agent.poll() is not None:
                break
            time.sleep(0.01)
        assert server.chat_requests, agent.stderr.read() if agent.poll() is not None else "no request"
        agent.send_signal(signal.SIGINT)
        _, stderr = agent.communicate(timeout=30)
    finally:
        agent.kill()
    assert agent.returncode == 130, stderr
    assert b"Traceback" not in stderr and stderr.strip().splitlines()[-1] == b"agent: interrupted", stderr


def test_a_reader_that_goes_away_ends_the_agent_without_a_traceback(server):
    read_end, write_end = os.pipe()
    os.close(read_end)  # `| head -c 0`: nobody reads what the agent prints
    try:
        agent = _agent_process(server, stdout=write_end)
    finally:
        os.close(write_end)
    _, stderr = agent.communicate(timeout=60)
    assert agent.returncode == 1, stderr  # not 120: the interpreter's own flush at exit found nothing left to write
    assert b"Traceback" not in stderr and b"BrokenPipeError" not in stderr, stderr
    assert b"Exception ignored" not in stderr, stderr


def test_a_2_gib_error_body_is_read_to_its_cap_and_said_in_one_line(serve, run_agent):
    # Read whole (the SDK's err.response.read()), the body would fill memory before any deadline.
    line = the_one_line(run_agent(serve(hostile="huge_error"), "--retries", "0", "--turn-seconds", "30"))
    assert line.startswith("agent: the server answered HTTP 503: \\x1b]0;owned\\x07xxxx") and len(line) < 400


@pytest.mark.parametrize(("hostile", "said"), [
    ("gzip_error", "agent: the server answered HTTP 400: (a body in Content-Encoding gzip, which the agent did not "
                   "ask for: not read)"),
    ("gzip_stream", "agent: the server sent a malformed reply: a reply in Content-Encoding gzip, though the agent "
                    "asked for identity"),
])
def test_a_compressed_answer_the_agent_did_not_ask_for_is_not_decoded(serve, run_agent, hostile, said):
    # httpx2 decodes after the hook's byte caps (_models.py _get_content_decoder): a 64 KB gzip body is 64 MiB.
    line = the_one_line(run_agent(serve(hostile=hostile), "--retries", "0", "--turn-seconds", "30"))
    assert line.startswith(said), line


def test_a_stream_that_goes_on_after_done_is_not_read_on(serve, run_agent):
    done = run_agent(serve(hostile="after_done"), "--turn-seconds", "30")
    assert done.returncode == 0 and done.stdout == "x\n", done.stderr


def test_a_stream_past_its_byte_cap_is_a_runaway_reply(serve, run_agent):
    # Comment lines forever: no text to count, only bytes (the SDK's decoder has no cap of its own).
    line = the_one_line(run_agent(serve(hostile="comments"), "--turn-seconds", "60"))
    assert line.startswith("agent: stopped a runaway reply: a stream of more than 1600000 bytes in one turn")
