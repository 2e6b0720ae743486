"""The Google APIs the stack needs, enabled by the stack and never disabled by destroy."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

REQUIRED_APIS = (
    "tpu.googleapis.com",
    "secretmanager.googleapis.com",
    "compute.googleapis.com",
    "iam.googleapis.com",
)
# The gke platform also needs these: the cluster; Managed Prometheus and the metrics adapter; IAM Service Account
# Credentials, whose generateAccessToken GKE's metadata server calls for every Workload Identity (the Secret
# Manager add-on's reads, the metrics adapter, the cache mount; GKE's Workload Identity page, "Enable the IAM
# Service Account Credentials API"); Cloud Storage for the shared compile-cache bucket.
# gke.dockerHubMirror adds Artifact Registry (components/gke/registry_mirror.py).
GKE_MIRROR_APIS = ("artifactregistry.googleapis.com",)
# gke.inferenceGateway adds Network Services: GKE calls the endpoint picker through a Service Extensions traffic
# extension (GKE's deploy-gke-inference-gateway page, read 2026-12: "Enable the Compute Engine API, the Network
# Services API, and the Model Armor API if needed"; the stack uses no Model Armor).
GKE_GATEWAY_APIS = ("networkservices.googleapis.com",)
GKE_APIS = ("container.googleapis.com", "monitoring.googleapis.com", "iamcredentials.googleapis.com",
            "storage.googleapis.com")

# The vm platform's dashboard and alerts (monitoring.enabled): Cloud Monitoring, and Cloud Logging for the Ops Agent's
# own logs.
VM_MONITORING_APIS = ("monitoring.googleapis.com", "logging.googleapis.com")


class ProjectServices(pulumi.ComponentResource):
    """Enables each API; `disable_on_destroy=False` so destroy never breaks other users of the project."""

    services: list[gcp.projects.Service]

    def __init__(self, name: str, project: str, opts: pulumi.ResourceOptions | None = None,
                 extra_apis: tuple[str, ...] = ()):
        super().__init__("tpu-vllm:project:Services", name, None, opts)
        self.services = [
            gcp.projects.Service(
                f"{name}-{api.split('.')[0]}",
                project=project,
                service=api,
                disable_on_destroy=False,
                disable_dependent_services=False,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for api in (*REQUIRED_APIS, *extra_apis)
        ]
        self.register_outputs({"services": [service.service for service in self.services]})
