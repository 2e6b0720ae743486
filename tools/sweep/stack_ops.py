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
- `Stack.cancel()` runs `pulumi cancel --yes --stack NAME` (_stack.py cancel -> interface API.cancel). It does not
  stop a running `up` (pulumi/pulumi pkg/cmd/pulumi/cancel/cancel.go calls the backend's CancelCurrentUpdate: the DIY
  backend, pkg/backend/diy/backend.go, only deletes the stack's lock files; Pulumi Cloud's running CLI notices only
  at its next lease renewal, httpstate/token_source.go). So the sweep runs it only to clear the lock of a `pulumi up`
  it had to kill, after that process is gone (see `UpProcess`).
- `pulumi destroy` keeps pending creates (pkg/backend/snapshot.go: "we don't want to clear pending CREATE operations
  because these must require user intervention"): a create cut short stays in the state, unseen by destroy, until
  `pulumi refresh --clear-pending-creates` (pkg/cmd/pulumi/operations/refresh.go, the SDK's
  `refresh(clear_pending_creates=True)`) drops it.
- A KeyboardInterrupt inside `PulumiCommand.run` leaves `subprocess.Popen.__exit__`, which waits for the child at
  most a quarter of a second and does not kill it (CPython Lib/subprocess.py, Popen.__exit__, 3.11): the CLI runs on
  with the terminal's SIGINT. So `up` runs in a worker thread here, the main thread takes Ctrl-C, and the clean-up
  signals that `pulumi up` process itself (`UpProcess`), then refreshes and destroys through the SDK.
- Config by path: `set_all_config(..., path=True)` is `pulumi config set-all --stack NAME --path --plaintext K=V...`,
  `remove_all_config(..., path=True)` is `pulumi config rm-all --stack NAME --path K...` (_local_workspace.py).
- The base's config, secrets included, is copied with `pulumi config copy --stack BASE --dest SWEEP` (interface
  API.config_copy): the CLI re-encrypts secrets for the new stack, and no secret passes on a command line.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pulumi import automation as auto
from pulumi.automation import ConfigValue, PulumiCommand
from pulumi.automation.errors import StackNotFoundError
from semver import VersionInfo

from tools.sweep import config_paths, ownership

# The CLI the sweep drives: the release of the SDK requirements.txt pins (the SDK and the CLI ship together), and
# the one the preview job installs (.github/workflows/preview.yml pulumi-version); Pulumi.yaml's
# requiredPulumiVersion (>=3.174.0) holds for it. tests/test_sweep.py checks all three.
PULUMI_CLI_VERSION = "3.272.0"


def pulumi_command(install: bool = False) -> PulumiCommand:
    version = VersionInfo.parse(PULUMI_CLI_VERSION)
    return PulumiCommand.install(version=version) if install else PulumiCommand(version=version)


class StackExistsError(Exception):
    pass


class NotTheSweepsStackError(Exception):
    """The stack exists and is not this sweep's (no mark, or another sweep's): it is never touched."""


def destroy_command(project_dir: Path, stack: str) -> str:
    """What a person runs to remove the sweep's stack and everything it made, once no `pulumi up` of it runs (a
    `pulumi cancel` beside a running update would only delete its lock: pkg/backend/diy/backend.go)."""
    return (f"pulumi cancel --yes --stack {stack} --cwd {project_dir}; "
            f"pulumi refresh --clear-pending-creates --yes --stack {stack} --cwd {project_dir} && "
            f"pulumi destroy --yes --stack {stack} --cwd {project_dir} && "
            f"pulumi stack rm --yes {stack} --cwd {project_dir}")


def _process_table() -> list[tuple[int, int, list[str]]]:
    """(pid, parent pid, argv words) of every process, from POSIX `ps` (Linux and macOS)."""
    listed = subprocess.run(["ps", "-ww", "-A", "-o", "pid=", "-o", "ppid=", "-o", "args="], capture_output=True,
                            text=True, check=False).stdout
    table = []
    for line in listed.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[0].isdigit() and fields[1].isdigit():
            table.append((int(fields[0]), int(fields[1]), fields[2:]))
    return table


def exit_code(error: BaseException) -> int | None:
    """The CLI's exit code in a CommandError (_cmd.py CommandResult.__str__: "\\n code: N\\n stdout: ..."); None
    for any other error."""
    if not isinstance(error, auto.errors.CommandError):
        return None
    found = re.search(r"^ code: (-?\d+)$", str(error), re.M)
    return int(found.group(1)) if found else None


class UpProcess:
    """The `pulumi up` process the SDK started for the sweep's stack, found among this process's children.

    The SDK keeps no handle to it (_cmd.py PulumiCommand.run: `subprocess.Popen(cmd, ...)` inside `run`), and starts
    it in this process's own process group (no start_new_session), so it is signalled by pid, never by group.
    Its signals (pkg/backend/cancellation_scope.go, `signal.Notify(c.sigint, os.Interrupt, syscall.SIGTERM)`): the
    first SIGINT or SIGTERM cancels (the engine then waits for the steps in flight:
    pkg/resource/deploy/deployment_executor.go `ex.stepExec.WaitForCompletion()`, and a queued-resource create may
    wait up to its queue timeout); the second terminates: the engine closes its plugins (pkg/engine/deployment.go
    `<-ctx.Cancel.Terminated()` -> plugctx Close), each sent SIGINT and SIGKILL 5 s later
    (sdk/go/common/resource/plugin/plugin.go, kill). When the provider host dies mid-create, this project's create
    watchdog deletes the queued-resource request that create made (components/vm/create_watchdog.py).
    """

    def __init__(self, stack: str):
        self.stack = stack
        self.killed = False

    def pid(self) -> int | None:
        for pid, parent, words in _process_table():
            if parent == os.getpid() and "up" in words and "--stack" in words and \
                    words.index("--stack") + 1 < len(words) and words[words.index("--stack") + 1] == self.stack:
                return pid
        return None

    def signal(self, number: int) -> bool:
        """Send it a signal; False when no such process runs."""
        pid = self.pid()
        if pid is None:
            return False
        try:
            os.kill(pid, number)
        except ProcessLookupError:
            return False
        return True

    def kill(self) -> None:
        """SIGKILL the CLI and the process groups of its descendants in this session (its plugins:
        sdk/go/common/resource/plugin/child_unix.go `Setpgid: true`), so no provider host runs on without it. A
        descendant that started a session of its own is left alone: it meant to outlive its parent, as the create
        watchdog (components/vm/create_watchdog.py, `start_new_session=True`) does to delete the request."""
        pid = self.pid()
        if pid is None:
            return
        table = _process_table()
        tree, grew = {pid}, True
        while grew:
            found = {child for child, parent, _ in table if parent in tree} - tree
            grew, tree = bool(found), tree | found
        session = os.getsid(0)
        for member in sorted(tree - {pid}):
            try:
                if os.getsid(member) == session and os.getpgid(member) == member:
                    os.killpg(member, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        self.killed = True


class SweepStack:
    """The sweep's own stack, made from the base stack's config."""

    def __init__(self, project_dir: Path, base: str, name: str, command: PulumiCommand):
        self.project_dir, self.base, self.name = project_dir, base, name
        self.workspace = auto.LocalWorkspace(work_dir=str(project_dir), pulumi_command=command)
        self.stack: auto.Stack | None = None
        self._up_thread: threading.Thread | None = None
        self._up_error: BaseException | None = None
        self._up_code: int | None = None
        self._up_finished = False

    def open(self, resume: bool, mark: str) -> bool:
        """Select the stack (resume) or make it from the base's config; True when it was made now. An existing stack
        is opened only when it carries this sweep's mark (ownership.MARK_TAG = mark), read back through the
        Automation API (`pulumi stack tag ls --json`); a new one gets the mark before anything else."""
        try:
            self.stack = auto.Stack.select(self.name, self.workspace)
        except StackNotFoundError:
            # `config copy` needs the base in the backend (pkg/cmd/pulumi/stack/io.go RequireStack: non-interactive,
            # StackNotFoundError): look first, so a missing base leaves no empty sweep stack behind.
            auto.Stack.select(self.base, self.workspace)
            self.stack = auto.Stack.create(self.name, self.workspace)
            try:
                self.workspace.set_tag(self.name, ownership.MARK_TAG, mark)
            except auto.errors.CommandError:
                self.workspace.remove_stack(self.name)  # new and empty: nothing of it may stay unmarked
                self.stack = None
                raise
            self.workspace.cli_api.config_copy(stack=self.base, dest=self.name, cwd=str(self.project_dir),
                                               additional_env=dict(self.workspace.env_vars))
            return True
        tags = self.workspace.list_tags(self.name)
        problem = ownership.mark_problem(self.name, tags if isinstance(tags, dict) else {}, mark if resume else None)
        if problem is not None and (resume or ownership.MARK_TAG not in (tags or {})):
            self.stack = None
            raise NotTheSweepsStackError(problem)
        if not resume:
            self.stack = None
            raise StackExistsError(
                f"stack {self.name} already exists (a sweep that did not finish?): add --resume to go on with it, "
                f"or remove it: {destroy_command(self.project_dir, self.name)}")
        return False

    def apply(self, to_set: dict[str, str], to_remove: list[str]) -> None:
        assert self.stack is not None
        if to_remove:
            # `config rm-all` removes its keys one after another, and removing a list element shifts the later ones
            # down (pkg/cmd/pulumi/config/config.go rm-all; sdk/go/common/resource/config/object.go Delete:
            # `append(v[:index], v[index+1:]...)`, a missing index ignored): remove the highest index first.
            self.stack.remove_all_config(sorted(to_remove, key=config_paths.natural_key, reverse=True), path=True)
        if to_set:
            self.stack.set_all_config({key: ConfigValue(value=value) for key, value in to_set.items()}, path=True)

    def start_up(self, on_event: Callable[[Any], None], on_output: Callable[[str], None]) -> None:
        """`up` in a worker thread, so Ctrl-C reaches the main thread (see the module's notes)."""
        assert self.stack is not None
        self._up_error = None
        self._up_code = None
        self._up_finished = False

        def work() -> None:
            try:
                self.stack.up(on_event=on_event, on_output=on_output, on_error=on_output, color="never")
                self._up_finished = True
            except BaseException as error:  # handed to the main thread, which decides
                self._up_code = exit_code(error)
                self._up_error = error

        self._up_thread = threading.Thread(target=work, name="pulumi-up", daemon=True)
        self._up_thread.start()

    def up_running(self) -> bool:
        return self._up_thread is not None and self._up_thread.is_alive()

    def up_unfinished(self) -> bool:
        """An `up` was started and did not succeed (it may have left pending creates)."""
        return self._up_thread is not None and not self._up_finished

    def up_ended_by_signal(self) -> bool:
        """The last `up` ended killed by a signal (a negative exit code: CPython's returncode for a signal), so
        its CLI never released the stack's lock (pkg/backend/diy/lock.go: the lock file is removed only by the
        update's own unlock, or by `pulumi cancel`)."""
        return not self.up_running() and self._up_code is not None and self._up_code < 0

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

    def up_process(self) -> UpProcess:
        return UpProcess(self.name)

    def cancel(self) -> str:
        """`pulumi cancel`: only to clear the lock a killed `pulumi up` left, once it is gone; what happened."""
        assert self.stack is not None
        assert not self.up_running(), "pulumi cancel beside a running update only deletes its lock"
        try:
            self.stack.cancel()
        except auto.errors.CommandError as error:
            return f"pulumi cancel refused: {str(error).strip().splitlines()[-1]}"
        return "cleared the killed update's lock (pulumi cancel)"

    def clear_pending_creates(self, on_output: Callable[[str], None]) -> None:
        """`pulumi refresh --clear-pending-creates --yes`: drop the creates an interrupted update left pending,
        which `destroy` would keep (see the module's notes)."""
        assert self.stack is not None
        self.stack.refresh(clear_pending_creates=True, on_output=on_output, on_error=on_output, color="never")

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
