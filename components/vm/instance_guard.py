"""STATE CONTRACT only: the compute path's first node was pulumi-gcp's instance bracketed by two dynamic resources,
`InstanceGuard` and `InstanceGuardRelease`. A stack whose up got as far as those holds them in its state by this
module's path and class names (pulumi sdk/python/lib/pulumi/dynamic/dynamic.py, serialize_provider), and the next up
deletes them through these classes. They held nothing in the cloud; the node is now
compute_instance_provider.ComputeInstanceProvider, which deletes what an interrupted create made itself.
"""

from __future__ import annotations

from typing import Any

from pulumi.dynamic import DiffResult, ReadResult, ResourceProvider


class InstanceGuardProvider(ResourceProvider):
    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return ReadResult(id_=id_, outs=props)

    def diff(self, _id: str, _olds: dict[str, Any], _news: dict[str, Any]) -> DiffResult:
        return DiffResult(changes=False)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        return None  # it held nothing in the cloud


class InstanceGuardReleaseProvider(InstanceGuardProvider):
    pass
