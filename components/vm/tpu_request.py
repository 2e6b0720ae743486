"""The QueuedResource request body this stack sends (tpu.v2alpha1), and how one read back differs from it.

Pure: no client, no Pulumi. The body is a resource input built by one pure function over input leaves
(components/vm/deployment.py), so previews and the offline plan show what is sent.
"""

from __future__ import annotations

from typing import Any

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"

PROVISIONING_MODELS = {"flex-start": "FLEX_START", "spot": "SPOT", "on-demand": "STANDARD"}


def queued_resource_body(
    *,
    project: str,
    zone: str,
    node_id: str,
    accelerator_type: str,
    runtime_version: str,
    provisioning_model: str,
    run_seconds: int | None,
    queue_seconds: int | None,
    network: str,
    subnetwork: str | None,
    service_account_email: str,
    metadata: dict[str, str],
    data_disks: list[str],
    tags: list[str],
    labels: dict[str, str],
) -> dict[str, Any]:
    """The QueuedResource body, field names as in tpu.v2alpha1.json."""
    network_config: dict[str, Any] = {"network": network, "enableExternalIps": True}
    if subnetwork:
        network_config["subnetwork"] = subnetwork
    node = {
        "acceleratorType": accelerator_type,
        "runtimeVersion": runtime_version,
        "networkConfig": network_config,
        "serviceAccount": {"email": service_account_email, "scope": [CLOUD_PLATFORM_SCOPE]},
        "metadata": dict(metadata),
        "dataDisks": [{"sourceDisk": disk, "mode": "READ_WRITE"} for disk in data_disks],
        "tags": list(tags),
        "labels": dict(labels),
    }
    body: dict[str, Any] = {
        "tpu": {"nodeSpec": [{
            "parent": f"projects/{project}/locations/{zone}",
            "nodeId": node_id,
            "node": node,
        }]},
        "provisioningModel": PROVISIONING_MODELS[provisioning_model],
    }
    if provisioning_model == "flex-start":
        # Top level of the QueuedResource, not schedulingConfig: this is what stops billing.
        body["runDuration"] = {"maxRunDuration": f"{int(run_seconds)}s"}
    if queue_seconds:
        body["queueingPolicy"] = {"validUntilDuration": f"{int(queue_seconds)}s"}
    return body


def gcloud_equivalent(body: dict[str, Any], queued_resource_id: str) -> str:
    """The gcloud command from the build log that this body corresponds to."""
    spec = body["tpu"]["nodeSpec"][0]
    zone = spec["parent"].rsplit("/", 1)[-1]
    parts = [
        "gcloud alpha compute tpus queued-resources create", queued_resource_id,
        f"--node-id={spec['nodeId']}", f"--zone={zone}",
        f"--accelerator-type={spec['node']['acceleratorType']}",
        f"--runtime-version={spec['node']['runtimeVersion']}",
        f"--provisioning-model={body['provisioningModel'].lower().replace('_', '-')}",
    ]
    if "runDuration" in body:
        parts.append(f"--max-run-duration={body['runDuration']['maxRunDuration']}")
    return " ".join(parts)


def _is_empty(value: Any) -> bool:
    return value in ({}, [], "", False, None)


def request_differences(sent: Any, observed: Any, path: str = "") -> list[str]:
    """Paths where a queued resource read back from the API differs from the body this stack sends.

    Only what we send is compared: fields the server adds (name, createTime, state, terminationTime,
    node defaults) are ignored, and a missing field equals an empty value we sent, because proto3
    JSON leaves empty maps, lists and strings out of responses.
    """
    if isinstance(sent, dict):
        if not isinstance(observed, dict):
            return [path or "(body)"]
        differences = []
        for key, value in sent.items():
            where = f"{path}.{key}" if path else key
            if key in observed:
                differences += request_differences(value, observed[key], where)
            elif where == "queueingPolicy.validUntilDuration" and "validUntilTime" in observed:
                continue  # the API may keep a relative queue deadline as the absolute time it ends
            elif not _is_empty(value):
                differences.append(where)
        return differences
    if isinstance(sent, list):
        if not isinstance(observed, list) or len(sent) != len(observed):
            return [path]
        return [difference for index, (mine, theirs) in enumerate(zip(sent, observed, strict=True))
                for difference in request_differences(mine, theirs, f"{path}[{index}]")]
    return [] if sent == observed else [path]
