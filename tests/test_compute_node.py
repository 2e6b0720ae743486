"""The node through Compute Engine (issue 43): one gcp.compute.Instance of the TPU machine type, its scheduling per
provisioning model, the kept cache disk the boot script finds, and the Done-when stack's plan.

The instance's fields are Compute v1's (compute.v1.json in google-api-python-client's discovery cache) as
terraform-provider-google sends them (resource_compute_instance.go, compute_instance_helpers.go); the rows are in
docs/development.md's outside-contracts table.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from components.vm import boot_contract, compute_instance
from tests import program
from tests.golden import GOLDEN_DIR, STACKS

ROOT = Path(__file__).resolve().parent.parent
INSTANCE = "gcp:compute/instance:Instance"


def golden(name: str) -> dict:
    return json.loads((GOLDEN_DIR / f"{name}.json").read_text())


def resources(plan: dict, type_: str) -> list[dict]:
    return [resource for resource in plan["resources"] if resource["type"] == type_]


def discovery() -> dict:
    import googleapiclient

    path = Path(googleapiclient.__file__).parent / "discovery_cache/documents/compute.v1.json"
    return json.loads(path.read_text())


def test_flex_start_is_bounded_deleted_at_its_end_and_never_restarted():
    block = compute_instance.scheduling("flex-start", 7 * 24 * 3600)
    assert block == {"provisioning_model": "FLEX_START", "automatic_restart": False,
                     "on_host_maintenance": "TERMINATE", "instance_termination_action": "DELETE",
                     "max_run_duration": {"seconds": 604800}}


@pytest.mark.parametrize(("model", "restart", "action"), [("spot", False, "DELETE"), ("on-demand", True, None)])
def test_spot_is_deleted_when_preempted_and_on_demand_restarts(model, restart, action):
    block = compute_instance.scheduling(model, 3600)
    assert block["automatic_restart"] is restart
    assert block.get("instance_termination_action") == action
    assert "max_run_duration" not in block  # only flex-start ends by a run duration


def test_every_scheduling_value_is_one_compute_v1_names():
    schema = discovery()["schemas"]["Scheduling"]["properties"]
    for model in compute_instance.PROVISIONING_MODELS:
        block = compute_instance.scheduling(model, 3600)
        assert block["provisioning_model"] in schema["provisioningModel"]["enum"]
        assert block["on_host_maintenance"] in schema["onHostMaintenance"]["enum"]
        if "instance_termination_action" in block:
            assert block["instance_termination_action"] in schema["instanceTerminationAction"]["enum"]


def test_the_create_and_update_timeouts_outlast_the_queue_wait():
    # The provider waits for RUNNING under the update timeout, after the insert operation under the create one.
    grace = compute_instance.PROVISIONING_GRACE_SECONDS
    assert compute_instance.wait_timeout(2 * 3600) == f"{(2 * 3600 + grace) // 60}m"
    assert int(compute_instance.wait_timeout(3600)[:-1]) * 60 > 3600


def test_the_run_end_is_creation_plus_the_run():
    assert compute_instance.run_end("2026-12-07T10:00:00.000-08:00", 3600) == "2026-12-07T19:00:00Z"
    assert compute_instance.run_end("", 3600) == "" and compute_instance.run_end("2026-12-07T10:00:00Z", None) == ""


def test_the_boot_script_finds_the_cache_disk_by_the_device_name_the_instance_gives_it():
    args = compute_instance.instance_args(
        project="p", zone="us-central1-c", name="n", machine_type="tpu7x-standard-4t", boot_image="img",
        boot_disk_type="hyperdisk-balanced", network="default", subnetwork=None, service_account_email="e",
        metadata={boot_contract.CACHE_DEVICE_ATTRIBUTE: "persistent-disk-1"}, cache_disk="projects/p/zones/z/disks/d",
        cache_device_name="persistent-disk-1", tags=["t"], labels={}, provisioning_model="flex-start",
        run_seconds=3600)
    [disk] = args["attached_disks"]
    assert disk["device_name"] == args["metadata"][boot_contract.CACHE_DEVICE_ATTRIBUTE]
    assert "auto_delete" not in disk  # the provider's attached_disk has none: Compute Engine keeps the disk
    startup = (ROOT / "startup" / "startup.sh").read_text()
    # The name is the boot script's preference among disks of the cache's size (find_cache_disk).
    assert 'named="$ROOT/dev/disk/by-id/google-$1"' in startup
    described = discovery()["schemas"]["AttachedDisk"]["properties"]["deviceName"]["description"]
    assert "/dev/disk/by-id/google-*" in described


@pytest.mark.parametrize("name", ["v6ecompute", "tpu7xflex"])
def test_a_compute_stack_plans_an_instance_and_no_queued_resource(name):
    assert name in {stack.name for stack in STACKS}
    plan = golden(name)
    assert not [r for r in plan["resources"] if r["type"].endswith(":QueuedResource")]
    [instance] = resources(plan, INSTANCE)
    assert instance["inputs"]["name"] == f"tpu-vllm-{name}"


def test_the_done_when_stack_plans_tpu7x_flex_start_for_seven_days():
    completed = program.plan(["--stack", "tpu7xflex", "--json"], config_dir=ROOT / "tests/golden/stacks")
    assert completed.returncode == 0, completed.stderr
    plan = json.loads(completed.stdout)
    [instance] = resources(plan, INSTANCE)
    inputs = instance["inputs"]
    assert inputs["machineType"] == "tpu7x-standard-4t"
    assert inputs["scheduling"] == {"provisioningModel": "FLEX_START", "maxRunDuration": {"seconds": 604800},
                                    "instanceTerminationAction": "DELETE", "automaticRestart": False,
                                    "onHostMaintenance": "TERMINATE"}
    [disk] = resources(plan, "gcp:compute/disk:Disk")
    assert disk["inputs"]["type"].startswith("hyperdisk-")
    [attached] = inputs["attachedDisks"]
    assert attached["source"].endswith(f"/disks/{disk['inputs']['name']}") and "autoDelete" not in attached
    assert inputs["bootDisk"]["autoDelete"] is True  # the boot disk goes with the VM; the cache stays
    metadata = inputs["metadata"]
    assert metadata["enable-oslogin"] == "FALSE" and metadata["block-project-ssh-keys"] == "TRUE"
    assert inputs["tags"] == ["tpu-vllm-tpu7xflex"]
    assert instance["custom_timeouts"] == {"create": "90m", "update": "90m"}  # the 1h queue plus 30 min to boot
    assert not [r for r in plan["resources"] if r["type"].endswith(":QueuedResource")]


def tpu7x_program() -> program.Program:
    """The dev stack on tpu7x-standard-4t for 7 days, with a two-hour queue (one run a session), its layout the
    planner's (the dev stack pins TP 1, which a TPU7x host's whole-chip ranks refuse)."""
    config = program.dev_config()
    vllm = {key: value for key, value in json.loads(config["tpu-vllm:vllm"]).items() if key != "tensorParallelSize"}
    return program.run({**config, "tpu-vllm:vllm": json.dumps(vllm), "tpu-vllm:tpu": json.dumps(
        {"zone": "us-central1-c", "acceleratorType": "tpu7x-standard-4t", "maxRunDuration": "7d",
         "queueTimeout": "2h", "runtimeVersion": "projects/my-proj/global/images/family/tpu-vm"})})


def test_the_compute_path_waits_out_the_queue_in_its_timeouts():
    ran = tpu7x_program()
    assert ran.problems is None, ran.problems
    instance = ran.one(INSTANCE)
    assert instance["custom_timeouts"] == {"create": "150m", "update": "150m"}


def test_an_unpriced_shape_shows_no_invented_cost():
    outputs = tpu7x_program().data["outputs"]
    assert outputs["costPerHourUsd"]["value"] is None
    assert "price not found" in outputs["priceNotFound"]["value"]
    assert outputs["maxSpendPerRunUsd"]["value"] is None


def test_the_preview_identity_reads_the_instance_and_needs_no_tpu_role():
    roles = tpu7x_program().data["outputs"]["previewIam"]["value"]["projectRoles"]
    assert "compute.instances.get" in roles["roles/compute.viewer"] and "roles/tpu.viewer" not in roles
