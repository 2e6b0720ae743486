"""Rules that read more than one key, one module per subject; every rule returns Findings."""

from __future__ import annotations

from components.settings.checks.access import access_checks
from components.settings.checks.arms import arm_checks
from components.settings.checks.gateway import gateway_checks
from components.settings.checks.gke import gke_checks
from components.settings.checks.memory import memory_checks
from components.settings.checks.model import model_checks
from components.settings.checks.monitoring import monitoring_checks
from components.settings.checks.ports import port_checks
from components.settings.checks.scale_to_zero import scale_to_zero_checks
from components.settings.checks.tpu import tpu_checks
from components.settings.findings import Finding
from components.settings.root import Settings

RULES = (tpu_checks, model_checks, memory_checks, arm_checks, port_checks, access_checks, gke_checks,
         scale_to_zero_checks, gateway_checks, monitoring_checks)


def cross_checks(settings: Settings) -> list[Finding]:
    """Every cross-key finding, errors and warnings, in the order the rules run."""
    return [finding for rule in RULES for finding in rule(settings)]
