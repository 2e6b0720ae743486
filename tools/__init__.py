"""Offline tools: the plan (and, later, the benchmark)."""
