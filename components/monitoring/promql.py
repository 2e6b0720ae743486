"""vLLM's metrics as PromQL over the series one stack's collector writes, and the scope that selects them.

Metric names: vLLM 0.33.0, vllm/v1/metrics/loggers.py (PrometheusStatLogger): gauges vllm:num_requests_running,
vllm:num_requests_waiting, vllm:kv_cache_usage_perc ("1 means 100 percent usage"); counters vllm:generation_tokens
and vllm:num_preemptions, which prometheus_client exposes with the `_total` suffix; histograms
vllm:time_to_first_token_seconds and vllm:request_time_per_output_token_seconds (`_bucket` series).
vLLM's /metrics answers prometheus_client's classic text format whatever the scraper asks for (the instrumentator's
route, added before prometheus_client's negotiating app: vllm/entrypoints/serve/instrumentator/metrics.py
attach_router), so both collectors see these names as written, colons and `_total` included. Both keep each
sample's name and write it as prometheus.googleapis.com/<name>/<kind>, which PromQL in Cloud Monitoring reads by
the Prometheus name:
- gke, Managed Service for Prometheus (PodMonitoring; its collector is Prometheus v2.53.5-gmp,
  GoogleCloudPlatform/prometheus-engine manifests/operator.yaml at `2ffde4e`): Google's own vLLM integration lists
  prometheus.googleapis.com/vllm:generation_tokens_total/counter and .../vllm:num_preemptions_total/counter
  (GoogleCloudPlatform/monitoring-dashboard-samples integrations/vllm/prometheus_metadata.yaml, `25d8c3e`).
- vm, the Ops Agent: its generated collector config gives the OpenTelemetry `prometheus` receiver only `config`
  (GoogleCloudPlatform/ops-agent confgenerator/prometheus.go prometheusToOtelComponent; the golden
  confgenerator/testdata/goldens/metrics-receiver_prometheus/golden/linux/otel.yaml, `588c4b9`, VERSION 2.71.0), so
  the receiver's `trim_metric_suffixes` stays false and it names each metric by the scraped sample, `_total` kept
  (opentelemetry-collector-contrib receiver/prometheusreceiver internal/transaction.go; the NormalizeName feature
  gate that once trimmed it is gone, contrib PR 47597); its agent is built on contrib v0.154.0
  (GoogleCloudPlatform/opentelemetry-operations-collector otelopscol/manifest.yaml at `3dcb506`). The
  `googlemanagedprometheus` exporter runs with `add_metric_suffixes: false` (ops-agent confgenerator/
  confgenerator.go googleManagedPrometheusExporter), so it adds nothing either; the agent's own self-metrics
  pipeline relies on the same, filtering fluent-bit's `fluentbit_stackdriver_requests_total` by that name
  (confgenerator/agentmetrics.go).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from components.basis import chip_memory

RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
KV_USAGE = "vllm:kv_cache_usage_perc"
GENERATION_TOKENS = "vllm:generation_tokens_total"
PREEMPTIONS = "vllm:num_preemptions_total"
TTFT = "vllm:time_to_first_token_seconds_bucket"
TPOT = "vllm:request_time_per_output_token_seconds_bucket"
QUANTILES = (0.5, 0.95, 0.99)
RATE_WINDOW = "5m"


@dataclass(frozen=True)
class Scope:
    """One stack's serving series and the figures its tiles and alerts draw."""

    title: str
    """The dashboard's name, e.g. tpu-vllm dev (vm)."""
    labels: dict[str, str]
    """The labels that select this stack's series and nothing else (its scrape job, namespace, cluster)."""
    kv: chip_memory.KvBudget | None
    """The KV pool (settings.kv_budget()); None: an unknown model, the rule's bare fraction."""
    replicas: bool
    """True on gke: tiles split by replica (the scraped instance)."""
    usd_per_hour: float | None
    """One replica's (the VM's) price per hour; None: no price read for the chip (no spend tile then)."""
    baseline_usd_per_hour: float = 0.0
    """What bills with no replica (gke: the fee, the system pool, the bucket)."""
    run_seconds: int | None = None
    """A flex-start run's length; None when nothing ends the run."""
    run_end_epoch: int | None = None
    """When this run ends (vm flex-start, once the node is ACTIVE); None when not known."""
    notes: tuple[str, ...] = field(default_factory=tuple)
    """Markdown lines for the dashboard's summary tile."""
    engines: int = 1
    """Data-parallel replicas inside one server (vLLM's --data-parallel-size): above 1, tiles split by vLLM's
    `engine` label too (vllm/v1/metrics/loggers.py PrometheusStatLogger: labelnames ["model_name", "engine"], one
    value per data-parallel rank, every API server's /metrics the same multiprocess registry)."""
    picker_labels: dict[str, str] | None = None
    """The endpoint picker's series (gke, a pool that may stand at zero): its held requests and their outcomes;
    None when the pool never reaches zero."""

    @property
    def kv_rule(self) -> float:
        """The build log's rule of thumb as a fraction of the pool, from the budget's own numbers."""
        if self.kv is None or not self.kv.kv_tokens:
            return chip_memory.KV_LOAD_RULE_OF_THUMB
        return self.kv.load_limit_tokens / self.kv.kv_tokens


def layout_note(devices: int, engines: int) -> str:
    """The summary tile's line for a data-parallel server: what the `engine` split means."""
    return (f"{engines} data-parallel replicas of {devices // engines} chip(s) each behind one endpoint: the "
            "tiles split by vLLM's `engine` label (one per replica)")


def label_value(value: str) -> str:
    """A PromQL double-quoted string of value: "In single or double quotes a backslash begins an escape sequence"
    (prometheus/prometheus docs/querying/basics.md, String literals, at `6dd9868`; Go's escapes), so backslash,
    quote and newline are escaped, and any other control character is refused (the settings refuse them first)."""
    if any(ord(character) < 0x20 and character != "\n" or ord(character) == 0x7F for character in value):
        raise ValueError(f"cannot write {value!r} into a PromQL label matcher: it holds a control character")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def selector(scope: Scope) -> str:
    inner = ",".join(f"{key}={label_value(value)}" for key, value in sorted(scope.labels.items()))
    return "{" + inner + "}"


def _by(scope: Scope) -> str:
    split = [name for name, wanted in (("instance", scope.replicas), ("engine", scope.engines > 1)) if wanted]
    return f" by ({', '.join(split)})" if split else ""


def gauge(scope: Scope, metric: str, how: str = "sum") -> str:
    return f"{how}{_by(scope)} ({metric}{selector(scope)})"


def output_tokens_per_second(scope: Scope) -> str:
    return f"sum{_by(scope)} (rate({GENERATION_TOKENS}{selector(scope)}[{RATE_WINDOW}]))"


def quantile(scope: Scope, histogram: str, q: float) -> str:
    return f"histogram_quantile({q}, sum by (le) (rate({histogram}{selector(scope)}[{RATE_WINDOW}])))"


def preemptions(scope: Scope) -> str:
    return f"sum{_by(scope)} (increase({PREEMPTIONS}{selector(scope)}[{RATE_WINDOW}]))"


def kv_usage(scope: Scope) -> str:
    return gauge(scope, KV_USAGE, "max")


def serving(scope: Scope) -> str:
    """One series while any replica is scraped; its timestamp is the evaluation's."""
    return f"max({RUNNING}{selector(scope)})"


def minutes_left(scope: Scope) -> str | None:
    if scope.run_end_epoch is None:
        return None
    return f"clamp_min({scope.run_end_epoch} - timestamp({serving(scope)}), 0) / 60"


def spend_so_far(scope: Scope) -> str | None:
    """USD of this run so far: its hours since it began (run end - run length), at the VM's price."""
    if scope.run_end_epoch is None or scope.run_seconds is None or scope.usd_per_hour is None:
        return None
    start = f"({scope.run_end_epoch} - {scope.run_seconds})"
    return (f"clamp_max(clamp_min(timestamp({serving(scope)}) - {start}, 0), {scope.run_seconds}) / 3600 * "
            f"{scope.usd_per_hour}")


def burn_rate(scope: Scope) -> str | None:
    """USD per hour now: the replicas scraped x one replica's price, plus the baseline (None: no price read)."""
    if scope.usd_per_hour is None:
        return None
    replicas = f"count(max by (instance) ({RUNNING}{selector(scope)}))"
    return f"{replicas} * {scope.usd_per_hour} + {scope.baseline_usd_per_hour}"


def not_scraped(scope: Scope) -> str:
    """True when no scrape of vLLM succeeded in the lookback: the metric is absent."""
    return f"absent({RUNNING}{selector(scope)})"


def kv_above_rule(scope: Scope) -> str:
    return f"{kv_usage(scope)} > {round(scope.kv_rule, 4)}"


def requests_waiting(scope: Scope) -> str:
    return f"{gauge(scope, WAITING)} > 0"


def run_ending_in_flight(scope: Scope, warning_seconds: int) -> str | None:
    if scope.run_end_epoch is None:
        return None
    in_flight = f"sum({RUNNING}{selector(scope)}) > 0"
    return f"{scope.run_end_epoch} - timestamp({in_flight}) < {warning_seconds}"


# The endpoint picker's gauges and counter (llm-d/llm-d-router v0.10.0 pkg/epp/metrics/llm_d_router_metrics.go;
# components/gke/scale_to_zero.py says why these), read only for a pool that may stand at zero.
HELD = "llm_d_epp_flow_control_queue_size"
PICKER_RUNNING = "llm_d_epp_request_running"
FLOW_OUTCOMES = "llm_d_epp_flow_control_requests_total"
# The outcomes (pkg/epp/flowcontrol/types/outcomes.go QueueOutcome.String) that turn a request away: its TTL ended
# while held (503 rejected-no-endpoints at zero, 429 rejected-ttl-expired otherwise) or the band was full (503
# rejected-no-endpoints at zero, 429 rejected-saturated otherwise). Not Dispatched (served), EvictedContextCancelled
# (the client left first), nor RejectedOther/EvictedOther: admission.go files a client that hung up before its
# request was queued there too ("A TTL expiry or client disconnect that fires before the item is admitted to a
# queue ... surfaces as RejectedOther/EvictedOther"), and the label cannot tell the two: a page must not fire for it.
TURNED_AWAY_OUTCOMES = ("EvictedTTL", "RejectedNoEndpoints", "RejectedCapacity")


def _matchers(labels: dict[str, str], *more: str) -> str:
    return "{" + ",".join([*(f"{key}={label_value(value)}" for key, value in sorted(labels.items())), *more]) + "}"


def replicas_scraped(scope: Scope) -> str:
    """The replicas serving, 0 at zero (count of nothing is no series)."""
    return f"count(max by (instance) ({RUNNING}{selector(scope)})) or vector(0)"


def picker_total(metric: str, labels: dict[str, str]) -> str:
    """One of the picker's gauges summed over its series, 0 when it has none: a fresh picker exports no child of a
    GaugeVec, and the flow registry deletes an idle flow's queue series (gcFlows -> DeleteFlowControlFlowSeries),
    so "no series" means nothing held, and `or vector(0)` says so (the HPA's and the dashboard's reading)."""
    return f"sum({metric}{_matchers(labels)}) or vector(0)"


def held_requests(scope: Scope) -> str:
    return picker_total(HELD, scope.picker_labels or {})


def held_turned_away(scope: Scope) -> str:
    """True when the picker turned a request away (a TTL ended, the band was full, an error) in the window."""
    outcomes = _matchers(scope.picker_labels or {}, f'outcome=~"{"|".join(TURNED_AWAY_OUTCOMES)}"')
    return f"sum(increase({FLOW_OUTCOMES}{outcomes}[{RATE_WINDOW}])) > 0"
