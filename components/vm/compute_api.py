"""The two Compute Engine v1 calls the compute path makes itself (the instance is pulumi-gcp's): read an instance,
delete one. Method and field names are compute.v1.json's (googleapiclient's discovery cache, revision 20261106:
instances.get, instances.delete, Operation); TPU_VLLM_COMPUTE_API_ENDPOINT points the client at a fake in tests.
"""

from __future__ import annotations

import os
from typing import Any

from components.vm.tpu_request import CLOUD_PLATFORM_SCOPE

ENDPOINT_ENV = "TPU_VLLM_COMPUTE_API_ENDPOINT"


class ComputeApiError(Exception):
    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class ComputeApi:
    """instances.get and instances.delete; a 404 is None (the instance is not there)."""

    def __init__(self) -> None:
        self._instances: Any = None

    def _collection(self) -> Any:
        if self._instances is None:
            import google.auth
            from google.api_core.client_options import ClientOptions
            from googleapiclient import discovery

            credentials, _ = google.auth.default(scopes=[CLOUD_PLATFORM_SCOPE])
            endpoint = os.environ.get(ENDPOINT_ENV)
            self._instances = discovery.build(
                "compute", "v1", credentials=credentials, static_discovery=True, cache_discovery=False,
                client_options=ClientOptions(api_endpoint=endpoint) if endpoint else None).instances()
        return self._instances

    def _run(self, action: str, request: Any) -> dict[str, Any] | None:
        from googleapiclient.errors import HttpError

        try:
            return request.execute(num_retries=2)
        except HttpError as error:
            status = int(error.resp.status)
            if status == 404:
                return None
            raise ComputeApiError(f"{action}: HTTP {status}: {error._get_reason()}", status) from None

    def get(self, project: str, zone: str, name: str) -> dict[str, Any] | None:
        return self._run("instances.get", self._collection().get(project=project, zone=zone, instance=name))

    def delete(self, project: str, zone: str, name: str) -> dict[str, Any] | None:
        """The delete's Operation, or None when there is no such instance."""
        return self._run("instances.delete", self._collection().delete(project=project, zone=zone, instance=name))
