"""The policy pack's copies of the stack's limits and names agree with the stack's own.

The pack cannot import components/ (it runs alone, in its own venv: policy/README.md), so it spells the
limits it enforces itself. Each copy is compared here with the constant or Field the settings (or the
component that writes the name) hold, and at the edge by behaviour: what the settings accept at their bound
the pack lets through, and one step past it both refuse.
"""

from __future__ import annotations

import pytest

from components import settings
from components.basis import chip_memory
from components.gke import compute_class, exposure
from components.gke.autoscaling import ADAPTER_NAME, ADAPTER_NAMESPACE
from components.settings.facts import MIN_RUN_SECONDS_BY_API
from components.settings.gke import GkeSettings
from components.vm import boot_contract
from components.vm.tpu_request import queued_resource_body
from policy import gke_rules, identity_grants, memory_cap, resource_view, tpu_billing

ACCESS = {"access": {"sshSourceRanges": ["198.51.100.7/32"]}}


def copies() -> dict[str, tuple[object, object]]:
    """Each limit or name the pack copies: (the pack's value, the stack's own), read when called."""
    chips_default = GkeSettings.model_fields["max_tpu_chips"].default
    return {
        "tpu_billing.MAX_RUN_SECONDS": (tpu_billing.MAX_RUN_SECONDS, settings.MAX_RUN_SECONDS),
        "gke_rules.MAX_RUN_SECONDS": (gke_rules.MAX_RUN_SECONDS, settings.MAX_RUN_SECONDS),
        "tpu_billing.MIN_INSTANCE_RUN_SECONDS": (tpu_billing.MIN_INSTANCE_RUN_SECONDS,
                                                 MIN_RUN_SECONDS_BY_API["compute"]),
        # The pack blocks what the settings accept only with an "untested" warning (0.93, 0.94).
        "memory_cap.MAX_GPU_MEMORY_UTILIZATION": (memory_cap.MAX_GPU_MEMORY_UTILIZATION,
                                                  chip_memory.HIGHEST_BOOTING_GPU_MEMORY_UTILIZATION),
        "gke_rules.CONFIG_PROPERTIES maxTpuChips default": (gke_rules.CONFIG_PROPERTIES["maxTpuChips"]["default"],
                                                             chips_default),
        "gke_rules.DEFAULT_CONFIG maxTpuChips": (gke_rules.DEFAULT_CONFIG["maxTpuChips"], chips_default),
        "gke_rules.CLASS_OPT_IN_ANNOTATION": (gke_rules.CLASS_OPT_IN_ANNOTATION,
                                              compute_class.UNBOUNDED_BILLING_ANNOTATION),
        "gke_rules.EXTERNAL_LB_ANNOTATION": (gke_rules.EXTERNAL_LB_ANNOTATION, exposure.EXTERNAL_LB_OPT_IN_ANNOTATION),
        "gke_rules.EXTERNAL_LB_OPT_IN": (gke_rules.EXTERNAL_LB_OPT_IN, exposure.EXTERNAL_LB_OPT_IN),
        "identity_grants.ADAPTER_KSA": (identity_grants.ADAPTER_KSA, (ADAPTER_NAMESPACE, ADAPTER_NAME)),
        "identity_grants: the node's secret attributes": (
            identity_grants.SECRET_METADATA_KEYS,
            (boot_contract.HF_TOKEN_SECRET_ATTRIBUTE, boot_contract.API_KEY_SECRET_ATTRIBUTE)),
    }


def drifted() -> list[str]:
    return [f"{name}: the pack has {ours!r}, the stack {theirs!r}"
            for name, (ours, theirs) in copies().items() if ours != theirs]


def test_every_copy_in_the_pack_equals_the_stacks_own():
    assert drifted() == []


@pytest.mark.parametrize(("module", "name", "drift"), [
    (memory_cap, "MAX_GPU_MEMORY_UTILIZATION", 0.93),
    (tpu_billing, "MAX_RUN_SECONDS", 8 * 24 * 3600),
    (tpu_billing, "MIN_INSTANCE_RUN_SECONDS", 60),
    (gke_rules, "CLASS_OPT_IN_ANNOTATION", "tpu-vllm/opt-in"),
])
def test_a_copy_that_drifts_is_named(monkeypatch, module, name, drift):
    monkeypatch.setattr(module, name, drift)
    assert [line.split(":")[0] for line in drifted()] == [f"{module.__name__.rsplit('.', 1)[-1]}.{name}"]


def body_for(max_run_duration: str) -> dict:
    """The body the program sends for a stack whose settings say this run duration (its own renderer)."""
    tpu = settings.load({**ACCESS, "tpu": {"maxRunDuration": max_run_duration}}, "my-project", "dev").settings.tpu
    return queued_resource_body(
        project="proj", zone=tpu.zone, node_id="n", accelerator_type="v5litepod-1", runtime_version="r",
        provisioning_model=tpu.provisioning_model, run_seconds=tpu.run_seconds, queue_seconds=None,
        network="default", subnetwork=None, service_account_email="a@proj.iam.gserviceaccount.com", metadata={},
        data_disks=[], tags=[], labels={})


def test_the_longest_run_the_settings_accept_passes_the_pack_and_one_second_more_neither():
    qr_type = next(iter(resource_view.QUEUED_RESOURCE_TYPES))
    assert tpu_billing.tpu_billing_stops(qr_type, {"body": body_for(f"{settings.MAX_RUN_SECONDS}s")}) == []
    with pytest.raises(settings.SettingsError) as caught:
        body_for(f"{settings.MAX_RUN_SECONDS + 1}s")
    assert "tpu.maxRunDuration" in str(caught.value.problems[0])
    past = {"body": {"provisioningModel": "FLEX_START",
                     "runDuration": {"maxRunDuration": f"{settings.MAX_RUN_SECONDS + 1}s"}}}
    assert tpu_billing.tpu_billing_stops(qr_type, past) != []


@pytest.mark.parametrize(("fraction", "pack_blocks"), [
    (chip_memory.HIGHEST_BOOTING_GPU_MEMORY_UTILIZATION, False),
    (0.93, True),  # the settings accept it with a warning (untested); the pack holds the measured ceiling
])
def test_the_memory_cap_the_settings_accept_without_a_warning_is_the_packs(fraction, pack_blocks):
    loaded = settings.load({**ACCESS, "vllm": {"gpuMemoryUtilization": fraction}}, "my-project", "dev")
    warned = any(finding.key == "vllm.gpuMemoryUtilization" for finding in loaded.findings)
    assert warned is pack_blocks
    command = {"create": f"vllm serve google/gemma --gpu-memory-utilization {fraction}"}
    blocked = memory_cap.gpu_memory_utilization_capped("command:remote:Command", command) != []
    assert blocked is pack_blocks
