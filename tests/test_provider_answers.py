"""pulumi-gcp's answers, as the offline engine gives them and the program reads them.

The expected texts below are written out by hand from each layer's format string (cited in
tools/plan/provider_answers.py), so the fake cannot drift from them unnoticed; the reader
(components/core/lookup_answers.py) is then tried on them and on the variants that must not pass for "absent".
"""

from __future__ import annotations

from components.core import lookup_answers
from tools.plan import provider_answers as answers

DISK = "projects/p/zones/us-west4-a/disks/d"


def test_an_absent_disk_reads_as_every_layer_writes_it():
    assert answers.disk_absent("p", "us-west4-a", "d") == (
        # engine (source_eval.go): "invocation of %v returned an error: %w"; bridge (provider.go Invoke):
        # "invoking %s"; go-multierror 1.1.1 ListFormatFunc for one error; TPG: "%s not found".
        "invocation of gcp:compute/getDisk:getDisk returned an error: invoking gcp:compute/getDisk:getDisk: "
        "1 error occurred:\n\t* projects/p/zones/us-west4-a/disks/d not found\n\n")


def test_a_read_error_is_wrapped_by_the_resources_read_and_googleapi():
    denied = answers.disk_read_failed("p", "us-west4-a", "d", answers.compute_permission_denied(
        "compute.disks.get", DISK))
    assert denied.endswith(
        "\t* Error when reading or editing ComputeDisk \"projects/p/zones/us-west4-a/disks/d\": googleapi: Error "
        "403: Required 'compute.disks.get' permission for 'projects/p/zones/us-west4-a/disks/d', forbidden\n\n")


def test_googleapi_renders_details_then_the_single_reason():
    text = answers.googleapi_error(403, "m", "accessNotConfigured", [{"reason": "SERVICE_DISABLED"}])
    assert text == ('googleapi: Error 403: m\nDetails:\n[\n  {\n    "reason": "SERVICE_DISABLED"\n  }\n]\n'
                    ", accessNotConfigured")
    assert answers.googleapi_error(404, "gone") == "googleapi: Error 404: gone"


def test_the_sdk_adds_its_own_words_in_front():
    # What the program catches: the SDK's "invoke of {tok} failed: {details}" (runtime/invoke.py, 3.272.0).
    seen = f"invoke of {answers.GET_DISK} failed: {answers.disk_absent('p', 'us-west4-a', 'd')}"
    assert lookup_answers.is_not_found(seen, DISK)
    assert lookup_answers.reason(seen) == f"{DISK} not found"


def test_only_this_disks_own_absence_is_absence():
    assert not lookup_answers.is_not_found(answers.disk_absent("p", "us-west4-a", "other"), DISK)
    assert not lookup_answers.is_not_found(answers.disk_absent("p", "us-west4-b", "d"), DISK)
    # The id inside a longer item (another resource's error that mentions it) is not the data source's answer.
    assert not lookup_answers.is_not_found(answers.invoke_error(answers.GET_DISK, f"lookup of {DISK} not found"), DISK)
    assert not lookup_answers.is_not_found(answers.disk_read_failed("p", "us-west4-a", "d", answers.googleapi_error(
        404, f"The resource '{DISK}' was not found", "notFound")), DISK)


def test_a_disabled_api_is_named_from_its_error_info_or_its_activation_link():
    with_details = answers.disk_read_failed("p", "z", "d", answers.service_disabled(
        "123", "compute.googleapis.com", "Compute Engine API"))
    assert lookup_answers.disabled_service(with_details) == "compute.googleapis.com"
    # Older answers carry no details: the reason and the message's own activation link.
    legacy = answers.disk_read_failed("p", "z", "d", answers.googleapi_error(
        403, "Compute Engine API has not been used in project 123 before or it is disabled. Enable it by visiting "
        "https://console.developers.google.com/apis/api/compute.googleapis.com/overview?project=123 then retry.",
        "accessNotConfigured"))
    assert lookup_answers.disabled_service(legacy) == "compute.googleapis.com"


def test_what_is_not_a_disabled_api_is_not_read_as_one():
    denied = answers.disk_read_failed("p", "z", "d", answers.compute_permission_denied("compute.disks.get", DISK))
    assert lookup_answers.disabled_service(denied) is None
    other = answers.service_disabled("123", "cloudresourcemanager.googleapis.com", "Cloud Resource Manager API")
    assert lookup_answers.disabled_service(other) == "cloudresourcemanager.googleapis.com"
    # A 403 that only mentions the link, with another reason, is a refusal, not a disabled API.
    assert lookup_answers.disabled_service(answers.googleapi_error(
        403, "see https://console.developers.google.com/apis/api/compute.googleapis.com/overview", "forbidden")) is None
    # Two services named: no single answer to act on.
    assert lookup_answers.disabled_service(answers.googleapi_error(403, "m", "accessNotConfigured", [
        {"reason": "SERVICE_DISABLED", "metadata": {"service": "compute.googleapis.com"}},
        {"reason": "SERVICE_DISABLED", "metadata": {"service": "iam.googleapis.com"}}])) is None


def test_a_secrets_absence_is_its_own_data_sources_words():
    assert answers.secret_absent("p", "hf-token").endswith("\t* projects/p/secrets/hf-token not found\n\n")
    assert lookup_answers.is_not_found(answers.secret_absent("p", "hf-token"), "projects/p/secrets/hf-token")
