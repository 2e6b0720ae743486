"""A fake `systemctl` that runs the units serve.sh installed, under $STARTUP_ROOT, the way systemd would.

restart: first each required oneshot unit that serve.sh installed (once: RemainAfterExit), then ExecStartPre
lines in order (a leading '-' ignores failure), then ExecStart in the background;
definitions: a unit is loaded from disk when first used and again at daemon-reload, never otherwise; a restart
of a unit whose file changed since only warns and runs the loaded (old) definition, as systemctl does (systemd
src/systemctl/systemctl-start-unit.c @69f79ee start_unit_one: the job is enqueued, then
`if (need_daemon_reload(bus, name) > 0) warn_unit_file_changed(name)`; the text is systemctl-util.c @ffdd28c);
is-active: true while that ExecStart runs; stop: ExecStop, then wait for ExecStart to end. Absolute paths in
the command lines (/etc, /var, /tmp, /mnt) are taken under $STARTUP_ROOT; executables resolve through PATH
(the test's shims), so `docker` is the real CLI talking to the fake engine. Nothing is daemonised for long:
a foreground `docker run` ends when its container is stopped or removed, or when the fake engine stops.

Two ways to run it, with the same answers: `python systemctl.py VERB UNIT...` (a process per call), or
`SystemctlServer` (one per test module: a loopback server that answers every call, each made by `client_shim`,
a bash `systemctl` that sends its argv, working directory and environment and prints the reply). The fake
keeps no state in the process: all of it is under the caller's $STARTUP_ROOT, so one server serves every test.
"""

from __future__ import annotations

import io
import os
import shlex
import shutil
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

MAPPED_PREFIXES = ("/etc/", "/var/", "/tmp/", "/mnt/")


class UnitNotFoundError(Exception):
    """systemctl's "Unit NAME not found." (exit 1)."""


class Systemd:
    """One call's view of the fake node: the caller's environment (STARTUP_ROOT, PATH with the test's shims) and
    working directory, and where its messages go."""

    def __init__(self, env: Mapping[str, str], cwd: str | None = None, err: TextIO = sys.stderr):
        self.env = dict(env)
        self.cwd = cwd
        self.err = err
        self.root = Path(self.env["STARTUP_ROOT"])
        self.unit_dir = self.root / "etc/systemd/system"
        self.state = self.root / ".systemd"
        self.loaded = self.state / "loaded"

    def loaded_text(self, name: str) -> str:
        """The definition systemd holds: read from disk on first use, kept until daemon-reload."""
        loaded = self.loaded / name
        if not loaded.is_file():
            path = self.unit_dir / name
            if not path.is_file():
                raise UnitNotFoundError(f"Unit {name} not found.")
            self.loaded.mkdir(parents=True, exist_ok=True)
            loaded.write_text(path.read_text())
        return loaded.read_text()

    def changed_on_disk(self, name: str) -> bool:
        path, loaded = self.unit_dir / name, self.loaded / name
        return loaded.is_file() and (not path.is_file() or path.read_text() != loaded.read_text())

    def parse_unit(self, name: str) -> dict[str, list[str]]:
        section, keys = "", {}
        for raw in self.loaded_text(name).splitlines():
            line = raw.strip()
            if not line or line.startswith(("#", ";")):
                continue
            if line.startswith("["):
                section = line.strip("[]")
                continue
            key, _, value = line.partition("=")
            keys.setdefault(f"{section}.{key}", []).append(value)
        return keys

    def command_line(self, value: str) -> tuple[list[str], bool]:
        """('-docker rm -f x') -> (argv under ROOT, whether a failure is ignored)."""
        ignore = value.startswith("-")
        argv = shlex.split(value.lstrip("-@+!"))
        argv[0] = Path(argv[0]).name if argv[0].startswith("/") else argv[0]
        argv = [str(self.root) + arg if arg.startswith(MAPPED_PREFIXES) else arg for arg in argv]
        return argv, ignore

    def run(self, argv: list[str]) -> int:
        """A unit's command, found on the caller's PATH (subprocess looks it up in `env`), run in its environment."""
        return subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env=self.env, cwd=self.cwd).returncode

    def exit_file(self, name: str) -> Path:
        return self.state / f"{name}.exit"

    def active(self, name: str) -> bool:
        return (self.state / f"{name}.started").exists() and not self.exit_file(name).exists()

    def stop(self, name: str, keys: dict[str, list[str]]) -> None:
        if not self.active(name):
            return
        for value in keys.get("Service.ExecStop", []):
            self.run(self.command_line(value)[0])
        deadline = time.monotonic() + 20
        while not self.exit_file(name).exists() and time.monotonic() < deadline:
            time.sleep(0.05)

    def start_requirements(self, name: str, keys: dict[str, list[str]]) -> bool:
        """Required units that are ours (docker.service and the mount unit belong to the VM image)."""
        for requirement in " ".join(keys.get("Unit.Requires", [])).split():
            if not (self.unit_dir / requirement).is_file() or (self.state / f"{requirement}.active").exists():
                continue
            for value in self.parse_unit(requirement).get("Service.ExecStart", []):
                argv, ignore = self.command_line(value)
                if self.run(argv) and not ignore:
                    print(f"A dependency job for {name} failed. See 'journalctl -xe' for details.", file=self.err)
                    return False
            (self.state / f"{requirement}.active").touch()
        return True

    def restart(self, name: str) -> int:
        keys = self.parse_unit(name)
        self.stop(name, keys)
        if not self.start_requirements(name, keys):
            return 1
        for value in keys.get("Service.ExecStartPre", []):
            argv, ignore = self.command_line(value)
            if self.run(argv) and not ignore:
                print(f"Job for {name} failed because the control process exited with error code.", file=self.err)
                return 1
        [start] = keys["Service.ExecStart"]
        argv, _ = self.command_line(start)
        self.exit_file(name).unlink(missing_ok=True)
        (self.state / f"{name}.started").touch()
        with open(self.state / f"{name}.log", "ab") as log:
            subprocess.Popen(["sh", "-c", '"$@"; echo $? > "$EXIT_FILE"', "sh", *argv], stdin=subprocess.DEVNULL,
                             stdout=log, stderr=log, start_new_session=True, cwd=self.cwd,
                             env={**self.env, "EXIT_FILE": str(self.exit_file(name))})
        return 0

    def call(self, argv: list[str]) -> int:
        self.state.mkdir(parents=True, exist_ok=True)
        args = [arg for arg in argv if not arg.startswith("--")]
        verb, units = args[0], args[1:]
        if verb == "daemon-reload":
            shutil.rmtree(self.loaded, ignore_errors=True)
            return 0
        if verb == "enable":
            for name in units:
                self.parse_unit(name)
                (self.state / f"{name}.enabled").touch()
            return 0
        if verb == "reset-failed":
            return 0
        if verb == "restart":
            for name in units:
                if self.changed_on_disk(name):
                    print(f"Warning: The unit file, source configuration file or drop-ins of {name} changed on "
                          "disk. Run 'systemctl daemon-reload' to reload units.", file=self.err)
            return max(self.restart(name) for name in units)
        if verb == "is-active":
            return 0 if all(self.active(name) for name in units) else 3
        if verb == "stop":
            for name in units:
                self.stop(name, self.parse_unit(name))
            return 0
        print(f"the fake systemctl does not implement {verb}", file=self.err)
        return 1

    def main(self, argv: list[str]) -> int:
        try:
            return self.call(argv)
        except UnitNotFoundError as missing:
            print(missing, file=self.err)
            return 1


class SystemctlServer:
    """Answers the calls of `client_shim` on 127.0.0.1 (a free port), one at a time, as the script would.

    A request is NUL-terminated fields: argc, the arguments, the working directory, then the caller's
    environment entries (NAME=value) and an empty field; the reply: the exit status, stdout, stderr."""

    def __init__(self) -> None:
        lock = threading.Lock()

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                fields, buffer = [], b""
                while True:
                    chunk = self.request.recv(65536)
                    if not chunk:
                        return  # the client went away before its request was whole
                    buffer += chunk
                    *done, buffer = buffer.split(b"\0")
                    fields.extend(field.decode("utf-8", "surrogateescape") for field in done)
                    argc = int(fields[0]) if fields else 0
                    if len(fields) > argc + 2 and fields[-1] == "":
                        break
                argv, cwd = fields[1:argc + 1], fields[argc + 1]
                env = dict(entry.split("=", 1) for entry in fields[argc + 2:-1] if "=" in entry)
                err = io.StringIO()
                with lock:
                    code = Systemd(env, cwd, err).main(argv)
                reply = [str(code), "", err.getvalue()]
                self.wfile.write(b"".join(part.encode("utf-8", "surrogateescape") + b"\0" for part in reply))

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
        self.server.daemon_threads = True
        self.server.allow_reuse_address = True
        self.server.server_bind()
        self.server.server_activate()
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> SystemctlServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def client_shim(self) -> str:
        """The body of a bash `systemctl` (for tests.shims.make_shims): bash builtins only, no process of its own
        beyond the shim's; it sends the environment it was started with (/proc/self/environ, as exec'd)."""
        return (f"exec 3<>/dev/tcp/127.0.0.1/{self.port} || exit 1\n"
                'printf "%s\\0" "$#" "$@" "$PWD" >&3\n'
                'while IFS= read -r -d "" _entry; do printf "%s\\0" "$_entry"; done </proc/$$/environ >&3\n'
                'printf "\\0" >&3\n'
                'IFS= read -r -d "" _code <&3; IFS= read -r -d "" _out <&3; IFS= read -r -d "" _err <&3\n'
                'printf "%s" "$_out"; printf "%s" "$_err" >&2\n'
                'exit "${_code:-1}"')


def main(argv: list[str]) -> int:
    return Systemd(os.environ, os.getcwd()).main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
