"""A fake TPU v2alpha1 API: queued resources with a state machine, operations, nodes, faults."""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.http import FakeServer, Request, Response

QR_PATH = re.compile(r"^/v2alpha1/(projects/[^/]+/locations/[^/]+)/queuedResources(?:/([^/]+))?$")
OP_PATH = re.compile(r"^/v2alpha1/(projects/[^/]+/locations/[^/]+/operations/[^/]+)$")
NODE_PATH = re.compile(r"^/v2alpha1/(projects/[^/]+/locations/[^/]+/nodes/([^/]+))$")


def error(status: int, code: str, message: str, details: list | None = None, headers=None) -> Response:
    return Response(status, {"error": {"code": status, "status": code, "message": message,
                                       "details": details or []}}, headers=headers)


@dataclass
class Fault:
    """Answer the next matching request with this instead of the normal reply."""

    method: str
    path_contains: str
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    times: int = 1
    drop_connection: bool = False


class FakeTpuApi(FakeServer):
    def __init__(self, states: list[str] | None = None, failed_message: str = "",
                 refuse_delete: int = 0, termination_time: str = "2026-11-29T13:00:00Z"):
        super().__init__()
        # Each GET of the queued resource moves one step along this path.
        self.states = states or ["WAITING_FOR_RESOURCES", "PROVISIONING", "ACTIVE"]
        self.failed_message = failed_message
        self.refuse_delete = refuse_delete
        self.termination_time = termination_time
        self.faults: deque[Fault] = deque()
        self.queued: dict[str, dict[str, Any]] = {}
        self.steps: dict[str, deque[str]] = {}
        self.created_bodies: list[dict[str, Any]] = []
        self.deleted: list[str] = []
        self.operations = 0
        self.node_state = "READY"

    # Test controls
    def inject(self, fault: Fault) -> None:
        self.faults.append(fault)

    def suspend(self, name: str) -> None:
        """The run duration ended: GCP deletes the node and suspends the request."""
        self.queued[name]["state"] = {"state": "SUSPENDED", "stateInitiator": "SERVICE"}
        self.steps[name].clear()

    def put(self, name: str, body: dict[str, Any], state: str, **fields: Any) -> None:
        """A queued resource that already exists and stays in `state` (for readers such as tools.status)."""
        self.queued[name] = {**body, "name": name, "state": {"state": state}, **fields}
        if state == "FAILED":
            self.queued[name]["state"]["failedData"] = {"error": {"code": 8, "message": self.failed_message}}
        self.steps[name] = deque()

    def _fault_for(self, request: Request) -> Fault | None:
        for fault in list(self.faults):
            if fault.method == request.method and fault.path_contains in request.path:
                fault.times -= 1
                if fault.times <= 0:
                    self.faults.remove(fault)
                return fault
        return None

    def _operation(self, target: str, verb: str) -> Response:
        self.operations += 1
        location = target.split("/queuedResources/")[0]
        return Response(200, {"name": f"{location}/operations/op-{self.operations}", "done": False,
                              "metadata": {"target": target, "verb": verb}})

    def handle(self, request: Request) -> Response | None:
        fault = self._fault_for(request)
        if fault is not None:
            if fault.drop_connection:
                return None
            return error(fault.status, "INJECTED", f"injected {fault.status}", headers=fault.headers)

        if match := OP_PATH.match(request.path):
            return Response(200, {"name": match.group(1), "done": True, "response": {}})
        if match := NODE_PATH.match(request.path):
            return self._node(match.group(1), match.group(2))
        match = QR_PATH.match(request.path)
        if not match:
            return error(404, "NOT_FOUND", f"no route {request.path}")
        parent, qr_id = match.groups()
        if request.method == "POST" and qr_id is None:
            return self._create(parent, request)
        name = f"{parent}/queuedResources/{qr_id}"
        if request.method == "GET":
            return self._get(name)
        if request.method == "DELETE":
            return self._delete(name, request)
        return error(405, "METHOD", "unsupported")

    def _create(self, parent: str, request: Request) -> Response:
        qr_id = request.query.get("queuedResourceId")
        name = f"{parent}/queuedResources/{qr_id}"
        if name in self.queued:
            return error(409, "ALREADY_EXISTS", f"{name} already exists")
        body = request.json()
        self.created_bodies.append(body)
        self.queued[name] = {**body, "name": name, "state": {"state": "ACCEPTED"}}
        self.steps[name] = deque(self.states)
        return self._operation(name, "create")

    def _get(self, name: str) -> Response:
        queued = self.queued.get(name)
        if queued is None:
            return error(404, "NOT_FOUND", f"{name} not found")
        if self.steps[name]:
            state = self.steps[name].popleft()
            queued["state"] = {"state": state}
            if state == "FAILED":
                queued["state"]["failedData"] = {"error": {"code": 8, "message": self.failed_message}}
            if state == "ACTIVE" and "runDuration" in queued:
                queued["runDuration"]["terminationTime"] = self.termination_time
        return Response(200, queued)

    def _delete(self, name: str, request: Request) -> Response:
        if name not in self.queued:
            return error(404, "NOT_FOUND", f"{name} not found")
        if request.query.get("force") != "true":
            return error(400, "FAILED_PRECONDITION", "queued resource has nodes; use force")
        if self.refuse_delete > 0:
            self.refuse_delete -= 1
            return error(400, "FAILED_PRECONDITION", "cannot delete a queued resource in PROVISIONING state")
        del self.queued[name]
        self.deleted.append(name)
        return self._operation(name, "delete")

    def _node(self, name: str, node_id: str) -> Response:
        for queued in self.queued.values():
            spec = queued["tpu"]["nodeSpec"][0]
            if spec["nodeId"] == node_id and queued["state"]["state"] == "ACTIVE":
                return Response(200, {
                    "name": name, "state": self.node_state, **spec["node"],
                    "networkEndpoints": [{"ipAddress": "10.164.0.7", "port": 8470,
                                          "accessConfig": {"externalIp": "34.0.0.7"}}],
                })
        return error(404, "NOT_FOUND", f"{name} not found")
