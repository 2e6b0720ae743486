"""A fake GCE metadata server and a fake Secret Manager v1 API, answering in the real services' words.

Sources (read, not copied):
- Metadata server: google-auth 2.63.0 google/auth/compute_engine/_metadata.py (the request header, and a reply is
  trusted only when it carries `Metadata-Flavor: Google`; the token JSON's fields).
- Secret Manager: the v1 discovery document rev 20261021 (google-api-python-client 2.202.0,
  googleapiclient/discovery_cache/documents/secretmanager.v1.json): AccessSecretVersionResponse{name, payload{data,
  dataCrc32c}}, SecretVersion.state ENABLED|DISABLED|DESTROYED; HTTP <-> google.rpc.Code from googleapis-common-protos
  1.76.0 google/rpc/code.proto. The message texts have no public source file; each is quoted from a real API body in a
  public issue, named beside it.
"""

from __future__ import annotations

import base64
import re
from collections import deque

from tests.fakes.http import FakeServer, Request, Response
from tests.fakes.tpu_api import RPC_STATUS

ACCESS_TOKEN = "ya29.FAKE-ACCESS-TOKEN-CANARY"
# The metadata server marks every reply as its own (google-auth _metadata.py:100-102, 232-235 checks it).
METADATA_FLAVOR = {"Metadata-Flavor": "Google"}
# Secret Manager names a version by the project NUMBER, whatever the request said (the gcloud transcripts below).
PROJECT_NUMBER = "123456789012"
# The status name a Google API error body carries for an HTTP status: the TPU fake's table, code.proto's "HTTP
# Mapping" lines (no code maps to 502: UNKNOWN); a caller names another where one status maps to several (400).
STATUS_NAMES = RPC_STATUS
# Google's 401 texts, as real API bodies quote them (no source file; e.g. the Google Ads and Sheets bodies found by
# find_string "Expected OAuth 2 access token, login cookie"): one for no credential, one for a rejected one.
UNAUTHENTICATED_MISSING = ("Request is missing required authentication credential. Expected OAuth 2 access token, "
                           "login cookie or other valid authentication credential. "
                           "See https://developers.google.com/identity/sign-in/web/devconsole-project.")
UNAUTHENTICATED_INVALID = ("Request had invalid authentication credentials. Expected OAuth 2 access token, login "
                           "cookie or other valid authentication credential. "
                           "See https://developers.google.com/identity/sign-in/web/devconsole-project.")


class FakeMetadata(FakeServer):
    def __init__(self, attributes: dict[str, str], email: str = "vm@proj.iam.gserviceaccount.com",
                 unavailable_first: int = 0, port: int = 0, token_reply: bytes | None = None,
                 host: str = "127.0.0.1"):
        super().__init__(port, host)
        self.attributes = attributes
        self.email = email
        self.unavailable_first = unavailable_first
        self.token_reply = token_reply
        """A raw 200 body for the token request instead of the JSON (a captive proxy, a broken server)."""

    def handle(self, request: Request) -> Response:
        response = self._answer(request)
        response.headers.update(METADATA_FLAVOR)
        return response

    def _answer(self, request: Request) -> Response:
        # The 403 and 404 bodies are HTML pages whose wording no public source gives; only the statuses are
        # documented (Compute Engine's "Troubleshoot the metadata server" page). Nothing reads these bodies.
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


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): what SecretPayload.dataCrc32c holds."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def google_error(status: int, message: str, status_name: str | None = None) -> Response:
    """A Google API error body: {"error": {code, message, status}} (AIP-193; the quoted bodies below)."""
    name = status_name or STATUS_NAMES.get(status, "UNKNOWN")
    return Response(status, {"error": {"code": status, "message": message, "status": name}})


class FakeSecretManager(FakeServer):
    """secrets: resource name -> value of its latest version; faults: resource name -> statuses to answer first;
    latest_state: resource name -> DISABLED or DESTROYED, for a secret whose latest version cannot be read."""

    def __init__(self, secrets: dict[str, str], faults: dict[str, list[int]] | None = None,
                 latest_state: dict[str, str] | None = None, latest_version: int = 1):
        super().__init__()
        self.secrets = secrets
        self.faults = {name: deque(statuses) for name, statuses in (faults or {}).items()}
        self.latest_state = latest_state or {}
        self.latest_version = latest_version

    @staticmethod
    def numbered(name: str) -> str:
        return re.sub(r"^projects/[^/]+/", f"projects/{PROJECT_NUMBER}/", name)

    def handle(self, request: Request) -> Response:
        authorization = request.headers.get("Authorization")
        if authorization is None:
            return google_error(401, UNAUTHENTICATED_MISSING)
        if authorization != f"Bearer {ACCESS_TOKEN}":
            return google_error(401, UNAUTHENTICATED_INVALID)
        path = request.path.removeprefix("/v1/")
        name = path.removesuffix("/versions/latest:access")
        pending = self.faults.get(name)
        if pending:
            return self._fault(pending.popleft(), name)
        if name not in self.secrets:
            # gcloud transcripts: "NOT_FOUND: Secret [projects/153396971788/secrets/X] not found or has no versions."
            return google_error(404, f"Secret [{self.numbered(name)}] not found or has no versions.")
        version = f"{self.numbered(name)}/versions/{self.latest_version}"
        state = self.latest_state.get(name)
        if state is not None:
            # `latest` is the newest version whatever its state (discovery doc: "an alias to the most recently
            # created SecretVersion"); the API refuses a version that is not ENABLED. Bodies quoted in
            # google-github-actions/get-secretmanager-secrets#268 (REST, 400 FAILED_PRECONDITION, DESTROYED) and
            # external-secrets/external-secrets#4042 and #1951 (gRPC FailedPrecondition, DISABLED and DESTROYED).
            return google_error(400, f"Secret Version [{version}] is in {state} state.", "FAILED_PRECONDITION")
        data = self.secrets[name].encode()
        return Response(200, {"name": version, "payload": {"data": base64.b64encode(data).decode(),
                                                           "dataCrc32c": str(crc32c(data))}})

    def _fault(self, status: int, name: str) -> Response:
        if status == 403:
            # gcloud transcript: "PERMISSION_DENIED: Permission 'secretmanager.versions.access' denied for resource
            # 'projects/relax-server/secrets/OPENAI_API_KEY/versions/latest' (or it may not exist)." (the name as
            # requested; find_string "Permission 'secretmanager.versions.access' denied").
            return google_error(403, f"Permission 'secretmanager.versions.access' denied for resource "
                                     f"'{name}/versions/latest' (or it may not exist).")
        if status == 503:
            # Google's usual 503 text (no public source file; see the TPU fake's outage answer).
            return google_error(status, "The service is currently unavailable.")
        # No public source gives Secret Manager's text for these; the status name is code.proto's.
        return google_error(status, f"(fake: no public source for Secret Manager's {status} text)")
