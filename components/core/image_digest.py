"""One vLLM build per deployment: a floating tag (vllm/vllm-tpu:nightly) is resolved to its manifest digest at
the first `pulumi up` and kept in the stack's state, so every replica and every recycled node pulls the same
image until the tag setting changes (or `pulumi up --replace` on this resource asks for the tag's new build).

The resolver speaks the registry HTTP API v2 (distribution-spec: HEAD /v2/<name>/manifests/<reference>, the
`Docker-Content-Digest` header; the Bearer token challenge of the Docker token spec), so it is testable
against a fake registry on 127.0.0.1. A reference that already has a digest is used as written, no call.

What it sends and reads is bounded: the registry's token goes only to the registry's own origin (a redirect
elsewhere, e.g. to a blob store, is followed without it), a redirect is followed at most a few times and only
where the token realm may go, and no body is read past a cap (a manifest past distribution's own 4 MiB is
refused, not hashed).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider

from components.settings import NAMESPACE

DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
# Multi-arch indexes first: their digest is what `docker pull repo@sha256:...` and the kubelet resolve.
MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
TIMEOUT_SECONDS = 30
# distribution refuses a manifest over 4 MiB (registry/handlers/manifests.go, maxManifestBodySize =
# 4 * 1024 * 1024, distribution/distribution v3.1.1-53 `0d6b721`): no registry holds a larger one to answer.
MAX_MANIFEST_BYTES = 4 << 20
# A token answer is a JSON object with a JWT or opaque token (docs/content/spec/auth/token.md); 1 MiB is far past
# any real one.
MAX_TOKEN_BYTES = 1 << 20
MAX_REDIRECTS = 5
READ_CHUNK = 64 << 10
# The digest of a resolved reference, as the offline plan shows it (tools/plan/placeholders.py invents this value).
PLAN_NOTE = "resolved to a digest at the first pulumi up, then pinned in state"


class ResolveError(Exception):
    """Why a tag could not be resolved, with the fix."""


@dataclass(frozen=True)
class ImageReference:
    registry: str
    """Host[:port] as written, docker.io when omitted."""
    repository: str
    tag: str | None
    digest: str | None

    @property
    def api_host(self) -> str:
        return DOCKER_HUB_API if self.registry == DOCKER_HUB else self.registry

    @property
    def api_base(self) -> str:
        # Plain HTTP only to a registry on this machine (docker's own default for localhost registries).
        return f"{'http' if is_loopback(self.api_host) else 'https'}://{self.api_host}"

    def pinned(self, digest: str) -> str:
        name = self.repository if self.registry == DOCKER_HUB else f"{self.registry}/{self.repository}"
        if self.registry == DOCKER_HUB and name.startswith("library/"):
            name = name.removeprefix("library/")
        return f"{name}@{digest}"


def is_loopback(host_port: str) -> bool:
    host = host_port.rsplit(":", 1)[0] if host_port.count(":") == 1 else host_port
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse(image: str) -> ImageReference:
    """docker's reading of a reference: the first part is a registry only if it has a '.' or ':' or is
    localhost; Docker Hub's official images live under library/."""
    rest, _, digest = image.partition("@")
    first, slash, remainder = rest.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        registry, path = first, remainder
    else:
        registry, path = DOCKER_HUB, rest
    name, colon, tag = path.rpartition(":") if ":" in path.rsplit("/", 1)[-1] else (path, "", "")
    if registry == DOCKER_HUB and "/" not in name:
        name = f"library/{name}"
    return ImageReference(registry, name, (tag if colon else None) or (None if digest else "latest"),
                          digest or None)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """urllib's own redirect handler copies every header, Authorization included, to wherever Location points;
    redirects are followed by hand instead (_open), so the token stays with the registry."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)


def _origin(url: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, f"{(parts.hostname or '').lower()}:{port}"


def _check_destination(url: str, reference: ImageReference, what: str) -> None:
    """Where the registry may send the deploy machine (a token realm, a redirect): https, or http only for a
    registry on this machine; never inward for a registry elsewhere."""
    target = urllib.parse.urlsplit(url)
    if target.scheme != "https" and not (target.scheme == "http" and is_loopback(reference.api_host)):
        raise ResolveError(f"the registry's {what} {url!r} is not https")
    if target.hostname and is_loopback(target.netloc) and not is_loopback(reference.api_host):
        raise ResolveError(f"the registry's {what} {url!r} points at this machine")


def _read_capped(response: Any, cap: int, what: str) -> bytes:
    """At most cap bytes of a body, read in chunks: a longer answer is refused before it fills memory."""
    declared = response.headers.get("Content-Length")
    if declared and declared.isdigit() and int(declared) > cap:
        raise ResolveError(f"the registry's {what} is {int(declared)} bytes, over the {cap}-byte limit")
    chunks, total = [], 0
    while True:
        chunk = response.read(min(READ_CHUNK, cap + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > cap:
            raise ResolveError(f"the registry's {what} runs past the {cap}-byte limit")


def _open(url: str, method: str, reference: ImageReference, token: str | None, timeout: float) -> Any:
    """The response to method url, redirects followed by hand: the token only to the registry's own origin."""
    home = _origin(reference.api_base)
    for _ in range(MAX_REDIRECTS + 1):
        headers = {"Accept": ", ".join(MANIFEST_TYPES)}
        if token and _origin(url) == home:
            headers["Authorization"] = f"Bearer {token}"
        try:
            return _OPENER.open(urllib.request.Request(url, method=method, headers=headers), timeout=timeout)
        except urllib.error.HTTPError as error:
            location = error.headers.get("Location") if error.code in (301, 302, 303, 307, 308) else None
            if not location:
                raise
            error.close()
            url = urllib.parse.urljoin(url, location)
            _check_destination(url, reference, "redirect")
    raise ResolveError(f"the registry redirected more than {MAX_REDIRECTS} times")


def _bearer_token(challenge: str, reference: ImageReference, timeout: float) -> str:
    """The token the registry's `WWW-Authenticate: Bearer realm=...,service=...,scope=...` asks for (anonymous)."""
    if not challenge.lower().startswith("bearer "):
        raise ResolveError(f"the registry asks for {challenge.split(' ')[0]} authentication; pin a digest instead")
    params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    # A token server over plain HTTP, or one elsewhere on this machine for a remote registry, is refused:
    # the challenge comes from the registry and must not steer the deploy machine's requests inward.
    _check_destination(params.get("realm", ""), reference, "token realm")
    query = {key: params[key] for key in ("service", "scope") if key in params}
    query.setdefault("scope", f"repository:{reference.repository}:pull")
    url = f"{params['realm']}?{urllib.parse.urlencode(query)}"
    try:
        with _OPENER.open(url, timeout=timeout) as response:  # a redirect here is an error: no hop for the token
            body = _read_capped(response, MAX_TOKEN_BYTES, "token answer")
    except urllib.error.HTTPError as error:
        # Docker Hub's token server rate-limits and fails as the registry does (429, 5xx): said, not a traceback.
        error.close()
        raise ResolveError(f"the registry's token server answered HTTP {error.code} for {params['realm']}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as error:
        raise ResolveError(f"could not reach the registry's token server {params['realm']} "
                           f"({getattr(error, 'reason', error)})") from None
    try:
        answer = json.loads(body or b"{}")
    except ValueError:
        raise ResolveError("the registry's token server answered something other than JSON") from None
    token = answer.get("token") or answer.get("access_token") if isinstance(answer, dict) else None
    if not token:
        raise ResolveError("the registry's token server answered without a token")
    return str(token)


def resolve(image: str, timeout: float = TIMEOUT_SECONDS) -> str:
    """image (a tag) -> repository@sha256:<manifest digest>; an image with a digest comes back unchanged."""
    reference = parse(image)
    if reference.digest:
        return image
    url = f"{reference.api_base}/v2/{reference.repository}/manifests/{reference.tag}"
    token = None
    for attempt in range(2):
        try:
            with _open(url, "HEAD", reference, token, timeout) as response:
                digest = response.headers.get("Docker-Content-Digest")
            if not digest:
                # A registry may leave the header off a HEAD: the digest is the sha256 of the manifest's bytes.
                with _open(url, "GET", reference, token, timeout) as response:
                    digest = response.headers.get("Docker-Content-Digest") or \
                        "sha256:" + hashlib.sha256(_read_capped(response, MAX_MANIFEST_BYTES, "manifest")).hexdigest()
            break
        except urllib.error.HTTPError as error:
            error.close()
            if error.code == 401 and attempt == 0 and error.headers.get("WWW-Authenticate"):
                token = _bearer_token(error.headers["WWW-Authenticate"], reference, timeout)
                continue
            if error.code == 404:
                raise ResolveError(f"the registry has no tag {reference.tag!r} for {reference.repository}") from None
            raise ResolveError(f"the registry answered HTTP {error.code} for {url}") from None
        except (urllib.error.URLError, TimeoutError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise ResolveError(f"could not reach {reference.api_host} ({reason})") from None
    if not DIGEST.fullmatch(digest or ""):
        raise ResolveError(f"the registry gave {digest!r}, not a sha256 manifest digest")
    return reference.pinned(digest)


def fix_hint(image: str) -> str:
    return (f"pin it yourself: {NAMESPACE}:vllm.image = <repository>@sha256:<digest>, the digest from "
            f"`docker buildx imagetools inspect {image}` (its Digest line; not the image ID `docker images` shows)")


class ImageDigestProvider(ResourceProvider):
    """create resolves; the result stays until the tag setting changes (a replace)."""

    def create(self, props: dict[str, Any]) -> CreateResult:
        image = props["image"]
        try:
            pinned = resolve(image)
        except ResolveError as error:
            raise Exception(f"{NAMESPACE}:vllm.image = {image!r}: {error}; {fix_hint(image)}") from None
        return CreateResult(id_=pinned, outs={"image": image, "pinned": pinned, "digest": pinned.split("@", 1)[1]})

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return ReadResult(id_=id_, outs=props)  # a refresh keeps the pin: only a replace asks the registry again

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = olds.get("image") != news.get("image")
        return DiffResult(changes=changed, replaces=["image"] if changed else [], delete_before_replace=False)

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        return None  # nothing in the cloud: the registry keeps its images


class ImageDigest(Resource, module="tpu-vllm", name="ImageDigest"):
    """`pinned`: repository@sha256:<digest> of `image` as it was at the first `pulumi up`."""

    image: pulumi.Output[str]
    pinned: pulumi.Output[str]
    digest: pulumi.Output[str]

    def __init__(self, name: str, image: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__(ImageDigestProvider(), name, {"image": image, "pinned": None, "digest": None}, opts)


def pinned_image(name: str, image: str, opts: pulumi.ResourceOptions) -> pulumi.Output[str]:
    """The image every pod runs: as written when it has a digest, else the tag's digest pinned at first up."""
    if parse(image).digest:
        return pulumi.Output.from_input(image)
    return ImageDigest(name, image, opts).pinned
