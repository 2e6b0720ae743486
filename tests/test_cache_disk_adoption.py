"""cache.keepOnDestroy: the disk `pulumi destroy` kept is adopted by the next `pulumi up`, never re-created.

The program runs under mocks whose gcp.compute.get_disk answers in pulumi-gcp's own words for each case
(tools/plan/provider_answers.py, each layer cited): no disk (the data source's "{id} not found" as the bridge,
engine and SDK wrap it), a project whose Compute API is not enabled yet, a permission refused, this stack's
kept disk, and a disk of the same name that is someone else's.
"""

from __future__ import annotations

import pytest

from tests.program import dev_config, run, with_section
from tools.plan import provider_answers as answers

DISK_TYPE = "gcp:compute/disk:Disk"
QR_TYPE = "pulumi-python:dynamic/tpu-vllm:QueuedResource"
DISK_NAME = "tpu-vllm-dev-cache"
DISK_ID = f"projects/my-proj/zones/us-west4-a/disks/{DISK_NAME}"


def kept_config(**cache):
    return with_section(dev_config(), "cache", keepOnDestroy=True, **cache)


def stack_labels():
    return run(kept_config()).one(DISK_TYPE)["inputs"]["labels"]


def existing(labels, size=50, disk_type="pd-balanced"):
    # pulumi-gcp adds its own provisioning label to every disk it makes (pulumi-gcp patches/0006).
    return {DISK_NAME: {"labels": {**labels, "goog-pulumi-provisioned": "true"}, "size": size, "type": disk_type}}


def get_disk_fails(text):
    return {answers.GET_DISK: text}


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
    body = program.one(QR_TYPE)["inputs"]["body"]
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
    assert program.of_type(QR_TYPE) == []


def test_the_first_deploy_of_the_default_stack_creates_its_disk_when_the_provider_finds_none():
    # The default stack (keepOnDestroy off) looks the name up too: pulumi-gcp's real answer for no disk.
    program = run(dev_config())
    assert program.problems is None
    assert program.one(DISK_TYPE)["import_id"] == "" and program.of_type(QR_TYPE)


@pytest.mark.parametrize("preview", [False, True])
def test_a_new_project_without_the_compute_api_yet_creates_its_disk(preview):
    """The lookup runs before the stack enables compute.googleapis.com: a 403 SERVICE_DISABLED for Compute
    means no kept disk can exist, so the stack goes on and creates it."""
    disabled = answers.disk_read_failed("my-proj", "us-west4-a", DISK_NAME, answers.service_disabled(
        "123456789012", "compute.googleapis.com", "Compute Engine API"))
    program = run(kept_config(), preview=preview, failing_calls=get_disk_fails(disabled))
    assert program.problems is None
    assert program.one(DISK_TYPE)["import_id"] == "" and program.of_type(QR_TYPE)


def test_another_api_disabled_is_not_read_as_no_disk():
    # Only Compute's own SERVICE_DISABLED says no disk can exist; another service's 403 is a real failure.
    other = answers.disk_read_failed("my-proj", "us-west4-a", DISK_NAME, answers.service_disabled(
        "123456789012", "cloudresourcemanager.googleapis.com", "Cloud Resource Manager API"))
    program = run(kept_config(), failing_calls=get_disk_fails(other))
    [problem] = program.problems
    assert f"cache disk {DISK_NAME}: could not look it up" in problem and program.of_type(QR_TYPE) == []


@pytest.mark.parametrize("text", [
    answers.disk_read_failed("my-proj", "us-west4-a", DISK_NAME, answers.compute_permission_denied(
        "compute.disks.get", DISK_ID)),
    # Another disk's absence, or the words without the id the stack asked for, are not this disk's absence.
    answers.disk_absent("my-proj", "us-west4-a", "someone-elses-disk"),
    answers.invoke_error(answers.GET_DISK, f"Error reading {DISK_ID} not found yet"),
], ids=["permission-denied", "another-disk", "not-the-format"])
def test_a_failing_lookup_is_a_clear_error_not_a_create(text):
    program = run(kept_config(), failing_calls=get_disk_fails(text))
    [problem] = program.problems
    assert f"cache disk {DISK_NAME}: could not look it up in project my-proj, zone us-west4-a" in problem
    assert "invocation of" not in problem  # the provider's words, not the layers' wrapping
    assert program.of_type(DISK_TYPE) == [] and program.of_type(QR_TYPE) == []


def test_a_permission_refusal_names_the_permission_and_the_role():
    denied = answers.disk_read_failed("my-proj", "us-west4-a", DISK_NAME, answers.compute_permission_denied(
        "compute.disks.get", DISK_ID))
    [problem] = run(kept_config(), failing_calls=get_disk_fails(denied)).problems
    assert f"Required 'compute.disks.get' permission for '{DISK_ID}'" in problem
    assert "roles/compute.viewer" in problem


def test_a_kept_disk_larger_than_cache_size_gb_is_refused_before_anything_is_made():
    """The engine would import it and then replace it (a smaller disk), which it refuses only at `up`."""
    program = run(kept_config(sizeGb=30), disks=existing(stack_labels(), size=50))
    [problem] = program.problems
    assert "tpu-vllm:cache.sizeGb = 30: the kept cache disk tpu-vllm-dev-cache is 50 GB" in problem
    assert "pulumi config set --path 'tpu-vllm:cache.sizeGb' 50" in problem
    assert f"gcloud compute disks delete {DISK_NAME} --zone=us-west4-a --project=my-proj" in problem
    assert program.of_type(DISK_TYPE) == [] and program.of_type(QR_TYPE) == []


def test_a_kept_disk_smaller_than_cache_size_gb_is_adopted_and_grown_in_place():
    program = run(kept_config(sizeGb=80), disks=existing(stack_labels(), size=50))
    assert program.problems is None
    disk = program.one(DISK_TYPE)
    # Imported as it is, then diffed: the larger size is an update of the adopted disk (docs/lifecycle.md).
    assert disk["import_id"] == DISK_ID and disk["inputs"]["size"] == 80


def test_a_kept_disk_of_another_type_is_refused_before_anything_is_made():
    program = run(kept_config(), disks=existing(stack_labels(), disk_type="pd-ssd"))
    [problem] = program.problems
    assert "tpu-vllm:cache.diskType = \"pd-balanced\": the kept cache disk tpu-vllm-dev-cache is pd-ssd" in problem
    assert program.of_type(QR_TYPE) == []
