"""`tpu-vllm:load`: the load you plan to put on the endpoint."""

from __future__ import annotations

from pydantic import Field

from components.settings.fields import _Section


class LoadSettings(_Section):
    """The load you plan to put on it (config key `tpu-vllm:load`), checked against the KV pool."""

    clients: int = Field(16, ge=1)
    context_tokens: int = Field(1024, ge=1)
