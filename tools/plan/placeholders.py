"""What only GCP knows after deploy: the values the offline engine invents and the markers the plan shows."""

from __future__ import annotations

import re
from typing import Any

SECRET_PLACEHOLDER = "[secret]"
PLACEHOLDER_PROJECT = "PLACEHOLDER-set-gcp-project"
# What the engine runs an unset gcp:project as: a valid project id (the settings check it as GCP would),
# shown as PLACEHOLDER_PROJECT. Only when the stack sets none: a real project of this name stays itself.
UNSET_PROJECT_STAND_IN = "unset-project-tpu-vllm-plan"

# What only GCP knows after deploy, as the mocks invent it (plausible, so the program's own
# string handling runs as in a deploy; distinctive, so the plan can mark every use).
MOCK_PROJECT_NUMBER = "123456789012"
# A TPU node's `id` is an int64 in a string; GCP gives every new node a new one.
MOCK_NODE_UID = "4611686018427387904"
MOCK_GKE_ENDPOINT = "203.0.113.20"
MOCK_GKE_CA = "bW9jay1jbHVzdGVyLWNh"  # base64("mock-cluster-ca"): a public certificate, not a secret
MOCK_GKE_VERSION = "1.34.1-gke.1829001"
MOCK_GKE_CHANNEL_DEFAULTS = {"RAPID": "1.35.0-gke.1795000", "REGULAR": MOCK_GKE_VERSION,
                             "STABLE": "1.33.5-gke.1308000"}
MOCK_LOAD_BALANCER_IP = "10.128.0.50"
MOCK_GATEWAY_IP = "10.128.0.60"
# The manifest digest a floating tag resolves to at the first `pulumi up` (components/core/image_digest.py).
MOCK_IMAGE_DIGEST_HEX = "d16e57" * 10 + "d16e"
MOCK_EXTERNAL_IP = "203.0.113.10"  # TEST-NET-3: never a real address
MOCK_INTERNAL_IP = "10.128.0.2"
MOCK_STATE = "ACTIVE"
# A Compute Engine instance's status once its create returns (the provider waits for RUNNING).
MOCK_INSTANCE_STATUS = "RUNNING"
# The incarnation the compute path gives each create (components/vm/compute_instance_provider.py): uuid4().hex.
MOCK_INCARNATION = "1ca4a7105" + "0" * 23
# An RFC 3339 time as the TPU API gives it, so what reads it (the dashboard's run tiles) runs as in a deploy.
MOCK_TERMINATION_TIME = "2099-01-01T00:00:00Z"
MOCK_TERMINATION_EPOCH = "4070908800"  # the same instant in seconds: the run tiles' and alert's PromQL
MOCK_PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAmockmockmock tpu-vllm"

# How the plan shows them: as marked placeholders, never as if they were real.
PLACEHOLDERS = {
    MOCK_EXTERNAL_IP: "<external-ip>",
    MOCK_INTERNAL_IP: "<internal-ip>",
    MOCK_PROJECT_NUMBER: "<project-number>",
    MOCK_TERMINATION_TIME: "<run-end-time>",
    MOCK_TERMINATION_EPOCH: "<run-end-epoch>",
    MOCK_PUBLIC_KEY: "<generated-ssh-public-key>",
    MOCK_NODE_UID: "<node-uid>",
    MOCK_GKE_ENDPOINT: "<cluster-endpoint>",
    MOCK_LOAD_BALANCER_IP: "<load-balancer-ip>",
    MOCK_GATEWAY_IP: "<gateway-ip>",
    MOCK_IMAGE_DIGEST_HEX: "<image-digest>",
    MOCK_INCARNATION: "<incarnation>",
}
# A state is a common word: only a whole value equal to it is a placeholder.
WHOLE_VALUE_PLACEHOLDERS = {MOCK_STATE: "<queued-resource-state>", MOCK_INSTANCE_STATUS: "<instance-status>"}
PLACEHOLDER_MEANINGS = {
    "<external-ip>": "the node's external IP, given by GCP when the node is created",
    "<internal-ip>": "the node's internal IP, given by GCP when the node is created",
    "<project-number>": "your project's number",
    "<run-end-time>": "when the run ends (runDuration.terminationTime), set when the node becomes ACTIVE",
    "<run-end-epoch>": "the run's end in seconds since 1970, in the dashboard's run tiles and the run-end alert",
    "<generated-ssh-public-key>": "the ED25519 key the stack generates at deploy",
    "<queued-resource-state>": "the queued resource's state at deploy time",
    "<instance-status>": "the Compute Engine instance's status at deploy time",
    "<incarnation>": "the id each create of the compute path's instance gets (in its description), new per create",
    "<node-uid>": "the TPU node's own id, new for every node GCP creates",
    "<cluster-endpoint>": "the GKE control plane's address",
    "<load-balancer-ip>": "the internal load balancer's address, given when it is created",
    "<gateway-ip>": "the inference gateway's internal address, reserved when it is created",
    "<image-digest>": "the sha256 manifest digest vllm.image's tag resolves to at the first pulumi up, then pinned "
                      "in state (every replica and recycled node pulls it)",
}


def mark_placeholders(value: Any) -> Any:
    """Every invented value replaced by its placeholder, wherever it ended up."""
    if isinstance(value, str):
        if value in WHOLE_VALUE_PLACEHOLDERS:
            return WHOLE_VALUE_PLACEHOLDERS[value]
        for invented, placeholder in PLACEHOLDERS.items():
            # Not inside a longer number: 10.128.0.25 is not 10.128.0.2.
            value = re.sub(rf"(?<![\d.]){re.escape(invented)}(?![\d])", placeholder, value)
        return value
    if isinstance(value, dict):
        return {key: mark_placeholders(item) for key, item in value.items()}
    if isinstance(value, list):
        return [mark_placeholders(item) for item in value]
    return value



def replace_everywhere(value: Any, invented: str, shown: str) -> Any:
    """Every use of a distinctive invented value replaced, inside longer ids too (a bucket named after the project)."""
    if isinstance(value, str):
        return value.replace(invented, shown)
    if isinstance(value, dict):
        return {key: replace_everywhere(item, invented, shown) for key, item in value.items()}
    if isinstance(value, list):
        return [replace_everywhere(item, invented, shown) for item in value]
    return value
