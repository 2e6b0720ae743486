"""Issue 43's settings half and issue 46's zone policy: one shape vocabulary with the node API by generation (the
Cloud TPU API's queued resource or a Compute Engine instance), the trap spellings refused with the right one, TPU7x
in the catalog (two JAX devices per chip, no price read), flex-start's 7 days on Compute Engine, a zone nobody wrote
down warning instead of refusing, and a key the gke platform never reads not judged there."""

from __future__ import annotations

import pytest

from components import catalog, sizing
from components import settings as s
from components.economics import cost_lines, costs
from tests.test_fit_deploy import load, one_problem
from tests.test_gke_settings import gke_raw

# A boot image of the user's own (tpu.runtimeVersion); unset, the catalog's image family for the generation.
IMAGE = "projects/example-images/global/images/family/example-tpu-image"
TPU7X = {"acceleratorType": "tpu7x-standard-4t", "zone": "us-central1-c"}


@pytest.mark.parametrize(("machine", "name"), [("ct6e-standard-1t", "v6e-1"), ("ct6e-standard-4t", "v6e-4"),
                                               ("ct6e-standard-8t", "v6e-8")])
def test_a_v6e_machine_type_is_the_same_shape_as_its_accelerator_type(machine, name):
    assert catalog.shape(machine) is catalog.shape(name)
    assert catalog.shape(name).machine_type == machine
    loaded = load(tpu={"acceleratorType": machine, "zone": "us-east5-a"}).settings
    assert loaded.tpu.shape.accelerator_type == name and loaded.tpu.machine_type == machine


def test_each_generation_has_its_node_apis_and_a_default():
    assert catalog.shape("v5litepod-1").node_apis == ("queued-resource",)
    assert catalog.shape("v6e-1").node_apis == ("queued-resource", "compute")
    assert catalog.shape("tpu7x-standard-4t").node_apis == ("compute",)
    assert load().settings.tpu.node_api == "queued-resource"
    assert load(tpu={"acceleratorType": "v6e-1", "zone": "us-east5-a"}).settings.tpu.node_api == "queued-resource"
    assert load(tpu=TPU7X).settings.tpu.node_api == "compute"
    # v5e has no Compute Engine machine type: GKE's ct5lp machines are not among Compute Engine's TPU machines.
    assert catalog.shape("v5litepod-1").machine_type is None


@pytest.mark.parametrize("api", ["queued-resource", "compute"])
def test_a_v6e_stack_takes_either_api(api):
    tpu = {"acceleratorType": "v6e-1", "zone": "us-east5-a", "api": api}
    if api == "compute":
        tpu["runtimeVersion"] = IMAGE
    loaded = load(tpu=tpu).settings
    assert loaded.tpu.node_api == api
    if api == "compute":
        assert loaded.tpu.boot_image == IMAGE
    else:
        assert loaded.tpu.runtime == "v2-alpha-tpuv6e"


@pytest.mark.parametrize(("spelling", "right"), [("tpu7x-8", "tpu7x-standard-4t"), ("tpu7x-2", "tpu7x-standard-1t"),
                                                 ("v7x-8", "tpu7x-standard-4t")])
def test_a_tensor_core_count_is_refused_with_the_machine_type(spelling, right):
    message = one_problem(tpu={"acceleratorType": spelling, "zone": "us-central1-c"})
    assert f'tpu-vllm:tpu.acceleratorType = "{spelling}"' in message
    assert "counts TensorCores" in message and f"set it to {right}" in message


@pytest.mark.parametrize(("machine", "right"),
                         [("ct5lp-hightpu-1t", "v5litepod-1"), ("ct5lp-hightpu-8t", "v5litepod-8")])
def test_a_v5e_machine_type_is_refused_with_its_accelerator_type(machine, right):
    message = one_problem(tpu={"acceleratorType": machine})
    assert "Compute Engine does not list v5e" in message and f"set it to {right}" in message


def test_v5e_on_compute_is_refused_naming_the_queued_resource():
    message = one_problem(tpu={"api": "compute"})
    assert 'tpu-vllm:tpu.api = "compute"' in message and "Compute Engine does not list v5e" in message
    assert "remove the key" in message and "ct6e-standard-1t" in message


def test_tpu7x_on_the_queued_resource_api_is_refused_naming_compute():
    message = one_problem(tpu={"acceleratorType": "tpu7x-standard-4t", "zone": "us-central1-c",
                               "api": "queued-resource"})
    assert "The Cloud TPU API is not supported on TPU7x" in message and "set tpu.api to compute" in message


def test_tpu7x_in_the_default_zone_is_refused_with_the_zone_google_lists():
    message = one_problem(tpu={"acceleratorType": "tpu7x-standard-4t", "runtimeVersion": IMAGE})
    assert 'tpu-vllm:tpu.zone = "us-west4-a"' in message and "tpu.zone is unset" in message
    assert "set it to us-central1-c" in message


def test_every_generation_compute_engine_makes_boots_a_catalogued_image_family_with_its_source():
    for generation in catalog.shapes.GENERATIONS.values():
        if catalog.COMPUTE not in generation.node_apis:
            assert generation.compute_image is None
            continue
        assert generation.compute_image.startswith("projects/ubuntu-os-accelerator-images/global/images/family/")
        assert generation.compute_image_source is not None
    # v6e's image was booted (the measured migration); TPU7x's is read from the TPU OS images page, not run.
    assert catalog.shape("v6e-1").generation.compute_image_booted
    assert not catalog.shape("tpu7x-standard-4t").generation.compute_image_booted


def test_a_compute_stack_boots_the_generations_image_family_unless_the_user_names_one():
    assert load(tpu=TPU7X).settings.tpu.boot_image.endswith("/family/ubuntu-accel-2404-amd64-tpu-tpu7x")
    v6e = {"acceleratorType": "v6e-1", "zone": "us-east5-a", "api": "compute"}
    assert load(tpu=v6e).settings.tpu.boot_image.endswith("/family/ubuntu-accel-2204-amd64-tpu-v5e-v5p-v6e")
    assert load(tpu={**v6e, "runtimeVersion": IMAGE}).settings.tpu.boot_image == IMAGE


def test_flex_start_on_compute_runs_up_to_seven_days_and_eight_are_refused():
    assert load(tpu={**TPU7X, "maxRunDuration": "7d"}).settings.tpu.run_seconds == 7 * 86400
    message = one_problem(tpu={**TPU7X, "maxRunDuration": "8d"})
    assert 'tpu-vllm:tpu.maxRunDuration = "8d"' in message
    assert "7 days" in message and "Flex-start VMs" in message and "set it to 7d or less" in message
    # The queued-resource path keeps its own limit, from its own page.
    message = one_problem(tpu={"maxRunDuration": "8d"})
    assert "7 days" in message and "request-using-flex-start" in message


@pytest.mark.parametrize("model", ["flex-start", "spot", "on-demand"])
def test_each_provisioning_model_is_valid_on_compute(model):
    tpu = {"acceleratorType": "v6e-1", "zone": "us-east5-a", "api": "compute", "runtimeVersion": IMAGE,
           "provisioningModel": model}
    loaded = load(tpu=tpu)
    assert loaded.settings.tpu.provisioning_model == model
    if model != "flex-start":
        # Billed as on the queued-resource path: nothing stops it, and the warning prices the weekend.
        assert any("forgotten weekend" in w for w in loaded.warnings)


def test_a_zone_the_catalog_does_not_list_warns_and_a_zone_seen_refusing_errors():
    loaded = load(tpu={"acceleratorType": "v6e-1", "zone": "us-east9-z"})
    assert any('tpu.zone = "us-east9-z"' in w and "the plan goes on" in w for w in loaded.warnings)
    # The log's refusal: 'FLEX_START provisioning model is not supported for accelerator type "v5litepod-1"'.
    message = one_problem(tpu={"zone": "europe-west4-b"})
    assert "FLEX_START provisioning model is not supported" in message


def test_us_south1_ai1b_on_v6e_1_plans_without_a_zone_warning():
    loaded = load(tpu={"acceleratorType": "v6e-1", "zone": "us-south1-ai1b"})
    assert not any("not in the zones" in w for w in loaded.warnings)


def test_on_gke_tpu_zone_is_not_judged():
    # Issue 46: a gke stack on v6e-1 in us-east5-a with the vm's default tpu.zone, which gke never reads.
    raw = gke_raw()
    raw["tpu"] = {**raw.get("tpu", {}), "acceleratorType": "v6e-1", "zone": "us-west4-a"}
    raw["gke"] = {key: value for key, value in raw["gke"].items() if key != "machineType"}
    raw["gke"].update(location="us-east5-a", nodeLocations=["us-east5-a"])
    loaded = s.load(raw, project="my-proj", stack="gke")
    assert not any("tpu.zone" in w for w in loaded.warnings)


def test_tpu7x_counts_two_devices_per_chip_and_the_planner_uses_devices():
    shape = catalog.shape("tpu7x-standard-4t")
    assert (shape.chips, shape.devices, shape.hbm_bytes_per_chip) == (4, 8, 192 * 1024**3)
    assert shape.hbm_bytes_per_device == 96 * 1024**3
    model = catalog.catalog_model("google/gemma-4-E2B-it")
    for tp, dp in sizing.layouts.layout_sizes(model, shape):
        assert tp * dp == 8
    planned = sizing.fit(model, shape, 32768)
    assert planned.tensor_parallel_size * planned.data_parallel_size == 8
    # One device's HBM, never a whole chip's, for a tensor-parallel size of 1.
    assert planned.tensor_parallel_size != 1 or planned.figures["hbm"].value == 96 * 1024**3


def test_tpu7x_has_no_price_and_no_figure_stands_in_for_it():
    loaded = load(tpu=TPU7X).settings
    assert loaded.usd_per_chip_hour() is None and loaded.tpu_usd_per_hour() is None
    budget = costs.plan_budget(loaded, 2, None)
    assert budget["cost_per_hour_usd"] is None and budget["max_spend_usd"] is None
    assert budget["usd_per_million_output_tokens_at_1496_5_tok_s"] is None
    assert budget["price_not_found"].startswith("price not found (TPU7x flex-start in us-central1")
    lines = "\n".join(cost_lines.vm_plan_cost_lines(budget))
    assert "price not found" in lines and "$0.60" not in lines and "$1.35" not in lines
    fitted = sizing.fit(catalog.catalog_model("google/gemma-4-E2B-it"), catalog.shape("tpu7x-standard-1t"), 32768)
    assert fitted.usd_per_hour == {} and any(note.startswith("price not found") for note in fitted.notes)


def _tpu7x_gke(**gke):
    raw = gke_raw()
    raw["tpu"] = {**raw.get("tpu", {}), "acceleratorType": "tpu7x-standard-4t", "zone": "us-central1-c"}
    raw["gke"] = {**{key: value for key, value in raw["gke"].items() if key != "machineType"},
                  "location": "us-central1-c", "nodeLocations": ["us-central1-c"], "maxReplicas": 1, **gke}
    # The layout is the plan's: the gke stack's tensorParallelSize 1 would ask one TensorCore of two per rank.
    raw["vllm"] = {key: value for key, value in raw["vllm"].items() if key != "tensorParallelSize"}
    return raw


def test_tpu7x_on_gke_is_a_tpu7x_standard_4t_node_per_replica():
    from components.gke import compute_class
    loaded = s.load(_tpu7x_gke(), project="my-proj", stack="gke").settings
    shape = loaded.tpu.shape
    assert compute_class.tpu_block(shape) == {"type": "tpu7x", "topology": "2x2x1", "count": 4}
    assert shape.gke_machine_type == "tpu7x-standard-4t"


@pytest.mark.parametrize(("pinned", "says"), [("1.33.5-gke.1080000", "older"), ("1.34.0-gke.2200999", "older"),
                                              ("1.34", "may be older")])
def test_a_pinned_version_before_gkes_tpu7x_floor_is_refused(pinned, says):
    with pytest.raises(s.SettingsError) as caught:
        s.load(_tpu7x_gke(minMasterVersion=pinned), project="my-proj", stack="gke")
    problem = next(p for p in caught.value.problems if "gke.minMasterVersion" in p)
    assert f'tpu-vllm:gke.minMasterVersion = "{pinned}"' in problem and "1.34.0-gke.2201000" in problem
    assert says in problem and "pin 1.35 or later" in problem


@pytest.mark.parametrize("pinned", ["1.34.0-gke.2201000", "1.35"])
def test_a_pinned_version_at_or_past_the_tpu7x_floor_plans(pinned):
    loaded = s.load(_tpu7x_gke(minMasterVersion=pinned), project="my-proj", stack="gke").settings
    assert loaded.gke.min_master_version == pinned


def test_the_channel_default_and_a_reused_cluster_are_held_to_the_tpu7x_floor():
    from types import SimpleNamespace

    from components.gke import cluster
    from components.settings.facts import gke_version_floor
    floor = gke_version_floor(catalog.shape("tpu7x-standard-4t").generation)
    assert floor.version == "1.34.0-gke.2201000"
    problem = cluster.check_channel_version("REGULAR", "1.34.0-gke.1626000", floor=floor)
    assert "older than 1.34.0-gke.2201000" in problem and "TPU7x" in problem
    assert cluster.check_channel_version("REGULAR", "1.34.0-gke.1626000") is None  # v5e's floor is earlier
    assert cluster.check_channel_version("REGULAR", "1.34.1-gke.100", floor=floor) is None
    reused = SimpleNamespace(
        name="c", location="us-central1-c", enable_autopilot=False, master_version="1.34.0-gke.1626000",
        workload_identity_configs=[SimpleNamespace(workload_pool="p.svc.id.goog")],
        secret_manager_configs=[SimpleNamespace(enabled=True)],
        monitoring_configs=[SimpleNamespace(managed_prometheuses=[SimpleNamespace(enabled=True)])],
        datapath_provider="ADVANCED_DATAPATH", network_policies=[],
        addons_configs=[SimpleNamespace(gcs_fuse_csi_driver_configs=[SimpleNamespace(enabled=True)])])
    assert cluster.existing_cluster_problems(reused, "p") == []
    problems = cluster.existing_cluster_problems(reused, "p", floor=floor)
    assert any("--cluster-version 1.34.0-gke.2201000" in problem for problem in problems)


def test_a_one_chip_tpu7x_is_refused_on_gke_naming_the_pool_that_was_read():
    raw = _tpu7x_gke()
    raw["tpu"]["acceleratorType"] = "tpu7x-standard-1t"
    with pytest.raises(s.SettingsError) as caught:
        s.load(raw, project="my-proj", stack="gke")
    assert any('tpu-vllm:tpu.acceleratorType = "tpu7x-standard-1t"' in p and "tpu7x-standard-4t" in p
               for p in caught.value.problems)


def test_a_cloud_tpu_runtime_version_is_not_a_compute_engine_boot_image():
    message = one_problem(tpu={"acceleratorType": "v6e-1", "zone": "us-east5-a", "api": "compute",
                               "runtimeVersion": "v2-alpha-tpuv6e"})
    assert 'tpu-vllm:tpu.runtimeVersion = "v2-alpha-tpuv6e"' in message and "Compute Engine image" in message


def test_tpu_api_on_gke_warns_that_gke_never_reads_it():
    raw = gke_raw()
    raw["tpu"] = {**raw.get("tpu", {}), "api": "queued-resource"}
    loaded = s.load(raw, project="my-proj", stack="gke")
    assert any('tpu-vllm:tpu.api = "queued-resource"' in w and "read only by the vm platform" in w
               for w in loaded.warnings)


@pytest.mark.parametrize("tpu", [TPU7X, {"acceleratorType": "v6e-1", "zone": "us-east5-a", "api": "compute",
                                         "runtimeVersion": IMAGE, "provisioningModel": "spot"}])
def test_a_compute_stack_plans_without_a_warning_about_its_create(tpu):
    # The stack's own provider waits through PENDING and sends the queue (issue 43's compute reader found
    # pulumi-gcp's create did neither; every compute stack warned so until the node became the stack's own).
    assert not any("tpu.api" in w for w in load(tpu=tpu).warnings)


def test_a_flex_start_queue_over_two_hours_on_compute_is_refused_naming_the_limit():
    message = one_problem(tpu={**TPU7X, "queueTimeout": "3h"})
    assert 'tpu-vllm:tpu.queueTimeout = "3h"' in message and "up to two hours" in message
    assert "set it to 2h or less" in message
    # Two hours is Google's own limit: accepted.
    assert load(tpu={**TPU7X, "queueTimeout": "2h"}).settings.tpu.queue_seconds == 2 * 3600


def test_a_queued_resource_stack_has_no_compute_create_warning():
    assert not any("tpu.api" in w for w in load(tpu={"acceleratorType": "v6e-1", "zone": "us-east5-a"}).warnings)


def test_flex_start_on_compute_under_ten_minutes_is_refused_naming_the_limit():
    # Compute Engine: the run "must be between 10 minutes and seven days" (About Flex-start VMs).
    message = one_problem(tpu={**TPU7X, "maxRunDuration": "5m"})
    assert 'tpu-vllm:tpu.maxRunDuration = "5m"' in message
    assert "between 10 minutes and 7 days" in message and "set it to 10m or more" in message


@pytest.mark.parametrize(("timeout", "refused"), [("60s", True), ("89s", True), ("90s", False), ("2h", False)])
def test_a_flex_start_wait_under_ninety_seconds_on_compute_is_refused_naming_googles_range(timeout, refused):
    tpu = {**TPU7X, "queueTimeout": timeout}
    if not refused:
        assert load(tpu=tpu).settings.tpu.queue_timeout == timeout
        return
    message = one_problem(tpu=tpu)
    assert f'tpu-vllm:tpu.queueTimeout = "{timeout}"' in message and "90 seconds" in message
    assert "set it to 90s or more" in message


@pytest.mark.parametrize(("model", "warned"), [("flex-start", True), ("spot", True), ("on-demand", False)])
def test_tpu7x_spot_and_flex_start_warn_of_googles_allowlist(model, warned):
    warnings = load(tpu={**TPU7X, "provisioningModel": model}).warnings
    said = [w for w in warnings if "allowlist" in w]
    assert bool(said) == warned
    if warned:
        assert f'tpu-vllm:tpu.provisioningModel = "{model}"' in said[0] and "account team" in said[0]
