"""What pulumi-gcp answers an invoke (a data source read), in its own words, for the offline engine.

A failed data-source read reaches the program through four layers, each adding its own words; the
mocks raise the text the engine sends (layers 1-3 below) and the real SDK adds the last one itself
(sdk/python/lib/pulumi/runtime/invoke.py: "invoke of {tok} failed: {details}"). Read at:

1. google.golang.org/api googleapi/googleapi.go, `(*Error).Error()`: "googleapi: Error {code}: {message}",
   then "\\nDetails:\\n{details as 2-space-indented JSON}" when the body has details, then ", {reason}" when
   its one `errors` item repeats the message.
2. hashicorp/terraform-provider-google-beta v7.45.0 (pulumi-gcp's upstream, pulumi/pulumi-gcp `upstream`
   at 3dc173a): a resource read turns a 404 into an empty id (google-beta/transport/transport.go,
   HandleNotFoundError) and wraps any other error "Error when reading or editing {resource}: {err}";
   the data sources google_compute_disk and google_secret_manager_secret then fail an empty id with
   "{id} not found" (services/compute/data_source_google_compute_disk.go,
   services/secretmanager/data_source_secret_manager_secret.go).
3. pulumi/pulumi-terraform-bridge v3.136.0: Invoke wraps "invoking {tok}: " around the SDKv2 diagnostics
   (pkg/tfbridge/provider.go, Invoke), which pkg/tfshim/sdk-v2/diagnostics.go joins with go-multierror
   v1.1.1 ("1 error occurred:\\n\\t* {err}\\n\\n").
4. pulumi/pulumi (pkg/v3.259.0-14): the engine wraps "invocation of {tok} returned an error: " and answers
   the SDK with that as a gRPC status (pkg/resource/deploy/source_eval.go, resmon.Invoke).
"""

from __future__ import annotations

import json
from typing import Any

GET_DISK = "gcp:compute/getDisk:getDisk"
GET_SECRET = "gcp:secretmanager/getSecret:getSecret"


def googleapi_error(code: int, message: str, reason: str | None = None,
                    details: list[dict[str, Any]] | None = None) -> str:
    """googleapi.Error's text for a JSON error body {code, message, errors: [{reason, message}], details}."""
    text = f"googleapi: Error {code}: {message}"
    if details:
        text += "\nDetails:\n" + json.dumps(details, indent=2, sort_keys=True) + "\n"
    if reason is None:
        return text.strip()
    return f"{text}, {reason}"


def resource_read_error(resource: str, google_error: str) -> str:
    """transport_tpg.HandleNotFoundError for anything but a 404."""
    return f"Error when reading or editing {resource}: {google_error}"


def not_found(resource_id: str) -> str:
    """A data source whose read found nothing (a 404 emptied the id)."""
    return f"{resource_id} not found"


def invoke_error(token: str, *provider_errors: str) -> str:
    """What the engine sends the SDK for a failed invoke: the bridge's, then the engine's wrapping."""
    if len(provider_errors) == 1:
        joined = f"1 error occurred:\n\t* {provider_errors[0]}\n\n"
    else:
        joined = f"{len(provider_errors)} errors occurred:\n" + "".join(
            f"\t* {error}\n" for error in provider_errors) + "\n"
    return f"invocation of {token} returned an error: invoking {token}: {joined}"


def disk_id(project: str, zone: str, name: str) -> str:
    """The data source's id template: projects/{{project}}/zones/{{zone}}/disks/{{name}}."""
    return f"projects/{project}/zones/{zone}/disks/{name}"


def compute_disk_resource(project: str, zone: str, name: str) -> str:
    # fmt.Sprintf("ComputeDisk %q", d.Id()) in resource_compute_disk.go's read.
    return f'ComputeDisk "{disk_id(project, zone, name)}"'


def disk_found(project: str, zone: str, name: str, *, labels: dict[str, str], size: int,
               type: str = "pd-balanced") -> dict[str, Any]:  # noqa: A002 - the data source's field name
    """The outputs getDisk returns for a disk that exists, as the data source sets them: `labels` is every
    label on the disk (tpgresource/labels.go SetDataSourceLabels copies effective_labels), `type` the disk
    type's name, not its URL (resource_compute_disk.go flattenComputeDiskType), `size` in GB."""
    this_id = disk_id(project, zone, name)
    return {
        "id": this_id, "name": name, "project": project, "zone": zone, "size": size, "type": type,
        "labels": dict(labels), "effectiveLabels": dict(labels), "terraformLabels": dict(labels),
        "selfLink": f"https://www.googleapis.com/compute/v1/{this_id}",
    }


def disk_absent(project: str, zone: str, name: str) -> str:
    return invoke_error(GET_DISK, not_found(disk_id(project, zone, name)))


def disk_read_failed(project: str, zone: str, name: str, google_error: str) -> str:
    return invoke_error(GET_DISK, resource_read_error(compute_disk_resource(project, zone, name), google_error))


def secret_absent(project: str, secret_id: str) -> str:
    return invoke_error(GET_SECRET, not_found(f"projects/{project}/secrets/{secret_id}"))


def secret_read_failed(project: str, secret_id: str, google_error: str) -> str:
    resource = f'SecretManagerSecret "projects/{project}/secrets/{secret_id}"'
    return invoke_error(GET_SECRET, resource_read_error(resource, google_error))


def service_disabled(project_number: str, service: str, title: str) -> str:
    """A Google API not enabled in the project: 403, reason accessNotConfigured (the reason
    terraform-provider-google's IsApiNotEnabledError tests, google-beta/transport/transport.go) and an
    ErrorInfo SERVICE_DISABLED naming the service (AIP-193's ErrorInfo; google.rpc.ErrorInfo). The message
    as Google's front end words it (quoted in issues such as midl-dev/tezos-on-gke#34)."""
    message = (f"{title} has not been used in project {project_number} before or it is disabled. Enable it by "
               f"visiting https://console.developers.google.com/apis/api/{service}/overview?project="
               f"{project_number} then retry. If you enabled this API recently, wait a few minutes for the "
               "action to propagate to our systems and retry.")
    details = [{
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": "SERVICE_DISABLED",
        "domain": "googleapis.com",
        "metadata": {"consumer": f"projects/{project_number}", "service": service,
                     "activationUrl": f"https://console.developers.google.com/apis/api/{service}/overview"
                                      f"?project={project_number}",
                     "serviceTitle": title, "containerInfo": project_number},
    }]
    return googleapi_error(403, message, "accessNotConfigured", details)


def compute_permission_denied(permission: str, resource: str) -> str:
    """Compute's 403 for a missing permission: reason `forbidden`, the message naming the permission and
    the resource (Compute keeps the legacy `errors` item; as users quote it, e.g.
    hashicorp/packer-plugin-googlecompute#137, terraform-google-modules/terraform-google-vault#206)."""
    return googleapi_error(403, f"Required '{permission}' permission for '{resource}'", "forbidden")
