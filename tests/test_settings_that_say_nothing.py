"""Settings that would be dropped without a word say so (issue 40 item 5): an email beside a channel, a destination
with no alert to send, a Docker Hub image spelled another way than the mirror knew, and an old key's error."""

from __future__ import annotations

import pytest

from components import settings as s
from components.gke.registry_mirror import docker_hub_repository, through_mirror

SSH = {"access": {"sshSourceRanges": ["198.51.100.7/32"]}}
EMAIL = "ops@example.com"
CHANNEL = "projects/my-proj/notificationChannels/123"
HEX = "e" * 64
MIRROR = "us-west4-docker.pkg.dev/my-proj/tpu-vllm-gke-dockerhub"


def load(**sections):
    return s.load({**SSH, **sections}, "my-proj", "dev")


def problems(**sections) -> list[str]:
    with pytest.raises(s.SettingsError) as caught:
        load(**sections)
    return caught.value.problems


# --- monitoring.notificationEmail and notificationChannel ---

def test_an_email_beside_a_channel_is_refused_naming_both_and_how_to_keep_one():
    [problem] = problems(monitoring={"notificationEmail": EMAIL, "notificationChannel": CHANNEL})
    assert problem.startswith(f'tpu-vllm:monitoring.notificationEmail = "{EMAIL}": set together with '
                              "tpu-vllm:monitoring.notificationChannel")
    assert "pulumi config rm --path tpu-vllm:monitoring.notificationEmail" in problem
    assert "pulumi config rm --path tpu-vllm:monitoring.notificationChannel" in problem


@pytest.mark.parametrize("destination", [{"notificationEmail": EMAIL}, {"notificationChannel": CHANNEL}])
def test_either_destination_alone_is_used_without_a_word(destination):
    loaded = load(monitoring=destination)
    assert not [warning for warning in loaded.warnings if "monitoring" in warning]


@pytest.mark.parametrize("off", ["alerts", "enabled"])
@pytest.mark.parametrize(("key", "value"), [("notificationEmail", EMAIL), ("notificationChannel", CHANNEL)])
def test_a_destination_with_no_alert_to_send_warns(off, key, value):
    loaded = load(monitoring={key: value, off: False})
    [warning] = [warning for warning in loaded.warnings if warning.startswith(f"tpu-vllm:monitoring.{key}")]
    assert f"no alert is made (tpu-vllm:monitoring.{off} is false)" in warning
    assert f"pulumi config set --path tpu-vllm:monitoring.{off} true" in warning


# --- gke.dockerHubMirror: every spelling of Docker Hub ---

@pytest.mark.parametrize(("pinned", "repository"), [
    # distribution/reference normalize.go, splitDockerDomain: no '/', or a first part that is not a domain.
    (f"nginx@sha256:{HEX}", "library/nginx"),
    (f"vllm/vllm-tpu@sha256:{HEX}", "vllm/vllm-tpu"),
    (f"docker.io/nginx@sha256:{HEX}", "library/nginx"),
    (f"docker.io/library/nginx@sha256:{HEX}", "library/nginx"),
    (f"docker.io/vllm/vllm-tpu@sha256:{HEX}", "vllm/vllm-tpu"),
    # The legacy "Docker Index" domain, canonicalised to docker.io.
    (f"index.docker.io/vllm/vllm-tpu@sha256:{HEX}", "vllm/vllm-tpu"),
    (f"index.docker.io/nginx@sha256:{HEX}", "library/nginx"),
    # Docker Hub's registry host itself.
    (f"registry-1.docker.io/vllm/vllm-tpu@sha256:{HEX}", "vllm/vllm-tpu"),
    (f"registry-1.docker.io/library/nginx@sha256:{HEX}", "library/nginx"),
])
def test_every_spelling_of_docker_hub_goes_through_the_mirror(pinned, repository):
    assert docker_hub_repository(pinned) == repository
    assert through_mirror(pinned, MIRROR) == f"{MIRROR}/{repository}@sha256:{HEX}"


@pytest.mark.parametrize("pinned", [
    f"us-docker.pkg.dev/p/r/vllm@sha256:{HEX}",
    f"docker.io.example.com/vllm@sha256:{HEX}",
    f"localhost/vllm@sha256:{HEX}",
    f"localhost:5000/vllm@sha256:{HEX}",
    f"registry:5000/vllm@sha256:{HEX}",
    # An upper-case first part is a domain to Docker (namespaces are lowercase).
    f"Registry/vllm@sha256:{HEX}",
    # A tag: the mirror only takes the digest the resolver pinned.
    "index.docker.io/library/nginx:1.28.0-alpine",
])
def test_other_registries_and_unpinned_images_are_pulled_as_written(pinned):
    assert through_mirror(pinned, MIRROR) == pinned


# --- an old key's error names the key as written ---

@pytest.mark.parametrize(("old", "new"), [(("vllm", "port"), "front.listenPort"),
                                          (("front", "upstreamPort"), "vllm.serverPort")])
def test_an_old_keys_error_names_the_key_as_written_the_new_key_and_the_fix(old, new):
    [problem] = problems(**{old[0]: {old[1]: 22}})
    assert problem.startswith(f"tpu-vllm:{old[0]}.{old[1]} = 22: is the old name of tpu-vllm:{new}, read as that: ")
    assert f"pulumi config rm --path 'tpu-vllm:{old[0]}.{old[1]}'" in problem
    assert f"pulumi config set --path 'tpu-vllm:{new}' VALUE" in problem


def test_a_rule_that_also_reads_a_renamed_key_says_where_it_came_from():
    [problem] = problems(vllm={"port": 8000}, front={"upstreamPort": 8000})
    assert problem.startswith("tpu-vllm:front.upstreamPort = 8000: is the old name of tpu-vllm:vllm.serverPort")
    assert "tpu-vllm:front.listenPort is read from the old key tpu-vllm:vllm.port" in problem


def test_the_new_keys_errors_stay_as_they_were():
    [problem] = problems(front={"listenPort": 22})
    assert problem.startswith("tpu-vllm:front.listenPort = 22: sshd listens on 22") and "old name" not in problem
