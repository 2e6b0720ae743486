"""Every output the stack exports: the stack's contract with its users (`pulumi stack output`, tools/status,
tools/tunnel, the benchmark, the preview job), one entry each.

The outputs table of docs/settings.md is written from here (`python -m components.core.outputs_docs`), and
tests/test_stack_outputs.py runs both platforms' programs to hold each wing to it: a name a wing exports
must be here, and each name here must be exported by the platforms it names (under the settings it says).
"""

from __future__ import annotations

from dataclasses import dataclass

PLATFORMS = ("vm", "gke")


@dataclass(frozen=True)
class StackOutput:
    name: str
    platforms: tuple[str, ...]
    description: str
    secret: bool = False
    only_when: str = ""
    """The settings under which it is exported at all (empty: always, on its platforms)."""


def _on(platforms: tuple[str, ...]):
    def output(name: str, description: str, *, secret: bool = False, only_when: str = "") -> StackOutput:
        return StackOutput(name, platforms, description, secret, only_when)

    return output


_both, _vm, _gke = _on(PLATFORMS), _on(("vm",)), _on(("gke",))


FLEX_START = "`tpu.provisioningModel` is `flex-start`"
QUEUED = "the node goes through the queued resource (`tpu.api` `queued-resource`, v5e's and v6e's default)"
COMPUTE_API = "the node is a Compute Engine instance (`tpu.api` `compute`, TPU7x's only path)"
KV_BUDGET = "the model's geometry is known (E2B's is built in)"

OUTPUTS: tuple[StackOutput, ...] = (
    # Reaching the server.
    _both("internalEndpoint", "the endpoint inside the VPC: `http://<node or internal LB IP>:8000/v1` (the front; the "
          "key is required); with `gke.inferenceGateway`, `http://<gateway IP>/v1`",
          only_when="`gke.allowExternalLoadBalancer` is off (gke; the vm always exports it)"),
    _both("externalEndpoint", "the endpoint from outside the VPC: `http://<node or load balancer IP>:8000/v1`",
          only_when="vm: `access.servingSourceRanges` is set; gke: `gke.allowExternalLoadBalancer` (in place of "
          "`internalEndpoint`)"),
    _both("localEndpoint", "`http://127.0.0.1:8000/v1`, through `sshTunnelCommand` (vm) or `portForwardCommand` (gke)"),
    _both("apiKey", "the key every path but `/health` needs", secret=True),
    _both("hfTokenSource", "which secret holds the HF token (the stack's own, or your hand-made one)"),
    _both("previewIam", "what the pull-request preview identity needs for this stack: `projectRoles` and the secrets "
          "it reads (`secretAccessor`), each with why (docs/review.md)"),
    _both("vllmServeCommand", "the exact `vllm serve` flags, the same on both platforms"),
    # The vm wing's node and its access.
    _vm("dockerRunCommand", "the vLLM container's `docker run` (its unit runs it; no secret in it)"),
    _vm("gcloudEquivalent", "the `gcloud` command the node corresponds to: the build log's `... queued-resources "
        "create`, or `gcloud compute instances create` on `tpu.api: compute`"),
    _vm("nodeName", "the TPU node (a queued resource's node, or the Compute Engine instance)"),
    _vm("queuedResourceName", "the queued resource (what `tools.status` reads)", only_when=QUEUED),
    _vm("queuedResourceState", "the request's state (`ACTIVE`; `SUSPENDED` after the run)", only_when=QUEUED),
    _vm("instanceName", "the Compute Engine instance (what `tools.status` reads)", only_when=COMPUTE_API),
    _vm("instanceState", "the instance's status when the deploy read it (`RUNNING`)", only_when=COMPUTE_API),
    _vm("runEndsAt", "when GCP deletes the node (the run duration's end; on `tpu.api: compute`, computed: the "
        "instance's creation plus `tpu.maxRunDuration`, later by the time the request queued)"),
    _vm("sshPrivateKey", "the stack's SSH key", secret=True),
    _vm("sshPrivateKeySetup", "the line that saves the key and the host key's known_hosts file"),
    _vm("sshCommand", "SSH to the node, pinned to its host key"),
    _vm("sshTunnelCommand", "the tunnel to the front on 127.0.0.1:8000, pinned to the host key"),
    _vm("sshHostKey", "the node's SSH host key (the stack's, installed at boot)"),
    _vm("sshKnownHosts", "the host key's known_hosts line (`HostKeyAlias` = the resource prefix)"),
    # What it costs.
    _both("costPerHourUsd", "the TPU (vm) or the whole cluster at `gke.maxReplicas` (gke) per hour; null where no "
          "price was read for the chip (TPU7x: the plan says \"price not found\")"),
    _vm("priceNotFound", "why the TPU has no price here (no price read for the shape and region): no cost is "
        "invented", only_when="no price was read for the shape (TPU7x)"),
    _both("maxSpendPerRunUsd", "the most one run can cost (null where no price was read)", only_when=FLEX_START),
    _vm("maxSpendPerRunUsdWithDisk", "one run with the cache disk's share", only_when=FLEX_START),
    _vm("cacheDiskUsdPerMonth", "the cache disk per month"),
    _vm("cacheDiskBilling", "whether `destroy` deletes the cache disk, and what it bills until then"),
    _gke("costPerHourAtMinReplicasUsd", "the cluster at `gke.minReplicas` per hour"),
    _gke("clusterBaselineUsdPerHour", "what bills with no TPU node (the cluster fee, the system nodes with their "
         "boot disks, the cache bucket)"),
    _gke("costPerHourDuringRolloutUsd", "while a rollout runs, the cluster with the surge replica's chip (at "
         "`gke.minReplicas` + 1 and `gke.maxReplicas` + 1)"),
    _gke("replicaUsdPerHour", "one replica (chip, its node's boot disk, the recycling overlap)"),
    _gke("bootDiskUsdPerMonthPerNode", "a node's boot disk per month"),
    _gke("compileCacheUsdPerMonth", "the compile-cache bucket per month"),
    _gke("fallbackCostPerHourUsd", "each `gke.fallback`'s price per replica and at `gke.maxReplicas`"),
    _gke("scaleToZeroCostUsd", "the pool at zero per hour beside one replica, and a day of `load.activeHoursPerDay` "
         "against one replica kept all day (computed, with the formula)", only_when="`gke.minReplicas` is 0"),
    # One chip's memory.
    _both("kvBytesPerToken", "KV-cache bytes per token of the model", only_when=KV_BUDGET),
    _both("kvTokens", "the tokens one chip's KV pool holds", only_when=KV_BUDGET),
    _both("kvPoolGib", "one chip's KV pool", only_when=KV_BUDGET),
    _both("hbmCapGib", "the HBM vLLM may use (`vllm.gpuMemoryUtilization` of the chip)", only_when=KV_BUDGET),
    _both("concurrencyGuidance", "the 78% load line: clients x context to stay under (gke: per replica and in total)",
          only_when=KV_BUDGET),
    # The gke wing: where it runs, capacity and autoscaling, images, the cache, access.
    _gke("platform", "`gke`"),
    _gke("clusterName", "the cluster"),
    _gke("clusterLocation", "the cluster's region or zone"),
    _gke("namespace", "the serving namespace"),
    _gke("tpuZones", "the zones TPU nodes may come up in"),
    _gke("nodeRunDuration", "how long each TPU node runs before GKE recycles it", only_when=FLEX_START),
    _gke("computeClass", "the ComputeClass that makes every TPU node"),
    _gke("computeClassPriorities", "its provisioning models in order (`tpu.provisioningModel`, then `gke.fallback`)"),
    _gke("nodeRecyclingLeadTime", "how long before a node's run ends its replacement comes up", only_when=FLEX_START),
    _gke("kvTokensAtMaxReplicas", "the KV tokens of all replicas at `gke.maxReplicas`", only_when=KV_BUDGET),
    _gke("replicas", "the HPA's bounds (`min`, `max`)"),
    _gke("hpaMetric", "the metric the HPA scales on and its target"),
    _gke("scaleUpLatency", "how long scaling up takes: the HPA's reaction, a new TPU node, vLLM's warm or cold start"),
    _both("vllmImage", "the vLLM image the node or every replica runs, pinned to its manifest digest (resolved at "
          "the first `pulumi up` when the setting is a tag); on gke through the Docker Hub mirror with "
          "`gke.dockerHubMirror`"),
    _gke("frontImage", "the front's and the metrics door's image, pinned likewise"),
    _gke("compileCacheBucket", "the shared XLA compile cache's bucket"),
    _gke("compileCachePath", "this configuration's own prefix in it (`xla/<image digest>/<serve flags hash>`)"),
    _gke("credentialsCommand", "kubectl access (`gcloud container clusters get-credentials ...`)"),
    _gke("portForwardCommand", "the local tunnel to the service"),
    _gke("inClusterEndpoint", "the in-cluster URL"),
    _gke("inferenceGateway", "the inference gateway: its class, its reserved address (`internalEndpoint` is "
         "`http://<it>/v1`), the Gateway, InferencePool and endpoint picker, the picker's pinned image, the "
         "proxy-only subnet (made or adopted), the failure mode", only_when="`gke.inferenceGateway` is on"),
    _gke("inferenceGatewayCost", "what the gateway adds: the regional proxies per hour at least, per GiB processed, "
         "the picker's share of the system pool (computed; the proxy-hour price is not read from Google's page, "
         "which says so)", only_when="`gke.inferenceGateway` is on"),
    _gke("scaleToZero", "the pool at zero: the idle time before it, the endpoint picker's request time-to-live "
         "(computed from the stated cold start: which parts are measured), the held-request bound, and what a "
         "client's timeouts must be to wait", only_when="`gke.minReplicas` is 0"),
)

BY_NAME = {output.name: output for output in OUTPUTS}


def names_for(platform: str) -> set[str]:
    """The outputs a platform may export (each under its `only_when`)."""
    return {output.name for output in OUTPUTS if platform in output.platforms}
