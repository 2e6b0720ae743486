"""The gke platform under Pulumi mocks: what it registers, how it is wired, what never leaks."""

from __future__ import annotations

import json
import posixpath
import re
import subprocess
from types import SimpleNamespace

import pytest

from components import settings
from components.basis import boot, price_list
from components.gke import cluster as cluster_module
from components.gke import workload
from components.serving import front, serve_command
from components.vm import container as container_vm
from tests import program as harness
from tests.k8s_schema import KUBERNETES_VERSION, kubernetes_objects, validation_errors
from tests.wing_values import gke_pod, vm_serving
from tools.plan.engine import StackMocks, is_wrapped_secret, unwrap
from tools.plan.placeholders import MOCK_LOAD_BALANCER_IP

CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SERVING = "serving-deployment"
SERVICE = "kubernetes:core/v1:Service"
HPA = "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"
POD_MONITORING = "kubernetes:monitoring.googleapis.com/v1:PodMonitoring"
SECRET_PROVIDER_CLASS = "kubernetes:secrets-store.csi.x-k8s.io/v1:SecretProviderClass"
COMPUTE_CLASS = "kubernetes:cloud.google.com/v1:ComputeClass"
PDB = "kubernetes:policy/v1:PodDisruptionBudget"
WI_BINDING = "gcp:serviceaccount/iAMMember:IAMMember"
GKE_TYPES = {CLUSTER, NODE_POOL, COMPUTE_CLASS, DEPLOYMENT, SERVICE, HPA, POD_MONITORING, SECRET_PROVIDER_CLASS,
             WI_BINDING, "pulumi:providers:kubernetes"}
HF_CANARY, API_CANARY = harness.GKE_HF_CANARY, harness.GKE_API_CANARY


def gke_with(section: str, **values) -> dict[str, str]:
    return harness.with_section(harness.gke_config(), section, **values)


OLD_STABLE = {"gcp:container/getEngineVersions:getEngineVersions": {
    "releaseChannelDefaultVersion": {"STABLE": "1.32.9-gke.1000"}}}


@pytest.fixture(scope="module")
def gke(gke_program):
    """The example stack, with canary secrets (a stack-kept HF token and the generated API key)."""
    return gke_program


@pytest.fixture(scope="module")
def variant():
    """Every other choice at once: regional over two zones, spot (opted in), an external load balancer,
    no metrics adapter, and a pinned version on a channel whose default is too old."""
    config = gke_with("gke", location="us-west4", nodeLocations=["us-west4-a", "us-west4-b"],
                      allowUnboundedBilling=True, allowExternalLoadBalancer=True, installMetricsAdapter=False,
                      releaseChannel="STABLE", minMasterVersion="1.34")
    config = harness.with_section(config, "access", servingSourceRanges=["203.0.113.0/24"])
    config["tpu-vllm:tpu"] = json.dumps({"provisioningModel": "spot"})
    return harness.run(config, stack="gke", fixed_outputs=OLD_STABLE)


def gke_settings(config: dict[str, str] | None = None) -> settings.Settings:
    raw = {key.split(":", 1)[1]: (json.loads(value) if settings.TOP_LEVEL_KEYS.get(key.split(":", 1)[1]) else value)
           for key, value in (config or harness.gke_config()).items() if key.startswith("tpu-vllm:")}
    return settings.load(raw, "my-proj", "gke").settings


def pod_spec(program) -> dict:
    return program.named(SERVING)["inputs"]["spec"]["template"]["spec"]


def container(program, name: str) -> dict:
    return next(c for c in pod_spec(program)["containers"] if c["name"] == name)


def test_the_cluster_has_workload_identity_the_secret_manager_add_on_and_managed_prometheus(gke):
    assert gke.problems is None
    cluster = gke.one(CLUSTER)["inputs"]
    assert cluster["name"] == "tpu-vllm-gke" and cluster["location"] == "us-west4-a"
    assert cluster["workloadIdentityConfig"] == {"workloadPool": "my-proj.svc.id.goog"}
    assert cluster["secretManagerConfig"] == {"enabled": True}
    assert cluster["monitoringConfig"] == {"managedPrometheus": {"enabled": True}}
    assert cluster["releaseChannel"] == {"channel": "REGULAR"}
    assert cluster["removeDefaultNodePool"] is True and cluster["deletionProtection"] is False
    system = gke.named("gke-cluster-system")["inputs"]
    assert system["nodeConfig"]["machineType"] == "e2-standard-2" and system["nodeCount"] == 1
    assert "flexStart" not in system["nodeConfig"]
    assert (system["nodeConfig"]["diskSizeGb"], system["nodeConfig"]["diskType"]) == (100, "pd-balanced")
    assert cluster["addonsConfig"] == {"gcsFuseCsiDriverConfig": {"enabled": True}}
    # The only node pool the stack declares is the system one: the ComputeClass makes every TPU node.
    assert [p["name"] for p in gke.of_type(NODE_POOL)] == ["gke-cluster-system"]


def test_the_pod_runs_the_exact_serve_command_on_one_chip(gke):
    cfg = gke_settings()
    vllm = container(gke, "vllm")
    assert vllm["command"] == ["/bin/sh", "-c", serve_command.KEY_ENTRY_SCRIPT, serve_command.KEY_ENTRY_NAME]
    assert vllm["args"] == serve_command.vllm_serve_args(cfg)
    assert vllm["args"][-4:] == ["--host", "127.0.0.1", "--port", "8001"]
    assert vllm["resources"]["requests"]["google.com/tpu"] == vllm["resources"]["limits"]["google.com/tpu"] == "1"
    spec = gke.named(SERVING)["inputs"]["spec"]
    assert "replicas" not in spec  # the HPA owns it
    assert "volumeClaimTemplates" not in spec  # no zonal claim pins a replica to a zone


def test_probes_cover_a_cold_compile_and_the_grace_period_lets_streams_finish(gke):
    vllm, front_container = container(gke, "vllm"), container(gke, "front")
    startup = vllm["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 30 * 60 > boot.COLD_BOOT_SECONDS
    assert "127.0.0.1:8001/health" in " ".join(startup["exec"]["command"])
    assert front_container["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert pod_spec(gke)["terminationGracePeriodSeconds"] == 600  # the most GKE grants a recycled node's pod
    assert "-s quit" in front_container["lifecycle"]["preStop"]["exec"]["command"][-1]
    assert "/dev/tcp/127.0.0.1/8000" in vllm["lifecycle"]["preStop"]["exec"]["command"][-1]
    budget_ = gke.one(PDB)["inputs"]["spec"]
    assert budget_["maxUnavailable"] == 1


def test_the_front_is_the_vms_front_and_the_only_door_to_the_api(gke):
    cfg = gke_settings()
    front_container = container(gke, "front")
    assert front_container["command"] == front.entry_command(front.FrontLayout())
    assert front_container["ports"] == [{"name": "http", "containerPort": 8000}]
    config_map = gke.named("serving-front-config")["inputs"]["data"]
    assert config_map["nginx.conf"] == front.nginx_config(listen_port=8000, upstream_port=8001)
    assert {"name": "api-key", "mountPath": "/run/secrets/tpu-vllm", "readOnly": True} in front_container[
        "volumeMounts"]
    assert cfg.vllm.server_port not in [p["containerPort"] for c in pod_spec(gke)["containers"]
                                           for p in c.get("ports", [])]


def test_tokens_reach_the_pod_as_files_from_the_secret_manager_add_on(gke):
    classes = {c["inputs"]["metadata"]["name"]: c["inputs"]["spec"] for c in gke.of_type(SECRET_PROVIDER_CLASS)}
    assert classes["vllm-hf-token"] == {"provider": "gke", "parameters": {
        "secrets": "- resourceName: projects/my-proj/secrets/tpu-vllm-gke-hf-token/versions/latest\n"
                   "  path: hf-token\n  mode: 256\n"}}
    assert classes["vllm-api-key"]["parameters"]["secrets"] == (
        "- resourceName: projects/my-proj/secrets/tpu-vllm-gke-api-key/versions/latest\n  path: api-key\n"
        "  mode: 256\n")
    volumes = {v["name"]: v for v in pod_spec(gke)["volumes"]}
    for volume, spc in (("hf-token", "vllm-hf-token"), ("api-key", "vllm-api-key")):
        assert volumes[volume]["csi"] == {"driver": "secrets-store-gke.csi.k8s.io", "readOnly": True,
                                          "volumeAttributes": {"secretProviderClass": spc}}
    env = {e["name"]: e for e in container(gke, "vllm")["env"]}
    assert env["HF_TOKEN_PATH"] == {"name": "HF_TOKEN_PATH", "value": "/run/secrets/tpu-vllm-hf/hf-token"}
    assert all("valueFrom" not in e for e in env.values())


def test_vllm_reads_the_api_key_from_its_file_as_on_the_vm(gke):
    """Defence in depth behind the front: vLLM's own key check, from the mounted file, never a value."""
    vllm = container(gke, "vllm")
    assert {"name": "api-key", "mountPath": "/run/secrets/tpu-vllm", "readOnly": True} in vllm["volumeMounts"]
    command = vllm["command"]
    assert command[:2] == ["/bin/sh", "-c"] and command[3] == "tpu-vllm-entry"
    assert 'VLLM_API_KEY="$(cat /run/secrets/tpu-vllm/api-key)"' in command[2] and 'exec "$@"' in command[2]
    assert f"{posixpath.basename(front.KEY_FILE)}" == "api-key"  # the SecretProviderClass's file name
    assert not [e for e in vllm["env"] if "KEY" in e["name"]]  # the key is never an env value in the spec
    # The same entry command as the VM's docker run, byte for byte.
    vm_args = container_vm.docker_run_args(vm_serving(settings.load(
        {"access": {"sshSourceRanges": ["198.51.100.7/32"]}}, "my-proj", "dev").settings))
    script_at = vm_args.index("-c") + 1
    assert [vm_args[vm_args.index("--entrypoint") + 1], "-c", *vm_args[script_at:script_at + 2]] == command


def test_the_pods_entry_command_runs_vllm_with_the_key_from_the_mounted_file(gke, tmp_path):
    key_file = tmp_path / "api-key"
    key_file.write_text("k3y\n")
    command = container(gke, "vllm")["command"]
    script = command[2].replace(front.KEY_FILE, str(key_file))
    probe = ["sh", "-c", 'printf "%s|%s" "$VLLM_API_KEY" "$1"', "vllm", "serve"]
    ran = subprocess.run(["sh", "-c", script, command[3], *probe], capture_output=True, text=True, timeout=30)
    assert (ran.returncode, ran.stdout) == (0, "k3y|serve")
    key_file.write_text("")
    empty = subprocess.run(["sh", "-c", script, command[3], "true"], capture_output=True, text=True, timeout=30)
    assert empty.returncode == 1 and "API key file is empty" in empty.stderr


@pytest.mark.parametrize(("section", "key", "port"), [("front", "listenPort", 9090), ("vllm", "serverPort", 9090),
                                                     ("front", "listenPort", 8080), ("vllm", "serverPort", 9091)])
def test_the_rendered_pod_never_binds_one_port_twice(section, key, port):
    try:
        cfg = gke_settings(gke_with(section, **{key: port}))
    except settings.SettingsError as refused:
        assert port == 9090 and f"{section}.{key} = 9090" in refused.render()
        return
    assert port != 9090, "a port the metrics door binds was accepted"
    pod = workload.pod_template(gke_pod(cfg), service_account="vllm", image="i", cache_bucket="b",
                                cache_prefix="xla/k", hash_of_config="x")
    ports = [p["containerPort"] for c in pod["spec"]["containers"] for p in c.get("ports", [])]
    ports.append(cfg.vllm.server_port)  # vLLM's loopback port, in the same network namespace
    assert len(ports) == len(set(ports)) == 3, ports


def test_a_network_policy_opens_the_metrics_door_to_the_collectors_only(gke):
    [policy] = [o for o in kubernetes_objects(gke.registrations) if o["kind"] == "NetworkPolicy"]
    labels = gke.named(SERVING)["inputs"]["spec"]["template"]["metadata"]["labels"]
    spec = policy["spec"]
    assert policy["metadata"]["namespace"] == "tpu-vllm"
    # Every serving pod: the Deployment's, and an earlier StatefulSet's while a stack moves (no controller label).
    assert spec["podSelector"] == {"matchLabels": workload.selector_labels("tpu-vllm-gke")}
    assert all(labels[key] == value for key, value in spec["podSelector"]["matchLabels"].items())
    assert spec["policyTypes"] == ["Ingress"]
    front_rule, metrics_rule = spec["ingress"]
    # The front: whatever the Services route (the key check is the front's); nothing else open to all.
    assert front_rule == {"ports": [{"protocol": "TCP", "port": 8000}]}
    assert metrics_rule == {
        "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "gmp-system"}},
                  "podSelector": {"matchLabels": {"app.kubernetes.io/name": "collector"}}}],
        "ports": [{"protocol": "TCP", "port": 9090}]}
    pod_ports = {p["containerPort"] for c in pod_spec(gke)["containers"] for p in c.get("ports", [])}
    assert pod_ports == {8000, 9090}  # every port the pod opens is named by exactly one rule
    # In place before the first pod, and enforced by the cluster the stack makes (Dataplane V2).
    assert "serving-network-policy" in gke.named(SERVING)["dependencies"]
    assert gke.one(CLUSTER)["inputs"]["datapathProvider"] == "ADVANCED_DATAPATH"


def test_the_network_policy_follows_the_serving_port():
    cfg = gke_settings(gke_with("vllm", port=8443))
    from components.gke import network_policy
    labels = workload.selector_labels(cfg.resource_prefix)
    rules_ = network_policy.pod_network_policy("ns", labels, cfg.front.listen_port)["spec"]["ingress"]
    assert rules_[0]["ports"] == [{"protocol": "TCP", "port": 8443}]


def test_workload_identity_binds_the_pods_account_to_the_secret_reader_only(gke):
    ksa = gke.named("serving-ksa")["inputs"]
    email = ksa["metadata"]["annotations"]["iam.gke.io/gcp-service-account"]
    assert email == "tpu-vllm-gke-wl@my-proj.iam.gserviceaccount.com"
    assert pod_spec(gke)["serviceAccountName"] == ksa["metadata"]["name"] == "vllm"
    binding = gke.named("serving-workload-identity")
    assert binding["inputs"] == {"serviceAccountId": f"projects/my-proj/serviceAccounts/{email}",
                                 "role": "roles/iam.workloadIdentityUser",
                                 "member": "serviceAccount:my-proj.svc.id.goog[tpu-vllm/vllm]"}
    assert "gke-cluster" in binding["dependencies"]  # the workload pool exists once the cluster does
    accessors = gke.of_type("gcp:secretmanager/secretIamMember:SecretIamMember")
    assert sorted(a["inputs"]["secretId"] for a in accessors) == ["tpu-vllm-gke-api-key", "tpu-vllm-gke-hf-token"]
    assert {a["inputs"]["member"] for a in accessors} == {f"serviceAccount:{email}"}
    project_roles = [r["inputs"] for r in gke.of_type("gcp:projects/iAMMember:IAMMember")]
    assert all(email not in r["member"] for r in project_roles)
    adapter = gke.named("autoscaling-adapter-workload-identity")["inputs"]
    assert adapter["member"] == "serviceAccount:my-proj.svc.id.goog[custom-metrics/custom-metrics-stackdriver-adapter]"


def test_services_are_cluster_ip_and_an_internal_load_balancer_for_the_vpc(gke):
    services = {s["inputs"]["metadata"]["name"]: s["inputs"] for s in gke.of_type(SERVICE)
                if s["inputs"]["metadata"]["namespace"] == "tpu-vllm"}
    assert services["vllm"]["spec"]["type"] == "ClusterIP"
    balancer = services["vllm-lb"]
    assert balancer["metadata"]["annotations"] == {"networking.gke.io/load-balancer-type": "Internal"}
    assert balancer["spec"]["loadBalancerSourceRanges"] == ["10.128.0.0/9"]
    assert all(p["targetPort"] == "http" for s in services.values() for p in s["spec"]["ports"])
    assert gke.output("internalEndpoint")["value"] == f"http://{MOCK_LOAD_BALANCER_IP}:8000/v1"
    assert "externalEndpoint" not in gke.data["outputs"]


def test_an_external_load_balancer_only_with_the_opt_in_and_only_for_the_listed_ranges(variant):
    balancer = variant.named("exposure-load-balancer")["inputs"]
    assert balancer["metadata"]["annotations"] == {
        "tpu-vllm/external-load-balancer": "opted-in by tpu-vllm:gke.allowExternalLoadBalancer"}
    assert balancer["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24"]
    assert variant.output("externalEndpoint")["value"] == f"http://{MOCK_LOAD_BALANCER_IP}:8000/v1"
    assert "internalEndpoint" not in variant.data["outputs"]


def test_the_hpa_scales_the_deployment_on_the_queue_that_pod_monitoring_collects(gke):
    hpa = gke.one(HPA)["inputs"]["spec"]
    assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "vllm"}
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (1, 4)
    assert hpa["metrics"] == [{"type": "Pods", "pods": {
        "metric": {"name": "prometheus.googleapis.com|vllm:num_requests_waiting|gauge"},
        "target": {"type": "AverageValue", "averageValue": "10"}}}]
    monitoring = gke.one(POD_MONITORING)["inputs"]["spec"]
    [endpoint] = monitoring["endpoints"]
    metrics_ports = container(gke, "metrics")["ports"]
    assert metrics_ports == [{"name": endpoint["port"], "containerPort": 9090}]
    assert endpoint["path"] == "/metrics"
    labels = gke.named(SERVING)["inputs"]["spec"]["template"]["metadata"]["labels"]
    assert monitoring["selector"] == {"matchLabels": workload.selector_labels("tpu-vllm-gke")}
    assert all(labels[key] == value for key, value in monitoring["selector"]["matchLabels"].items())


def test_the_custom_metrics_adapter_is_deployed_with_its_own_reader_identity(gke, variant):
    services = {r["inputs"]["metadata"]["name"] for r in gke.of_type("kubernetes:apiregistration.k8s.io/v1:APIService")}
    assert services == {"v1beta1.custom.metrics.k8s.io", "v1beta2.custom.metrics.k8s.io",
                        "v1beta1.external.metrics.k8s.io"}
    deployment = gke.named("autoscaling-adapter-deployment-custom-metrics-stackdriver-adapter")["inputs"]
    # k8s-stackdriver's manifest at af49d863 (the release tag cm-sd-adapter-v0.16.9 still names v0.16.7-gke.0).
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == (
        "gcr.io/gke-release/custom-metrics-stackdriver-adapter:v0.16.9-gke.0")
    role = gke.named("autoscaling-adapter-monitoring-viewer")["inputs"]
    assert role["role"] == "roles/monitoring.viewer"
    assert "autoscaling-adapter-apiservice-v1beta2.custom.metrics.k8s.io" in gke.named("autoscaling-hpa")[
        "dependencies"]
    assert not [r for r in variant.registrations if r["name"].startswith("autoscaling-adapter")]
    assert variant.of_type(HPA)


def test_every_kubernetes_object_validates_against_the_pinned_schema(gke):
    objects = kubernetes_objects(gke.registrations)
    kinds = {o["kind"] for o in objects}
    assert {"Service", "HorizontalPodAutoscaler", "PodMonitoring", "SecretProviderClass",
            "PodDisruptionBudget", "ResourceQuota", "ComputeClass", "ConfigMap", "ServiceAccount", "Namespace",
            "Deployment", "APIService", "ClusterRole", "ClusterRoleBinding", "RoleBinding", "NetworkPolicy"} <= kinds
    assert KUBERNETES_VERSION == "1.33"
    assert [error for o in objects for error in validation_errors(o)] == []


def test_the_validator_catches_what_the_api_server_would_refuse(gke):
    serving = next(o for o in kubernetes_objects(gke.registrations)
                   if o["kind"] == "Deployment" and o["metadata"]["name"] == "vllm")
    serving["spec"]["template"]["spec"]["containers"][0]["startupProb"] = {}
    assert validation_errors(serving)
    monitoring = next(o for o in kubernetes_objects(gke.registrations) if o["kind"] == "PodMonitoring")
    monitoring["spec"]["endpoints"][0]["interval"] = "15 seconds"
    assert validation_errors(monitoring)
    policy = next(o for o in kubernetes_objects(gke.registrations) if o["kind"] == "NetworkPolicy")
    policy["spec"]["ingress"][1]["from"][0]["namespace"] = "gmp-system"
    assert validation_errors(policy)


def test_canaries_appear_in_no_kubernetes_object_and_only_as_pulumi_secrets(gke):
    canary = gke
    assert canary.problems is None
    for needle in (HF_CANARY, API_CANARY):
        for registration in canary.registrations:
            assert harness.plain_occurrences(registration["inputs"], needle) == [], registration["name"]
        for manifest in kubernetes_objects(canary.registrations):
            assert needle not in json.dumps(manifest), manifest["kind"]
        for name, output in canary.data["outputs"].items():
            assert needle not in json.dumps(output["value"]) or output["secret"], name
        assert needle not in canary.stderr
    version = canary.named("secrets-hf-token-version")["inputs"]["secretData"]
    assert is_wrapped_secret(version) and unwrap(version) == HF_CANARY
    kubeconfig = json.loads(canary.one("pulumi:providers:kubernetes")["inputs"]["kubeconfig"])
    assert kubeconfig["users"][0]["user"] == {"exec": {
        "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "gke-gcloud-auth-plugin",
        "installHint": kubeconfig["users"][0]["user"]["exec"]["installHint"], "provideClusterInfo": True}}


def test_outputs_cost_the_chips_the_cluster_fee_and_the_system_pool(gke):
    outputs = {name: output["value"] for name, output in gke.data["outputs"].items()}
    disk = 100 * 0.11 / 730  # every node's 100 GB pd-balanced boot disk, per hour
    system = 2 * price_list.E2_USD_PER_VCPU_HOUR + 8 * price_list.E2_USD_PER_GIB_HOUR + disk
    bucket = 0.197 * 0.023 / 730
    replica = (0.60 + disk) * 24 / 23  # a 1h recycling overlap in every 24h run
    assert outputs["costPerHourUsd"] == pytest.approx(4 * replica + 0.10 + system + bucket, abs=1e-4)
    assert outputs["costPerHourAtMinReplicasUsd"] == pytest.approx(replica + 0.10 + system + bucket, abs=1e-4)
    assert outputs["clusterBaselineUsdPerHour"] == pytest.approx(0.10 + system + bucket, abs=1e-4)
    assert outputs["maxSpendPerRunUsd"] == pytest.approx(24 * (4 * replica + 0.10 + system + bucket), abs=0.01)
    assert outputs["bootDiskUsdPerMonthPerNode"] == 11.0 and outputs["fallbackCostPerHourUsd"] == {}
    assert (outputs["kvTokens"], outputs["kvTokensAtMaxReplicas"]) == (321_344, 4 * 321_344)
    assert "250,648" in outputs["concurrencyGuidance"] and "1,002,592 at 4" in outputs["concurrencyGuidance"]
    assert "497 s" in outputs["scaleUpLatency"] and "857 s" in outputs["scaleUpLatency"]
    assert gke.output("apiKey")["secret"] is True
    assert outputs["credentialsCommand"] == (
        "gcloud container clusters get-credentials tpu-vllm-gke --location us-west4-a --project my-proj")


def test_the_vm_stack_registers_none_of_the_gke_resources():
    dev = harness.run(harness.dev_config())
    assert dev.problems is None
    registered = {r["type"] for r in dev.registrations}
    assert not registered & GKE_TYPES
    assert not [t for t in registered if t.startswith(("kubernetes:", "tpu-vllm:gke:"))]
    assert "platform" not in dev.data["outputs"]


def test_a_reused_cluster_is_looked_up_not_created_and_pays_no_fee():
    program = harness.run(gke_with("gke", useExistingCluster=True, clusterName="shared"), stack="gke")
    assert program.problems is None
    assert not program.of_type(CLUSTER) and not program.of_type(NODE_POOL)
    assert program.one(COMPUTE_CLASS)["inputs"]["spec"]["nodePoolAutoCreation"] == {"enabled": True}
    kubeconfig = json.loads(program.one("pulumi:providers:kubernetes")["inputs"]["kubeconfig"])
    assert kubeconfig["clusters"][0]["cluster"]["server"] == "https://203.0.113.20"
    # No fee and no system nodes: the replica (chip, boot disk, recycling overlap) and the cache bucket.
    assert program.output("costPerHourAtMinReplicasUsd")["value"] == pytest.approx(
        (0.60 + 11 / 730) * 24 / 23 + 0.197 * 0.023 / 730, abs=1e-4)


def test_a_reused_cluster_without_the_add_ons_stops_the_preview_with_the_fixes():
    program = harness.run(gke_with("gke", useExistingCluster=True, clusterName="shared"), stack="gke",
                          fixed_outputs={"gcp:container/getCluster:getCluster": {
                              "secretManagerConfigs": [{"enabled": False}], "monitoringConfigs": [],
                              "addonsConfigs": [{"gcsFuseCsiDriverConfigs": [{"enabled": False}]}],
                              "masterVersion": "1.33.2-gke.100"}})
    [problem] = program.problems
    assert "tpu-vllm:gke.clusterName = 'shared'" in problem
    assert "--enable-secret-manager" in problem and "--enable-managed-prometheus" in problem
    assert "--update-addons GcsFuseCsiDriver=ENABLED" in problem
    # Past flex-start TPU's minimum, before the class's own node pool auto-creation.
    assert "1.33.2-gke.100" in problem and "--cluster-version 1.33.3-gke.1136000" in problem
    assert "--workload-pool" not in problem
    assert "network policy" not in problem  # the mock's cluster runs Dataplane V2
    assert not [r for r in program.registrations if r["type"].startswith("kubernetes:") or r["type"] == NODE_POOL]


def reused(fields: dict) -> SimpleNamespace:
    """A reused cluster as get_cluster hands it to the program: the mock's healthy one, with these fields."""
    def attributes(value):
        if isinstance(value, dict):
            return SimpleNamespace(**{re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower(): attributes(item)
                                      for key, item in value.items()})
        return [attributes(item) for item in value] if isinstance(value, list) else value

    healthy = StackMocks(project="my-proj")._call_outputs("gcp:container/getCluster:getCluster",
                                                          {"name": "shared", "location": "us-west4-a"})
    return attributes({"networkPolicies": [], **healthy, **fields})


@pytest.mark.parametrize(("fields", "enforced"), [
    ({"datapathProvider": "ADVANCED_DATAPATH"}, True),
    ({"datapathProvider": "LEGACY_DATAPATH", "networkPolicies": [{"enabled": True, "provider": "CALICO"}]}, True),
    ({"datapathProvider": "LEGACY_DATAPATH",
      "networkPolicies": [{"enabled": False, "provider": "PROVIDER_UNSPECIFIED"}]}, False),
    ({"datapathProvider": "", "networkPolicies": []}, False),
    ({"datapathProvider": "DATAPATH_PROVIDER_UNSPECIFIED"}, False),
])
def test_a_reused_cluster_must_enforce_network_policy(fields, enforced):
    cluster = reused(fields)
    assert cluster_module.network_policy_enforced(cluster) is enforced
    problems = [p for p in cluster_module.existing_cluster_problems(cluster, "my-proj") if "network policy" in p]
    if enforced:
        assert problems == []
    else:
        [problem] = problems
        assert "--update-addons=NetworkPolicy=ENABLED" in problem and "--enable-network-policy" in problem
        assert "shared --location us-west4-a --project my-proj" in problem


def test_a_reused_cluster_without_network_policy_stops_the_preview():
    program = harness.run(gke_with("gke", useExistingCluster=True, clusterName="shared"), stack="gke",
                          fixed_outputs={"gcp:container/getCluster:getCluster": {
                              "datapathProvider": "LEGACY_DATAPATH", "networkPolicies": []}})
    [problem] = program.problems
    assert "tpu-vllm:gke.clusterName = 'shared'" in problem and "network policy is not enforced" in problem
    assert not [r for r in program.registrations if r["type"].startswith("kubernetes:") or r["type"] == NODE_POOL]


def test_a_release_channel_whose_default_is_too_old_stops_before_the_cluster(variant):
    program = harness.run(gke_with("gke", releaseChannel="STABLE"), stack="gke", fixed_outputs=OLD_STABLE)
    [problem] = program.problems
    assert "tpu-vllm:gke.releaseChannel = 'STABLE'" in problem and "1.32.9-gke.1000" in problem
    assert "gke.minMasterVersion to 1.34" in problem
    assert not program.of_type(CLUSTER)
    # Pinned past the minimum, the same channel is fine.
    assert variant.problems is None and variant.one(CLUSTER)["inputs"]["minMasterVersion"] == "1.34"


def test_bad_gke_settings_register_nothing_and_say_every_problem():
    program = harness.run(gke_with("gke", minReplicas=3, maxReplicas=2, machineType="ct6e-standard-1t",
                                   nodeLocations=["us-east5-a"], minMasterVersion="1.32"), stack="gke")
    [problem] = program.problems
    for key in ('tpu-vllm:gke.maxReplicas = 2', 'tpu-vllm:gke.machineType = "ct6e-standard-1t"',
                'tpu-vllm:gke.nodeLocations = ["us-east5-a"]', 'tpu-vllm:gke.minMasterVersion = "1.32"'):
        assert key in problem, key
    assert program.registrations == []  # refused before the first resource or cloud lookup


def test_pod_template_variants():
    cfg = gke_settings(gke_with("vllm", weightsOnDisk=True))
    pod = workload.pod_template(gke_pod(cfg), service_account="vllm", image="i@sha256:" + "a" * 64,
                                cache_bucket="b", cache_prefix="xla/k", hash_of_config="x")["spec"]
    vllm = pod["containers"][0]
    assert {"name": "HF_HOME", "value": "/var/cache/tpu-vllm/huggingface"} in vllm["env"]
    assert {"name": "hf-weights", "mountPath": "/var/cache/tpu-vllm/huggingface"} in vllm["volumeMounts"]
    weights = next(v for v in pod["volumes"] if v["name"] == "hf-weights")
    # The checkpoint is the same for every configuration: its own prefix, not the compile cache's.
    assert weights["csi"]["volumeAttributes"]["mountOptions"] == "implicit-dirs,only-dir=huggingface"
    spot = gke_settings({**gke_with("gke", allowUnboundedBilling=True),
                         "tpu-vllm:tpu": json.dumps({"provisioningModel": "spot"})})
    tolerations = workload.pod_template(gke_pod(spot), service_account="vllm", image="i", cache_bucket="b",
                                        cache_prefix="xla/k", hash_of_config="x")["spec"]["tolerations"]
    assert [t["key"] for t in tolerations] == ["google.com/tpu", "cloud.google.com/compute-class",
                                               "cloud.google.com/gke-spot"]


def test_every_api_the_wings_identities_use_is_enabled(gke):
    enabled = {r["inputs"]["service"] for r in gke.of_type("gcp:projects/service:Service")}
    # generateAccessToken (GKE's metadata server, for every Workload Identity: the Secret Manager add-on, the
    # metrics adapter, the cache mount) and the cache bucket's API, with the cluster's and the metrics'.
    assert {"iamcredentials.googleapis.com", "storage.googleapis.com", "container.googleapis.com",
            "monitoring.googleapis.com", "secretmanager.googleapis.com", "iam.googleapis.com"} <= enabled
    bucket = gke.one("gcp:storage/bucket:Bucket")
    assert {"services-storage"} <= set(bucket["dependencies"])


def test_a_cache_size_on_gke_is_a_warning():
    loaded = settings.load({**json_sections(gke_with("cache", sizeGb=80))}, "my-proj", "gke")
    assert any("cache.sizeGb" in w and "80" in w and "read only by the vm platform" in w for w in loaded.warnings)


def json_sections(config: dict[str, str]) -> dict:
    return {key.split(":", 1)[1]: (json.loads(value) if settings.TOP_LEVEL_KEYS.get(key.split(":", 1)[1]) else value)
            for key, value in config.items() if key.startswith("tpu-vllm:")}


def test_a_change_is_rolled_out_surge_first_and_the_deadline_covers_a_queue_and_a_cold_compile(gke):
    spec = gke.named(SERVING)["inputs"]["spec"]
    # The new replica is up and ready before an old one leaves: one extra, never one fewer.
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    cfg = gke_settings()
    waited = cfg.tpu.queue_seconds + cfg.vllm.health_timeout_seconds
    # The controller's default (600 s) would call a cold compile (857 s) a failed rollout.
    assert spec["progressDeadlineSeconds"] == waited > boot.COLD_BOOT_SECONDS
    assert gke.named(SERVING)["inputs"]["metadata"]["annotations"]["pulumi.com/timeoutSeconds"] == str(waited)


def test_the_hpa_counts_only_the_deployments_own_pods_while_the_services_reach_every_replica(gke):
    spec = gke.named(SERVING)["inputs"]["spec"]
    selector, labels = spec["selector"]["matchLabels"], spec["template"]["metadata"]["labels"]
    assert selector == labels and selector["tpu-vllm/controller"] == "deployment"
    # A StatefulSet pod of an earlier version (same Service labels, no controller label) is not the HPA's.
    earlier_pod = dict(workload.selector_labels("tpu-vllm-gke"))
    assert not all(earlier_pod.get(key) == value for key, value in selector.items())
    for service in gke.of_type(SERVICE):
        chosen = service["inputs"]["spec"].get("selector")
        if service["inputs"]["metadata"]["namespace"] != "tpu-vllm":
            continue  # the metrics adapter's own Service
        assert all(earlier_pod.get(k) == v for k, v in chosen.items())  # served through the move
        assert all(labels.get(k) == v for k, v in chosen.items())


def test_the_disruption_budget_moves_one_ready_replica_at_a_time_and_never_holds_on_an_unready_one(gke):
    budget_ = gke.one(PDB)["inputs"]["spec"]
    # The eviction API allows ready - (replicas - maxUnavailable) evictions: one at every count, so at 2+ the
    # others keep serving, and at 1 the replica may move (the gap gke.minReplicas warns of) rather than be stopped
    # at the node's end.
    for replicas in (1, 2, 4):
        assert replicas - (replicas - budget_["maxUnavailable"]) == 1
    assert budget_["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    assert budget_["selector"]["matchLabels"] == workload.selector_labels(gke_settings().resource_prefix)


def test_the_move_from_the_statefulset_creates_the_deployment_under_a_new_name_before_the_old_goes(gke):
    """Pulumi deletes a resource the program no longer declares only after the update's creates, so a new name
    brings the Deployment's replica up while the StatefulSet's still serves."""
    assert gke.of_type("kubernetes:apps/v1:StatefulSet") == []
    assert gke.named(SERVING)["type"] == DEPLOYMENT


def test_outputs_and_the_plan_price_the_rollouts_surge_chip(gke):
    from components.economics import cost_lines, costs

    cfg = gke_settings()
    during = gke.output("costPerHourDuringRolloutUsd")["value"]
    replica = gke.output("replicaUsdPerHour")["value"]
    # Exactly one more replica (chip, boot disk, recycling overlap) than at rest, at either end of the HPA's range.
    assert during["atMinReplicas"] == pytest.approx(gke.output("costPerHourAtMinReplicasUsd")["value"] + replica,
                                                    abs=1e-3)
    assert during["atMaxReplicas"] == pytest.approx(gke.output("costPerHourUsd")["value"] + replica, abs=1e-3)
    guidance = gke.output("concurrencyGuidance")["value"]
    assert "a rollout adds 1 replica" in guidance and f"holds {cfg.gke.max_replicas + 1} chips" in guidance
    summary = costs.gke_plan_summary(cfg)
    summary.update(pricing="flex-start", cost_per_hour_usd=0.6, run_hours=24.0, secret_versions=2,
                   secret_versions_usd_per_month=0.0, cache_disk_outlives_destroy=False,
                   usd_per_million_output_tokens_at_1496_5_tok_s=0.11)
    line = next(text for text in cost_lines.gke_plan_cost_lines(summary) if "while a rollout runs" in text)
    assert f"${during['atMinReplicas']:.2f}/hour at {cfg.gke.min_replicas}" in line
    assert f"${during['atMaxReplicas']:.2f}/hour at {cfg.gke.max_replicas}" in line
