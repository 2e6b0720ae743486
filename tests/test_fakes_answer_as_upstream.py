"""Each fake answers in its upstream's own words: the texts, statuses, headers and fields cited beside its code.

Where the upstream is installed (vLLM 0.33.0 and prometheus_client in .venv-vllm), the fake is compared with
the real code's answer; elsewhere with the text read from the cited source.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from components.serving import front
from tests import vllm_venv
from tests.fakes.docker_engine import FakeDockerEngine
from tests.fakes.gcp_metadata import ACCESS_TOKEN, PROJECT_NUMBER, FakeMetadata, FakeSecretManager, crc32c
from tests.fakes.registry import DOCKER_LIST, DOCKER_MANIFEST, INDEX, FakeRegistry, manifest_bytes
from tests.fakes.systemctl import SystemctlServer
from tests.fakes.tpu_api import RPC_STATUS
from tests.fakes.vllm import GUARDED_PREFIX, FakeFront, FakeVllm
from tests.test_gke_metrics_door import METRICS_BODY

HERE = Path(__file__).resolve().parent
SECRET = "projects/proj/secrets/hf-token"


def get(url: str, headers: dict[str, str] | None = None, method: str = "GET", body: bytes | None = None):
    """(status, headers, body); no HTTP answer at all is (0, {}, b"")."""
    request = urllib.request.Request(url, headers=headers or {}, method=method, data=body)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()
    except (urllib.error.URLError, OSError):
        return 0, {}, b""


# --- GCE metadata server ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("path", "flavor", "status"), [
    ("instance/attributes/a", "Google", 200), ("instance/attributes/missing", "Google", 404),
    ("instance/service-accounts/default/token", "Google", 200), ("instance/attributes/a", None, 403)])
def test_the_metadata_server_marks_every_reply_as_its_own(path, flavor, status):
    with FakeMetadata({"a": "1"}) as metadata:
        answer, headers, _ = get(f"{metadata.url}/computeMetadata/v1/{path}",
                                 {"Metadata-Flavor": flavor} if flavor else {})
    assert answer == status and headers["Metadata-Flavor"] == "Google"  # what google-auth's ping requires


# --- Secret Manager -----------------------------------------------------------------------------------------------

def access(secretmanager: FakeSecretManager, token: str | None = ACCESS_TOKEN):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    status, _, body = get(f"{secretmanager.url}/v1/{SECRET}/versions/latest:access", headers)
    return status, json.loads(body)


def test_secret_manager_reads_the_latest_version_with_its_project_number_and_crc32c():
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value (RFC 3720 B.4's polynomial)
    with FakeSecretManager({SECRET: "v"}, latest_version=3) as secretmanager:
        status, body = access(secretmanager)
    assert status == 200
    assert body == {"name": f"projects/{PROJECT_NUMBER}/secrets/hf-token/versions/3",
                    "payload": {"data": "dg==", "dataCrc32c": str(crc32c(b"v"))}}


@pytest.mark.parametrize("state", ["DISABLED", "DESTROYED"])
def test_secret_manager_refuses_a_latest_version_that_is_not_enabled(state):
    with FakeSecretManager({SECRET: "v"}, latest_state={SECRET: state}, latest_version=4) as secretmanager:
        assert access(secretmanager) == (400, {"error": {
            "code": 400, "status": "FAILED_PRECONDITION",
            "message": f"Secret Version [projects/{PROJECT_NUMBER}/secrets/hf-token/versions/4] is in {state} state."}})


@pytest.mark.parametrize(("token", "faults", "status", "name", "message"), [
    (None, None, 401, "UNAUTHENTICATED", "Request is missing required authentication credential. Expected OAuth 2 "
     "access token, login cookie or other valid authentication credential. "
     "See https://developers.google.com/identity/sign-in/web/devconsole-project."),
    ("wrong", None, 401, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access "
     "token, login cookie or other valid authentication credential. "
     "See https://developers.google.com/identity/sign-in/web/devconsole-project."),
    (ACCESS_TOKEN, [403], 403, "PERMISSION_DENIED", f"Permission 'secretmanager.versions.access' denied for "
     f"resource '{SECRET}/versions/latest' (or it may not exist)."),
    (ACCESS_TOKEN, [503], 503, "UNAVAILABLE", "The service is currently unavailable."),
    # code.proto maps no code to 502 (UNAVAILABLE is 503's): the fake said UNAVAILABLE (second reader, row 50).
    (ACCESS_TOKEN, [502], 502, "UNKNOWN", "(fake: no public source for Secret Manager's 502 text)"),
])
def test_secret_manager_errors_carry_googles_texts_and_status_names(token, faults, status, name, message):
    with FakeSecretManager({SECRET: "v"}, faults={SECRET: faults} if faults else None) as secretmanager:
        assert access(secretmanager, token) == (status, {"error": {"code": status, "status": name,
                                                                   "message": message}})


def test_secret_manager_and_the_tpu_api_name_each_status_alike():
    """Both fakes answer with google.rpc.Code names by code.proto's HTTP mapping (googleapis @16b971c4): the
    Secret Manager fake's injected faults carry the TPU fake's names, UNKNOWN where no code maps."""
    statuses = [401, 403, 404, 409, 429, 499, 500, 501, 502, 503, 504]
    with FakeSecretManager({SECRET: "v"}, faults={SECRET: statuses}) as secretmanager:
        said = {status: access(secretmanager)[1]["error"]["status"] for status in statuses}
    assert said == {status: RPC_STATUS.get(status, "UNKNOWN") for status in statuses}
    assert said[502] == "UNKNOWN" and said[503] == "UNAVAILABLE" and said[500] == "INTERNAL"


def test_secret_manager_says_a_missing_secret_is_not_found_by_its_project_number():
    with FakeSecretManager({}) as secretmanager:
        assert access(secretmanager) == (404, {"error": {
            "code": 404, "status": "NOT_FOUND",
            "message": f"Secret [projects/{PROJECT_NUMBER}/secrets/hf-token] not found or has no versions."}})


# --- vLLM 0.33.0 and the front ------------------------------------------------------------------------------------

KEY = "CANARYfakesKEY0123456789"
PROBED = ["/v1/models", "/v1/chat/completions", "/v1x", "/v2/rerank", "/inference/v1/generate", "/cohere/v1/chat",
          "/invocations", "/metrics", "/ping", "/tokenize", "/health"]
REAL_VLLM = """
import json, sys, types
from fastapi import FastAPI
from starlette.responses import Response
from starlette.testclient import TestClient
from vllm.entrypoints.serve.exception_handling.register import init_exception_handler
from vllm.entrypoints.serve.middleware.authenticate import AuthenticationMiddleware
key, paths = sys.argv[1], json.loads(sys.argv[2])
app = FastAPI()
init_exception_handler(app)
app.state.args = types.SimpleNamespace(log_error_stack=False)
for path in paths:
    app.add_api_route(path, lambda: Response(b"routed"), methods=["GET"])
app.add_middleware(AuthenticationMiddleware, tokens=[key])
client = TestClient(app)
answers = {path: [client.get(path).status_code, client.get(path).text] for path in paths}
answers["lowercase scheme"] = client.get(paths[0], headers={"Authorization": "bearer " + key}).status_code
answers["unknown"] = [client.get("/v1/nope", headers={"Authorization": "Bearer " + key}).status_code,
                      client.get("/v1/nope", headers={"Authorization": "Bearer " + key}).text]
print(json.dumps(answers))
"""


@pytest.fixture(scope="module")
def real_vllm() -> dict:
    """vLLM 0.33.0's own key middleware and exception handlers, answering on the same paths without the key."""
    done = vllm_venv.run(["-c", REAL_VLLM, KEY, json.dumps(PROBED)], text=True, timeout=300, cwd="/")
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("path", PROBED)
def test_vllm_refuses_a_keyless_request_exactly_where_and_as_vllm_does(real_vllm, path):
    with FakeVllm(KEY, "m") as vllm:
        status, _, body = get(vllm.url + path)
    real_status, real_body = real_vllm[path]
    assert (status == 401) == (real_status == 401) == path.startswith(GUARDED_PREFIX)
    if real_status == 401:
        assert json.loads(body) == json.loads(real_body) == {"error": "Unauthorized"}


def test_vllm_takes_the_scheme_in_any_case_and_answers_fastapis_404(real_vllm):
    with FakeVllm(KEY, "m") as vllm:
        assert get(vllm.url + "/v1/models", {"Authorization": f"bearer {KEY}"})[0] == real_vllm["lowercase scheme"]
        status, _, body = get(vllm.url + "/v1/nope", {"Authorization": f"Bearer {KEY}"})
    assert [status, json.loads(body)] == [real_vllm["unknown"][0], json.loads(real_vllm["unknown"][1])]


def test_vllm_gives_no_http_answer_while_loading_then_an_empty_200_health():
    with FakeVllm(KEY, "m", loading_polls=1) as vllm:
        assert get(vllm.url + "/health") == (0, {}, b"")
        status, _, body = get(vllm.url + "/health")
    assert (status, body) == (200, b"")


def test_the_front_refuses_with_its_own_body_everywhere_but_health():
    with FakeFront(KEY, "m") as fake:
        for path in ("/invocations", "/metrics", "/v1/models"):
            status, headers, body = get(fake.url + path, {"Authorization": f"bearer {KEY}"})
            assert (status, body.decode(), headers["WWW-Authenticate"]) == (401, front.UNAUTHORIZED_BODY, "Bearer")
        assert get(fake.url + "/health")[0] == 200


def test_the_metrics_door_tests_serve_the_queue_gauge_as_vllms_prometheus_client_writes_it():
    program = ("from prometheus_client import CollectorRegistry, Gauge, generate_latest\n"
               "registry = CollectorRegistry()\n"
               # vllm/v1/metrics/loggers.py: the gauge's name, documentation and labelnames, engine index 0.
               "gauge = Gauge('vllm:num_requests_waiting', 'Number of requests waiting to be processed.',\n"
               "              labelnames=['model_name', 'engine'], registry=registry)\n"
               "gauge.labels('m', '0').set(3)\n"
               "import sys; sys.stdout.write(generate_latest(registry).decode())\n")
    done = vllm_venv.run(["-c", program], text=True, timeout=120, cwd="/")
    assert done.returncode == 0, done.stderr
    assert done.stdout.encode() == METRICS_BODY


# --- Registry (distribution) --------------------------------------------------------------------------------------

def test_the_registry_challenges_with_distributions_error_body():
    with FakeRegistry({"r": {"t": manifest_bytes("t")}}) as registry:
        status, headers, body = get(f"{registry.url}/v2/r/manifests/t", {"Accept": INDEX})
    assert status == 401
    assert headers["WWW-Authenticate"] == f'Bearer realm="{registry.url}/token",service="fake-registry",' \
                                          'scope="repository:r:pull"'
    assert json.loads(body) == {"errors": [{"code": "UNAUTHORIZED", "message": "authentication required",
                                            "detail": [{"Type": "repository", "Class": "", "Name": "r",
                                                        "Action": "pull"}]}]}


def token(registry: FakeRegistry, query: str) -> str:
    return json.loads(get(f"{registry.url}/token?{query}")[2])["token"]


@pytest.mark.parametrize(("query", "error"), [
    ("service=fake-registry&scope=repository:r:push", "insufficient_scope"),  # granted nothing, still a 200
    ("service=elsewhere&scope=repository:r:pull", "invalid_token"),
])
def test_a_token_without_the_access_asked_is_refused_by_the_registry_not_the_token_server(query, error):
    with FakeRegistry({"r": {"t": manifest_bytes("t")}}) as registry:
        status, headers, _ = get(f"{registry.url}/v2/r/manifests/t",
                                 {"Accept": INDEX, "Authorization": f"Bearer {token(registry, query)}"})
    assert status == 401 and headers["WWW-Authenticate"].endswith(f',error="{error}"')


def manifest(registry: FakeRegistry, tag: str, accept: str, method: str = "GET"):
    bearer = token(registry, "service=fake-registry&scope=repository:r:pull")
    return get(f"{registry.url}/v2/r/manifests/{tag}", {"Accept": accept, "Authorization": f"Bearer {bearer}"},
               method)


def test_the_registry_names_an_unknown_tag_and_an_unaccepted_index_as_distribution_does():
    with FakeRegistry({"r": {"t": manifest_bytes("t")}}) as registry:
        unknown = manifest(registry, "nope", INDEX)
        unaccepted = manifest(registry, "t", DOCKER_MANIFEST)
    assert (unknown[0], json.loads(unknown[2])) == (404, {"errors": [
        {"code": "MANIFEST_UNKNOWN", "message": "manifest unknown", "detail": {"Tag": "nope"}}]})
    assert (unaccepted[0], json.loads(unaccepted[2])) == (404, {"errors": [
        {"code": "MANIFEST_UNKNOWN", "message": "OCI index found, but accept header does not support OCI indexes"}]})


def test_a_docker_list_the_client_does_not_accept_becomes_its_linux_amd64_manifest_on_head_too():
    child = manifest_bytes("amd64", DOCKER_MANIFEST)
    listed = manifest_bytes("list", DOCKER_LIST, [{"digest": FakeRegistry.digest(child), "mediaType": DOCKER_MANIFEST,
                                                    "platform": {"architecture": "amd64", "os": "linux"}}])
    with FakeRegistry({"r": {"list": listed, "amd64": child}}) as registry:
        as_list = manifest(registry, "list", DOCKER_LIST, "HEAD")
        rewritten = manifest(registry, "list", DOCKER_MANIFEST)
    assert as_list[1]["Docker-Content-Digest"] == registry.digest(listed)
    assert rewritten[0] == 200 and rewritten[2] == child
    assert rewritten[1]["Content-Type"] == DOCKER_MANIFEST
    assert rewritten[1]["Docker-Content-Digest"] == registry.digest(child)
    assert rewritten[1]["Etag"] == f'"{registry.digest(child)}"'


# --- Docker Engine (moby) -----------------------------------------------------------------------------------------

def engine_call(engine: FakeDockerEngine, method: str, path: str, body: dict | None = None):
    """One request on the engine's unix socket, as the CLI sends it (curl speaks HTTP over a unix socket)."""
    args = ["curl", "-s", "--unix-socket", str(engine.socket_path), "-X", method, "-o", "-", "-w", "\n%{http_code}"]
    if body is not None:
        args += ["-H", "Content-Type: application/json", "-d", json.dumps(body)]
    done = subprocess.run([*args, f"http://docker{path}"], capture_output=True, text=True, timeout=30)
    text, _, status = done.stdout.rpartition("\n")
    return int(status), text


def test_the_engine_refuses_as_moby_does():
    with FakeDockerEngine() as engine:
        engine_call(engine, "POST", "/v1.41/containers/create?name=c", {"Image": "i"})
        engine_call(engine, "POST", "/v1.41/containers/c/start")
        removed = engine_call(engine, "DELETE", "/v1.41/containers/c")
        assert engine_call(engine, "POST", "/v1.41/containers/c/stop") == (204, "")
        stopped_again = engine_call(engine, "POST", "/v1.41/containers/c/stop")
        killed = engine_call(engine, "POST", "/v1.41/containers/c/kill")
        container_id = engine.containers["c"].id
    assert removed == (409, json.dumps({"message": 'cannot remove container "c": container is running: stop the '
                                                   "container before removing or force remove"}))
    assert stopped_again == (304, "")
    assert killed == (409, json.dumps({"message": f"cannot kill container: c: container {container_id} is not "
                                                  "running"}))


@pytest.mark.parametrize(("version", "content_type"), [("1.41", "application/vnd.docker.raw-stream"),
                                                       ("1.42", "application/vnd.docker.multiplexed-stream")])
def test_the_engines_logs_type_follows_the_api_version_asked(version, content_type):
    with FakeDockerEngine() as engine:
        engine_call(engine, "POST", f"/v{version}/containers/create?name=c", {"Image": "i"})
        done = subprocess.run(["curl", "-s", "-D", "-", "-o", "/dev/null", "--unix-socket", str(engine.socket_path),
                               f"http://docker/v{version}/containers/c/logs?stdout=1"],
                              capture_output=True, text=True, timeout=30)
    assert f"Content-Type: {content_type}\n" in done.stdout  # (text mode turned \r\n into \n)


# --- systemctl ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("way", ["a process per call", "served"])
def test_a_restart_after_a_unit_changed_without_daemon_reload_warns_and_runs_the_old_definition(tmp_path, way,
                                                                                                 request):
    # Both ways the fake runs (tests/fakes/systemctl.py: its own process, or SystemctlServer and its bash client).
    units = tmp_path / "etc/systemd/system"
    units.mkdir(parents=True)
    unit = units / "demo.service"
    marker = tmp_path / "ran"
    unit.write_text(f"[Service]\nExecStart=sh -c 'echo old >> {shlex.quote(str(marker))}'\n")
    env = {**os.environ, "STARTUP_ROOT": str(tmp_path)}
    server = SystemctlServer().__enter__() if way == "served" else None
    if server is not None:
        request.addfinalizer(lambda: server.__exit__(None, None, None))
        client = tmp_path / "systemctl"
        client.write_text(f"#!/usr/bin/env bash\n{server.client_shim()}\n")
        client.chmod(0o755)

    def systemctl(*args: str) -> subprocess.CompletedProcess:
        argv = [str(client)] if server is not None else [sys.executable, str(HERE / "fakes/systemctl.py")]
        return subprocess.run([*argv, *args], env=env, capture_output=True, text=True, timeout=60)

    def ran(count: int) -> list[str]:
        """What the unit's ExecStart wrote, once it has run `count` times (it runs in the background)."""
        for _ in range(200):
            if marker.exists() and len(marker.read_text().split()) >= count:
                break
            subprocess.run(["sleep", "0.05"])
        return marker.read_text().split()

    first = systemctl("restart", "demo.service")
    assert first.returncode == 0 and first.stderr == "" and ran(1) == ["old"]
    unit.write_text(f"[Service]\nExecStart=sh -c 'echo new >> {shlex.quote(str(marker))}'\n")
    second = systemctl("restart", "demo.service")
    assert second.returncode == 0
    assert second.stderr == ("Warning: The unit file, source configuration file or drop-ins of demo.service changed "
                             "on disk. Run 'systemctl daemon-reload' to reload units.\n")
    assert ran(2) == ["old", "old"]
    assert systemctl("daemon-reload").returncode == 0
    third = systemctl("restart", "demo.service")
    assert third.stderr == "" and ran(3) == ["old", "old", "new"]
    # A unit it does not know, and is-active's exit status (0 while running, 3 once it ended).
    missing = systemctl("restart", "nope.service")
    assert (missing.returncode, missing.stderr) == (1, "Unit nope.service not found.\n")
    for _ in range(200):  # its ExecStart has written; the unit ends just after
        if (code := systemctl("is-active", "--quiet", "demo.service").returncode) != 0:
            break
        subprocess.run(["sleep", "0.05"])
    assert code == 3
