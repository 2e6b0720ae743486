"""An optional pull-through mirror for Docker Hub (gke.dockerHubMirror): an Artifact Registry remote repository in
the cluster's region, so a node the ComputeClass brings up (every run end) pulls vllm/vllm-tpu and nginx from the
region instead of from Docker Hub, whose anonymous pulls are rate-limited.

The repository: format DOCKER, mode REMOTE_REPOSITORY, remote_repository_config.docker_repository.public_repository
DOCKER_HUB (hashicorp/terraform-provider-google-beta website/docs/r/artifact_registry_repository.html.markdown,
"Example Usage - Artifact Registry Repository Remote", and its `registry_uri` attribute,
LOCATION-docker.pkg.dev/PROJECT/REPOSITORY; main at 93c65b2d, 2026-08-21). The nodes' own service account pulls
the images, so it reads this one repository and nothing else (roles/artifactregistry.reader on it).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

READER_ROLE = "roles/artifactregistry.reader"
# What Docker reads as Docker Hub (distribution/reference normalize.go, splitDockerDomain, at `4ca1403`): a name with
# no '/', or whose first part is not a domain (no '.' or ':', not localhost, all lowercase), is docker.io's, and
# the legacy "index.docker.io" is canonicalised to docker.io; on docker.io a one-part name is an official image,
# under "library/". The same file notes that "actual domain of Docker Hub's registry is registry-1.docker.io":
# Docker keeps that one as a domain of its own, but it is Docker Hub's registry, its pulls as rate-limited, so its
# images go through the mirror too.
DOCKER_HUB_DOMAINS = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})
OFFICIAL_PREFIX = "library/"
API = "artifactregistry.googleapis.com"


def repository_id(resource_prefix: str) -> str:
    return f"{resource_prefix}-dockerhub"


def registry_path(region: str, project: str, repository: str) -> str:
    """What the repository's `registry_uri` is, known before it exists (the offline plan shows it)."""
    return f"{region}-docker.pkg.dev/{project}/{repository}"


def docker_hub_repository(image: str) -> str | None:
    """The Docker Hub repository an image reference names, in full (official images under library/), however it
    spells Docker Hub; None for an image of any other registry."""
    name = image.partition("@")[0]
    first, slash, rest = name.partition("/")
    if not slash:
        path = name
    elif first in DOCKER_HUB_DOMAINS:
        path = rest
    elif first == "localhost" or any(mark in first for mark in ".:") or first.lower() != first:
        return None
    else:
        path = name
    head, _, last = path.rpartition("/")
    repository = f"{head}/{last.partition(':')[0]}" if head else last.partition(":")[0]
    return repository if "/" in repository else OFFICIAL_PREFIX + repository


def through_mirror(pinned: str, mirror: str) -> str:
    """A Docker Hub image pinned by digest, pulled through the mirror: the same manifest digest, the Docker Hub
    path in full. Images of any other registry are left as they are."""
    repository, digest = docker_hub_repository(pinned), pinned.partition("@")[2]
    if repository is None or not digest:
        return pinned
    return f"{mirror}/{repository}@{digest}"


@dataclass
class DockerHubMirrorArgs:
    project: str
    region: str
    repository_id: str
    node_service_account_email: pulumi.Input[str]
    labels: dict[str, str]
    services: list[pulumi.Resource]


class DockerHubMirror(pulumi.ComponentResource):
    """The remote repository and the nodes' read grant on it; `path` is where pods name their images."""

    path: str

    def __init__(self, name: str, args: DockerHubMirrorArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-vllm:gke:DockerHubMirror", name, None, opts)
        repository = gcp.artifactregistry.Repository(
            name, project=args.project, location=args.region, repository_id=args.repository_id,
            description="tpu-vllm: a pull-through mirror of Docker Hub for the GKE nodes",
            format="DOCKER", mode="REMOTE_REPOSITORY",
            remote_repository_config={"description": "Docker Hub",
                                      "docker_repository": {"public_repository": "DOCKER_HUB"}},
            labels=args.labels, opts=pulumi.ResourceOptions(parent=self, depends_on=args.services))
        gcp.artifactregistry.RepositoryIamMember(
            f"{name}-node-reader", project=args.project, location=args.region, repository=repository.repository_id,
            role=READER_ROLE, member=pulumi.Output.concat("serviceAccount:", args.node_service_account_email),
            opts=pulumi.ResourceOptions(parent=self))
        self.path = registry_path(args.region, args.project, args.repository_id)
        self.register_outputs({"path": self.path})
