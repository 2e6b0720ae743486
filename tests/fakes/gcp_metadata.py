"""A fake GCE metadata server and a fake Secret Manager v1 API."""

from __future__ import annotations

import base64
from collections import deque
from typing import Any

from tests.fakes.http import FakeServer, Request, Response

ACCESS_TOKEN = "ya29.FAKE-ACCESS-TOKEN-CANARY"


class FakeMetadata(FakeServer):
    def __init__(self, attributes: dict[str, str], email: str = "vm@proj.iam.gserviceaccount.com",
                 unavailable_first: int = 0, port: int = 0, token_reply: bytes | None = None):
        super().__init__(port)
        self.attributes = attributes
        self.email = email
        self.unavailable_first = unavailable_first
        self.token_reply = token_reply
        """A raw 200 body for the token request instead of the JSON (a captive proxy, a broken server)."""

    def handle(self, request: Request) -> Response:
        if request.headers.get("Metadata-Flavor") != "Google":
            return Response(403, raw=b"Missing Metadata-Flavor:Google header")
        if self.unavailable_first > 0:
            self.unavailable_first -= 1
            return Response(503, raw=b"not ready")
        prefix = "/computeMetadata/v1/"
        path = request.path.removeprefix(prefix)
        if path.startswith("instance/attributes/"):
            name = path.removeprefix("instance/attributes/")
            if name in self.attributes:
                return Response(200, raw=self.attributes[name].encode(), headers={"Content-Type": "text/plain"})
            return Response(404, raw=b"not found")
        if path == "instance/service-accounts/default/token":
            if self.token_reply is not None:
                return Response(200, raw=self.token_reply, headers={"Content-Type": "text/html"})
            return Response(200, {"access_token": ACCESS_TOKEN, "expires_in": 3599, "token_type": "Bearer"})
        if path == "instance/service-accounts/default/email":
            return Response(200, raw=self.email.encode(), headers={"Content-Type": "text/plain"})
        return Response(404, raw=b"not found")


class FakeSecretManager(FakeServer):
    """secrets: resource name -> value; faults: resource name -> statuses to answer first."""

    def __init__(self, secrets: dict[str, str], faults: dict[str, list[int]] | None = None):
        super().__init__()
        self.secrets = secrets
        self.faults = {name: deque(statuses) for name, statuses in (faults or {}).items()}

    def handle(self, request: Request) -> Response:
        if request.headers.get("Authorization") != f"Bearer {ACCESS_TOKEN}":
            return Response(401, {"error": {"code": 401, "message": "no or bad credentials"}})
        path = request.path.removeprefix("/v1/")
        name = path.removesuffix("/versions/latest:access")
        pending = self.faults.get(name)
        if pending:
            status = pending.popleft()
            return Response(status, {"error": {"code": status, "message": f"injected {status}"}})
        if name not in self.secrets:
            return Response(404, {"error": {"code": 404, "message": f"Secret [{name}] not found or has no versions."}})
        data: Any = base64.b64encode(self.secrets[name].encode()).decode()
        return Response(200, {"name": f"{name}/versions/1", "payload": {"data": data}})
