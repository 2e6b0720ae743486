"""The Compute Engine v1 calls the compute path makes: insert, read and delete an instance, set its labels, read a
zone operation. The same retrying wrapper as the TPU client (tpu_api.TpuApi: transient faults retried, Retry-After
honoured, a refusal said with its reason), over Compute v1. Method and field names are compute.v1.json's
(googleapiclient's discovery cache, revision 20261106: instances.insert/get/delete/setLabels, zoneOperations.get,
Operation); TPU_VLLM_COMPUTE_API_ENDPOINT points the client at a fake in tests.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any, ClassVar

from components.vm.tpu_api import TpuApi, TpuApiError
from components.vm.tpu_request import CLOUD_PLATFORM_SCOPE

ENDPOINT_ENV = "TPU_VLLM_COMPUTE_API_ENDPOINT"
PREFIX = "[tpu-vllm compute instance]"

# A refusal or an outage of Compute Engine: the TPU client's error, with its `status` and `transient`.
ComputeApiError = TpuApiError


def log(message: str) -> None:
    # The dynamic-provider host has no engine log stream; stderr reaches the CLI's diagnostics.
    try:
        print(f"{PREFIX} {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass  # the CLI reading it is gone: the cleanup must go on


class ComputeApi(TpuApi):
    """instances and zoneOperations of Compute v1; a 404 on a read or a delete is None (nothing there)."""

    API_NAME: ClassVar[str] = "Compute Engine"
    # compute.instances.create, .delete, .setLabels, .get (Compute Instance Admin (v1), create-flex-start-vm).
    ADMIN_ROLE: ClassVar[str] = "roles/compute.instanceAdmin.v1"
    ENDPOINT: ClassVar[str] = ENDPOINT_ENV

    def say(self, message: str) -> None:
        log(message)

    @property
    def service(self) -> Any:
        if self._service is None:
            import google.auth
            from google.api_core.client_options import ClientOptions
            from googleapiclient import discovery

            credentials, _ = google.auth.default(scopes=[CLOUD_PLATFORM_SCOPE])
            endpoint = os.environ.get(ENDPOINT_ENV)
            self._service = discovery.build(
                "compute", "v1", credentials=credentials, static_discovery=True, cache_discovery=False,
                client_options=ClientOptions(api_endpoint=endpoint) if endpoint else None)
        return self._service

    def _collection(self, name: str) -> Any:
        if name not in self._collections:
            self._collections[name] = getattr(self.service, name)()
        return self._collections[name]

    def insert(self, project: str, zone: str, body: dict[str, Any], request_id: str) -> dict[str, Any]:
        """The insert's Operation. `request_id` is the same on every retry, so a retry after a lost reply is the
        same request ("the server will know to ignore the request if it has already been completed", requestId)."""
        return self.call("instances.insert", lambda: self._collection("instances").insert(
            project=project, zone=zone, requestId=request_id, body=body))

    def get(self, project: str, zone: str, name: str) -> dict[str, Any] | None:
        return self.call("instances.get", lambda: self._collection("instances").get(
            project=project, zone=zone, instance=name), allow=(404,))

    def delete(self, project: str, zone: str, name: str) -> dict[str, Any] | None:
        """The delete's Operation, or None when there is no such instance."""
        return self.call("instances.delete", lambda: self._collection("instances").delete(
            project=project, zone=zone, instance=name), allow=(404,))

    def set_labels(self, project: str, zone: str, name: str, labels: dict[str, str],
                   fingerprint: str) -> dict[str, Any]:
        return self.call("instances.setLabels", lambda: self._collection("instances").setLabels(
            project=project, zone=zone, instance=name, body={"labels": labels, "labelFingerprint": fingerprint}))

    def operation(self, project: str, zone: str, name: str) -> dict[str, Any]:
        return self.call("zoneOperations.get", lambda: self._collection("zoneOperations").get(
            project=project, zone=zone, operation=name))

    def finished(self, project: str, zone: str, operation: dict[str, Any], deadline: float, poll: float,
                 what: str) -> dict[str, Any] | None:
        """The operation read every `poll` (through outages) until DONE; None when `deadline` comes first."""
        read = functools.partial(self.operation, project, zone, operation.get("name", ""))
        while operation.get("status") != "DONE":
            if self.clock() + poll > deadline:
                return None
            self.sleep(poll)
            operation = self.through_outages(read, deadline, poll, f"the {what} operation")
        return operation


def operation_errors(operation: dict[str, Any]) -> list[dict[str, Any]]:
    """A finished Operation's `error.errors` (each `code`, `message`, maybe `errorDetails`)."""
    return [item for item in ((operation.get("error") or {}).get("errors") or []) if isinstance(item, dict)]


def describe_errors(errors: list[dict[str, Any]]) -> str:
    """The operation's own words, each item's code and message; a quota's metric and limit where it names them
    (Operation.error.errors[].errorDetails[].quotaInfo: metricName, limitName, limit, dimensions)."""
    said = []
    for item in errors:
        text = f"{item.get('code', 'UNKNOWN')}: {item.get('message', 'no message')}"
        for detail in item.get("errorDetails") or []:
            quota = (detail or {}).get("quotaInfo") if isinstance(detail, dict) else None
            if quota:
                text += (f" (quota {quota.get('metricName', '?')}, limit {quota.get('limit', '?')}"
                         f" {quota.get('limitName', '')}".rstrip() + ")")
        said.append(text)
    return "; ".join(said) or "no reason given"
