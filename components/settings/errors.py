"""Pydantic's errors said as findings: the key as the user writes it, the value, what is wrong and the fix."""

from __future__ import annotations

import difflib
import json
import re
from typing import Any, get_args

from pydantic import BaseModel

from components.settings.fields import DurationText
from components.settings.findings import NO_VALUE, Finding, InvalidSettingError, full_key
from components.settings.root import SECRET_BY_NATURE, TOP_LEVEL_KEYS, Settings


def config_key(loc: tuple[Any, ...]) -> str:
    """('vllm', 'gpuMemoryUtilization') -> 'vllm.gpuMemoryUtilization'; ('project',) -> 'gcp:project'."""
    head, *rest = [str(part) for part in loc] or ["?"]
    if head == "project":
        return "gcp:project"
    key = head
    for part in rest:
        key += f"[{part}]" if part.isdigit() else f".{part}"
    return key


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The settings model inside an annotation (X, X | None, list[X]), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((found for arg in get_args(annotation) if (found := _model_in(arg))), None)


def _field_at(loc: tuple[Any, ...]) -> tuple[Any, type[BaseModel] | None]:
    """The field a location names (None at the top) and the model it holds, if it is a section."""
    model: type[BaseModel] | None = Settings
    field = None
    for part in loc:
        if model is None or isinstance(part, int):
            continue  # a list item or a map entry: the field stays the one that holds it
        match = next((info for name, info in model.model_fields.items() if part in (name, info.alias)), None)
        if match is None:
            return field, None
        field, model = match, _model_in(match.annotation)
    return field, model


def _valid_keys_at(loc: tuple[Any, ...]) -> list[str]:
    """The keys allowed where an unknown one was found: top level, or inside a section."""
    if len(loc) == 1:
        return list(TOP_LEVEL_KEYS)
    _, model = _field_at(loc[:-1])
    return [info.alias or name for name, info in model.model_fields.items()] if model else []


MAP_EXAMPLE = '{"team": "agents"}'


def _example(field: Any) -> Any:
    if field is None or field.is_required():
        return None
    default = field.get_default(call_default_factory=True)
    return None if default in (None, {}, []) or isinstance(default, BaseModel) else default


def _is_duration(field: Any) -> bool:
    return field is not None and any(isinstance(mark, DurationText) for mark in field.metadata)


def _said(error: dict[str, Any], key: str) -> tuple[str, str]:
    """Pydantic's bare 'Input should be ...' said as the rule, and the way to meet it."""
    kind, ctx, loc = error["type"], error.get("ctx") or {}, tuple(error["loc"])
    field, section = _field_at(loc)
    example = _example(field)
    like = f"set it like {json.dumps(example)}" if example is not None else "docs/settings.md lists the values it takes"
    default = f" (the default is {json.dumps(example)})" if example is not None else ""
    path = f"'{full_key(key)}'"
    if kind == "value_error" and isinstance(ctx.get("error"), InvalidSettingError):
        return ctx["error"].message, ctx["error"].fix
    if _is_duration(field) and kind in ("string_type", "string_sub_type"):
        return "must be a duration", "write durations like 4h, 90m, 2d or 1h30m"
    if section is not None and kind in ("model_type", "model_attributes_type", "dict_type"):
        first = next(iter(section.model_fields.values()))
        return (f"must be a map of settings, not {type(error.get('input')).__name__}",
                f"set each key with pulumi config set --path '{full_key(key)}.{first.alias}' VALUE")
    said = {
        "greater_than_equal": (f"at least {ctx.get('ge')}", f"set it to {ctx.get('ge')} or more{default}"),
        "greater_than": (f"must be more than {ctx.get('gt')}", like),
        "less_than_equal": (f"at most {ctx.get('le')}", f"set it to {ctx.get('le')} or less{default}"),
        "less_than": (f"must be less than {ctx.get('lt')}", like),
        "int_parsing": ("must be a whole number", like),
        "int_type": ("must be a whole number", like),
        "int_from_float": ("must be a whole number, without a fraction", like),
        "int_parsing_size": ("must be a whole number of a sensible size", like),
        "float_parsing": ("must be a number", like),
        "float_type": ("must be a number", like),
        "finite_number": ("must be a finite number", like),
        "bool_parsing": ("must be true or false", f"set it to true or false{default}"),
        "bool_type": ("must be true or false", f"set it to true or false{default}"),
        "string_type": ("must be text", f"quote it in YAML; {like}"),
        "literal_error": (f"must be one of {ctx.get('expected')}", f"set it to one of them{default}"),
        "dict_type": ("must be a map", f"set it like {json.dumps(example) if example else MAP_EXAMPLE}, entries with "
                                       f"pulumi config set --path '{path[1:-1]}.NAME' VALUE"),
        "list_type": ("must be a list", f"set items with pulumi config set --path '{path[1:-1]}[0]' VALUE"),
        "too_short": (f"needs at least {ctx.get('min_length')} item(s)",
                      "see docs/settings.md, Changing the model or the chip"),
        "missing": ("is required", f"set it with pulumi config set --path {path} VALUE (see docs/settings.md, "
                                   "Changing the model or the chip)"),
        "value_error": (str(error["msg"]).removeprefix("Value error, "), like),
    }
    return said.get(kind) or (str(error["msg"]), "docs/settings.md lists the values it takes")


def finding_of(error: dict[str, Any], secret_keys: frozenset[str] = frozenset()) -> Finding:
    """One pydantic error as a Finding."""
    loc = tuple(error["loc"])
    key = config_key(loc)
    if error["type"] == "extra_forbidden":
        valid = _valid_keys_at(loc)
        # A dotted top-level key (vlm.maxModelLen) is matched by its section part.
        name = re.split(r"[.\[]", str(loc[-1]))[0] if len(loc) == 1 else str(loc[-1])
        near = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
        hint = f"did you mean {near[0]!r}?" if near else "valid keys: " + ", ".join(valid)
        return Finding(key, NO_VALUE, f"unknown key ({hint})", "remove or rename it")
    message, fix = _said(error, key)
    if error["type"] == "missing":
        return Finding(key, NO_VALUE, message, fix)
    hidden = str(loc[0]) in secret_keys | SECRET_BY_NATURE
    return Finding(key, error.get("input"), message, fix, secret=hidden)
