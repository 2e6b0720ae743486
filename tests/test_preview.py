"""`pulumi preview` of a new stack: computed outputs are unknown, and the preview still shows what is sent.

The program runs under mocks in preview mode, where a resource to be created has only its inputs as
outputs (pulumi pkg/resource/deploy/step.go, CreateStep.Apply: a provider without previews returns its
inputs), so an email, a generated key or an IP is unknown, as in a real dry run. The policy pack then judges
that preview through its real entry (tests/policy_entry_check.py), with pulumi_policy's unknown-checking
proxy and the analyzer's advisory note on an unknown read.
"""

from __future__ import annotations

import json

import pytest
from pulumi.runtime import rpc

from tests.policy_venv import entry_reports
from tests.program import dev_config, run, with_section

QR_TYPE = "pulumi-python:dynamic/tpu-vllm:QueuedResource"
QR_URN = f"urn:pulumi:dev::tpu-vllm::tpu-vllm:tpu:TpuNode${QR_TYPE}::tpu-qr"
ADVISORY = "advisory, can't run during preview"
HF_CANARY = "hf_CANARYpreviewTOKEN0123456789abcdefghij"


def node_of(body):
    return body["tpu"]["nodeSpec"][0]["node"]


@pytest.fixture(scope="module")
def dev_preview():
    return run(dev_config(), preview=True)


def test_a_new_stacks_preview_shows_the_body_with_only_the_generated_key_unknown(dev_preview):
    body = dev_preview.one(QR_TYPE)["inputs"]["body"]
    node = node_of(body)
    assert body["provisioningModel"] == "FLEX_START" and body["runDuration"] == {"maxRunDuration": "14400s"}
    # Known from the account id and the project, though the account does not exist yet.
    assert node["serviceAccount"]["email"] == "tpu-vllm-dev-vm@my-proj.iam.gserviceaccount.com"
    assert node["dataDisks"] == [{"sourceDisk": "projects/my-proj/zones/us-west4-a/disks/tpu-vllm-dev-cache",
                                  "mode": "READ_WRITE"}]
    metadata = node["metadata"]
    assert metadata["startup-script"].startswith("#!/usr/bin/env bash")
    assert metadata["tpu-vllm-api-key-secret"] == "projects/my-proj/secrets/tpu-vllm-dev-api-key"
    unknown = sorted(path for path, value in leaves(body) if value == rpc.UNKNOWN)
    # The key tls.PrivateKey makes at deploy, and the digest vllm.image's tag resolves to at the first up.
    assert unknown == ["tpu.nodeSpec[0].node.metadata.ssh-keys", "tpu.nodeSpec[0].node.metadata.tpu-vllm-image"]
    assert dev_preview.output("gcloudEquivalent")["value"].startswith(
        "gcloud alpha compute tpus queued-resources create tpu-vllm-dev --node-id=tpu-vllm-dev")
    # What only the deploy can know stays unknown: nothing invented in a preview.
    assert dev_preview.output("nodeName")["value"] == rpc.UNKNOWN
    # The account is still a dependency, now through depends_on rather than through the email.
    assert "vm-sa" in dev_preview.one(QR_TYPE)["dependencies"]


def test_the_user_supplied_key_leaves_nothing_unknown_in_the_body():
    public = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPreviewUserKey tpu-vllm"
    # With the image pinned by digest in the settings there is nothing for the first up to resolve either.
    pinned = "vllm/vllm-tpu@sha256:" + "e" * 64
    config = {**with_section(with_section(dev_config(), "access", sshPublicKey=public), "vllm", image=pinned),
              "tpu-vllm:sshPrivateKey": "-----BEGIN OPENSSH PRIVATE KEY-----\nx\n-----END OPENSSH PRIVATE KEY-----"}
    body = run(config, secret_keys=["tpu-vllm:sshPrivateKey"], preview=True).one(QR_TYPE)["inputs"]["body"]
    assert [path for path, value in leaves(body) if value == rpc.UNKNOWN] == []
    assert node_of(body)["metadata"]["tpu-vllm-image"] == pinned
    assert node_of(body)["metadata"]["ssh-keys"] == f"tpu-vllm:{public}"


def leaves(value, path=""):
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from leaves(item, f"{path}[{index}]")
    else:
        yield path, value


def test_the_policy_pack_enforces_the_body_rules_on_a_preview(dev_preview):
    config = dev_config()
    tpu = {key: value for key, value in json.loads(config["tpu-vllm:tpu"]).items() if key != "maxRunDuration"}
    spot = run({**config, "tpu-vllm:tpu": json.dumps({**tpu, "provisioningModel": "spot"})}, preview=True)
    props = dev_preview.one(QR_TYPE)["inputs"]
    # A token pasted into a known metadata value, beside the unknown key: still refused at preview.
    leaked = json.loads(json.dumps(props))
    node_of(leaked["body"])["metadata"]["tpu-vllm-image"] = f"vllm/vllm-tpu:nightly {HF_CANARY}"
    assert node_of(leaked["body"])["metadata"]["ssh-keys"] == rpc.UNKNOWN
    reports = entry_reports({
        "dev": ([[QR_TYPE, props, QR_URN]], {}),
        "spot": ([[QR_TYPE, spot.one(QR_TYPE)["inputs"], QR_URN]], {}),
        "leaked": ([[QR_TYPE, leaked, QR_URN]], {}),
    })["cases"]
    assert reports["dev"]["tpu-billing-stops"] == [] and reports["dev"]["metadata-has-no-secrets"] == []
    assert not any(ADVISORY in message for messages in reports["dev"].values() for message in messages)
    [billing] = reports["spot"]["tpu-billing-stops"]
    assert "the queued resource is SPOT, which has no automatic stop" in billing
    leaks = reports["leaked"]["metadata-has-no-secrets"]
    assert any("metadata 'tpu-vllm-image' contains a Hugging Face token" in message for message in leaks)
    assert not any(ADVISORY in message for message in leaks)
    # The stack rule reads the TPU's service account from the preview too, not an advisory note.
    assert reports["dev"]["stack-identities-hold-only-their-grants"] == []


# pulumi-command v1.2.1 (provider/pkg/provider/remote/connection.go, dialWithRetry over retry.Until):
# dialErrorLimit dials of perDialTimeout seconds, at most 5 s of back-off between two.
RETRY_MAX_DELAY_SECONDS = 5


def test_ssh_that_never_answers_fails_the_serving_step_within_five_minutes_of_active(dev_preview):
    from tools.plan.engine import unwrap

    program = run(dev_config())
    connection = unwrap(program.one("command:remote:Command")["inputs"]["connection"])
    dials, per_dial = int(connection["dialErrorLimit"]), int(connection["perDialTimeout"])
    worst_case = dials * per_dial + (dials - 1) * RETRY_MAX_DELAY_SECONDS
    assert worst_case <= 300
    # Still room for a fresh node's sshd and guest agent (a minute or two after ACTIVE).
    assert worst_case >= 150
