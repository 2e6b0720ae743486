"""Validate a request body against a schema of a Google API discovery document: its field names, types and enums,
and the rules its descriptions state in words (the reference pages are rendered from the same descriptions)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import googleapiclient

DOCUMENTS = Path(googleapiclient.__file__).parent / "discovery_cache" / "documents"

# "Color is not allowed in a XyChart." (monitoring.v1 Threshold.color): the field, named in words, is refused when
# the object sits inside the named schema.
NOT_ALLOWED_IN = re.compile(r"\b([A-Z][A-Za-z]*(?: [a-z][A-Za-z]*)*) is not allowed in an? ([A-Z]\w*)\.")
# "Required. The data displayed in this chart." (monitoring.v1 XyChart.dataSets).
REQUIRED = re.compile(r"^Required\.")
# "a string with interpolations of the form ${label_name}" (monitoring.v1 DataSet.legendTemplate).
INTERPOLATION_FORM = re.compile(r"interpolations of the form \$\{label_name\}")
PLACEHOLDER = re.compile(r"\$\{[A-Za-z_][\w.]*\}")


def load_document(name: str) -> dict[str, Any]:
    return json.loads((DOCUMENTS / f"{name}.json").read_text())


def _words_name(words: str, key: str) -> bool:
    """"Target axis" names targetAxis."""
    return words.replace(" ", "").lower() == key.lower()


def not_allowed_in(description: str, key: str) -> list[str]:
    """The schemas a field's description says it is not allowed in."""
    return [found.group(2) for found in NOT_ALLOWED_IN.finditer(description) if _words_name(found.group(1), key)]


def description_rules(document: dict[str, Any]) -> dict[str, set[tuple[str, ...]]]:
    """Every rule validate() reads from the descriptions, by kind: what the document states, for the tests to pin."""
    rules: dict[str, set[tuple[str, ...]]] = {"not_allowed_in": set(), "required": set(), "interpolation": set()}
    for name, schema in document["schemas"].items():
        for key, prop in (schema.get("properties") or {}).items():
            description = prop.get("description", "")
            rules["not_allowed_in"] |= {(name, key, where) for where in not_allowed_in(description, key)}
            if REQUIRED.match(description):
                rules["required"].add((name, key))
            if INTERPOLATION_FORM.search(description):
                rules["interpolation"].add((name, key))
    return rules


def _template_errors(value: str, path: str) -> list[str]:
    """Braces outside a ${label} placeholder are text the template prints as it is, e.g. `{{instance}}`."""
    rest = PLACEHOLDER.sub("", value)
    if "{" in rest or "}" in rest or "$" in rest:
        return [f"{path}: {value!r} has a placeholder not of the form ${{label_name}}"]
    return []


def validate(value: Any, schema: dict[str, Any], document: dict[str, Any], path: str = "$",
             within: tuple[str, ...] = ()) -> list[str]:
    """Unknown fields, wrong types, enum values that do not exist, a required field missing, a field inside a
    schema its description says it is not allowed in, and a template placeholder not of the documented form."""
    if "$ref" in schema:
        return validate(value, document["schemas"][schema["$ref"]], document, path, (*within, schema["$ref"]))
    kind = schema.get("type")
    errors: list[str] = []
    if kind == "object":
        if not isinstance(value, dict):
            return [f"{path}: expected an object"]
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, prop in properties.items():
            if REQUIRED.match(prop.get("description", "")) and key not in value:
                errors.append(f"{path}.{key}: required field missing")
        for key, item in value.items():
            if key in properties:
                description = properties[key].get("description", "")
                errors += [f"{path}.{key}: not allowed in a {where} ({description.strip()})"
                           for where in not_allowed_in(description, key) if where in within]
                if INTERPOLATION_FORM.search(description) and isinstance(item, str):
                    errors += _template_errors(item, f"{path}.{key}")
                errors += validate(item, properties[key], document, f"{path}.{key}", within)
            elif extra is not None:
                errors += validate(item, extra, document, f"{path}.{key}", within)
            else:
                errors.append(f"{path}.{key}: unknown field")
    elif kind == "array":
        if not isinstance(value, list):
            return [f"{path}: expected an array"]
        for index, item in enumerate(value):
            errors += validate(item, schema["items"], document, f"{path}[{index}]", within)
    elif kind == "string":
        if not isinstance(value, str):
            errors.append(f"{path}: expected a string")
        elif "enum" in schema and value not in schema["enum"]:
            errors.append(f"{path}: {value!r} is not one of {schema['enum']}")
    elif kind == "boolean" and not isinstance(value, bool):
        errors.append(f"{path}: expected a boolean")
    elif kind == "integer" and not isinstance(value, int):
        errors.append(f"{path}: expected an integer")
    return errors


def validate_queued_resource(body: dict[str, Any]) -> list[str]:
    document = load_document("tpu.v2alpha1")
    return validate(body, {"$ref": "QueuedResource"}, document)
