"""The node's SSH server answers, checked before the serving step, with a failure that says what to do.

pulumi-command's own dial error (`dial tcp IP:22: i/o timeout`) cannot be changed, and the usual cause
of it here is the firewall: `access.sshSourceRanges` narrowed to a /32 that is no longer this machine's.
So a small dynamic resource dials the port first with pulumi-command's bounds (the serving step's
dial_error_limit and per_dial_timeout, and retry.Until's back-off of at most 5 s between dials) and fails
with the setting, its value, the narrowing command and the billing notice.

A TCP connection is not enough: pulumi-command v1.2.1 bounds only the TCP connect (`ssh.ClientConfig.Timeout`,
which golang.org/x/crypto v0.48.0 `ssh/client.go` documents as "the maximum amount of time for the TCP
connection to establish" and `Dial` passes to net.DialTimeout alone); the version exchange that follows
(`ssh/transport.go` exchangeVersions/readVersion) reads with no deadline. A peer that accepts and never
speaks would hold `pulumi up` for good. So each dial here also sends a client identification and waits,
within the same per-dial bound, for the server's (RFC 4253 section 4.2: `SSH-2.0-softwareversion SP
comments CR LF`, at most 255 characters, possibly after other lines that do not begin with `SSH-`; read as
x/crypto's readVersion reads it: 255 bytes in all). The key exchange and the key are the serving step's.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider

# pulumi-command v1.2.1 provider/pkg/provider/remote/connection.go: retry.Until's delay grows to 5 s at most.
MAX_BACKOFF_SECONDS = 5.0
# Inputs whose change is another node (or another address): dial again.
REDIAL_KEYS = ("host", "port", "nodeUid")
# What x/crypto's client sends first (exchangeVersions writes its line, then reads the server's); sshd
# logs this one closing before the key exchange.
CLIENT_IDENTIFICATION = b"SSH-2.0-tpu-vllm-reachability-check\r\n"
# RFC 4253 section 4.2: protoversion "2.0"; section 5.1: "SSH-1.99-" is a server that also speaks 2.0.
SERVER_IDENTIFICATION_PREFIXES = (b"SSH-2.0-", b"SSH-1.99-")
# x/crypto v0.48.0 ssh/transport.go maxVersionStringBytes: every line up to the identification counts.
MAX_IDENTIFICATION_BYTES = 255


@dataclass(frozen=True)
class DialFailure:
    reason: str
    connected: bool
    """The TCP connection opened (the firewall let it through), but no SSH server identified itself."""


def printable(data: bytes) -> str:
    """The peer's bytes for a message: printable ASCII only, shortened."""
    text = "".join(chr(byte) if 32 <= byte < 127 else "?" for byte in data.rstrip(b"\r\n"))
    return text if len(text) <= 60 else text[:57] + "..."


def read_identification(connection: socket.socket, deadline: float, timeout: float,
                        clock: Any = time.monotonic) -> DialFailure | None:
    """None once the server's SSH 2.0 identification line arrived before `deadline`, else why not."""
    silent = DialFailure(f"it accepted the connection but sent no SSH identification within {timeout:g} s",
                         connected=True)
    pending, read = b"", 0
    while True:
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            if line.startswith(SERVER_IDENTIFICATION_PREFIXES):
                return None
            if line.startswith(b"SSH-"):
                return DialFailure(f"it identified itself as {printable(line)!r}, not SSH 2.0", connected=True)
            # RFC 4253 4.2: "The server MAY send other lines of data before sending the version string."
        if read >= MAX_IDENTIFICATION_BYTES:
            return DialFailure(f"its first {MAX_IDENTIFICATION_BYTES} bytes hold no SSH identification line",
                               connected=True)
        remaining = deadline - clock()
        if remaining <= 0:
            return silent
        connection.settimeout(remaining)
        try:
            chunk = connection.recv(MAX_IDENTIFICATION_BYTES - read)
        except TimeoutError:
            return silent
        except OSError as error:
            return DialFailure(f"it accepted the connection, then: {error.strerror or error.__class__.__name__}",
                               connected=True)
        if not chunk:
            return DialFailure("it accepted the connection and closed it without an SSH identification",
                               connected=True)
        pending += chunk
        read += len(chunk)


def dial_once(host: str, port: int, timeout: float, clock: Any = time.monotonic) -> DialFailure | None:
    """None when a TCP connection opened and an SSH server identified itself on it, all within `timeout`;
    else why not (a connect timeout: dropped packets; refused: nothing listens; connected: no SSH server)."""
    deadline = clock() + timeout
    try:
        connection = socket.create_connection((host, port), timeout=timeout)
    except TimeoutError:
        return DialFailure(f"no answer within {timeout:g} s", connected=False)
    except OSError as error:
        return DialFailure(error.strerror or error.__class__.__name__, connected=False)
    with connection:
        try:
            connection.sendall(CLIENT_IDENTIFICATION)
        except OSError as error:
            return DialFailure(f"it accepted the connection, then: {error.strerror or error.__class__.__name__}",
                               connected=True)
        return read_identification(connection, deadline, timeout, clock)


def dial(host: str, port: int, dials: int, timeout: float, backoff: float,
         sleep: Any = time.sleep) -> DialFailure | None:
    """Up to `dials` attempts, `backoff` (growing, capped) apart; None once one reaches an SSH server, else the
    last failure."""
    failure = DialFailure("no dial made", connected=False)
    for attempt in range(1, dials + 1):
        failure = dial_once(host, port, timeout)
        if failure is None:
            return None
        if attempt < dials:
            sleep(min(backoff * attempt, MAX_BACKOFF_SECONDS))
    return failure


def unreachable_message(props: dict[str, Any], failure: DialFailure) -> str:
    where = f"SSH to the TPU node at {props['host']}:{props['port']}"
    tries = f"after {props['dials']} dials of {props['dialTimeoutSeconds']:g} s"
    if failure.connected:
        # Not the firewall: it let this machine through. The serving step's client would wait for good.
        return (f"{where} reached no SSH server {tries} ({failure.reason}), so the serving step cannot start "
                f"vLLM: its SSH client (pulumi-command) would wait for the server's identification with no time "
                f"limit. Port 22 at that address accepts connections but what answers is not a working sshd "
                f"(the node's sshd is stalled, or another machine holds the address); run `pulumi up` again "
                f"once `ssh-keyscan -T 10 {props['host']}` prints a key. {props['billing']}")
    return (f"{where} did not answer {tries} ({failure.reason}), so the serving step cannot start vLLM. "
            f"{props['cause']} {props['billing']}")


class SshReachableProvider(ResourceProvider):
    """Holds nothing: pickled into state by reference."""

    def create(self, props: dict[str, Any]) -> CreateResult:
        if not props.get("host"):
            raise Exception(unreachable_message(props, DialFailure("the node has no external IP", connected=False)))
        failure = dial(props["host"], int(props["port"]), int(props["dials"]), float(props["dialTimeoutSeconds"]),
                       float(props.get("backoffSeconds", 1.0)))
        if failure is not None:
            raise Exception(unreachable_message(props, failure))
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
    """Succeeds once an SSH server on the node's port identified itself to this machine."""

    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None):
        super().__init__(SshReachableProvider(), name, props, opts)
