"""The VM's front cannot fetch the VM identity's token; vLLM and every other user still reach the metadata server
(issue 27 item 2).

Run for real where it runs here: as root, in a network namespace of the test's own that carries the metadata
server's addresses on its loopback, with the fake metadata server bound to them, the rendered metadata-block script
applied by the real iptables, and each caller started with `setpriv` as its uid. The front's key copy and the
real nginx running the front's entry command as the front's user complete the picture.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from components import settings
from components.serving import front
from components.vm import boot_contract, container, metadata_block, serving_step, systemd_units
from tests.fakes import nginx
from tests.fakes.gcp_metadata import ACCESS_TOKEN
from tests.fakes.http import FakeServer, Response
from tests.wing_values import vm_serving

REPO = Path(__file__).resolve().parents[1]
UID, GID = metadata_block.FRONT_UID, metadata_block.FRONT_GID
# Another host user (the SSH user's range); vLLM's container runs as root.
OTHER_UID = 1000
TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"
# Every way the front's user might spell the metadata server. On the VM, metadata.google.internal resolves to
# 169.254.169.254 (Google's images list it in /etc/hosts, and the metadata server's DNS answers it): here the
# namespace's own /etc/hosts says the same.
SPELLINGS = {
    "address": f"http://169.254.169.254{TOKEN_PATH}",
    "name": f"http://metadata.google.internal{TOKEN_PATH}",
    "short name": f"http://metadata{TOKEN_PATH}",
    "another port": f"http://169.254.169.254:8080{TOKEN_PATH}",
    "decimal": f"http://2852039166{TOKEN_PATH}",
    "hex": f"http://0xa9fea9fe{TOKEN_PATH}",
    "IPv4-mapped IPv6": f"http://[::ffff:169.254.169.254]{TOKEN_PATH}",
    "IPv6": f"http://[fd20:ce::254]{TOKEN_PATH}",
}
SERVERS = """
import sys, threading
from tests.fakes.gcp_metadata import FakeMetadata
servers = [FakeMetadata({}, port=80, host="169.254.169.254"), FakeMetadata({}, port=8080, host="169.254.169.254"),
           FakeMetadata({}, port=80, host="fd20:ce::254")]
for server in servers:
    server.__enter__()
print("ready", flush=True)
sys.stdin.read()
"""

needs_root_and_iptables = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("iptables") is None or shutil.which("unshare") is None,
    reason="runs as root with iptables and util-linux (scripts/test.sh installs iptables)")


def cfg(**sections):
    return settings.load({"access": {"sshSourceRanges": ["198.51.100.7/32"]}, **sections}, "my-proj", "dev").settings


class Namespace:
    """A network and mount namespace held open by `sleep`; commands enter it with nsenter."""

    def __init__(self, tmp_path: Path):
        self.holder = subprocess.Popen(["unshare", "--net", "--mount", "--propagation", "private",
                                        "sleep", "infinity"])
        deadline = time.monotonic() + 10
        while Path(f"/proc/{self.holder.pid}/comm").read_text().strip() != "sleep":
            assert time.monotonic() < deadline, "unshare did not start"
            time.sleep(0.02)
        hosts = tmp_path / "hosts"
        hosts.write_text("127.0.0.1 localhost\n169.254.169.254 metadata.google.internal metadata\n")
        for command in (["ip", "link", "set", "lo", "up"], ["ip", "addr", "add", "169.254.169.254/32", "dev", "lo"],
                        ["ip", "-6", "addr", "add", "fd20:ce::254/128", "dev", "lo", "nodad"],
                        ["mount", "--bind", str(hosts), "/etc/hosts"]):
            self.run(*command, check=True)
        # Entering a mount namespace moves the working directory to its root: the fakes come by PYTHONPATH.
        self.servers = subprocess.Popen(self.enter() + [sys.executable, "-c", SERVERS], text=True,
                                        env={**os.environ, "PYTHONPATH": str(REPO)},
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.servers.stdout.readline().strip() == "ready"

    def enter(self, uid: int | None = None, gid: int | None = None) -> list[str]:
        argv = ["nsenter", f"--target={self.holder.pid}", "--net", "--mount", "--"]
        if uid is not None:
            argv += ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--"]
        return argv

    def run(self, *argv: str, uid: int | None = None, gid: int | None = None,
            check: bool = False) -> subprocess.CompletedProcess:
        return subprocess.run(self.enter(uid, gid) + list(argv), capture_output=True, text=True, timeout=60,
                              check=check, env={"PATH": os.environ["PATH"]})

    def fetch_token(self, url: str, uid: int | None = None, gid: int | None = None) -> bool:
        """True if this caller got the VM identity's token."""
        done = self.run("curl", "-sS", "--noproxy", "*", "--max-time", "10", "-H", "Metadata-Flavor: Google", url,
                        uid=uid, gid=gid)
        return ACCESS_TOKEN in done.stdout

    def apply_block(self, tmp_path: Path) -> subprocess.CompletedProcess:
        script = tmp_path / "metadata-block.sh"
        script.write_text(metadata_block.block_script())
        return self.run("sh", str(script))

    def close(self) -> None:
        self.servers.stdin.close()
        self.servers.wait(timeout=10)
        self.holder.kill()
        self.holder.wait(timeout=10)


@pytest.fixture(scope="module")
def shared_namespace(tmp_path_factory):
    """One namespace and one set of fake metadata servers for the module (a Python interpreter and a namespace
    per test cost ~0.6 s each); `namespace` gives each test its firewall as new."""
    if os.geteuid() != 0 or shutil.which("iptables") is None or shutil.which("unshare") is None:
        pytest.skip("runs as root with iptables and util-linux (scripts/test.sh installs iptables)")
    ns = Namespace(tmp_path_factory.mktemp("netns"))
    yield ns
    ns.close()


@pytest.fixture
def namespace(shared_namespace):
    """The shared namespace with no firewall rule: the block is all the tests change in it (filter table)."""
    for command in ("iptables", "ip6tables"):
        for flag in ("-F", "-X"):
            shared_namespace.run(command, "-w", flag, check=True)
        rules = shared_namespace.run(command, "-w", "-S", check=True).stdout.splitlines()
        assert rules == ["-P INPUT ACCEPT", "-P FORWARD ACCEPT", "-P OUTPUT ACCEPT"], rules
    return shared_namespace


@needs_root_and_iptables
def test_without_the_rule_the_fronts_user_gets_the_token(namespace):
    """The namespace is sound: before the block, every caller, the front's user included, reaches the fake."""
    for url in SPELLINGS.values():
        assert namespace.fetch_token(url, UID, GID), url


@needs_root_and_iptables
@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_the_fronts_user_cannot_reach_the_metadata_server_however_it_is_spelled(namespace, tmp_path, spelling):
    applied = namespace.apply_block(tmp_path)
    assert applied.returncode == 0, applied.stderr
    url = SPELLINGS[spelling]
    assert not namespace.fetch_token(url, UID, GID)
    # Its group alone, with another uid, is not the front: only the front's processes are held.
    assert namespace.fetch_token(url)  # root: vLLM's container
    assert namespace.fetch_token(url, OTHER_UID, OTHER_UID)


@needs_root_and_iptables
def test_the_fronts_user_keeps_loopback_and_other_addresses(namespace, tmp_path):
    """The rule names the metadata server only: the front still reaches vLLM on 127.0.0.1."""
    assert namespace.apply_block(tmp_path).returncode == 0
    with_loopback = namespace.run(sys.executable, "-c", "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0));"
                                  "s.listen(); c = socket.create_connection(s.getsockname(), timeout=5); print('ok')",
                                  uid=UID, gid=GID)
    assert with_loopback.stdout.strip() == "ok", with_loopback.stderr


@needs_root_and_iptables
def test_applying_the_block_twice_adds_no_second_rule(namespace, tmp_path):
    for _ in range(2):
        applied = namespace.apply_block(tmp_path)
        assert applied.returncode == 0, applied.stderr
    for command, address, reply in (("iptables", "169.254.169.254/32", "icmp-port-unreachable"),
                                    ("ip6tables", "fd20:ce::254/128", "icmp6-port-unreachable")):
        rules = namespace.run(command, "-w", "-S", "OUTPUT", check=True).stdout.splitlines()
        mine = [rule for rule in rules if f"--uid-owner {UID}" in rule]
        assert mine == [f"-A OUTPUT -d {address} -m owner --uid-owner {UID} -j REJECT --reject-with {reply}"]
        # First in the chain: no earlier ACCEPT can let the front through.
        assert rules[1] == mine[0]
    assert not namespace.fetch_token(SPELLINGS["address"], UID, GID)


@needs_root_and_iptables
def test_the_block_fails_loudly_when_a_rule_cannot_be_installed(namespace, tmp_path):
    """A missing ip6tables (or a kernel without owner matching) must stop the unit, and so the front."""
    script = tmp_path / "metadata-block.sh"
    script.write_text(metadata_block.block_script())
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ip6tables").write_text("#!/bin/sh\nexit 3\n")
    (bin_dir / "ip6tables").chmod(0o755)
    failed = subprocess.run(namespace.enter() + ["sh", str(script)], capture_output=True, text=True, timeout=60,
                            env={"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert failed.returncode != 0


# --- The front's key copy and the real nginx as the front's user --------------------------------------------


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown and setpriv need root")


def run_key_script(root: Path) -> subprocess.CompletedProcess:
    script = root / "front-key.sh"
    script.write_text(metadata_block.front_key_script())
    return subprocess.run(["sh", str(script)], capture_output=True, text=True,
                          env={"PATH": os.environ["PATH"], "STARTUP_ROOT": str(root)})


def write_root_only_key(root: Path, key: str) -> None:
    original = root / boot_contract.API_KEY_FILE.lstrip("/")
    original.parent.mkdir(parents=True, exist_ok=True)
    original.parent.chmod(0o700)
    original.write_text(key + "\n")
    original.chmod(0o600)


def read_as(path: Path, uid: int) -> subprocess.CompletedProcess:
    return subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "cat", str(path)],
                          capture_output=True, text=True)


@needs_root
def test_the_front_gets_its_own_copy_of_this_boots_key(tmp_path):
    root = nginx.workdir("front-key-")
    write_root_only_key(root, "k1")
    assert run_key_script(root).returncode == 0
    copy = root / metadata_block.FRONT_KEY_FILE.lstrip("/")
    info = copy.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (UID, GID, 0o400)
    assert read_as(copy, UID).stdout == "k1\n"
    assert read_as(copy, OTHER_UID).returncode != 0
    # The front's user reads its copy, never the original (nor the HF token beside it).
    assert read_as(root / boot_contract.API_KEY_FILE.lstrip("/"), UID).returncode != 0
    # A key rotated at the next boot reaches the next start.
    write_root_only_key(root, "k2")
    assert run_key_script(root).returncode == 0
    assert read_as(copy, UID).stdout == "k2\n"
    shutil.rmtree(root)


class Upstream(FakeServer):
    def handle(self, request):
        return Response(200, {"path": request.path})


RUNC_LIKE = ('chown {uid} /proc/self/fd/1 /proc/self/fd/2 && '
             'exec setpriv --reuid={uid} --regid={gid} --clear-groups -- "$@"')


@needs_root
@pytest.mark.skipif(nginx.NGINX is None, reason=nginx.SKIP_REASON)
def test_the_real_nginx_serves_as_the_fronts_user():
    """The front's entry command and config, as the container runs them with `--user`: no root anywhere. runc
    hands the container's stdout/stderr to its user before the exec (opencontainers/runc libcontainer/
    init_linux.go, fixStdioPermissions); the wrapper does the same, so the access log to /dev/stdout is tested."""
    base = nginx.workdir("front-user-")
    write_root_only_key(base, "front-user-key")
    assert run_key_script(base).returncode == 0
    run_dir = base / "run-front"
    run_dir.mkdir()
    os.chown(run_dir, UID, GID)  # the container's tmpfs, mounted with uid= and gid= (container.FRONT_TMPFS)
    layout = front.FrontLayout(config_path=str(base / "nginx.conf"),
                               key_file=str(base / metadata_block.FRONT_KEY_FILE.lstrip("/")), run_dir=str(run_dir))
    argv = ["sh", "-c", RUNC_LIKE.format(uid=UID, gid=GID), "runc-like", *front.entry_command(layout)]
    with Upstream() as upstream:
        running = nginx.start_on_a_free_port(argv, base, lambda port: Path(layout.config_path).write_text(
            front.nginx_config(listen_port=port, upstream_port=upstream.port, layout=layout)))
        try:
            url = f"http://127.0.0.1:{running.port}/v1/models"
            assert httpx.get(url).status_code == 401
            assert httpx.get(url, headers={"Authorization": "Bearer front-user-key"}).status_code == 200
            running.wait_for_access_line("/v1/models")
            master = running.process.pid
            workers = [int(pid) for pid in Path(f"/proc/{master}/task/{master}/children").read_text().split()]
            for pid in [master, *workers]:
                ids = {line.split(":")[0]: line.split()[1:] for line in Path(f"/proc/{pid}/status").read_text()
                       .splitlines() if line.startswith(("Uid:", "Gid:"))}
                assert ids == {"Uid": [str(UID)] * 4, "Gid": [str(GID)] * 4}, pid
        finally:
            running.stop()
    shutil.rmtree(base)


# --- What the stack renders ------------------------------------------------------------------------------------


def test_the_front_runs_as_its_own_user_without_capabilities():
    args = container.front_docker_run_args(vm_serving(cfg()).spec)
    assert args[args.index("--user") + 1] == f"{UID}:{GID}"
    assert args[args.index("--cap-drop") + 1] == "ALL"
    assert args[args.index("--security-opt") + 1] == "no-new-privileges"
    # Its key is its own copy; the root-only original and the HF token are not mounted.
    mounts = [args[i + 1] for i, arg in enumerate(args) if arg == "-v"]
    assert f"{metadata_block.FRONT_KEY_FILE}:{front.KEY_FILE}:ro" in mounts
    assert not any(boot_contract.SECRETS_DIR in mount for mount in mounts)
    assert not any("docker.sock" in mount for mount in mounts)
    tmpfs = args[args.index("--tmpfs") + 1]
    assert f"uid={UID}" in tmpfs.split(",") and f"gid={GID}" in tmpfs.split(",")


def test_vllm_keeps_the_metadata_server():
    """tpu-inference reads the TPU's type and worker id from it: vLLM stays root on the host network."""
    args = container.docker_run_args(vm_serving(cfg()))
    assert "--net=host" in args and "--user" not in args


def test_the_block_is_installed_by_the_serving_step_and_ordered_before_the_front():
    installed = dict(serving_step.installed_files(vm_serving(cfg())))
    assert installed[metadata_block.BLOCK_SCRIPT] == metadata_block.block_script()
    assert installed[metadata_block.FRONT_KEY_SCRIPT] == metadata_block.front_key_script()
    assert installed[systemd_units.unit_path(metadata_block.BLOCK_UNIT)] == metadata_block.block_unit()
    unit = systemd_units.front_unit(vm_serving(cfg()).spec)
    requires = next(line for line in unit.splitlines() if line.startswith("Requires="))
    after = next(line for line in unit.splitlines() if line.startswith("After="))
    assert metadata_block.BLOCK_UNIT in requires.split("=", 1)[1].split()
    assert metadata_block.BLOCK_UNIT in after.split("=", 1)[1].split()
    # Not the boot script: a change there replaces a live node.
    assert "iptables" not in (REPO / "startup" / "startup.sh").read_text()


def test_the_fronts_uid_belongs_to_no_account_here():
    """Debian's reserved range above systemd's DynamicUser= range, not nobody/nogroup: no passwd entry on this
    machine (nor, by policy, on the TPU VM image)."""
    assert 65520 <= UID <= 65532 and 65520 <= GID <= 65532
    import pwd
    with pytest.raises(KeyError):
        pwd.getpwuid(UID)


def test_loopback_helper_binds_the_host_it_is_given():
    """The fake's host parameter, used above inside the namespace, defaults to loopback."""
    with Upstream() as upstream:
        assert upstream.url.startswith("http://127.0.0.1:")
        with socket.create_connection(("127.0.0.1", upstream.port), timeout=5):
            pass


# --- The block under the real systemd: back before every start of the front -----------------------------------

SYSTEMD = Path("/lib/systemd/systemd")
# The harness's root: every path systemd or its tmpfiles rules write to is private, the rest is the host's,
# read-only. A systemd given the host's writable /tmp would empty it (tmpfiles.d/tmp.conf `D /tmp`).
PRIVATE_PATHS = ("tmp", "var/tmp", "var/log", "var/lib/systemd", "run", "etc", "dev")
# PID 1 of fresh mount, pid, net, uts, ipc and cgroup namespaces (unshare): a read-only bind of / with tmpfs over
# PRIVATE_PATHS (/etc a copy of the host's, for the units the serving step installs there), its own /proc with
# /proc/sys read-only (sysctls are the host's, as under systemd-nspawn), a read-only sysfs, the cgroup2 subtree
# the test made, a minimal /dev; then systemd with no CAP_SYS_MODULE or CAP_SYS_TIME, booting a target that pulls
# in nothing. $1: an empty directory (a tmpfs goes on it); $2: a tree copied into the private paths.
SYSTEMD_ROOT_SETUP = r"""
set -eu
W="$1" STAGE="$2"
mount -t tmpfs -o mode=0755 tpu-vllm-systemd-test "$W"
R="$W/root"
mkdir "$R"
mount --bind / "$R"
# bind,remount: this mount's read-only flag only; a plain remount would change the host's filesystem itself.
mount -o remount,bind,ro "$R"
if touch "$R/.tpu-vllm-probe" 2>/dev/null; then echo "setup: the root is writable; stopping" >&2; exit 1; fi
for d in $PRIVATE_PATHS; do
  mount -t tmpfs -o mode=0755 "private-$(echo "$d" | tr / -)" "$R/$d"
done
chmod 1777 "$R/tmp" "$R/var/tmp"
cp -a /etc/. "$R/etc/"
for top in "$STAGE"/*; do cp -a "$top/." "$R/${top##*/}/"; done
mount -t proc proc "$R/proc"
mount --bind "$R/proc/sys" "$R/proc/sys"
mount -o remount,bind,ro "$R/proc/sys"
mount -t sysfs -o ro sysfs "$R/sys"
mount -t cgroup2 cgroup2 "$R/sys/fs/cgroup"
for node in null zero full random urandom tty; do
  touch "$R/dev/$node"
  mount --bind "/dev/$node" "$R/dev/$node"
done
touch "$R/dev/console"
mkdir "$R/dev/shm" "$R/dev/pts"
mount -t tmpfs -o mode=1777 shm "$R/dev/shm"
ln -s /proc/self/fd "$R/dev/fd"
ip link set lo up
exec env -i container=tpu-vllm-test /usr/bin/setpriv --bounding-set=-sys_module,-sys_time /usr/sbin/chroot "$R" \
  /lib/systemd/systemd --system --unit=tpu-vllm-test.target --log-target=console --show-status=no
"""
TEST_TARGET = "tpu-vllm-test.target"
# Only how soon Restart= acts (the rendered unit waits FRONT_RESTART_SECONDS): a drop-in, so the unit's own
# text, its dependencies and the block unit are exactly what the serving step installs.
FAST_RESTART = "[Service]\nRestartSec=100ms\n"


def cgroup2_home() -> Path | None:
    """This process's cgroup in the cgroup2 hierarchy (/sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid
    host), where the harness's systemd gets a subtree of its own; None without a cgroup2 mount."""
    mount = next((line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
                  if line.split(" - ")[1].split()[0] == "cgroup2"), None)
    own = next((line[3:] for line in Path("/proc/self/cgroup").read_text().splitlines() if line.startswith("0::")),
               None)
    return None if mount is None or own is None else Path(mount + own)


needs_systemd = pytest.mark.skipif(
    os.geteuid() != 0 or not SYSTEMD.exists() or shutil.which("iptables") is None
    or shutil.which("unshare") is None or shutil.which("nsenter") is None,
    reason="runs Debian's systemd as root in namespaces (scripts/test.sh installs systemd and iptables)")


def stage_installed_files(stage: Path) -> None:
    """What serve.sh installs, at its paths; the front's runner (a `docker run`) is a stand-in, and docker.service,
    which the image provides, a stub. The boot script's part: this boot's `ready` and the API key file."""
    for path, text in serving_step.installed_files(vm_serving(cfg())):
        if path == container.FRONT_RUNNER:
            text = "#!/bin/bash\n# stand-in for the front's docker run\nexec sleep infinity\n"
        target = stage / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    units = stage / systemd_units.UNIT_DIR.lstrip("/")
    (units / systemd_units.DOCKER_UNIT).write_text(
        "[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/true\n")
    (units / TEST_TARGET).write_text("[Unit]\nDescription=tpu-vllm test: boots nothing\n")
    (units / f"{systemd_units.FRONT_UNIT}.d").mkdir()
    (units / f"{systemd_units.FRONT_UNIT}.d" / "fast-restart.conf").write_text(FAST_RESTART)
    write_root_only_key(stage, "systemd-test-key")
    status = stage / boot_contract.STATUS_FILE.lstrip("/")
    status.parent.mkdir(parents=True)
    status.write_text(f"ready\nboot {Path(boot_contract.BOOT_ID_FILE).read_text().strip()}\n")


class SystemdInNamespaces:
    def __init__(self, tmp: Path):
        home = cgroup2_home()
        if home is None:
            pytest.skip("no cgroup2 hierarchy for systemd")
        self.cgroup = home / f"tpu-vllm-systemd-test-{os.getpid()}-{time.monotonic_ns()}"
        self.cgroup.mkdir()
        stage, work = tmp / "stage", tmp / "root"
        stage.mkdir()
        work.mkdir()
        stage_installed_files(stage)
        script = tmp / "setup.sh"
        script.write_text(SYSTEMD_ROOT_SETUP.replace("$PRIVATE_PATHS", " ".join(PRIVATE_PATHS)))
        self.log = (tmp / "setup.log").open("w")
        # In its own cgroup before the cgroup namespace is made, so systemd's root cgroup is that subtree.
        self.unshare = subprocess.Popen(
            ["sh", "-c", 'echo $$ >"$0/cgroup.procs" && exec "$@"', str(self.cgroup),
             "unshare", "--mount", "--pid", "--net", "--uts", "--ipc", "--cgroup", "--fork", "--kill-child",
             "--propagation", "private", "sh", str(script), str(work), str(stage)], stdout=self.log, stderr=self.log)
        try:
            self.pid = self._wait_for_pid1()
            deadline = time.monotonic() + 30
            # `offline` until the manager answers on its socket, then `starting` until boot is done.
            while (state := self.run("systemctl", "is-system-running", "--wait",
                                     check=False).stdout.strip()) not in ("running", "degraded"):
                assert time.monotonic() < deadline, state
                time.sleep(0.05)
        except BaseException:
            self.close()
            raise

    def _wait_for_pid1(self) -> int:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.unshare.poll() is None, Path(self.log.name).read_text()
            children = Path(f"/proc/{self.unshare.pid}/task/{self.unshare.pid}/children").read_text().split()
            if children and Path(f"/proc/{children[0]}/comm").read_text().strip() == "systemd":
                return int(children[0])
            time.sleep(0.02)
        raise AssertionError(f"systemd did not start: {Path(self.log.name).read_text()}")

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        """A command in systemd's namespaces and root."""
        enter = ["nsenter", f"--target={self.pid}", "--mount", "--pid", "--net", "--uts", "--ipc", "--cgroup",
                 "--root", "--wd", "--"]
        done = subprocess.run(enter + list(argv), capture_output=True, text=True, timeout=60,
                              env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
        assert done.returncode == 0 or not check, f"{argv}: {done.returncode} {done.stdout} {done.stderr}"
        return done

    def unit(self, name: str) -> dict[str, str]:
        shown = self.run("systemctl", "show", "-p", "ActiveState,MainPID,NRestarts,Result", name).stdout
        return dict(line.split("=", 1) for line in shown.splitlines())

    def rules_present(self) -> list[bool]:
        """Whether each of the block's rules (iptables and ip6tables) is in OUTPUT."""
        return [self.run(command, "-w", "-C", chain, *rule, check=False).returncode == 0
                for command, chain, *rule in metadata_block.block_rules()]

    def flush_output(self) -> None:
        for command in ("iptables", "ip6tables"):
            self.run(command, "-w", "-F", "OUTPUT")
        assert self.rules_present() == [False, False]

    def close(self) -> None:
        # A pid namespace's init takes every process in it along (unshare then reaps it and exits); before systemd
        # is known, unshare's end SIGKILLs it (--kill-child). The mounts go with the mount namespace.
        if getattr(self, "pid", None) is not None:
            os.kill(self.pid, signal.SIGKILL)
        else:
            self.unshare.kill()
        self.unshare.wait(timeout=30)
        deadline = time.monotonic() + 30
        while "populated 0" not in (self.cgroup / "cgroup.events").read_text():
            assert time.monotonic() < deadline, "the harness's processes outlived it"
            time.sleep(0.02)
        self.log.close()
        for directory in sorted(self.cgroup.rglob("*"), key=lambda path: len(path.parts), reverse=True):
            if directory.is_dir():
                directory.rmdir()
        self.cgroup.rmdir()


@pytest.fixture(scope="module")
def systemd(tmp_path_factory):
    """Debian's systemd as PID 1 in namespaces of its own, the front started once (its start limit allows five).
    A file in the host's /tmp must outlive it: the harness's guard against a systemd that reaches the host."""
    if os.geteuid() != 0 or not SYSTEMD.exists():
        pytest.skip("runs Debian's systemd as root")
    canary = Path(tmp_path_factory.mktemp("canary")) / "host-tmp-must-survive"
    canary.write_text("host\n")
    os.utime(canary, (0, 0))  # as old as can be: any age-based cleaning would take it first
    manager = SystemdInNamespaces(tmp_path_factory.mktemp("systemd"))
    try:
        manager.run("systemctl", "start", systemd_units.FRONT_UNIT)
        assert manager.unit(systemd_units.FRONT_UNIT)["ActiveState"] == "active"
        yield manager
    finally:
        manager.close()
        assert canary.read_text() == "host\n"


@needs_systemd
def test_the_block_unit_once_active_re_adds_nothing_a_flush_removed(systemd):
    """Why the front's own unit installs the rule: the oneshot (RemainAfterExit=yes) is active, so starting it,
    as the front's Requires= does, runs nothing."""
    assert systemd.rules_present() == [True, True]
    systemd.flush_output()
    systemd.run("systemctl", "start", metadata_block.BLOCK_UNIT)
    assert systemd.rules_present() == [False, False]
    systemd.run("/bin/sh", metadata_block.BLOCK_SCRIPT)
    assert systemd.rules_present() == [True, True]


@needs_systemd
def test_the_rule_is_back_after_a_flush_and_systemctl_restart(systemd):
    """What every deploy's serving step runs (serve.sh: `systemctl restart` of both units)."""
    systemd.flush_output()
    systemd.run("systemctl", "restart", systemd_units.FRONT_UNIT)
    assert systemd.unit(systemd_units.FRONT_UNIT)["ActiveState"] == "active"
    assert systemd.rules_present() == [True, True]


@needs_systemd
def test_the_rule_is_back_after_a_flush_and_a_crash_restart(systemd):
    """Restart=on-failure after the front's process dies (SIGKILL): the new start runs ExecStartPre= again."""
    before = systemd.unit(systemd_units.FRONT_UNIT)
    assert before["ActiveState"] == "active"
    systemd.flush_output()
    systemd.run("kill", "-9", before["MainPID"])
    deadline = time.monotonic() + 30
    while True:
        now = systemd.unit(systemd_units.FRONT_UNIT)
        if int(now["NRestarts"]) > int(before["NRestarts"]) and now["ActiveState"] == "active":
            break
        assert time.monotonic() < deadline, now
        time.sleep(0.05)
    assert now["MainPID"] != before["MainPID"]
    assert systemd.rules_present() == [True, True]
