"""The endpoint picker's own configuration: which scorers choose a replica for each request.

The picker is llm-d's (llm-d/llm-d-router, v0.10.0, 71f4f099; the fields below read the same at v0.9.0). Its loader
(pkg/epp/config/loader/configloader.go, decodeRawConfig) decodes this file strictly into `EndpointPickerConfig`
(apix/config/v1alpha1/endpointpickerconfig_types.go): `apiVersion: llm-d.ai/v1alpha1`, `plugins` (type, optional name
defaulting to the type, parameters), `schedulingProfiles` whose `pluginRef`s name plugins (validation.go),
`dataLayer` sources with their extractors. The scorers are the chart's own defaults
(config/charts/routerlib/templates/_config.yaml, `default-plugins.yaml`; the same as loader/defaults.go
loadDefaultConfig): queue depth and KV-cache utilisation (weight 2 each) from each replica's vLLM metrics, and the
prefix-cache scorer (weight 3), whose match data comes from the approximate prefix producer the runner registers as
the default producer of that data (cmd/epp/runner/runner.go,
RegisterAsDefaultProducer(approx-prefix-cache-producer)): it remembers which replica got which prompt blocks, so it
needs nothing from vLLM but its standard metrics.

Two settings differ from the chart's defaults, each said where it is made: the request parsers end with the
passthrough parser, so every `/v1` path the route sends reaches a replica; the saturation detector's staleness
follows the stack's slower metrics refresh. A pool that may stand at zero (components/gke/scale_to_zero.py) also
turns on flow control, which holds a request while no replica is ready: the `flowControl` feature gate (off by
default at v0.10.0, cmd/epp/runner/runner.go RegisterFeatureGate) and its TTL and band bound.
"""

from __future__ import annotations

from typing import Any

import yaml

from components.gke import metrics_door, scale_to_zero

API_VERSION = "llm-d.ai/v1alpha1"
KIND = "EndpointPickerConfig"
FILE_NAME = "picker.yaml"
QUEUE_SCORER = "queue-scorer"
KV_SCORER = "kv-cache-utilization-scorer"
PREFIX_SCORER = "prefix-cache-scorer"
METRICS_SOURCE = "metrics-data-source"
METRICS_EXTRACTOR = "core-metrics-extractor"
# The chart's weights: a prefix match outweighs either load signal alone, not both together.
WEIGHTS = {QUEUE_SCORER: 2, KV_SCORER: 2, PREFIX_SCORER: 3}
# The loader's default parsers (loader/defaults.go ensureParsers), then the passthrough parser. A request path no
# parser claims is refused with HTTP 400 ("no parser registered matching path suffix", handlers/parsers.go
# Resolve; handlers/server.go BadRequest); the default parsers claim only chat/completions, completions,
# embeddings, responses, conversations, messages and inference/v1/generate, while the route sends every /v1 path
# (vLLM's audio, score, rerank, ...). The passthrough parser claims no path, which makes it the registry's
# fallback (parsers.go NewParserRegistry); it must come last, as parsers listed after it are skipped.
PARSERS = ("openai-parser", "anthropic-parser", "vllmhttp-parser", "passthrough-parser")
# How often the picker scrapes each replica (--refresh-metrics-interval). Its default is 50 ms (pkg/epp/server/
# options.go RefreshMetricsInterval); the metrics door writes an access-log line per scrape, so 20 a second per
# replica would be a log bill.
REFRESH_METRICS_INTERVAL = "500ms"
# The utilization detector treats an endpoint whose metrics are older than this as 100% saturated (saturationdetector/
# utilization/config.go metricsStalenessThreshold, default 200 ms: four of the default 50 ms refreshes). At the
# stack's 500 ms refresh the default would call every replica saturated most of the time (requests of negative
# priority would be shed); four refreshes again keeps upstream's margin.
SATURATION_DETECTOR = "utilization-detector"
METRICS_STALENESS_THRESHOLD = "2s"


def picker_config(zero: scale_to_zero.ZeroPool | None = None) -> dict[str, Any]:
    """zero: the pool's zero (gke.minReplicas 0), which adds flow control. The metrics source reads GET /metrics
    over plain HTTP from each replica's metrics door, the only keyless /metrics a pod has: at v0.10.0 its port is
    the source's `port` parameter, which overrides the pool's target port for every endpoint (source/metrics/
    datasource.go metricsDatasourceParams: scheme, path, port, insecureSkipVerify, caCertPath, clientCertPath,
    clientKeyPath, interval); the `--model-server-metrics-port` flag v0.9.0 read is gone (llm-d-router #1940)."""
    # featureGates: a list of gate names, a bare name meaning "=true" (endpointpickerconfig_types.go FeatureGates).
    return {
        "apiVersion": API_VERSION, "kind": KIND,
        **({"featureGates": [scale_to_zero.FLOW_CONTROL_GATE]} if zero is not None else {}),
        "plugins": [
            {"type": QUEUE_SCORER}, {"type": KV_SCORER}, {"type": PREFIX_SCORER},
            {"type": METRICS_SOURCE,
             "parameters": {"scheme": "http", "path": metrics_door.METRICS_PATH, "port": metrics_door.METRICS_PORT,
                            "insecureSkipVerify": False}},
            {"type": METRICS_EXTRACTOR},
            {"type": SATURATION_DETECTOR, "parameters": {"metricsStalenessThreshold": METRICS_STALENESS_THRESHOLD}},
            *({"type": parser} for parser in PARSERS),
        ],
        "schedulingProfiles": [{"name": "default", "plugins": [
            {"pluginRef": name, "weight": weight} for name, weight in WEIGHTS.items()]}],
        "dataLayer": {"sources": [{"pluginRef": METRICS_SOURCE, "extractors": [{"pluginRef": METRICS_EXTRACTOR}]}]},
        # Read whether or not the flowControl feature gate is on (loader/configloader.go).
        "flowControl": {"saturationDetector": {"pluginRef": SATURATION_DETECTOR},
                        **(scale_to_zero.flow_control(zero) if zero is not None else {})},
        "requestHandler": {"parsers": [{"pluginRef": parser} for parser in PARSERS]},
    }


def picker_config_text(zero: scale_to_zero.ZeroPool | None = None) -> str:
    return yaml.safe_dump(picker_config(zero), sort_keys=False)
