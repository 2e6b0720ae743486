"""The shared core both wings build on: the project's APIs, the serving identity, the secrets, the labels.

Knows nothing of either wing (no import from components/vm or components/gke): a wing receives a Core.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from components.basis import naming
from components.core.identity import ServiceIdentity, ServiceIdentityArgs
from components.core.secrets import StackSecrets, StackSecretsArgs
from components.core.services import GKE_APIS, GKE_GATEWAY_APIS, GKE_MIRROR_APIS, VM_MONITORING_APIS, ProjectServices
from components.settings import Settings


@dataclass(frozen=True)
class Core:
    services: ProjectServices
    identity: ServiceIdentity
    """What serves: the TPU VM's account, or the vLLM pods' (Workload Identity); the secrets grant it access."""
    secrets: StackSecrets
    labels: dict[str, str]
    """GCP labels of every labelled resource."""

    @property
    def apis(self) -> list[gcp.projects.Service]:
        """What every resource that calls an API waits for."""
        return self.services.services


def serving_identity_args(settings: Settings) -> ServiceIdentityArgs:
    if settings.platform == "gke":
        return ServiceIdentityArgs(
            project=settings.project, account_id=naming.service_account_id(settings.stack, "workload"),
            display_name="tpu-vllm GKE workload",
            description="The vLLM pods' identity (Workload Identity): its own secrets and the cache bucket only.")
    return ServiceIdentityArgs(project=settings.project, account_id=naming.service_account_id(settings.stack, "vm"))


def gke_apis(settings: Settings) -> tuple[str, ...]:
    return (GKE_APIS + (GKE_MIRROR_APIS if settings.gke.docker_hub_mirror else ())
            + (GKE_GATEWAY_APIS if settings.gke.inference_gateway is not None else ()))


def create_core(settings: Settings, hf_token_secret_is_secret: bool) -> Core:
    """hf_token_secret_is_secret: hfTokenSecret was set with --secret (its id then stays a Pulumi secret)."""
    extra_apis = gke_apis(settings) if settings.platform == "gke" else (
        VM_MONITORING_APIS if settings.monitoring.enabled else ())
    services = ProjectServices("services", settings.project, extra_apis=extra_apis)
    after_services = pulumi.ResourceOptions(depends_on=services.services)
    # The names each platform's identity has had since it was first deployed (URNs; tests/golden/urns).
    identity = ServiceIdentity("workload" if settings.platform == "gke" else "vm", serving_identity_args(settings),
                               after_services)
    secrets = StackSecrets(
        "secrets",
        StackSecretsArgs(
            project=settings.project,
            prefix=settings.resource_prefix,
            serving_account_email=identity.email,
            hf_token=pulumi.Output.secret(settings.hf_token.get_secret_value()) if settings.hf_token else None,
            existing_hf_token_secret=settings.hf_token_secret,
            existing_hf_token_secret_is_secret=hf_token_secret_is_secret,
            labels=settings.labels,
        ),
        after_services,
    )
    return Core(services=services, identity=identity, secrets=secrets, labels=settings.labels)
