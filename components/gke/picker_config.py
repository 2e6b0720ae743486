"""The endpoint picker's own configuration: which scorers choose a replica for each request.

The picker is llm-d's (llm-d/llm-d-router, v0.9.0). Its loader (pkg/epp/config/loader/configloader.go,
decodeRawConfig) decodes this file strictly into `EndpointPickerConfig` (apix/config/v1alpha1/
endpointpickerconfig_types.go): `apiVersion: llm-d.ai/v1alpha1`, `plugins` (type, optional name defaulting to the
type, parameters), `schedulingProfiles` whose `pluginRef`s name plugins (validation.go), `dataLayer` sources with
their extractors. The scorers are the chart's own defaults (config/charts/routerlib/templates/_config.yaml,
`default-plugins.yaml`; the same as loader/defaults.go loadDefaultConfig): queue depth and KV-cache utilisation
(weight 2 each) from each replica's vLLM metrics, and the prefix-cache scorer (weight 3), whose match data comes
from the approximate prefix producer the runner registers as the default producer of that data
(cmd/epp/runner/runner.go, RegisterAsDefaultProducer(approx-prefix-cache-producer)): it remembers which replica
got which prompt blocks, so it needs nothing from vLLM but its standard metrics.

Two settings differ from the chart's defaults, each said where it is made: the request parsers end with the
passthrough parser, so every `/v1` path the route sends reaches a replica; the saturation detector's staleness
follows the stack's slower metrics refresh.
"""

from __future__ import annotations

from typing import Any

import yaml

from components.gke import metrics_door

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


def picker_config() -> dict[str, Any]:
    """The metrics source reads GET /metrics over plain HTTP (source/metrics/datasource.go parameters scheme,
    path, insecureSkipVerify): the metrics door's, the only keyless /metrics a pod has; which port is a flag
    (inference_pool.METRICS_PORT_FLAG)."""
    return {
        "apiVersion": API_VERSION, "kind": KIND,
        "plugins": [
            {"type": QUEUE_SCORER}, {"type": KV_SCORER}, {"type": PREFIX_SCORER},
            {"type": METRICS_SOURCE,
             "parameters": {"scheme": "http", "path": metrics_door.METRICS_PATH, "insecureSkipVerify": False}},
            {"type": METRICS_EXTRACTOR},
            {"type": SATURATION_DETECTOR, "parameters": {"metricsStalenessThreshold": METRICS_STALENESS_THRESHOLD}},
            *({"type": parser} for parser in PARSERS),
        ],
        "schedulingProfiles": [{"name": "default", "plugins": [
            {"pluginRef": name, "weight": weight} for name, weight in WEIGHTS.items()]}],
        "dataLayer": {"sources": [{"pluginRef": METRICS_SOURCE, "extractors": [{"pluginRef": METRICS_EXTRACTOR}]}]},
        # Read whether or not the flowControl feature gate is on (loader/configloader.go).
        "flowControl": {"saturationDetector": {"pluginRef": SATURATION_DETECTOR}},
        "requestHandler": {"parsers": [{"pluginRef": parser} for parser in PARSERS]},
    }


def picker_config_text() -> str:
    return yaml.safe_dump(picker_config(), sort_keys=False)
