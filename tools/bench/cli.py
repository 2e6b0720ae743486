"""Reproduce the build log's 12-cell sweep against an OpenAI-compatible endpoint.

    python -m tools.bench                          # this stack's endpoint, through the SSH tunnel
    python -m tools.bench --base-url http://127.0.0.1:8000/v1 --api-key ... --json out.json
    python -m tools.bench --json b.json --compare a.json    # one configuration beside another
    python -m tools.bench --agent-fleet --base-url http://GATEWAY/v1 --compare-url http://ILB:8000/v1
                                                            # agents resending their prefixes, TTFT side by side

Streaming /v1/chat/completions with prompts of an exact token length (calibrated with the server's
/tokenize, or its reported usage), a fixed output length, a warm-up, and requests drawn from one queue at
each concurrency. Ends with the build log's table beside the measured one, each ratio judged against the
log's coefficient of variation; writes a PNG plot beside the JSON (else under bench-results/).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import aiohttp

from components.settings.text import escaped, one_line
from tools.bench import fleet, reference, report
from tools.bench.request import CalibrationError, Endpoint
from tools.bench.results import CellResult
from tools.bench.sweep import DEFAULT_OUTPUT_TOKENS, DEFAULT_REQUESTS_PER_CLIENT, SweepOptions, default_kv_tokens, sweep

DEFAULT_CONTEXTS = list(reference.CONTEXTS)
DEFAULT_CLIENTS = list(reference.CLIENTS)
DEFAULT_REPS = 3
DEFAULT_MODEL = "google/gemma-4-E2B-it"
DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"
DEFAULT_TIMEOUT = 600.0
# Without --json the plot goes here, a folder .gitignore keeps out of the repository.
DEFAULT_PLOT = Path("bench-results") / "bench.png"


def _stack_output(name: str, secret: bool = False) -> str | None:
    if shutil.which("pulumi") is None:
        return None
    command = ["pulumi", "stack", "output", name] + (["--show-secrets"] if secret else [])
    try:
        completed = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return completed.stdout.strip() or None if completed.returncode == 0 else None


def _csv(values: list[int]) -> str:
    return ",".join(str(value) for value in values)


def _ints(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: use comma-separated whole numbers, e.g. 1,4,16") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: use positive whole numbers, e.g. 1,4,16")
    return values


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: use a whole number of at least 1")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: use a number of seconds above 0, e.g. 600")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.bench", description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--base-url", help=f"the endpoint (default: the stack's localEndpoint output, the SSH tunnel; "
                           f"else {DEFAULT_BASE_URL})")
    add("--api-key", help="bearer key (default: $OPENAI_API_KEY, else the stack's apiKey output)")
    add("--model", default=DEFAULT_MODEL, help=f"served model name (default: {DEFAULT_MODEL})")
    add("--contexts", type=_ints, default=DEFAULT_CONTEXTS, metavar="N,N,...",
        help=f"prompt lengths in tokens (default: {_csv(DEFAULT_CONTEXTS)}, the log's)")
    add("--clients", type=_ints, default=DEFAULT_CLIENTS, metavar="N,N,...",
        help=f"concurrent requests (default: {_csv(DEFAULT_CLIENTS)}, the log's)")
    add("--reps", type=_positive_int, default=DEFAULT_REPS,
        help=f"repetitions of each cell (default: {DEFAULT_REPS}, the log's)")
    add("--requests-per-client", type=_positive_int, default=DEFAULT_REQUESTS_PER_CLIENT, metavar="N",
        help="each repetition sends clients x N requests, drawn from one queue "
             f"(default: {DEFAULT_REQUESTS_PER_CLIENT})")
    add("--output-tokens", type=_positive_int, default=DEFAULT_OUTPUT_TOKENS, metavar="N",
        help=f"tokens each reply is held to, with min_tokens and ignore_eos (default: {DEFAULT_OUTPUT_TOKENS})")
    add("--timeout", type=_positive_float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
        help=f"per request (default: {DEFAULT_TIMEOUT:g})")
    add("--kv-tokens", type=_positive_int, default=None, metavar="N",
        help=f"the KV pool, for the over-pool warning (default: {default_kv_tokens():,}, the log's configuration)")
    add("--skip-over-kv", action="store_true",
        help="skip cells whose clients x (context + output) exceed the KV pool (default: off; they run with a "
             "warning, as the log measured its 8192 x 64 cell)")
    add("--no-warmup", action="store_true", help="no warm-up request per context (default: off, one is sent)")
    add("--json", type=Path, metavar="FILE", help="write every cell to this file (default: none)")
    add("--label", help="this run's name in comparisons (default: the --json file's name, else 'this run')")
    add("--compare", type=Path, metavar="OTHER.json",
        help="print and plot this run beside another run's --json file (default: none)")
    add("--plot", type=Path, metavar="FILE.png",
        help=f"PNG plot (default: beside --json with a .png suffix, else {DEFAULT_PLOT})")
    add("--no-plot", action="store_true", help="write no plot (default: off)")
    add("--quiet", action="store_true", help="no progress bar (default: off, one on stderr)")
    agents = parser.add_argument_group("agent fleet (--agent-fleet): tools/bench/fleet.py")
    agents.add_argument("--agent-fleet", action="store_true",
                        help="instead of the sweep: agents that each resend their own long system prompt and tool "
                             "schemas over kept connections; reports TTFT on first and later calls (default: off)")
    agents.add_argument("--agents", type=_positive_int, default=fleet.DEFAULT_AGENTS,
                        help=f"agents at once (default: {fleet.DEFAULT_AGENTS})")
    agents.add_argument("--turns", type=_positive_int, default=fleet.DEFAULT_TURNS,
                        help=f"calls per agent, one after another (default: {fleet.DEFAULT_TURNS})")
    agents.add_argument("--system-tokens", type=_positive_int, default=fleet.DEFAULT_SYSTEM_TOKENS, metavar="N",
                        help=f"each agent's system prompt, in tokens (default: {fleet.DEFAULT_SYSTEM_TOKENS})")
    agents.add_argument("--tools", type=_positive_int, default=fleet.DEFAULT_TOOLS, metavar="N",
                        help=f"tool schemas each agent sends on every call (default: {fleet.DEFAULT_TOOLS})")
    agents.add_argument("--connections-per-agent", type=_positive_int, default=fleet.DEFAULT_CONNECTIONS,
                        metavar="N", help=f"each agent's kept connections (default: {fleet.DEFAULT_CONNECTIONS})")
    agents.add_argument("--compare-url", metavar="URL",
                        help="a second endpoint for the same fleet, e.g. the passthrough load balancer's beside the "
                             "gateway's (default: none)")
    agents.add_argument("--compare-label", default="compared endpoint",
                        help="its name in the table (default: 'compared endpoint')")
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    if args.no_plot:
        args.plot = None
    elif args.plot is None:
        args.plot = args.json.with_suffix(".png") if args.json else DEFAULT_PLOT
    args.label = args.label or (args.json.stem if args.json else "this run")
    return args


async def _run(args: argparse.Namespace) -> list[CellResult]:
    from tqdm import tqdm

    options = SweepOptions(contexts=args.contexts, clients=args.clients, reps=args.reps,
                           requests_per_client=args.requests_per_client, output_tokens=args.output_tokens,
                           skip_over_kv=args.skip_over_kv, warmup=not args.no_warmup)
    if args.kv_tokens:
        options.kv_tokens = args.kv_tokens
    total = len(options.contexts) * sum(options.clients) * options.reps * options.requests_per_client
    connector = aiohttp.TCPConnector(limit=max(options.clients) + 8)
    async with aiohttp.ClientSession(connector=connector) as session:
        endpoint = Endpoint(session, args.base_url, args.api_key, args.model, args.output_tokens, args.timeout)
        with tqdm(total=total, unit="req", disable=args.quiet, file=sys.stderr) as progress:
            return await sweep(endpoint, options, progress, warn=lambda text: tqdm.write(text, file=sys.stderr))


def fleet_main(args: argparse.Namespace) -> int:
    options = fleet.FleetOptions(agents=args.agents, turns=args.turns, system_tokens=args.system_tokens,
                                 tools=args.tools, connections_per_agent=args.connections_per_agent)
    endpoints = [(args.label, args.base_url)] + ([(args.compare_label, args.compare_url)] if args.compare_url else [])
    results = []
    for label, url in endpoints:  # one after the other: the two fleets must not load each other's replicas
        try:
            results.append(asyncio.run(fleet.run_fleet(label, url, args.api_key, args.model, args.output_tokens,
                                                       args.timeout, options)))
        except CalibrationError as error:
            print(f"error: {escaped(url)} refused the requests that size the prompts: {error}"
                  + ("" if error.dropped else ". Check --api-key and --model."), file=sys.stderr)
            return 2
        except (aiohttp.ClientError, TimeoutError) as error:
            print(f"error: could not reach {escaped(url)}: {one_line(f'{error.__class__.__name__}: {error}')}",
                  file=sys.stderr)
            return 2
    print(fleet.render(results, options))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(fleet.to_json(results, options))
    return 1 if any(result.errors for result in results) else 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.agent_fleet:
        args.base_url = args.base_url or _stack_output("localEndpoint") or DEFAULT_BASE_URL
        args.api_key = args.api_key or os.environ.get("OPENAI_API_KEY") or _stack_output("apiKey", secret=True) or ""
        return fleet_main(args)
    compare = None
    if args.compare:
        try:
            compare = report.load_run(args.compare)
        except report.CompareFileError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    args.base_url = args.base_url or _stack_output("localEndpoint") or DEFAULT_BASE_URL
    args.api_key = args.api_key or os.environ.get("OPENAI_API_KEY") or _stack_output("apiKey", secret=True) or ""
    try:
        cells = asyncio.run(_run(args))
    except CalibrationError as error:
        print(f"error: {escaped(args.base_url)} refused the requests that size the prompts: {error}"
              + ("" if error.dropped else ". Check --api-key (or $OPENAI_API_KEY) and --model."), file=sys.stderr)
        return 2
    except (aiohttp.ClientError, TimeoutError) as error:
        print(f"error: could not reach {escaped(args.base_url)}: {one_line(f'{error.__class__.__name__}: {error}')}."
              " Is the SSH tunnel open ($(pulumi stack output sshTunnelCommand))?", file=sys.stderr)
        return 2
    print(report.render(cells, compare, args.label))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"label": args.label, "base_url": args.base_url, "model": args.model,
                                         "output_tokens": args.output_tokens,
                                         "cells": [c.summary() for c in cells]}, indent=2))
    if args.plot:
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        report.plot(cells, args.plot, compare, args.label)
        print(f"\nplot: {args.plot}")
    return 1 if any(c.status == "error" for c in cells) else 0
