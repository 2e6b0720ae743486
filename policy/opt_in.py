"""The note a tpu-vllm firewall rule carries when the stack's own settings opened it to the internet.

components/vm/network.py writes it into the rule's description, only from the settings' opt-ins; the
policy pack reads it back and lets it clear exactly the port and ranges it names. Standard library only,
for the same reason as address_ranges.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

SSH_OPT_IN = "allowSshFromAnywhere"
SERVING_OPT_IN = "allowPublicServing"

_NOTE = re.compile(r"opt-in tpu-vllm:access\.(?P<setting>[A-Za-z]+): tcp:(?P<port>\d{1,5}) from (?P<ranges>[^;]+)")


def note(setting: str, port: int, ranges: Iterable[str]) -> str:
    """'opt-in tpu-vllm:access.allowSshFromAnywhere: tcp:22 from 0.0.0.0/0'."""
    return f"opt-in tpu-vllm:access.{setting}: tcp:{port} from {' '.join(ranges)}"


@dataclass(frozen=True)
class OptIn:
    setting: str
    port: int
    ranges: tuple[str, ...]


def read(description: str) -> list[OptIn]:
    """Every note in a description (none if it has none)."""
    return [OptIn(match["setting"], int(match["port"]), tuple(match["ranges"].split()))
            for match in _NOTE.finditer(description or "")]
