"""The TPU v2alpha1 API client: a retrying wrapper over the discovery client, and its errors.

pulumi-gcp's V2QueuedResource cannot express a provisioning model, a run duration, metadata, a service
account or data disks; v2alpha1 has them all, so the provider (queued_resource.py) calls it directly.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from components.vm.tpu_request import CLOUD_PLATFORM_SCOPE

# Points the provider at another TPU API root (tests, private endpoints).
ENDPOINT_ENV = "TPU_VLLM_TPU_API_ENDPOINT"
TRANSIENT_STATUSES = {429, 500, 502, 503, 504}
RETRY_INFO_TYPE = "type.googleapis.com/google.rpc.RetryInfo"


class TpuApiError(Exception):
    """A refusal from the TPU API, with what to do about it.

    `transient`: the last attempt failed on an outage (5xx, 429, network, token endpoint), not a refusal,
    so trying again later may work.
    """

    def __init__(self, message: str, status: int | None = None, transient: bool = False):
        super().__init__(message)
        self.status = status
        self.transient = transient


class OperationFailedError(TpuApiError):
    """A long-running operation that finished with an error (google.rpc.Status: `code`, `message`)."""

    def __init__(self, message: str, code: int | None):
        super().__init__(message)
        self.code = code


# google.rpc.Code ALREADY_EXISTS (googleapis google/rpc/code.proto).
ALREADY_EXISTS_CODE = 6


def log(message: str) -> None:
    # The dynamic-provider host has no engine log stream; stderr reaches the CLI's diagnostics.
    try:
        print(f"[tpu-vllm queued resource] {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass  # the CLI reading it is gone (EPIPE): the line has nowhere to go, and the cleanup must go on


def _error_details(error: Any) -> tuple[int, str, dict[str, Any]]:
    status = int(error.resp.status)
    try:
        payload = json.loads(error.content.decode("utf-8")).get("error", {})
    except (ValueError, AttributeError):
        payload = {}
    return status, payload.get("message") or str(error), payload


def _server_retry_delay(error: Any, payload: dict[str, Any]) -> float | None:
    """How long the server asks to wait: a google.rpc.RetryInfo detail's retryDelay (AIP-193; the proto3 JSON
    of a Duration, "7s"), or an HTTP Retry-After of whole seconds; None when it says nothing."""
    for detail in payload.get("details") or []:
        if isinstance(detail, dict) and detail.get("@type") == RETRY_INFO_TYPE:
            match = re.fullmatch(r"(\d+(?:\.\d+)?)s", str(detail.get("retryDelay", "")))
            if match:
                return float(match.group(1))
    retry_after = error.resp.get("retry-after")
    return float(retry_after) if retry_after and retry_after.isdigit() else None


def _explain(action: str, status: int, message: str, payload: dict[str, Any], api_name: str = "TPU API",
             admin_role: str = "roles/tpu.admin") -> str:
    hints = []
    for detail in payload.get("details", []):
        permission = (detail.get("metadata") or {}).get("permission")
        if permission:
            hints.append(f"missing permission: {permission}")
        for violation in detail.get("fieldViolations", []):
            hints.append(f"field {violation.get('field')}: {violation.get('description')}")
    if status == 403 and not hints:
        hints.append(f"the deployer needs {admin_role} on the project")
    if status == 401:
        hints.append(f"the credentials were not accepted; {SIGN_IN_FIX}")
    suffix = f" ({'; '.join(hints)})" if hints else ""
    # Compute Engine's errors carry a reason per item (`errors[].reason`), the TPU API's a `status`.
    reason = payload.get("status") or ",".join(str(item.get("reason")) for item in payload.get("errors") or []
                                               if isinstance(item, dict) and item.get("reason"))
    return f"{api_name} refused {action} ({status} {reason}): {message}{suffix}".replace(" )", ")")


SIGN_IN_FIX = ("sign in again with `gcloud auth application-default login`, or point "
               "GOOGLE_APPLICATION_CREDENTIALS at a valid key")


def message_of(error: BaseException) -> str:
    # google-auth errors carry (message, raw response) as args; the message alone reads better.
    return f"{error.__class__.__name__}: {error.args[0] if error.args else error}"


def _is_transient_fault(error: Exception) -> bool:
    """A network or token-endpoint failure worth another attempt, as opposed to a refusal or a bug."""
    import http.client

    import google.auth.exceptions
    import httplib2

    if isinstance(error, google.auth.exceptions.RefreshError):
        return error.retryable  # google-auth's own verdict: 5xx/429 from the token endpoint, not a refusal
    if isinstance(error, google.auth.exceptions.DefaultCredentialsError):
        return False  # no usable credentials (one of them is also an OSError)
    # ServerNotFoundError: a failed DNS lookup. TransportError: the token refresh could not connect
    # (google-auth-httplib2 wraps httplib2 and http.client errors in it).
    return isinstance(error, (OSError, http.client.HTTPException, httplib2.ServerNotFoundError,
                              google.auth.exceptions.TransportError))


def _permanent_fault(action: str, error: Exception, api_name: str = "TPU API",
                     endpoint_env: str = ENDPOINT_ENV) -> TpuApiError | None:
    """The clear error for a failure no retry fixes; None for one this module does not know."""
    import google.auth.exceptions
    import httplib2

    if isinstance(error, google.auth.exceptions.GoogleAuthError):
        return TpuApiError(f"Google credentials failed during {action} ({message_of(error)}); {SIGN_IN_FIX}")
    if isinstance(error, httplib2.HttpLib2Error):
        return TpuApiError(f"{api_name} request {action} failed ({message_of(error)}); check "
                           f"{endpoint_env} and the proxy settings (HTTPS_PROXY, NO_PROXY) if set")
    return None


@dataclass
class TpuApi:
    """A thin, retrying wrapper over the discovery client. Built fresh in every provider call. The class
    attributes name the API in what it says; compute_api.ComputeApi is the same wrapper over Compute Engine."""

    API_NAME: ClassVar[str] = "TPU API"
    ADMIN_ROLE: ClassVar[str] = "roles/tpu.admin"
    ENDPOINT: ClassVar[str] = ENDPOINT_ENV

    retry_base_seconds: float = 1.0
    max_attempts: int = 6
    sleep: Any = field(default=lambda seconds: time.sleep(seconds), repr=False)
    clock: Any = field(default=lambda: time.monotonic(), repr=False)
    _service: Any = field(default=None, repr=False)
    _collections: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def service(self) -> Any:
        if self._service is None:
            import google.auth
            from google.api_core.client_options import ClientOptions
            from googleapiclient import discovery

            credentials, _ = google.auth.default(scopes=[CLOUD_PLATFORM_SCOPE])
            endpoint = os.environ.get(ENDPOINT_ENV)
            self._service = discovery.build(
                "tpu", "v2alpha1", credentials=credentials, static_discovery=True,
                cache_discovery=False,
                client_options=ClientOptions(api_endpoint=endpoint) if endpoint else None,
            )
        return self._service

    def _collection(self, name: str) -> Any:
        """projects.locations.<name> of the service, made once: each discovery Resource builds every method of
        its collection (parameters and docstrings) when it is made, so one per request cost more CPU than the
        request (googleapis/google-api-python-client googleapiclient/discovery.py, Resource._add_basic_methods and
        createMethod, v2.202.0)."""
        if name not in self._collections:
            self._collections[name] = getattr(self.service.projects().locations(), name)()
        return self._collections[name]

    def say(self, message: str) -> None:
        log(message)

    def call(self, action: str, build_request: Any, allow: tuple[int, ...] = ()) -> Any:
        """Run a request; retry transient faults, honour Retry-After; `allow` statuses return None."""
        from googleapiclient.errors import HttpError

        delay = self.retry_base_seconds
        for attempt in range(1, self.max_attempts + 1):
            try:
                reply = build_request().execute(num_retries=0)
            except HttpError as error:
                status, message, payload = _error_details(error)
                if status in allow:
                    return None
                transient = status in TRANSIENT_STATUSES
                if not transient or attempt == self.max_attempts:
                    raise TpuApiError(_explain(action, status, message, payload, self.API_NAME, self.ADMIN_ROLE),
                                      status, transient) from None
                wait = _server_retry_delay(error, payload)
                wait = delay if wait is None else wait
                self.say(f"{action}: {status}, retrying in {wait:g}s ({attempt}/{self.max_attempts})")
            except Exception as error:
                if not _is_transient_fault(error):
                    permanent = _permanent_fault(action, error, self.API_NAME, self.ENDPOINT)
                    if permanent is None:
                        raise
                    raise permanent from None
                if attempt == self.max_attempts:
                    raise TpuApiError(
                        f"{self.API_NAME} unreachable during {action} after {attempt} attempts ({message_of(error)}); "
                        "check this machine's connection to Google APIs (DNS, proxy, firewall) and try again",
                        transient=True,
                    ) from None
                wait = delay
                self.say(f"{action}: {message_of(error)}, retrying in {wait:g}s ({attempt}/{self.max_attempts})")
            else:
                if not isinstance(reply, dict):  # e.g. a proxy's HTML page: not the API at all
                    raise TpuApiError(f"{self.API_NAME} answered {action} with something other than JSON: "
                                      f"{str(reply)[:120]!r}; check {self.ENDPOINT} and any proxy in between")
                return reply
            self.sleep(min(wait, 60.0))
            delay *= 2
        raise AssertionError("unreachable")

    def through_outages(self, read: Any, deadline: float, poll: float, waiting_for: str) -> Any:
        """`read()` (a call with its own short retry), tried again every `poll` while it fails on an
        outage, until `deadline`. A queue wait lasts up to an hour and a half: a few minutes without the
        API must not end it."""
        while True:
            try:
                return read()
            except TpuApiError as error:
                if not error.transient:
                    raise
                left = deadline - self.clock()
                if left <= 0:
                    raise TpuApiError(f"{str(error).rstrip('.')}; still failing when the time to wait for "
                                      f"{waiting_for} ran out", error.status, transient=True) from None
                self.say(f"waiting for {waiting_for}: {str(error).rstrip('.')}; trying again in {poll:g}s "
                         f"({duration(left)} left)")
                self.sleep(poll)

    def create(self, parent: str, queued_resource_id: str, body: dict[str, Any], request_id: str) -> dict[str, Any]:
        """`request_id` is the same on every retry, so a retry after a lost reply is the same request."""
        return self.call("queuedResources.create", lambda: self._collection("queuedResources").create(
            parent=parent, queuedResourceId=queued_resource_id, requestId=request_id, body=body))

    def get(self, name: str) -> dict[str, Any] | None:
        return self.call("queuedResources.get", lambda: self._collection("queuedResources").get(
            name=name), allow=(404,))

    def delete(self, name: str) -> dict[str, Any] | None:
        return self.call("queuedResources.delete", lambda: self._collection("queuedResources").delete(
            name=name, force=True), allow=(404,))

    def get_node(self, name: str) -> dict[str, Any] | None:
        return self.call("nodes.get", lambda: self._collection("nodes").get(name=name), allow=(404,))

    def get_operation(self, name: str) -> dict[str, Any]:
        return self.call("operations.get", lambda: self._collection("operations").get(name=name))

    def wait_operation(self, operation: dict[str, Any], action: str, deadline: float, poll: float) -> None:
        read = functools.partial(self.get_operation, operation.get("name"))
        while not operation.get("done"):
            if self.clock() > deadline:
                raise TpuApiError(f"{action}: operation {operation.get('name')} did not finish in time")
            self.sleep(poll)
            operation = self.through_outages(read, deadline, poll, f"the {action} operation")
        if operation.get("error"):
            error = operation["error"]
            raise OperationFailedError(f"{action} failed: {error.get('message')} (code {error.get('code')})",
                                       error.get("code"))


def duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"
