"""The ComputeClass (run ends, recycling, fallbacks), where the pods can land, and the shared compile cache."""

from __future__ import annotations

import copy
import json

import pytest

from components import settings
from components.basis import boot
from components.gke import compile_cache, compute_class
from components.gke.deployment import configuration_key
from components.serving import serve_command
from components.serving.spec import serving_spec
from policy import gke_rules
from tests import program as harness
from tests.k8s_schema import kubernetes_objects, validation_errors
from tests.test_gke_policy import with_urns
from tests.test_gke_settings import gke_raw, problems_of, with_gke

COMPUTE_CLASS = "kubernetes:cloud.google.com/v1:ComputeClass"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SERVING = "serving-deployment"
BUCKET = "gcp:storage/bucket:Bucket"
BUCKET_GRANT = "gcp:storage/bucketIAMMember:BucketIAMMember"


def the_class(program) -> dict:
    return next(o for o in kubernetes_objects(program.registrations) if o["kind"] == "ComputeClass")


def pod_spec(program) -> dict:
    return program.named(SERVING)["inputs"]["spec"]["template"]["spec"]


# A vLLM image pinned by digest in the settings (tests/test_gke_image_digest.py's case: no resolver for it) rides
# along: it changes the image resolvers and the vllm container's image, nothing the class, its tolerations, its
# prices or the policy read, so one gke run serves both modules (the same request, tests/shared_runs.py).
PINNED_VLLM_IMAGE = "vllm/vllm-tpu@sha256:" + "c" * 64


@pytest.fixture(scope="module")
def with_fallbacks():
    config = harness.with_section(harness.gke_config(), "gke", fallback=["spot", "on-demand"], location="us-west4",
                                  nodeLocations=["us-west4-a", "us-west4-b"])
    return harness.run(harness.with_section(config, "vllm", image=PINNED_VLLM_IMAGE), stack="gke")


def test_flex_start_first_with_the_run_duration_and_a_recycling_lead_time(gke_program):
    tpu_class = the_class(gke_program)
    assert tpu_class["metadata"] == {"name": "tpu-vllm-gke-tpu-v5e-1x1"}  # no opt-in annotation: none asked
    spec = tpu_class["spec"]
    [flex] = spec["priorities"]
    assert flex["flexStart"] == {"enabled": True, "nodeRecycling": {"leadTimeSeconds": 3600}}
    assert flex["maxRunDurationSeconds"] == 86400  # tpu.maxRunDuration: 1d
    assert flex["tpu"] == {"type": "tpu-v5-lite-podslice", "topology": "1x1", "count": 1}
    assert flex["location"] == {"zones": ["us-west4-a"]} and "spot" not in flex
    assert flex["storage"] == {"bootDiskSize": 100, "bootDiskType": "pd-balanced"}
    assert spec["nodePoolAutoCreation"] == {"enabled": True} and spec["whenUnsatisfiable"] == "DoNotScaleUp"
    nodes_account = gke_program.named("gke-nodes-sa")["inputs"]["accountId"]
    assert spec["nodePoolConfig"]["serviceAccount"] == f"{nodes_account}@my-proj.iam.gserviceaccount.com"
    # The lead time covers a new node and the log's warm start, and leaves most of each run to one node.
    lead = flex["flexStart"]["nodeRecycling"]["leadTimeSeconds"]
    assert boot.WARM_BOOT_SECONDS + settings.facts.GKE_NODE_UP_ALLOWANCE_SECONDS <= lead <= 86400 / 2
    assert gke_program.output("nodeRecyclingLeadTime")["value"] == "1h"


def test_fallbacks_follow_in_order_only_when_opted_in_and_are_priced(gke_program, with_fallbacks):
    assert with_fallbacks.problems is None
    tpu_class = the_class(with_fallbacks)
    flex, spot, on_demand = tpu_class["spec"]["priorities"]
    assert "flexStart" in flex and (spot["spot"], on_demand["spot"]) == (True, False)
    assert "maxRunDurationSeconds" not in spot and "flexStart" not in on_demand
    assert all(p["location"] == {"zones": ["us-west4-a", "us-west4-b"]} for p in (flex, spot, on_demand))
    assert tpu_class["metadata"]["annotations"] == {"tpu-vllm/unbounded-billing-opt-in": "spot,on-demand"}
    assert tpu_class["spec"]["activeMigration"] == {"optimizeRulePriority": True}  # back to flex-start
    prices = with_fallbacks.output("fallbackCostPerHourUsd")["value"]
    assert list(prices) == ["spot", "on-demand"]
    assert prices["on-demand"]["perReplica"] == pytest.approx(1.20 + 11 / 730, abs=1e-4)
    tolerated = {t["key"] for t in pod_spec(with_fallbacks)["tolerations"]}
    assert {"cloud.google.com/gke-flex-start", "cloud.google.com/gke-spot"} <= tolerated
    # Without the opt-in: one priority, no spot toleration.
    assert "cloud.google.com/gke-spot" not in {t["key"] for t in pod_spec(gke_program)["tolerations"]}


def test_the_class_validates_against_its_crd_schema_and_the_validator_refuses_what_the_crd_does(with_fallbacks):
    tpu_class = the_class(with_fallbacks)
    assert validation_errors(tpu_class) == []
    for break_it in (lambda c: c["spec"]["priorities"][0]["flexStart"]["nodeRecycling"].update(leadTimeSeconds=0),
                     lambda c: c["spec"]["priorities"][0].update(maxRunDuration="86400s"),
                     lambda c: c["spec"].update(whenUnsatisfiable="Wait"),
                     lambda c: c["spec"]["priorities"][0]["storage"].update(bootDiskSize=5),
                     # The API server's name rule for every custom resource: "TPU7x" in a name is refused.
                     lambda c: c["metadata"].update(name="tpu-vllm-gke-tpu-TPU7x-2x2x1")):
        broken = copy.deepcopy(tpu_class)
        break_it(broken)
        assert validation_errors(broken), broken["spec"]


LABELS_OF_A_CLASS_NODE = {"cloud.google.com/compute-class": "tpu-vllm-gke-tpu-v5e-1x1",
                          "cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
                          "cloud.google.com/gke-tpu-topology": "1x1", "cloud.google.com/gke-nodepool": "nap-x"}


@pytest.mark.parametrize(("labels", "schedulable"), [
    (LABELS_OF_A_CLASS_NODE, True),
    # A v5e pool someone made by hand: same accelerator and topology, not the class's.
    ({**{k: v for k, v in LABELS_OF_A_CLASS_NODE.items() if k != "cloud.google.com/compute-class"},
      "cloud.google.com/gke-nodepool": "hand-made"}, False),
    # Another class's v5e nodes.
    ({**LABELS_OF_A_CLASS_NODE, "cloud.google.com/compute-class": "someone-elses"}, False),
    ({"cloud.google.com/gke-nodepool": "system"}, False),
])
def test_no_pod_can_land_on_a_node_the_class_did_not_make(gke_program, labels, schedulable):
    """The scheduler's nodeSelector rule: every key must be on the node with the same value."""
    selector = pod_spec(gke_program)["nodeSelector"]
    assert selector["cloud.google.com/compute-class"] == gke_program.output("computeClass")["value"]
    assert all(labels.get(key) == value for key, value in selector.items()) is schedulable


def test_the_namespace_quota_caps_the_chips_at_max_replicas_and_the_rollouts_surge(gke_program):
    [quota] = [o for o in kubernetes_objects(gke_program.registrations) if o["kind"] == "ResourceQuota"]
    assert quota["metadata"]["namespace"] == "tpu-vllm"
    # maxReplicas 4, plus the one new pod a rollout starts before an old one leaves: without it a rollout at
    # maxReplicas could not create its pod, and would stall (maxUnavailable 0).
    strategy = pod_owner(gke_program)["spec"]["strategy"]["rollingUpdate"]
    assert quota["spec"] == {"hard": {"requests.google.com/tpu": str(4 + strategy["maxSurge"])}} == {
        "hard": {"requests.google.com/tpu": "5"}}


def pod_owner(program) -> dict:
    return next(o for o in kubernetes_objects(program.registrations)
                if o["kind"] == "Deployment" and o["metadata"]["name"] == "vllm")


@pytest.mark.parametrize(("gke", "tpu", "key", "fix"), [
    ({"recyclingLeadTime": "10m"}, {}, "gke.recyclingLeadTime", "use at least 19m"),
    ({"recyclingLeadTime": "13h"}, {}, "gke.recyclingLeadTime", "use at most 720m"),
    ({"recyclingLeadTime": "8d"}, {}, "gke.recyclingLeadTime", "between 1s and 7d"),
    ({"fallback": ["spot", "spot"]}, {}, "gke.fallback", "each fallback once"),
    ({"fallback": ["preemptible"]}, {}, "gke.fallback", "spot"),
    ({"fallback": ["spot"], "allowUnboundedBilling": True}, {"provisioningModel": "spot"}, "gke.fallback",
     'e.g. ["on-demand"]'),
])
def test_bad_class_settings_are_refused_with_key_value_and_fix(gke, tpu, key, fix):
    raw = gke_raw()
    raw = {**raw, "gke": {**raw["gke"], **gke}, "tpu": {**raw.get("tpu", {}), **tpu}}
    problem = next(p for p in problems_of(raw) if p.startswith(f"tpu-vllm:{key}"))
    assert fix in problem, problem


def test_a_lead_time_on_spot_is_a_warning_not_an_error():
    raw = {**with_gke(allowUnboundedBilling=True, recyclingLeadTime="1h"), "tpu": {"provisioningModel": "spot"}}
    loaded = settings.load(raw, "my-proj", "gke")
    assert any("gke.recyclingLeadTime" in w and "nothing is recycled" in w for w in loaded.warnings)
    assert "flexStart" not in json.dumps(compute_class.compute_class(
        "c", compute_class.models("spot", loaded.settings.gke), loaded.settings.gke, 3600, "n@p"))


# The shared compile cache.

def test_every_replica_caches_on_the_shared_bucket_under_its_configurations_prefix(gke_program):
    pod = pod_spec(gke_program)
    vllm = next(c for c in pod["containers"] if c["name"] == "vllm")
    env = {e["name"]: e["value"] for e in vllm["env"]}
    assert env["VLLM_XLA_CACHE_PATH"] == "/var/cache/tpu-vllm/xla"
    assert {"name": "xla-cache", "mountPath": "/var/cache/tpu-vllm/xla"} in vllm["volumeMounts"]
    [volume] = [v for v in pod["volumes"] if v["name"] == "xla-cache"]
    bucket = gke_program.one(BUCKET)["inputs"]
    attributes = volume["csi"]["volumeAttributes"]
    assert volume["csi"]["driver"] == "gcsfuse.csi.storage.gke.io" and attributes["bucketName"] == bucket["name"]
    image = gke_program.output("vllmImage")["value"]
    prefix = compile_cache.cache_prefix(image, configuration_key(serving_spec(harness_settings())))
    assert attributes["mountOptions"] == f"implicit-dirs,only-dir={prefix}"
    assert gke_program.output("compileCachePath")["value"] == f"gs://{bucket['name']}/{prefix}"
    assert gke_program.named(SERVING)["inputs"]["spec"]["template"]["metadata"]["annotations"][
        "gke-gcsfuse/volumes"] == "true"
    # A regional bucket: every zone of gke.nodeLocations reaches it.
    assert bucket["location"] == "US-WEST4" and bucket["uniformBucketLevelAccess"] is True
    assert bucket["publicAccessPrevention"] == "enforced"


@pytest.mark.parametrize(("name", "written"), [
    ("xla/D/K/jit_step-0123-cache", True),
    ("xla/D/K/sub/entry", True),
    ("xla/D/KX/jit_step-0123-cache", False),  # a sibling prefix that merely starts with the same characters
    ("xla/D/OTHER/jit_step-0123-cache", False),
    ("xla/D/K", False),
    ("huggingface/model.safetensors", False),
])
def test_the_write_condition_admits_its_own_prefix_and_nothing_beside_it(name, written):
    """Cloud Storage evaluates resource.name as projects/_/buckets/B/objects/NAME; startsWith is a plain prefix."""
    [clause] = compile_cache.write_condition("B", ["xla/D/K"])["expression"].split(" || ")
    allowed = clause.removeprefix('resource.name.startsWith("').removesuffix('")')
    assert f"projects/_/buckets/B/objects/{name}".startswith(allowed) is written


def test_old_compile_cache_entries_are_deleted_after_the_retention_and_the_weights_never(gke_program):
    [rule] = gke_program.one(BUCKET)["inputs"]["lifecycleRules"]
    assert rule["action"] == {"type": "Delete"}
    assert rule["condition"]["age"] == 30 and rule["condition"]["matchesPrefixes"] == ["xla/"]


def harness_settings(config: dict | None = None) -> settings.Settings:
    raw = {key.split(":", 1)[1]: (json.loads(value) if settings.TOP_LEVEL_KEYS.get(key.split(":", 1)[1]) else value)
           for key, value in (config or harness.gke_config()).items() if key.startswith("tpu-vllm:")}
    return settings.load(raw, "my-proj", "gke").settings


@pytest.mark.parametrize(("section", "values", "same_prefix"), [
    # Outside the compile list: where vLLM listens and how the API server reads the model's text.
    ("vllm", {"serverPort": 8002}, True),
    ("vllm", {"allowedMediaDomains": ["upload.wikimedia.org"]}, True),
    ("vllm", {"reasoningParser": None}, True),
    ("tpuInference", {"numPrecompileWorkers": 8}, True),
    # Inside it: what the runner compiles.
    ("vllm", {"maxModelLen": 16384}, False),
    ("vllm", {"maxNumBatchedTokens": 8192}, False),
    ("vllm", {"limitMmPerPrompt": {"image": 2, "audio": 1}}, False),
    ("tpuInference", {"bucketPaddingGap": 128}, False),
])
def test_only_a_flag_that_changes_compiled_programs_moves_the_prefix(section, values, same_prefix):
    base = harness_settings()
    changed = harness_settings(harness.with_section(harness.gke_config(), section, **values))
    assert serve_command.vllm_serve_args(base) != serve_command.vllm_serve_args(changed) or \
        serve_command.backend_environment(base) != serve_command.backend_environment(changed)
    assert (configuration_key(serving_spec(base)) == configuration_key(serving_spec(changed))) is same_prefix


def test_every_flag_and_variable_the_stack_renders_is_placed_in_or_out_of_the_compile_key():
    """A flag in neither list counts as compiled (a new prefix); placing it is a decision, with its reason."""
    config = harness.with_section(harness.gke_config(), "tpuInference", attnBucketizedNumReqs=True,
                                  sliceRopeCache=True, numPrecompileWorkers=8, bucketPaddingGap=128,
                                  xlaCheckRecompilation=True)
    config = harness.with_section(config, "vllm", allowedMediaDomains=["upload.wikimedia.org"])
    cfg = harness_settings(config)
    flags = {flag for flag, _ in compile_cache.flag_groups(serve_command.vllm_serve_args(cfg))}
    assert flags <= set(compile_cache.COMPILED_FLAGS) | set(compile_cache.SERVING_ONLY_FLAGS)
    variables = set(serve_command.backend_environment(cfg))
    assert variables == set(compile_cache.COMPILED_VARIABLES) | set(compile_cache.SERVING_ONLY_VARIABLES)
    # An unplaced flag is kept in the key.
    assert compile_cache.flags_key(["vllm", "serve", "m", "--new-flag", "1"], {}) != compile_cache.flags_key(
        ["vllm", "serve", "m", "--new-flag", "2"], {})


def test_a_changed_serve_flag_or_image_never_reads_another_configurations_entries():
    base = harness_settings()
    image = "vllm/vllm-tpu@sha256:" + "1" * 64
    flag = harness_settings(harness.with_section(harness.gke_config(), "vllm", maxModelLen=16384))
    base_key, flag_key = configuration_key(serving_spec(base)), configuration_key(serving_spec(flag))
    prefixes = {compile_cache.cache_prefix(image, base_key), compile_cache.cache_prefix(image, flag_key),
                compile_cache.cache_prefix("vllm/vllm-tpu@sha256:" + "2" * 64, base_key)}
    assert len(prefixes) == 3
    # The mount shows one prefix alone: no prefix is inside another, so no configuration sees another's files.
    assert not any(a != b and b.startswith(a + "/") for a in prefixes for b in prefixes)
    assert compile_cache.cache_prefix(image, base_key) == f"xla/{'1' * 64}/{base_key}"


def test_the_workload_reads_the_bucket_and_creates_objects_only_under_its_own_prefix(gke_program):
    grants = {g["inputs"]["role"]: g["inputs"] for g in gke_program.of_type(BUCKET_GRANT)}
    workload_account = gke_program.named("workload-sa")["inputs"]["accountId"]
    member = f"serviceAccount:{workload_account}@my-proj.iam.gserviceaccount.com"
    assert set(grants) == {"roles/storage.objectViewer", "roles/storage.objectCreator"}
    assert all(grant["member"] == member for grant in grants.values())
    assert "condition" not in grants["roles/storage.objectViewer"]  # a list is checked against the bucket
    bucket = gke_program.one(BUCKET)["inputs"]["name"]
    prefix = gke_program.output("compileCachePath")["value"].removeprefix(f"gs://{bucket}/")
    expression = grants["roles/storage.objectCreator"]["condition"]["expression"]
    assert expression == f'resource.name.startsWith("projects/_/buckets/{bucket}/objects/{prefix}/")'
    storage_roles = [r for r in gke_program.registrations if "storage" in json.dumps(r["inputs"].get("role", ""))]
    assert len(storage_roles) == 2 and all("compile-cache" in g["dependencies"] for g in storage_roles)
    # The pods wait for the bucket and the grant (the mount fails without them).
    assert "compile-cache" in gke_program.named(SERVING)["dependencies"]


def test_the_policy_passes_the_stacks_class_and_refuses_each_violation(with_fallbacks):
    triples = with_urns(with_fallbacks.registrations)
    (props, urn), = [(p, u) for t, p, u in triples if t == COMPUTE_CLASS]
    for rule in (gke_rules.gke_tpu_pool_run_ends, gke_rules.gke_tpu_chips_capped):
        assert rule(COMPUTE_CLASS, props, urn=urn) == []
    no_run = copy.deepcopy(props)
    del no_run["spec"]["priorities"][0]["maxRunDurationSeconds"]
    [message] = gke_rules.gke_tpu_pool_run_ends(COMPUTE_CLASS, no_run, urn=urn)
    assert "priority 1 (flex-start TPU) has no maxRunDurationSeconds" in message
    too_long = copy.deepcopy(props)
    too_long["spec"]["priorities"][0]["maxRunDurationSeconds"] = 691200
    assert "over 7 days" in gke_rules.gke_tpu_pool_run_ends(COMPUTE_CLASS, too_long, urn=urn)[0]
    big = copy.deepcopy(props)
    big["spec"]["priorities"][1]["tpu"]["count"] = 16
    [message] = gke_rules.gke_tpu_chips_capped(COMPUTE_CLASS, big, urn=urn)
    assert "priority 2 makes nodes of 16 chips, over the cap of 8" in message
    # A fallback without its opt-in: the annotation missing, naming another model, or on a class the stack's
    # Deployment did not make.
    unannotated = copy.deepcopy(props)
    unannotated["metadata"]["annotations"] = {"tpu-vllm/unbounded-billing-opt-in": "spot"}
    [message] = gke_rules.gke_tpu_pool_run_ends(COMPUTE_CLASS, unannotated, urn=urn)
    assert "priority 3 (on-demand TPU) has no run duration" in message and "gke.fallback" in message
    for foreign in ("", urn.replace("tpu-vllm:gke:Deployment$", "tpu-vllm:gke:Exposure$")):
        assert len(gke_rules.gke_tpu_pool_run_ends(COMPUTE_CLASS, props, urn=foreign)) == 2
    assert gke_rules.gke_tpu_pool_run_ends(COMPUTE_CLASS, props, {"honorStackOptIns": False}, urn=urn)
    assert gke_rules.gke_tpu_pool_run_ends(COMPUTE_CLASS, props, {"allowUnboundedBilling": True}) == []
    # A spot priority that ends its nodes needs no opt-in.
    ending = copy.deepcopy(props)
    ending["metadata"].pop("annotations")
    for rule in ending["spec"]["priorities"][1:]:
        rule["maxRunDurationSeconds"] = 86400
    assert gke_rules.gke_tpu_pool_run_ends(COMPUTE_CLASS, ending) == []


@pytest.mark.parametrize(("hard", "over"), [({"requests.google.com/tpu": "4"}, False),
                                            ({"requests.google.com/tpu": "9"}, True),
                                            ({"limits.google.com/tpu": "2k"}, True),
                                            ({"requests.google.com/tpu": "lots"}, True),
                                            ({"requests.cpu": "900"}, False)])
def test_a_namespace_quota_past_the_chip_cap_is_reported(hard, over):
    quota = {"metadata": {"name": "q", "namespace": "x"}, "spec": {"hard": hard}}
    assert bool(gke_rules.gke_tpu_chips_capped(gke_rules.RESOURCE_QUOTA_TYPE, quota)) is over


def test_the_pack_entry_point_reads_the_class_and_the_quota(with_fallbacks):
    from tests.test_gke_policy import entry_points, hand_made

    triples = with_urns(with_fallbacks.registrations)
    (props, urn), = [(p, u) for t, p, u in triples if t == COMPUTE_CLASS]
    copied = copy.deepcopy(props)  # the stack's opt-in annotation, on a class the stack did not make
    no_run = copy.deepcopy(props)
    del no_run["spec"]["priorities"][0]["maxRunDurationSeconds"]
    quota = {"metadata": {"name": "q", "namespace": "x"}, "spec": {"hard": {"requests.google.com/tpu": "12"}}}
    reports = entry_points({
        "stack class": [(COMPUTE_CLASS, props, urn)],
        "copied opt-in": [hand_made(COMPUTE_CLASS, copied)],
        "no run duration": [(COMPUTE_CLASS, no_run, urn)],
        "quota": [hand_made(gke_rules.RESOURCE_QUOTA_TYPE, quota)],
    })
    assert reports["stack class"]["gke-tpu-pool-run-ends"] == [] == reports["stack class"]["gke-tpu-chips-capped"]
    assert len(reports["copied opt-in"]["gke-tpu-pool-run-ends"]) == 2  # spot and on-demand, no run end
    assert "no maxRunDurationSeconds" in reports["no run duration"]["gke-tpu-pool-run-ends"][0]
    assert "12 chips" in reports["quota"]["gke-tpu-chips-capped"][0]


def test_a_tpu7x_class_is_named_in_lowercase_and_boots_hyperdisk_balanced():
    from components import catalog
    shape = catalog.shape("tpu7x-standard-4t")
    name = compute_class.class_name("tpu-vllm-tpu7xgke", shape)
    assert name == "tpu-vllm-tpu7xgke-tpu-tpu7x-2x2x1"
    loaded = settings.load(with_tpu7x(gke_raw()), project="my-proj", stack="gke").settings
    built = compute_class.compute_class(name, ["flex-start"], loaded.gke, loaded.tpu.run_seconds, "n@p.iam", shape)
    assert validation_errors(built) == []
    assert built["spec"]["priorities"][0]["storage"]["bootDiskType"] == "hyperdisk-balanced"
    # v6e boots Hyperdisk too; v5e keeps GKE's pd-balanced.
    assert compute_class.priority("flex-start", loaded.gke, 3600, catalog.shape("v6e-1"))["storage"][
        "bootDiskType"] == "hyperdisk-balanced"
    assert compute_class.priority("flex-start", loaded.gke, 3600, catalog.shape("v5litepod-1"))["storage"][
        "bootDiskType"] == "pd-balanced"


def test_every_gke_node_boots_a_disk_type_its_generation_attaches():
    from components import catalog
    for shape in catalog.all_shapes():
        generation = shape.generation
        assert generation.gke_boot_disk_type in generation.data_disk_types, shape.accelerator_type


def with_tpu7x(raw: dict) -> dict:
    raw["tpu"] = {**raw.get("tpu", {}), "acceleratorType": "tpu7x-standard-4t", "zone": "us-central1-c"}
    raw["gke"] = {**{key: value for key, value in raw["gke"].items() if key != "machineType"},
                  "location": "us-central1-c", "nodeLocations": ["us-central1-c"], "maxReplicas": 1}
    raw["vllm"] = {key: value for key, value in raw["vllm"].items() if key != "tensorParallelSize"}
    return raw
