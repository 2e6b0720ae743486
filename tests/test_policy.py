"""The CrossGuard rules on the dev stack's resources (must pass) and on violating variants (must report).

Every variant runs twice: through the pure functions (policy/rules.py names them), and through the real pack entry
(policy/__main__.py under pulumi-policy, in the pack's own venv, all variants in one subprocess).
"""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from policy import (
    firewall_exposure,
    gke_rules,
    memory_cap,
    resource_view,
    rules,
    secret_leaks,
    shell_commands,
    tpu_billing,
)
from tests import program as harness
from tests.policy_venv import entry_reports
from tools.plan.engine import unwrap

ROOT = Path(__file__).resolve().parent.parent
QR = "pulumi-python:dynamic/tpu-vllm:QueuedResource"
COMMAND = "command:remote:Command"
STACK_URN = "urn:pulumi:dev::tpu-vllm::"
HEX_KEY = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"  # 64 lowercase hex


def with_urns(registrations):
    """(type, props, urn) for each resource, its URN carrying its parents' types as Pulumi writes them."""
    by_name = {r["name"]: r for r in registrations}

    def chain(registration):
        parent = by_name.get(registration["parent"])
        return (chain(parent) + "$" if parent else "") + registration["type"]

    return [(r["type"], unwrap(r["inputs"]), f"{STACK_URN}{chain(r)}::{r['name']}")
            for r in registrations if r["inputs"]]


def program_resources(config):
    return with_urns(harness.run(config).registrations)


@pytest.fixture(scope="module")
def dev_resources():
    return program_resources(harness.dev_config())


@pytest.fixture(scope="module")
def port_8080_resources():
    return program_resources(harness.with_section(harness.dev_config(), "vllm", port=8080))


@pytest.fixture(scope="module")
def opted_in_resources():
    """SSH and serving both opened to the internet by the stack's own opt-ins, in several ranges each."""
    return program_resources(harness.with_section(
        harness.dev_config(), "access", sshSourceRanges=["0.0.0.0/0", "::/0", "198.51.100.7/32"],
        servingSourceRanges=["0.0.0.0/1", "128.0.0.0/1"], allowPublicServing=True))


def of_type(resources, type_):
    return next(props for t, props, _ in resources if t == type_)


def reports(resources, config=None):
    """What each policy reports, computed with the pure functions."""
    found = {name: [m for type_, props, _ in resources for m in check(type_, props, config)]
             for name, (check, _) in rules.RESOURCE_RULES.items()}
    seen = [resource_view.Seen(*resource) for resource in resources]
    found.update({name: check(seen, config) for name, (check, _) in rules.STACK_RULES.items()})
    return found


def hand_rule(name, **props):
    """A firewall rule written by hand elsewhere in a program (not by the stack's NodeFirewall)."""
    props = {"name": name, "direction": "INGRESS", "description": "", **props}
    return (resource_view.FIREWALL_TYPE, props, f"{STACK_URN}{resource_view.FIREWALL_TYPE}::{name}")


def tcp(*ports):
    return [{"protocol": "tcp", "ports": list(ports)}]


def stack_rule(resources, rule):
    """The stack's own firewall rule (firewall-ssh, firewall-serving-internal), as a copy."""
    return copy.deepcopy(next(r for r in resources if r[2].endswith(f"::firewall-{rule}")))


def replace(resources, old, new):
    return [new if r[2] == old[2] else r for r in resources]


def with_metadata(resources, **extra):
    resources = copy.deepcopy(resources)
    props = of_type(resources, QR)
    props["body"]["tpu"]["nodeSpec"][0]["node"]["metadata"].update(extra)
    return resources


def with_serve_command(resources, edit):
    resources = copy.deepcopy(resources)
    props = of_type(resources, COMMAND)
    props["create"] = edit(props["create"])
    return resources


def tpu_member(resources):
    return "serviceAccount:" + of_type(resources, QR)["body"]["tpu"]["nodeSpec"][0]["node"]["serviceAccount"]["email"]


Build = Callable[[dict], tuple[list, dict]]
# name -> (builds resources and policy config from the fixtures, the policy that must report, text it must say)
CASES: dict[str, tuple[Build, str | None, str | None]] = {}


def case(name, policy=None, says=None):
    def register(build):
        CASES[name] = (build, policy, says)
        return build
    return register


SSH_OPEN = "SSH (tcp:22) is open to the internet"
SERVING_OPEN = "the serving port (tcp:8000) is open to the internet"


@case("dev stack")
def _(f):
    return f["dev"], {}


@case("dev stack, ssh opt-in removed from the description", "firewall-not-open-to-the-world", SSH_OPEN)
def _(f):
    rule = stack_rule(f["dev"], "ssh")
    rule[1]["description"] = "tpu-vllm ssh"
    return replace(f["dev"], rule, rule), {}


@case("dev stack, an organisation refuses the stack's opt-ins", "firewall-not-open-to-the-world",
      "0.0.0.0/0 reaches every public IPv4 address (firewall tpu-vllm-dev-ssh)")
def _(f):
    return f["dev"], {"honorStackOptIns": False}


@case("the stack's own opt-ins for SSH and serving, several ranges each")
def _(f):
    return f["opted in"], {}


@case("the stack's own opt-ins refused by the organisation", "firewall-not-open-to-the-world",
      "0.0.0.0/1 and 128.0.0.0/1 together reach every public IPv4 address (firewall tpu-vllm-dev-serving-external)")
def _(f):
    return f["opted in"], {"honorStackOptIns": False}


@case("dev stack, policy config allows open SSH")
def _(f):
    return f["dev"], {"honorStackOptIns": False, "allowOpenSsh": True}


for protocol in ("6", "all", "TCP", " tcp "):
    @case(f"protocol {protocol!r} opens SSH", "firewall-not-open-to-the-world", SSH_OPEN)
    def _(f, protocol=protocol):
        allows = [{"protocol": protocol, "ports": ["22"]}]
        return [*f["dev"], hand_rule("p", sourceRanges=["0.0.0.0/0"], allows=allows)], {}


@case("protocol udp does not open SSH")
def _(f):
    return [*f["dev"], hand_rule("u", sourceRanges=["0.0.0.0/0"], allows=[{"protocol": "udp", "ports": ["22"]}])], {}


@case("protocol all without ports opens the serving port", "firewall-not-open-to-the-world", SERVING_OPEN)
def _(f):
    return [*f["dev"], hand_rule("everything", sourceRanges=["0.0.0.0/0"], allows=[{"protocol": "all"}])], {}


@case("no sourceRanges means from anywhere", "firewall-not-open-to-the-world", SSH_OPEN)
def _(f):
    return [*f["dev"], hand_rule("nosource", allows=[{"protocol": "tcp", "ports": ["22"]}])], {}


@case("no sourceRanges but source tags: only the VPC's tagged instances")
def _(f):
    return [*f["dev"], hand_rule("tags", sourceTags=["bastion"], allows=[{"protocol": "tcp", "ports": ["22"]}])], {}


@case("egress is not a way in")
def _(f):
    return [*f["dev"], hand_rule("out", direction="EGRESS", destinationRanges=["0.0.0.0/0"],
                                 allows=[{"protocol": "tcp", "ports": ["22"]}])], {}


@case("the two /1 halves in one rule", "firewall-not-open-to-the-world",
      "0.0.0.0/1 and 128.0.0.0/1 together reach every public IPv4 address")
def _(f):
    return [*f["dev"], hand_rule("halves", sourceRanges=["0.0.0.0/1", "128.0.0.0/1"],
                                 allows=[{"protocol": "tcp", "ports": ["8000"]}])], {}


@case("the two /1 halves in two rules", "firewall-not-open-to-the-world", "(firewall half-a, half-b)")
def _(f):
    return [*f["dev"],
            hand_rule("half-a", sourceRanges=["0.0.0.0/1"], allows=[{"protocol": "tcp", "ports": ["8000"]}]),
            hand_rule("half-b", sourceRanges=["128.0.0.0/1"], allows=[{"protocol": "tcp", "ports": ["8000"]}])], {}


for spelled in ("::/0", "0.0.0.0/00", "1.2.3.4/0", "::ffff:0.0.0.0/96", "0.0.0.0/1"):
    @case(f"{spelled} on the serving port", "firewall-not-open-to-the-world", SERVING_OPEN)
    def _(f, spelled=spelled):
        return [*f["dev"], hand_rule("odd", sourceRanges=[spelled], allows=tcp("8000"))], {}


@case("one office range on the serving port")
def _(f):
    return [*f["dev"], hand_rule("office", sourceRanges=["198.51.100.0/24", "8.8.4.0/24"],
                                 allows=[{"protocol": "tcp", "ports": ["8000"]}])], {}


for ports in (["7000-9000"], ["0-65535"], ["443", "7999-8001"]):
    @case(f"port range {ports} covers the serving port", "firewall-not-open-to-the-world", SERVING_OPEN)
    def _(f, ports=ports):
        return [*f["dev"], hand_rule("range", sourceRanges=["0.0.0.0/0"], allows=tcp(*ports))], {}


@case("the serving port is read from the stack: front.listenPort 8080", "firewall-not-open-to-the-world",
      "the serving port (tcp:8080) is open to the internet")
def _(f):
    return [*f["port 8080"], hand_rule("p8080", sourceRanges=["0.0.0.0/0"],
                                       allows=[{"protocol": "tcp", "ports": ["8080"]}])], {}


@case("the stack's internal rule opened to 0.0.0.0/0 on port 8080", "firewall-not-open-to-the-world",
      "the serving port (tcp:8080) is open to the internet: 0.0.0.0/0 reaches every public IPv4 address "
      "(firewall tpu-vllm-dev-serving-internal)")
def _(f):
    rule = stack_rule(f["port 8080"], "serving-internal")
    rule[1]["sourceRanges"] = ["0.0.0.0/0"]
    return replace(f["port 8080"], rule, rule), {}


@case("the serving port is read from the serve command's --port=8002", "firewall-not-open-to-the-world",
      "the serving port (tcp:8002) is open to the internet")
def _(f):
    resources = with_serve_command(f["dev"], lambda text: text + " --port=8002")
    return [*resources, hand_rule("p8002", sourceRanges=["0.0.0.0/0"], allows=tcp("8002"))], {}


@case("an opt-in written into a hand-made rule is not the stack's", "firewall-not-open-to-the-world", SSH_OPEN)
def _(f):
    description = stack_rule(f["dev"], "ssh")[1]["description"]
    return [*f["dev"], hand_rule("forged", description=description, sourceRanges=["0.0.0.0/0"],
                                 allows=[{"protocol": "tcp", "ports": ["22"]}])], {}


@case("the old opt-in marker clears nothing", "firewall-not-open-to-the-world", SSH_OPEN)
def _(f):
    rule = stack_rule(f["dev"], "ssh")
    rule[1]["description"] = "tpu-vllm ssh; 0.0.0.0/0 explicitly allowed by tpu-vllm:access.allowSshFromAnywhere"
    return replace(f["dev"], rule, rule), {}


@case("the SSH opt-in does not clear the serving port on the same rule", "firewall-not-open-to-the-world",
      SERVING_OPEN)
def _(f):
    rule = stack_rule(f["dev"], "ssh")
    rule[1]["allows"] = [{"protocol": "tcp", "ports": ["22", "8000"]}]
    return replace(f["dev"], rule, rule), {}


@case("the SSH opt-in for 0.0.0.0/0 does not clear ::/0 added to the rule", "firewall-not-open-to-the-world",
      "::/0 reaches")
def _(f):
    rule = stack_rule(f["dev"], "ssh")
    rule[1]["sourceRanges"] = ["0.0.0.0/0", "::/0"]
    return replace(f["dev"], rule, rule), {}


@case("an opt-in naming the wrong setting clears nothing", "firewall-not-open-to-the-world", SSH_OPEN)
def _(f):
    rule = stack_rule(f["dev"], "ssh")
    rule[1]["description"] = rule[1]["description"].replace("allowSshFromAnywhere", "allowPublicServing")
    return replace(f["dev"], rule, rule), {}


@case("a 64-character lowercase hex API key in metadata", "metadata-has-no-secrets", "long random string")
def _(f):
    return with_metadata(f["dev"], **{"api-key": HEX_KEY}), {}


@case("a hex key after an assignment", "metadata-has-no-secrets", "long random string")
def _(f):
    return with_metadata(f["dev"], env=f"VLLM_API_KEY={HEX_KEY[:32]}"), {}


@case("a lowercase alphanumeric key", "metadata-has-no-secrets", "long random string")
def _(f):
    return with_metadata(f["dev"], token="k3v9q2x7m1p8z4w6r5t0y2u8i3o7a9s1"), {}


@case("a key hidden in ssh-keys next to the public key", "metadata-has-no-secrets", "'ssh-keys'")
def _(f):
    resources = copy.deepcopy(f["dev"])
    metadata = of_type(resources, QR)["body"]["tpu"]["nodeSpec"][0]["node"]["metadata"]
    metadata["ssh-keys"] += f"\n# {HEX_KEY}"
    return resources, {}


@case("an image pinned by digest and one tagged by commit are not secrets")
def _(f):
    return with_metadata(f["dev"], **{"tpu-vllm-image": f"vllm/vllm-tpu@sha256:{HEX_KEY}",
                                      "ci-image": "public.ecr.aws/q9t5s3a7/vllm-ci-postmerge-repo:"
                                                  "3f25351e8a9d0c7b6a2d6b1c4e2f8a9d0c7b6a2d"}), {}


@case("a secret name in a project with digits is not a secret")
def _(f):
    name = "projects/my-project-123456/secrets/hf-token-2"
    resources = with_metadata(f["dev"], **{"tpu-vllm-hf-token-secret": name})
    for type_, props, _ in resources:  # the VM's grant follows the secret it is told to read
        if type_ == "gcp:secretmanager/secretIamMember:SecretIamMember" and props.get("secretId") == "hf-token":
            props["secretId"] = name
    return resources, {}


for spelled in ("--gpu_memory_utilization 0.99", "--gpu-memory-utilization=0.99", "--gpu_memory_utilization=0.99",
                "'--gpu-memory-utilization' '0.99'"):
    @case(f"serve command with {spelled}", "gpu-memory-utilization-capped", "--gpu-memory-utilization 0.99")
    def _(f, spelled=spelled):
        return with_serve_command(f["dev"], lambda text: text.replace("--gpu-memory-utilization 0.92", spelled)), {}


@case("a later --gpu_memory_utilization overrides the 0.92", "gpu-memory-utilization-capped", "0.95")
def _(f):
    return with_serve_command(f["dev"], lambda text: text + " --gpu_memory_utilization 0.95"), {}


def grant(type_, **props):
    return (type_, props, f"{STACK_URN}{type_}::grant")


@case("project IAMMember for the TPU's account", "stack-identities-hold-only-their-grants", "roles/editor on project")
def _(f):
    return [*f["dev"], grant("gcp:projects/iAMMember:IAMMember", project="proj", role="roles/editor",
                             member=tpu_member(f["dev"]))], {}


@case("project IAMBinding, the email in other case", "stack-identities-hold-only-their-grants",
      "roles/editor on project")
def _(f):
    return [*f["dev"], grant("gcp:projects/iAMBinding:IAMBinding", project="proj", role="roles/editor",
                             members=["user:me@example.com", tpu_member(f["dev"]).upper().replace("SERVICEACCOUNT",
                                                                                              "serviceAccount")])], {}


@case("project IAMPolicy", "stack-identities-hold-only-their-grants", "roles/owner on project")
def _(f):
    policy = {"bindings": [{"role": "roles/owner", "members": [tpu_member(f["dev"])]}]}
    return [*f["dev"], grant("gcp:projects/iAMPolicy:IAMPolicy", project="proj", policyData=json.dumps(policy))], {}


@case("organisation IAMMember", "stack-identities-hold-only-their-grants", "roles/viewer on organization")
def _(f):
    return [*f["dev"], grant("gcp:organizations/iAMMember:IAMMember", orgId="123", role="roles/viewer",
                             member=tpu_member(f["dev"]))], {}


@case("folder IAMBinding", "stack-identities-hold-only-their-grants", "roles/viewer on folder")
def _(f):
    return [*f["dev"], grant("gcp:folder/iAMBinding:IAMBinding", folder="folders/42", role="roles/viewer",
                             members=[tpu_member(f["dev"])])], {}


@case("another member's project role is not the TPU's")
def _(f):
    return [*f["dev"], grant("gcp:projects/iAMMember:IAMMember", project="proj", role="roles/viewer",
                             member="user:me@example.com")], {}


@pytest.fixture(scope="module")
def built(dev_resources, port_8080_resources, opted_in_resources):
    fixtures = {"dev": dev_resources, "port 8080": port_8080_resources, "opted in": opted_in_resources}
    return {name: build(fixtures) for name, (build, _, _) in CASES.items()}


def assert_reported(found, name):
    _, policy, says = CASES[name]
    others = {other: messages for other, messages in found.items() if other != policy}
    assert all(messages == [] for messages in others.values()), others
    if policy is not None:
        assert found[policy], f"{policy} reported nothing"
        assert any(says in message for message in found[policy]), found[policy]


@pytest.mark.parametrize("name", list(CASES))
def test_variant_directly(built, name):
    resources, config = built[name]
    assert_reported(reports(resources, config), name)


@pytest.fixture(scope="module")
def through_the_entry(built):
    return entry_reports(built)


def test_the_pack_entry_point_under_pulumi_policy(through_the_entry):
    assert through_the_entry["name"] == "tpu-vllm" and through_the_entry["enforcement_level"] == "mandatory"
    clean = through_the_entry["cases"]["dev stack"]
    assert set(clean) == (set(rules.RESOURCE_RULES) | set(rules.STACK_RULES) | set(rules.ADVISORY_STACK_RULES)
                          | set(gke_rules.RESOURCE_RULES))
    assert {name for name, level in through_the_entry["levels"].items() if level} == set(rules.ADVISORY_STACK_RULES)


@pytest.mark.parametrize("name", list(CASES))
def test_variant_through_the_pack_entry(through_the_entry, name):
    assert_reported(through_the_entry["cases"][name], name)


def test_the_pack_directory_works_alone(tmp_path, built):
    """A published pack is the policy/ directory only: it must not import anything from the program."""
    pack = tmp_path / "policy"
    shutil.copytree(ROOT / "policy", pack, ignore=shutil.ignore_patterns("__pycache__", "venv"))
    result = entry_reports({"dev stack": built["dev stack"],
                          "halves": built["the two /1 halves in one rule"]}, pack)
    assert all(messages == [] for messages in result["cases"]["dev stack"].values())
    assert result["cases"]["halves"]["firewall-not-open-to-the-world"]


def test_run_duration_over_seven_days_is_reported(dev_resources):
    props = copy.deepcopy(of_type(dev_resources, QR))
    props["body"]["runDuration"]["maxRunDuration"] = "864000s"
    [message] = tpu_billing.tpu_billing_stops(QR, props)
    assert "over 7 days" in message and "maxRunDuration" in message


def test_flex_start_without_run_duration_is_reported(dev_resources):
    props = copy.deepcopy(of_type(dev_resources, QR))
    del props["body"]["runDuration"]
    assert "nothing stops its billing" in tpu_billing.tpu_billing_stops(QR, props)[0]


@pytest.mark.parametrize("model", ["SPOT", "STANDARD"])
def test_tpu_without_a_stop_is_reported_unless_allowed(dev_resources, model):
    props = copy.deepcopy(of_type(dev_resources, QR))
    props["body"]["provisioningModel"] = model
    del props["body"]["runDuration"]
    assert "flex-start" in tpu_billing.tpu_billing_stops(QR, props)[0]
    assert tpu_billing.tpu_billing_stops(QR, props, {"allowUnboundedBilling": True}) == []
    assert tpu_billing.tpu_billing_stops("gcp:tpu/v2Vm:V2Vm", {"name": "x"})


@pytest.mark.parametrize(("value", "what"), [
    ("HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyzABCDEF1234", "a Hugging Face token"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nabc", "a private key"),
    ("api_key=Zx81kQ2mPq7vRt5sLw9yBn3cHd6fGj4aKe0u", "looks like a secret"),
])
def test_secret_looking_metadata_is_reported(dev_resources, value, what):
    props = copy.deepcopy(of_type(dev_resources, QR))
    props["body"]["tpu"]["nodeSpec"][0]["node"]["metadata"]["extra"] = value
    messages = secret_leaks.metadata_has_no_secrets(QR, props)
    assert any(what in m and "Secret Manager" in m for m in messages)


def test_the_real_startup_script_and_public_key_do_not_look_like_secrets(dev_resources):
    metadata = of_type(dev_resources, QR)["body"]["tpu"]["nodeSpec"][0]["node"]["metadata"]
    assert metadata["startup-script"] == (ROOT / "startup/startup.sh").read_text()
    assert metadata["ssh-keys"].startswith("tpu-vllm:ssh-ed25519 AAAA")
    assert secret_leaks.metadata_has_no_secrets(QR, of_type(dev_resources, QR)) == []


def test_unlabelled_secret_is_reported(dev_resources):
    props = copy.deepcopy(of_type(dev_resources, resource_view.SECRET_TYPE))
    props["labels"] = {}
    assert "has no labels" in secret_leaks.secrets_are_labelled(resource_view.SECRET_TYPE, props)[0]


@pytest.mark.parametrize(("value", "violates"), [("0.92", False), ("0.93", True), ("0.95", True)])
def test_gpu_memory_utilization_above_0_92_is_flagged(dev_resources, value, violates):
    props = copy.deepcopy(of_type(dev_resources, COMMAND))
    props["create"] = props["create"].replace("--gpu-memory-utilization 0.92", f"--gpu-memory-utilization {value}")
    messages = memory_cap.gpu_memory_utilization_capped(COMMAND, props)
    assert bool(messages) is violates
    if violates:
        assert "0.92" in messages[0] and "691 s" in messages[0]


def test_the_serving_ports_come_from_the_stack(dev_resources, port_8080_resources):
    # The front's port from the firewall, and vLLM's loopback --port too (counted, to be safe).
    assert firewall_exposure.serving_ports(dev_resources) == [8000, 8001]
    assert firewall_exposure.serving_ports(port_8080_resources) == [8001, 8080]
    assert firewall_exposure.serving_ports(port_8080_resources, {"servingPort": 9000.0}) == [8001, 8080, 9000]
    assert firewall_exposure.serving_ports([]) == [shell_commands.VLLM_DEFAULT_PORT]


def test_the_stacks_opt_in_names_the_setting_port_and_ranges(dev_resources):
    description = stack_rule(dev_resources, "ssh")[1]["description"]
    assert description == "tpu-vllm ssh; opt-in tpu-vllm:access.allowSshFromAnywhere: tcp:22 from 0.0.0.0/0"
    assert stack_rule(dev_resources, "serving-internal")[1]["description"] == "tpu-vllm serving-internal"


def test_an_opt_in_note_names_every_public_range_of_its_rule(opted_in_resources):
    ssh = stack_rule(opted_in_resources, "ssh")[1]["description"]
    assert ssh == "tpu-vllm ssh; opt-in tpu-vllm:access.allowSshFromAnywhere: tcp:22 from 0.0.0.0/0 ::/0"
    serving = stack_rule(opted_in_resources, "serving-external")[1]["description"]
    assert serving.endswith("opt-in tpu-vllm:access.allowPublicServing: tcp:8000 from 0.0.0.0/1 128.0.0.0/1")



INSTANCE = "pulumi-python:dynamic/tpu-vllm:ComputeInstance"
BRIDGED_INSTANCE = "gcp:compute/instance:Instance"


def compute_instance_props() -> dict:
    """The Done-when stack's instance as the policy pack sees it (the golden plan's inputs)."""
    plan = json.loads((ROOT / "tests" / "golden" / "tpu7xflex.json").read_text())
    return copy.deepcopy(next(r for r in plan["resources"] if r["type"] == INSTANCE)["inputs"])


def test_the_compute_paths_flex_start_instance_passes():
    props = compute_instance_props()
    assert tpu_billing.tpu_billing_stops(INSTANCE, props) == []
    # The same body judged as pulumi-gcp's own instance (someone else's program): the same rule.
    assert tpu_billing.tpu_billing_stops(BRIDGED_INSTANCE, props["body"]) == []


@pytest.mark.parametrize(("change", "words"), [
    (lambda s: s.pop("maxRunDuration"), "nothing stops its billing"),
    (lambda s: s.update(maxRunDuration={"seconds": str(8 * 86400)}), "over 7 days"),
    (lambda s: s.update(maxRunDuration={"seconds": "599"}), "under Compute Engine's 10-minute minimum"),
    (lambda s: s.update(instanceTerminationAction="STOP"), "not DELETE"),
])
def test_an_unbounded_flex_start_instance_is_reported(change, words):
    props = compute_instance_props()
    change(props["body"]["scheduling"])
    [message] = tpu_billing.tpu_billing_stops(INSTANCE, props)
    assert words in message and "tpu7x-standard-4t" in message


@pytest.mark.parametrize("model", ["SPOT", "STANDARD"])
def test_a_spot_or_on_demand_tpu_instance_is_reported_unless_allowed(model):
    props = compute_instance_props()
    props["body"]["scheduling"] = {"provisioningModel": model, "automaticRestart": model == "STANDARD"}
    assert "no automatic stop" in tpu_billing.tpu_billing_stops(INSTANCE, props)[0]
    assert tpu_billing.tpu_billing_stops(INSTANCE, props, {"allowUnboundedBilling": True}) == []
    props["body"]["machineType"] = "zones/us-central1-c/machineTypes/e2-standard-2"  # not a TPU: not this rule's
    assert tpu_billing.tpu_billing_stops(INSTANCE, props) == []


def test_a_token_in_the_instances_metadata_items_is_reported():
    from policy import secret_leaks

    props = compute_instance_props()
    assert secret_leaks.metadata_has_no_secrets(INSTANCE, props) == []
    props["body"]["metadata"]["items"].append({"key": "hf", "value": "hf_" + "aB3dE5fG7h" * 4})
    [message] = secret_leaks.metadata_has_no_secrets(INSTANCE, props)
    assert "metadata 'hf'" in message
