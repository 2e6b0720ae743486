"""SettingsError, and pydantic's errors said as the key, the value and the fix."""

from __future__ import annotations

import difflib
import json
import re
from typing import Any, get_args

from pydantic import BaseModel

from components.settings.facts import NAMESPACE
from components.settings.root import SECRET_BY_NATURE, TOP_LEVEL_KEYS, Settings


class SettingsError(Exception):
    """Every problem with the stack's configuration, found in one pass."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__(self.render())

    def render(self) -> str:
        lines = [f"{len(self.problems)} problem(s) in the stack configuration:"]
        lines += [f"  - {problem}" for problem in self.problems]
        return "\n".join(lines)


def _config_key(loc: tuple[Any, ...]) -> str:
    """('vllm', 'gpuMemoryUtilization') -> 'tpu-vllm:vllm.gpuMemoryUtilization'."""
    head, *rest = [str(part) for part in loc] or ["?"]
    if head == "project":
        return "gcp:project"
    key = f"{NAMESPACE}:{head}"
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


DURATION_KEYS = frozenset({"maxRunDuration", "queueTimeout", "healthTimeout"})
MAP_EXAMPLE = ', e.g. {"team": "agents"}'


def _example(field: Any) -> Any:
    if field is None or field.is_required():
        return None
    default = field.get_default(call_default_factory=True)
    return None if default in (None, {}, []) or isinstance(default, BaseModel) else default


def _fix(error: dict[str, Any], key: str) -> str:
    """Pydantic's bare 'Input should be ...' said as the rule and the way to meet it."""
    kind, ctx, loc = error["type"], error.get("ctx") or {}, tuple(error["loc"])
    field, section = _field_at(loc)
    example = _example(field)
    eg = f", e.g. {json.dumps(example)}" if example is not None else ""
    default = f" (the default is {json.dumps(example)})" if example is not None else ""
    if str(loc[-1]) in DURATION_KEYS and kind in ("string_type", "string_sub_type"):
        return "write durations like 4h, 90m, 2d or 1h30m"
    if section is not None and kind in ("model_type", "model_attributes_type", "dict_type"):
        first = next(iter(section.model_fields.values()))
        return (f"must be a map of settings, not {type(error.get('input')).__name__}; set each key "
                f"with pulumi config set --path '{key}.{first.alias}' VALUE")
    messages = {
        "greater_than_equal": f"at least {ctx.get('ge')}; set it to {ctx.get('ge')} or more{default}",
        "greater_than": f"must be more than {ctx.get('gt')}{eg}",
        "less_than_equal": f"at most {ctx.get('le')}; set it to {ctx.get('le')} or less{default}",
        "less_than": f"must be less than {ctx.get('lt')}{eg}",
        "int_parsing": f"must be a whole number{eg}",
        "int_type": f"must be a whole number{eg}",
        "int_from_float": f"must be a whole number, without a fraction{eg}",
        "int_parsing_size": f"must be a whole number of a sensible size{eg}",
        "float_parsing": f"must be a number{eg}",
        "float_type": f"must be a number{eg}",
        "finite_number": f"must be a finite number{eg}",
        "bool_parsing": f"must be true or false{default}",
        "bool_type": f"must be true or false{default}",
        "string_type": f"must be text (quote it in YAML){eg}",
        "literal_error": f"must be one of {ctx.get('expected')}{default}",
        "dict_type": (f"must be a map{eg or MAP_EXAMPLE}; set entries with "
                      f"pulumi config set --path '{key}.NAME' VALUE"),
        "list_type": (f"must be a list{eg}; set items with pulumi config set --path '{key}[0]' VALUE"),
        "too_short": f"needs at least {ctx.get('min_length')} item(s); see docs/settings.md, Changing the model",
        "missing": (f"is required; set it with pulumi config set --path '{key}' VALUE (see "
                    "docs/settings.md, Changing the model)"),
        "value_error": str(error["msg"]).removeprefix("Value error, "),
    }
    return messages.get(kind) or f"{error['msg']}; docs/settings.md lists the values it takes"


def _describe(error: dict[str, Any], secret_keys: frozenset[str] = frozenset()) -> str:
    loc = tuple(error["loc"])
    key = _config_key(loc)
    if error["type"] == "extra_forbidden":
        valid = _valid_keys_at(loc)
        # A dotted top-level key (vlm.maxModelLen) is matched by its section part.
        name = re.split(r"[.\[]", str(loc[-1]))[0] if len(loc) == 1 else str(loc[-1])
        near = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
        hint = f"did you mean {near[0]!r}?" if near else "valid keys: " + ", ".join(valid)
        return f"{key}: unknown key ({hint}); remove or rename it"
    if error["type"] == "missing":
        return f"{key}: {_fix(error, key)}"
    hidden = str(loc[0]) in secret_keys | SECRET_BY_NATURE
    shown = "[secret]" if hidden else json.dumps(error.get("input"), default=str)
    if len(shown) > 120:
        shown = shown[:100] + f"... ({len(shown)} characters)"
    return f"{key} = {shown}: {_fix(error, key)}"
