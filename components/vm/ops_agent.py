"""The VM's metrics path: Google's Ops Agent with its Prometheus receiver scraping vLLM on loopback.

Google's supported way to get Prometheus metrics from a Compute Engine VM into Cloud Monitoring
(cloud.google.com/stackdriver/docs/solutions/agents/ops-agent/prometheus: a `metrics.receivers` entry of
`type: prometheus` whose `config` is Prometheus's own scrape configuration, wired into a
`metrics.service.pipelines` entry; the agent writes them as prometheus.googleapis.com/<name>/<kind>, read with
PromQL; GoogleCloudPlatform/ops-agent confgenerator/prometheus.go @00aa769: static_configs only, a scrape_interval
of at least 10 s, no honor_labels, exported as Managed Prometheus samples; at `588c4b9` (VERSION 2.71.0) the
receiver keeps each sample's name, `_total` included: components/monitoring/promql.py says why). The agent needs
roles/monitoring.metricWriter and roles/logging.logWriter on the VM's identity
(cloud.google.com/stackdriver/docs/solutions/agents/ops-agent/authorization). The config is rendered here and
delivered as node metadata (no secret: a port and a job name); startup.sh writes it to the agent's config file,
installs the agent on the node's first boot with Google's repository script, and restarts it. No version is pinned
there (the script installs what Google's repository serves at that boot), so the agent read is the newest source
the mirror holds.
"""

from __future__ import annotations

import yaml

from components.monitoring.scrape import VM_SCRAPE_INTERVAL

# The agent's user configuration file (merged with its built-in defaults).
CONFIG_FILE = "/etc/google-cloud-ops-agent/config.yaml"
RECEIVER = "tpu_vllm_prometheus"
PIPELINE = "tpu_vllm_pipeline"
# Google's roles for the agent's identity: metric writes, and log writes for the agent's own logs.
AGENT_ROLES = ("roles/monitoring.metricWriter", "roles/logging.logWriter")


def job_name(resource_prefix: str) -> str:
    """The scrape job: the `job` label every series carries, which the dashboard and alerts select on."""
    return f"{resource_prefix}-vllm"


def config(*, resource_prefix: str, upstream_port: int) -> str:
    """vLLM's /metrics on 127.0.0.1 (behind the front, which wants the key on every path but /health)."""
    document = {"metrics": {
        "receivers": {RECEIVER: {"type": "prometheus", "config": {"scrape_configs": [{
            "job_name": job_name(resource_prefix), "scrape_interval": VM_SCRAPE_INTERVAL, "metrics_path": "/metrics",
            "static_configs": [{"targets": [f"127.0.0.1:{upstream_port}"]}]}]}}},
        "service": {"pipelines": {PIPELINE: {"receivers": [RECEIVER]}}},
    }}
    return yaml.safe_dump(document, sort_keys=False)
