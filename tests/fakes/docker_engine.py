"""A fake Docker Engine API on a unix socket, enough for the real `docker` CLI's run, rm -f, inspect, logs, stop.

Every request is recorded (method, path without the API version, query, raw body), so a test can assert
that no secret reached the engine in a create body (Env, Cmd, Entrypoint, HostConfig) or anywhere else.
A created container "runs" until it is stopped or removed; `docker run` in the foreground stays attached
until then, as under systemd. Nothing is executed: the containers are records.

Its answers are moby's (moby/moby @b985e23, docker-v29.7.2-150; read, not copied): api/swagger.yaml (statuses
per route, API 1.56), daemon/errors.go, daemon/names.go, daemon/delete.go, daemon/stop.go, daemon/kill.go and
daemon/server/router/container/container_routes.go (texts, and the logs Content-Type by API version).
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import socketserver
import struct
import tempfile
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

API_VERSION = "1.41"
# A foreground `docker run` is held at most this long (a test never waits on it).
MAX_ATTACH_SECONDS = 120


@dataclass
class EngineRequest:
    method: str
    path: str
    query: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"{}")


@dataclass
class Container:
    id: str
    name: str
    create: dict[str, Any]
    running: bool = False
    started: bool = False
    exit_code: int = 0
    stopped: threading.Event = field(default_factory=threading.Event)


class FakeDockerEngine:
    """logs: container name -> log text; exit_on_start: container name -> exit code right after start."""

    def __init__(self) -> None:
        self.requests: list[EngineRequest] = []
        self.containers: dict[str, Container] = {}
        self.logs: dict[str, str] = {}
        self.exit_on_start: dict[str, int] = {}
        self.log_reads: dict[str, int] = {}
        self.lock = threading.Lock()
        # Unix socket paths are limited to ~107 bytes: keep it short, outside pytest's deep tmp tree.
        self.directory = Path(tempfile.mkdtemp(prefix="dk"))
        self.socket_path = self.directory / "docker.sock"
        self.host = f"unix://{self.socket_path}"
        engine = self

        class Handler(_Handler):
            pass

        Handler.engine = engine
        self.server = socketserver.ThreadingUnixStreamServer(str(self.socket_path), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self) -> FakeDockerEngine:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        with self.lock:
            for container in self.containers.values():
                container.stopped.set()
        self.server.shutdown()
        self.server.server_close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def client_env(self, config_dir: Path) -> dict[str, str]:
        """What the CLI needs to talk to this engine and nothing else (no ~/.docker)."""
        return {"DOCKER_HOST": self.host, "DOCKER_CONFIG": str(config_dir), "DOCKER_CLI_HINTS": "false"}

    def creates(self, name: str | None = None) -> list[dict[str, Any]]:
        return [r.json() for r in self.requests
                if r.method == "POST" and r.path == "/containers/create" and name in (None, r.query.get("name"))]

    def find(self, ref: str) -> Container | None:
        if ref in self.containers:
            return self.containers[ref]
        return next((c for c in self.containers.values() if c.id.startswith(ref)), None)

    def stop(self, container: Container, code: int) -> None:
        if container.running:
            container.exit_code = code
        container.running = False
        container.stopped.set()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    engine: FakeDockerEngine

    def log_message(self, *args: Any) -> None:  # a unix socket has no client address to log
        pass

    def _reply(self, status: int, body: Any = None, content_type: str = "application/json",
               headers: dict[str, str] | None = None) -> None:
        data = b"" if status in (204, 304) or body is None else \
            body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        for key, value in {"Api-Version": API_VERSION, "Ostype": "linux", **(headers or {})}.items():
            self.send_header(key, value)
        if status not in (204, 304):
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data and self.command != "HEAD":
            self.wfile.write(data)

    def _route(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = self._read_chunked()
        parts = urlsplit(self.path)
        version = re.match(r"^/v([0-9.]+)/", parts.path)
        self.api_version = version.group(1) if version else API_VERSION
        path = re.sub(r"^/v[0-9.]+(?=/)", "", parts.path)
        query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        engine = self.engine
        with engine.lock:
            engine.requests.append(EngineRequest(self.command, path, query, body))
        if path == "/_ping":
            self._reply(200, b"OK", "text/plain", {"Docker-Experimental": "false", "Builder-Version": "1"})
            return
        if path == "/containers/create" and self.command == "POST":
            self._create(query.get("name", ""), json.loads(body or b"{}"))
            return
        if path == "/images/create" and self.command == "POST":
            self._reply(200, b'{"status":"pulled by the fake"}\n')
            return
        match = re.fullmatch(r"/containers/([^/]+)(/[a-z]+)?", path)
        container = engine.find(match.group(1)) if match else None
        if match and container is None:
            self._reply(404, {"message": f"No such container: {match.group(1)}"})
            return
        if container is None:
            self._reply(404, {"message": f"the fake engine does not implement {self.command} {path}"})
            return
        action = (match.group(2) or "").lstrip("/")
        handler = {("GET", "json"): self._inspect, ("GET", "logs"): self._logs, ("POST", "start"): self._start,
                   ("POST", "attach"): self._attach, ("POST", "wait"): self._wait, ("POST", "stop"): self._stop,
                   ("POST", "kill"): self._kill, ("DELETE", ""): self._remove}.get((self.command, action))
        if handler is None:
            self._reply(404, {"message": f"the fake engine does not implement {self.command} {path}"})
            return
        self.ref = match.group(1)  # the name or id as the client wrote it; moby's texts quote it so
        handler(container, query)

    do_GET = do_POST = do_DELETE = do_HEAD = do_PUT = _route  # noqa: N815

    def _read_chunked(self) -> bytes:
        data = b""
        while True:
            size = int(self.rfile.readline().strip() or b"0", 16)
            if size == 0:
                self.rfile.readline()
                return data
            data += self.rfile.read(size)
            self.rfile.readline()

    def _create(self, name: str, spec: dict[str, Any]) -> None:
        engine = self.engine
        with engine.lock:
            existing = engine.containers.get(name)
            if existing is not None:
                self._reply(409, {"message": f'Conflict. The container name "/{name}" is already in use by container '
                                             f'"{existing.id}". You have to remove (or rename) that container to be '
                                             "able to reuse that name."})
                return
            container = Container(id=uuid.uuid4().hex + uuid.uuid4().hex, name=name or uuid.uuid4().hex[:12],
                                  create=spec)
            engine.containers[container.name] = container
        self._reply(201, {"Id": container.id, "Warnings": []})

    def _inspect(self, container: Container, query: dict[str, str]) -> None:
        spec = container.create
        self._reply(200, {
            "Id": container.id, "Name": "/" + container.name, "Image": spec.get("Image"),
            "State": {"Status": "running" if container.running else ("exited" if container.started else "created"),
                      "Running": container.running, "ExitCode": container.exit_code},
            "Config": {"Tty": False, "Env": spec.get("Env"), "Cmd": spec.get("Cmd"),
                       "Entrypoint": spec.get("Entrypoint"), "Image": spec.get("Image")},
            "HostConfig": spec.get("HostConfig", {}),
        })

    def _frames(self, container: Container, tail: str | None) -> bytes:
        lines = self.engine.logs.get(container.name, "").splitlines(keepends=True)
        if tail not in (None, "all"):
            lines = lines[-int(tail):] if int(tail) else []
        return b"".join(struct.pack(">BxxxL", 1, len(line.encode())) + line.encode() for line in lines)

    def _logs(self, container: Container, query: dict[str, str]) -> None:
        with self.engine.lock:
            self.engine.log_reads[container.name] = self.engine.log_reads.get(container.name, 0) + 1
        # container_routes.go getContainersLogs: multiplexed-stream only from API 1.42 on (no TTY), raw-stream before.
        multiplexed = tuple(map(int, self.api_version.split("."))) >= (1, 42)
        content_type = f"application/vnd.docker.{'multiplexed' if multiplexed else 'raw'}-stream"
        self._reply(200, self._frames(container, query.get("tail")), content_type)

    def _start(self, container: Container, query: dict[str, str]) -> None:
        with self.engine.lock:
            container.running, container.started = True, True
            if container.name in self.engine.exit_on_start:
                self.engine.stop(container, self.engine.exit_on_start[container.name])
        self._reply(204)

    def _attach(self, container: Container, query: dict[str, str]) -> None:
        # The CLI hijacks the connection: 101, then the container's output as multiplexed frames until it ends.
        self.wfile.write(b"HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\n"
                         b"Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
        self.wfile.write(self._frames(container, None))
        self.wfile.flush()
        container.stopped.wait(MAX_ATTACH_SECONDS)
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def _wait(self, container: Container, query: dict[str, str]) -> None:
        self.send_response(200)
        self.send_header("Api-Version", API_VERSION)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        container.stopped.wait(MAX_ATTACH_SECONDS)
        data = json.dumps({"StatusCode": container.exit_code, "Error": None}).encode() + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n0\r\n\r\n")

    def _stop(self, container: Container, query: dict[str, str]) -> None:
        with self.engine.lock:
            if not container.running:
                # daemon/stop.go: errdefs.NotModified("container is already stopped"), a 304 (no body).
                self._reply(304)
                return
            self.engine.stop(container, 0)
        self._reply(204)

    def _kill(self, container: Container, query: dict[str, str]) -> None:
        with self.engine.lock:
            if not container.running:
                # daemon/kill.go kill -> errNotRunning (errors.go, a Conflict), wrapped by postContainersKill.
                self._reply(409, {"message": f"cannot kill container: {self.ref}: container {container.id} is not "
                                             "running"})
                return
            self.engine.stop(container, 137)
        self._reply(204)

    def _remove(self, container: Container, query: dict[str, str]) -> None:
        with self.engine.lock:
            if container.running and query.get("force") not in ("1", "true"):
                # daemon/delete.go cleanupContainer's Conflict, wrapped by containerRm.
                self._reply(409, {"message": f'cannot remove container "{self.ref}": container is running: stop the '
                                             "container before removing or force remove"})
                return
            self.engine.stop(container, 137)
            del self.engine.containers[container.name]
        self._reply(204)
