"""The TPU node a stack declares: a ComponentResource over the dynamic queued resource."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi.dynamic import Resource

from components.vm.node_attributes import NodeAttributes
from components.vm.queued_resource import QueuedResourceProvider

# After the queue deadline, how long provisioning itself may take before the provider gives up.
PROVISIONING_GRACE_SECONDS = 1800
# Outputs of the dynamic resource (declared as None inputs so Pulumi exposes them as attributes).
OUTPUT_KEYS = (
    "queuedResourceName", "nodeName", "nodeUid", "nodeCreateTime", "state", "nodeState", "internalIp",
    "externalIp", "terminationTime", "provisioningModel",
)



class QueuedResource(Resource, module="tpu-vllm", name="QueuedResource"):
    """The dynamic resource; use TpuNode below rather than this directly."""

    queuedResourceName: pulumi.Output[str]
    nodeName: pulumi.Output[str]
    nodeUid: pulumi.Output[str]
    """The node's `id` (int64 as a string): every node GCP makes has its own."""
    nodeCreateTime: pulumi.Output[str]
    state: pulumi.Output[str]
    internalIp: pulumi.Output[str]
    externalIp: pulumi.Output[str]
    terminationTime: pulumi.Output[str]
    provisioningModel: pulumi.Output[str]

    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None):
        super().__init__(QueuedResourceProvider(), name, {**dict.fromkeys(OUTPUT_KEYS), **props}, opts)


@dataclass
class TpuNodeArgs:
    """What the TPU node is and how long the provider waits for it."""

    body: pulumi.Input[dict]
    """The QueuedResource request body, from queued_resource_body()."""
    parent: str
    """projects/<project>/locations/<zone>."""
    queued_resource_id: str
    queue_seconds: int
    """How long the request may wait for capacity; the provider waits this plus provisioning."""
    poll_seconds: float = 15.0
    delete_wait_seconds: int = 1200


class TpuNode(NodeAttributes, pulumi.ComponentResource):
    """One flex-start (or spot / on-demand) TPU node, requested through a queued resource."""

    queued_resource: QueuedResource
    node_create_time: pulumi.Output[str]

    def __init__(self, name: str, args: TpuNodeArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-vllm:tpu:TpuNode", name, None, opts)
        self.queued_resource = QueuedResource(
            f"{name}-qr",
            {
                "body": args.body,
                "parent": args.parent,
                "queuedResourceId": args.queued_resource_id,
                "waitSeconds": args.queue_seconds + PROVISIONING_GRACE_SECONDS,
                "pollSeconds": args.poll_seconds,
                "deleteWaitSeconds": args.delete_wait_seconds,
            },
            # A component's depends_on does not reach its children: the request itself must wait for the
            # account, secrets, disk and firewall that the body names by value.
            pulumi.ResourceOptions(parent=self, delete_before_replace=True,
                                   depends_on=opts.depends_on if opts is not None else None),
        )
        self.node_name = self.queued_resource.nodeName
        self.node_uid = self.queued_resource.nodeUid
        self.node_create_time = self.queued_resource.nodeCreateTime
        self.external_ip = self.queued_resource.externalIp
        self.internal_ip = self.queued_resource.internalIp
        self.state = self.queued_resource.state
        self.termination_time = self.queued_resource.terminationTime
        self.register_outputs({**self.node_outputs(), "node_create_time": self.node_create_time})
