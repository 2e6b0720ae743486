"""The boot script a node path runs (the startup-script metadata): startup/startup.sh, and on Compute Engine's TPU
images startup/install_docker.sh with it, since those images ship no Docker where the Cloud TPU runtime images do
(components/catalog/shapes.py compute_image says which image each generation boots).

The fragment goes in just before startup.sh's last block (the one that runs `main` when the file is executed), so
the node still runs one file, and its line numbers in a `failed:` status are that file's."""

from __future__ import annotations

from pathlib import Path

from components.catalog import COMPUTE

STARTUP_DIR = Path(__file__).resolve().parents[2] / "startup"
STARTUP_SCRIPT = STARTUP_DIR / "startup.sh"
INSTALL_DOCKER = STARTUP_DIR / "install_docker.sh"
# startup.sh's last block: main runs only when the file is executed, never when a test sources it.
EXECUTED_BLOCK = 'if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then\n  main "$@"\nfi\n'


def boot_script(api: str) -> str:
    """startup.sh as it is for a queued resource's node; with the Docker install for a Compute Engine instance."""
    script = STARTUP_SCRIPT.read_text()
    if api != COMPUTE:
        return script
    if not script.endswith(EXECUTED_BLOCK) or script.count(EXECUTED_BLOCK) != 1:
        raise RuntimeError(f"{STARTUP_SCRIPT} no longer ends with the block boot_script.py splices before")
    return script.removesuffix(EXECUTED_BLOCK) + INSTALL_DOCKER.read_text() + "\n" + EXECUTED_BLOCK
