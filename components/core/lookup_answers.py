"""What a failed pulumi-gcp lookup (an invoke of a data source) means, read from the words it is made of.

The program sees one exception whose text four layers wrote (tools/plan/provider_answers.py lists them with
their sources): the SDK's "invoke of {tok} failed: ", the engine's "invocation of {tok} returned an error: ",
the bridge's "invoking {tok}: " around go-multierror's "1 error occurred:\\n\\t* {item}\\n\\n", and the item:
terraform-provider-google's own words. Only the items' format strings are relied on here:
- a data source that found nothing says "{id} not found" with the id it read
  (services/compute/data_source_google_compute_disk.go, services/secretmanager/data_source_secret_manager_secret.go);
- an API that is not enabled is googleapi's "googleapi: Error 403: ..." with reason accessNotConfigured
  (what the provider's own IsApiNotEnabledError tests, google-beta/transport/transport.go) or an ErrorInfo
  whose reason is SERVICE_DISABLED and whose metadata names the service (AIP-193).
Anything else is a real failure and is reported, never read as "absent".
"""

from __future__ import annotations

import json
import re

# go-multierror's list items; the bridge's and engine's prefixes before them.
_ITEM = re.compile(r"^\t\* (.*)$", re.MULTILINE)
_GOOGLEAPI_403 = "googleapi: Error 403: "


def provider_items(error: BaseException | str) -> list[str]:
    """The provider's own error texts (the multierror items), or the whole text when it has no list."""
    text = str(error)
    items = _ITEM.findall(text)
    if items:
        return items
    return [text.strip()]


def reason(error: BaseException | str) -> str:
    """The provider's words alone, without the SDK's, engine's and bridge's wrapping: for a message."""
    return "; ".join(provider_items(error))


def is_not_found(error: BaseException | str, resource_id: str) -> bool:
    """The data source read the id and found nothing there (a 404 on the resource's read)."""
    return any(item == f"{resource_id} not found" for item in provider_items(error))


def disabled_service(error: BaseException | str) -> str | None:
    """The API (e.g. compute.googleapis.com) a 403 says is not enabled in the project, or None."""
    text = str(error)
    start = text.find(_GOOGLEAPI_403)
    if start < 0:
        return None
    google_error = text[start:]
    services = set()
    details = re.search(r"\nDetails:\n(\[.*?\n\])\n", google_error, re.DOTALL)
    if details:
        try:
            parsed = json.loads(details.group(1))
        except ValueError:
            parsed = []
        for detail in parsed if isinstance(parsed, list) else []:
            if isinstance(detail, dict) and detail.get("reason") == "SERVICE_DISABLED":
                services.add(str((detail.get("metadata") or {}).get("service", "")))
    legacy = re.search(r"(?:, |Reason: )accessNotConfigured\b", google_error)
    if legacy and not services:
        # Without details the message names the service in its activation link.
        services.update(re.findall(r"/apis/api/([a-z0-9.-]+\.googleapis\.com)/overview", google_error))
    services.discard("")
    return services.pop() if len(services) == 1 else None
