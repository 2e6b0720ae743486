"""A fake Pulumi CLI behind the Automation API's own seam, `PulumiCommand` (pulumi/pulumi#7790: no official mocks).

The SDK (pulumi 3.272.0, requirements.txt's pin) hands every call to `PulumiCommand.run(args, cwd, additional_env,
on_output, on_error)` and reads what comes back; this fake answers those calls, and only in the forms the SDK sends
and parses (pulumi/automation/_local_workspace.py, _stack.py, interface/__init__.py, events.py):
- its version goes through the SDK's own check (_cmd.py _parse_and_validate_pulumi_version);
- `run` prepends `--non-interactive` as _cmd.py does, and fails by raising the SDK's `create_command_error`, so a
  missing stack is StackNotFoundError because stderr says "no stack named '...' found" (errors.py not_found_regex);
- `stack output --json` and `--show-secrets`: secrets masked as "[secret]" (_config.py _SECRET_SENTINEL) in the
  first; `stack history --json`: the keys and time format `Stack.history` reads (_stack.py _DATETIME_FORMAT);
- `up ... --event-log tcp://HOST:PORT` streams each engine event as JSON in an `EventRequest` to the SDK's gRPC
  Events server (the CLI's way from 3.206 on: _stack.py _setup_event_log); a file path gets JSON lines instead
  (_watch_logs); every event parses with `EngineEvent.from_json`, and the stream ends with a cancelEvent;
- `config set-all --path` stores each value as Pulumi's config map does (pulumi/pulumi
  sdk/go/common/resource/config/object.go coerce, via value.go coerceObject, at 1b59498): "true"/"false" as bools,
  text of more than one byte starting with "0" as text, what `strconv.ParseInt(v, 10, 64)` or else
  `strconv.ParseUint(v, 10, 64)` reads as a number (golang/go src/strconv/atoi.go: ASCII digits, a sign only for
  ParseInt, out of range an error), the rest as text.

- exit codes as the CLI's main.go `os.Exit(cmd.ExitCodeFor(err))` (pkg/cmd/pulumi/cmd/exit_codes.go; constants in
  sdk/go/common/util/cmdutil/exit.go): StackNotFoundError 6, an auth error (MissingEnvVarForNonInteractiveError) 3,
  anything else 1.

The "program" it deploys is a model of this stack's vm wing: a cache disk (retainOnDelete when cache.keepOnDestroy:
components/vm/cache_disk.py), a TPU node (replaced when the tpu section, the cache, vllm.image, vllm.serverPort,
monitoring or access change), and the serving step (re-run over SSH when anything else changes). Its ledger records
every node and disk, and which still bill.

A held `up` (hold_up=True) is a real child process (`UpStandIn`), found and signalled as the sweep finds the CLI's,
with the CLI's signal behaviour while a queued-resource create is in flight: the first SIGINT/SIGTERM only asks the
engine to cancel, which waits for the step in flight (pkg/resource/deploy/deployment_executor.go
`ex.stepExec.WaitForCompletion()`; the Python dynamic provider's Cancel does nothing:
sdk/python/lib/pulumi/dynamic/__main__.py `def Cancel(...): return empty_pb2.Empty()`); the second terminates
(pkg/backend/cancellation_scope.go `cancelSource.Terminate()`), killing the provider host, whose create watchdog
then deletes the request (components/vm/create_watchdog.py; `watchdog_works=False` models its failure); SIGKILL
leaves the stack's lock (pkg/backend/diy/lock.go). Either way the create stays pending in the state.
`pulumi cancel` is the DIY backend's (pkg/backend/diy/backend.go CancelCurrentUpdate: "Try to delete ALL the lock
files"): it deletes the lock and does not touch a running `up`. `destroy` skips pending creates
(pkg/backend/snapshot.go); `refresh --clear-pending-creates` drops them (pkg/cmd/pulumi/operations/refresh.go).
"""

from __future__ import annotations

import copy
import json
import queue
import re
import signal
import subprocess
import sys
import threading
from datetime import UTC, datetime
from typing import Any

import grpc
from pulumi.automation._cmd import CommandResult, PulumiCommand, _parse_and_validate_pulumi_version
from pulumi.automation._minimum_version import _MINIMUM_VERSION
from pulumi.automation.errors import create_command_error
from pulumi.runtime.proto import events_pb2, events_pb2_grpc

DATETIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
SECRET = "[secret]"
NODE_SECTIONS = ("tpu", "cache", "monitoring", "access")
NODE_VLLM_KEYS = ("image", "serverPort")
PROJECT = "tpu-vllm"
# pkg/cmd/pulumi/cmd/exit_codes.go ExitCodeFor (cmdutil/exit.go constants).
EXIT_ERROR, EXIT_AUTH, EXIT_STACK_NOT_FOUND = 1, 3, 6
# components/vm/tpu_node.py and the golden plans (tests/golden/dev.json).
NODE_TYPE, QUEUED_RESOURCE_TYPE = "tpu-vllm:tpu:TpuNode", "pulumi-python:dynamic/tpu-vllm:QueuedResource"
# pkg/backend/diy/lock.go checkForLock.
LOCKED = ("error: the stack is currently locked by 1 lock(s). Either wait for the other process(es) to end or delete "
          "the lock file with `pulumi cancel`.")
# The held `up`'s process: its argv carries the CLI's words (so the sweep's process lookup sees `up --stack S`);
# on its first signal it goes on (a create in flight), on the second it ends as a terminated CLI does.
STAND_IN = """
import signal, sys, time
seen = []
def on_signal(number, frame):
    seen.append(number)
    print("cancel" if len(seen) == 1 else "terminate", flush=True)
    if len(seen) > 1 and sys.argv[1] != "ignore":
        sys.exit(255)
signal.signal(signal.SIGINT, on_signal)
signal.signal(signal.SIGTERM, on_signal)
print("ready", flush=True)
time.sleep(30)
"""


def _parse_uint(text: str, bits: int = 64) -> int | None:
    """golang/go src/strconv/atoi.go ParseUint(s, 10, 64): ASCII digits only, no sign, at most 1<<64 - 1."""
    if not text:
        return None
    number = 0
    for byte in text.encode():
        if not 0x30 <= byte <= 0x39:
            return None
        number = number * 10 + byte - 0x30
        if number >= 1 << bits:
            return None  # ErrRange
    return number


def _parse_int(text: str) -> int | None:
    """ParseInt(s, 10, 64): an optional "+" or "-", then ParseUint's digits, within int64."""
    sign, digits = (text[0], text[1:]) if text[:1] in ("+", "-") else ("+", text)
    number = _parse_uint(digits)
    if number is None:
        return None
    number = -number if sign == "-" else number
    return number if -(1 << 63) <= number < 1 << 63 else None


def adjusted(text: str) -> Any:
    """object.go coerce, for a value set by path: "false"/"true" as bools; more than one byte starting with "0" as
    text; ParseInt(v, 10, 64), then ParseUint(v, 10, 64), as numbers; the rest as text."""
    if text in ("true", "false"):
        return text == "true"
    if len(text.encode()) > 1 and text.encode()[0] == 0x30:
        return text
    for parse in (_parse_int, _parse_uint):
        number = parse(text)
        if number is not None:
            return number
    return text


def _parse_path(path: str) -> list[str | int]:
    parts: list[str | int] = []
    for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", path):
        parts.append(int(index) if index else name)
    return parts


def _set_path(root: dict[str, Any], parts: list[str | int], value: Any) -> None:
    node: Any = root
    for part, following in zip(parts, parts[1:], strict=False):
        if isinstance(node, list):
            while len(node) <= part:
                node.append(None)
            if not isinstance(node[part], (dict, list)):
                node[part] = [] if isinstance(following, int) else {}
            node = node[part]
        else:
            if not isinstance(node.get(part), (dict, list)):
                node[part] = [] if isinstance(following, int) else {}
            node = node[part]
    last = parts[-1]
    if isinstance(node, list):
        while len(node) <= last:
            node.append(None)
    node[last] = value


def _remove_path(root: dict[str, Any], parts: list[str | int]) -> None:
    node: Any = root
    for part in parts[:-1]:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return
    if isinstance(node, dict):
        node.pop(parts[-1], None)
    elif isinstance(node, list) and isinstance(parts[-1], int) and parts[-1] < len(node):
        node.pop(parts[-1])


class FakeStack:
    def __init__(self, name: str, config: dict[str, Any] | None = None):
        self.name = name
        self.config: dict[str, Any] = config or {}
        """Full keys (tpu-vllm:vllm) -> values as the stack file holds them."""
        self.resources: dict[str, dict[str, Any]] = {}
        self.pending_creates: list[dict[str, Any]] = []
        """Ledger items of creates an update was stopped in (pending CREATE operations in the state)."""
        self.locked = False
        self.outputs: dict[str, tuple[Any, bool]] = {}
        self.history: list[dict[str, Any]] = []
        self.tags: dict[str, str] = {}


class FakePulumiCli(PulumiCommand):
    def __init__(self, stacks: dict[str, dict[str, Any]], version: str = "3.272.0",
                 hold_up: bool = False, fail_up: str | None = None, logged_out: bool = False,
                 watchdog_works: bool = True, tags: dict[str, dict[str, str]] | None = None):
        self.command = "pulumi"
        self.version = _parse_and_validate_pulumi_version(_MINIMUM_VERSION, version, False)
        self.stacks = {name: FakeStack(name, copy.deepcopy(config)) for name, config in stacks.items()}
        for name, stack_tags in (tags or {}).items():
            self.stacks[name].tags.update(stack_tags)
        self.selected: str | None = None
        self.calls: list[list[str]] = []
        self.ledger: list[dict[str, Any]] = []
        """Every node and disk ever made: kind, stack, serial, the config it was made from, billing."""
        self.serving_runs: list[dict[str, Any]] = []
        """Each run of the serving step: node serial and the vllm/tpuInference config it ran."""
        self.hold_up = hold_up
        """`up` makes the disk, then holds with the node's create in flight, in a real process (see above)."""
        self.watchdog_works = watchdog_works
        self.cancelled_while_up_ran = False
        """`pulumi cancel` was run while an `up` of that stack still ran (it only deletes the lock: a race)."""
        self.up_process: subprocess.Popen | None = None
        self.ignores_signals = False
        """The held `up` ignores SIGINT and SIGTERM too (a CLI that never ends by itself: only SIGKILL stops it)."""
        self.cleared_pending_creates: list[dict[str, Any]] = []
        self.fail_up = fail_up
        self.logged_out = logged_out
        """No credentials for the backend: every stack command fails as the CLI does (backenderr.go)."""
        self.up_in_flight = threading.Event()
        self._lock = threading.Lock()
        self._serial = 0

    # ---- the seam ----

    def run(self, args, cwd, additional_env, on_output=None, on_error=None) -> CommandResult:
        args = list(args)
        separator = args.index("--") if "--" in args else len(args)
        if "--non-interactive" not in args[:separator]:
            args.insert(0, "--non-interactive")  # as _cmd.py PulumiCommand.run does
        self.calls.append(args)
        words = [arg for arg in args if arg != "--non-interactive"]
        code, stdout, stderr = self._dispatch(words, on_output)
        result = CommandResult(stdout=stdout, stderr=stderr, code=code)
        if code != 0:
            raise create_command_error(result)
        return result

    def interrupt(self) -> None:
        """The terminal's SIGINT reaching the CLI's process too (the SDK starts it in the terminal's process group:
        _cmd.py `subprocess.Popen(cmd, ...)`, no new session)."""
        process = self.up_process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)

    def hangup(self) -> None:
        """The terminal closing: SIGHUP reaches the CLI's process too. The CLI does not handle it (pkg/backend/
        cancellation_scope.go notifies only os.Interrupt and SIGTERM), so Go's runtime ends it at once (golang/go
        src/os/signal/doc.go): the stand-in keeps SIGHUP's default action, and dies of it as the CLI does."""
        process = self.up_process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGHUP)

    def billing(self) -> list[str]:
        return [f"{item['kind']}#{item['serial']}" for item in self.ledger if item["billing"]]

    # ---- commands ----

    @staticmethod
    def _flag(words: list[str], name: str) -> str | None:
        return words[words.index(name) + 1] if name in words else None

    def _stack(self, words: list[str]) -> FakeStack | None:
        name = self._flag(words, "--stack") or self.selected
        return self.stacks.get(name) if name else None

    def _dispatch(self, words: list[str], on_output: Any) -> tuple[int, str, str]:
        head = words[:2]
        if self.logged_out:  # pkg/backend/backenderr/backenderr.go MissingEnvVarForNonInteractiveError
            return EXIT_AUTH, "", "error: PULUMI_ACCESS_TOKEN must be set for login during non-interactive CLI sessions"
        if head == ["stack", "select"]:
            name = self._flag(words, "--stack")
            if name not in self.stacks:  # pkg/backend/backenderr/backenderr.go StackNotFoundError
                return EXIT_STACK_NOT_FOUND, "", f"error: no stack named '{name}' found"
            self.selected = name
            return 0, "", ""
        if head == ["stack", "init"]:
            name = words[2]
            if name in self.stacks:  # backenderr.go StackAlreadyExistsError
                return EXIT_ERROR, "", f"error: stack '{name}' already exists"
            self.stacks[name] = FakeStack(name)
            self.selected = name
            return 0, "", ""
        if head == ["stack", "rm"]:
            name = next(word for word in words[2:] if not word.startswith("--"))
            if self.stacks[name].resources and "--force" not in words:
                # pkg/cmd/pulumi/stack/stack_remove.go (pkg/v3.259.0-14)
                return EXIT_ERROR, "", (f"error: '{name}' still has resources; removal rejected. Possible actions:\n"
                                 f"- Make sure that '{name}' is the stack that you want to destroy\n"
                                 "- Run `pulumi destroy` to delete the resources, then run `pulumi stack rm`\n"
                                 "- Run `pulumi stack rm --force` to override this error")
            del self.stacks[name]
            return 0, "", ""
        stack = self._stack(words)
        if stack is None:
            return EXIT_STACK_NOT_FOUND, "", f"error: no stack named '{self._flag(words, '--stack')}' found"
        if head == ["stack", "tag"]:
            return self._tag(stack, words[2:])
        if head == ["config", "copy"]:
            # pkg/cmd/pulumi/config/config.go newConfigCopyCmd opens the source with stack/io.go RequireStack:
            # non-interactive, a missing one is StackNotFoundError.
            if self._flag(words, "--stack") not in self.stacks:
                return EXIT_STACK_NOT_FOUND, "", f"error: no stack named '{self._flag(words, '--stack')}' found"
            source, dest = self.stacks[self._flag(words, "--stack")], self.stacks[self._flag(words, "--dest")]
            dest.config.update(copy.deepcopy(source.config))
            return 0, "", ""
        if head == ["config", "set-all"]:
            path = "--path" in words
            for index, word in enumerate(words):
                if word in ("--plaintext", "--secret"):
                    key, _, text = words[index + 1].partition("=")
                    self._set(stack, key, text, path)
            return 0, "", ""
        if head == ["config", "rm-all"]:
            keys = [word for word in words[2:] if not word.startswith("--") and word != stack.name]
            for key in keys:
                namespace, _, name = key.partition(":")
                parts = _parse_path(name) if "--path" in words else [name]
                if len(parts) == 1:
                    stack.config.pop(f"{namespace}:{parts[0]}", None)
                else:
                    _remove_path(stack.config.setdefault(f"{namespace}:{parts[0]}", {}), parts[1:])
            return 0, "", ""
        if head == ["stack", "output"]:
            shown = {key: (value if ("--show-secrets" in words or not secret) else SECRET)
                     for key, (value, secret) in stack.outputs.items()}
            return 0, json.dumps(shown), ""
        if head == ["stack", "history"]:
            return 0, json.dumps(list(reversed(stack.history))[:1] if "--page-size" in words else stack.history), ""
        if words[0] == "cancel":
            # pkg/cmd/pulumi/cancel/cancel.go: the backend's CancelCurrentUpdate, then this line. The DIY backend
            # only deletes the stack's lock files (pkg/backend/diy/backend.go), succeeds with no update running, and
            # tells a running `up` nothing.
            if self.up_process is not None and self.up_process.poll() is None:
                self.cancelled_while_up_ran = True
            stack.locked = False
            return 0, f"The currently running update for '{stack.name}' has been canceled!", ""
        if words[0] in ("up", "refresh", "destroy") and stack.locked:
            return EXIT_ERROR, "", LOCKED
        if words[0] == "up":
            return self._up(stack, words, on_output)
        if words[0] == "refresh":
            return self._refresh(stack, words, on_output)
        if words[0] == "destroy":
            return self._destroy(stack, on_output)
        return EXIT_ERROR, "", f"error: the fake does not know `pulumi {' '.join(words)}`"

    @staticmethod
    def _tag(stack: FakeStack, words: list[str]) -> tuple[int, str, str]:
        """pkg/cmd/pulumi/stack/stack_tag.go: `set NAME VALUE`, `get NAME` (the value and a newline, or "stack tag
        'NAME' not found for stack 'REF'"), `ls --json` (ui.FprintJSON: two-space indent, keys sorted, a newline);
        names as pkg/util/validation/stack.go validateStackTagName takes them."""
        verb, arguments = words[0], [word for word in words[1:] if not word.startswith("--")
                                     and word != stack.name]
        if verb == "set":
            name, value = arguments[:2]
            if not re.fullmatch(r"[a-zA-Z0-9-_.:]{1,40}", name):
                return EXIT_ERROR, "", ("error: stack tag names may only contain alphanumerics, hyphens, "
                                        "underscores, periods, or colons")
            stack.tags[name] = value
            return 0, "", ""
        if verb == "get":
            if arguments[0] in stack.tags:
                return 0, stack.tags[arguments[0]] + "\n", ""
            return EXIT_ERROR, "", f"error: stack tag '{arguments[0]}' not found for stack '{stack.name}'"
        if verb in ("ls", "list"):
            return 0, json.dumps(dict(sorted(stack.tags.items())), indent=2) + "\n", ""
        return EXIT_ERROR, "", f"error: the fake does not know `pulumi stack tag {verb}`"

    def _set(self, stack: FakeStack, key: str, text: str, path: bool) -> None:
        namespace, _, name = key.partition(":")
        parts = _parse_path(name) if path else [name]
        if len(parts) == 1:
            stack.config[f"{namespace}:{parts[0]}"] = text
            return
        root = stack.config.get(f"{namespace}:{parts[0]}")
        if not isinstance(root, (dict, list)):
            root = {} if isinstance(parts[1], str) else []
            stack.config[f"{namespace}:{parts[0]}"] = root
        _set_path(root, parts[1:], adjusted(text))

    # ---- the deployment ----

    def _node_of(self, stack: FakeStack) -> str:
        config = stack.config
        vllm = config.get(f"{PROJECT}:vllm") or {}
        return json.dumps([config.get(f"{PROJECT}:{section}") for section in NODE_SECTIONS]
                          + [vllm.get(key) for key in NODE_VLLM_KEYS], sort_keys=True)

    def _serving_of(self, stack: FakeStack) -> str:
        return json.dumps({key: value for key, value in stack.config.items()}, sort_keys=True, default=str)

    def _make(self, kind: str, stack: FakeStack) -> dict[str, Any]:
        with self._lock:
            self._serial += 1
            item = {"kind": kind, "stack": stack.name, "serial": self._serial, "billing": True,
                    "config": copy.deepcopy(stack.config)}
            self.ledger.append(item)
        return item

    def _up(self, stack: FakeStack, words: list[str], on_output: Any) -> tuple[int, str, str]:
        events = EventSink(self._flag(words, "--event-log"))
        started = datetime.now(UTC)
        changes: dict[str, int] = {}
        events.send({"preludeEvent": {"config": {k: json.dumps(v) if not isinstance(v, str) else v
                                                 for k, v in stack.config.items()}}})
        try:
            if "disk" not in stack.resources:
                stack.resources["disk"] = self._make("disk", stack)
                events.step("create", "gcp:compute/disk:Disk", "cache-disk")
                changes["create"] = changes.get("create", 0) + 1
            node_key = self._node_of(stack)
            node = stack.resources.get("node")
            if node is None or node["key"] != node_key:
                events.step("replace" if node else "create", NODE_TYPE, "tpu")
                if node:
                    node["item"]["billing"] = False
                made = self._make("node", stack)
                if self.hold_up:
                    events.begin("create", QUEUED_RESOURCE_TYPE, "tpu-qr")
                    stack.resources.pop("node", None)
                    return self._held(stack, words, made, events, on_output)
                stack.resources["node"] = {"key": node_key, "item": made}
                changes["replace" if node else "create"] = changes.get("replace" if node else "create", 0) + 1
                stack.resources.pop("serving", None)
            if self.fail_up:
                events.send({"diagnosticEvent": {"message": self.fail_up, "severity": "error", "color": "never"}})
                return EXIT_ERROR, "", f"error: {self.fail_up}"
            serving = self._serving_of(stack)
            if stack.resources.get("serving") != serving:
                events.step("replace" if "serving" in stack.resources else "create",
                            "command:remote:Command", "vllm-serve")
                stack.resources["serving"] = serving
                self.serving_runs.append({"node": stack.resources["node"]["item"]["serial"],
                                          "vllm": copy.deepcopy(stack.config.get(f"{PROJECT}:vllm")),
                                          "tpuInference": copy.deepcopy(stack.config.get(f"{PROJECT}:tpuInference"))})
            stack.outputs = {
                "localEndpoint": ("http://127.0.0.1:8000/v1", False),
                "sshCommand": ("ssh -i tpu-vllm-key -p 22 tpu-vllm@203.0.113.7", False),
                "sshPrivateKey": ("not-a-key", True), "sshKnownHosts": ("203.0.113.7 ssh-ed25519 AAAA", False),
                "apiKey": ("not-the-key", True)}
            events.send({"summaryEvent": {"maybeCorrupt": False, "durationSeconds": 1, "resourceChanges": changes,
                                          "PolicyPacks": {}}})
            if on_output:
                on_output("Resources:")
            self._history(stack, "update", started, changes)
            return 0, "Resources:", ""
        finally:
            self.up_in_flight.clear()
            events.close()

    def _held(self, stack: FakeStack, words: list[str], node: dict[str, Any], events: EventSink,
              on_output: Any) -> tuple[int, str, str]:
        """The node's create in flight, in a process of its own, until it is terminated or killed."""
        stack.pending_creates.append(node)
        stack.locked = True
        process = self.up_process = subprocess.Popen([sys.executable, "-c", STAND_IN,
                                                      "ignore" if self.ignores_signals else "obey", "pulumi", *words],
                                                     stdout=subprocess.PIPE, text=True)
        assert process.stdout is not None
        for line in process.stdout:
            if line.strip() == "ready":
                self.up_in_flight.set()
            elif line.strip() == "cancel":  # cancellation_scope.go's line; the create goes on
                message = ("^C received; cancelling. If you would like to terminate immediately, press ^C again.\n"
                           "Note that terminating immediately may lead to orphaned resources and other "
                           "inconsistencies.\n")
                events.send({"stdoutEvent": {"message": message, "color": "never"}})
                if on_output:
                    on_output(message.strip())
        code = process.wait()
        self.up_process = None
        if code == 255:  # terminated: the engine closed its plugins (plugin.go kill), so the host is gone
            stack.locked = False
        elif code >= 0:  # the stand-in's time ran out: no test may rely on that
            return EXIT_ERROR, "", "error: the fake's held update was never stopped"
        if self.watchdog_works:  # the provider host died mid-create: its watchdog deletes the request
            node["billing"] = False
        if code < 0:  # SIGKILL: no last words, and the lock stays
            return code, "", ""
        events.send({"diagnosticEvent": {"message": "update terminated", "severity": "error", "color": "never"}})
        return EXIT_ERROR, "", "error: update terminated"

    def _refresh(self, stack: FakeStack, words: list[str], on_output: Any) -> tuple[int, str, str]:
        started = datetime.now(UTC)
        if "--clear-pending-creates" in words:  # dropped from the state; nothing is deleted
            self.cleared_pending_creates += stack.pending_creates
            stack.pending_creates = []
        if on_output:
            on_output("Resources:")
        self._history(stack, "refresh", started, {"same": len(stack.resources)})
        return 0, "", ""

    def _destroy(self, stack: FakeStack, on_output: Any) -> tuple[int, str, str]:
        started = datetime.now(UTC)
        deleted = 0
        keep_disk = (stack.config.get(f"{PROJECT}:cache") or {}).get("keepOnDestroy") is True
        for name, resource in stack.resources.items():  # pending creates are not among them: destroy skips them
            item = resource.get("item", resource) if isinstance(resource, dict) else None
            if isinstance(item, dict) and "billing" in item:
                if name == "disk" and keep_disk:  # retainOnDelete: removed from the state, not deleted
                    continue
                item["billing"] = False
                deleted += 1
        stack.resources.clear()
        stack.outputs = {}
        if on_output:
            on_output(f"Resources: {deleted} deleted")
        self._history(stack, "destroy", started, {"delete": deleted})
        return 0, "", ""

    def _history(self, stack: FakeStack, kind: str, started: datetime, changes: dict[str, int]) -> None:
        stack.history.append({"kind": kind, "startTime": started.strftime(DATETIME_FORMAT), "message": "",
                              "environment": {"exec.kind": "auto.local"}, "config": {}, "result": "succeeded",
                              "endTime": datetime.now(UTC).strftime(DATETIME_FORMAT),
                              "resourceChanges": changes})


class EventSink:
    """Engine events to where `--event-log` points, as they happen: one open `StreamEvents` call to the SDK's gRPC
    server (tcp://...), or JSON lines appended to a file."""

    def __init__(self, target: str | None):
        self.target, self.sequence = target, 0
        self.sent: list[dict[str, Any]] = []
        self._file = None
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._stream: threading.Thread | None = None
        if target and target.startswith("tcp://"):
            self._stream = threading.Thread(target=self._send_all, daemon=True)
            self._stream.start()
        elif target:
            self._file = open(target, "a", encoding="utf-8")  # noqa: SIM115 (closed in close())

    def _send_all(self) -> None:
        def requests():
            while (event := self._queue.get()) is not None:
                yield events_pb2.EventRequest(event=json.dumps(event))

        with grpc.insecure_channel(self.target.removeprefix("tcp://")) as channel:
            events_pb2_grpc.EventsStub(channel).StreamEvents(requests())

    def send(self, body: dict[str, Any]) -> None:
        self.sequence += 1
        event = {"sequence": self.sequence, "timestamp": int(datetime.now(UTC).timestamp()), **body}
        self.sent.append(event)
        if self._file:
            self._file.write(json.dumps(event) + "\n")
            self._file.flush()
        else:
            self._queue.put(event)

    def begin(self, op: str, type_: str, name: str) -> dict[str, Any]:
        urn = f"urn:pulumi:sweep::{PROJECT}::{type_}::{name}"
        metadata = {"op": op, "urn": urn, "type": type_, "provider": ""}
        self.send({"resourcePreEvent": {"metadata": metadata}})
        return metadata

    def step(self, op: str, type_: str, name: str) -> None:
        self.send({"resOutputsEvent": {"metadata": self.begin(op, type_, name)}})

    def close(self) -> None:
        self.send({"cancelEvent": {}})
        if self._file:
            self._file.close()
        elif self._stream:
            self._queue.put(None)
            self._stream.join(10)
