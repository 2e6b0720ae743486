"""Cross-key rules of ports: vLLM's loopback port, the front's serving port, sshd's, and (on gke) the pod's
metrics door, which share one network namespace."""

from __future__ import annotations

from components.settings.facts import GKE_METRICS_PORT, SSH_PORT, UNPRIVILEGED_PORT_START
from components.settings.findings import Finding
from components.settings.root import Settings


def port_checks(settings: Settings) -> list[Finding]:
    findings: list[Finding] = []
    serving, upstream = settings.front.listen_port, settings.vllm.server_port
    if upstream in (serving, SSH_PORT):
        findings.append(Finding(
            "vllm.serverPort", upstream,
            f"vLLM's loopback port must differ from the front's serving port (front.listenPort = {serving}) and "
            f"from SSH ({SSH_PORT})",
            f"use another free port, e.g. {8002 if serving == 8001 else 8001}", also_keys=("front.listenPort",),
        ))
    if settings.platform == "vm" and serving < UNPRIVILEGED_PORT_START and serving != SSH_PORT:
        findings.append(Finding(
            "front.listenPort", serving,
            f"on vm the front (nginx) runs as an unprivileged user of its own, kept from the metadata server, and "
            f"Linux lets only a privileged process bind a port below {UNPRIVILEGED_PORT_START}",
            "use a port from 1024 up, e.g. 8000 (the default)",
        ))
    if settings.platform == "gke":
        ports = {"front.listenPort": serving, "vllm.serverPort": upstream}
        for key, port in ports.items():
            if port == GKE_METRICS_PORT:
                free = next(p for p in (8000, 8001, 8002) if p not in ports.values())
                findings.append(Finding(
                    key, port,
                    f"on gke the pod's metrics door (GET /metrics for Managed Prometheus) listens on "
                    f"{GKE_METRICS_PORT} in the same network namespace, so two containers would bind it and one "
                    "would crash-loop",
                    f"use another port, e.g. {free}",
                ))
    return findings
