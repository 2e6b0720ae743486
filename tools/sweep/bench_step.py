"""One arm's measurement: the pinned-host-key tunnel to its node, its health, and the cells through tools.bench."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp

from tools.bench import report
from tools.bench.request import Endpoint
from tools.bench.results import CellResult
from tools.bench.sweep import SweepOptions, sweep
from tools.sweep.sweep_file import Cells


class StepError(Exception):
    pass


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def ssh_tunnel(outputs: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """tools.tunnel's command (the stack's host key pinned) on a free local port; yields (base URL, API key)."""
    from tools import status
    from tools.tunnel import tunnel_command, write_credentials

    label = "the sweep's stack"
    remote_port = status.serving_port(outputs, label)
    host = status._required(outputs, "sshCommand", label).split()[-1].rpartition("@")[2]
    target = status.ssh_target(outputs, host, label)
    local_port = _free_port()
    with tempfile.TemporaryDirectory(prefix="tpu-vllm-sweep-") as directory:
        key_file, known_hosts = write_credentials(target, Path(directory))
        process = subprocess.Popen(tunnel_command(target, local_port, remote_port, key_file, known_hosts),
                                   stdin=subprocess.DEVNULL)
        try:
            yield f"http://127.0.0.1:{local_port}/v1", str(outputs.get("apiKey") or "")
        finally:
            process.terminate()
            process.wait(10)


def wait_healthy(base_url: str, timeout_s: float, tick: Callable[[], None], sleep: float = 2.0) -> None:
    """GET /health (vLLM's, through the front: it needs no key) until 200."""
    health = base_url.removesuffix("/v1") + "/health"
    deadline = time.monotonic() + timeout_s
    while True:
        tick()
        try:
            with urllib.request.urlopen(health, timeout=10) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise StepError(f"{health} did not answer 200 within {timeout_s:.0f} s")
        time.sleep(sleep)


def run_cells(base_url: str, api_key: str, model: str, cells: Cells, kv_tokens: int | None,
              json_path: Path, label: str) -> list[CellResult]:
    """tools.bench's sweep of the cells; its JSON (as `--json` writes it) and plot beside it."""
    options = SweepOptions(contexts=list(cells.contexts), clients=list(cells.clients), reps=cells.reps,
                           requests_per_client=cells.requests_per_client, output_tokens=cells.output_tokens)
    if kv_tokens:
        options.kv_tokens = kv_tokens

    async def measure() -> list[CellResult]:
        connector = aiohttp.TCPConnector(limit=max(options.clients) + 8)
        async with aiohttp.ClientSession(connector=connector) as session:
            endpoint = Endpoint(session, base_url, api_key, model, options.output_tokens, 600.0)
            return await sweep(endpoint, options)

    results = asyncio.run(measure())
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps({"label": label, "base_url": base_url, "model": model,
                                     "output_tokens": options.output_tokens,
                                     "cells": [cell.summary() for cell in results]}, indent=2))
    try:
        report.plot(results, json_path.with_suffix(".png"), None, label)
    except ImportError:
        pass  # matplotlib is the bench's: without it the JSON still holds every figure
    return results
