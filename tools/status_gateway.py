"""tools.status on a gke stack with the inference gateway (gke.inferenceGateway): the Gateway's address and whether
GKE has programmed it, the InferencePool's acceptance and its endpoints (the ready serving pods' IP and front
port, what the picker chooses among), and the endpoint picker's readiness. Reads only, with the stack's kubectl.

The status fields read are the upstream CRDs' (vendored in tests/schemas): a Gateway's `status.addresses[].value`
and its `Programmed` condition (Gateway API v1.5.1, gateway.networking.k8s.io_gateways.yaml), an InferencePool's
`status.parents[].conditions` `Accepted` and `ResolvedRefs` (Gateway API Inference Extension v1.5.0,
inference.networking.k8s.io_inferencepools.yaml).
"""

from __future__ import annotations

from typing import Any, Protocol

# Fully qualified, so no other group's `gateway` (Istio's, say) is read instead.
GATEWAY_RESOURCE = "gateways.gateway.networking.k8s.io"
POOL_RESOURCE = "inferencepools.inference.networking.k8s.io"


class Reader(Protocol):
    def get(self, *args: str) -> dict[str, Any] | None: ...


def _condition(conditions: list[dict[str, Any]] | None, kind: str) -> dict[str, Any]:
    return next((c for c in conditions or [] if c.get("type") == kind), {})


def _ready(pod: dict[str, Any]) -> bool:
    return _condition((pod.get("status") or {}).get("conditions"), "Ready").get("status") == "True"


def gateway_facts(kube: Reader, outputs: dict[str, Any], namespace: str, pods: list[dict[str, Any]],
                  zero: bool = False) -> tuple[list[tuple[str, str]], str | None]:
    """Facts about the gateway, the pool and the picker; the problem, if one stops requests reaching a replica.
    zero: the pool may stand at zero, where no endpoint is the idle state and the picker is what holds a request."""
    wanted = outputs.get("inferenceGateway") or {}
    facts: list[tuple[str, str]] = []
    problems: list[str] = []
    gateway = kube.get(GATEWAY_RESOURCE, "-n", namespace, str(wanted.get("gateway", "")))
    if gateway is None:
        facts.append(("gateway", "missing"))
        problems.append("the Gateway is missing: `pulumi up` creates it")
    else:
        status = gateway.get("status") or {}
        addresses = [a.get("value") for a in status.get("addresses") or [] if a.get("value")]
        programmed = _condition(status.get("conditions"), "Programmed")
        state = ("programmed" if programmed.get("status") == "True"
                 else f"not programmed yet ({programmed.get('reason') or 'no condition'}: "
                      f"{programmed.get('message') or 'GKE is making the load balancer'})")
        facts.append(("gateway", f"{', '.join(addresses) or 'no address yet'} "
                                 f"(reserved {wanted.get('address', '?')}), {state}"))
        reserved = wanted.get("address")
        if programmed.get("status") == "True" and reserved and addresses and reserved not in addresses:
            # Whether GKE takes the reserved address (purpose SHARED_LOADBALANCER_VIP) named by the Gateway's
            # NamedAddress is read from no Google page (docs/development.md, issue 46's row): checked here instead.
            problems.append(f"GKE programmed the Gateway on {', '.join(addresses)}, not the reserved address "
                            f"{reserved} the internalEndpoint output names; agents would reach nothing: kubectl -n "
                            f"{namespace} describe {GATEWAY_RESOURCE} {wanted.get('gateway')}, and use "
                            f"http://{addresses[0]}/v1 meanwhile")
        if programmed.get("status") == "False":
            why = programmed.get("message") or programmed.get("reason")
            problems.append(f"GKE has not programmed the Gateway: {why}; "
                            f"kubectl -n {namespace} describe {GATEWAY_RESOURCE} {wanted.get('gateway')}")
    pool = kube.get(POOL_RESOURCE, "-n", namespace, str(wanted.get("inferencePool", "")))
    if pool is None:
        facts.append(("inference pool", "missing"))
        problems.append("the InferencePool is missing: `pulumi up` creates it")
    else:
        ports = [p.get("number") for p in (pool.get("spec") or {}).get("targetPorts") or []]
        endpoints = [f"{(p.get('status') or {}).get('podIP', '?')}:{ports[0] if ports else '?'}"
                     f" ({(p.get('metadata') or {}).get('name', '?')})" for p in pods if _ready(p)]
        parents = (pool.get("status") or {}).get("parents") or []
        accepted = [_condition(parent.get("conditions"), "Accepted").get("status") for parent in parents]
        resolved = [_condition(parent.get("conditions"), "ResolvedRefs").get("status") for parent in parents]
        verdict = ("accepted by the gateway" if accepted and all(a == "True" for a in accepted)
                   else "not accepted by a gateway yet")
        if resolved and any(r == "False" for r in resolved):
            verdict += "; a reference does not resolve (the picker's Service?)"
            problems.append(f"the InferencePool's references do not resolve: kubectl -n {namespace} describe "
                            f"{POOL_RESOURCE} {wanted.get('inferencePool')}")
        idle = " (at zero: the picker holds a request until a replica is ready)" if zero and not endpoints else ""
        facts.append(("inference pool", f"{verdict}; {len(endpoints)} endpoint(s): "
                                        f"{', '.join(endpoints) or 'none'}{idle}"))
    picker = kube.get("deployment", "-n", namespace, str(wanted.get("endpointPicker", "")))
    ready = int(((picker or {}).get("status") or {}).get("readyReplicas") or 0)
    mode = wanted.get("failureMode", "?")
    without = "requests still reach a replica without it" if mode == "FailOpen" else "requests fail without it"
    facts.append(("endpoint picker", f"{'ready' if ready else 'not ready'} (failure mode {mode}: {without})"))
    if picker is None:
        problems.append("the endpoint picker's Deployment is missing: `pulumi up` creates it")
    elif zero and not ready:
        # Fail-open sends a request on without the picker, but at zero there is no replica to send it to.
        problems.append(f"the endpoint picker is not ready, and at zero it is what holds a request while the pool "
                        f"wakes: kubectl -n {namespace} describe deployment {wanted.get('endpointPicker')}")
    return facts, "; ".join(problems) or None
