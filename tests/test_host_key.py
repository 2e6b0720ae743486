"""The node's SSH host key is the stack's: made by the stack, read by the node from Secret Manager at boot,
installed for sshd by the real startup.sh, and pinned by every client: the serving step, the printed ssh
commands and tools.status, checked with the real OpenSSH client against a real sshd on 127.0.0.1."""

from __future__ import annotations

import base64
import itertools
import json
import os
import shlex
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from components.vm import boot_contract as contract
from components.vm.host_key import known_hosts_line, pinned_ssh_options
from tests import program as harness
from tests import test_program
from tests.fakes.gcp_metadata import FakeMetadata, FakeSecretManager
from tests.test_program import KEY_CANARY
from tests.test_startup_script import API_CANARY, API_SECRET, HF_CANARY, HF_SECRET, Run, attributes
from tools import status, status_node

SSHD = "/usr/sbin/sshd"
HOST_KEY_SECRET = "projects/proj/secrets/tpu-vllm-dev-ssh-host-key"
# The canary private key's body: tls.PrivateKey's fixed output, so the stack's host key (and its client key).
KEY_CANARY_BODY = KEY_CANARY.splitlines()[1]
ALIAS = "tpu-vllm-dev"
# What reloading sshd looks like to the boot script: the fake records that the key was in place by then.
FAKE_SYSTEMCTL = ('[[ "$*" == "try-reload-or-restart ssh.service" ]] || exit 9\n'
                  'test -s "$STARTUP_ROOT/etc/ssh/tpu-vllm/ssh_host_ed25519_key" &&\n'
                  '  echo key-in-place >>"$STARTUP_ROOT/reloads"')


def keygen(path: Path, kind: str = "ed25519", bits: int | None = None) -> tuple[str, str]:
    """(private key text, public key line) of a new key made by the real ssh-keygen."""
    size = ["-b", str(bits)] if bits else []
    subprocess.run(["ssh-keygen", "-q", "-t", kind, *size, "-N", "", "-C", "", "-f", str(path)], check=True)
    return path.read_text(), path.with_suffix(".pub").read_text().strip()


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """Made once for the module: the client's key, the stack's host key and two impostors' (ssh-keygen writes
    a new key each time; no test here needs one no other test has seen)."""
    directory = tmp_path_factory.mktemp("keys")
    made = {name: keygen(directory / name, kind) for name, kind in (
        ("client", "ed25519"), ("stack_host", "ed25519"), ("impostor_host", "ed25519"), ("impostor_ecdsa", "ecdsa"))}
    return {"dir": directory, **made}


# ---- what the program declares ----

# tests/test_program.py's canary run (a fixed tls.PrivateKey output among its canaries), the same fixture: the same
# request, so tests/shared_runs.py runs the program once a session for both modules.
canary = test_program.canary


def test_the_host_key_reaches_the_node_as_a_secret_only_the_vm_identity_reads(canary):
    secret = canary.named("ssh-host-key-secret")["inputs"]
    assert secret["secretId"] == "tpu-vllm-dev-ssh-host-key"
    version = canary.named("ssh-host-key-secret-version")["inputs"]
    assert harness.plain_occurrences(version, KEY_CANARY_BODY) == []
    node = canary.one("pulumi-python:dynamic/tpu-vllm:QueuedResource")["inputs"]["body"]["tpu"]["nodeSpec"][0]["node"]
    grants = [r["inputs"] for r in canary.of_type("gcp:secretmanager/secretIamMember:SecretIamMember")
              if r["name"].startswith("ssh-host-key")]
    assert [(g["role"], g["member"]) for g in grants] == [
        ("roles/secretmanager.secretAccessor", f"serviceAccount:{node['serviceAccount']['email']}")]
    metadata = node["metadata"]
    assert metadata[contract.SSH_HOST_KEY_SECRET_ATTRIBUTE] == "projects/my-proj/secrets/tpu-vllm-dev-ssh-host-key"


def test_the_private_host_key_is_nowhere_in_plaintext_raw_or_as_the_node_reads_it(canary):
    encoded = base64.b64encode(KEY_CANARY.encode()).decode()
    for needle in (KEY_CANARY_BODY, encoded, encoded[8:40]):
        for registration in canary.registrations:
            assert harness.plain_occurrences(registration["inputs"], needle) == [], registration["name"]
        for name, output in canary.data["outputs"].items():
            assert needle not in json.dumps(output["value"]) or output["secret"], name
        assert needle not in canary.stderr


def test_the_serving_step_and_every_printed_ssh_pin_the_stacks_host_key(canary):
    public = canary.output("sshHostKey")
    assert public["secret"] is False and public["value"].startswith("ssh-ed25519 ")
    connection = canary.one("command:remote:Command")["inputs"]["connection"]["value"]
    assert connection["hostKey"] == public["value"]  # pulumi-command's FixedHostKey
    assert canary.output("sshKnownHosts")["value"] == known_hosts_line(ALIAS, public["value"])
    pinned = " ".join(pinned_ssh_options("~/.ssh/tpu-vllm-dev.known_hosts", ALIAS))
    for name in ("sshCommand", "sshTunnelCommand"):
        assert pinned in canary.output(name)["value"], name
    tunnel = canary.output("sshTunnelCommand")["value"]
    for option in ("ExitOnForwardFailure=yes", "ServerAliveInterval=30", "ServerAliveCountMax=3"):
        assert f"-o {option}" in tunnel
    assert "sshKnownHosts > ~/.ssh/tpu-vllm-dev.known_hosts" in canary.output("sshPrivateKeySetup")["value"]


# ---- startup.sh installs it, for real, under a temp root ----

def host_key_run(tmp_path, servers, secret_value: str, systemctl: str = FAKE_SYSTEMCTL, **extra):
    metadata, secretmanager = servers(
        FakeMetadata(attributes(**{contract.SSH_HOST_KEY_SECRET_ATTRIBUTE: HOST_KEY_SECRET}, **extra)),
        FakeSecretManager({HF_SECRET: HF_CANARY, API_SECRET: API_CANARY, HOST_KEY_SECRET: secret_value}))
    run = Run(tmp_path, metadata.url, secretmanager.url, fakes={"systemctl": systemctl})
    return run, run(), secretmanager


def test_the_boot_installs_the_stacks_key_as_sshds_only_host_key_before_reloading_it(tmp_path, servers, keys):
    private, public = keys["stack_host"]
    run, result, secretmanager = host_key_run(tmp_path, servers, base64.b64encode(private.encode()).decode())
    assert result.returncode == 0, result.stderr
    key_file = run.root / contract.SSH_HOST_KEY_FILE.lstrip("/")
    assert key_file.read_text() == private
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert key_file.with_name(key_file.name + ".pub").read_text().split() == public.split()[:2]
    drop_in = (run.root / contract.SSHD_HOST_KEY_DROP_IN.lstrip("/")).read_text()
    assert [line for line in drop_in.splitlines() if not line.startswith("#")] == [
        f"HostKey {contract.SSH_HOST_KEY_FILE}"]
    assert (run.root / "reloads").read_text() == "key-in-place\n"
    assert f"/v1/{HOST_KEY_SECRET}/versions/latest:access" in [r.path for r in secretmanager.requests]
    assert run.status == "ready"
    # The key is in no argv, no output, and not left in the boot's scratch files.
    for needle in (private.splitlines()[1], base64.b64encode(private.encode()).decode()[:40]):
        assert needle not in run.commands and needle not in result.stdout + result.stderr
    run.assert_no_canary_anywhere()


@pytest.mark.parametrize(("value", "said"), [
    ("not base64 at all!", "is not base64"),
    (base64.b64encode(b"just some text\n").decode(), "does not hold an OpenSSH private key"),
    ("rsa", "holds a ssh-rsa key, not ssh-ed25519"),
])
def test_a_host_key_secret_that_is_not_an_ed25519_key_stops_the_boot_before_sshd_changes(
        tmp_path, servers, value, said):
    if value == "rsa":
        # The boot reads the key's type, not its size: ssh-keygen's smallest RSA key (1024 bits in OpenSSH
        # 9.2p1, sshkey.h SSH_RSA_MINIMUM_MODULUS_SIZE) instead of its default 3072, ~1 s of CPU to make.
        value = base64.b64encode(keygen(tmp_path / "rsa", "rsa", bits=1024)[0].encode()).decode()
    run, result, _ = host_key_run(tmp_path, servers, value)
    assert result.returncode == 1 and said in run.status, run.status
    assert not (run.root / contract.SSHD_HOST_KEY_DROP_IN.lstrip("/")).exists()
    assert not (run.root / "reloads").exists()


def test_sshd_refusing_to_reload_fails_the_boot(tmp_path, servers, keys):
    private, _ = keys["stack_host"]
    run, result, _ = host_key_run(tmp_path, servers, base64.b64encode(private.encode()).decode(),
                                  systemctl="exit 1")
    assert result.returncode == 1 and "sshd did not reload with the stack's host key" in run.status


# ---- the real ssh client against a real sshd ----

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


SSHD_START_SECONDS = 20


class Sshd:
    """Debian's sshd as root on 127.0.0.1 with a temp config: `host_keys` are the keys it offers."""

    def __init__(self, directory: Path, host_keys: list[Path], client_public: str):
        self.port = free_port()
        authorized = directory / "authorized_keys"
        authorized.write_text(client_public + "\n")
        config = directory / "sshd_config"
        config.write_text("\n".join([
            f"ListenAddress 127.0.0.1:{self.port}", *(f"HostKey {key}" for key in host_keys),
            f"AuthorizedKeysFile {authorized}", "StrictModes no", "UsePAM no", "PasswordAuthentication no",
            "KbdInteractiveAuthentication no", "PermitRootLogin prohibit-password", "PidFile none",
            "AllowTcpForwarding yes", ""]))
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation directory
        # Its log to a file: it writes lines for every connection, and an sshd serving a whole module could fill
        # a pipe nobody reads.
        log = directory / "sshd.log"
        with log.open("w") as stderr:
            self.process = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stderr=stderr)
        # Ready when sshd says it listens (openssh sshd.c server_listen, 9.2p1, at the default LogLevel INFO): a
        # connect alone could reach another process that holds the port while this sshd fails to bind it.
        listening = f"Server listening on 127.0.0.1 port {self.port}."
        deadline = time.monotonic() + SSHD_START_SECONDS
        while listening not in log.read_text():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"sshd did not listen: {log.read_text()}")
            time.sleep(0.02)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


SSHD_START_ATTEMPTS = 5


def start_sshd(directory: Path, host_keys: list[Path], client_public: str) -> Sshd:
    """A free port can be taken between the check and sshd's bind (another xdist worker's connections draw from
    the same range): sshd then exits saying so ("Bind to port ... failed: Address already in use.", openssh
    sshd.c, 9.2p1), and another port is tried, a few times."""
    for attempt in range(SSHD_START_ATTEMPTS):
        try:
            return Sshd(directory, host_keys, client_public)
        except RuntimeError as error:
            if "Address already in use" not in str(error) or attempt == SSHD_START_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


needs_sshd = pytest.mark.skipif(os.geteuid() != 0 or not Path(SSHD).exists(),
                                reason="sshd runs as root (scripts/test.sh installs openssh-server)")


@pytest.fixture(scope="module")
def sshds(keys, tmp_path_factory):
    """One sshd per set of host keys it offers, for the module: a connection never changes an sshd (it forks a
    child for each), so every test that asks for the same keys may dial the same one."""
    started: dict[tuple[str, ...], Sshd] = {}

    def serve(*host_keys: str) -> Sshd:
        if host_keys not in started:
            started[host_keys] = start_sshd(tmp_path_factory.mktemp("sshd"), [keys["dir"] / name for name in host_keys],
                                            keys["client"][1])
        return started[host_keys]

    yield serve
    for sshd in started.values():
        sshd.stop()


@pytest.fixture
def node(tmp_path, keys, sshds):
    """The client key, the stack's host key, an impostor's, and the files the outputs tell the user to write
    (this test's own: a test may change them)."""
    client_private, _ = keys["client"]
    home = tmp_path / "home" / ".ssh"
    home.mkdir(parents=True)
    (home / "tpu-vllm-dev").write_text(client_private)
    (home / "tpu-vllm-dev").chmod(0o600)
    (home / "tpu-vllm-dev.known_hosts").write_text(known_hosts_line(ALIAS, keys["stack_host"][1]))
    return {"home": home, "serve": sshds, "client_private": client_private, "tmp": tmp_path}


@needs_sshd
def test_the_sshd_harness_moves_to_another_port_when_its_port_is_taken(keys, tmp_path, monkeypatch):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ports = itertools.chain([taken.getsockname()[1]], iter(free_port, None))
        monkeypatch.setattr(sys.modules[__name__], "free_port", lambda: next(ports))
        sshd = start_sshd(tmp_path, [keys["dir"] / "stack_host"], keys["client"][1])
        try:
            assert sshd.port != taken.getsockname()[1] and sshd.process.poll() is None
        finally:
            sshd.stop()


def printed_command(output: str, home: Path, port: int) -> list[str]:
    """The deploy's printed ssh command, at the local sshd, as a user who would say yes to any new host key:
    ssh takes the first value given for an option, so the trailing `accept-new` (into a scratch file) only
    applies when the printed command does not pin the key itself. The command reads no ssh_config of its own
    (the machine's, below; a user's that vouches for a key: the tests at the end)."""
    words = shlex.split(output.replace("~/.ssh/", f"{home}/"))
    assert words[1:5] == ["-i", "~/.ssh/tpu-vllm-dev".replace("~/.ssh/", f"{home}/"), "-F", "none"], words
    return [words[0], "-o", "BatchMode=yes", "-p", str(port), *words[1:-1],
            "-o", "StrictHostKeyChecking=accept-new", "-o", f"UserKnownHostsFile={home}/scratch_known_hosts",
            "root@127.0.0.1"]


@pytest.fixture(scope="module")
def outputs():
    deployed = harness.run(harness.dev_config())
    return {name: deployed.output(name)["value"] for name in ("sshCommand", "sshTunnelCommand")}


@needs_sshd
def test_the_printed_ssh_command_reaches_the_node_that_has_the_stacks_key(node, outputs):
    sshd = node["serve"]("stack_host")
    result = subprocess.run([*printed_command(outputs["sshCommand"], node["home"], sshd.port), "echo", "reached"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "reached\n"


@needs_sshd
@pytest.mark.parametrize("offered", [("impostor_host",), ("impostor_ecdsa",), ("impostor_ecdsa", "impostor_host")])
def test_the_printed_ssh_command_refuses_any_other_host_key(node, outputs, offered):
    sshd = node["serve"](*offered)
    for name in ("sshCommand", "sshTunnelCommand"):
        command = printed_command(outputs[name], node["home"], sshd.port)
        result = subprocess.run([*command, *(["echo", "reached"] if name == "sshCommand" else [])],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 255, (name, result.stderr)
        assert "Host key verification failed" in result.stderr
        assert "reached" not in result.stdout
    # Nothing was learned on the way: the known_hosts file holds the stack's key alone.
    assert len((node["home"] / "tpu-vllm-dev.known_hosts").read_text().splitlines()) == 1


@needs_sshd
def test_a_host_the_known_hosts_file_does_not_list_is_refused_not_trusted_on_first_use(node, outputs):
    sshd = node["serve"]("stack_host")
    (node["home"] / "tpu-vllm-dev.known_hosts").write_text("")
    result = subprocess.run([*printed_command(outputs["sshCommand"], node["home"], sshd.port), "true"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 255 and "Host key verification failed" in result.stderr
    assert (node["home"] / "tpu-vllm-dev.known_hosts").read_text() == ""


@needs_sshd
def test_the_tunnel_ends_when_its_local_port_is_taken_instead_of_running_useless(node, outputs):
    sshd = node["serve"]("stack_host")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        tunnel = outputs["sshTunnelCommand"].replace("-L 127.0.0.1:8000:", f"-L 127.0.0.1:{port}:")
        result = subprocess.run(printed_command(tunnel, node["home"], sshd.port), capture_output=True, text=True,
                                timeout=60)
    assert result.returncode == 255 and "forwarding" in result.stderr.lower()


@needs_sshd
@pytest.mark.parametrize(("offered", "reached"), [(("stack_host",), True), (("impostor_host",), False)])
def test_status_reads_the_node_only_behind_the_stacks_host_key(node, outputs, offered, reached, monkeypatch):
    sshd = node["serve"](*offered)
    known_hosts = (node["home"] / "tpu-vllm-dev.known_hosts").read_text()
    target = status.ssh_target({"sshCommand": outputs["sshCommand"], "sshPrivateKey": node["client_private"],
                                "sshKnownHosts": known_hosts}, "127.0.0.1", "stack dev")
    target.user, target.port = "root", sshd.port
    monkeypatch.setattr(status_node, "PROBE_SCRIPT", "echo startup_status=ready\n")
    monkeypatch.setattr(status_node, "remote_command", lambda port: "bash -s")
    if reached:
        assert status.read_node(target, 8000).startup_status == "ready"
    else:
        with pytest.raises(status.SshHostKeyError, match="not the stack's"):
            status.read_node(target, 8000)


@needs_sshd
def test_the_tunnel_helper_forwards_the_chosen_local_port_to_the_serving_port_behind_the_pinned_key(node, outputs):
    from tools import tunnel

    sshd = node["serve"]("stack_host")
    with socket.socket() as serving:  # the node's serving port (the front), on the node's loopback
        serving.bind(("127.0.0.1", 0))
        serving.listen()
        local_port = free_port()
        target = status.ssh_target(
            {"sshCommand": outputs["sshCommand"], "sshPrivateKey": node["client_private"],
             "sshKnownHosts": (node["home"] / "tpu-vllm-dev.known_hosts").read_text()}, "127.0.0.1", "stack dev")
        target.user, target.port = "root", sshd.port
        key_file, known_hosts = tunnel.write_credentials(target, node["tmp"])
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        command = tunnel.tunnel_command(target, local_port, serving.getsockname()[1], key_file, known_hosts)
        process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        try:
            for _ in range(200):
                with socket.socket() as client:
                    if client.connect_ex(("127.0.0.1", local_port)) == 0:
                        client.sendall(b"ping")
                        accepted, _ = serving.accept()
                        with accepted:
                            assert accepted.recv(4) == b"ping"
                        break
                assert process.poll() is None, process.stderr.read()
                time.sleep(0.05)
            else:
                raise AssertionError("the tunnel never listened")
        finally:
            process.terminate()
            process.wait(timeout=10)


# ---- a user's own ssh config cannot vouch for a key ----

# ssh reads ~/.ssh/config from the passwd entry's home (getpwuid(getuid())->pw_dir; openssh-portable ssh.c
# process_config_files, V_9_2_P1, and seen with Debian's 9.2p1 here), never $HOME: the test's home is mounted over
# root's in a private mount namespace of each ssh's own.
PW_DIR = Path(os.path.expanduser("~root"))
IN_USER_HOME = 'mount --bind "$1" "$2" && shift 2 && exec "$@"'


def as_the_user(home: Path, argv: list[str]) -> list[str]:
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", IN_USER_HOME, "sh", str(home), str(PW_DIR),
            *argv]


def write_hostile_user_config(home: Path, impostor_public: str) -> Path:
    """A ~/.ssh/config that vouches for the impostor under the stack's alias, as a user's might for another host:
    a `Match exec` (which runs a command, leaving a mark) includes a file with a KnownHostsCommand printing the
    impostor's key, StrictHostKeyChecking=no and VerifyHostKeyDNS=yes; and a ControlPath. Returns the mark."""
    mark = home / "match-exec-ran"
    vouch = home / ".ssh" / "vouch"
    vouch.write_text(known_hosts_line(ALIAS, impostor_public))
    (home / ".ssh" / "config.d").mkdir()
    (home / ".ssh" / "config.d" / "vouch.conf").write_text("\n".join([
        f"KnownHostsCommand /bin/cat {vouch}", "StrictHostKeyChecking no", "VerifyHostKeyDNS yes",
        "UpdateHostKeys yes", "ControlPath ~/.ssh/c-%C", ""]))
    (home / ".ssh" / "config").write_text(f'Match exec "touch {mark}"\n    Include {home}/.ssh/config.d/*.conf\n')
    return mark


@pytest.fixture
def hostile_home(node, keys):
    """The node fixture's home (key and known_hosts as the outputs say), with the hostile config in it."""
    home = node["home"].parent
    return {**node, "home_dir": home, "mark": write_hostile_user_config(home, keys["impostor_host"][1])}


def printed_as_typed(output: str, port: int) -> list[str]:
    """The printed command as the user runs it (its `~` is the user's home), at the local sshd; BatchMode only
    keeps a prompt from waiting."""
    words = shlex.split(output)
    return [words[0], "-o", "BatchMode=yes", "-p", str(port), *words[1:-1], "root@127.0.0.1"]


@needs_sshd
def test_the_hostile_user_config_lets_an_impostor_in_without_the_stacks_config_guard(hostile_home, outputs):
    """The control: the pin's options alone (the command line before this change) take the config's vouching
    key, and its Match exec runs, so the tests below can fail."""
    sshd = hostile_home["serve"]("impostor_host")
    words = printed_as_typed(outputs["sshCommand"], sshd.port)
    start = words.index("-F")
    assert words[start:start + 2] == ["-F", "none"]
    unguarded = words[:start] + words[start + 2:]
    result = subprocess.run(as_the_user(hostile_home["home_dir"], [*unguarded, "echo", "reached"]),
                            capture_output=True, text=True, timeout=60)
    assert result.stdout == "reached\n", result.stderr
    assert hostile_home["mark"].exists()


@needs_sshd
def test_the_printed_commands_ignore_a_user_config_that_vouches_for_an_impostor(hostile_home, outputs):
    impostor = hostile_home["serve"]("impostor_host")
    for name in ("sshCommand", "sshTunnelCommand"):
        command = printed_as_typed(outputs[name], impostor.port)
        result = subprocess.run(as_the_user(hostile_home["home_dir"], [
            *command, *(["echo", "reached"] if name == "sshCommand" else [])]),
            capture_output=True, text=True, timeout=60)
        assert result.returncode == 255 and "Host key verification failed" in result.stderr, (name, result.stderr)
        assert "reached" not in result.stdout
    # The genuine node is still reached with the same config in place.
    genuine = hostile_home["serve"]("stack_host")
    result = subprocess.run(as_the_user(hostile_home["home_dir"], [
        *printed_as_typed(outputs["sshCommand"], genuine.port), "echo", "reached"]),
        capture_output=True, text=True, timeout=60)
    assert result.stdout == "reached\n", result.stderr
    # The config was never read: its Match exec never ran.
    assert not hostile_home["mark"].exists()
    assert len((hostile_home["home"] / "tpu-vllm-dev.known_hosts").read_text().splitlines()) == 1


@needs_sshd
@pytest.mark.parametrize(("offered", "reached"), [(("stack_host",), True), (("impostor_host",), False)])
def test_status_ignores_a_user_config_that_vouches_for_an_impostor(hostile_home, outputs, offered, reached,
                                                                    monkeypatch):
    sshd = hostile_home["serve"](*offered)
    target = status.ssh_target({"sshCommand": outputs["sshCommand"], "sshPrivateKey": hostile_home["client_private"],
                                "sshKnownHosts": (hostile_home["home"] / "tpu-vllm-dev.known_hosts").read_text()},
                               "127.0.0.1", "stack dev")
    target.user, target.port = "root", sshd.port
    monkeypatch.setattr(status_node, "PROBE_SCRIPT", "echo startup_status=ready\n")
    monkeypatch.setattr(status_node, "remote_command", lambda port: "bash -s")
    run = subprocess.run
    monkeypatch.setattr(subprocess, "run", lambda argv, **kwargs: run(
        as_the_user(hostile_home["home_dir"], argv) if argv[0] == "ssh" else argv, **kwargs))
    if reached:
        assert status.read_node(target, 8000).startup_status == "ready"
    else:
        with pytest.raises(status.SshHostKeyError, match="not the stack's"):
            status.read_node(target, 8000)
    assert not hostile_home["mark"].exists()


@needs_sshd
@pytest.mark.parametrize(("offered", "reached"), [(("stack_host",), True), (("impostor_host",), False)])
def test_the_tunnel_helper_ignores_a_user_config_that_vouches_for_an_impostor(hostile_home, outputs, offered,
                                                                             reached):
    from tools import tunnel

    sshd = hostile_home["serve"](*offered)
    target = status.ssh_target({"sshCommand": outputs["sshCommand"], "sshPrivateKey": hostile_home["client_private"],
                                "sshKnownHosts": (hostile_home["home"] / "tpu-vllm-dev.known_hosts").read_text()},
                               "127.0.0.1", "stack dev")
    target.user, target.port = "root", sshd.port
    key_file, known_hosts = tunnel.write_credentials(target, hostile_home["tmp"])
    local_port = free_port()
    command = tunnel.tunnel_command(target, local_port, free_port(), key_file, known_hosts)
    process = subprocess.Popen(as_the_user(hostile_home["home_dir"], [*command[:1], "-o", "BatchMode=yes",
                                                                       *command[1:]]),
                               stderr=subprocess.PIPE, text=True)
    try:
        if reached:
            # Listening on the local port: the host was accepted and the forward set up.
            for _ in range(200):
                with socket.socket() as client:
                    if client.connect_ex(("127.0.0.1", local_port)) == 0:
                        break
                assert process.poll() is None, process.stderr.read()
                time.sleep(0.05)
            else:
                raise AssertionError("the tunnel never listened")
        else:
            assert process.wait(timeout=60) == 255
            assert "Host key verification failed" in process.stderr.read()
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert not hostile_home["mark"].exists()
