"""What the wings' constructors build from the settings, built the same way for tests that render one piece."""

from __future__ import annotations

from components.gke import compute_class
from components.gke.deployment import serving_pod
from components.gke.workload import ServingPod
from components.serving.spec import serving_spec
from components.settings import Settings
from components.vm.container import VmServing


def vm_serving(settings: Settings) -> VmServing:
    """As VmWing.__init__ builds it."""
    return VmServing.of(serving_spec(settings), vllm=settings.vllm, cache=settings.cache)


def gke_pod(settings: Settings) -> ServingPod:
    """As GkeWing.__init__ builds it, with the front image as written."""
    return serving_pod(serving_spec(settings), resource_prefix=settings.resource_prefix,
                       models=compute_class.models(settings.tpu.provisioning_model, settings.gke), gke=settings.gke)
