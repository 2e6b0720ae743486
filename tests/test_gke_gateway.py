"""The opt-in inference gateway: every object valid against its upstream schema at the pinned versions, the
endpoint picker's configuration as its own loader reads it, the objects as llm-d's chart renders them, the
network policies, and the default gke stack without any of it."""

from __future__ import annotations

import copy
import functools
import json

import pytest
import yaml

from components.gke import gateway, inference_pool, metrics_door, network_policy, picker_config
from tests import program as harness
from tests.k8s_schema import kubernetes_objects, validation_errors

GATEWAY_KINDS = {"Gateway", "HTTPRoute", "InferencePool", "HealthCheckPolicy", "GCPBackendPolicy"}


@functools.cache
def gateway_program():
    return harness.run(harness.with_section(harness.gke_config(), "gke", inferenceGateway=True), stack="gke")


@functools.cache
def default_program():
    return harness.run(harness.gke_config(), stack="gke")


def objects(program) -> list[dict]:
    return kubernetes_objects(program.registrations)


def one(program, kind: str, name: str | None = None) -> dict:
    [found] = [o for o in objects(program) if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    return found


def test_every_gateway_object_is_valid_against_its_upstream_schema():
    found = objects(gateway_program())
    assert GATEWAY_KINDS <= {o["kind"] for o in found}
    for manifest in found:
        assert validation_errors(manifest) == [], manifest["kind"]


@pytest.mark.parametrize(("kind", "path", "bad"), [
    ("InferencePool", ("spec", "endpointPickerRef", "failureMode"), "FailSometimes"),
    ("InferencePool", ("spec", "targetPorts"), []),
    ("HTTPRoute", ("spec", "rules", 0, "matches", 0, "path", "type"), "Prefix"),
    ("Gateway", ("spec", "listeners", 0, "protocol"), 7),
    ("HealthCheckPolicy", ("spec", "default", "config", "type"), "ICMP"),
    ("GCPBackendPolicy", ("spec", "default", "timeoutSec"), "an hour"),
    ("GCPBackendPolicy", ("spec", "default", "notAField"), 1),
])
def test_the_schemas_refuse_what_the_api_server_would(kind, path, bad):
    broken = copy.deepcopy(one(gateway_program(), kind))
    node = broken
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = bad
    assert validation_errors(broken), broken


def test_the_default_gke_stack_has_no_gateway_and_keeps_its_passthrough_balancer():
    kinds = {o["kind"] for o in objects(default_program())}
    assert not kinds & GATEWAY_KINDS
    services = [o for o in objects(default_program()) if o["kind"] == "Service"]
    assert any(s["spec"].get("type") == "LoadBalancer" for s in services)
    assert "inferenceGateway" not in default_program().data["outputs"]


def test_with_the_gateway_the_endpoint_is_the_gateway_and_no_passthrough_balancer_remains():
    program = gateway_program()
    assert not [o for o in objects(program) if o["kind"] == "Service" and o["spec"].get("type") == "LoadBalancer"]
    address = program.output("inferenceGateway")["value"]["address"]
    assert program.output("internalEndpoint")["value"] == f"http://{address}/v1"
    [reserved] = program.of_type("gcp:compute/address:Address")
    assert reserved["inputs"]["addressType"] == "INTERNAL"
    assert one(program, "Gateway")["spec"]["addresses"] == [{"type": "NamedAddress",
                                                               "value": reserved["inputs"]["name"]}]
    [cluster] = program.of_type("gcp:container/cluster:Cluster")
    assert cluster["inputs"]["gatewayApiConfig"] == {"channel": "CHANNEL_STANDARD"}


def test_the_route_sends_only_the_openai_paths_to_the_pool_on_the_front_port():
    program = gateway_program()
    route, pool = one(program, "HTTPRoute"), one(program, "InferencePool")
    [rule] = route["spec"]["rules"]
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": "/v1"}}]
    assert rule["backendRefs"][0]["kind"] == "InferencePool"
    front_port = json.loads(harness.gke_config().get("tpu-vllm:front", "{}")).get("listenPort", 8000)
    assert pool["spec"]["targetPorts"] == [{"number": front_port}]
    assert pool["spec"]["endpointPickerRef"]["failureMode"] == "FailOpen"
    health = one(program, "HealthCheckPolicy")["spec"]["default"]["config"]["httpHealthCheck"]
    assert health == {"requestPath": "/health", "port": front_port}
    assert one(program, "GCPBackendPolicy")["spec"]["default"]["timeoutSec"] >= 3600


def test_the_proxy_only_subnet_is_made_or_adopted():
    [subnet] = gateway_program().of_type("gcp:compute/subnetwork:Subnetwork")
    assert subnet["inputs"]["purpose"] == "REGIONAL_MANAGED_PROXY" and subnet["inputs"]["role"] == "ACTIVE"
    adopted = harness.run(harness.with_section(harness.gke_config(), "gke", inferenceGateway={
        "proxyOnlySubnet": "shared-proxy", "proxyOnlyRange": "10.200.0.0/23"}), stack="gke")
    assert adopted.of_type("gcp:compute/subnetwork:Subnetwork") == []
    assert adopted.output("inferenceGateway")["value"]["proxyOnlySubnet"] == "shared-proxy"
    policy = one(adopted, "NetworkPolicy", network_policy.GATEWAY_POLICY_NAME)
    assert {"ipBlock": {"cidr": "10.200.0.0/23"}} in policy["spec"]["ingress"][0]["from"]


def test_the_picker_reaches_only_the_metrics_door_and_only_the_gateway_reaches_the_picker():
    program = gateway_program()
    policy = one(program, "NetworkPolicy", network_policy.GATEWAY_POLICY_NAME)
    front_rule, door_rule = policy["spec"]["ingress"]
    assert [b["ipBlock"]["cidr"] for b in front_rule["from"]] == ["172.16.0.0/23", "35.191.0.0/16", "130.211.0.0/22"]
    assert door_rule == {"from": [{"podSelector": {"matchLabels": inference_pool.PICKER_LABELS}}],
                         "ports": [{"protocol": "TCP", "port": metrics_door.METRICS_PORT}]}
    picker = one(program, "NetworkPolicy", network_policy.PICKER_POLICY_NAME)
    assert [p["port"] for p in picker["spec"]["ingress"][0]["ports"]] == [9002, 9003]
    # The picker scrapes the door's port, not the pool's (the front, which wants the key on /metrics): at v0.10.0
    # the metrics source's `port` parameter; the flag v0.9.0 read is gone, and the picker would refuse to start.
    args = one(program, "Deployment", inference_pool.PICKER_NAME)["spec"]["template"]["spec"]["containers"][0]["args"]
    assert not any(arg.startswith("--model-server-metrics") for arg in args)
    source = next(p for p in picker_config.picker_config()["plugins"] if p["type"] == picker_config.METRICS_SOURCE)
    assert source["parameters"]["port"] == metrics_door.METRICS_PORT


def test_the_picker_image_is_pinned_by_digest_and_its_requests_fit_the_system_pool():
    program = gateway_program()
    container = one(program, "Deployment", inference_pool.PICKER_NAME)["spec"]["template"]["spec"]["containers"][0]
    assert "@sha256:" in container["image"] and container["image"].startswith(
        "ghcr.io/llm-d/llm-d-router-endpoint-picker@")
    requests = container["resources"]["requests"]
    # e2-standard-2 allocates ~1.93 CPU and ~5.9 GiB to pods, shared with kube-system and the collectors.
    assert requests["cpu"] == "250m" and requests["memory"] == "512Mi"


# The picker's configuration as its loader reads it (llm-d/llm-d-router v0.10.0, pkg/epp/config/loader/
# configloader.go decodeRawConfig: strict, unknown fields refused; validation.go: every pluginRef names a plugin,
# whose name defaults to its type, defaults.go applyStaticDefaults). The fields of EndpointPickerConfig and its
# parts (apix/config/v1alpha1/endpointpickerconfig_types.go), written here as a schema.
_REF = {"type": "object", "additionalProperties": False, "required": ["pluginRef"],
        "properties": {"pluginRef": {"type": "string", "minLength": 1}}}
# A resource.Quantity: a string ("100", "1k", "1Gi") or a number; the loader refuses a negative one
# (loader/flowcontrol.go resolveQuantity).
_QUANTITY = {"type": ["string", "integer"], "pattern": "^[0-9]+(\\.[0-9]+)?([kMGTPE]i?|[mun])?$", "minimum": 0}
_BAND = {"type": "object", "additionalProperties": False, "required": ["priority"],
         "properties": {"priority": {"type": "integer"}, "maxBytes": _QUANTITY, "maxRequests": _QUANTITY,
                        "fairnessPolicyRef": {"type": "string"}, "orderingPolicyRef": {"type": "string"}}}
PICKER_CONFIG_SCHEMA = {
    "type": "object", "additionalProperties": False, "required": ["apiVersion", "kind", "plugins"],
    "properties": {
        "apiVersion": {"enum": ["llm-d.ai/v1alpha1", "inference.networking.x-k8s.io/v1alpha1"]},
        "kind": {"const": "EndpointPickerConfig"},
        "featureGates": {"type": "array", "items": {"type": "string"}},
        "plugins": {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["type"],
            "properties": {"name": {"type": "string"}, "type": {"type": "string"}, "parameters": {}}}},
        "schedulingProfiles": {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["name"],
            "properties": {"name": {"type": "string"}, "plugins": {"type": "array", "items": {
                "type": "object", "additionalProperties": False,
                "properties": {"pluginRef": {"type": "string"}, "weight": {"type": "number"}}}}}}},
        "dataLayer": {"type": "object", "additionalProperties": False, "properties": {
            "injectDefaults": {"type": "boolean"}, "discovery": _REF,
            "sources": {"type": "array", "items": {
                "type": "object", "additionalProperties": False, "required": ["pluginRef"],
                "properties": {"pluginRef": {"type": "string"}, "extractors": {"type": "array", "items": _REF}}}}}},
        # FlowControlConfig, PriorityBandConfig and RequestHandlerConfig (the same file, v0.10.0).
        "flowControl": {"type": "object", "additionalProperties": False, "properties": {
            "saturationDetector": _REF, "maxBytes": _QUANTITY, "maxRequests": _QUANTITY,
            "defaultRequestTTL": {"type": "string"},
            "defaultPriorityBand": _BAND, "defaultNegativePriorityBand": _BAND,
            "priorityBands": {"type": "array", "items": _BAND},
            "usageLimitPolicyPluginRef": {"type": "string"}, "enableEviction": {"type": "boolean"}}},
        "requestHandler": {"type": "object", "additionalProperties": False, "properties": {
            "parsers": {"type": "array", "items": _REF}}},
        "saturationDetector": {"type": "object"}, "parser": {"type": "object"},
    },
}
# The plugin types the v0.10.0 runner registers that this configuration names (their Type constants:
# scorer/queuedepth/queue.go, scorer/kvcacheutilization/kvcache_utilization.go, scorer/prefix/plugin.go,
# datalayer/source/metrics/datasource.go, datalayer/extractor/metrics/factories.go).
REGISTERED_TYPES = {"queue-scorer", "kv-cache-utilization-scorer", "prefix-cache-scorer", "metrics-data-source",
                    "core-metrics-extractor", "utilization-detector", "openai-parser", "anthropic-parser",
                    "vllmhttp-parser", "passthrough-parser"}
REGISTERED_GATES = {"flowControl", "haPopulateNonLeaderDatastore"}
# metricsDatasourceParams (datasource.go, v0.10.0).
METRICS_SOURCE_PARAMETERS = {"scheme", "path", "port", "insecureSkipVerify", "caCertPath", "clientCertPath",
                             "clientKeyPath", "interval"}
# The utilization detector's apiConfig (flowcontrol/saturationdetector/utilization/config.go).
DETECTOR_PARAMETERS = {"queueDepthThreshold", "kvCacheUtilThreshold", "metricsStalenessThreshold", "headroom"}
# The path suffixes each parser claims (Claims().Paths: parsers/openai/openai.go, anthropic/anthropic.go,
# vllmhttp/vllmhttp.go); the passthrough parser claims none (passthrough/passthrough.go), which makes it the
# fallback.
PARSER_CLAIMS = {
    "openai-parser": ["chat/completions", "completions", "embeddings", "responses", "conversations",
                      "chat/completions/render", "completions/render"],
    "anthropic-parser": ["messages", "messages/count_tokens"],
    "vllmhttp-parser": ["inference/v1/generate"],
    "passthrough-parser": [],
}


def go_duration_seconds(text: str) -> float:
    """A Go duration as metav1.Duration reads it (time.ParseDuration), for the few units the config uses."""
    import re

    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text)
    assert parts and "".join(n + u for n, u in parts) == text, text
    return sum(float(number) * units[unit] for number, unit in parts)


def parser_for(config: dict, path: str) -> str:
    """handlers/parsers.go as v0.9.0 builds and resolves it: parsers in order, one claiming no path is the fallback
    and ends the list; a path is matched by its suffix; no match and no fallback is the picker's HTTP 400."""
    types = {p.get("name") or p["type"]: p["type"] for p in config["plugins"]}
    fallback = None
    entries = []
    for ref in config.get("requestHandler", {}).get("parsers") or [
            {"pluginRef": name} for name in ("openai-parser", "anthropic-parser", "vllmhttp-parser")]:
        claims = PARSER_CLAIMS[types.get(ref["pluginRef"], ref["pluginRef"])]
        if not claims:
            fallback = ref["pluginRef"]
            break
        entries.append((ref["pluginRef"], claims))
    for name, claims in entries:
        if any(path.strip("/") == suffix or path.endswith("/" + suffix) for suffix in claims):
            return name
    if fallback is None:
        raise LookupError(f"no parser registered matching path suffix for: {path}")
    return fallback


def loader_errors(config: dict) -> list[str]:
    import jsonschema

    errors = [e.message for e in jsonschema.Draft202012Validator(PICKER_CONFIG_SCHEMA).iter_errors(config)]
    names = {p.get("name") or p["type"] for p in config.get("plugins", [])}
    # validateFeatureGates (configloader.go): a registered gate, bare or "=true"/"=false" (cmd/epp/runner/
    # runner.go registers flowControl and haPopulateNonLeaderDatastore at v0.10.0).
    for gate in config.get("featureGates", []):
        if gate.split("=", 1)[0] not in REGISTERED_GATES or gate.count("=") > 1 or (
                "=" in gate and gate.split("=", 1)[1] not in ("true", "false")):
            errors.append(f"unknown feature gate {gate!r}")
    ttl = config.get("flowControl", {}).get("defaultRequestTTL")
    if isinstance(ttl, str) and ttl != "0s" and go_duration_seconds(ttl) <= 0:
        errors.append("defaultRequestTTL must be a positive duration")
    for plugin in config.get("plugins", []):
        if plugin["type"] not in REGISTERED_TYPES:
            errors.append(f"unknown plugin type {plugin['type']}")
        if plugin["type"] == "metrics-data-source" and set(plugin.get("parameters", {})) - METRICS_SOURCE_PARAMETERS:
            errors.append("unknown metrics-data-source parameter")
        port = plugin.get("parameters", {}).get("port") if plugin["type"] == "metrics-data-source" else None
        if port is not None and not 1 <= port <= 65535:  # MetricsDataSourceFactory's own check
            errors.append(f"invalid port {port}: must be between 1 and 65535")
        if plugin["type"] == "utilization-detector":
            parameters = plugin.get("parameters", {})
            if set(parameters) - DETECTOR_PARAMETERS:
                errors.append("unknown utilization-detector parameter")
            if "metricsStalenessThreshold" in parameters and go_duration_seconds(
                    parameters["metricsStalenessThreshold"]) <= 0:
                errors.append("metricsStalenessThreshold must be strictly positive")
    # Parsers and the detector: a plugin by name, or a registered type the loader adds by itself
    # (defaults.go registerDefaultPlugin); a parser after the fallback is skipped (parsers.go).
    refs = [r.get("pluginRef") for r in config.get("requestHandler", {}).get("parsers", [])]
    detector = config.get("flowControl", {}).get("saturationDetector", {}).get("pluginRef")
    for ref in [*refs, *([detector] if detector else [])]:
        if ref not in names and ref not in REGISTERED_TYPES:
            errors.append(f"the configured plugin {ref!r} is not loaded")
    types = {p.get("name") or p["type"]: p["type"] for p in config.get("plugins", [])}
    kinds = [types.get(ref, ref) for ref in refs]
    if any(kind not in PARSER_CLAIMS for kind in kinds):
        errors.append("a parser reference names a plugin that is not a parser")
    elif any(not PARSER_CLAIMS[kind] for kind in kinds[:-1]):
        errors.append("a parser is configured after the fallback parser and is skipped")
    for profile in config.get("schedulingProfiles", []):
        for ref in profile.get("plugins", []):
            if ref.get("pluginRef") not in names:
                errors.append(f"schedulingProfiles[{profile['name']}] references undefined plugin "
                              f"'{ref.get('pluginRef')}'")
    return errors


def test_the_picker_configuration_reads_as_its_loader_reads_it():
    program = gateway_program()
    data = one(program, "ConfigMap", inference_pool.PICKER_NAME)["data"][picker_config.FILE_NAME]
    config = yaml.safe_load(data)
    assert loader_errors(config) == []
    weights = {ref["pluginRef"]: ref["weight"] for ref in config["schedulingProfiles"][0]["plugins"]}
    assert weights == {"queue-scorer": 2, "kv-cache-utilization-scorer": 2, "prefix-cache-scorer": 3}


@pytest.mark.parametrize("breakage", ["unknown top-level", "dangling ref", "bad source parameter", "typo type",
                                      "parser after the fallback", "unknown parser", "detector parameter",
                                      "zero staleness", "port out of range", "unknown gate",
                                      "band without priority"])
def test_the_loader_check_refuses_what_the_loader_refuses(breakage):
    config = picker_config.picker_config()
    if breakage == "unknown top-level":
        config["scorers"] = []
    elif breakage == "dangling ref":
        config["schedulingProfiles"][0]["plugins"].append({"pluginRef": "no-such-scorer", "weight": 1})
    elif breakage == "bad source parameter":
        config["plugins"][3]["parameters"]["metricsPort"] = 9090  # v0.9.0's flag's name, no parameter's
    elif breakage == "port out of range":
        config["plugins"][3]["parameters"]["port"] = 65536
    elif breakage == "unknown gate":
        config["featureGates"] = ["flowcontrol"]
    elif breakage == "band without priority":
        config["flowControl"]["defaultPriorityBand"] = {"maxRequests": "10"}
    elif breakage == "parser after the fallback":
        config["requestHandler"]["parsers"].reverse()
    elif breakage == "unknown parser":
        config["requestHandler"]["parsers"].append({"pluginRef": "audio-parser"})
    elif breakage == "detector parameter":
        config["plugins"][5]["parameters"]["stalenessThreshold"] = "2s"
    elif breakage == "zero staleness":
        config["plugins"][5]["parameters"]["metricsStalenessThreshold"] = "0s"
    else:
        config["plugins"][0]["type"] = "queue-scorers"
    assert loader_errors(config)


# What llm-d-router v0.10.0's llm-d-router-gateway chart renders with provider gke and a pool (its templates:
# routerlib _inferencepool.yaml, _service.yaml, _deployment.yaml, gke.yaml, httproute.yaml), read here as the
# fields the stack keeps equal; the differences the stack makes are listed in components/gke/inference_pool.py.
CHART_POOL = {"appProtocol": "http", "endpointPickerRef": {"port": {"number": 9002}, "failureMode": "FailOpen"}}
CHART_HEALTH = {"timeoutSec": 2, "checkIntervalSec": 2, "config": {"type": "HTTP"}}
CHART_PICKER_ARGS = ["--pool-name", "--pool-namespace", "--pool-group", "inference.networking.k8s.io",
                     "--zap-encoder", "json", "--config-file", "--grpc-health-port", "9003", "--tracing=false"]
CHART_PICKER_PORTS = [{"name": "grpc", "containerPort": 9002}, {"name": "grpc-health", "containerPort": 9003}]


def test_the_objects_are_the_charts_with_the_stacks_stated_differences():
    program = gateway_program()
    pool = one(program, "InferencePool")["spec"]
    assert pool["appProtocol"] == CHART_POOL["appProtocol"]
    assert {k: pool["endpointPickerRef"][k] for k in ("port", "failureMode")} == CHART_POOL["endpointPickerRef"]
    assert pool["endpointPickerRef"]["name"] == inference_pool.PICKER_NAME == f"{inference_pool.POOL_NAME}-epp"
    health = one(program, "HealthCheckPolicy")["spec"]["default"]
    assert {k: health[k] for k in ("timeoutSec", "checkIntervalSec")} == {"timeoutSec": 2, "checkIntervalSec": 2}
    assert health["config"]["type"] == CHART_HEALTH["config"]["type"]
    container = one(program, "Deployment", inference_pool.PICKER_NAME)["spec"]["template"]["spec"]["containers"][0]
    assert all(arg in container["args"] for arg in CHART_PICKER_ARGS)
    assert container["ports"] == CHART_PICKER_PORTS
    assert container["readinessProbe"]["grpc"] == {"port": 9003, "service": "inference-extension"}
    deployment = one(program, "Deployment", inference_pool.PICKER_NAME)["spec"]
    assert deployment["strategy"] == {"type": "Recreate"} and deployment["replicas"] == 1
    service = one(program, "Service", inference_pool.PICKER_NAME)["spec"]
    assert service["ports"] == [{"name": "grpc-ext-proc", "protocol": "TCP", "port": 9002,
                                 "appProtocol": "kubernetes.io/h2c"}]
    for kind in ("HealthCheckPolicy", "GCPBackendPolicy"):
        assert one(program, kind)["spec"]["targetRef"] == gateway.pool_target_ref()


GATEWAY_TYPE = "kubernetes:gateway.networking.k8s.io/v1:Gateway"


def test_the_gateway_stack_passes_every_policy():
    from tests.test_gke_policy import every_violation, with_urns

    assert every_violation(with_urns(gateway_program().registrations)) == []


@pytest.mark.parametrize("external_class", ["gke-l7-regional-external-managed", "gke-l7-global-external-managed"])
def test_an_external_gateway_class_is_reported_unless_the_policy_config_allows_it(external_class):
    from policy import gke_rules

    props = copy.deepcopy(one(gateway_program(), "Gateway"))
    assert gke_rules.no_external_load_balancer(GATEWAY_TYPE, props) == []
    props["spec"]["gatewayClassName"] = external_class
    [message] = gke_rules.no_external_load_balancer(GATEWAY_TYPE, props)
    assert f"Gateway vllm-gateway uses the class {external_class}" in message and "gke-l7-rilb" in message
    assert gke_rules.no_external_load_balancer(GATEWAY_TYPE, props, {"allowExternalLoadBalancer": True}) == []


@pytest.mark.parametrize("widen", [{"resources": ["secrets"]}, {"verbs": ["create"]}, {"resources": ["*"]}])
def test_the_pickers_role_passes_only_while_it_reads_pods_and_the_pool(widen):
    from tests.test_gke_policy import every_violation, with_urns

    triples = with_urns(gateway_program().registrations)
    widened = []
    for type_, props, urn in triples:
        if type_.endswith(":Role") and props["metadata"]["name"] == inference_pool.PICKER_NAME:
            props = copy.deepcopy(props)
            props["rules"][0].update(widen)
        widened.append((type_, props, urn))
    assert any(f"RoleBinding {inference_pool.PICKER_NAME}" in m for m in every_violation(widened))


def test_the_costs_show_the_regional_proxy_and_the_picker_only_with_the_gateway():
    from components import settings
    from components.economics import costs
    from tests.test_gke_settings import with_gke

    plain = settings.load(with_gke(), "my-proj", "gke").settings
    gated = settings.load(with_gke(inferenceGateway=True), "my-proj", "gke").settings
    assert costs.baseline(gated).usd_per_hour == pytest.approx(costs.baseline(plain).usd_per_hour + 0.025)
    assert "inferenceGatewayCost" not in costs.gke_costs(plain)
    assert not [key for key in costs.gke_plan_summary(plain) if key.startswith("gke_gateway_")]
    line = costs.gke_costs(gated)["inferenceGatewayCost"]
    assert line["proxyUsdPerHourAtLeast"] == 0.025 and line["processedUsdPerGib"] == 0.008
    # 0.25 vCPU x $0.024553 + 0.5 GiB x $0.003291 (E2 in us-west4, components/basis/price_list.py).
    assert line["pickerShareOfSystemPoolUsdPerHour"] == pytest.approx(0.25 * 0.024553 + 0.5 * 0.003291, abs=1e-4)
    how = gateway_program().output("inferenceGatewayCost")["value"]["how"]
    assert how.startswith("computed") and "not read from Google's pricing page" in how
    from components.economics.gateway_costs import gateway_cost_lines, gateway_summary
    assert "not read from Google's pricing page" in gateway_cost_lines(gateway_summary())[0]


def test_the_vendored_schemas_are_the_upstream_copies_the_readme_names():
    import hashlib
    import re
    from pathlib import Path

    schemas = Path(__file__).resolve().parent / "schemas"
    rows = re.findall(r"^\| `([^`]+)` \|.*\| ([0-9a-f]{64}) \|$", (schemas / "README.md").read_text(), re.M)
    assert {name for name, _ in rows} >= {"gateway.networking.k8s.io_gateways.yaml", "healthcheckpolicy_v1.json",
                                          "gateway.networking.k8s.io_httproutes.yaml", "gcpbackendpolicy_v1.json",
                                          "inference.networking.k8s.io_inferencepools.yaml"}
    for name, digest in rows:
        assert hashlib.sha256((schemas / name).read_bytes()).hexdigest() == digest, name


def test_with_the_docker_hub_mirror_the_picker_stays_on_its_own_registry_pinned():
    mirrored = harness.run(harness.with_section(harness.gke_config(), "gke", inferenceGateway=True,
                                                dockerHubMirror=True), stack="gke")
    picker = one(mirrored, "Deployment", inference_pool.PICKER_NAME)["spec"]["template"]["spec"]["containers"][0]
    vllm = mirrored.output("vllmImage")["value"]
    assert "-docker.pkg.dev/" in vllm  # Docker Hub's images come through the mirror
    assert picker["image"].startswith("ghcr.io/llm-d/llm-d-router-endpoint-picker@sha256:")


def _gateway_problem(**gke) -> str:
    from tests.test_gke_settings import problems_of, with_gke

    [problem] = [p for p in problems_of(with_gke(**gke)) if p.startswith("tpu-vllm:gke.inferenceGateway")]
    return problem


@pytest.mark.parametrize(("gke", "said"), [
    ({"inferenceGateway": {"proxyOnlyRange": "10.0.0.0/28"}}, "proxyOnlyRange = \"10.0.0.0/28\": smaller than the /26"),
    ({"inferenceGateway": {"proxyOnlyRange": "8.8.8.0/23"}}, "only inside RFC 1918"),
    ({"inferenceGateway": {"proxyOnlyRange": "10.129.0.1/23"}}, "not a CIDR range without host bits"),
    ({"inferenceGateway": {"proxyOnlySubnet": "Proxy_Subnet"}}, "proxyOnlySubnet = \"Proxy_Subnet\": not a subnetwork"),
    ({"inferenceGateway": True, "allowExternalLoadBalancer": True}, "turn off gke.allowExternalLoadBalancer"),
    ({"inferenceGateway": True, "minMasterVersion": "1.34.0-gke.1000000"}, "pin 1.34.0-gke.1626000 or later"),
    ({"inferenceGateway": "yes"}, "inferenceGateway = \"yes\""),
])
def test_bad_gateway_settings_are_refused_with_key_value_and_fix(gke, said):
    assert said in _gateway_problem(**gke)


@pytest.mark.parametrize("value", [True, False, {"proxyOnlySubnet": "shared-proxy", "proxyOnlyRange": "10.200.0.0/26"},
                                   {"proxyOnlyRange": "172.16.4.0/23"}])
def test_good_gateway_settings_pass(value):
    from components import settings
    from tests.test_gke_settings import with_gke

    loaded = settings.load(with_gke(inferenceGateway=value, minMasterVersion="1.35"), "my-proj", "gke").settings
    assert (loaded.gke.inference_gateway is None) == (value is False)


def test_a_channel_default_older_than_the_gateways_crds_stops_before_the_cluster():
    # The plan's STABLE default (1.33.5-gke.1308000) runs flex-start TPU, but GKE installs the InferencePool CRD
    # only from 1.34.0-gke.1626000: with the gateway that is refused at preview, without it the same channel passes.
    stable = harness.with_section(harness.gke_config(), "gke", releaseChannel="STABLE", inferenceGateway=True)
    [problem] = harness.run(stable, stack="gke").problems
    assert "tpu-vllm:gke.releaseChannel = 'STABLE'" in problem and "1.33.5-gke.1308000" in problem
    assert "1.34.0-gke.1626000" in problem and "turn off gke.inferenceGateway" in problem
    from components.gke.cluster import check_channel_version
    assert check_channel_version("STABLE", "1.33.5-gke.1308000") is None
    assert check_channel_version("REGULAR", "1.34.1-gke.1829001", gateway=True) is None


def test_a_reused_cluster_without_the_gateway_api_or_the_crds_version_stops_the_preview():
    reused = harness.with_section(harness.gke_config(), "gke", useExistingCluster=True, clusterName="shared",
                                  inferenceGateway=True)
    program = harness.run(reused, stack="gke", fixed_outputs={"gcp:container/getCluster:getCluster": {
        "masterVersion": "1.34.0-gke.1000000"}})
    [problem] = program.problems
    assert "tpu-vllm:gke.clusterName = 'shared'" in problem
    assert "--gateway-api=standard" in problem
    assert "1.34.0-gke.1000000, older than 1.34.0-gke.1626000" in problem
    assert "--cluster-version 1.34.0-gke.1626000" in problem
    assert not [r for r in program.registrations if r["type"].startswith("kubernetes:")]


def test_a_reused_cluster_with_the_gateway_api_on_and_recent_enough_passes():
    from components.gke.cluster import existing_cluster_problems
    from tests.test_gke_program import reused

    ready = reused({"masterVersion": "1.34.1-gke.1829001", "gatewayApiConfigs": [{"channel": "CHANNEL_STANDARD"}]})
    assert existing_cluster_problems(ready, "my-proj", gateway=True) == []
    # Without the gateway, neither is asked of it.
    bare = reused({"masterVersion": "1.34.0-gke.1000000"})
    assert existing_cluster_problems(bare, "my-proj") == []


def test_a_reused_autopilot_cluster_is_refused_for_its_collectors_namespace():
    # Its collectors run in gke-gmp-system, which the network policies (gmp-system) do not admit.
    from components.gke.cluster import existing_cluster_problems
    from tests.test_gke_program import reused

    [problem] = existing_cluster_problems(reused({"enableAutopilot": True}), "my-proj")
    assert "Autopilot" in problem and "gke-gmp-system" in problem and "gke.useExistingCluster" in problem


def test_the_network_services_api_is_enabled_only_with_the_gateway():
    # GKE calls the picker through a Service Extensions traffic extension (deploy-gke-inference-gateway).
    def apis(program):
        return {r["inputs"]["service"] for r in program.registrations if r["type"] == "gcp:projects/service:Service"}
    assert "networkservices.googleapis.com" in apis(gateway_program())
    assert "networkservices.googleapis.com" not in apis(default_program())
    assert "container.googleapis.com" in apis(default_program())


@pytest.mark.parametrize(("path", "parser"), [
    ("/v1/chat/completions", "openai-parser"), ("/v1/completions", "openai-parser"),
    ("/v1/messages", "anthropic-parser"),
    # vLLM serves these under /v1 too; the default parsers claim none of them.
    ("/v1/audio/transcriptions", "passthrough-parser"), ("/v1/score", "passthrough-parser"),
    ("/v1/rerank", "passthrough-parser"),
])
def test_every_v1_path_the_route_sends_reaches_a_parser(path, parser):
    assert parser_for(picker_config.picker_config(), path) == parser
    # Without the fallback, as the loader's defaults, the unclaimed paths are the picker's 400.
    defaults = {**picker_config.picker_config(), "requestHandler": {}}
    if parser == "passthrough-parser":
        with pytest.raises(LookupError, match="no parser registered matching path suffix"):
            parser_for(defaults, path)


def test_the_saturation_detector_reads_metrics_as_fresh_as_the_refresh_keeps_them():
    config = picker_config.picker_config()
    [detector] = [p for p in config["plugins"] if p["type"] == "utilization-detector"]
    assert config["flowControl"]["saturationDetector"]["pluginRef"] == (detector.get("name") or detector["type"])
    staleness = go_duration_seconds(detector["parameters"]["metricsStalenessThreshold"])
    refresh = go_duration_seconds(inference_pool.REFRESH_METRICS_INTERVAL)
    # Upstream's defaults keep four refreshes (50 ms) inside the staleness (200 ms); the stack keeps as many.
    assert staleness >= 4 * refresh
    assert f"--refresh-metrics-interval={inference_pool.REFRESH_METRICS_INTERVAL}" in inference_pool.picker_args("ns")


def test_the_pickers_grace_mirrors_the_serving_pods_longest():
    # llm-d's chart: "this timeout should mirror the longest grace period of the pods within the pool".
    def graces(program):
        pods = {o["metadata"]["name"]: o["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
                for o in objects(program) if o["kind"] == "Deployment"}  # 30: Kubernetes' default
        return pods.pop(inference_pool.PICKER_NAME), max(pods.values())
    picker, serving = graces(gateway_program())
    assert picker == serving == 600  # gke.terminationGracePeriod's default, 10m
    shorter = harness.run(harness.with_section(harness.gke_config(), "gke", inferenceGateway=True,
                                               terminationGracePeriod="5m"), stack="gke")
    assert graces(shorter) == (300, 300)
