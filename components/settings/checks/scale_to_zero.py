"""Cross-key rules of a pool that may stand at zero (`gke.minReplicas: 0`): only behind the inference gateway, whose
endpoint picker holds what arrives meanwhile; only on a GKE whose HPA may keep a workload at zero; and
`gke.scaleToZeroAfter` read only then."""

from __future__ import annotations

import re

from components.settings.fields import parse_duration
from components.settings.findings import Finding
from components.settings.root import Settings

# Kubernetes 1.37 makes the HPA's scale to and from zero Beta and on by default ("A HorizontalPodAutoscaler (HPA)
# that uses a suitable object metric or external metric can now scale a workload to zero replicas",
# kubernetes.io/blog/2026/09/02/kubernetes-v1-37-hpa-scale-to-zero-beta); before it the HPA refuses minReplicas 0
# unless the Alpha gate HPAScaleToZero is on, which GKE does not offer.
ZERO_MIN_VERSION = (1, 37)
ZERO_MIN_VERSION_TEXT = "1.37"
ZERO_MIN_VERSION_REASON = ("from it the HorizontalPodAutoscaler may scale to and from zero replicas on an External "
                           "metric (HPAScaleToZero, Beta and on by default)")
# The idle time is the HPA's scale-down stabilizationWindowSeconds, which the API server bounds to 0..3600
# (kubernetes pkg/apis/autoscaling/validation/validation.go MaxStabilizationWindowSeconds); under a minute would
# scale away a replica between an agent's turns and pay a cold start for each.
IDLE_MIN_SECONDS, IDLE_MAX_SECONDS = 60, 3600


def minor_at_least(version: str, minor: tuple[int, int] = ZERO_MIN_VERSION) -> bool | None:
    """Whether a GKE version (`1.37`, `1.37.2-gke.100`, `latest`) is of that minor or later; None if unreadable.
    Every patch of a minor is at or past its floor, so an alias like `1.37` decides."""
    if version.strip().lower() == "latest":
        return True
    match = re.fullmatch(r"(\d+)\.(\d+)(?:\.\d+(?:-gke\.\d+)?)?", version.strip())
    if match is None:
        return None
    return (int(match.group(1)), int(match.group(2))) >= minor


def scale_to_zero_checks(settings: Settings) -> list[Finding]:
    if settings.platform != "gke":
        return []
    gke = settings.gke
    if gke.min_replicas != 0:
        if "scale_to_zero_after" in gke.model_fields_set:
            return [Finding.warning(
                "gke.scaleToZeroAfter", gke.scale_to_zero_after,
                f"read only with gke.minReplicas: 0; at {gke.min_replicas} the pool never goes to zero",
                "remove it, or set gke.minReplicas to 0 (with gke.inferenceGateway)", also_keys=("gke.minReplicas",))]
        return []
    findings: list[Finding] = []
    if gke.inference_gateway is None:
        findings.append(Finding(
            "gke.minReplicas", 0,
            "at zero replicas nothing would hold a request: the passthrough load balancer and a Kubernetes Service "
            "refuse it while no pod is ready; the inference gateway's endpoint picker holds it until a replica is",
            "set gke.inferenceGateway to true (a regional internal Application Load Balancer, docs/gke.md), or set "
            "gke.minReplicas to 1", also_keys=("gke.inferenceGateway",)))
    pinned = gke.min_master_version
    if pinned is not None and minor_at_least(pinned) is not True:
        findings.append(Finding(
            "gke.minMasterVersion", pinned,
            f"gke.minReplicas: 0 needs GKE {ZERO_MIN_VERSION_TEXT} or later ({ZERO_MIN_VERSION_REASON})",
            f"pin {ZERO_MIN_VERSION_TEXT} or later, remove gke.minMasterVersion (the channel's default is checked at "
            "preview), or set gke.minReplicas to 1", also_keys=("gke.minReplicas",)))
    idle = parse_duration(gke.scale_to_zero_after)
    if not IDLE_MIN_SECONDS <= idle <= IDLE_MAX_SECONDS:
        findings.append(Finding(
            "gke.scaleToZeroAfter", gke.scale_to_zero_after,
            "the pool's idle time before zero is the HPA's scale-down window: the API server takes at most 1h, "
            "and under 1m would scale away a replica between an agent's turns and pay a cold start for each",
            "use 1m to 1h, e.g. 15m", also_keys=("gke.minReplicas",)))
    return findings
