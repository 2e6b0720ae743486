"""vLLM never follows a listed media host's redirect off the allowed domains (issue 40 item 3).

vLLM 0.33's own MediaConnector runs in the vLLM venv (tests/vllm_venv.py) with the allowed domain `localhost`,
against a host on 127.0.0.1 answering 302 to a second server standing in for the metadata server (named by an
address vLLM's allow-list does not hold). With the stack's environment it must not reach the stand-in; without
it (the control), vLLM follows the redirect.
"""

from __future__ import annotations

import json

from components import settings
from components.serving.spec import serving_spec
from components.settings import NO_MEDIA_DOMAIN
from tests import vllm_venv
from tests.fakes.http import FakeServer, Response

TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"
# One image fetch through vLLM's connector; prints what it got or the error's type. The stack's variables are
# laid over the environment before the call: vLLM's envs module reads each one when asked (vllm/envs.py v0.33.0,
# module __getattr__), so a child of the shared fork server sees them as a fresh `vllm serve` would.
FETCH = """
import json, os, sys
os.environ.update(json.loads(sys.argv[1]))
from vllm.multimodal.media.connector import MediaConnector
connector = MediaConnector(allowed_media_domains=json.loads(sys.argv[3]))
try:
    connector.fetch_image(sys.argv[2])
    print("fetched")
except Exception as error:
    print("refused", type(error).__name__)
"""


class MetadataStandIn(FakeServer):
    """Counts what reaches it; answers as a metadata server would a caller without Metadata-Flavor."""

    def handle(self, request):
        return Response(403, raw=b"Missing required header: Metadata-Flavor\n", headers={"Content-Type": "text/plain"})


class Redirector(FakeServer):
    """The listed host, answering every media URL with a 302 to the stand-in. As an HTTP proxy it also gets the
    redirected request (requests keeps a request's proxies across its redirects): it answers that as the stand-in
    would, and the request counts as one that reached it."""

    def __init__(self, target: str):
        self.target = target
        super().__init__()

    def handle(self, request):
        if request.path == TOKEN_PATH:
            return MetadataStandIn.handle(self, request)
        return Response(302, raw=b"", headers={"Location": self.target})


def fetch_through_vllm(environment: dict[str, str], allowed: tuple[str, ...] = ("localhost",),
                       host: str = "localhost") -> tuple[str, int, int]:
    """What vLLM's connector did with a URL on `host` that redirects, and how many requests the listed host and the
    stand-in saw. A host other than localhost reaches the listed host as its HTTP proxy (requests' Session honours
    http_proxy), standing in for a resolver that answers the name; the stand-in, on 127.0.0.1, is reached directly."""
    with MetadataStandIn() as metadata:
        with Redirector(f"{metadata.url}{TOKEN_PATH}") as listed:
            if host == "localhost":
                url, route = f"http://localhost:{listed.port}/cat.png", {"NO_PROXY": "*", "no_proxy": "*"}
            else:
                url = f"http://{host}/cat.png"
                route = {"http_proxy": listed.url, "HTTP_PROXY": listed.url, "NO_PROXY": "127.0.0.1",
                         "no_proxy": "127.0.0.1"}
            env = {**environment, **route}
            done = vllm_venv.run(["-c", FETCH, json.dumps(env), url, json.dumps(list(allowed))], input="", text=True,
                                 timeout=120)
            assert done.returncode == 0, done.stderr[-2000:]
            relayed = sum(request.path == TOKEN_PATH for request in listed.requests)
            return (done.stdout.strip().splitlines()[-1], len(listed.requests) - relayed,
                    len(metadata.requests) + relayed)


def stack_environment(**vllm) -> dict[str, str]:
    loaded = settings.load({"access": {"sshSourceRanges": ["198.51.100.7/32"]}, "vllm": vllm}, "my-proj", "dev")
    return dict(serving_spec(loaded.settings).backend_environment)


def test_the_stack_keeps_vllm_on_the_listed_host_when_media_hosts_are_allowed():
    environment = stack_environment(allowedMediaDomains=["upload.wikimedia.org"])
    outcome, asked, reached = fetch_through_vllm(environment)
    assert (asked, reached) == (1, 0), outcome
    assert outcome.startswith("refused"), outcome
    assert environment == {"VLLM_MEDIA_URL_ALLOW_REDIRECTS": "0"}


def test_without_the_switch_vllm_follows_the_redirect_off_the_list():
    """The control: vLLM's default follows the 302 to the stand-in, so the test above can fail."""
    outcome, asked, reached = fetch_through_vllm({})
    assert (asked, reached) == (1, 1), outcome


def test_with_no_media_host_allowed_vllm_refuses_other_hosts_and_still_gets_the_switch():
    """No listed host (the default): vLLM's allow-list is the `.invalid` name only, so it refuses a URL on any other
    host before a fetch. The switch is set all the same (the sentinel host itself passes: the next test)."""
    environment = stack_environment()
    assert environment == {"VLLM_MEDIA_URL_ALLOW_REDIRECTS": "0"}
    outcome, asked, reached = fetch_through_vllm(environment, allowed=(NO_MEDIA_DOMAIN,))
    assert (asked, reached) == (0, 0), outcome
    assert outcome == "refused ValueError", outcome


def test_a_url_on_the_no_media_sentinel_host_is_fetched_but_its_redirect_is_not_followed():
    """vLLM's check lets the sentinel host itself through (`hostname not in allowed_media_domains`), so a URL on
    `media-urls-disabled.invalid` is fetched: `.invalid` answers nowhere (RFC 6761), but a resolver's search list can
    make it a name that does (a pod's `…invalid.svc.cluster.local`). Its redirect must not be followed; the stack
    left the switch unset with no media host allowed, and vLLM followed it (second reader, row 15)."""
    environment = stack_environment()
    outcome, asked, reached = fetch_through_vllm(environment, allowed=(NO_MEDIA_DOMAIN,), host=NO_MEDIA_DOMAIN)
    assert (asked, reached) == (1, 0), outcome
    assert outcome.startswith("refused"), outcome
    # The control: the same URL without the switch is fetched and its redirect followed.
    outcome, asked, reached = fetch_through_vllm({}, allowed=(NO_MEDIA_DOMAIN,), host=NO_MEDIA_DOMAIN)
    assert (asked, reached) == (1, 1), outcome
