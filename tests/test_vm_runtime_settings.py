"""The settings of what runs on the VM: the cache mount point, media URL hosts, how the container reaches the TPU."""

from __future__ import annotations

import pytest

from components import settings

SSH = {"access": {"sshSourceRanges": ["198.51.100.7/32"]}}


def load(**sections):
    return settings.load({**SSH, **sections}, "my-proj", "dev").settings


def problems(**sections) -> list[str]:
    with pytest.raises(settings.SettingsError) as error:
        load(**sections)
    return error.value.problems


@pytest.mark.parametrize("mount_point", ["/", "/etc", "/usr", "/var", "/root", "/home", "/boot", "/bin", "/sbin",
                                         "/lib", "/lib64", "/opt", "/proc", "/sys", "/dev", "/run", "/tmp",
                                         "/var/lib/docker", "/home/tpu-vllm", "/usr/lib", "/tmp/cache"])
def test_a_system_directory_is_refused_as_the_cache_mount_point(mount_point):
    [problem] = problems(cache={"mountPoint": mount_point})
    assert problem.startswith(f'tpu-vllm:cache.mountPoint = "{mount_point}": a system directory')
    assert "use a path under /mnt, e.g. /mnt/tpu-vllm-cache" in problem


@pytest.mark.parametrize(("spelling", "normal"), [("/etc/", "/etc"), ("//usr/../etc", "/etc"), ("/mnt/../var", "/var"),
                                                  ("/./usr//lib", "/usr/lib"), ("///", "/")])
def test_other_spellings_of_a_system_directory_are_refused_naming_it(spelling, normal):
    [problem] = problems(cache={"mountPoint": spelling})
    assert "a system directory" in problem
    assert f"(that is {normal})" in problem or spelling == normal


@pytest.mark.parametrize(("given", "kept"), [
    ("/mnt/tpu-vllm-cache", "/mnt/tpu-vllm-cache"), ("/mnt/cache/", "/mnt/cache"), ("/data/vllm", "/data/vllm"),
    ("/library", "/library"), ("/media/x/../y", "/media/y")])
def test_other_mount_points_are_kept_in_their_plain_spelling(given, kept):
    assert load(cache={"mountPoint": given}).cache.mount_point == kept


@pytest.mark.parametrize("mount_point", ["mnt/cache", "/mnt/with space", "/mnt/$(reboot)", ""])
def test_a_mount_point_that_is_not_a_plain_absolute_path_is_refused(mount_point):
    [problem] = problems(cache={"mountPoint": mount_point})
    assert "use an absolute path of letters, digits" in problem


def test_media_urls_are_off_by_default():
    assert load().vllm.allowed_media_domains == []


@pytest.mark.parametrize("host", ["https://images.example.com", "images.example.com/x", "*.example.com",
                                  "Images.Example.com", "example.com:443", "", "a..b"])
def test_a_media_domain_must_be_a_plain_host_name(host):
    [problem] = problems(vllm={"allowedMediaDomains": [host]})
    assert problem.startswith("tpu-vllm:vllm.allowedMediaDomains[0] = ")
    assert "e.g. images.example.com" in problem


def test_the_placeholder_for_none_cannot_be_listed():
    [problem] = problems(vllm={"allowedMediaDomains": [settings.NO_MEDIA_DOMAIN]})
    assert "leave the list empty instead" in problem


def test_container_access_is_privileged_unless_devices_is_chosen():
    assert load().vllm.container_access == "privileged"
    assert load(vllm={"containerAccess": "devices"}).vllm.container_access == "devices"
    [problem] = problems(vllm={"containerAccess": "unprivileged"})
    assert problem.startswith('tpu-vllm:vllm.containerAccess = "unprivileged"')
    assert "'privileged' or 'devices'" in problem
