"""Loading: raw `tpu-vllm:` config (or the running stack's) validated into Settings, every problem at once."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from components.settings.checks import cross_checks
from components.settings.errors import config_key, finding_of
from components.settings.facts import NAMESPACE
from components.settings.findings import NO_VALUE, Finding, SettingsError, full_key, is_under
from components.settings.namespaces import (
    PLACED_BY_THE_STACK,
    provider_default_findings,
    unread_namespace_findings,
)
from components.settings.root import SECRET_BY_NATURE, TOP_LEVEL_KEYS, Settings


@dataclass(frozen=True)
class Loaded:
    settings: Settings
    findings: tuple[Finding, ...]
    """The warnings (an error raises SettingsError instead), each once."""
    secret_keys: frozenset[str] = frozenset()
    """Top-level keys set with --secret (e.g. hfTokenSecret): their values flow only as Pulumi secrets."""

    @property
    def warnings(self) -> list[str]:
        return [finding.render() for finding in self.findings]


def _validate_without(document: dict[str, Any], locs: list[tuple[Any, ...]]) -> Settings | None:
    pruned = json.loads(json.dumps(document, default=str))
    for loc in locs:
        parent = pruned
        for part in loc[:-1]:
            parent = parent.get(part) if isinstance(parent, dict) else None
        if isinstance(parent, dict):
            parent.pop(loc[-1], None)
    try:
        return Settings.model_validate(pruned, context={"warnings": []})
    except ValidationError:
        return None


def _without_flat_keys(raw: dict[str, Any], secret_keys: frozenset[str]) -> tuple[dict[str, Any], list[Finding]]:
    """`pulumi config set tpu-vllm:vllm.maxModelLen 16384` (no --path) makes a key literally named
    `vllm.maxModelLen`, which the stack never reads; say so with the --path command instead."""
    kept: dict[str, Any] = {}
    problems = []
    for key, value in raw.items():
        section = re.split(r"[.\[]", key, maxsplit=1)[0]
        if key != section and TOP_LEVEL_KEYS.get(section) is not None:
            hidden = section in SECRET_BY_NATURE or key in secret_keys or section in secret_keys
            shown = "[secret]" if hidden else _shell_word(value if isinstance(value, str) else json.dumps(value))
            problems.append(Finding(
                key, value,
                "a flat key (pulumi config set without --path), which the stack never reads: its settings live "
                f"inside the {section} map",
                f"move it: pulumi config rm '{NAMESPACE}:{key}' && "
                f"pulumi config set --path '{NAMESPACE}:{key}' {shown}",
                secret=hidden,
            ))
        else:
            kept[key] = value
    return kept, problems


# Keys renamed because they said the opposite of what they hold, each (old section, old key, new section, new key).
# A stack file written before keeps working: the loader reads the old key as the new one and warns, naming it.
# They move between sections, so pydantic's AliasChoices (one field's names within one model) cannot carry them.
MOVED_KEYS = (
    ("vllm", "port", "front", "listenPort"),
    ("front", "upstreamPort", "vllm", "serverPort"),
)


def _with_moved_keys(raw: dict[str, Any]) -> tuple[dict[str, Any], list[Finding], dict[str, str]]:
    """The old keys read as the new ones, with a warning for each; an old key set beside its new one is an error.
    Also returns which new keys were read from an old one ({new: old}), so a finding about one names the key the
    user wrote."""
    sections = {name for old, _, new, _ in MOVED_KEYS for name in (old, new)}
    moved = {name: dict(raw[name]) for name in sections if isinstance(raw.get(name), dict)}
    findings = []
    read_from: dict[str, str] = {}
    for old_section, old_key, new_section, new_key in MOVED_KEYS:
        if old_key not in moved.get(old_section, {}) or (new_section in raw and new_section not in moved):
            continue  # nothing to move, or a new section that is not a map (reported as such by validation)
        value = moved[old_section].pop(old_key)
        old, new = f"{old_section}.{old_key}", f"{new_section}.{new_key}"
        target = moved.setdefault(new_section, {})
        if new_key in target:
            findings.append(Finding(
                old, value, f"is the old name of {NAMESPACE}:{new}, which is set too",
                f"keep one: pulumi config rm --path '{NAMESPACE}:{old}'", also_keys=(new,)))
            continue
        target[new_key] = value
        read_from[new] = old
        findings.append(Finding(
            old, value, f"is renamed {NAMESPACE}:{new} (the old name said the opposite of what it holds); "
            "read as that for now",
            f"rename it: pulumi config rm --path '{NAMESPACE}:{old}' && "
            f"pulumi config set --path '{NAMESPACE}:{new}' {_shell_word(json.dumps(value))}",
            severity="warning"))
    return {**raw, **moved}, findings, read_from


def _as_written(finding: Finding, read_from: dict[str, str]) -> Finding:
    """A finding about a key read from its old name, said about the old name as the stack file spells it, with the
    new name and how to rename it; another key it reads that came from an old name is said to have."""
    notes = "; ".join(f"{NAMESPACE}:{key} is read from the old key {NAMESPACE}:{read_from[key]}"
                      for key in finding.also_keys if key in read_from)
    message = f"{finding.message} ({notes})" if notes else finding.message
    old = read_from.get(finding.key)
    if old is None:
        return dataclasses.replace(finding, message=message) if notes else finding
    new = finding.key
    return dataclasses.replace(
        finding, key=old, also_keys=(*finding.also_keys, new),
        message=f"is the old name of {NAMESPACE}:{new}, read as that: {message}",
        fix=f"{finding.fix}; and rename the key: pulumi config rm --path '{NAMESPACE}:{old}', then set the value "
            f"with pulumi config set --path '{NAMESPACE}:{new}' VALUE")


def _not_text(value: Any, key: str) -> list[Finding]:
    """A string that is not Unicode text (a lone surrogate: JSON's "\\udc80" decodes to one), which pydantic cannot
    read at all; said per key, as the user wrote it, instead of a UnicodeEncodeError."""
    problems: list[Finding] = []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for part, item in items:
        inner = f"{key}[{part}]" if isinstance(part, int) else f"{key}.{part}" if key else str(part)
        if isinstance(part, str) and not _encodes(part) or isinstance(item, str) and not _encodes(item):
            problems.append(Finding(
                inner, NO_VALUE if not isinstance(item, str) else item,
                "holds a lone surrogate (an unpaired \\ud800-\\udfff escape), which is not text",
                "write the value as plain UTF-8 text", secret=inner.split(".")[0] in SECRET_BY_NATURE))
        problems += _not_text(item, inner)
    return problems


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shell_word(text: str) -> str:
    return text if re.fullmatch(r"[\w./:@+-]+", text) else "'" + text.replace("'", "'\\''") + "'"


def stack_file_name(stack: str) -> str:
    return f"Pulumi.{stack}.yaml"


def _secrecy_problems(raw: dict[str, Any], secret_keys: frozenset[str], stack: str) -> list[Finding]:
    """A value set with --secret must stay one; a token or key set without it sits in plaintext in the file."""
    problems = []
    for key in sorted(secret_keys & raw.keys()):
        if TOP_LEVEL_KEYS.get(key) is not None:
            problems.append(Finding(
                key, NO_VALUE,
                "is set with --secret (or holds a secret value), but the stack writes its values into resources, "
                "commands and outputs in plaintext",
                f"set them again without --secret (`pulumi config rm {NAMESPACE}:{key}`, then "
                f"`pulumi config set --path {NAMESPACE}:{key}.NAME VALUE`)",
            ))
    for key in sorted(SECRET_BY_NATURE & raw.keys() - secret_keys):
        problems.append(Finding(
            key, NO_VALUE, f"is stored in plaintext in {stack_file_name(stack)}",
            f"set it again with `pulumi config set --secret {NAMESPACE}:{key}` (paste it at the prompt), and "
            "replace it if that file was shared",
        ))
    return problems


def _reads_a_failed_key(finding: Finding, failed: list[str]) -> bool:
    """A rule that reads a key already reported judged its default in the pruned copy, not the user's value."""
    return any(is_under(key, bad) or is_under(bad, key) for key in finding.keys for bad in failed)


def load(raw: dict[str, Any], project: str, stack: str, explicit_hf_secret: bool = False,
         secret_keys: frozenset[str] | None = None, config_problems: Iterable[Finding] = ()) -> Loaded:
    """Validate raw config values (already JSON-decoded). Raises SettingsError with every problem.

    secret_keys: the top-level keys set with --secret (None when the caller cannot know, e.g. pure rule tests).
    config_problems: what is wrong with the stack's other keys (see namespaces.py), listed first.
    """
    config_problems = list(config_problems)
    not_text = _not_text({"gcp:project": project, **raw}, "")
    if not_text:
        raise SettingsError([*config_problems, *not_text])
    # A warning about another key (gcp:zone) is shown with the settings' own; only errors stop the load.
    context: dict[str, Any] = {"warnings": [f for f in config_problems if f.severity == "warning"]}
    problems: list[Finding] = [f for f in config_problems if f.severity != "warning"]
    if secret_keys is not None:
        problems += _secrecy_problems(raw, secret_keys, stack)
        if any(TOP_LEVEL_KEYS.get(key) is not None for key in secret_keys & raw.keys()):
            # Any further message could quote a value of the secret section: stop here.
            raise SettingsError(problems)
    secret_keys = secret_keys or frozenset()
    if raw.get("hfToken") is not None and explicit_hf_secret:
        problems.append(Finding(
            "hfToken", NO_VALUE, f"set together with {NAMESPACE}:hfTokenSecret: either the stack keeps the token "
            "(hfToken) or it uses your secret (hfTokenSecret)", "remove one", also_keys=("hfTokenSecret",),
        ))
    raw, flat_problems = _without_flat_keys(raw, secret_keys)
    problems += flat_problems
    raw, moved_findings, read_from = _with_moved_keys(raw)
    problems += [finding for finding in moved_findings if finding.severity == "error"]
    context["warnings"] += [finding for finding in moved_findings if finding.severity == "warning"]
    document = {"project": project, "stack": stack, **raw}
    failed_keys: list[str] = []
    try:
        settings = Settings.model_validate(document, context=context)
    except ValidationError as error:
        problems += [finding_of(item, secret_keys) for item in error.errors()]
        failed_keys = [full_key(config_key(tuple(item["loc"]))) for item in error.errors()]
        # Drop the failing keys and check the rest too, so every problem shows in one run.
        settings = _validate_without(document, [item["loc"] for item in error.errors()])
    findings: list[Finding] = list(context["warnings"])
    if settings is not None:
        findings += [finding for finding in cross_checks(settings) if not _reads_a_failed_key(finding, failed_keys)]
    problems += [finding for finding in findings if finding.severity == "error"]
    problems = [_as_written(finding, read_from) for finding in problems]
    findings = [_as_written(finding, read_from) for finding in findings]
    if problems:
        raise SettingsError(list(dict.fromkeys(problems)))
    # One finding once, however many validators saw it.
    warnings = tuple(dict.fromkeys(finding for finding in findings if finding.severity == "warning"))
    return Loaded(settings=settings, findings=warnings, secret_keys=secret_keys)


def raw_from_pulumi_config() -> tuple[dict[str, Any], bool]:
    """Every `tpu-vllm:` key set on the stack, decoded; unknown keys included so typos are caught."""
    from pulumi.runtime import config as runtime_config

    keys = set(runtime_config.CONFIG.get()) | set(runtime_config.get_config_env())
    raw: dict[str, Any] = {}
    for stack_key in sorted(keys):
        namespace, _, key = stack_key.partition(":")
        if namespace != NAMESPACE:
            continue
        value = runtime_config.get_config(stack_key)
        if isinstance(value, str) and key in TOP_LEVEL_KEYS and TOP_LEVEL_KEYS[key] is not None:
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                pass  # reported by the model as not an object
        raw[key] = value
    return raw, "hfTokenSecret" in raw


def from_pulumi_config() -> Loaded:
    """Load and validate the running stack's config; raises SettingsError."""
    import pulumi

    project = pulumi.Config("gcp").get("project")
    if not project:
        raise SettingsError([Finding(
            "gcp:project", NO_VALUE, "is not set",
            "run `pulumi config set gcp:project YOUR_PROJECT` (the project that pays for the TPU)",
        )])
    from pulumi.runtime import config as runtime_config

    stack = pulumi.get_stack()
    raw, explicit_hf_secret = raw_from_pulumi_config()
    every_key = set(runtime_config.CONFIG.get()) | set(runtime_config.get_config_env())
    placed = {key: runtime_config.get_config(key) for key in every_key & set(PLACED_BY_THE_STACK)}
    return load(raw, project=project, stack=stack, explicit_hf_secret=explicit_hf_secret,
                secret_keys=secret_keys_from_pulumi_config(),
                config_problems=[*unread_namespace_findings(every_key, stack_file_name(stack)),
                                 *provider_default_findings(placed, stack_file_name(stack))])


def secret_keys_from_pulumi_config() -> frozenset[str]:
    """The `tpu-vllm:` keys the stack holds as secrets, as Pulumi itself tells them apart."""
    from pulumi.runtime import config as runtime_config

    keys = set(runtime_config.CONFIG.get()) | set(runtime_config.get_config_env())
    secret = {key for key in keys if runtime_config.is_config_secret(key)}
    secret |= set(runtime_config.get_config_secret_keys_env())
    return frozenset(key.partition(":")[2] for key in secret if key.startswith(f"{NAMESPACE}:"))
