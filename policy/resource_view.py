"""What every rule of the pack reads: a resource as a stack policy sees it, the values a preview leaves
unknown, the pack's config with its defaults, and the type tokens several rules judge."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

try:
    from pulumi_policy.proxy import UnknownValueError
except ImportError:  # the rules also run without pulumi_policy (tests, the offline plan)
    class UnknownValueError(Exception):  # type: ignore[no-redef]
        """Stands in for pulumi_policy's: nothing raises it here."""

# What a preview sends for a value computed at deploy (pulumi sdk/go/common/resource/plugin/rpc.go, the
# same strings pulumi_policy/proxy.py names); the analyzer's proxy raises UnknownValueError on reading one.
UNKNOWN_SENTINELS = frozenset({
    "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7", "3eeb2bf0-c639-47a8-9e75-3b44932eb421",
    "04da6b54-80e4-46f7-96ec-b56ff0331ba9", "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",
    "030794c1-ac77-496b-92df-f27374a8bd58", "e48ece36-62e2-4504-bad9-02848725956a",
    "dd056dcd-154b-4c76-9bd3-c8f88648b5ff",
})


def known_items(mapping: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """The entries whose values are known: a preview leaves the others unknown (e.g. a new stack's SSH key),
    and the rest of the mapping must still be judged, not turned into pulumi_policy's advisory note."""
    for key in mapping:
        try:
            value = mapping[key]
        except UnknownValueError:
            continue
        if not (isinstance(value, str) and value in UNKNOWN_SENTINELS):
            yield key, value


QUEUED_RESOURCE_TYPES = {"pulumi-python:dynamic/tpu-vllm:QueuedResource"}
# pulumi-gcp TPU resources: none of them can carry a run duration.
UNBOUNDED_TPU_TYPES = {"gcp:tpu/v2Vm:V2Vm", "gcp:tpu/node:Node", "gcp:tpu/v2QueuedResource:V2QueuedResource"}
# A Compute Engine instance bills TPU time when its machine type is a TPU one (ct6e-standard-1t, tpu7x-standard-4t:
# compute/docs/tpus/tpu-machines); its scheduling block says when the billing stops.
INSTANCE_TYPE = "gcp:compute/instance:Instance"
# tpu-vllm's own TPU VM (components/vm/compute_instance.py): its `body` is the Instance in compute.v1.json's names.
COMPUTE_INSTANCE_TYPES = {"pulumi-python:dynamic/tpu-vllm:ComputeInstance"}
TPU_MACHINE_PREFIXES = ("ct", "tpu")
FIREWALL_TYPE = "gcp:compute/firewall:Firewall"
SECRET_TYPE = "gcp:secretmanager/secret:Secret"
COMMAND_TYPES = {"command:remote:Command", "command:local:Command"}

DEFAULT_CONFIG = {
    "allowUnboundedBilling": False,
    "allowOpenSsh": False,
    "allowPublicServing": False,
    "honorStackOptIns": True,
    "servingPort": None,
}


@dataclass(frozen=True)
class Seen:
    """A resource as a stack policy sees it; the URN tells which component made it."""

    type: str
    props: Mapping[str, Any]
    urn: str = ""


def as_seen(resources: Iterable[Seen | tuple]) -> list[Seen]:
    return [item if isinstance(item, Seen) else Seen(*item) for item in resources]


def instance_metadata(type_: str, props: Mapping[str, Any]) -> dict[str, Any]:
    """An instance's metadata by key, known values only: pulumi-gcp's map, or the API's `items` list."""
    if type_ in COMPUTE_INSTANCE_TYPES:
        items = ((props.get("body") or {}).get("metadata") or {}).get("items") or []
        return {str(item.get("key")): item.get("value") for item in items
                if isinstance(item, Mapping) and "value" in dict(known_items(item))}
    return dict(known_items(props.get("metadata") or {}))


def with_defaults(config: Mapping[str, Any] | None) -> dict[str, Any]:
    return {**DEFAULT_CONFIG, **(config or {})}
