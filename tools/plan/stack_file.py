"""A stack's config file (Pulumi.<stack>.yaml) read as the Pulumi CLI would hand it to the program."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from components.reading import bounded
from tools.plan.placeholders import SECRET_PLACEHOLDER

MAX_STACK_FILE_BYTES = bounded.MIB
"""A stack file is a few kilobytes; a megabyte holds any config a person writes."""


def _strip_secure(value: Any) -> tuple[Any, bool]:
    """Replace `{secure: ...}` ciphertext (which needs the Pulumi CLI to decrypt) with a marker."""
    if isinstance(value, dict) and set(value) == {"secure"}:
        return SECRET_PLACEHOLDER, True
    if isinstance(value, dict):
        found = False
        cleaned = {}
        for key, item in value.items():
            cleaned[key], secret = _strip_secure(item)
            found = found or secret
        return cleaned, found
    if isinstance(value, list):
        pairs = [_strip_secure(item) for item in value]
        return [item for item, _ in pairs], any(secret for _, secret in pairs)
    return value, False


def read_stack_config(path: Path) -> tuple[dict[str, str], list[str]]:
    """Pulumi.<stack>.yaml -> (engine-style config map, secret keys).

    A file Pulumi could not read either is a SettingsError (the plan's exit 2) naming the file,
    the line and the fix, never a traceback.
    """
    from components.settings import SettingsError

    shape = ("a stack file is a map whose config: key maps each setting to its value, e.g.\n"
             "      config:\n        gcp:project: my-project\n        tpu-vllm:vllm:\n"
             "          maxModelLen: 32768\n    (see Pulumi.dev.yaml)")
    try:
        text = bounded.read_text(path, MAX_STACK_FILE_BYTES, "stack file")
        document = bounded.parse_yaml(text, path, "stack file")
    except bounded.ReadError as error:
        raise SettingsError([str(error)]) from None
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise SettingsError([f"{path}: holds a {type(document).__name__}, not a map; {shape}"])
    settings_map = document.get("config")
    if settings_map is None:
        settings_map = {}
    if not isinstance(settings_map, dict):
        raise SettingsError([f"{path}: config: holds a {type(settings_map).__name__}, not a map of "
                             f"setting: value; {shape}"])
    bad_keys = [key for key in settings_map if not isinstance(key, str)]
    if bad_keys:
        raise SettingsError([f"{path}: config: key {bad_keys[0]!r} is not a setting name; write keys "
                             "like tpu-vllm:vllm or gcp:project"])
    config: dict[str, str] = {}
    secret_keys: list[str] = []
    for key, value in settings_map.items():
        if ":" not in key:
            key = f"tpu-vllm:{key}"
        value, secret = _strip_secure(value)
        if secret:
            secret_keys.append(key)
        config[key] = value if isinstance(value, str) else json.dumps(value)
    return config, secret_keys
