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
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(os.environ["STARTUP_ROOT"])
UNIT_DIR = ROOT / "etc/systemd/system"
STATE = ROOT / ".systemd"
MAPPED_PREFIXES = ("/etc/", "/var/", "/tmp/", "/mnt/")


LOADED = STATE / "loaded"


def loaded_text(name: str) -> str:
    """The definition systemd holds: read from disk on first use, kept until daemon-reload."""
    loaded = LOADED / name
    if not loaded.is_file():
        path = UNIT_DIR / name
        if not path.is_file():
            sys.exit(f"Unit {name} not found.")
        LOADED.mkdir(parents=True, exist_ok=True)
        loaded.write_text(path.read_text())
    return loaded.read_text()


def changed_on_disk(name: str) -> bool:
    path = UNIT_DIR / name
    return (LOADED / name).is_file() and (not path.is_file() or path.read_text() != (LOADED / name).read_text())


def parse_unit(name: str) -> dict[str, list[str]]:
    section, keys = "", {}
    for raw in loaded_text(name).splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        keys.setdefault(f"{section}.{key}", []).append(value)
    return keys


def command_line(value: str) -> tuple[list[str], bool]:
    """('-docker rm -f x') -> (argv under ROOT, whether a failure is ignored)."""
    ignore = value.startswith("-")
    argv = shlex.split(value.lstrip("-@+!"))
    argv[0] = Path(argv[0]).name if argv[0].startswith("/") else argv[0]
    argv = [str(ROOT) + arg if arg.startswith(MAPPED_PREFIXES) else arg for arg in argv]
    return argv, ignore


def exit_file(name: str) -> Path:
    return STATE / f"{name}.exit"


def active(name: str) -> bool:
    return (STATE / f"{name}.started").exists() and not exit_file(name).exists()


def stop(name: str, keys: dict[str, list[str]]) -> None:
    if not active(name):
        return
    for value in keys.get("Service.ExecStop", []):
        argv, _ = command_line(value)
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while not exit_file(name).exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def start_requirements(name: str, keys: dict[str, list[str]]) -> bool:
    """Required units that are ours (docker.service and the mount unit belong to the VM image)."""
    for requirement in " ".join(keys.get("Unit.Requires", [])).split():
        if not (UNIT_DIR / requirement).is_file() or (STATE / f"{requirement}.active").exists():
            continue
        for value in parse_unit(requirement).get("Service.ExecStart", []):
            argv, ignore = command_line(value)
            if subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode and not ignore:
                print(f"A dependency job for {name} failed. See 'journalctl -xe' for details.", file=sys.stderr)
                return False
        (STATE / f"{requirement}.active").touch()
    return True


def restart(name: str) -> int:
    keys = parse_unit(name)
    stop(name, keys)
    if not start_requirements(name, keys):
        return 1
    for value in keys.get("Service.ExecStartPre", []):
        argv, ignore = command_line(value)
        if subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode and not ignore:
            print(f"Job for {name} failed because the control process exited with error code.", file=sys.stderr)
            return 1
    [start] = keys["Service.ExecStart"]
    argv, _ = command_line(start)
    exit_file(name).unlink(missing_ok=True)
    (STATE / f"{name}.started").touch()
    with open(STATE / f"{name}.log", "ab") as log:
        subprocess.Popen(["sh", "-c", '"$@"; echo $? > "$EXIT_FILE"', "sh", *argv], stdin=subprocess.DEVNULL,
                         stdout=log, stderr=log, start_new_session=True,
                         env={**os.environ, "EXIT_FILE": str(exit_file(name))})
    return 0


def main(argv: list[str]) -> int:
    STATE.mkdir(parents=True, exist_ok=True)
    args = [arg for arg in argv if not arg.startswith("--")]
    verb, units = args[0], args[1:]
    if verb == "daemon-reload":
        shutil.rmtree(LOADED, ignore_errors=True)
        return 0
    if verb == "enable":
        for name in units:
            parse_unit(name)
            (STATE / f"{name}.enabled").touch()
        return 0
    if verb == "reset-failed":
        return 0
    if verb == "restart":
        for name in units:
            if changed_on_disk(name):
                print(f"Warning: The unit file, source configuration file or drop-ins of {name} changed on disk. "
                      "Run 'systemctl daemon-reload' to reload units.", file=sys.stderr)
        return max(restart(name) for name in units)
    if verb == "is-active":
        return 0 if all(active(name) for name in units) else 3
    if verb == "stop":
        for name in units:
            stop(name, parse_unit(name))
        return 0
    sys.exit(f"the fake systemctl does not implement {verb}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
