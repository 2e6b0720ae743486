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
  sdk/go/common/resource/config/map.go, adjustObjectValue): "true"/"false" as bools, text of more than one character
  starting with "0" as text, what strconv.Atoi reads as an int, the rest as text.

The "program" it deploys is a model of this stack's vm wing: a cache disk, a TPU node (replaced when the tpu
section, the cache, vllm.image, vllm.serverPort, monitoring or access change), and the serving step (re-run over SSH
when anything else changes). Its ledger records every node and disk, and which still bill.
"""

from __future__ import annotations

import copy
import json
import queue
import re
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


def adjusted(text: str) -> Any:
    """map.go adjustObjectValue, for a value set by path."""
    if text in ("true", "false"):
        return text == "true"
    if len(text) > 1 and text[0] == "0":
        return text
    if re.fullmatch(r"[+-]?[0-9]+", text):
        return int(text)
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
        self.outputs: dict[str, tuple[Any, bool]] = {}
        self.history: list[dict[str, Any]] = []


class FakePulumiCli(PulumiCommand):
    def __init__(self, stacks: dict[str, dict[str, Any]], version: str = "3.272.0",
                 hold_up: bool = False, fail_up: str | None = None, logged_out: bool = False):
        self.command = "pulumi"
        self.version = _parse_and_validate_pulumi_version(_MINIMUM_VERSION, version, False)
        self.stacks = {name: FakeStack(name, copy.deepcopy(config)) for name, config in stacks.items()}
        self.selected: str | None = None
        self.calls: list[list[str]] = []
        self.ledger: list[dict[str, Any]] = []
        """Every node and disk ever made: kind, stack, serial, the config it was made from, billing."""
        self.serving_runs: list[dict[str, Any]] = []
        """Each run of the serving step: node serial and the vllm/tpuInference config it ran."""
        self.hold_up = hold_up
        """`up` makes the node, then waits until `pulumi cancel` (a long update to interrupt)."""
        self.fail_up = fail_up
        self.logged_out = logged_out
        """No credentials for the backend: every stack command fails as the CLI does (backenderr.go)."""
        self.up_in_flight = threading.Event()
        self._cancel = threading.Event()
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
        """The terminal's SIGINT reaching the CLI too: its first ^C cancels the update gracefully
        (pkg/backend/cancellation_scope.go: "^C received; cancelling. If you would like to terminate immediately,
        press ^C again.")."""
        self._cancel.set()

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
            return 255, "", "error: PULUMI_ACCESS_TOKEN must be set for login during non-interactive CLI sessions"
        if head == ["stack", "select"]:
            name = self._flag(words, "--stack")
            if name not in self.stacks:  # pkg/backend/backenderr/backenderr.go StackNotFoundError
                return 255, "", f"error: no stack named '{name}' found"
            self.selected = name
            return 0, "", ""
        if head == ["stack", "init"]:
            name = words[2]
            if name in self.stacks:  # backenderr.go StackAlreadyExistsError
                return 255, "", f"error: stack '{name}' already exists"
            self.stacks[name] = FakeStack(name)
            self.selected = name
            return 0, "", ""
        if head == ["stack", "rm"]:
            name = next(word for word in words[2:] if not word.startswith("--"))
            if self.stacks[name].resources and "--force" not in words:
                # pkg/cmd/pulumi/stack/stack_remove.go (pkg/v3.259.0-14)
                return 255, "", (f"error: '{name}' still has resources; removal rejected. Possible actions:\n"
                                 f"- Make sure that '{name}' is the stack that you want to destroy\n"
                                 "- Run `pulumi destroy` to delete the resources, then run `pulumi stack rm`\n"
                                 "- Run `pulumi stack rm --force` to override this error")
            del self.stacks[name]
            return 0, "", ""
        stack = self._stack(words)
        if stack is None:
            return 255, "", f"error: no stack named '{self._flag(words, '--stack')}' found"
        if head == ["config", "copy"]:
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
            # pkg/cmd/pulumi/cancel/cancel.go: the backend's CancelCurrentUpdate, then this line (a DIY backend only
            # deletes the stack's lock files, pkg/backend/diy/backend.go, and succeeds with no update running).
            self._cancel.set()
            return 0, f"The currently running update for '{stack.name}' has been canceled!", ""
        if words[0] == "up":
            return self._up(stack, words, on_output)
        if words[0] == "destroy":
            return self._destroy(stack, on_output)
        return 255, "", f"error: the fake does not know `pulumi {' '.join(words)}`"

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
                events.step("replace" if node else "create", "tpu-vllm:vm:TpuNode", "tpu")
                if node:
                    node["item"]["billing"] = False
                made = self._make("node", stack)
                stack.resources["node"] = {"key": node_key, "item": made}
                changes["replace" if node else "create"] = changes.get("replace" if node else "create", 0) + 1
                stack.resources.pop("serving", None)
            if self.hold_up:
                self._cancel.clear()
                self.up_in_flight.set()
                if not self._cancel.wait(30):
                    return 255, "", "error: the fake's held update was never cancelled"
                events.send({"diagnosticEvent": {"message": "update canceled", "severity": "error", "color": "never"}})
                return 255, "", "error: update canceled"
            if self.fail_up:
                events.send({"diagnosticEvent": {"message": self.fail_up, "severity": "error", "color": "never"}})
                return 255, "", f"error: {self.fail_up}"
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

    def _destroy(self, stack: FakeStack, on_output: Any) -> tuple[int, str, str]:
        started = datetime.now(UTC)
        deleted = 0
        for resource in stack.resources.values():
            item = resource.get("item", resource) if isinstance(resource, dict) else None
            if isinstance(item, dict) and "billing" in item:
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

    def step(self, op: str, type_: str, name: str) -> None:
        urn = f"urn:pulumi:sweep::{PROJECT}::{type_}::{name}"
        metadata = {"op": op, "urn": urn, "type": type_, "provider": ""}
        self.send({"resourcePreEvent": {"metadata": metadata}})
        self.send({"resOutputsEvent": {"metadata": metadata}})

    def close(self) -> None:
        self.send({"cancelEvent": {}})
        if self._file:
            self._file.close()
        elif self._stream:
            self._queue.put(None)
            self._stream.join(10)
