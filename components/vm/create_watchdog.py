"""A watchdog for one queued-resource create: deletes the request if the provider host dies mid-create.

The dynamic-provider host runs the provider on a gRPC worker thread, and Python lets only the main thread
install signal handlers (its main thread sits in pulumi.dynamic's `Event().wait()`), so a SIGTERM or SIGKILL
of the host ends it with no provider code run. The create therefore starts this small process first and
holds a pipe to it: it learns the request's name on the first line, then what the create has done so far:
"requesting" (a create POST of ours is in flight or being retried, so the request may exist), "created"
(the request is this create's own), "existing" (the name is held by a request this create did not make),
"adopted" (an earlier identical one, left alone) or "done" (the create returned or cleaned up itself).
When the pipe ends without "done" (the host is gone, or it handed the job over), the watchdog sends the
DELETE of a request that is or may be this create's, retrying a refusal (a request still provisioning)
until deleteWaitSeconds.

It never holds the CLI open: the engine's Plugin.Close waits until every holder of the plugin's stderr has
closed it (pulumi sdk/go/common/resource/plugin/plugin.go, Close), and the watchdog writes its one line there,
so it lets go of that stderr REPORT_SECONDS after it starts to act at the latest, and goes on (if it must)
with nothing of the CLI's. It runs in its own session, so the signals sent to the host's process group do not
reach it, and it gets only the environment variables the TPU client needs.

    python -m components.vm.create_watchdog_process   (started by QueuedResourceProvider.create)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

# The watchdog process itself, which imports the TPU client (this side must not: queued_resource imports it).
MODULE = "components.vm.create_watchdog_process"
REQUESTING, CREATED, EXISTING, ADOPTED, DONE = "requesting", "created", "existing", "adopted", "done"
# How long after it starts to act the watchdog may still hold the CLI's stderr (so Plugin.Close waits no longer).
REPORT_SECONDS = 20.0
# Per socket operation of the watchdog's API calls (googleapiclient's own default is 60 s: http.py build_http).
HTTP_TIMEOUT_SECONDS = 10.0

# What the watchdog needs of the host's environment, and nothing more: the host's holds the CLI's secrets
# (PULUMI_CONFIG_PASSPHRASE, PULUMI_ACCESS_TOKEN, a CI runner's GITHUB_TOKEN, pulumi-gcp's GOOGLE_CREDENTIALS).
# Every variable google-auth's default credentials read (google/auth/environment_vars.py, google-auth 2.63.0,
# and the few it names in place: pluggable.py's GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES, without which
# executable-sourced credentials refuse to run; _cloud_sdk.py's APPDATA and SystemDrive, gcloud's config on
# Windows), where the TPU API is, the proxy settings and the CA bundle httplib2 reads (HTTPLIB2_CA_CERTS, httplib2
# 0.32.1 certs.py; the OpenSSL names too, for what else opens TLS), googleapiclient's GOOGLE_CLOUD_UNIVERSE_DOMAIN
# (discovery.py, 2.202.0), and what a process needs to start.
_PROCESS = ("PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "PYTHONPATH", "VIRTUAL_ENV")
_NETWORK = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy",
            "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "HTTPLIB2_CA_CERTS")
_TPU_API = ("TPU_VLLM_TPU_API_ENDPOINT", "TPU_VLLM_COMPUTE_API_ENDPOINT")
_GOOGLE_AUTH_IN_PLACE = ("GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES", "APPDATA", "SystemDrive",
                         "GOOGLE_CLOUD_UNIVERSE_DOMAIN")


def _google_auth_names() -> tuple[str, ...]:
    from google.auth import environment_vars

    return tuple(value for name, value in vars(environment_vars).items()
                 if name.isupper() and isinstance(value, str))


def watchdog_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The host's environment, cut to what the watchdog's TPU client reads."""
    wanted = {*_PROCESS, *_NETWORK, *_TPU_API, *_GOOGLE_AUTH_IN_PLACE, *_google_auth_names()}
    return {name: value for name, value in environ.items() if name in wanted}


class CreateWatchdog:
    """The provider's end of the pipe."""

    def __init__(self, process: subprocess.Popen):
        self.process = process

    @classmethod
    def start(cls, request: dict[str, Any], module: str = MODULE) -> CreateWatchdog | None:
        """Start it from the project directory (the host's cwd); None when it cannot start (then the host's own
        interrupt handling alone guards the create). `module`: the compute path's (instance_watchdog_process)."""
        try:
            process = subprocess.Popen([sys.executable, "-m", module], stdin=subprocess.PIPE,
                                       stdout=subprocess.DEVNULL, start_new_session=True, text=True,
                                       env=watchdog_environment(os.environ))
            watchdog = cls(process)
            watchdog._send(json.dumps(request))
            return watchdog
        except OSError:
            return None

    def _send(self, line: str) -> None:
        try:
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()
        except (OSError, ValueError):
            pass  # it is gone already: nothing more it could do

    def tell(self, state: str) -> None:
        self._send(state)

    def _close(self) -> None:
        try:
            self.process.stdin.close()
        except OSError:
            pass

    def release(self) -> None:
        """The create is over and nothing of it is left on the server untracked: the watchdog ends without acting."""
        self._send(DONE)
        self._close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()

    def hand_over(self, state: str) -> None:
        """The host could not finish the cleanup (the DELETE was refused or did not go out): the watchdog sends
        it now and keeps trying after this host has gone. Not waited for."""
        self._send(state)
        self._close()
