"""The node through Compute Engine (issue 43): one instance of the TPU machine type made by the stack's own provider,
its scheduling per provisioning model, the queue it asks for, the kept cache disk the boot script finds, and the
Done-when stack's plan.

The instance's fields are Compute v1's (compute.v1.json in google-api-python-client's discovery cache); the rows are
in docs/development.md's outside-contracts table.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from components.vm import boot_contract, compute_instance
from tests import program
from tests.golden import GOLDEN_DIR, STACKS

ROOT = Path(__file__).resolve().parent.parent
INSTANCE = compute_instance.TYPE_TOKEN


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
    assert block == {"provisioningModel": "FLEX_START", "automaticRestart": False,
                     "onHostMaintenance": "TERMINATE", "instanceTerminationAction": "DELETE",
                     "maxRunDuration": {"seconds": "604800"}}


@pytest.mark.parametrize(("model", "restart", "action"), [("spot", False, "DELETE"), ("on-demand", True, None)])
def test_spot_is_deleted_when_preempted_and_on_demand_restarts(model, restart, action):
    block = compute_instance.scheduling(model, 3600)
    assert block["automaticRestart"] is restart
    assert block.get("instanceTerminationAction") == action
    assert "maxRunDuration" not in block  # only flex-start ends by a run duration


def test_every_scheduling_value_is_one_compute_v1_names():
    schema = discovery()["schemas"]["Scheduling"]["properties"]
    for model in compute_instance.PROVISIONING_MODELS:
        block = compute_instance.scheduling(model, 3600)
        assert set(block) <= set(schema)
        assert block["provisioningModel"] in schema["provisioningModel"]["enum"]
        assert block["onHostMaintenance"] in schema["onHostMaintenance"]["enum"]
        if "instanceTerminationAction" in block:
            assert block["instanceTerminationAction"] in schema["instanceTerminationAction"]["enum"]


def body(**overrides) -> dict:
    values = dict(
        project="p", zone="us-central1-c", name="n", machine_type="tpu7x-standard-4t", boot_image="img",
        boot_disk_type="hyperdisk-balanced", network="default", subnetwork=None, service_account_email="e",
        metadata={boot_contract.CACHE_DEVICE_ATTRIBUTE: "persistent-disk-1"}, cache_disk="projects/p/zones/z/disks/d",
        cache_device_name="persistent-disk-1", tags=["t"], labels={}, provisioning_model="flex-start",
        run_seconds=3600, queue_seconds=1800)
    return compute_instance.instance_body(**{**values, **overrides})


def test_only_a_flex_start_insert_asks_for_the_queue_and_for_as_long_as_tpu_queue_timeout():
    assert body()["params"] == {"requestValidForDuration": {"seconds": "1800"}}
    described = discovery()["schemas"]["InstanceParams"]["properties"]["requestValidForDuration"]["description"]
    assert "waiting for capacity" in described and "Instances.Insert" in described
    for model in ("spot", "on-demand"):
        assert "params" not in body(provisioning_model=model)


def test_the_provider_waits_out_the_queue_and_the_start():
    assert compute_instance.wait_seconds(2 * 3600) == 2 * 3600 + compute_instance.PROVISIONING_GRACE_SECONDS


def test_a_network_and_subnetwork_by_name_become_the_partial_urls_compute_engine_takes():
    [nic] = body(network="vpc", subnetwork="sub")["networkInterfaces"]
    assert nic["network"] == "projects/p/global/networks/vpc"
    assert nic["subnetwork"] == "projects/p/regions/us-central1/subnetworks/sub"
    [nic] = body(network="projects/q/global/networks/vpc")["networkInterfaces"]
    assert nic["network"] == "projects/q/global/networks/vpc" and "subnetwork" not in nic


def test_the_boot_script_finds_the_cache_disk_by_the_device_name_the_instance_gives_it():
    made = body()
    boot, disk = made["disks"]
    assert boot["boot"] is True and boot["autoDelete"] is True  # the boot disk goes with the VM
    metadata = {item["key"]: item["value"] for item in made["metadata"]["items"]}
    assert disk["deviceName"] == metadata[boot_contract.CACHE_DEVICE_ATTRIBUTE]
    assert disk["autoDelete"] is False  # "auto-deleted when the instance is deleted": never the cache
    startup = (ROOT / "startup" / "startup.sh").read_text()
    # The name is the boot script's preference among disks of the cache's size (find_cache_disk).
    assert 'named="$ROOT/dev/disk/by-id/google-$1"' in startup
    schema = discovery()["schemas"]["AttachedDisk"]["properties"]
    assert "/dev/disk/by-id/google-*" in schema["deviceName"]["description"]
    assert "auto-deleted when the instance is" in schema["autoDelete"]["description"]


@pytest.mark.parametrize("name", ["v6ecompute", "tpu7xflex"])
def test_a_compute_stack_plans_an_instance_and_no_queued_resource(name):
    assert name in {stack.name for stack in STACKS}
    plan = golden(name)
    assert not [r for r in plan["resources"] if r["type"].endswith(":QueuedResource")]
    [instance] = resources(plan, INSTANCE)
    assert instance["inputs"]["name"] == instance["inputs"]["body"]["name"] == f"tpu-vllm-{name}"
    assert not resources(plan, "gcp:compute/instance:Instance")


def test_the_done_when_stack_plans_tpu7x_flex_start_for_seven_days():
    completed = program.plan(["--stack", "tpu7xflex", "--json"], config_dir=ROOT / "tests/golden/stacks")
    assert completed.returncode == 0, completed.stderr
    plan = json.loads(completed.stdout)
    [instance] = resources(plan, INSTANCE)
    inputs = instance["inputs"]["body"]
    assert inputs["machineType"] == "zones/us-central1-c/machineTypes/tpu7x-standard-4t"
    assert inputs["scheduling"] == {"provisioningModel": "FLEX_START", "maxRunDuration": {"seconds": "604800"},
                                    "instanceTerminationAction": "DELETE", "automaticRestart": False,
                                    "onHostMaintenance": "TERMINATE"}
    assert inputs["params"] == {"requestValidForDuration": {"seconds": "3600"}}  # the stack's 1h queue
    [disk] = resources(plan, "gcp:compute/disk:Disk")
    assert disk["inputs"]["type"].startswith("hyperdisk-")
    boot, attached = inputs["disks"]
    assert attached["source"].endswith(f"/disks/{disk['inputs']['name']}") and attached["autoDelete"] is False
    assert boot["autoDelete"] is True  # the boot disk goes with the VM; the cache stays
    metadata = {item["key"]: item["value"] for item in inputs["metadata"]["items"]}
    assert metadata["enable-oslogin"] == "FALSE" and metadata["block-project-ssh-keys"] == "TRUE"
    assert inputs["tags"] == {"items": ["tpu-vllm-tpu7xflex"]}
    assert instance["inputs"]["waitSeconds"] == 3600 + 1800  # the 1h queue plus 30 min to boot
    assert not [r for r in plan["resources"] if r["type"].endswith(":QueuedResource")]


def tpu7x_program() -> program.Program:
    """The dev stack on tpu7x-standard-4t for 7 days, with a two-hour queue (one run a session), its layout the
    planner's (the dev stack pins TP 1, which a TPU7x host's whole-chip ranks refuse)."""
    config = program.dev_config()
    vllm = {key: value for key, value in json.loads(config["tpu-vllm:vllm"]).items() if key != "tensorParallelSize"}
    return program.run({**config, "tpu-vllm:vllm": json.dumps(vllm), "tpu-vllm:tpu": json.dumps(
        {"zone": "us-central1-c", "acceleratorType": "tpu7x-standard-4t", "maxRunDuration": "7d",
         "queueTimeout": "2h", "runtimeVersion": "projects/my-proj/global/images/family/tpu-vm"})})


def test_the_compute_path_waits_out_the_queue_and_asks_for_it():
    ran = tpu7x_program()
    assert ran.problems is None, ran.problems
    instance = ran.one(INSTANCE)
    assert instance["inputs"]["waitSeconds"] == 2 * 3600 + 1800
    assert instance["inputs"]["body"]["params"]["requestValidForDuration"] == {"seconds": "7200"}


def test_an_unpriced_shape_shows_no_invented_cost():
    outputs = tpu7x_program().data["outputs"]
    assert outputs["costPerHourUsd"]["value"] is None
    assert "price not found" in outputs["priceNotFound"]["value"]
    assert outputs["maxSpendPerRunUsd"]["value"] is None


def test_the_preview_identity_reads_the_instance_and_needs_no_tpu_role():
    roles = tpu7x_program().data["outputs"]["previewIam"]["value"]["projectRoles"]
    assert "compute.instances.get" in roles["roles/compute.viewer"] and "roles/tpu.viewer" not in roles
