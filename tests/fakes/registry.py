"""A container registry on 127.0.0.1 answering manifest reads and the token flow as distribution/distribution does.

Sources (distribution/distribution @0d6b721, v3.1.1-53; read, not copied):
- registry/handlers/app.go authorized(): a refused request gets the access controller's challenge and
  errcode UNAUTHORIZED with the access records as detail; appendAccessRecords: GET and HEAD ask for `pull`.
- registry/auth/token/accesscontroller.go: the challenge `Bearer realm=..,service=..,scope=..` and its `error`:
  none without a token, `invalid_token` for a token it cannot verify (token.go: wrong audience = service),
  `insufficient_scope` for a token without the access asked.
- docs/content/spec/auth/token.md: the token server answers `token` and/or `access_token`; granting less than
  asked "must not be considered an error" (so it never refuses a scope; the registry does).
- registry/handlers/manifests.go GetManifest: MANIFEST_UNKNOWN for an unknown tag (detail ErrTagUnknown{Tag});
  an OCI index or manifest the Accept header does not list is MANIFEST_UNKNOWN with its own message; a Docker
  manifest list it does not list is rewritten to its linux/amd64 manifest; Content-Type is the manifest's own
  type, and Docker-Content-Digest and Etag go on GET and HEAD alike.
- registry/api/errcode/register.go (codes, messages, statuses), handler.go ServeJSON (application/json).
- registry/storage/blobserver.go ServeBlob: with a storage driver that hands out URLs, the registry answers
  307 Temporary Redirect to the storage URL (another host: S3, GCS, a CDN) instead of the bytes.
- registry/handlers/manifests.go: maxManifestBodySize = 4 * 1024 * 1024 (what distribution accepts).
digest_on_head=False models a registry other than distribution that leaves the header off a HEAD; redirect_to
sends manifest reads to a BlobStore, as a redirecting storage driver sends blob reads; HostileRegistry is a
registry that is not distribution at all: it streams a body without end.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.fakes.http import FakeServer, LoopbackServer, Request, Response

INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
SERVICE = "fake-registry"
# manifests.go: what a manifest list is rewritten to for a client that does not accept lists.
DEFAULT_PLATFORM = {"architecture": "amd64", "os": "linux"}


def manifest_bytes(tag: str, media_type: str = INDEX, manifests: list[dict] | None = None) -> bytes:
    return json.dumps({"schemaVersion": 2, "mediaType": media_type, "manifests": manifests or [],
                       "annotations": {"tag": tag}}, sort_keys=True).encode()


def errors(status: int, code: str, message: str, detail: object = None, headers: dict[str, str] | None = None):
    """errcode.ServeJSON: {"errors": [{code, message[, detail]}]} (detail is omitempty)."""
    error: dict[str, object] = {"code": code, "message": message}
    if detail is not None:
        error["detail"] = detail
    return Response(status, {"errors": [error]}, headers=headers)


class FakeRegistry(FakeServer):
    def __init__(self, tags: dict[str, dict[str, bytes]], *, digest_on_head: bool = True, realm: str | None = None,
                 redirect_to: str | None = None):
        super().__init__()
        self.redirect_to = redirect_to
        """A BlobStore's URL: authorized manifest reads are answered 307 to it (blobserver.go's redirect)."""
        self.tags = tags
        """repository -> tag -> manifest bytes (its mediaType field is its Content-Type)."""
        self.digest_on_head = digest_on_head
        self.realm = realm
        self.issued: dict[str, tuple[str, set[str]]] = {}
        """token -> (the service it was asked for, the scopes it grants)."""

    @staticmethod
    def digest(data: bytes) -> str:
        return "sha256:" + hashlib.sha256(data).hexdigest()

    def handle(self, request: Request) -> Response:
        if request.path == "/token":
            return self._token(request)
        match = re.fullmatch(r"/v2/(.+)/manifests/([^/]+)", request.path)
        if not match:
            # No route: gorilla/mux's default, net/http's NotFound (distribution sets no NotFoundHandler).
            return Response(404, raw=b"404 page not found\n", headers={"Content-Type": "text/plain; charset=utf-8"})
        repository, tag = match.groups()
        refused = self._refusal(request, repository)
        if refused is not None:
            return refused
        if self.redirect_to:
            return Response(307, raw=b"", headers={"Location": f"{self.redirect_to}{request.path}"})
        return self._manifest(request, repository, tag)

    def _token(self, request: Request) -> Response:
        # Only pull is ever granted; anything else asked is left out of the grant, not refused (token.md).
        granted = set()
        for scope in request.query.get("scope", "").split():
            kind, _, rest = scope.partition(":")
            name, _, actions = rest.rpartition(":")
            if kind == "repository" and "pull" in actions.split(","):
                granted.add(f"repository:{name}:pull")
        token = f"tok-{len(self.issued)}"
        self.issued[token] = (request.query.get("service", ""), granted)
        return Response(200, {"token": token})

    def _refusal(self, request: Request, repository: str) -> Response | None:
        scope = f"repository:{repository}:pull"
        prefix, _, token = request.headers.get("Authorization", "").partition(" ")
        if not token or prefix.lower() != "bearer":
            error = ""
        elif token not in self.issued or self.issued[token][0] != SERVICE:
            error = ',error="invalid_token"'
        elif scope not in self.issued[token][1]:
            error = ',error="insufficient_scope"'
        else:
            return None
        realm = self.realm or f"{self.url}/token"
        challenge = f'Bearer realm="{realm}",service="{SERVICE}",scope="{scope}"{error}'
        access = [{"Type": "repository", "Class": "", "Name": repository, "Action": "pull"}]
        return errors(401, "UNAUTHORIZED", "authentication required", access, {"WWW-Authenticate": challenge})

    def _manifest(self, request: Request, repository: str, tag: str) -> Response:
        stored = self.tags.get(repository, {})
        data = stored.get(tag)
        if data is None:
            return errors(404, "MANIFEST_UNKNOWN", "manifest unknown", {"Tag": tag})
        accepted = {part.split(";")[0].strip() for part in request.headers.get("Accept", "").split(",")}
        media_type = json.loads(data)["mediaType"]
        if media_type == INDEX and INDEX not in accepted:
            return errors(404, "MANIFEST_UNKNOWN", "OCI index found, but accept header does not support OCI indexes")
        if media_type == OCI_MANIFEST and OCI_MANIFEST not in accepted:
            return errors(404, "MANIFEST_UNKNOWN",
                          "OCI manifest found, but accept header does not support OCI manifests")
        if media_type == DOCKER_LIST and DOCKER_LIST not in accepted:
            data = self._default_platform_manifest(stored, data)
            if data is None:
                return errors(404, "MANIFEST_UNKNOWN", "manifest unknown")
            media_type = json.loads(data)["mediaType"]
            if media_type == DOCKER_MANIFEST and DOCKER_MANIFEST not in accepted:
                return errors(400, "MANIFEST_INVALID", "Schema 2 manifest not supported by client")
        headers = {"Content-Type": media_type, "Etag": f'"{self.digest(data)}"'}
        if self.digest_on_head or request.method == "GET":
            headers["Docker-Content-Digest"] = self.digest(data)
        return Response(200, headers=headers, raw=data)

    def _default_platform_manifest(self, stored: dict[str, bytes], data: bytes) -> bytes | None:
        by_digest = {self.digest(manifest): manifest for manifest in stored.values()}
        for entry in json.loads(data)["manifests"]:
            platform = entry.get("platform", {})
            if {key: platform.get(key) for key in DEFAULT_PLATFORM} == DEFAULT_PLATFORM:
                return by_digest.get(entry["digest"])
        return None


class BlobStore(FakeServer):
    """The storage a redirecting registry sends reads to: it serves whatever it holds to anyone who asks (its
    URL is the credential), and records every request so a test sees what reached it."""

    def __init__(self, data: bytes):
        super().__init__()
        self.data = data

    def handle(self, request: Request) -> Response:
        return Response(200, raw=self.data, headers={"Content-Type": json.loads(self.data)["mediaType"],
                                                     "Docker-Content-Digest": FakeRegistry.digest(self.data)})


class HostileRegistry(LoopbackServer):
    """A registry on 127.0.0.1 whose GET answers stream `total` bytes without end in sight: with no
    Content-Length (the body runs until the connection closes) or with an honest one. `sent` counts the bytes
    that left before the client hung up, the bound a capped reader keeps."""

    def __init__(self, total: int, *, declare_length: bool = False, path_prefix: str = "/v2/"):
        self.total = total
        self.sent = 0
        self.done = threading.Event()
        hostile = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # no length needed: the body ends when the connection does

            def do_HEAD(self) -> None:  # noqa: N802 - no digest on a HEAD, so the client must GET
                self.send_response(200)
                self.send_header("Content-Type", "application/vnd.oci.image.index.v1+json")
                self.end_headers()

            def do_GET(self) -> None:  # noqa: N802
                self.send_response(200)
                self.send_header("Content-Type", "application/vnd.oci.image.index.v1+json")
                if declare_length:
                    self.send_header("Content-Length", str(hostile.total))
                self.end_headers()
                chunk = b"{" + b" " * (64 * 1024 - 1)
                try:
                    while hostile.sent < hostile.total:
                        self.wfile.write(chunk)
                        hostile.sent += len(chunk)
                except OSError:
                    pass  # the client hung up: what it did not read was never sent
                finally:
                    hostile.done.set()

            def log_message(self, *args: Any) -> None:
                pass

        self.listen(Handler)
