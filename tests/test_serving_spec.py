"""The serving spec: one frozen value per settings, holding what the server is; both wings render it."""

from __future__ import annotations

import ast
import dataclasses
import re
import subprocess
from pathlib import Path

import pytest

from components import settings
from components.serving import front, serve_command, spec
from components.serving.spec import ServingSpec, serving_spec

SSH = {"access": {"sshSourceRanges": ["198.51.100.7/32"]}}


def load(raw: dict | None = None, stack: str = "dev"):
    return settings.load({**SSH, **(raw or {})}, "my-proj", stack).settings


def test_the_spec_is_frozen_and_every_field_hashable():
    built = serving_spec(load())
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.listen_port = 9000  # type: ignore[misc]
    hash(built)  # no list or dict anywhere inside
    for field in dataclasses.fields(ServingSpec):
        value = getattr(built, field.name)
        assert not isinstance(value, (list, dict, set)), field.name


def test_equal_settings_give_equal_specs_and_a_changed_flag_a_different_one():
    assert serving_spec(load()) == serving_spec(load())
    assert serving_spec(load()) != serving_spec(load({"vllm": {"maxModelLen": 16384}}))
    assert serving_spec(load()) != serving_spec(load({"vllm": {"serverPort": 8002}}))


def test_building_it_twice_from_the_same_settings_reads_nothing_else():
    """Pure: the same settings object gives the same value, whatever happened in between."""
    cfg = load()
    first = serving_spec(cfg)
    serving_spec(load({"front": {"listenPort": 8080}}))
    assert serving_spec(cfg) == first


def test_each_field_holds_what_the_settings_say():
    cfg = load({"front": {"listenPort": 8080}, "vllm": {"serverPort": 8005}})
    built = serving_spec(cfg)
    assert built.model == cfg.vllm.model and built.vllm_image == cfg.vllm.image
    assert built.front_image == cfg.front.image
    assert (built.host, built.listen_port, built.upstream_port) == ("127.0.0.1", 8080, 8005)
    # vLLM listens where the front forwards, on loopback only.
    assert built.serve_args[-4:] == ("--host", "127.0.0.1", "--port", "8005")
    assert list(built.serve_args) == serve_command.vllm_serve_args(cfg)
    assert "listen 8080;" in built.front_config and "server 127.0.0.1:8005;" in built.front_config
    assert built.front_config == front.nginx_config(listen_port=8080, upstream_port=8005)
    assert built.vllm_entry == ("/bin/sh", "-c", serve_command.KEY_ENTRY_SCRIPT, serve_command.KEY_ENTRY_NAME)
    assert built.vllm_command == built.vllm_entry + built.serve_args
    assert built.front_entry == tuple(front.entry_command())
    assert "http://127.0.0.1:8005/health" in built.health_command[-1]
    assert built.front_layout == front.FrontLayout()
    assert built.health_timeout_seconds == cfg.vllm.health_timeout_seconds


def test_the_secret_files_are_paths_each_in_its_own_directory():
    built = serving_spec(load())
    assert built.api_key_file == front.KEY_FILE
    assert built.hf_token_file == "/run/secrets/tpu-vllm-hf/hf-token"
    # A CSI volume fills its directory: the two files cannot share one on GKE.
    assert built.api_key_file.rsplit("/", 1)[0] != built.hf_token_file.rsplit("/", 1)[0]
    # The entry command reads the key from exactly the spec's file.
    assert f"cat {built.api_key_file}" in built.vllm_entry[2]


def test_the_environment_names_the_token_file_the_cache_and_hf_home_and_no_secret():
    built = serving_spec(load({"tpuInference": {"numPrecompileWorkers": 8}}))
    env = dict(built.environment)
    assert env["HF_TOKEN_PATH"] == built.hf_token_file
    assert env["VLLM_XLA_CACHE_PATH"] == built.compile_cache_path == spec.COMPILE_CACHE_PATH
    assert env["HF_HOME"] == "/dev/shm"
    assert env["NUM_PRECOMPILE_WORKERS"] == "8"
    assert not {"HF_TOKEN", "VLLM_API_KEY"} & env.keys()


def test_weights_on_disk_move_hf_home_off_shm():
    assert serving_spec(load({"vllm": {"weightsOnDisk": True}})).hf_home == spec.WEIGHTS_PATH
    assert serving_spec(load()).hf_home == "/dev/shm"


def test_shm_holds_the_checkpoint():
    """The 9.54 GiB checkpoint (build log) downloads into /dev/shm."""
    assert serving_spec(load()).shm_bytes == 16 * 1024**3 > 9.54 * 1024**3


def test_the_spec_is_the_same_for_both_platforms():
    """Platform-free: the gke stack's server equals the vm stack's for the same serving settings."""
    vm = serving_spec(load())
    gke = serving_spec(settings.load({"platform": "gke"}, "my-proj", "gke").settings)
    assert gke == vm


# ---- Both wings render one spec into the same server ----

DOCKER_VALUED = {"--name", "-v", "-e", "--shm-size", "--entrypoint", "--ulimit", "--tmpfs", "--user", "--cap-drop",
                 "--security-opt"}
BINARY_UNITS = {"g": 1024**3, "m": 1024**2, "k": 1024, "": 1}
QUANTITY_UNITS = {"Gi": 1024**3, "Mi": 1024**2, "Ki": 1024, "": 1}


def parsed_docker_run(args: list[str]) -> dict:
    """`docker run` options as the CLI reads them: mounts by their target, env by name, then image and command."""
    run: dict = {"mounts": {}, "env": {}, "flags": []}
    index = 0
    while args[index].startswith("-"):
        option = args[index]
        if option not in DOCKER_VALUED:
            run["flags"].append(option)
            index += 1
            continue
        value = args[index + 1]
        if option == "-v":
            source, target, *_ = value.split(":")
            run["mounts"][target] = source
        elif option == "-e":
            name, _, setting = value.partition("=")
            run["env"][name] = setting
        else:
            run[option] = value
        index += 2
    run["image"], run["command"] = args[index], [run.get("--entrypoint"), *args[index + 1:]]
    return run


def docker_bytes(size: str) -> int:
    number = size.rstrip("bgmk")
    return int(number) * BINARY_UNITS[size[len(number):].rstrip("b")]


def quantity_bytes(quantity: str) -> int:
    number = quantity.rstrip("GMKi")
    return int(number) * QUANTITY_UNITS[quantity[len(number):]]


def both_wings(raw: dict):
    from components.gke import compute_class, workload
    from components.gke.deployment import serving_pod
    from components.vm import container, serving_step
    from components.vm.container import VmServing

    cfg = settings.load({"platform": "gke", **raw}, "my-proj", "gke").settings
    built = serving_spec(cfg)
    vm = VmServing.of(built, vllm=cfg.vllm, cache=cfg.cache)
    pod = serving_pod(built, resource_prefix=cfg.resource_prefix, gke=cfg.gke,
                      models=compute_class.models(cfg.tpu.provisioning_model, cfg.gke))
    template = workload.pod_template(pod, service_account="vllm", image=built.vllm_image, cache_bucket="b",
                                     cache_prefix="xla/k", hash_of_config="x")
    containers = {c["name"]: c for c in template["spec"]["containers"]}
    volumes = {v["name"]: v for v in template["spec"]["volumes"]}
    return built, vm, containers, volumes, workload, container, serving_step


@pytest.mark.parametrize("raw", [{}, {"vllm": {"weightsOnDisk": True, "serverPort": 8009},
                                      "front": {"listenPort": 8080},
                                      "tpuInference": {"numPrecompileWorkers": 8}}], ids=["default", "changed"])
def test_both_wings_run_the_same_server(raw):
    built, vm, containers, volumes, workload, container, serving_step = both_wings(raw)
    docker = parsed_docker_run(container.docker_run_args(vm))
    vllm = containers["vllm"]
    mounted = {m["mountPath"]: m["name"] for m in vllm["volumeMounts"]}

    # The same image and command: the key entry, then `vllm serve` with the same flags and port.
    assert docker["image"] == vllm["image"] == built.vllm_image
    assert docker["command"] == vllm["command"] + vllm["args"] == list(built.vllm_command)
    # The same environment, name for name.
    assert docker["env"] == {e["name"]: e["value"] for e in vllm["env"]} == dict(built.environment)
    # The same secret files at the same paths: the VM binds each file, GKE mounts each one's directory.
    assert docker["mounts"][built.hf_token_file] == container.HF_TOKEN_FILE
    assert docker["mounts"][built.api_key_file] == container.API_KEY_FILE
    assert mounted[built.hf_token_file.rsplit("/", 1)[0]] == "hf-token"
    assert mounted[built.api_key_file.rsplit("/", 1)[0]] == "api-key"
    # The same compile cache path, kept on each wing's storage.
    assert built.compile_cache_path in docker["mounts"] and mounted[built.compile_cache_path] == "xla-cache"
    assert docker["env"]["VLLM_XLA_CACHE_PATH"] == built.compile_cache_path
    # The same /dev/shm size.
    assert docker_bytes(docker["--shm-size"]) == quantity_bytes(volumes["dshm"]["emptyDir"]["sizeLimit"]) \
        == built.shm_bytes
    # The checkpoint where HF_HOME says, on each wing's storage when kept on disk.
    if built.weights_on_disk:
        assert built.hf_home in docker["mounts"] and mounted[built.hf_home] == "hf-weights"

    # The same front: its config, its command, its port.
    files = dict(serving_step.installed_files(vm))
    assert files[container.FRONT_CONFIG_FILE] == workload.config_map_data(built)["nginx.conf"] == built.front_config
    front_docker = parsed_docker_run(container.front_docker_run_args(built) + list(built.front_entry))
    assert front_docker["command"][1:] == containers["front"]["command"] == list(built.front_entry)
    assert front_docker["image"] == containers["front"]["image"] == built.front_image
    assert containers["front"]["ports"][0]["containerPort"] == built.listen_port
    assert f"--port {built.listen_port} --upstream-port {built.upstream_port} " in serving_step.remote_command_text(vm)


def installed_source(package_file: str) -> str:
    """A file of the vLLM venv's packages (requirements-vllm.txt: vLLM 0.33.0, tpu-inference 0.32.0), read, not
    imported (importing tpu-inference needs JAX)."""
    from tests.test_vllm_parser import vllm_python

    package = package_file.split("/", 1)[0]
    where = subprocess.run([vllm_python(), "-c", "import importlib.util, sys; "
                            f"print(importlib.util.find_spec({package!r}).submodule_search_locations[0])"],
                           capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    return (Path(where).parent / package_file).read_text()


def test_vllm_reads_the_specs_cache_variable_and_tpu_inference_gives_it_to_jax():
    """The compile cache is where the spec says only if vLLM reads VLLM_XLA_CACHE_PATH from the environment and
    tpu-inference hands that to JAX's persistent cache."""
    envs = ast.parse(installed_source("vllm/envs.py"))
    [reader] = [value for node in ast.walk(envs) if isinstance(node, ast.Dict)
                for key, value in zip(node.keys, node.values, strict=True)
                if isinstance(key, ast.Constant) and key.value == spec.COMPILE_CACHE_VARIABLE]
    assert any(isinstance(call, ast.Call) and ast.unparse(call.func) == "os.getenv"
               and ast.literal_eval(call.args[0]) == spec.COMPILE_CACHE_VARIABLE for call in ast.walk(reader))
    manager = installed_source("tpu_inference/runner/compilation_manager.py")
    assert re.search(r'jax\.config\.update\(\s*"jax_compilation_cache_dir",\s*vllm_envs\.VLLM_XLA_CACHE_PATH\)',
                     manager)
