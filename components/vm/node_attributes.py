"""What the wing reads of any node, on either path (components/vm/node_path.py): TpuNode and ComputeNode both."""

from __future__ import annotations

import pulumi


class NodeAttributes:
    node_name: pulumi.Output[str]
    node_uid: pulumi.Output[str]
    """Changes with every new node, unlike node_name (fixed per stack)."""
    external_ip: pulumi.Output[str]
    internal_ip: pulumi.Output[str]
    state: pulumi.Output[str]
    termination_time: pulumi.Output[str]

    def node_outputs(self) -> dict[str, pulumi.Output[str]]:
        return {"node_name": self.node_name, "node_uid": self.node_uid, "external_ip": self.external_ip,
                "internal_ip": self.internal_ip, "state": self.state, "termination_time": self.termination_time}
