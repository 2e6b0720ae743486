# shellcheck shell=bash
# tpu-vllm, Compute Engine images only: components/vm/boot_script.py splices this into startup.sh just before its
# last block, so it runs inside the boot script's traps, lock and status (its functions and settings are
# startup.sh's).
#
# Compute Engine's TPU images (ubuntu-accel-*, project ubuntu-os-accelerator-images) ship no Docker, where the Cloud
# TPU runtime images do: the first boot of a ct6e-standard-1t died on "sudo: docker: command not found". The image
# pull and the serving step's `docker run` need it, so right after the lock the boot installs Ubuntu's docker.io
# when no docker is on PATH; every later boot of the same VM finds it and does nothing.
# shellcheck disable=SC2154 # ATTEMPTS, BACKOFF_SECONDS and RERUN are startup.sh's settings

# install_docker: docker.io from the image's own Ubuntu archive, retried with the delay doubling as http_get's
# (2 s to 128 s, 254 s of pauses: a first boot's apt-daily and unattended-upgrades hold apt's locks a while), then
# its unit enabled and started (the serving step's units need docker.service). At worst, eight tries that each wait
# 60 s on the dpkg lock and the pauses come to ~12 min, inside serve.sh's 900 s wait for the boot script.
install_docker() {
  command -v docker >/dev/null 2>&1 && return 0
  STEP="installing docker (this image ships none)"
  say "no docker on this image: installing docker.io from the Ubuntu archive"
  local attempt=1 delay="$BACKOFF_SECONDS"
  until run_step apt_install_docker; do
    ((attempt < ATTEMPTS)) || die "$STEP: apt-get failed $ATTEMPTS times (journalctl -u google-startup-scripts " \
      "shows its words); $RERUN"
    say "apt-get failed; retry $attempt/$ATTEMPTS in ${delay}s"
    pause "$delay"
    attempt=$((attempt + 1))
    delay=$((delay * 2))
  done
  run_step systemctl enable --now docker.service ||
    die "$STEP: docker.io is installed but docker.service did not start (systemctl status docker); $RERUN"
  command -v docker >/dev/null 2>&1 || die "$STEP: docker.io put no docker on PATH; $RERUN"
  say "docker installed: $(docker --version)"
}

# DPkg::Lock::Timeout: `apt-get install` waits that long for the dpkg locks another apt holds instead of failing at
# once (apt 2.4 and 2.7 apt-pkg/deb/debsystem.cc debSystem::Lock; doc/examples/configure-index). `apt-get update`'s
# lists lock takes no timeout: the retries above cover it, and the archive itself.
apt_install_docker() {
  apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=60 \
      docker.io
}

# The install comes first in main, after start_boot's traps, lock and first status: a failure is a `failed:`
# status the deploy reads, and the background image pull finds docker there.
eval "startup_$(declare -f start_boot)"
start_boot() {
  startup_start_boot
  install_docker
}
