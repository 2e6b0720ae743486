"""The node through Compute Engine: one first-class `gcp.compute.Instance` with a TPU machine type.

The renderers are pure (plain values in, pulumi-gcp 10.2.0 input dicts out), so the offline plan and the policy
pack see every leaf; `ComputeNode` declares the instance and exposes what the wing reads of any node
(components/vm/node_path.py). Field meanings are Compute v1's (googleapiclient discovery_cache
documents/compute.v1.json, revision 20261106: Instance, Scheduling, AttachedDisk); how pulumi-gcp sends them is
terraform-provider-google's (google/services/compute/resource_compute_instance.go and compute_instance_helpers.go,
commit e03b7622, 2026-08-21), which pulumi-gcp 10.2.0 bridges.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pulumi
import pulumi_gcp as gcp

from components.vm import instance_guard
from components.vm.node_attributes import NodeAttributes
from components.vm.tpu_request import CLOUD_PLATFORM_SCOPE

# Scheduling.provisioningModel's enum (compute.v1.json): FLEX_START, RESERVATION_BOUND, SPOT, STANDARD.
PROVISIONING_MODELS = {"flex-start": "FLEX_START", "spot": "SPOT", "on-demand": "STANDARD"}
# The longest flex-start run ("Flex-start VMs can run for up to seven days", compute/docs/instances/
# about-flex-start-vms) and the longest queue wait ("persist in a queue for up to two hours": Google's Flex-start
# VMs announcement, 2025-09-25).
FLEX_START_MAX_RUN_SECONDS = 7 * 24 * 3600
FLEX_START_QUEUE_SECONDS = 2 * 3600
# After the queue, how long the insert operation may take (the create timeout's part beyond the queue).
PROVISIONING_GRACE_SECONDS = 1800
BOOT_DISK_GB = 100


def scheduling(provisioning_model: str, run_seconds: int | None) -> dict[str, Any]:
    """The instance's `scheduling` block (pulumi-gcp InstanceSchedulingArgs keys).

    Every key is stated, none left to defaults: the provider sends automaticRestart true when it is not set
    (compute_instance_helpers.go expandScheduling; the schema's `Default: true`), and Compute Engine refuses a
    restart for any model but STANDARD ("You can only set the automatic restart option for standard instances",
    Scheduling.automaticRestart). A TPU VM cannot live-migrate, so host maintenance terminates it on every model.
    """
    model = PROVISIONING_MODELS[provisioning_model]
    block: dict[str, Any] = {
        "provisioning_model": model,
        "automatic_restart": model == "STANDARD",
        "on_host_maintenance": "TERMINATE",
    }
    if model == "FLEX_START":
        # pulumi-gcp 10.2.0 compute.Instance docs: FLEX_START wants automatic_restart false, termination DELETE and
        # a max_run_duration. DELETE, not STOP: a stopped TPU VM keeps its boot disk billing and its name taken.
        block["instance_termination_action"] = "DELETE"
        block["max_run_duration"] = {"seconds": int(run_seconds or 0)}
    elif model == "SPOT":
        # A preempted spot VM is deleted, as the queued-resource path's spot node is: no stopped VM left billing
        # its boot disk (Scheduling.instanceTerminationAction: DELETE, "Delete the VM.").
        block["instance_termination_action"] = "DELETE"
    return block


def instance_args(
    *,
    project: str,
    zone: str,
    name: str,
    machine_type: str,
    boot_image: str,
    boot_disk_type: str,
    network: str,
    subnetwork: str | None,
    service_account_email: pulumi.Input[str],
    metadata: dict[str, pulumi.Input[str]],
    cache_disk: pulumi.Input[str],
    cache_device_name: str,
    tags: list[str],
    labels: dict[str, str],
    provisioning_model: str,
    run_seconds: int | None,
) -> dict[str, Any]:
    """The `gcp.compute.Instance` inputs, in pulumi-gcp 10.2.0's names."""
    interface: dict[str, Any] = {"network": network,
                                 # One access config with no address: an ephemeral external IP, as the queued
                                 # resource's enableExternalIps gives the node (the serving step dials it).
                                 "access_configs": [{}]}
    if subnetwork:
        interface["subnetwork"] = subnetwork
    return {
        "project": project,
        "zone": zone,
        "name": name,
        "machine_type": machine_type,
        "boot_disk": {
            # The boot disk goes with the VM (a flex-start run's end deletes both); the cache is the attached disk.
            "auto_delete": True,
            "initialize_params": {"image": boot_image, "size": BOOT_DISK_GB, "type": boot_disk_type},
        },
        # AttachedDisk.deviceName "is reflected into the /dev/disk/by-id/google-* tree" (compute.v1.json), which is
        # where startup/startup.sh (mount_cache_disk) looks. The provider's attached_disk has no auto_delete at all
        # (expandAttachedDisk sends source, mode, deviceName), and Compute Engine deletes an attached disk with the
        # VM only when autoDelete is true: the cache outlives every VM.
        "attached_disks": [{"source": cache_disk, "device_name": cache_device_name, "mode": "READ_WRITE"}],
        "network_interfaces": [interface],
        "service_account": {"email": service_account_email, "scopes": [CLOUD_PLATFORM_SCOPE]},
        "metadata": dict(metadata),
        "tags": list(tags),
        "labels": dict(labels),
        "scheduling": scheduling(provisioning_model, run_seconds),
        # Machine type and scheduling changes stop the VM rather than fail the update.
        "allow_stopping_for_update": True,
        "deletion_protection": False,
    }


def wait_timeout(queue_seconds: int | None) -> str:
    """The provider's create and update timeouts (its default is 20 minutes each: resource_compute_instance.go,
    Timeouts).

    What upstream does with them: the create waits for the insert operation under the create timeout and then for
    RUNNING under the *update* one (waitUntilInstanceHasDesiredStatus: `Timeout: d.Timeout(schema.TimeoutUpdate)`),
    but pulumi-terraform-bridge's Create passes only the create timeout (pkg/tfbridge/provider.go), so on a create
    the RUNNING wait keeps its 20 minutes whatever `update` says here. That wait's Pending list
    (getAllStatusBut over computeInstanceStatus) lacks PENDING, the status a TPU or flex-start VM starts in, so it
    stops at once ("unexpected state 'PENDING'"); and no queue wait is sent (expandParams has no
    requestValidForDuration), so nothing queues for the create timeout to cover. Only a failed operation wait
    clears the id ("The resource didn't actually create"); a failed status wait keeps it, and Pulumi records the
    instance as partly created. Either way instance_guard.py's watchdog deletes what this create made.
    """
    seconds = int(queue_seconds or 0) + PROVISIONING_GRACE_SECONDS
    return f"{seconds // 60}m"


def run_end(creation_timestamp: str, run_seconds: int | None) -> str:
    """When the run ends at the earliest: creation plus maxRunDuration (RFC 3339, UTC). Computed; the run is
    counted from the VM's start, so a request that queued ends that much later."""
    if not creation_timestamp or not run_seconds:
        return ""
    created = datetime.fromisoformat(creation_timestamp.replace("Z", "+00:00"))
    return (created + timedelta(seconds=int(run_seconds))).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def gcloud_equivalent(args: dict[str, Any]) -> str:
    """The gcloud command this instance corresponds to (gcloud compute instances create's flag names)."""
    block = args["scheduling"]
    parts = ["gcloud compute instances create", args["name"], f"--zone={args['zone']}",
             f"--machine-type={args['machine_type']}", f"--image={args['boot_disk']['initialize_params']['image']}",
             f"--provisioning-model={block['provisioning_model']}"]
    if "max_run_duration" in block:
        parts.append(f"--max-run-duration={block['max_run_duration']['seconds']}s")
    if "instance_termination_action" in block:
        parts.append(f"--instance-termination-action={block['instance_termination_action']}")
    return " ".join(parts)


@dataclass
class ComputeNodeArgs:
    instance: dict[str, Any]
    """instance_args()'s inputs."""
    queue_seconds: int | None
    run_seconds: int | None
    depends_on: list[pulumi.Resource]


class ComputeNode(NodeAttributes, pulumi.ComponentResource):
    """One TPU VM through Compute Engine; the same attributes the wing reads of TpuNode."""

    instance: gcp.compute.Instance

    def __init__(self, name: str, args: ComputeNodeArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-vllm:tpu:ComputeNode", name, None, opts)
        timeout = wait_timeout(args.queue_seconds)
        where = {key: args.instance[key] for key in instance_guard.KEYS}
        # Brackets the create: an instance this create made is deleted if the create never finishes (instance_guard).
        guard = instance_guard.InstanceGuard(f"{name}-guard", where,
                                             pulumi.ResourceOptions(parent=self, depends_on=args.depends_on))
        self.instance = gcp.compute.Instance(
            f"{name}-instance", **args.instance, description=guard.incarnation.apply(instance_guard.description),
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[*args.depends_on, guard], delete_before_replace=True,
                custom_timeouts=pulumi.CustomTimeouts(create=timeout, update=timeout)),
        )
        instance_guard.InstanceGuardRelease(
            f"{name}-release", {**where, "incarnation": guard.incarnation, "instanceId": self.instance.instance_id},
            pulumi.ResourceOptions(parent=self, depends_on=[self.instance]))
        interface = self.instance.network_interfaces.apply(lambda interfaces: (interfaces or [{}])[0])
        self.node_name = self.instance.self_link.apply(lambda link: (link or "").split("/v1/", 1)[-1])
        self.node_uid = self.instance.instance_id
        self.internal_ip = interface.apply(lambda nic: _get(nic, "network_ip") or "")
        self.external_ip = interface.apply(
            lambda nic: _get((_get(nic, "access_configs") or [{}])[0], "nat_ip") or "")
        self.state = self.instance.current_status
        self.termination_time = self.instance.creation_timestamp.apply(
            lambda created: run_end(created, args.run_seconds))
        self.register_outputs(self.node_outputs())


def _get(value: Any, key: str) -> Any:
    """A field of an output type or of the plain dict the offline engine gives back."""
    if isinstance(value, dict):
        return value.get(key, value.get("".join(w if i == 0 else w.title() for i, w in enumerate(key.split("_")))))
    return getattr(value, key, None)
