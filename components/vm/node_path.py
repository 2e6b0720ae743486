"""The one place the two node paths differ: the queued resource (Cloud TPU API) or a Compute Engine instance.

The wing builds one `NodeRequest` (what any node is: where, which model, which identity, the metadata the boot
script reads, the cache disk, the tag) and `declare_node` renders it on the stack's path. Both answer with the
same attributes (`node_name`, `node_uid`, `external_ip`, `internal_ip`, `state`, `termination_time`) and the
outputs that name the path's own resource; the serving step, the front, the dashboards, the alerts and every other
output are the wing's, shared, and so is the boot script, but for the Docker install the compute path's images need
(`NodePath.startup_script`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi

from components.catalog import COMPUTE, QUEUED_RESOURCE
from components.vm import compute_instance
from components.vm.boot_script import boot_script
from components.vm.compute_instance import ComputeNode, ComputeNodeArgs, instance_body
from components.vm.tpu_node import TpuNode, TpuNodeArgs
from components.vm.tpu_request import gcloud_equivalent, queued_resource_body


@dataclass(frozen=True)
class NodePath:
    """Which API makes the node, and what only the Compute Engine path needs (None on the queued-resource one)."""

    api: str = QUEUED_RESOURCE
    machine_type: str | None = None
    boot_image: str | None = None
    boot_disk_type: str | None = None

    def startup_script(self) -> str:
        """The boot script this path's image needs: Compute Engine's TPU images ship no Docker (boot_script.py)."""
        return boot_script(self.api)


@dataclass
class NodeRequest:
    project: str
    zone: str
    node_id: str
    accelerator_type: str
    runtime_version: str
    provisioning_model: str
    run_seconds: int | None
    queue_seconds: int | None
    network: str
    subnetwork: str | None
    service_account_email: pulumi.Input[str]
    metadata: dict[str, pulumi.Input[str]]
    cache_disk: pulumi.Input[str]
    cache_device_name: str
    tags: list[str]
    labels: dict[str, str]
    depends_on: list[pulumi.Resource] = field(default_factory=list)


@dataclass
class DeclaredNode:
    node: Any
    """TpuNode or ComputeNode: the attributes above."""
    outputs: dict[str, Any]
    """The outputs that name this path's resource, in the order the stack exports them."""


def declare_node(path: NodePath, request: NodeRequest, opts: pulumi.ResourceOptions) -> DeclaredNode:
    if path.api == COMPUTE:
        return _compute(path, request, opts)
    return _queued_resource(request, opts)


def _queued_resource(request: NodeRequest, opts: pulumi.ResourceOptions) -> DeclaredNode:
    # A structure whose leaves are inputs, not one apply over them: in a preview only the values that are truly
    # unknown (the generated SSH key of a new stack) are unknown, so the preview shows the rest and the policy
    # pack judges it. The email is known from the account id; the account is a dependency.
    body = queued_resource_body(
        project=request.project, zone=request.zone, node_id=request.node_id,
        accelerator_type=request.accelerator_type, runtime_version=request.runtime_version,
        provisioning_model=request.provisioning_model, run_seconds=request.run_seconds,
        queue_seconds=request.queue_seconds, network=request.network, subnetwork=request.subnetwork,
        service_account_email=request.service_account_email, metadata=request.metadata,
        data_disks=[request.cache_disk], tags=request.tags, labels=request.labels,
    )
    parent = f"projects/{request.project}/locations/{request.zone}"
    node = TpuNode(
        "tpu",
        TpuNodeArgs(body=body, parent=parent, queued_resource_id=request.node_id,
                    queue_seconds=request.queue_seconds),
        pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=request.depends_on)),
    )
    return DeclaredNode(node, {
        "gcloudEquivalent": gcloud_equivalent(body, request.node_id),
        "nodeName": node.node_name,
        "queuedResourceState": node.state,
        # The plain name, so tools.status finds the request in any state (nodeName is empty unless ACTIVE).
        "queuedResourceName": f"{parent}/queuedResources/{request.node_id}",
    })


def _compute(path: NodePath, request: NodeRequest, opts: pulumi.ResourceOptions) -> DeclaredNode:
    body = instance_body(
        project=request.project, zone=request.zone, name=request.node_id, machine_type=path.machine_type or "",
        boot_image=path.boot_image or "", boot_disk_type=path.boot_disk_type or "hyperdisk-balanced",
        network=request.network, subnetwork=request.subnetwork,
        service_account_email=request.service_account_email, metadata=request.metadata,
        cache_disk=request.cache_disk, cache_device_name=request.cache_device_name, tags=request.tags,
        labels=request.labels, provisioning_model=request.provisioning_model, run_seconds=request.run_seconds,
        queue_seconds=request.queue_seconds,
    )
    node = ComputeNode(
        "tpu-vm",
        ComputeNodeArgs(project=request.project, zone=request.zone, body=body, queue_seconds=request.queue_seconds,
                        depends_on=request.depends_on),
        # A new child: no alias to the stack's root (the wing's children before it was a component).
        pulumi.ResourceOptions(parent=opts.parent),
    )
    return DeclaredNode(node, {
        "gcloudEquivalent": compute_instance.gcloud_equivalent(body, request.zone),
        "nodeName": node.node_name,
        "instanceState": node.state,
        # The plain name, so tools.status finds the instance (or learns it is gone) in any state.
        "instanceName": f"projects/{request.project}/zones/{request.zone}/instances/{request.node_id}",
    })
