"""The bench beside `vllm bench serve`, reading the same paced server in alternating runs.

One fake server (dev.fake_openai_server: one token per chunk at --tpot after --ttft, vLLM's JSON) runs
pinned to one CPU; each round runs this project's client and then `vllm bench serve` pinned to the other,
with the same shape (--clients concurrent, --prompts requests from one queue, --output-tokens each, ignore
EOS). Each run's output throughput, median TTFT, TPOT and ITL are printed beside the expected figures and
the server's own record of that run, then min / median / max per tool. A benchmark, not a test: the machine
decides the numbers, so they are reported, never asserted.

`vllm bench serve` needs vLLM installed as a library (on CPU it is) and a tokenizer: a small word-level one
is built in a temporary folder with the `tokenizers` package of vLLM's own venv.

    python -m dev.bench_side_by_side --vllm /path/to/venv/bin/vllm [--rounds 3] [--clients 64] [--tpot 0.01]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from dev.bench_client_ceiling import expected_rate, machine, pinned_to, pinning, start_server
from tools.bench.request import Endpoint
from tools.bench.sweep import run_rep

SERVER_METRICS = ("output_throughput", "median_ttft_ms", "median_tpot_ms", "median_itl_ms")
METRICS = (*SERVER_METRICS, "net_cpu_us_per_token")
TOKENIZER = """
import json, sys
from tokenizers import Tokenizer, models, pre_tokenizers
folder = sys.argv[1]
vocab = {"[UNK]": 0, **{f"w{i}": i + 1 for i in range(1000)}}
tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
tokenizer.save(f"{folder}/tokenizer.json")
json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "model_max_length": 65536},
          open(f"{folder}/tokenizer_config.json", "w"))
"""


async def ours(base_url: str, clients: int, prompts: int, output_tokens: int) -> dict:
    connector = aiohttp.TCPConnector(limit=clients + 8)
    async with aiohttp.ClientSession(connector=connector) as session:
        endpoint = Endpoint(session, base_url, "", "google/gemma-4-E2B-it", output_tokens, timeout=600)
        words = await endpoint.calibrate(128)
        await run_rep(endpoint, words, clients, clients)  # open the connections, as vLLM's ready check does
        async with session.post(f"{endpoint.root_url}/fake/reset") as response:
            response.raise_for_status()
        cpu = time.process_time()
        rep = await run_rep(endpoint, words, clients, prompts)
        cpu = time.process_time() - cpu
    return {"output_throughput": rep.aggregate_tok_s, "median_ttft_ms": statistics.median(rep.ttft_ms),
            "median_tpot_ms": statistics.median(rep.tpot_ms) if rep.tpot_ms else 0.0,
            "median_itl_ms": statistics.median(rep.itl_ms) if rep.itl_ms else 0.0,
            "completed": rep.requests - rep.errors, "failed": rep.errors, "cpu_s": cpu}


def run_vllm(vllm: str, port: int, cpus: set[int], tokenizer: str, args: argparse.Namespace, folder: str) -> dict:
    command = [vllm, "bench", "serve", "--backend", "openai-chat",
               "--base-url", f"http://127.0.0.1:{port}", "--endpoint", "/v1/chat/completions",
               "--model", "google/gemma-4-E2B-it", "--tokenizer", tokenizer, "--dataset-name", "random",
               "--random-input-len", "128", "--random-output-len", str(args.output_tokens),
               "--num-prompts", str(args.prompts), "--max-concurrency", str(args.clients), "--ignore-eos",
               "--disable-tqdm", "--save-result", "--result-dir", folder, "--result-filename", "vllm.json"]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=1800, preexec_fn=pinned_to(cpus))
    if completed.returncode != 0:
        raise SystemExit(f"vllm bench serve failed ({completed.returncode}):\n{completed.stdout[-2000:]}"
                         f"\n{completed.stderr[-2000:]}")
    result = json.loads((Path(folder) / "vllm.json").read_text())
    return {key: result[key] for key in (*SERVER_METRICS, "completed", "failed")}


def run_ours(port: int, cpus: set[int], args: argparse.Namespace) -> dict:
    command = [sys.executable, "-m", "dev.bench_side_by_side", "--child", str(port),
               "--clients", str(args.clients), "--prompts", str(args.prompts),
               "--output-tokens", str(args.output_tokens)]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=True,
                               preexec_fn=pinned_to(cpus))
    return json.loads(completed.stdout.splitlines()[-1])


def server_record(port: int) -> dict:
    async def fetch() -> dict:
        async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/fake/stats") as r:
            return await r.json()
    return asyncio.run(fetch())


def reset(port: int) -> None:
    async def post() -> None:
        async with aiohttp.ClientSession() as session, session.post(f"http://127.0.0.1:{port}/fake/reset") as r:
            r.raise_for_status()
    asyncio.run(post())


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measured(run_once) -> dict:
    """One client process's figures, with the CPU seconds it spent, start-up included."""
    before = child_cpu()
    run = run_once()
    run["process_cpu_s"] = child_cpu() - before
    return run


def line(name: str, run: dict, expected: dict) -> str:
    return (f"  {name:<18} {run['output_throughput']:>8,.0f} tok/s ({run['output_throughput'] / expected['rate']:.3f})"
            f"  TTFT {run['median_ttft_ms']:7.2f} ms ({run['median_ttft_ms'] / expected['ttft_ms']:.3f}x, "
            f"{run['median_ttft_ms'] / run['server_ttft_ms']:.3f}x the server's {run['server_ttft_ms']:.2f})"
            f"  TPOT {run['median_tpot_ms']:6.3f} ms ({run['median_tpot_ms'] / expected['tpot_ms']:.3f}x)"
            f"  ITL {run['median_itl_ms']:6.3f} ms  failed {run['failed']}"
            f"  process CPU {run['process_cpu_s']:.2f} s, {run['net_cpu_us_per_token']:.1f} us/token net of start-up"
            + (f" (in the run itself {run['cpu_s']:.2f} s)" if "cpu_s" in run else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dev.bench_side_by_side", description=__doc__.splitlines()[0])
    parser.add_argument("--vllm", default=os.environ.get("VLLM_BIN", "vllm"),
                        help="the vllm command of a venv with vLLM 0.33 (default: $VLLM_BIN, else vllm on PATH)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating pairs of runs (default: 3)")
    parser.add_argument("--clients", type=int, default=64, help="concurrent requests (default: 64)")
    parser.add_argument("--prompts", type=int, default=256, help="requests per run, one queue (default: 256)")
    parser.add_argument("--output-tokens", type=int, default=128, help="tokens per request (default: 128)")
    parser.add_argument("--ttft", type=float, default=0.05, help="server's seconds to first token (default: 0.05)")
    parser.add_argument("--tpot", type=float, default=0.01, help="server's seconds per token (default: 0.01)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(asyncio.run(ours(f"http://127.0.0.1:{args.child}/v1", args.clients, args.prompts,
                                          args.output_tokens))))
        return 0
    placed = pinning(os.sched_getaffinity(0))
    if not placed:
        raise SystemExit("needs two CPUs: the server on one, the client on another")
    client_cpus = placed[1]
    vllm_python = str(Path(args.vllm).with_name("python"))
    expected = {"rate": expected_rate(args.clients, args.output_tokens, args.ttft, args.tpot),
                "ttft_ms": args.ttft * 1000, "tpot_ms": args.tpot * 1000}
    runs: dict[str, list[dict]] = {"tools.bench": [], "vllm bench serve": []}
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run([vllm_python, "-c", TOKENIZER, folder], check=True)
        server, port = start_server(args.ttft, args.tpot, placed[0])
        try:
            print(f"{args.clients} clients x {args.prompts} requests x {args.output_tokens} tokens at "
                  f"{1 / args.tpot:,.0f} tok/s each after {args.ttft * 1000:g} ms; server on CPU {placed[0]}, "
                  f"clients on {','.join(map(str, sorted(client_cpus)))}; "
                  f"expected at most {expected['rate']:,.0f} tok/s; on {machine()}")
            # Each tool once with a single request: its start-up CPU, taken off its runs' per-token figure.
            single = argparse.Namespace(**{**vars(args), "clients": 1, "prompts": 1})
            startup = {"tools.bench": measured(lambda: run_ours(port, client_cpus, single))["process_cpu_s"],
                       "vllm bench serve": measured(lambda: run_vllm(args.vllm, port, client_cpus, folder, single,
                                                                     folder))["process_cpu_s"]}
            print("start-up CPU (one request): " + ", ".join(f"{k} {v:.2f} s" for k, v in startup.items()))
            for number in range(1, args.rounds + 1):
                print(f"round {number}")
                for name in runs:
                    reset(port)
                    run = measured(lambda name=name: run_ours(port, client_cpus, args) if name == "tools.bench"
                                   else run_vllm(args.vllm, port, client_cpus, folder, args, folder))
                    run["net_cpu_us_per_token"] = ((run["process_cpu_s"] - startup[name]) * 1e6
                                                   / (args.prompts * args.output_tokens))
                    record = server_record(port)
                    run["server_ttft_ms"] = record["median_ttft_s"] * 1000
                    run["server_tpot_ms"] = record["median_tpot_s"] * 1000
                    runs[name].append(run)
                    print(line(name, run, expected), flush=True)
        finally:
            server.terminate()
            server.wait(10)
    print("min / median / max over the rounds")
    for name, tool_runs in runs.items():
        for metric in METRICS:
            values = [run[metric] for run in tool_runs]
            print(f"  {name:<18} {metric:<18} {min(values):>10,.2f} {statistics.median(values):>10,.2f} "
                  f"{max(values):>10,.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
