"""The sweep's stack through Pulumi's Automation API (pulumi.automation, the SDK requirements.txt pins, 3.272.0).

Every call goes through one `PulumiCommand` (pulumi/automation/_cmd.py): the CLI at the pinned version, found on PATH
(at least PULUMI_CLI_VERSION, same major: _cmd.py _parse_and_validate_pulumi_version) or installed with
`PulumiCommand.install` under ~/.pulumi/versions/<version>. Tests hand in their own `PulumiCommand` (the SDK's only
seam: pulumi/pulumi#7790 has no official mocks).

What the SDK does with each call, read in its source (pulumi 3.272.0):
- `Stack.up(on_event=...)` runs `pulumi up --yes --skip-preview ... --event-log <target> --stack NAME`; from CLI
  3.206 on the target is `tcp://127.0.0.1:PORT`, a gRPC Events server the SDK starts, each request one engine event
  as JSON, parsed with `EngineEvent.from_json` (_stack.py _setup_event_log, _EventsServicer); older CLIs write JSON
  lines to a file the SDK tails (_watch_logs).
- `Stack.cancel()` runs `pulumi cancel --yes --stack NAME` (_stack.py cancel -> interface API.cancel), "very
  dangerous": a resource operation in flight may be left pending, which is why a destroy always follows.
- A KeyboardInterrupt inside `PulumiCommand.run` leaves `subprocess.Popen.__exit__`, which waits for the child at
  most a quarter of a second and does not kill it (CPython Lib/subprocess.py, Popen.__exit__, 3.11): the CLI runs on
  with the terminal's SIGINT. So `up` runs in a worker thread here, the main thread takes Ctrl-C, and the clean-up
  goes through the SDK's own cancel and destroy.
- Config by path: `set_all_config(..., path=True)` is `pulumi config set-all --stack NAME --path --plaintext K=V...`,
  `remove_all_config(..., path=True)` is `pulumi config rm-all --stack NAME --path K...` (_local_workspace.py).
- The base's config, secrets included, is copied with `pulumi config copy --stack BASE --dest SWEEP` (interface
  API.config_copy): the CLI re-encrypts secrets for the new stack, and no secret passes on a command line.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pulumi import automation as auto
from pulumi.automation import ConfigValue, PulumiCommand
from pulumi.automation.errors import StackNotFoundError
from semver import VersionInfo

# The CLI the sweep drives: the release of the SDK requirements.txt pins (the SDK and the CLI ship together), and
# the one the preview job installs (.github/workflows/preview.yml pulumi-version); Pulumi.yaml's
# requiredPulumiVersion (>=3.174.0) holds for it. tests/test_sweep.py checks all three.
PULUMI_CLI_VERSION = "3.272.0"


def pulumi_command(install: bool = False) -> PulumiCommand:
    version = VersionInfo.parse(PULUMI_CLI_VERSION)
    return PulumiCommand.install(version=version) if install else PulumiCommand(version=version)


class StackExistsError(Exception):
    pass


def destroy_command(project_dir: Path, stack: str) -> str:
    """What a person runs to remove the sweep's stack and everything it made."""
    return (f"pulumi cancel --yes --stack {stack} --cwd {project_dir}; "
            f"pulumi destroy --yes --stack {stack} --cwd {project_dir} && "
            f"pulumi stack rm --yes {stack} --cwd {project_dir}")


class SweepStack:
    """The sweep's own stack, made from the base stack's config."""

    def __init__(self, project_dir: Path, base: str, name: str, command: PulumiCommand):
        self.project_dir, self.base, self.name = project_dir, base, name
        self.workspace = auto.LocalWorkspace(work_dir=str(project_dir), pulumi_command=command)
        self.stack: auto.Stack | None = None
        self._up_thread: threading.Thread | None = None
        self._up_error: BaseException | None = None

    def open(self, resume: bool) -> bool:
        """Select the stack (resume) or make it from the base's config; True when it was made now."""
        try:
            self.stack = auto.Stack.select(self.name, self.workspace)
        except StackNotFoundError:
            self.stack = auto.Stack.create(self.name, self.workspace)
            self.workspace.cli_api.config_copy(stack=self.base, dest=self.name, cwd=str(self.project_dir),
                                               additional_env=dict(self.workspace.env_vars))
            return True
        if not resume:
            raise StackExistsError(
                f"stack {self.name} already exists (a sweep that did not finish?): add --resume to go on with it, "
                f"or remove it: {destroy_command(self.project_dir, self.name)}")
        return False

    def apply(self, to_set: dict[str, str], to_remove: list[str]) -> None:
        assert self.stack is not None
        if to_remove:
            self.stack.remove_all_config(to_remove, path=True)
        if to_set:
            self.stack.set_all_config({key: ConfigValue(value=value) for key, value in to_set.items()}, path=True)

    def start_up(self, on_event: Callable[[Any], None], on_output: Callable[[str], None]) -> None:
        """`up` in a worker thread, so Ctrl-C reaches the main thread (see the module's notes)."""
        assert self.stack is not None
        self._up_error = None

        def work() -> None:
            try:
                self.stack.up(on_event=on_event, on_output=on_output, on_error=on_output, color="never")
            except BaseException as error:  # handed to the main thread, which decides
                self._up_error = error

        self._up_thread = threading.Thread(target=work, name="pulumi-up", daemon=True)
        self._up_thread.start()

    def up_running(self) -> bool:
        return self._up_thread is not None and self._up_thread.is_alive()

    def wait_up(self, timeout: float) -> bool:
        """True when the `up` ended (re-raising its error); False while it still runs."""
        assert self._up_thread is not None
        self._up_thread.join(timeout)
        if self._up_thread.is_alive():
            return False
        if self._up_error is not None:
            error, self._up_error = self._up_error, None
            raise error
        return True

    def cancel(self) -> str:
        """The SDK's cancel of the running update; what happened, in a line."""
        assert self.stack is not None
        try:
            self.stack.cancel()
        except auto.errors.CommandError as error:
            return f"pulumi cancel refused: {str(error).strip().splitlines()[-1]}"
        return "cancelled the running update (pulumi cancel)"

    def outputs(self) -> dict[str, Any]:
        assert self.stack is not None
        return {key: output.value for key, output in self.stack.outputs().items()}

    def destroy(self, on_output: Callable[[str], None]) -> None:
        """Destroy everything the stack made, then remove the stack (its config file goes with it)."""
        assert self.stack is not None
        self.stack.destroy(on_output=on_output, on_error=on_output, color="never")
        self.workspace.remove_stack(self.name)

    def up_blocking(self, on_event: Callable[[Any], None], on_output: Callable[[str], None]) -> None:
        assert self.stack is not None
        self.stack.up(on_event=on_event, on_output=on_output, on_error=on_output, color="never")
