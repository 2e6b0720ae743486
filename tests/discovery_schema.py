"""Validate a request body against a schema of a Google API discovery document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import googleapiclient

DOCUMENTS = Path(googleapiclient.__file__).parent / "discovery_cache" / "documents"


def load_document(name: str) -> dict[str, Any]:
    return json.loads((DOCUMENTS / f"{name}.json").read_text())


def validate(value: Any, schema: dict[str, Any], document: dict[str, Any], path: str = "$") -> list[str]:
    """Unknown fields, wrong types and enum values that do not exist are errors."""
    if "$ref" in schema:
        return validate(value, document["schemas"][schema["$ref"]], document, path)
    kind = schema.get("type")
    errors: list[str] = []
    if kind == "object":
        if not isinstance(value, dict):
            return [f"{path}: expected an object"]
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if key in properties:
                errors += validate(item, properties[key], document, f"{path}.{key}")
            elif extra is not None:
                errors += validate(item, extra, document, f"{path}.{key}")
            else:
                errors.append(f"{path}.{key}: unknown field")
    elif kind == "array":
        if not isinstance(value, list):
            return [f"{path}: expected an array"]
        for index, item in enumerate(value):
            errors += validate(item, schema["items"], document, f"{path}[{index}]")
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
