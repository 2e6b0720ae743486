"""One vLLM build per deployment: the resolver against a registry on 127.0.0.1, the provider's pinning, the plan."""

from __future__ import annotations

import pytest

from components.core import image_digest
from components.core.image_digest import ImageDigestProvider, ResolveError, parse, resolve
from tests import program as harness
from tests import test_gke_compute_class
from tests.fakes.registry import BlobStore, FakeRegistry, HostileRegistry, manifest_bytes

# tests/test_gke_compute_class.py's run with fallbacks, which pins the vLLM image by digest in the settings: the
# same fixture, the same request, so tests/shared_runs.py runs it once a session for both modules.
with_fallbacks = test_gke_compute_class.with_fallbacks

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SERVING = "serving-deployment"
DIGEST_TYPE = "pulumi-python:dynamic/tpu-vllm:ImageDigest"


@pytest.fixture()
def registry():
    with FakeRegistry({"vllm/vllm-tpu": {"nightly": manifest_bytes("nightly"), "v0.1": manifest_bytes("v0.1")}}) \
            as fake:
        yield fake


@pytest.mark.parametrize(("image", "registry", "repository", "tag", "digest"), [
    ("vllm/vllm-tpu:nightly", "docker.io", "vllm/vllm-tpu", "nightly", None),
    ("nginx", "docker.io", "library/nginx", "latest", None),
    ("us-docker.pkg.dev/p/r/vllm:v1", "us-docker.pkg.dev", "p/r/vllm", "v1", None),
    ("localhost:5000/team/img", "localhost:5000", "team/img", "latest", None),
    ("vllm/vllm-tpu@sha256:" + "a" * 64, "docker.io", "vllm/vllm-tpu", None, "sha256:" + "a" * 64),
])
def test_references_are_read_as_docker_reads_them(image, registry, repository, tag, digest):
    assert parse(image) == image_digest.ImageReference(registry, repository, tag, digest)


def test_a_tag_resolves_to_its_manifest_digest_through_the_token_challenge(registry):
    image = f"127.0.0.1:{registry.port}/vllm/vllm-tpu:nightly"
    pinned = resolve(image)
    assert pinned == f"127.0.0.1:{registry.port}/vllm/vllm-tpu@{registry.digest(manifest_bytes('nightly'))}"
    first, token, retried = registry.requests
    assert (first.method, first.path, "Authorization" in first.headers) == (
        "HEAD", "/v2/vllm/vllm-tpu/manifests/nightly", False)
    assert token.path == "/token" and token.query["scope"] == "repository:vllm/vllm-tpu:pull"
    assert retried.headers["Authorization"].startswith("Bearer tok-")
    # A multi-arch index is asked for first: its digest is what the kubelet pulls by.
    assert retried.headers["Accept"].split(", ")[0] == "application/vnd.oci.image.index.v1+json"
    assert resolve(image.replace("nightly", "v0.1")) != pinned


def test_without_the_digest_header_the_digest_is_the_manifests_own_hash():
    with FakeRegistry({"vllm/vllm-tpu": {"nightly": manifest_bytes("nightly")}}, digest_on_head=False) as fake:
        pinned = resolve(f"127.0.0.1:{fake.port}/vllm/vllm-tpu:nightly")
        assert pinned.endswith("@" + fake.digest(manifest_bytes("nightly")))
        assert [r.method for r in fake.requests][-1] == "GET"


def test_a_digest_reference_is_used_as_written_without_a_call(registry):
    image = f"127.0.0.1:{registry.port}/vllm/vllm-tpu@sha256:" + "b" * 64
    assert resolve(image) == image and registry.requests == []


@pytest.mark.parametrize(("image", "message"), [
    ("vllm/vllm-tpu:missing", "no tag 'missing' for vllm/vllm-tpu"),
])
def test_an_unknown_tag_says_so(registry, image, message):
    with pytest.raises(ResolveError, match=message):
        resolve(f"127.0.0.1:{registry.port}/{image}")


def test_an_unreachable_registry_is_an_error_not_a_traceback():
    with FakeRegistry({}) as fake:
        port = fake.port
    with pytest.raises(ResolveError, match=f"could not reach 127.0.0.1:{port}"):
        resolve(f"127.0.0.1:{port}/vllm/vllm-tpu:nightly", timeout=5)


@pytest.mark.parametrize("realm", ["http://registry.example/token", "https://127.0.0.1:1/token",
                                   "file:///etc/passwd"])
def test_a_remote_registrys_challenge_cannot_steer_the_token_request(realm):
    # A registry that is not on this machine may not send the deploy machine to plain HTTP or inward.
    reference = parse("registry.example/vllm/vllm-tpu:nightly")
    challenge = f'Bearer realm="{realm}",service="fake-registry",scope="repository:vllm/vllm-tpu:pull"'
    with pytest.raises(ResolveError, match="token realm"):
        image_digest._bearer_token(challenge, reference, timeout=1)


def test_the_provider_pins_at_create_and_keeps_the_pin_until_the_tag_setting_changes(registry):
    provider = ImageDigestProvider()
    image = f"127.0.0.1:{registry.port}/vllm/vllm-tpu:nightly"
    created = provider.create({"image": image, "pinned": None, "digest": None})
    assert created.outs["pinned"] == created.id and created.outs["digest"] == registry.digest(
        manifest_bytes("nightly"))
    # The tag moves on at the registry: a refresh and a same-settings up keep the first build.
    registry.tags["vllm/vllm-tpu"]["nightly"] = manifest_bytes("nightly-2")
    assert provider.read(created.id, created.outs).outs["pinned"] == created.outs["pinned"]
    assert provider.diff(created.id, created.outs, {"image": image}).changes is False
    changed = provider.diff(created.id, created.outs, {"image": image.replace("nightly", "v0.1")})
    assert changed.changes is True and changed.replaces == ["image"]


def test_a_failed_resolution_names_the_setting_and_the_fix(registry):
    with pytest.raises(Exception) as raised:
        ImageDigestProvider().create({"image": f"127.0.0.1:{registry.port}/vllm/vllm-tpu:gone"})
    message = str(raised.value)
    assert message.startswith(f"tpu-vllm:vllm.image = '127.0.0.1:{registry.port}/vllm/vllm-tpu:gone'")
    assert "docker buildx imagetools inspect" in message and "sha256:<digest>" in message


def test_every_replica_runs_the_pinned_image_and_the_plan_shows_it(gke_program):
    digests = {d["name"]: d["inputs"]["image"] for d in gke_program.of_type(DIGEST_TYPE)}
    assert digests == {"vllm-image": "vllm/vllm-tpu:v0.32.0", "front-image": "nginx:1.28.0-alpine"}
    pod = gke_program.named(SERVING)["inputs"]["spec"]["template"]["spec"]
    vllm = next(c for c in pod["containers"] if c["name"] == "vllm")
    assert vllm["image"] == gke_program.output("vllmImage")["value"]
    assert vllm["image"].startswith("vllm/vllm-tpu@sha256:") and ":nightly" not in vllm["image"]


def test_the_front_and_the_metrics_door_run_nginx_pinned_by_digest_through_the_same_resolver(gke_program):
    pod = gke_program.named(SERVING)["inputs"]["spec"]["template"]["spec"]
    images = {c["name"]: c["image"] for c in pod["containers"]}
    assert images["front"] == images["metrics"] == gke_program.output("frontImage")["value"]
    assert images["front"].startswith("nginx@sha256:") and ":1.28.0-alpine" not in images["front"]


def test_a_digest_in_the_settings_registers_no_resolver(with_fallbacks):
    pinned = test_gke_compute_class.PINNED_VLLM_IMAGE
    program = with_fallbacks
    assert program.problems is None
    assert [d["name"] for d in program.of_type(DIGEST_TYPE)] == ["front-image"]  # only the front's tag resolves
    assert program.output("vllmImage")["value"] == pinned


def test_the_real_provider_host_pins_at_create_and_keeps_it_through_diff(tmp_path, registry):
    """The engine's part, as tests/test_provider_host.py plays it: `python -m pulumi.dynamic` from the project root,
    the provider pickled into `__provider`, Check / Create / Diff over gRPC."""
    import os

    from google.protobuf import struct_pb2
    from pulumi.dynamic.dynamic import serialize_provider
    from pulumi.runtime import proto, rpc

    from tests.test_provider_host import ROOT, Host, marshal, pickled_globals, unmarshal

    blob = serialize_provider(ImageDigestProvider())
    assert pickled_globals(blob) == [("components.core.image_digest", "ImageDigestProvider")]
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LANG": "C.UTF-8", "PULUMI_PROJECT": "tpu-vllm",
           "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
    host = Host(ROOT, env, tmp_path / "host.stderr")
    try:
        urn = f"urn:pulumi:gke::tpu-vllm::tpu-vllm:gke:Deployment${DIGEST_TYPE}::vllm-image"
        image = f"127.0.0.1:{registry.port}/vllm/vllm-tpu:nightly"
        ins = {"image": image, "pinned": None, "digest": None, "__provider": rpc.wrap_rpc_secret(blob)}
        host.call("Configure", proto.ConfigureRequest(args=struct_pb2.Struct(), acceptSecrets=True,
                                                      acceptResources=True))
        checked = host.call("Check", proto.CheckRequest(urn=urn, type=DIGEST_TYPE, name="vllm-image",
                                                        olds=struct_pb2.Struct(), news=marshal(ins, False)))
        created = host.call("Create", proto.CreateRequest(urn=urn, properties=checked.inputs, timeout=60))
        outs = unmarshal(created.properties)
        assert outs["pinned"] == created.id == f"127.0.0.1:{registry.port}/vllm/vllm-tpu@" + registry.digest(
            manifest_bytes("nightly"))
        registry.tags["vllm/vllm-tpu"]["nightly"] = manifest_bytes("moved on")  # a new nightly
        same = host.call("Diff", proto.DiffRequest(id=created.id, urn=urn, olds=created.properties,
                                                   news=checked.inputs))
        assert same.changes == proto.DiffResponse.DIFF_NONE
        moved = marshal({**ins, "image": image.replace("nightly", "v0.1")}, False)
        changed = host.call("Diff", proto.DiffRequest(id=created.id, urn=urn, olds=created.properties, news=moved))
        assert changed.changes == proto.DiffResponse.DIFF_SOME and list(changed.replaces) == ["image"]
    finally:
        host.stop()


def test_a_redirect_to_another_host_is_followed_without_the_registrys_token():
    # The registry answers an authorized read with a 307 to its storage (blobserver.go); the storage is another
    # origin (localhost, another port), and the Bearer token the realm issued for the registry must not go there.
    data = manifest_bytes("nightly")
    with BlobStore(data) as store, FakeRegistry({"vllm/vllm-tpu": {"nightly": data}},
                                                redirect_to=f"http://localhost:{store.port}") as registry:
        pinned = resolve(f"127.0.0.1:{registry.port}/vllm/vllm-tpu:nightly")
        assert pinned.endswith("@" + registry.digest(data))
        assert registry.requests[-1].headers["Authorization"].startswith("Bearer tok-")  # the registry got it
        [moved] = store.requests
        assert moved.path == "/v2/vllm/vllm-tpu/manifests/nightly" and "Authorization" not in moved.headers


def test_a_redirect_that_leaves_the_registrys_rules_is_refused():
    # A remote registry may not redirect the deploy machine to plain HTTP (the token realm's rule, for redirects).
    reference = parse("registry.example/vllm/vllm-tpu:nightly")
    with pytest.raises(ResolveError, match="redirect 'http://elsewhere.example/x' is not https"):
        image_digest._check_destination("http://elsewhere.example/x", reference, "redirect")
    with pytest.raises(ResolveError, match="points at this machine"):
        image_digest._check_destination("https://127.0.0.1:9/x", reference, "redirect")


@pytest.mark.parametrize("declare_length", [False, True])
def test_a_manifest_past_distributions_cap_is_refused_after_a_bounded_read(declare_length):
    # 256 MiB offered, streamed in 64 KiB writes; the resolver may read 4 MiB and a chunk. What the server got
    # out before the client hung up is that plus the loopback socket buffers, far below what was offered.
    offered = 256 << 20
    with HostileRegistry(offered, declare_length=declare_length) as hostile:
        with pytest.raises(ResolveError, match="4194304-byte limit"):
            resolve(f"127.0.0.1:{hostile.port}/vllm/vllm-tpu:nightly")
        assert hostile.done.wait(60)
    assert hostile.sent < 48 << 20, hostile.sent


def test_a_token_answer_past_its_cap_is_refused():
    class HugeToken(FakeRegistry):
        def _token(self, request):
            return image_digest_response(b'{"token": "' + b"a" * (2 << 20) + b'"}')

    from tests.fakes.http import Response

    def image_digest_response(raw):
        return Response(200, raw=raw, headers={"Content-Type": "application/json"})

    with HugeToken({"vllm/vllm-tpu": {"nightly": manifest_bytes("nightly")}}) as registry:
        with pytest.raises(ResolveError, match="token answer is 2097165 bytes, over the 1048576-byte limit"):
            resolve(f"127.0.0.1:{registry.port}/vllm/vllm-tpu:nightly")

@pytest.mark.parametrize(("realm", "said"), [
    (None, "the registry's token server answered HTTP 429"),  # Docker Hub's rate limit, at its token server
    ("http://127.0.0.1:1/token", "could not reach the registry's token server"),  # the realm refuses connections
])
def test_a_failing_token_server_names_the_setting_and_the_fix(realm, said):
    from tests.fakes.http import Response

    class RateLimitedToken(FakeRegistry):
        def _token(self, request):
            return Response(429, raw=b'{"errors":[{"code":"TOOMANYREQUESTS"}]}',
                            headers={"Content-Type": "application/json"})

    with RateLimitedToken({"vllm/vllm-tpu": {"nightly": manifest_bytes("nightly")}}, realm=realm) as registry:
        image = f"127.0.0.1:{registry.port}/vllm/vllm-tpu:nightly"
        with pytest.raises(Exception) as raised:
            ImageDigestProvider().create({"image": image})
    message = str(raised.value)
    assert message.startswith("tpu-vllm:vllm.image =") and said in message and "pin it yourself" in message


MIRROR = "us-west4-docker.pkg.dev/my-proj/tpu-vllm-gke-dockerhub"
HEX = "d" * 64


@pytest.mark.parametrize(("pinned", "pulled"), [
    (f"vllm/vllm-tpu@sha256:{HEX}", f"{MIRROR}/vllm/vllm-tpu@sha256:{HEX}"),
    # Docker Hub's official images live under library/: the mirror needs the full path.
    (f"nginx@sha256:{HEX}", f"{MIRROR}/library/nginx@sha256:{HEX}"),
    (f"docker.io/library/nginx@sha256:{HEX}", f"{MIRROR}/library/nginx@sha256:{HEX}"),
    # Another registry's image is not Docker Hub's: pulled as written, never renamed into the mirror.
    (f"us-docker.pkg.dev/p/r/vllm@sha256:{HEX}", f"us-docker.pkg.dev/p/r/vllm@sha256:{HEX}"),
    (f"docker.io.example.com/vllm@sha256:{HEX}", f"docker.io.example.com/vllm@sha256:{HEX}"),
    (f"localhost:5000/vllm@sha256:{HEX}", f"localhost:5000/vllm@sha256:{HEX}"),
    # A tag (not pinned) is never sent through: the mirror keeps the digest the resolver pinned.
    ("nginx:1.28.0-alpine", "nginx:1.28.0-alpine"),
])
def test_only_docker_hub_images_pinned_by_digest_go_through_the_mirror(pinned, pulled):
    from components.gke.registry_mirror import through_mirror
    assert through_mirror(pinned, MIRROR) == pulled


def test_the_mirror_is_a_docker_hub_remote_repository_the_nodes_alone_read():
    program = harness.run(harness.with_section(harness.gke_config(), "gke", dockerHubMirror=True), stack="gke")
    assert program.problems is None
    [repository] = program.of_type("gcp:artifactregistry/repository:Repository")
    inputs = repository["inputs"]
    assert (inputs["format"], inputs["mode"], inputs["location"]) == ("DOCKER", "REMOTE_REPOSITORY", "us-west4")
    assert inputs["remoteRepositoryConfig"]["dockerRepository"] == {"publicRepository": "DOCKER_HUB"}
    [grant] = program.of_type("gcp:artifactregistry/repositoryIamMember:RepositoryIamMember")
    assert grant["inputs"]["role"] == "roles/artifactregistry.reader"
    assert grant["inputs"]["member"].startswith("serviceAccount:tpu-vllm-gke-nodes@")
    pod = program.named(SERVING)["inputs"]["spec"]["template"]["spec"]
    images = {c["name"]: c["image"] for c in pod["containers"]}
    assert images["vllm"].startswith(f"{MIRROR}/vllm/vllm-tpu@sha256:")
    assert images["front"].startswith(f"{MIRROR}/library/nginx@sha256:") and images["metrics"] == images["front"]
    assert "artifactregistry.googleapis.com" in {s["inputs"]["service"]
                                                 for s in program.of_type("gcp:projects/service:Service")}
    # The cache's prefix keys on the digest alone: the same with the mirror as without.
    without = harness.run(harness.gke_config(), stack="gke")
    assert program.output("compileCachePath")["value"] == without.output("compileCachePath")["value"]


def test_no_mirror_by_default(gke_program):
    assert not gke_program.of_type("gcp:artifactregistry/repository:Repository")
    assert "artifactregistry.googleapis.com" not in {s["inputs"]["service"]
                                                     for s in gke_program.of_type("gcp:projects/service:Service")}


def test_gke_stacks_made_before_the_move_find_the_provider_where_their_state_names_it():
    """Pulumi reads a dynamic provider back by module path: a gke stack's state says components.gke.image_digest."""
    import importlib
    import pickle

    old = importlib.import_module("components.gke.image_digest")
    assert old.ImageDigestProvider is ImageDigestProvider
    blob = pickle.dumps(ImageDigestProvider(), protocol=0)
    blob = blob.replace(b"components.core.image_digest", b"components.gke.image_digest")
    assert type(pickle.loads(blob)) is ImageDigestProvider
