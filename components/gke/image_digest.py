"""One vLLM build per deployment: a floating tag (vllm/vllm-tpu:nightly) is resolved to its manifest digest at
the first `pulumi up` and kept in the stack's state, so every replica and every recycled node pulls the same
image until the tag setting changes (or `pulumi up --replace` on this resource asks for the tag's new build).

The resolver speaks the registry HTTP API v2 (distribution-spec: HEAD /v2/<name>/manifests/<reference>, the
`Docker-Content-Digest` header; the Bearer token challenge of the Docker token spec), so it is testable
against a fake registry on 127.0.0.1. A reference that already has a digest is used as written, no call.
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
# The digest of a resolved reference, as the offline plan shows it (tools/mocks.py invents this value).
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


def _bearer_token(challenge: str, reference: ImageReference, timeout: float) -> str:
    """The token the registry's `WWW-Authenticate: Bearer realm=...,service=...,scope=...` asks for (anonymous)."""
    if not challenge.lower().startswith("bearer "):
        raise ResolveError(f"the registry asks for {challenge.split(' ')[0]} authentication; pin a digest instead")
    params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    realm = urllib.parse.urlsplit(params.get("realm", ""))
    # A token server over plain HTTP, or one elsewhere on this machine for a remote registry, is refused:
    # the challenge comes from the registry and must not steer the deploy machine's requests inward.
    if realm.scheme != "https" and not (realm.scheme == "http" and is_loopback(reference.api_host)):
        raise ResolveError(f"the registry's token realm {params.get('realm')!r} is not https")
    if realm.hostname and is_loopback(realm.netloc) and not is_loopback(reference.api_host):
        raise ResolveError(f"the registry's token realm {params.get('realm')!r} points at this machine")
    query = {key: params[key] for key in ("service", "scope") if key in params}
    query.setdefault("scope", f"repository:{reference.repository}:pull")
    url = f"{params['realm']}?{urllib.parse.urlencode(query)}"
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - scheme checked above
        body = json.loads(response.read() or b"{}")
    token = body.get("token") or body.get("access_token")
    if not token:
        raise ResolveError("the registry's token server answered without a token")
    return str(token)


def _manifest_request(url: str, method: str, token: str | None) -> urllib.request.Request:
    headers = {"Accept": ", ".join(MANIFEST_TYPES)}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return urllib.request.Request(url, method=method, headers=headers)


def resolve(image: str, timeout: float = TIMEOUT_SECONDS) -> str:
    """image (a tag) -> repository@sha256:<manifest digest>; an image with a digest comes back unchanged."""
    reference = parse(image)
    if reference.digest:
        return image
    url = f"{reference.api_base}/v2/{reference.repository}/manifests/{reference.tag}"
    token = None
    for attempt in range(2):
        try:
            with urllib.request.urlopen(_manifest_request(url, "HEAD", token), timeout=timeout) as response:  # noqa: S310
                digest = response.headers.get("Docker-Content-Digest")
            if not digest:
                # A registry may leave the header off a HEAD: the digest is the sha256 of the manifest's bytes.
                with urllib.request.urlopen(_manifest_request(url, "GET", token), timeout=timeout) as response:  # noqa: S310
                    digest = response.headers.get("Docker-Content-Digest") or \
                        "sha256:" + hashlib.sha256(response.read()).hexdigest()
            break
        except urllib.error.HTTPError as error:
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
