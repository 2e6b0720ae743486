"""Adversarial review: each test shows a gap found by trying a variant; each fails on the reviewed code."""

from __future__ import annotations

import google.auth
import google.auth.exceptions
import httplib2
import pytest
from google.auth.credentials import AnonymousCredentials

from components import settings
from components.vm import queued_resource as qr
from tests.fakes.tpu_api import FakeTpuApi, Fault

DEV_RAW = {"access": {"sshSourceRanges": ["198.51.100.7/32"]}}


# 2. front.image is not checked at all (vllm.image is): an empty or option-like value reaches `docker run`.

@pytest.mark.parametrize("image", ["", "--privileged", "nginx latest"])
def test_front_image_is_checked_like_vllm_image(image):
    with pytest.raises(settings.SettingsError) as caught:
        settings.load({**DEV_RAW, "front": {"image": image}}, "my-proj", "dev")
    assert "front.image" in caught.value.render()


# 4. The provider's retry covers HttpError and OSError only. httplib2 (the discovery client's transport)
#    raises ServerNotFoundError (not an OSError) on a DNS blip, and google-auth raises TransportError when
#    a token refresh cannot connect: both escape as tracebacks instead of being retried.

@pytest.mark.parametrize("fault", [httplib2.ServerNotFoundError("Unable to find the server at tpu.googleapis.com"),
                                   google.auth.exceptions.TransportError("token refresh: connection refused")],
                         ids=["dns", "token-refresh"])
def test_a_transient_transport_error_is_retried(fault):
    calls = []

    class Request:
        def execute(self, num_retries=0):
            calls.append(1)
            if len(calls) == 1:
                raise fault
            return {"ok": True}

    api = qr.TpuApi(retry_base_seconds=0, sleep=lambda seconds: None)
    assert api.call("queuedResources.get", Request) == {"ok": True}


# 5. A lasting outage while the request waits in the queue ends the create with an error, but the queued
#    resource stays on the server, untracked by Pulumi (a failed dynamic create records nothing), and the
#    message does not say so: the user may `pulumi destroy` and walk away while it goes ACTIVE and bills.

@pytest.fixture
def tpu_api(monkeypatch):
    monkeypatch.setattr(qr.time, "sleep", lambda seconds: None)
    monkeypatch.setattr(google.auth, "default", lambda scopes=None: (AnonymousCredentials(), None))
    with FakeTpuApi(states=["WAITING_FOR_RESOURCES"] * 50 + ["ACTIVE"]) as server:
        monkeypatch.setenv(qr.ENDPOINT_ENV, server.url + "/")
        yield server


def test_an_outage_during_the_queue_wait_never_leaves_an_unmentioned_request(tpu_api):
    from tests.test_queued_resource import HAND_DELETE, NAME, props
    tpu_api.inject(Fault("GET", "/queuedResources/", 503, times=100))
    with pytest.raises(qr.TpuApiError) as caught:
        qr.QueuedResourceProvider().create(props())
    still_there = NAME in tpu_api.queued and NAME not in tpu_api.deleted
    assert not still_there or HAND_DELETE in str(caught.value), (
        f"the request is left on the server and the error does not say so: {caught.value}")
