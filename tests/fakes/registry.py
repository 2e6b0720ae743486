"""A container registry on 127.0.0.1 that speaks the OCI distribution API's manifest reads and the Docker token
flow the way Docker Hub does: an anonymous request gets 401 with a Bearer challenge naming the token server,
the token server hands out a pull token for that scope, and a manifest comes back with its digest in
`Docker-Content-Digest` (the sha256 of its bytes), in a media type the client's Accept lists."""

from __future__ import annotations

import hashlib
import json
import re

from tests.fakes.http import FakeServer, Request, Response

INDEX = "application/vnd.oci.image.index.v1+json"


def manifest_bytes(tag: str) -> bytes:
    return json.dumps({"schemaVersion": 2, "mediaType": INDEX, "manifests": [], "annotations": {"tag": tag}},
                      sort_keys=True).encode()


class FakeRegistry(FakeServer):
    def __init__(self, tags: dict[str, dict[str, bytes]], *, digest_on_head: bool = True,
                 realm: str | None = None, media_type: str = INDEX):
        super().__init__()
        self.tags = tags
        """repository -> tag -> manifest bytes."""
        self.digest_on_head = digest_on_head
        self.realm = realm
        self.media_type = media_type
        self.issued: set[str] = set()

    @staticmethod
    def digest(data: bytes) -> str:
        return "sha256:" + hashlib.sha256(data).hexdigest()

    def handle(self, request: Request) -> Response:
        if request.path == "/token":
            scope = request.query.get("scope", "")
            if request.query.get("service") != "fake-registry" or not scope.endswith(":pull"):
                return Response(400, {"errors": [{"code": "DENIED"}]})
            token = f"tok-{len(self.issued)}-{scope}"
            self.issued.add(token)
            return Response(200, {"token": token})
        match = re.fullmatch(r"/v2/(.+)/manifests/([^/]+)", request.path)
        if not match:
            return Response(404, {"errors": [{"code": "NAME_UNKNOWN"}]})
        repository, tag = match.groups()
        auth = request.headers.get("Authorization", "")
        if auth.removeprefix("Bearer ") not in self.issued:
            realm = self.realm or f"{self.url}/token"
            challenge = f'Bearer realm="{realm}",service="fake-registry",scope="repository:{repository}:pull"'
            return Response(401, {"errors": [{"code": "UNAUTHORIZED"}]}, headers={"WWW-Authenticate": challenge})
        data = self.tags.get(repository, {}).get(tag)
        if data is None or self.media_type not in request.headers.get("Accept", ""):
            return Response(404, {"errors": [{"code": "MANIFEST_UNKNOWN"}]})
        headers = {"Content-Type": self.media_type}
        if self.digest_on_head or request.method == "GET":
            headers["Docker-Content-Digest"] = self.digest(data)
        return Response(200, headers=headers, raw=data)
