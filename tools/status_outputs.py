"""tools.status: what a deployed stack says of itself: its outputs (`pulumi stack output`, secrets revealed and
kept out of what is printed) and, for a stack without outputs, its settings file."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tools.status_report import StatusError

# Outputs whose values must never be printed (the tool reads them with --show-secrets).
SECRET_OUTPUTS = ("apiKey", "sshPrivateKey")
PULUMI_TIMEOUT_SECONDS = 120


def stack_outputs(stack: str | None) -> dict[str, Any] | None:
    """The stack's outputs with secrets revealed; None when there is no such stack."""
    if shutil.which("pulumi") is None:
        raise StatusError("the Pulumi CLI is not on PATH; install it (https://www.pulumi.com/docs/install/) "
                          "and log in to the backend that holds the stack")
    command = ["pulumi", "stack", "output", "--json", "--show-secrets", *(["--stack", stack] if stack else [])]
    try:
        # No stdin: a passphrase prompt must fail with Pulumi's own message, not wait for the timeout.
        completed = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                   timeout=PULUMI_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        raise StatusError(f"`{shlex.join(command[:3])}` did not answer in {PULUMI_TIMEOUT_SECONDS} s; "
                          "is the Pulumi backend reachable?") from None
    if completed.returncode != 0:
        message = last_line(completed.stderr) or f"exit {completed.returncode}"
        if "no stack named" in message.lower():
            return None
        hint = " (pass --stack NAME)" if "no stack selected" in message.lower() else ""
        raise StatusError(f"`pulumi stack output` failed: {message}{hint}")
    try:
        outputs = json.loads(completed.stdout or "{}")
    except json.JSONDecodeError:
        raise StatusError("`pulumi stack output --json` did not print JSON") from None
    if not isinstance(outputs, dict):
        raise StatusError("`pulumi stack output --json` did not print an object")
    return outputs


def last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def required(outputs: dict[str, Any], name: str, stack_label: str) -> str:
    value = outputs.get(name)
    if not isinstance(value, str) or not value:
        raise StatusError(f"{stack_label} has no {name} output (it was deployed by an older version of this "
                          "project); run `pulumi up` once to export it")
    return value


def serving_port(outputs: dict[str, Any], stack_label: str) -> int:
    port = urlsplit(required(outputs, "localEndpoint", stack_label)).port
    if port is None:
        raise StatusError(f"{stack_label}'s localEndpoint output has no port: {outputs['localEndpoint']!r}")
    return port


class Redactor:
    """Removes every secret output's value (and each long line of it) from what is printed."""

    def __init__(self, outputs: dict[str, Any] | None):
        values: set[str] = set()
        for name in SECRET_OUTPUTS:
            value = (outputs or {}).get(name)
            if isinstance(value, str) and value:
                values.add(value)
                values.update(line.strip() for line in value.splitlines() if len(line.strip()) >= 16)
        self.values = sorted(values, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for value in self.values:
            text = text.replace(value, "[secret]")
        return text



def request_from_settings(stack: str, config_dir: Path | None = None) -> str | None:
    """The queued resource's name as the stack's settings fix it (Pulumi.<stack>.yaml): found without
    outputs or state, e.g. after an interrupted first `pulumi up`. None when the file does not say."""
    from components import settings as stack_settings
    from tools.plan.stack_file import read_stack_config

    path = (config_dir or Path.cwd()) / f"Pulumi.{stack}.yaml"
    if not path.exists():
        return None
    config, _ = read_stack_config(path)
    project = config.get("gcp:project")
    if not project:
        return None
    raw: dict[str, Any] = {}
    for full_key, value in config.items():
        namespace, _, key = full_key.partition(":")
        if namespace != stack_settings.NAMESPACE:
            continue
        if isinstance(value, str) and stack_settings.TOP_LEVEL_KEYS.get(key) is not None:
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                pass
        raw[key] = value
    try:
        loaded = stack_settings.load(raw, project=project, stack=stack, explicit_hf_secret="hfTokenSecret" in raw)
    except stack_settings.SettingsError:
        return None
    cfg = loaded.settings
    if cfg.platform != "vm":
        return None
    return f"projects/{project}/locations/{cfg.tpu.zone}/queuedResources/{cfg.node_id}"
