"""`tpu-vllm:load`: the load you plan to put on the endpoint."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from components.settings.fields import _Section
from components.sizing.rate import DEFAULT_PLANNED_CLIENTS


class LoadSettings(_Section):
    """The load you plan to put on it (config key `tpu-vllm:load`), checked against the KV pool."""

    config_key: ClassVar[str] = "load"

    clients: int = Field(DEFAULT_PLANNED_CLIENTS, ge=1, description=(
        "planned concurrent clients; warns above 78% of the KV pool; the load the layout is planned at"))
    context_tokens: int = Field(1024, ge=1, description=(
        "planned tokens per client; `clients` x this warns above 78% of the KV pool; at most `vllm.maxModelLen`; "
        "the layout is planned at it"))
    active_hours_per_day: float = Field(10, gt=0, le=24, description=(
        "hours a day the agents send requests (office hours: 10); read with `gke.minReplicas: 0`, where the plan "
        "prices such a day against one replica kept all day"))
