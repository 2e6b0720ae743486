"""Why the inference gateway (components/gke/gateway.py), on 127.0.0.1: one agent process keeping its connections
alive (as the openai SDK's pool does while the agent calls at least every 5 s: openai 3.57.0 _constants.py
DEFAULT_CONNECTION_LIMITS, httpx2 2.16.2 Limits keepalive_expiry 5.0; an idler agent reconnects and is placed
afresh), running several conversations, each with its own long prefix, against vLLM-like replicas behind a
connection-level balancer (what the passthrough load balancer does: it picks a backend when a connection opens and
keeps it) and behind a request-level, prefix-aware one (what the gateway's proxies and picker do: a backend per
request, the replica holding the prompt's prefix first).

After a replica is added, the connection-level balancer sends it nothing over the connections already open, not
even the conversations started after it came. The prefix-aware one keeps each conversation on the replica that
holds its prefix (prefix affinity: the old conversations stay where they were) and places the new conversations
afresh, the new replica among the candidates. It models llm-d-router v0.9.0's default profile for calls made one
at a time: every queue is empty and every KV use the same, so those scores tie (scorer/queuedepth/queue.go "if
maxQueueSize == minQueueSize { return 1.0 }"), the prefix scorer (weight 3) picks the holder, and a prompt no
replica holds goes to a replica chosen at random (picker/maxscore: shuffle, then the highest score; seeded here).
Under load the queue and KV scores would also move work off a busy holder; that is not shown.

Both balancers are small real TCP proxies here, each in its own thread; every loop is bounded and every socket
has a timeout.
"""

from __future__ import annotations

import http.client
import itertools
import json
import random
import socket
import threading
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

TIMEOUT = 5.0
CHAT = "/v1/chat/completions"


class Replica:
    """A vLLM-like server: keep-alive HTTP/1.1, answers the chat path with its own name, counts what it served
    by (replica, conversation)."""

    def __init__(self, name: str, served: Counter):
        replica = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True
            timeout = TIMEOUT

            def do_POST(self):  # noqa: N802 (http.server's name)
                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                served[replica.name, request["messages"][0]["content"]] += 1
                body = json.dumps({"object": "chat.completion", "model": replica.name}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.name = name
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Balancer:
    """A TCP listener on 127.0.0.1 in front of a list of replica ports that may grow; `serve` handles one client
    connection."""

    def __init__(self, backends: list[int], serve: Callable[[socket.socket, Balancer], None]):
        self.backends = backends
        self.lock = threading.Lock()
        self.turns = itertools.count()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(TIMEOUT)
        self.port = self.listener.getsockname()[1]
        self.closed = threading.Event()
        self.serve = serve
        self.prefix_holders: dict[bytes, int] = {}
        self.shuffle = random.Random(39)
        threading.Thread(target=self._accept, daemon=True).start()

    def next_backend(self) -> int:
        """Round robin over the replicas there are now."""
        with self.lock:
            return self.backends[next(self.turns) % len(self.backends)]

    def for_prefix(self, prefix: bytes) -> int:
        """The replica holding this prefix, else one at random among the replicas there are now (it then holds
        it)."""
        with self.lock:
            if prefix not in self.prefix_holders:
                self.prefix_holders[prefix] = self.shuffle.choice(self.backends)
            return self.prefix_holders[prefix]

    def add(self, port: int) -> None:
        with self.lock:
            self.backends.append(port)

    def _accept(self):
        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            client.settimeout(TIMEOUT)
            _no_delay(client)
            threading.Thread(target=self.serve, args=(client, self), daemon=True).start()

    def close(self):
        self.closed.set()
        self.listener.close()


def _no_delay(sock: socket.socket) -> None:
    """Forward each chunk at once: with Nagle's algorithm a reply's second write waits for the client's delayed ACK
    (~40 ms a request), time the test would only wait."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def connection_level(client: socket.socket, balancer: Balancer) -> None:
    """One backend per connection, chosen when it opens, bytes piped both ways until either side closes."""
    backend = socket.create_connection(("127.0.0.1", balancer.next_backend()), timeout=TIMEOUT)
    _no_delay(backend)
    threading.Thread(target=_pipe, args=(backend, client), daemon=True).start()
    _pipe(client, backend)


def _read_message(stream) -> bytes | None:
    """One HTTP/1.1 message with a Content-Length body (what the agent and the replicas send), or None at EOF."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        line = stream.readline(65537)
        if not line:
            return None
        head += line
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    return head + stream.read(length)


def _prefix(request: bytes) -> bytes:
    """The conversation's long prefix: its first message (the system prompt)."""
    return json.loads(request.split(b"\r\n\r\n", 1)[1])["messages"][0]["content"].encode()


def request_level(client: socket.socket, balancer: Balancer) -> None:
    """A backend per request: each request read off the client's kept connection goes to the replica holding its
    prefix, or a new one's pick (over a kept connection to that replica), its answer back on the client's
    connection."""
    upstreams: dict[int, tuple[socket.socket, object]] = {}
    reader = client.makefile("rb")
    try:
        while (request := _read_message(reader)) is not None:
            port = balancer.for_prefix(_prefix(request))
            if port not in upstreams:
                upstream = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
                _no_delay(upstream)
                upstreams[port] = (upstream, upstream.makefile("rb"))
            upstream, upstream_reader = upstreams[port]
            upstream.sendall(request)
            answer = _read_message(upstream_reader)
            if answer is None:
                return
            client.sendall(answer)
    except OSError:
        pass
    finally:
        for upstream, _ in upstreams.values():
            upstream.close()
        client.close()


class Agent:
    """An agent process's HTTP pool: a few kept connections, its requests spread over them in turn."""

    def __init__(self, port: int, connections: int = 2):
        self.pool = [http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT) for _ in range(connections)]
        self.turns = itertools.cycle(self.pool)

    def call(self, conversation: str = "the same long prefix") -> str:
        connection = next(self.turns)
        body = json.dumps({"model": "m", "messages": [{"role": "system", "content": conversation}]})
        connection.request("POST", CHAT, body=body, headers={"Content-Type": "application/json"})
        answer = connection.getresponse()
        assert answer.status == 200
        assert answer.getheader("Connection", "").lower() != "close"
        return json.loads(answer.read())["model"]

    def close(self):
        for connection in self.pool:
            connection.close()


OLD = [f"conversation {n}" for n in range(4)]  # started before the third replica
NEW = [f"conversation {n}" for n in range(4, 12)]  # started after it, over the same kept connections
CALLS = 2  # each conversation's calls in each phase


def where_requests_land(serve: Callable[[socket.socket, Balancer], None]) -> tuple[Counter, Counter]:
    """(served before the third replica, served after it), by (replica, conversation)."""
    served: Counter = Counter()
    replicas = [Replica(name, served) for name in ("a", "b")]
    balancer = Balancer([r.port for r in replicas], serve)
    agent = Agent(balancer.port)
    try:
        for conversation in OLD * CALLS:
            agent.call(conversation)
        before = Counter(served)
        added = Replica("c", served)  # the HPA's new replica, ready and in the balancer's list
        replicas.append(added)
        balancer.add(added.port)
        for conversation in (OLD + NEW) * CALLS:
            agent.call(conversation)
        return before, served - before
    finally:
        agent.close()
        balancer.close()
        for replica in replicas:
            replica.close()


def replicas_of(served: Counter, conversations: list[str]) -> set[str]:
    return {replica for replica, conversation in served if conversation in conversations}


def test_a_connection_level_balancer_sends_the_new_replica_nothing_from_kept_connections():
    before, after = where_requests_land(connection_level)
    assert replicas_of(before, OLD) == {"a", "b"}  # the agent's two connections landed on both replicas
    # Not even the conversations started after the replica came: they ride the same connections.
    assert replicas_of(after, OLD + NEW) == {"a", "b"} and sum(after.values()) == len(OLD + NEW) * CALLS


def test_a_prefix_aware_balancer_keeps_each_conversation_and_places_new_ones_on_the_new_replica_too():
    before, after = where_requests_land(request_level)
    # Prefix affinity: every conversation's calls, before and after, on the one replica holding its prefix.
    for conversation in OLD + NEW:
        assert len(replicas_of(before + after, [conversation])) == 1, conversation
    assert "c" not in replicas_of(after, OLD)  # the old conversations stay where their prefixes are
    assert "c" in replicas_of(after, NEW)  # new ones are placed afresh, the new replica among the candidates
    assert sum(after.values()) == len(OLD + NEW) * CALLS


@pytest.mark.parametrize("serve", [connection_level, request_level])
def test_each_balancer_forwards_every_request_whole(serve):
    served: Counter = Counter()
    replica = Replica("only", served)
    balancer = Balancer([replica.port], serve)
    agent = Agent(balancer.port, connections=1)
    try:
        assert [agent.call() for _ in range(3)] == ["only"] * 3 and served["only", "the same long prefix"] == 3
    finally:
        agent.close()
        balancer.close()
        replica.close()
