"""The node's SSH port answers, checked before the serving step, with a failure that says what to do.

pulumi-command's own dial error (`dial tcp IP:22: i/o timeout`) cannot be changed, and the usual cause
of it here is the firewall: `access.sshSourceRanges` narrowed to a /32 that is no longer this machine's.
So a small dynamic resource dials the port first with pulumi-command's bounds (the serving step's
dial_error_limit and per_dial_timeout, and retry.Until's back-off of at most 5 s between dials) and fails
with the setting, its value, the narrowing command and the billing notice. It only opens a TCP connection
(what a firewall lets through or drops); the SSH handshake and the key are the serving step's.
"""

from __future__ import annotations

import socket
import time
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider

# pulumi-command v1.2.1 provider/pkg/provider/remote/connection.go: retry.Until's delay grows to 5 s at most.
MAX_BACKOFF_SECONDS = 5.0
# Inputs whose change is another node (or another address): dial again.
REDIAL_KEYS = ("host", "port", "nodeUid")


def dial_once(host: str, port: int, timeout: float) -> str | None:
    """None when a TCP connection opened, else why not (timeout: dropped packets; refused: nothing listens)."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except TimeoutError:
        return f"no answer within {timeout:g} s"
    except OSError as error:
        return error.strerror or error.__class__.__name__


def dial(host: str, port: int, dials: int, timeout: float, backoff: float, sleep: Any = time.sleep) -> str | None:
    """Up to `dials` attempts, `backoff` (growing, capped) apart; None once one connects, else the last reason."""
    reason = "no dial made"
    for attempt in range(1, dials + 1):
        reason = dial_once(host, port, timeout)
        if reason is None:
            return None
        if attempt < dials:
            sleep(min(backoff * attempt, MAX_BACKOFF_SECONDS))
    return reason


def unreachable_message(props: dict[str, Any], reason: str) -> str:
    return (f"SSH to the TPU node at {props['host']}:{props['port']} did not answer after {props['dials']} dials "
            f"of {props['dialTimeoutSeconds']:g} s ({reason}), so the serving step cannot start vLLM. "
            f"{props['cause']} {props['billing']}")


class SshReachableProvider(ResourceProvider):
    """Holds nothing: pickled into state by reference."""

    def create(self, props: dict[str, Any]) -> CreateResult:
        if not props.get("host"):
            raise Exception(unreachable_message(props, "the node has no external IP"))
        reason = dial(props["host"], int(props["port"]), int(props["dials"]), float(props["dialTimeoutSeconds"]),
                      float(props.get("backoffSeconds", 1.0)))
        if reason is not None:
            raise Exception(unreachable_message(props, reason))
        return CreateResult(id_=f"{props['host']}:{props['port']}", outs=props)

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        replaces = [key for key in REDIAL_KEYS if olds.get(key) != news.get(key)]
        return DiffResult(changes=bool(replaces) or olds != news, replaces=replaces, delete_before_replace=True)

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]):
        from pulumi.dynamic import UpdateResult

        return UpdateResult(outs=news)  # only the message texts changed: nothing to dial

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return ReadResult(id_=id_, outs=props)  # a refresh does not dial: the node may be gone after its run


class SshReachable(Resource, module="tpu-vllm", name="SshReachable"):
    """Succeeds once the node's SSH port accepted a connection from this machine."""

    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None):
        super().__init__(SshReachableProvider(), name, props, opts)
