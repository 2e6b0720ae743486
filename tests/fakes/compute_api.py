"""A fake Compute Engine v1 API on 127.0.0.1: instances (insert, get, delete), zone operations, a billing ledger.

Its answers are compute.v1.json's (google-api-python-client's discovery cache, revision 20261106): an Instance
with `status` from the schema's enum (a TPU or flex-start instance is PENDING first, then RUNNING: "Flex-start
… and TPU instances start instead in the PENDING state", Google's instance life cycle page; PENDING is "waiting for
available capacity from Dynamic Workload Scheduler"), an Operation (`kind` compute#operation, `operationType`, `status`
PENDING/RUNNING/DONE, `targetLink`), and Google's JSON error body for a missing instance (404, reason notFound).
tests/test_instance_guard.py checks every body it gives against the Instance and Operation schemas.

The ledger: each instance bills from when it is RUNNING until its delete (a PENDING one bills nothing); what is
billing at any moment is `billing()`.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

from tests.fakes.http import FakeServer, Request, Response

INSTANCE_PATH = re.compile(r"^/compute/v1/projects/([^/]+)/zones/([^/]+)/instances(?:/([^/]+))?$")
TOKEN_PATH = "/token"
CREATION = "2026-12-07T09:00:00.000-08:00"
# Compute Engine's TPU machine types (ct6e-standard-*, tpu7x-standard-*, ct5p-*: compute/docs/tpus/tpu-machines).
TPU_MACHINE_PREFIXES = ("ct", "tpu")


@dataclass
class Billing:
    name: str
    started: bool = False
    ended: bool = False


class FakeComputeApi(FakeServer):
    def __init__(self, access_token: str = "") -> None:
        super().__init__()
        self.access_token = access_token
        self.instances: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.ledger: list[Billing] = []
        self._ids = itertools.count(6_100_000_000_000_000_001)

    # What a test does to the world (the bridged provider's insert, capacity arriving).
    def insert(self, project: str, zone: str, body: dict[str, Any]) -> dict[str, Any]:
        """An insert as pulumi-gcp sends it; a FLEX_START or TPU one starts PENDING (capacity_arrives runs it)."""
        machine = str(body.get("machineType") or "").rsplit("/", 1)[-1]
        flex = (body.get("scheduling") or {}).get("provisioningModel") == "FLEX_START" \
            or machine.startswith(TPU_MACHINE_PREFIXES)
        name = body["name"]
        link = f"{self.url}/compute/v1/projects/{project}/zones/{zone}/instances/{name}"
        self.instances[(project, zone, name)] = {
            **body, "kind": "compute#instance", "id": str(next(self._ids)), "creationTimestamp": CREATION,
            "status": "PENDING" if flex else "RUNNING", "selfLink": link,
            "zone": f"{self.url}/compute/v1/projects/{project}/zones/{zone}"}
        self.ledger.append(Billing(name, started=not flex))
        return self.operation("insert", project, zone, link)

    def capacity_arrives(self, project: str, zone: str, name: str) -> None:
        self.instances[(project, zone, name)]["status"] = "RUNNING"
        self._billing_of(name).started = True

    def billing(self) -> list[str]:
        return [entry.name for entry in self.ledger if entry.started and not entry.ended]

    def _billing_of(self, name: str) -> Billing:
        return next(entry for entry in reversed(self.ledger) if entry.name == name)

    def operation(self, kind: str, project: str, zone: str, target: str) -> dict[str, Any]:
        number = next(self._ids)
        return {"kind": "compute#operation", "id": str(number), "name": f"operation-{number}",
                "operationType": kind, "status": "RUNNING", "targetLink": target,
                "zone": f"{self.url}/compute/v1/projects/{project}/zones/{zone}", "progress": 0,
                "insertTime": CREATION, "selfLink": f"{self.url}/compute/v1/projects/{project}/zones/{zone}/"
                                                    f"operations/operation-{number}"}

    def handle(self, request: Request) -> Response:
        if request.path == TOKEN_PATH:
            return Response(200, {"access_token": self.access_token, "expires_in": 3600, "token_type": "Bearer"})
        if self.access_token and request.headers.get("Authorization") != f"Bearer {self.access_token}":
            return _error(401, "Request is missing required authentication credential.", "required")
        matched = INSTANCE_PATH.match(request.path)
        if not matched or not matched.group(3):
            return _error(404, f"The requested URL {request.path} was not found.", "notFound")
        project, zone, name = matched.groups()
        key = (project, zone, name)
        found = self.instances.get(key)
        if found is None:
            return _error(404, f"The resource 'projects/{project}/zones/{zone}/instances/{name}' was not found",
                          "notFound")
        if request.method == "GET":
            return Response(200, found)
        if request.method == "DELETE":
            del self.instances[key]
            self._billing_of(name).ended = True
            return Response(200, self.operation("delete", project, zone, found["selfLink"]))
        return _error(405, "Method not allowed", "httpMethodNotAllowed")


def _error(status: int, message: str, reason: str) -> Response:
    """Google's JSON error body (the `error` object with `errors[].reason`, as Compute Engine sends it)."""
    return Response(status, {"error": {"code": status, "message": message,
                                       "errors": [{"message": message, "domain": "global", "reason": reason}]}})
