"""How a create's TPU VM is told from any other: a new id per create, carried in the instance's description. Read
by the provider (compute_instance_provider.py) and by its watchdog process, which must not import Pulumi."""

from __future__ import annotations

from typing import Any


def description(incarnation: str) -> str:
    return f"tpu-vllm node, incarnation {incarnation}"


def is_this_incarnation(instance: dict[str, Any] | None, incarnation: str) -> bool:
    return bool(instance) and bool(incarnation) and instance.get("description", "") == description(incarnation)


def is_a_tpu_vllm_node(instance: dict[str, Any] | None) -> bool:
    return bool(instance) and str(instance.get("description", "")).startswith(description(""))
