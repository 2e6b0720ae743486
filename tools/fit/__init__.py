"""`python -m tools.fit`: does a model fit each single-host TPU shape, at what tensor-parallel size, with how many
KV tokens and clients, for how much: every figure marked measured (with its source), computed (with its formula)
or given (typed with --weights-gib).

    python -m tools.fit --model google/gemma-4-E2B-it --max-model-len 32768
    python -m tools.fit --model-config ./config.json --weights-gib 15.3 --clients 16 --json

It needs only requirements.txt and no credentials: the figures come from components/catalog and components/sizing.
docs/models.md's table is written from it (`python -m tools.fit.docs`; `--check` says whether it is current).
"""

from tools.fit.report import report_json, report_text, resolve_model, rows, serve_commands

__all__ = ["report_json", "report_text", "resolve_model", "rows", "serve_commands"]
