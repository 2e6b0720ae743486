"""cache.keepOnDestroy: the disk `pulumi destroy` kept is adopted by the next `pulumi up`, never re-created.

The program runs under mocks whose gcp.compute.get_disk answers as GCP would for each case: no disk (the
provider's 404), this stack's kept disk, and a disk of the same name that is someone else's.
"""

from __future__ import annotations

import pytest

from tests.program import dev_config, run, with_section

DISK_TYPE = "gcp:compute/disk:Disk"
DISK_NAME = "tpu-vllm-dev-cache"
DISK_ID = f"projects/my-proj/zones/us-west4-a/disks/{DISK_NAME}"


def kept_config():
    return with_section(dev_config(), "cache", keepOnDestroy=True)


def stack_labels():
    return run(kept_config()).one(DISK_TYPE)["inputs"]["labels"]


def existing(labels):
    return {DISK_NAME: {"labels": labels, "size": 50, "type": "https://www.googleapis.com/compute/v1/projects/"
                        "my-proj/zones/us-west4-a/diskTypes/pd-balanced",
                        "selfLink": f"https://www.googleapis.com/compute/v1/{DISK_ID}"}}


@pytest.mark.parametrize("preview", [False, True])
def test_without_a_disk_of_that_name_the_stack_creates_one(preview):
    program = run(kept_config(), preview=preview)
    assert program.problems is None
    disk = program.one(DISK_TYPE)
    assert disk["import_id"] == "" and disk["retain_on_delete"] is True


@pytest.mark.parametrize("preview", [False, True])
def test_the_disk_an_earlier_destroy_kept_is_adopted_not_created_again(preview):
    labels = stack_labels()
    assert labels["app"] == "tpu-vllm" and labels["stack"] == "dev"
    program = run(kept_config(), preview=preview, disks=existing(labels))
    assert program.problems is None
    disk = program.one(DISK_TYPE)
    # The id pulumi-gcp gives a disk it made, so once in state the same id is no import at all.
    assert disk["import_id"] == DISK_ID and disk["retain_on_delete"] is True
    assert disk["inputs"]["name"] == DISK_NAME and disk["inputs"]["size"] == 50
    # The queued resource still attaches it by name.
    body = program.one("pulumi-python:dynamic/tpu-vllm:QueuedResource")["inputs"]["body"]
    assert body["tpu"]["nodeSpec"][0]["node"]["dataDisks"][0]["sourceDisk"] == DISK_ID


@pytest.mark.parametrize("labels", [{}, {"app": "tpu-vllm", "stack": "prod"}, {"stack": "dev"}])
def test_a_disk_of_that_name_that_is_not_this_stacks_stops_the_deploy_with_the_choices(labels):
    program = run(kept_config(), disks=existing(labels))
    [problem] = program.problems
    assert f"cache disk {DISK_NAME} already exists in us-west4-a and is not this stack's" in problem
    assert f"gcloud compute disks delete {DISK_NAME} --zone=us-west4-a --project=my-proj" in problem
    assert (f"gcloud compute disks add-labels {DISK_NAME} --labels=app=tpu-vllm,stack=dev "
            "--zone=us-west4-a --project=my-proj") in problem
    assert "another stack name" in problem
    # Stopped before anything was created: no disk, and above all no TPU request.
    assert program.of_type(DISK_TYPE) == []
    assert program.of_type("pulumi-python:dynamic/tpu-vllm:QueuedResource") == []


def test_a_failing_lookup_is_a_clear_error_not_a_create():
    program = run(kept_config(), failing_calls={
        "gcp:compute/getDisk:getDisk": "googleapi: Error 403: Required 'compute.disks.get' permission, forbidden"})
    [problem] = program.problems
    assert f"cache disk {DISK_NAME}: could not look it up in project my-proj, zone us-west4-a" in problem
    assert "compute.disks.get" in problem and program.of_type(DISK_TYPE) == []
