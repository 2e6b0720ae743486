"""tpu-vllm's GKE guardrails as plain functions over resource properties (like rules.py, and importable
without pulumi_policy). Each returns violation messages, each saying how to fix it.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

NODE_POOL_TYPE = "gcp:container/nodePool:NodePool"
# A cluster declares TPU capacity too: its default pool (nodeConfig), its inline nodePools[], and node
# auto-provisioning (clusterAutoscaling.resourceLimits with a TPU resource type, e.g. tpu-v5-lite-podslice).
CLUSTER_TYPE = "gcp:container/cluster:Cluster"
SERVICE_TYPE = "kubernetes:core/v1:Service"
# GKE's ComputeClass (cloud.google.com/v1): each of its priorities is a kind of node it may create.
COMPUTE_CLASS_TYPE = "kubernetes:cloud.google.com/v1:ComputeClass"
RESOURCE_QUOTA_TYPE = "kubernetes:core/v1:ResourceQuota"
# The stack's own class is declared by its gke Deployment component (components/gke/deployment.py); its opt-in
# annotation counts there only, since it is written from the stack's settings (gke.fallback,
# gke.allowUnboundedBilling).
CLASS_COMPONENT_TYPE = "tpu-vllm:gke:Deployment"
CLASS_OPT_IN_ANNOTATION = "tpu-vllm/unbounded-billing-opt-in"
TPU_QUOTA_KEYS = ("requests.google.com/tpu", "limits.google.com/tpu")
# The component that writes the external load balancer opt-in, and only from the stack's settings
# (components/gke/exposure.py); an annotation on any other Service clears nothing.
EXPOSURE_TYPE = "tpu-vllm:gke:Exposure"
INGRESS_TYPES = {"kubernetes:networking.k8s.io/v1:Ingress", "kubernetes:networking.k8s.io/v1beta1:Ingress",
                 "kubernetes:extensions/v1beta1:Ingress"}
# Where each workload kind keeps its pod spec.
POD_SPEC_PATHS = {
    "kubernetes:core/v1:Pod": ("spec",),
    "kubernetes:apps/v1:Deployment": ("spec", "template", "spec"),
    "kubernetes:apps/v1:StatefulSet": ("spec", "template", "spec"),
    "kubernetes:apps/v1:DaemonSet": ("spec", "template", "spec"),
    "kubernetes:apps/v1:ReplicaSet": ("spec", "template", "spec"),
    "kubernetes:batch/v1:Job": ("spec", "template", "spec"),
    "kubernetes:batch/v1:CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
# GKE TPU machine families (ct4p-, ct5lp-, ct5p-, ct6e-, tpu7x-); the chips per node end the name ("-4t").
TPU_MACHINE = re.compile(r"^(ct\d+[a-z]*|tpu\d+[a-z]*)-[a-z]+-(\d+)t$")
MAX_RUN_SECONDS = 7 * 24 * 3600  # flex-start's own limit
# What the stack writes when the user opted in (gke.allowExternalLoadBalancer). The stack makes no TPU node pool
# (its ComputeClass makes the nodes), so a node pool's spot / on-demand opt-in is the policy config's alone.
EXTERNAL_LB_ANNOTATION = "tpu-vllm/external-load-balancer"
EXTERNAL_LB_OPT_IN = "opted-in by tpu-vllm:gke.allowExternalLoadBalancer"
INTERNAL_LB_ANNOTATIONS = ("networking.gke.io/load-balancer-type", "cloud.google.com/load-balancer-type")
INTERNAL_INGRESS_CLASS = "gce-internal"
# Gateway API Gateways (the stack's inference gateway, components/gke/gateway.py): GKE's internal classes, the
# regional internal Application Load Balancer and its multi-cluster form (kubernetes-engine/docs/concepts/
# gateway-api, "GatewayClass capabilities"); every other class (gke-l7-global-external-managed,
# gke-l7-regional-external-managed, gke-l7-gxlb, ...) faces the internet.
GATEWAY_TYPES = {"kubernetes:gateway.networking.k8s.io/v1:Gateway",
                 "kubernetes:gateway.networking.k8s.io/v1beta1:Gateway"}
INTERNAL_GATEWAY_CLASSES = ("gke-l7-rilb", "gke-l7-rilb-mc")

CONFIG_PROPERTIES = {
    "maxTpuChips": {"type": "integer", "default": 8},
    "allowExternalLoadBalancer": {"type": "boolean", "default": False},
}
DEFAULT_CONFIG = {"maxTpuChips": 8, "allowExternalLoadBalancer": False, "allowUnboundedBilling": False,
                  "honorStackOptIns": True}


def _config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    return {**DEFAULT_CONFIG, **(config or {})}


def _seconds(duration: Any) -> int | None:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)s", str(duration or ""))
    return int(float(match.group(1))) if match else None


def _tpu_chips_per_node(props: Mapping[str, Any]) -> int | None:
    match = TPU_MACHINE.match(str((props.get("nodeConfig") or {}).get("machineType") or ""))
    return int(match.group(2)) if match else None


def _node_pools(type_: str, props: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any], int]]:
    """Every node pool a resource declares, as (name, NodePool-shaped props, zones it spans): a NodePool itself,
    or a cluster's default pool (nodeConfig) and inline nodePools[] (in the cluster's zones unless they list
    their own)."""
    if type_ == NODE_POOL_TYPE:
        return [(str(props.get("name", "")), props, max(len(props.get("nodeLocations") or []), 1))]
    if type_ != CLUSTER_TYPE:
        return []
    cluster = str(props.get("name", ""))
    zonal = re.fullmatch(r".*-[a-z]", str(props.get("location") or "")) is not None
    # A regional cluster without nodeLocations puts its nodes in three of the region's zones.
    zones = len(props.get("nodeLocations") or []) or (1 if zonal else 3)
    pools: list[tuple[str, Mapping[str, Any], int]] = [(
        f"{cluster}/default-pool",
        {"nodeConfig": props.get("nodeConfig") or {}, "initialNodeCount": props.get("initialNodeCount")}, zones)]
    for pool in props.get("nodePools") or []:
        if isinstance(pool, Mapping):
            pools.append((f"{cluster}/{pool.get('name', '')}", pool, len(pool.get("nodeLocations") or []) or zones))
    return pools


def _tpu_limits(type_: str, props: Mapping[str, Any]) -> list[tuple[str, int]]:
    """Node auto-provisioning's TPU resource limits: (resource type, most chips)."""
    autoscaling = (props.get("clusterAutoscaling") or {}) if type_ == CLUSTER_TYPE else {}
    if not autoscaling.get("enabled"):
        return []
    return [(str(limit.get("resourceType")), int(limit.get("maximum") or 0))
            for limit in autoscaling.get("resourceLimits") or []
            if isinstance(limit, Mapping) and str(limit.get("resourceType") or "").startswith("tpu")]


def _made_by(urn: str, component: str, type_: str) -> bool:
    """A resource the given component of the stack made (urn:pulumi:stack::project::...$Parent$Type::name)."""
    parts = urn.split("::")
    types = parts[2].split("$") if len(parts) >= 4 else []
    return types[-2:] == [component, type_]


def gke_tpu_pool_run_ends(type_: str, props: Mapping[str, Any], config: Mapping[str, Any] | None = None,
                          urn: str = "") -> list[str]:
    """Every TPU node pool is flex-start with a run duration of 7 days or less; spot / on-demand, and TPU node
    auto-provisioning (no run duration at all), only as an opt-in."""
    config = _config(config)
    if type_ == COMPUTE_CLASS_TYPE:
        return _class_run_ends(type_, props, config, urn)
    violations = [message for name, pool, _ in _node_pools(type_, props) if _tpu_chips_per_node(pool) is not None
                  for message in _pool_run_ends(name, pool, config)]
    limits = _tpu_limits(type_, props)
    if limits and not config["allowUnboundedBilling"]:
        listed = ", ".join(f"{kind} up to {most}" for kind, most in limits)
        violations.append(
            f"cluster {props.get('name', '')} lets node auto-provisioning create TPU nodes ({listed} chips) with "
            "no run duration, replaced for as long as pods ask; remove the TPU resourceLimits from "
            "clusterAutoscaling and use a flex-start node pool with tpu-vllm:tpu.maxRunDuration, or opt in with "
            "the policy config allowUnboundedBilling: true")
    return violations


def _pool_run_ends(name: str, props: Mapping[str, Any], config: Mapping[str, Any]) -> list[str]:
    node = props.get("nodeConfig") or {}
    if node.get("flexStart"):
        seconds = _seconds(node.get("maxRunDuration"))
        if seconds is None:
            return [f"TPU node pool {name} is flex-start with no nodeConfig.maxRunDuration, so its nodes run "
                    "7 days each and are replaced for as long as pods ask; set tpu-vllm:tpu.maxRunDuration (e.g. 1d)"]
        if seconds > MAX_RUN_SECONDS:
            return [f"TPU node pool {name}: maxRunDuration {seconds}s is over 7 days (604800s); set "
                    "tpu-vllm:tpu.maxRunDuration to 7d or less"]
        return []
    if config["allowUnboundedBilling"]:
        return []
    model = "spot" if node.get("spot") or node.get("preemptible") else "on-demand"
    return [f"TPU node pool {name} is {model}: no run duration, nothing stops its billing; make it flex-start "
            "with a maxRunDuration, leave TPU nodes to the stack's ComputeClass (tpu-vllm:gke.fallback for spot / "
            "on-demand), or opt in with the policy config allowUnboundedBilling: true"]


def _class_priorities(props: Mapping[str, Any]) -> list[tuple[int, Mapping[str, Any]]]:
    """The TPU priorities of a ComputeClass, with their 1-based position."""
    priorities = (props.get("spec") or {}).get("priorities") or []
    return [(index, rule) for index, rule in enumerate(priorities, 1)
            if isinstance(rule, Mapping) and isinstance(rule.get("tpu"), Mapping)]


def _priority_model(rule: Mapping[str, Any]) -> str:
    if (rule.get("flexStart") or {}).get("enabled"):
        return "flex-start"
    return "spot" if rule.get("spot") else "on-demand"


def _class_run_ends(type_: str, props: Mapping[str, Any], config: Mapping[str, Any], urn: str) -> list[str]:
    """Every TPU priority of a ComputeClass ends its nodes (maxRunDurationSeconds, 7 days at most); a spot or
    on-demand one without a run end only as an opt-in: the stack's own class listing its model, or the config."""
    name = (props.get("metadata") or {}).get("name", "")
    annotations = (props.get("metadata") or {}).get("annotations") or {}
    stack_class = config["honorStackOptIns"] and _made_by(urn, CLASS_COMPONENT_TYPE, COMPUTE_CLASS_TYPE)
    opted_in = {m.strip() for m in str(annotations.get(CLASS_OPT_IN_ANNOTATION, "")).split(",")} if stack_class \
        else set()
    violations = []
    for index, rule in _class_priorities(props):
        model = _priority_model(rule)
        seconds = rule.get("maxRunDurationSeconds")
        where = f"ComputeClass {name} priority {index} ({model} TPU)"
        if seconds is not None and int(seconds) > MAX_RUN_SECONDS:
            violations.append(f"{where}: maxRunDurationSeconds {int(seconds)} is over 7 days (604800); set "
                              "tpu-vllm:tpu.maxRunDuration to 7d or less")
        elif seconds is None and model == "flex-start":
            violations.append(f"{where} has no maxRunDurationSeconds, so its nodes run 7 days each and are replaced "
                              "for as long as pods ask; set tpu-vllm:tpu.maxRunDuration (e.g. 1d)")
        elif seconds is None and not (config["allowUnboundedBilling"] or model in opted_in):
            violations.append(f"{where} has no run duration: nothing stops its billing; list it in "
                              f"tpu-vllm:gke.fallback (or, as the first priority, set gke.allowUnboundedBilling), "
                              "or opt in with the policy config allowUnboundedBilling: true")
    return violations


def _pool_nodes(props: Mapping[str, Any], zones: int) -> int:
    """The most nodes a pool can reach, over all its zones."""
    autoscaling = props.get("autoscaling") or {}
    if autoscaling.get("totalMaxNodeCount") is not None:
        return int(autoscaling["totalMaxNodeCount"])
    if autoscaling.get("maxNodeCount") is not None:
        return int(autoscaling["maxNodeCount"]) * zones  # per zone
    return int(props.get("nodeCount") or props.get("initialNodeCount") or 0) * zones


def gke_tpu_chips_capped(type_: str, props: Mapping[str, Any], config: Mapping[str, Any] | None = None,
                         urn: str = "") -> list[str]:
    """The most chips a node pool, or a cluster with all its pools and auto-provisioning, can reach stays
    within maxTpuChips."""
    config = _config(config)
    cap = int(config["maxTpuChips"])
    if type_ == COMPUTE_CLASS_TYPE:
        name = (props.get("metadata") or {}).get("name", "")
        return [f"ComputeClass {name} priority {index} makes nodes of {int((rule['tpu']).get('count') or 0)} chips, "
                f"over the cap of {cap}; one replica is one v5e chip (tpu.count: 1)"
                for index, rule in _class_priorities(props) if int(rule["tpu"].get("count") or 0) > cap]
    if type_ == RESOURCE_QUOTA_TYPE:
        hard = (props.get("spec") or {}).get("hard") or {}
        name = (props.get("metadata") or {}).get("name", "")
        return [f"ResourceQuota {name} lets its namespace's pods ask for {hard[key]} chips ({key}), over the cap of "
                f"{cap}; lower tpu-vllm:gke.maxReplicas, or raise the policy config maxTpuChips if the spend is meant"
                for key in TPU_QUOTA_KEYS if key in hard and _quantity(hard[key]) > cap]
    parts: list[tuple[str, int, str]] = []  # (what, chips, how)
    for name, pool, zones in _node_pools(type_, props):
        chips_per_node = _tpu_chips_per_node(pool)
        if chips_per_node is not None:
            nodes = _pool_nodes(pool, zones)
            parts.append((f"TPU node pool {name}", nodes * chips_per_node, f"{nodes} nodes x {chips_per_node}"))
    parts += [(f"node auto-provisioning ({kind})", most, "its resourceLimits maximum")
              for kind, most in _tpu_limits(type_, props)]
    chips = sum(count for _, count, _ in parts)
    if chips <= cap:
        return []
    what = parts[0][0] if type_ == NODE_POOL_TYPE else f"cluster {props.get('name', '')}"
    how = "; ".join(f"{part}: {count} ({detail})" for part, count, detail in parts)
    return [f"{what} can reach {chips} chips ({how if type_ == CLUSTER_TYPE else parts[0][2]}), over the cap of "
            f"{cap}; lower tpu-vllm:gke.maxReplicas, or raise the policy config maxTpuChips if the spend is meant"]


def _quantity(value: Any) -> float:
    """A Kubernetes quantity of whole devices ("4", 4, "4k" would be 4000)."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kMGT]?)", str(value).strip())
    if not match:
        return float("inf")  # unreadable: treat as over any cap
    return float(match.group(1)) * {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}[match.group(2)]


def _stack_opted_in(type_: str, props: Mapping[str, Any], urn: str) -> bool:
    """The stack's own opt-in: its exact note, on a Service its Exposure made, limited to listed ranges."""
    annotations = (props.get("metadata") or {}).get("annotations") or {}
    ranges = (props.get("spec") or {}).get("loadBalancerSourceRanges")
    return (type_ == SERVICE_TYPE and annotations.get(EXTERNAL_LB_ANNOTATION) == EXTERNAL_LB_OPT_IN
            and _made_by(urn, EXPOSURE_TYPE, SERVICE_TYPE) and bool(ranges))


def no_external_load_balancer(type_: str, props: Mapping[str, Any],
                              config: Mapping[str, Any] | None = None, urn: str = "") -> list[str]:
    """A Service of type LoadBalancer is internal, and an Ingress or a Gateway uses an internal class, unless allowed:
    by the policy config, or by the stack's settings (gke.allowExternalLoadBalancer) on the Service it made itself
    (the stack makes no external Gateway, so only the policy config lets one through)."""
    config = _config(config)
    metadata = props.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    name = metadata.get("name", "")
    if config["allowExternalLoadBalancer"] or (config["honorStackOptIns"] and _stack_opted_in(type_, props, urn)):
        return []
    if type_ == SERVICE_TYPE and (props.get("spec") or {}).get("type") == "LoadBalancer":
        if any(str(annotations.get(key, "")).lower() == "internal" for key in INTERNAL_LB_ANNOTATIONS):
            return []
        return [f"Service {name} is an external load balancer (reachable from the internet); annotate it "
                f"{INTERNAL_LB_ANNOTATIONS[0]}: Internal, or opt in with tpu-vllm:gke.allowExternalLoadBalancer "
                "(or the policy config allowExternalLoadBalancer: true)"]
    if type_ in INGRESS_TYPES:
        ingress_class = (props.get("spec") or {}).get("ingressClassName") or annotations.get(
            "kubernetes.io/ingress.class")
        if ingress_class == INTERNAL_INGRESS_CLASS:
            return []
        return [f"Ingress {name} makes an external load balancer; use the {INTERNAL_INGRESS_CLASS} class, or opt "
                "in with the policy config allowExternalLoadBalancer: true"]
    if type_ in GATEWAY_TYPES:
        gateway_class = (props.get("spec") or {}).get("gatewayClassName")
        if gateway_class in INTERNAL_GATEWAY_CLASSES:
            return []
        return [f"Gateway {name} uses the class {gateway_class}, an external load balancer; use "
                f"{INTERNAL_GATEWAY_CLASSES[0]} (tpu-vllm:gke.inferenceGateway does), or opt in with the policy config "
                "allowExternalLoadBalancer: true"]
    return []


SECRET_VALUE_PATTERNS = [
    (re.compile(r"hf_[A-Za-z0-9]{30,}"), "a Hugging Face token"),
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"), "a private key"),
    (re.compile(r"ya29\.[A-Za-z0-9_\-]{20,}"), "a Google access token"),
]
SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|PRIVATE_?KEY|CREDENTIALS?)$", re.IGNORECASE)
LONG_TOKEN = re.compile(r"[A-Za-z0-9+/=_\-]{32,}")
SECRET_FLAGS = re.compile(r"^--(api-key|hf-token|token)(=.+)?$")


def _looks_random(text: str) -> bool:
    """Long, mixed-class, high-entropy runs: keys and passwords, not paths or words."""
    counts = Counter(text)
    entropy = -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())
    return (entropy > 4.0 and any(c.isdigit() for c in text) and any(c.isupper() for c in text)
            and any(c.islower() for c in text))


def _pod_spec(type_: str, props: Mapping[str, Any]) -> Mapping[str, Any] | None:
    node: Any = props
    for key in POD_SPEC_PATHS.get(type_, ()):
        node = node.get(key) if isinstance(node, Mapping) else None
    return node if type_ in POD_SPEC_PATHS and isinstance(node, Mapping) else None


def _secret_in_value(name: str, value: str) -> str | None:
    for pattern, what in SECRET_VALUE_PATTERNS:
        if pattern.search(value):
            return what
    if SECRET_NAME.search(name) and value:
        return "a literal value for a secret-named variable"
    if any(_looks_random(token) for token in LONG_TOKEN.findall(value)):
        return "a long random string"
    return None


def no_literal_secret_env(type_: str, props: Mapping[str, Any], config: Mapping[str, Any] | None = None,
                          urn: str = "") -> list[str]:
    """No pod spec carries a secret as a literal env value or command-line flag; secrets come as files."""
    spec = _pod_spec(type_, props)
    if spec is None:
        return []
    workload = (props.get("metadata") or {}).get("name", "")
    violations = []
    containers: Iterable[Mapping[str, Any]] = [
        *(spec.get("initContainers") or []), *(spec.get("containers") or []), *(spec.get("ephemeralContainers") or [])]
    for container in containers:
        where = f"{workload}/{container.get('name', '')}"
        for env in container.get("env") or []:
            if "value" not in env:
                continue  # valueFrom: a reference, not the secret
            what = _secret_in_value(str(env.get("name", "")), str(env.get("value") or ""))
            if what:
                violations.append(f"container {where} sets env {env.get('name')} to {what}; mount the secret as a "
                                  "file (the Secret Manager add-on) and pass its path, e.g. HF_TOKEN_PATH")
        argv = [str(a) for a in [*(container.get("command") or []), *(container.get("args") or [])]]
        for index, arg in enumerate(argv):
            flag = SECRET_FLAGS.match(arg)
            value = (flag.group(2) or "=")[1:] if flag else ""
            if flag and not value and index + 1 < len(argv):
                value = argv[index + 1]
            if flag and value and not value.startswith("$("):
                violations.append(f"container {where} passes {arg.split('=')[0]} with a literal value on its "
                                  "command line; read the secret from a mounted file instead")
    return violations


RESOURCE_RULES = {
    "gke-tpu-pool-run-ends": (gke_tpu_pool_run_ends,
                              "A GKE TPU node pool (a NodePool, a cluster's own pools, or a ComputeClass priority) "
                              "ends its nodes after a run duration; spot/on-demand and TPU auto-provisioning only "
                              "as an explicit opt-in."),
    "gke-tpu-chips-capped": (gke_tpu_chips_capped,
                             "A GKE TPU node pool, a cluster with its pools and auto-provisioning, a ComputeClass "
                             "priority or a namespace's TPU quota reaches at most maxTpuChips chips."),
    "no-external-load-balancer": (no_external_load_balancer,
                                  "Load balancers are internal unless an external one is explicitly allowed."),
    "no-literal-secret-env": (no_literal_secret_env,
                              "No pod spec carries a secret as a literal env value or command-line flag."),
}
STACK_RULES: dict[str, Any] = {}
