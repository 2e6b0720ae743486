"""A fake TPU v2alpha1 API: queued resources with a state machine, operations, nodes, faults.

It behaves like the real API where the provider's correctness depends on it:
- `requestId` makes create idempotent: the same id again returns the first call's operation;
  a create for a name that exists, under any other request id, is 409 ALREADY_EXISTS;
- operations are pending (`done: false`) for `operation_polls` reads before they finish;
- a deleted queued resource is DELETING for `deleting_reads` reads before it is gone;
- every create body is checked against the discovery document's QueuedResource schema
  (400 INVALID_ARGUMENT on an unknown field or enum value), and GET returns it with the
  server's own fields added (name, createTime, state, terminationTime), empty values
  omitted as proto3 JSON does;
- each node that becomes READY gets its own int64 `id` and `createTime`;
- an optional OAuth token endpoint (POST /token) and a required bearer token;
- an outage: while `outage(request)` is true every request, the token endpoint's too, gets 503.
"""

from __future__ import annotations

import copy
import re
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.discovery_schema import validate_queued_resource
from tests.fakes.http import FakeServer, Request, Response

QR_PATH = re.compile(r"^/v2alpha1/(projects/[^/]+/locations/[^/]+)/queuedResources(?:/([^/]+))?$")
OP_PATH = re.compile(r"^/v2alpha1/(projects/[^/]+/locations/[^/]+/operations/[^/]+)$")
NODE_PATH = re.compile(r"^/v2alpha1/(projects/[^/]+/locations/[^/]+/nodes/([^/]+))$")
TOKEN_PATH = "/token"
QR_TYPE_URL = "type.googleapis.com/google.cloud.tpu.v2alpha1.QueuedResource"
FIRST_NODE_UID = 7_301_558_120_644_123_000
CREATE_TIME = "2026-11-29T09:00:00.123456Z"


# HTTP status -> google.rpc.Code name, as Google APIs map them (googleapis google/rpc/code.proto's "HTTP Mapping"
# lines, @16b971c4; AIP-193). No code maps to 502: an injected 502 says UNKNOWN.
RPC_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
              409: "ALREADY_EXISTS", 429: "RESOURCE_EXHAUSTED", 499: "CANCELLED", 500: "INTERNAL",
              501: "UNIMPLEMENTED", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}


def error(status: int, code: str, message: str, details: list | None = None, headers=None) -> Response:
    """A Google API error body (AIP-193): {"error": {code, message, status, details}}; proto3 JSON leaves an
    empty `details` out."""
    body = {"code": status, "status": code, "message": message}
    if details:
        body["details"] = details
    return Response(status, {"error": body}, headers=headers)


def retry_info(seconds: int) -> dict[str, str]:
    """google.rpc.RetryInfo (google/rpc/error_details.proto), how AIP-193 says to ask a client to wait."""
    return {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{seconds}s"}


def without_empty_values(value: Any) -> Any:
    """proto3 JSON leaves out empty maps, lists and strings and false booleans."""
    if isinstance(value, dict):
        kept = {key: without_empty_values(item) for key, item in value.items()}
        return {key: item for key, item in kept.items() if item not in ({}, [], "", False, None)}
    if isinstance(value, list):
        return [without_empty_values(item) for item in value]
    return value


@dataclass
class Fault:
    """Answer the next matching request with this instead of the normal reply."""

    method: str
    path_contains: str
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    times: int = 1
    drop_connection: bool = False
    after_handling: bool = False
    """The server does the work first, then the reply is lost (status or dropped connection)."""
    raw_body: bytes | None = None
    """Sent with `status` instead of an API error: a page from something that is not the API."""
    details: list[dict[str, Any]] | None = None
    """google.rpc details of the error body (e.g. retry_info)."""
    hold: threading.Event | None = None
    """The reply waits until this is set: a request that hangs (the client's timeout ends it first)."""


@dataclass
class Operation:
    name: str
    target: str
    verb: str
    polls_left: int
    error: dict[str, Any] | None = None
    """google.rpc.Status of an operation that finishes failed (google/longrunning/operations.proto)."""


class FakeTpuApi(FakeServer):
    def __init__(self, states: list[str] | None = None, failed_message: str = "",
                 refuse_delete: int = 0, termination_time: str = "2026-11-29T13:00:00Z",
                 operation_polls: int = 1, deleting_reads: int = 1, honour_request_id: bool = True,
                 access_token: str | None = None, conflict_in_operation: bool = False):
        super().__init__()
        # Each GET of the queued resource moves one step along this path.
        self.states = states or ["WAITING_FOR_RESOURCES", "PROVISIONING", "ACTIVE"]
        self.failed_message = failed_message
        self.refuse_delete = refuse_delete
        self.termination_time = termination_time
        self.operation_polls = operation_polls
        self.deleting_reads = deleting_reads
        self.honour_request_id = honour_request_id
        self.access_token = access_token
        """When set, every API call must carry `Authorization: Bearer <it>`; POST /token hands it out."""
        self.conflict_in_operation = conflict_in_operation
        """A create of a name that exists is accepted and its operation fails with ALREADY_EXISTS (code 6),
        instead of a 409 to the POST: no public source says which the TPU API does, so the provider must
        be safe with both."""
        self.faults: deque[Fault] = deque()
        self.queued: dict[str, dict[str, Any]] = {}
        self.steps: dict[str, deque[str]] = {}
        self.deleting: dict[str, int] = {}
        self.nodes: dict[str, dict[str, Any]] = {}
        self.created_bodies: list[dict[str, Any]] = []
        self.deleted: list[str] = []
        self.operations: dict[str, Operation] = {}
        self.request_ids: dict[str, str] = {}
        self.token_requests: list[Request] = []
        self.token_refusals: deque[Response] = deque()
        self.outage: Callable[[Request], bool] | None = None
        self.outage_replies = 0
        self.nodes_made = 0
        self.node_state = "READY"

    # Test controls
    def inject(self, fault: Fault) -> None:
        self.faults.append(fault)

    def refuse_tokens(self, status: int, code: str, description: str, times: int = 1) -> None:
        """The next `times` token requests get an OAuth error (RFC 6749 5.2) instead of a token."""
        for _ in range(times):
            self.token_refusals.append(Response(status, {"error": code, "error_description": description}))

    def suspend(self, name: str) -> None:
        """The run duration ended: GCP deletes the node and suspends the request."""
        self.queued[name]["state"] = {"state": "SUSPENDED", "stateInitiator": "SERVICE"}
        self.steps[name].clear()
        self.nodes.pop(name, None)

    def seed(self, name: str, body: dict[str, Any], state: str, then: list[str] | None = None,
             deleting_reads: int | None = None) -> None:
        """A queued resource this test did not create (an earlier, interrupted run's)."""
        self._store(name, body, state)
        # The first read shows `state`; each later one moves a step along `then`.
        self.steps[name] = deque([state, *then] if then else [])
        if state == "ACTIVE":
            self._make_node(name)
        if state == "DELETING":
            self.deleting[name] = self.deleting_reads if deleting_reads is None else deleting_reads

    def put(self, name: str, body: dict[str, Any], state: str, **fields: Any) -> None:
        """A queued resource that already exists and stays in `state` (for readers such as tools.status)."""
        self.queued[name] = {**body, "name": name, "state": {"state": state}, **fields}
        if state == "FAILED":
            self.queued[name]["state"]["failedData"] = {"error": {"code": 8, "message": self.failed_message}}
        self.steps[name] = deque()
        if state == "ACTIVE":
            self._make_node(name)

    def _fault_for(self, request: Request) -> Fault | None:
        for fault in list(self.faults):
            if fault.method == request.method and fault.path_contains in request.path:
                fault.times -= 1
                if fault.times <= 0:
                    self.faults.remove(fault)
                return fault
        return None

    @staticmethod
    def _fault_reply(fault: Fault) -> Response | None:
        if fault.drop_connection:
            return None
        if fault.raw_body is not None:
            reply = Response(fault.status, raw=fault.raw_body, headers={"Content-Type": "text/html", **fault.headers})
        else:
            reply = error(fault.status, RPC_STATUS.get(fault.status, "UNKNOWN"), f"injected {fault.status}",
                          fault.details, headers=fault.headers)
        reply.hold = fault.hold
        return reply

    def handle(self, request: Request) -> Response | None:
        if self.outage is not None and self.outage(request):
            self.outage_replies += 1
            return error(503, "UNAVAILABLE", "The service is currently unavailable.")
        if request.path == TOKEN_PATH and request.method == "POST":
            self.token_requests.append(request)
            if self.token_refusals:
                return self.token_refusals.popleft()
            return Response(200, {"access_token": self.access_token or "unused", "expires_in": 3600,
                                  "token_type": "Bearer"})
        if self.access_token and request.headers.get("Authorization") != f"Bearer {self.access_token}":
            return error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
        fault = self._fault_for(request)
        if fault is not None and not fault.after_handling:
            return self._fault_reply(fault)
        response = self._route(request)
        return self._fault_reply(fault) if fault is not None else response

    def _route(self, request: Request) -> Response:
        if match := OP_PATH.match(request.path):
            return self._get_operation(match.group(1))
        if match := NODE_PATH.match(request.path):
            return self._node(match.group(1))
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
        # No HTTP binding for this method (google/cloud/tpu/v2alpha1/cloud_tpu.proto: only GET and DELETE on a
        # queued resource, POST on the collection). What Google's front end answers then is not documented: the
        # fake says UNIMPLEMENTED with code.proto's HTTP mapping for it, 501, in words of its own.
        return error(501, "UNIMPLEMENTED", f"Method {request.method} is not implemented for {request.path}")

    # Operations
    def _new_operation(self, target: str, verb: str) -> Operation:
        location = target.split("/queuedResources/")[0]
        operation = Operation(f"{location}/operations/operation-{len(self.operations) + 1}", target, verb,
                              self.operation_polls)
        self.operations[operation.name] = operation
        return operation

    def _operation_view(self, operation: Operation) -> dict[str, Any]:
        view: dict[str, Any] = {
            "name": operation.name,
            "metadata": {"@type": "type.googleapis.com/google.cloud.common.OperationMetadata",
                         "createTime": CREATE_TIME, "target": operation.target, "verb": operation.verb,
                         "apiVersion": "v2alpha1"},
            "done": operation.polls_left <= 0,
        }
        if view["done"] and operation.error is not None:
            view["error"] = operation.error
        elif view["done"]:
            if operation.verb == "create" and operation.target in self.queued:
                view["response"] = {"@type": QR_TYPE_URL, **self.queued[operation.target]}
            else:
                view["response"] = {"@type": "type.googleapis.com/google.protobuf.Empty"}
        return view

    def _get_operation(self, name: str) -> Response:
        operation = self.operations.get(name)
        if operation is None:
            return error(404, "NOT_FOUND", f"operation {name} not found")
        view = self._operation_view(operation)
        operation.polls_left -= 1
        return Response(200, view)

    # Queued resources
    def _store(self, name: str, body: dict[str, Any], state: str) -> None:
        stored = without_empty_values(copy.deepcopy(body))
        self.queued[name] = {**stored, "name": name, "createTime": CREATE_TIME, "state": {"state": state}}

    def _create(self, parent: str, request: Request) -> Response:
        qr_id = request.query.get("queuedResourceId")
        name = f"{parent}/queuedResources/{qr_id}"
        request_id = request.query.get("requestId")
        if self.honour_request_id and request_id in self.request_ids:
            # Idempotent: the same request again is answered with the first call's operation.
            return Response(200, self._operation_view(self.operations[self.request_ids[request_id]]))
        if name in self.queued and self.conflict_in_operation:
            operation = self._new_operation(name, "create")
            operation.error = {"code": 6, "message": f"Resource '{name}' already exists"}
            return Response(200, self._operation_view(operation))
        if name in self.queued:
            return error(409, "ALREADY_EXISTS", f"Resource '{name}' already exists")
        body = request.json()
        problems = validate_queued_resource(body)
        if problems:
            return error(400, "INVALID_ARGUMENT", "; ".join(problems))
        self.created_bodies.append(body)
        self._store(name, body, "CREATING")
        self.steps[name] = deque(self.states)
        operation = self._new_operation(name, "create")
        if request_id:
            self.request_ids[request_id] = operation.name
        return Response(200, self._operation_view(operation))

    def _get(self, name: str) -> Response:
        queued = self.queued.get(name)
        if queued is None:
            return error(404, "NOT_FOUND", f"Resource '{name}' was not found")
        if name in self.deleting:
            if self.deleting[name] <= 0:
                self._forget(name)
                return error(404, "NOT_FOUND", f"Resource '{name}' was not found")
            self.deleting[name] -= 1
        elif self.steps[name]:
            state = self.steps[name].popleft()
            queued["state"] = {"state": state}
            if state == "FAILED":
                queued["state"]["failedData"] = {"error": {"code": 8, "message": self.failed_message}}
            if state == "ACTIVE":
                self._make_node(name)
                if "runDuration" in queued:
                    queued["runDuration"]["terminationTime"] = self.termination_time
        return Response(200, queued)

    def _forget(self, name: str) -> None:
        for table in (self.queued, self.steps, self.deleting, self.nodes):
            table.pop(name, None)

    def _delete(self, name: str, request: Request) -> Response:
        if name not in self.queued:
            return error(404, "NOT_FOUND", f"Resource '{name}' was not found")
        if request.query.get("force") != "true":
            return error(400, "FAILED_PRECONDITION", "queued resource has nodes; use force")
        if self.refuse_delete > 0:
            self.refuse_delete -= 1
            return error(400, "FAILED_PRECONDITION", "cannot delete a queued resource in PROVISIONING state")
        if name not in self.deleting:
            self.queued[name]["state"] = {"state": "DELETING"}
            self.deleting[name] = self.deleting_reads
            self.nodes.pop(name, None)
            self.deleted.append(name)
        return Response(200, self._operation_view(self._new_operation(name, "delete")))

    # Nodes
    def _make_node(self, name: str) -> None:
        if name in self.nodes:
            return
        self.nodes_made += 1
        spec = self.queued[name]["tpu"]["nodeSpec"][0]
        self.nodes[name] = {
            "name": f"{spec['parent']}/nodes/{spec['nodeId']}",
            "id": str(FIRST_NODE_UID + self.nodes_made),
            "createTime": f"2026-11-29T09:{self.nodes_made:02d}:00.000000Z",
            "state": "READY",
            **copy.deepcopy(spec["node"]),
            "networkEndpoints": [{"ipAddress": "10.164.0.7", "port": 8470,
                                  "accessConfig": {"externalIp": "34.0.0.7"}}],
        }

    def node_uids(self) -> list[str]:
        return [node["id"] for node in self.nodes.values()]

    def _node(self, node_name: str) -> Response:
        for name, node in self.nodes.items():
            if node["name"] == node_name and self.queued[name]["state"]["state"] == "ACTIVE":
                return Response(200, {**node, "state": self.node_state})
        return error(404, "NOT_FOUND", f"Resource '{node_name}' was not found")
