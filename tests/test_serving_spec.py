"""The serving spec: one frozen value per settings, holding what the server is; both wings render it."""

from __future__ import annotations

import dataclasses

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
    assert serving_spec(load()) != serving_spec(load({"front": {"upstreamPort": 8002}}))


def test_building_it_twice_from_the_same_settings_reads_nothing_else():
    """Pure: the same settings object gives the same value, whatever happened in between."""
    cfg = load()
    first = serving_spec(cfg)
    serving_spec(load({"vllm": {"port": 8080}}))
    assert serving_spec(cfg) == first


def test_each_field_holds_what_the_settings_say():
    cfg = load({"vllm": {"port": 8080}, "front": {"upstreamPort": 8005}})
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
    assert "/dev/tcp/127.0.0.1/8080" in built.vllm_drain_command[-1]
    assert f"nginx -c '{front.CONFIG_PATH}' -s quit" in built.front_drain_command[-1]
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
