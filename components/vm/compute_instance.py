"""The node through Compute Engine: one TPU VM instance, inserted, waited for and deleted by the stack's own
provider (compute_instance_provider.py), as the queued-resource path's node is.

Why not pulumi-gcp's `gcp.compute.Instance`: its create cannot wait out a TPU VM's start. terraform-provider-google
(google/services/compute/resource_compute_instance.go, commit e03b7622, which pulumi-gcp 10.2.0 bridges) waits for
RUNNING over a list of states without PENDING, the state Google says TPU and flex-start VMs start in, so the create
ends at once; it never sends params.requestValidForDuration (expandParams sends only resourceManagerTags), so no
flex-start request queues; its RUNNING wait takes the update timeout, which pulumi-terraform-bridge's Create never
passes; and the bridge's Cancel is a no-op, so a Ctrl-C leaves the insert going on untracked. docs/development.md's
contracts rows hold the citations.

The renderers are pure (plain values in, the Instance body in compute.v1.json's own names out: Instance,
Scheduling, AttachedDisk, InstanceParams, revision 20261106), so the offline plan and the policy pack see every leaf.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi.dynamic import Resource

from components.vm.compute_instance_provider import ComputeInstanceProvider
from components.vm.node_attributes import NodeAttributes
from components.vm.tpu_request import CLOUD_PLATFORM_SCOPE

# Scheduling.provisioningModel's enum (compute.v1.json): FLEX_START, RESERVATION_BOUND, SPOT, STANDARD.
PROVISIONING_MODELS = {"flex-start": "FLEX_START", "spot": "SPOT", "on-demand": "STANDARD"}
# The longest flex-start run ("Flex-start VMs can run for up to seven days", compute/docs/instances/
# about-flex-start-vms) and the longest queue wait ("persist in a queue for up to two hours": Google's Flex-start
# VMs announcement, 2025-09-25).
FLEX_START_MAX_RUN_SECONDS = 7 * 24 * 3600
FLEX_START_QUEUE_SECONDS = 2 * 3600
# After the queue, how long the VM may take from capacity to RUNNING before the provider gives up.
PROVISIONING_GRACE_SECONDS = 1800
BOOT_DISK_GB = 100
TYPE_TOKEN = "pulumi-python:dynamic/tpu-vllm:ComputeInstance"


def _duration(seconds: int) -> dict[str, str]:
    # Duration.seconds is an int64, which JSON carries as a string (compute.v1.json: "format": "int64").
    return {"seconds": str(int(seconds))}


def scheduling(provisioning_model: str, run_seconds: int | None) -> dict[str, Any]:
    """The instance's `scheduling` (compute.v1.json Scheduling).

    Every key is stated, none left to defaults: Compute Engine refuses a restart for any model but STANDARD ("You
    can only set the automatic restart option for standard instances", Scheduling.automaticRestart). A TPU VM
    cannot live-migrate, so host maintenance terminates it on every model.
    """
    model = PROVISIONING_MODELS[provisioning_model]
    block: dict[str, Any] = {
        "provisioningModel": model,
        "automaticRestart": model == "STANDARD",
        "onHostMaintenance": "TERMINATE",
    }
    if model == "FLEX_START":
        # FLEX_START wants automaticRestart false, termination DELETE and a maxRunDuration (pulumi-gcp 10.2.0's
        # compute.Instance docs say the same of the API). DELETE, not STOP: a stopped TPU VM keeps its boot disk
        # billing and its name taken.
        block["instanceTerminationAction"] = "DELETE"
        block["maxRunDuration"] = _duration(run_seconds or 0)
    elif model == "SPOT":
        # A preempted spot VM is deleted, as the queued-resource path's spot node is: no stopped VM left billing
        # its boot disk (Scheduling.instanceTerminationAction: DELETE, "Delete the VM.").
        block["instanceTerminationAction"] = "DELETE"
    return block


def _network_url(project: str, network: str) -> str:
    # NetworkInterface.network takes a full or partial URL ("projects/project/global/networks/network"), not a name.
    return network if "/" in network else f"projects/{project}/global/networks/{network}"


def _subnetwork_url(project: str, zone: str, subnetwork: str) -> str:
    region = zone.rsplit("-", 1)[0]
    return subnetwork if "/" in subnetwork else f"projects/{project}/regions/{region}/subnetworks/{subnetwork}"


def instance_body(
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
    queue_seconds: int | None,
) -> dict[str, Any]:
    """What instances.insert is sent (compute.v1.json Instance); the provider adds only the description."""
    interface: dict[str, Any] = {
        "network": _network_url(project, network),
        # One access config with no address: an ephemeral external IP, as the queued resource's enableExternalIps
        # gives the node (the serving step dials it).
        "accessConfigs": [{"type": "ONE_TO_ONE_NAT", "name": "External NAT"}],
    }
    if subnetwork:
        interface["subnetwork"] = _subnetwork_url(project, zone, subnetwork)
    body: dict[str, Any] = {
        "name": name,
        "machineType": f"zones/{zone}/machineTypes/{machine_type}",
        "disks": [
            # The boot disk goes with the VM (a flex-start run's end deletes both); the cache is the second disk.
            {"boot": True, "autoDelete": True, "initializeParams": {
                "sourceImage": boot_image, "diskSizeGb": str(BOOT_DISK_GB),
                "diskType": f"zones/{zone}/diskTypes/{boot_disk_type}"}},
            # AttachedDisk.deviceName "is reflected into the /dev/disk/by-id/google-* tree", where startup/startup.sh
            # (find_cache_disk) looks; autoDelete false: "Specifies whether the disk will be auto-deleted when the
            # instance is deleted", so the cache outlives every VM.
            {"boot": False, "autoDelete": False, "source": cache_disk, "deviceName": cache_device_name,
             "mode": "READ_WRITE"},
        ],
        "networkInterfaces": [interface],
        "serviceAccounts": [{"email": service_account_email, "scopes": [CLOUD_PLATFORM_SCOPE]}],
        "metadata": {"items": [{"key": key, "value": value} for key, value in metadata.items()]},
        "tags": {"items": list(tags)},
        "labels": dict(labels),
        "scheduling": scheduling(provisioning_model, run_seconds),
        "deletionProtection": False,
    }
    if PROVISIONING_MODELS[provisioning_model] == "FLEX_START" and queue_seconds:
        # InstanceParams.requestValidForDuration: "Relative deadline for waiting for capacity. Relevant only for
        # Instances.Insert API". Without it a flex-start request that finds no capacity fails at once.
        body["params"] = {"requestValidForDuration": _duration(queue_seconds)}
    return body


def wait_seconds(queue_seconds: int | None) -> int:
    """How long the provider's create waits for RUNNING: the queue, then the start itself."""
    return int(queue_seconds or 0) + PROVISIONING_GRACE_SECONDS


def gcloud_equivalent(body: dict[str, Any], zone: str) -> str:
    """The gcloud command this instance corresponds to (gcloud compute instances create's flag names)."""
    block = body["scheduling"]
    boot = body["disks"][0]["initializeParams"]
    family = re.fullmatch(r"projects/([^/]+)/global/images/family/([^/]+)", boot["sourceImage"])
    image = ([f"--image-family={family[2]}", f"--image-project={family[1]}"] if family
             else [f"--image={boot['sourceImage']}"])
    parts = ["gcloud compute instances create", body["name"], f"--zone={zone}",
             f"--machine-type={body['machineType'].rsplit('/', 1)[-1]}", *image,
             f"--boot-disk-size={boot['diskSizeGb']}GB", f"--maintenance-policy={block['onHostMaintenance']}",
             "--scopes=" + ",".join(scope.removeprefix("https://www.googleapis.com/auth/")
                                    for scope in body["serviceAccounts"][0]["scopes"]),
             f"--provisioning-model={block['provisioningModel']}"]
    if "maxRunDuration" in block:
        parts.append(f"--max-run-duration={block['maxRunDuration']['seconds']}s")
    if "instanceTerminationAction" in block:
        parts.append(f"--instance-termination-action={block['instanceTerminationAction']}")
    if "params" in body:
        parts.append(f"--request-valid-for-duration={body['params']['requestValidForDuration']['seconds']}s")
    return " ".join(parts)


# Outputs of the dynamic resource (declared as None inputs so Pulumi exposes them as attributes).
OUTPUT_KEYS = ("instanceId", "selfLink", "status", "internalIp", "externalIp", "creationTimestamp",
               "lastStartTimestamp", "terminationTime", "incarnation")


class ComputeInstance(Resource, module="tpu-vllm", name="ComputeInstance"):
    """The dynamic resource; use ComputeNode below rather than this directly."""

    instanceId: pulumi.Output[str]
    selfLink: pulumi.Output[str]
    status: pulumi.Output[str]
    internalIp: pulumi.Output[str]
    externalIp: pulumi.Output[str]
    terminationTime: pulumi.Output[str]

    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None):
        super().__init__(ComputeInstanceProvider(), name, {**dict.fromkeys(OUTPUT_KEYS), **props}, opts)


@dataclass
class ComputeNodeArgs:
    project: str
    zone: str
    body: dict[str, Any]
    """instance_body()'s."""
    queue_seconds: int | None
    depends_on: list[pulumi.Resource]
    poll_seconds: float = 15.0
    delete_wait_seconds: int = 1200


class ComputeNode(NodeAttributes, pulumi.ComponentResource):
    """One TPU VM through Compute Engine; the same attributes the wing reads of TpuNode."""

    instance: ComputeInstance

    def __init__(self, name: str, args: ComputeNodeArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-vllm:tpu:ComputeNode", name, None, opts)
        self.instance = ComputeInstance(
            f"{name}-instance",
            {"project": args.project, "zone": args.zone, "name": args.body["name"], "body": args.body,
             "waitSeconds": wait_seconds(args.queue_seconds), "pollSeconds": args.poll_seconds,
             "deleteWaitSeconds": args.delete_wait_seconds},
            # The old VM must go first: it holds the name, the chips' quota and the cache disk (READ_WRITE on one).
            pulumi.ResourceOptions(parent=self, depends_on=args.depends_on, delete_before_replace=True),
        )
        self.node_name = self.instance.selfLink.apply(lambda link: (link or "").split("/v1/", 1)[-1])
        self.node_uid = self.instance.instanceId
        self.internal_ip = self.instance.internalIp
        self.external_ip = self.instance.externalIp
        self.state = self.instance.status
        self.termination_time = self.instance.terminationTime
        self.register_outputs(self.node_outputs())
