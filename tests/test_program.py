"""The whole program under Pulumi mocks: what it registers, wires and never leaks."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import replace

import pytest

from components import settings
from components.vm import container
from components.vm.billing_notice import still_billing
from components.vm.serving_step import SERVE_SCRIPT, serve_stdin
from tests import program as harness
from tests.discovery_schema import validate_queued_resource
from tests.wing_values import vm_serving
from tools.plan import provider_answers as answers
from tools.plan.engine import is_wrapped_secret, unwrap
from tools.plan.placeholders import MOCK_IMAGE_DIGEST_HEX, MOCK_NODE_UID, MOCK_TERMINATION_TIME

QR_TYPE = "pulumi-python:dynamic/tpu-vllm:QueuedResource"
HF_CANARY = "hf_CANARYprogramTOKEN9876543210"
API_CANARY = "CANARYprogramAPIKEY0123456789abcdefghijklmnop"
KEY_CANARY = "-----BEGIN OPENSSH PRIVATE KEY-----\nCANARYprivateKEY\n-----END OPENSSH PRIVATE KEY-----\n"

SSH = {"access": {"sshSourceRanges": ["198.51.100.7/32"]}}


@pytest.fixture(scope="module")
def dev():
    return harness.run(harness.dev_config())


@pytest.fixture(scope="module")
def canary():
    """A stack-kept HF token and canary generated secrets; Secret Manager's lookup fails if it is called at all
    (test_a_stack_managed_token_needs_no_lookup reads this same run)."""
    config = {**harness.dev_config(), "tpu-vllm:hfToken": HF_CANARY}
    return harness.run(
        config, secret_keys=["tpu-vllm:hfToken"],
        fixed_outputs={"random:index/randomPassword:RandomPassword": {"result": API_CANARY},
                       "tls:index/privateKey:PrivateKey": {"privateKeyOpenssh": KEY_CANARY}},
        failing_calls={answers.GET_SECRET: "must not be called"},
    )


def body_of(program):
    return program.one(QR_TYPE)["inputs"]["body"]


def test_dev_stack_registers_one_flex_start_queued_resource(dev):
    queued = dev.one(QR_TYPE)
    body = queued["inputs"]["body"]
    assert body["provisioningModel"] == "FLEX_START"
    assert body["runDuration"] == {"maxRunDuration": "14400s"}
    spec = body["tpu"]["nodeSpec"][0]
    assert spec["parent"] == "projects/my-proj/locations/us-west4-a"
    assert spec["node"]["acceleratorType"] == "v5litepod-1"
    assert spec["node"]["runtimeVersion"] == "v2-alpha-tpuv5-lite"
    assert validate_queued_resource(body) == []
    assert queued["delete_before_replace"] is True


def test_node_runs_as_the_stacks_own_service_account(dev):
    account = dev.one("gcp:serviceaccount/account:Account")
    node = body_of(dev)["tpu"]["nodeSpec"][0]["node"]
    assert node["serviceAccount"] == {
        "email": f"{account['inputs']['accountId']}@my-proj.iam.gserviceaccount.com",
        "scope": ["https://www.googleapis.com/auth/cloud-platform"]}


def test_accessor_binding_is_on_each_secret_and_nowhere_on_the_project(dev):
    email = body_of(dev)["tpu"]["nodeSpec"][0]["node"]["serviceAccount"]["email"]
    bindings = dev.of_type("gcp:secretmanager/secretIamMember:SecretIamMember")
    assert sorted(b["inputs"]["secretId"] for b in bindings) == [
        "hf-token", "tpu-vllm-dev-api-key", "tpu-vllm-dev-ssh-host-key"]
    for binding in bindings:
        assert binding["inputs"]["role"] == "roles/secretmanager.secretAccessor"
        assert binding["inputs"]["member"] == f"serviceAccount:{email}"
    # On the project, only the Ops Agent's two writer roles (monitoring.enabled; tests/test_monitoring.py).
    project_roles = {r["inputs"]["role"] for r in dev.registrations if r["type"].startswith("gcp:projects/iAM")}
    assert project_roles == {"roles/monitoring.metricWriter", "roles/logging.logWriter"}
    metadata = body_of(dev)["tpu"]["nodeSpec"][0]["node"]["metadata"]
    assert metadata["tpu-vllm-hf-token-secret"] == "projects/my-proj/secrets/hf-token"
    assert metadata["tpu-vllm-api-key-secret"] == "projects/my-proj/secrets/tpu-vllm-dev-api-key"


def test_required_apis_are_enabled_and_never_disabled_on_destroy(dev):
    services = dev.of_type("gcp:projects/service:Service")
    assert {s["inputs"]["service"] for s in services} >= {
        "tpu.googleapis.com", "secretmanager.googleapis.com", "compute.googleapis.com"}
    assert all(s["inputs"]["disableOnDestroy"] is False for s in services)


def test_startup_script_is_the_static_file(dev):
    metadata = body_of(dev)["tpu"]["nodeSpec"][0]["node"]["metadata"]
    assert metadata["startup-script"] == (harness.ROOT / "startup/startup.sh").read_text()


def test_the_serving_port_is_closed_to_the_internet_by_default(dev):
    rules = dev.of_type("gcp:compute/firewall:Firewall")
    tag = body_of(dev)["tpu"]["nodeSpec"][0]["node"]["tags"]
    assert tag == ["tpu-vllm-dev"]
    for rule in rules:
        assert rule["inputs"]["targetTags"] == tag
        if rule["inputs"]["allows"][0]["ports"] == ["8000"]:
            assert "0.0.0.0/0" not in rule["inputs"]["sourceRanges"]
    assert {r["name"] for r in rules} == {"firewall-ssh", "firewall-serving-internal"}


@pytest.fixture(scope="module")
def served_and_mailed():
    """A listed serving range (a firewall rule and externalEndpoint) and an alert email (a notification channel on
    every policy): settings that touch disjoint resources, so one run serves the tests of each. The same request
    in tests/test_stack_outputs.py (externalEndpoint exported) and tests/test_monitoring.py (the email's channel)."""
    config = harness.with_section(harness.dev_config(), "access", servingSourceRanges=["198.51.100.0/24"])
    return harness.run(harness.with_section(config, "monitoring", notificationEmail="ops@example.com"))


def test_listed_serving_ranges_get_their_own_rule_and_an_external_endpoint(served_and_mailed):
    program = served_and_mailed
    external = program.named("firewall-serving-external")
    assert external["inputs"]["sourceRanges"] == ["198.51.100.0/24"]
    assert program.output("externalEndpoint")["value"] == "http://203.0.113.10:8000/v1"


def test_cache_disk_is_balanced_pd_attached_read_write(dev):
    disk = dev.one("gcp:compute/disk:Disk")
    assert disk["inputs"]["type"] == "pd-balanced" and disk["inputs"]["zone"] == "us-west4-a"
    assert disk["retain_on_delete"] is False
    attached = body_of(dev)["tpu"]["nodeSpec"][0]["node"]["dataDisks"]
    assert attached == [{"sourceDisk": f"projects/my-proj/zones/us-west4-a/disks/{disk['inputs']['name']}",
                         "mode": "READ_WRITE"}]


def test_keep_on_destroy_retains_the_disk():
    program = harness.run(harness.with_section(harness.dev_config(), "cache", keepOnDestroy=True))
    assert program.one("gcp:compute/disk:Disk")["retain_on_delete"] is True


def test_remote_command_depends_on_the_node_and_runs_the_rendered_command(dev):
    serve = dev.one("command:remote:Command")
    inputs = serve["inputs"]
    assert "tpu-qr" in serve["dependencies"]
    # The connection carries the private key, so Pulumi keeps the whole object secret.
    assert is_wrapped_secret(inputs["connection"])
    connection = inputs["connection"]["value"]
    assert (connection["host"], connection["user"]) == ("203.0.113.10", "tpu-vllm")
    assert inputs["triggers"][0] == MOCK_NODE_UID
    cfg = settings.load(SSH, "my-proj", "dev").settings
    # stdin: serve.sh, then the rendered files (nginx.conf, the front's runner, both units), then `main`.
    # Then the note serve.sh prints last on a failure: the TPU bills until the run's end, and the ways out.
    note = still_billing(MOCK_TERMINATION_TIME, 0.6)
    # The serving step runs the image by the digest the tag resolved to at the first up, not the tag.
    served = vm_serving(cfg)
    pinned = replace(served, spec=replace(served.spec, vllm_image=f"vllm/vllm-tpu@sha256:{MOCK_IMAGE_DIGEST_HEX}"))
    assert inputs["stdin"] == serve_stdin(pinned, note)
    assert inputs["stdin"].startswith(SERVE_SCRIPT.read_text().rstrip("\n"))
    assert inputs["stdin"].endswith("\nmain\n")
    assert inputs["create"].endswith(shlex.join(container.docker_run_args(pinned)))
    assert cfg.vllm.image not in inputs["create"]
    metadata = dev.one("pulumi-python:dynamic/tpu-vllm:QueuedResource")["inputs"]["body"]["tpu"]["nodeSpec"][0][
        "node"]["metadata"]
    assert metadata["tpu-vllm-image"] == pinned.spec.vllm_image  # the boot's pull: the same bytes
    assert "delete" not in inputs  # destroy never needs SSH to a node that may be gone


def test_the_serving_step_reruns_on_every_new_node_not_only_on_a_new_name(dev):
    # After a run ends GCP makes a new node under the same name: only its id tells them apart.
    first = dev.one("command:remote:Command")["inputs"]["triggers"]
    assert first[0] == MOCK_NODE_UID
    assert "projects/my-proj/locations/us-west4-a/nodes/tpu-vllm-dev" not in first
    next_node = harness.run(harness.dev_config(), fixed_outputs={QR_TYPE: {"nodeUid": "4611686018427387905"}})
    second = next_node.one("command:remote:Command")["inputs"]["triggers"]
    assert second[0] == "4611686018427387905" and second[1:] == first[1:]


def test_outputs_for_a_newcomer(dev):
    assert dev.output("sshTunnelCommand")["value"] == (
        "ssh -i ~/.ssh/tpu-vllm-dev -F none -o UserKnownHostsFile=~/.ssh/tpu-vllm-dev.known_hosts "
        "-o StrictHostKeyChecking=yes -o HostKeyAlias=tpu-vllm-dev -o GlobalKnownHostsFile=/dev/null "
        "-o ExitOnForwardFailure=yes -o ServerAliveInterval=30 -o ServerAliveCountMax=3 "
        "-N -L 127.0.0.1:8000:127.0.0.1:8000 tpu-vllm@203.0.113.10")
    assert dev.output("apiKey")["secret"] is True
    assert dev.output("sshPrivateKey")["secret"] is True
    assert dev.output("kvTokens")["value"] == 321_344
    assert dev.output("costPerHourUsd")["value"] == 0.6
    assert dev.output("maxSpendPerRunUsd")["value"] == 2.4
    assert dev.output("vllmServeCommand")["value"].startswith("vllm serve google/gemma-4-E2B-it --dtype bfloat16")


def test_canaries_appear_only_as_pulumi_secrets(canary):
    for needle in (HF_CANARY, API_CANARY, "CANARYprivateKEY"):
        for registration in canary.registrations:
            assert harness.plain_occurrences(registration["inputs"], needle) == [], registration["name"]
        for name, output in canary.data["outputs"].items():
            assert needle not in json.dumps(output["value"]) or output["secret"], name
        assert needle not in canary.stderr


def test_canaries_are_not_in_metadata_the_startup_script_or_command_text(canary):
    metadata = body_of(canary)["tpu"]["nodeSpec"][0]["node"]["metadata"]
    serve = canary.one("command:remote:Command")["inputs"]
    text = json.dumps(metadata) + serve["create"] + serve["stdin"]
    for needle in (HF_CANARY, API_CANARY, "CANARYprivateKEY"):
        assert needle not in text


def test_a_stack_managed_hf_token_lives_in_its_own_secret_version(canary):
    versions = {v["name"]: v for v in canary.of_type("gcp:secretmanager/secretVersion:SecretVersion")}
    assert set(versions) == {"secrets-hf-token-version", "secrets-api-key-version", "ssh-host-key-secret-version"}
    assert is_wrapped_secret(versions["secrets-hf-token-version"]["inputs"]["secretData"])
    assert is_wrapped_secret(versions["secrets-api-key-version"]["inputs"]["secretData"])
    secret = canary.named("secrets-hf-token")
    assert secret["inputs"]["replication"] == {"auto": {}}
    assert secret["inputs"]["labels"]["app"] == "tpu-vllm"
    metadata = body_of(canary)["tpu"]["nodeSpec"][0]["node"]["metadata"]
    assert metadata["tpu-vllm-hf-token-secret"] == "projects/my-proj/secrets/tpu-vllm-dev-hf-token"


@pytest.fixture(scope="module")
def user_key_alerts_off():
    """The user's own SSH key pair (the client key, the serving step's connection) and monitoring.alerts off (the
    alert policies): settings that touch disjoint resources, so one run serves the tests of each
    (tests/test_monitoring.py's opt-out reads the same request)."""
    config = harness.with_section(harness.dev_config(), "access",
                                  sshPublicKey="ssh-ed25519 AAAAuserkey me@laptop")
    config["tpu-vllm:sshPrivateKey"] = KEY_CANARY
    config = harness.with_section(config, "monitoring", alerts=False)
    return harness.run(config, secret_keys=["tpu-vllm:sshPrivateKey"])


def test_a_user_supplied_ssh_key_replaces_the_generated_one(user_key_alerts_off):
    program = user_key_alerts_off
    assert program.problems is None
    # Only the node's host key is generated (host_key.py); the client key is the user's.
    assert [key["name"] for key in program.of_type("tls:index/privateKey:PrivateKey")] == ["ssh-host-key-key"]
    metadata = body_of(program)["tpu"]["nodeSpec"][0]["node"]["metadata"]
    assert metadata["ssh-keys"] == "tpu-vllm:ssh-ed25519 AAAAuserkey me@laptop"
    assert harness.plain_occurrences(program.one("command:remote:Command")["inputs"], "CANARYprivateKEY") == []


def test_a_bad_config_registers_nothing():
    program = harness.run(harness.with_section(harness.dev_config(), "vllm", gpuMemoryUtilization=0.95))
    assert program.problems and "tpu-vllm:vllm.gpuMemoryUtilization = 0.95" in program.problems[0]
    assert program.registrations == []  # settings are checked before the first resource


def test_missing_project_is_a_clear_error():
    config = {k: v for k, v in harness.dev_config().items() if k != "gcp:project"}
    config["gcp:project"] = ""
    program = harness.run(config)
    [problem] = program.problems
    assert "gcp:project: is not set; run `pulumi config set gcp:project YOUR_PROJECT`" in problem
    assert program.registrations == []


def test_a_missing_hand_made_hf_secret_stops_the_preview_with_the_fix():
    program = harness.run(harness.dev_config(), failing_calls={
        answers.GET_SECRET: answers.secret_absent("my-proj", "hf-token")})
    [problem] = program.problems
    assert "tpu-vllm:hfTokenSecret = 'hf-token'" in problem
    # The provider's own words, without the SDK's, engine's and bridge's wrapping around them.
    assert "(projects/my-proj/secrets/hf-token not found)" in problem and "invocation of" not in problem
    assert "gcloud secrets create hf-token --data-file=- --project=my-proj" in problem
    assert "pulumi config set --secret tpu-vllm:hfToken" in problem
    # The lookup comes before any secret, binding or TPU is declared.
    registered = {r["type"] for r in program.registrations}
    assert not registered & {"gcp:secretmanager/secretIamMember:SecretIamMember", "gcp:compute/disk:Disk",
                             "pulumi-python:dynamic/tpu-vllm:QueuedResource"}


def test_a_stack_managed_token_needs_no_lookup(canary):
    assert canary.problems is None


def test_a_stack_name_gcp_would_refuse_still_gives_valid_unique_ids():
    program = harness.run(harness.dev_config(), stack="My_Team.prod-eu-with-a-long-name")
    assert program.problems is None
    compute_name = r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?"
    account = program.one("gcp:serviceaccount/account:Account")["inputs"]["accountId"]
    assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])", account) and 6 <= len(account) <= 30, account
    names = [program.one("gcp:compute/disk:Disk")["inputs"]["name"]]
    names += [rule["inputs"]["name"] for rule in program.of_type("gcp:compute/firewall:Firewall")]
    spec = body_of(program)["tpu"]["nodeSpec"][0]
    names += [spec["nodeId"], program.one(QR_TYPE)["inputs"]["queuedResourceId"], *spec["node"]["tags"]]
    for name in names:
        assert re.fullmatch(compute_name, name), name
    for secret in program.of_type("gcp:secretmanager/secret:Secret"):
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,255}", secret["inputs"]["secretId"])
    for labels in [spec["node"]["labels"], program.one("gcp:compute/disk:Disk")["inputs"]["labels"]]:
        assert all(re.fullmatch(r"[a-z0-9_-]{0,63}", value) for value in labels.values()), labels
    assert len(set(names)) == len(names) - 1  # the node id and the queued resource id are the same


def node_metadata_of(program):
    return unwrap(body_of(program))["tpu"]["nodeSpec"][0]["node"]["metadata"]


def test_project_wide_ssh_keys_are_blocked_on_the_node(dev):
    metadata = node_metadata_of(dev)
    assert metadata["enable-oslogin"] == "FALSE"
    assert metadata["block-project-ssh-keys"] == "TRUE"


def test_every_up_prints_how_to_narrow_ssh_while_it_is_open(dev):
    [warning] = [w for w in dev.logged_warnings if "allowSshFromAnywhere" in w]
    assert settings.NARROW_SSH_COMMAND in warning and "\n" not in settings.NARROW_SSH_COMMAND
    assert settings.NARROW_SSH_COMMAND in harness.DEV_CONFIG.read_text()  # the same line where the opt-in is


@pytest.fixture(scope="module")
def narrowed():
    """SSH from one /24 written with host bits, an office range for serving, the user's own hf secret id."""
    config = harness.with_section(harness.dev_config(), "access", sshSourceRanges=["198.51.100.7/24"],
                                  allowSshFromAnywhere=False, servingSourceRanges=["203.0.113.9/24"])
    return harness.run({**config, "tpu-vllm:hfTokenSecret": "my-hf-token"})


def test_narrowed_ssh_prints_no_ssh_warning(narrowed):
    assert narrowed.problems is None
    assert not [w for w in narrowed.logged_warnings if "allowSshFromAnywhere" in w or "open to" in w]


def test_ranges_reach_gcp_in_one_spelling(narrowed):
    assert narrowed.named("firewall-ssh")["inputs"]["sourceRanges"] == ["198.51.100.0/24"]
    assert narrowed.named("firewall-serving-external")["inputs"]["sourceRanges"] == ["203.0.113.0/24"]
    assert any("198.51.100.7/24 has host bits set" in w and "198.51.100.7/32" in w for w in narrowed.logged_warnings)


def test_a_plain_hf_token_secret_id_is_shown(narrowed):
    assert narrowed.output("hfTokenSource")["value"].startswith("your secret 'my-hf-token'")
    assert node_metadata_of(narrowed)["tpu-vllm-hf-token-secret"] == "projects/my-proj/secrets/my-hf-token"
    assert not is_wrapped_secret(body_of(narrowed))


SECRET_ID_CANARY = "CANARY-secret-id-4711"


def test_a_secret_hf_token_secret_id_stays_secret_everywhere():
    config = {**harness.dev_config(), "tpu-vllm:hfTokenSecret": SECRET_ID_CANARY}
    program = harness.run(config, secret_keys=["tpu-vllm:hfTokenSecret"])
    assert program.problems is None
    for registration in program.registrations:
        assert harness.plain_occurrences(registration["inputs"], SECRET_ID_CANARY) == [], registration["name"]
    assert is_wrapped_secret(body_of(program))  # the node metadata names the secret
    assert node_metadata_of(program)["tpu-vllm-hf-token-secret"] == f"projects/my-proj/secrets/{SECRET_ID_CANARY}"
    accessor = program.named("secrets-hf-token-accessor")["inputs"]
    assert is_wrapped_secret(accessor["secretId"])
    for name, output in program.data["outputs"].items():
        assert SECRET_ID_CANARY not in json.dumps(output["value"]) or output["secret"], name
    assert "kept as a Pulumi secret" in program.output("hfTokenSource")["value"]
    assert SECRET_ID_CANARY not in program.stderr + json.dumps(program.logged_warnings)


def test_a_missing_secret_hf_token_secret_is_reported_without_its_id():
    config = {**harness.dev_config(), "tpu-vllm:hfTokenSecret": SECRET_ID_CANARY}
    program = harness.run(config, secret_keys=["tpu-vllm:hfTokenSecret"],
                          failing_calls={answers.GET_SECRET: answers.secret_absent("my-proj", SECRET_ID_CANARY)})
    [problem] = program.problems
    assert "tpu-vllm:hfTokenSecret = [secret]" in problem and "not found" in problem
    assert 'gcloud secrets create "$(pulumi config get tpu-vllm:hfTokenSecret)"' in problem
    assert SECRET_ID_CANARY not in problem + program.stderr


def test_a_section_set_with_secret_and_a_plaintext_token_are_refused_without_quoting_them():
    config = harness.with_section(harness.dev_config(), "access", sshSourceRanges=["0.0.0.0/1", "128.0.0.0/1"],
                                  sshUser="canaryuser")
    program = harness.run({**config, "tpu-vllm:hfToken": HF_CANARY}, secret_keys=["tpu-vllm:access"])
    assert program.problems and program.registrations == []
    [problem] = program.problems
    assert "tpu-vllm:access: is set with --secret" in problem and "without --secret" in problem
    assert "tpu-vllm:hfToken: is stored in plaintext" in problem
    assert "pulumi config set --secret tpu-vllm:hfToken" in problem
    for needle in ("canaryuser", "128.0.0.0/1", HF_CANARY):
        assert needle not in problem + program.stderr
