"""The example agent behind the gateway's picker (tests/flow_control_fake.py, llm-d-router v0.10.0's answers): a
request the picker held for its whole TTL and then dropped is said at once, in one line with the picker's reason,
not retried by the openai SDK (which would hold it as long again, twice); a full queue is retried as any 429 is.
Matched on the status and the picker's header, not on the body's words."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.flow_control_fake import FlowControlFake
from tests.test_scale_to_zero import replica  # noqa: F401 - the fixture: the pool's one replica, a fake vLLM

ROOT = Path(__file__).resolve().parents[1]
KEY = "CANARYgatewayKEY0123456789abcdef"


class CountingPicker(FlowControlFake):
    """The picker fake, counting the requests that reached it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.requests = 0

    def handle(self, request) -> None:
        self.requests += 1
        super().handle(request)


def run_agent(url: str, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update({"OPENAI_BASE_URL": url, "OPENAI_API_KEY": KEY})
    return subprocess.run([sys.executable, "examples/agent.py", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def test_past_the_ttl_the_agent_says_the_drop_at_once_without_the_sdks_retries(replica):  # noqa: F811
    picker = CountingPicker(replica.url, ttl_seconds=0.2, ready_after=None).start()
    try:
        done = run_agent(picker.url, "--retries", "2")  # the SDK's default count
    finally:
        picker.stop()
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("agent: the server answered HTTP 503: ")
    assert line.endswith("; no replica was ready: the gateway held it for its time-to-live, or turned it away "
                         "at once with its queue full (a pool at zero wakes in minutes: retry, with a client timeout "
                         "of the stack's scaleToZero.requestTtlSeconds or more) "
                         "(here --timeout and --turn-seconds)")
    assert picker.requests == 1  # held once, dropped once, said: not held twice more
    assert KEY not in done.stdout + done.stderr


@pytest.mark.parametrize(("serving", "status", "said", "requests"), [
    # With a replica serving, a full band is backpressure, 429 rejected-saturated, retried: refused before it
    # queued, the SDK's short backoff costs seconds, not a TTL.
    (True, 429, "; the gateway's queue is full; retry later", 2),
    # At zero (llm-d-router v0.10.0 processor.go) it is RejectedNoEndpoints before it queues, the same 503 and
    # reason as a TTL spent at zero: final, and the line does not say the request was held.
    (False, 503, "held it for its time-to-live, or turned it away at once with its queue full", 1),
])
def test_a_full_queue_is_retried_while_a_replica_serves_and_said_at_once_at_zero(
        replica, serving, status, said, requests):  # noqa: F811
    picker = CountingPicker(replica.url, ttl_seconds=5, ready_after=None, max_requests=0).start()
    if serving:
        picker.ready.set()
    try:
        done = run_agent(picker.url, "--retries", "1")
    finally:
        picker.stop()
    [line] = done.stderr.strip().splitlines()
    assert done.returncode == 1 and line.startswith(f"agent: the server answered HTTP {status}: ")
    assert said in line
    assert picker.requests == requests
