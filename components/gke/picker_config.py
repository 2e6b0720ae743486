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
        ],
        "schedulingProfiles": [{"name": "default", "plugins": [
            {"pluginRef": name, "weight": weight} for name, weight in WEIGHTS.items()]}],
        "dataLayer": {"sources": [{"pluginRef": METRICS_SOURCE, "extractors": [{"pluginRef": METRICS_EXTRACTOR}]}]},
    }


def picker_config_text() -> str:
    return yaml.safe_dump(picker_config(), sort_keys=False)
