"""Kubernetes objects the program registered, checked against the OpenAPI schema of a pinned Kubernetes version.

Built-in kinds: kubernetes-validate's strict schemas (offline; unknown fields are errors). The custom
resources are not in Kubernetes' schema. GKE's ComputeClass is checked against its CRD's own published schema,
shipped in tests/schemas/ (its README says where it came from). The others get a schema written here from
their CRDs (Managed Prometheus's PodMonitoring v1, the Secrets Store CSI driver's SecretProviderClass v1) or, for
GKE's AutoscalingMetric (autoscaling.gke.io/v1beta1, whose CRD is not published), from GKE's pages (its `pod`
entry from "Expose custom metrics for autoscaling"; its `promql` entry, name and query, from "Autoscale Pods by
using custom or external metrics" as far as read: docs/development.md says what is unread), unknown fields refused
too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

from tools.plan.engine import unwrap

# The oldest minor the gke platform accepts (its ComputeClass needs GKE 1.33.3-gke.1136000 or later).
KUBERNETES_VERSION = "1.33"

_LABEL_SELECTOR = {
    "type": "object", "additionalProperties": False,
    "properties": {"matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
                   "matchExpressions": {"type": "array"}},
}
_OBJECT_META = {"type": "object", "required": ["name"],
                "properties": {"name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"},
                               "namespace": {"type": "string"}, "labels": {"type": "object"},
                               "annotations": {"type": "object"}}}
CUSTOM_RESOURCE_SCHEMAS = {
    ("monitoring.googleapis.com/v1", "PodMonitoring"): {
        "type": "object", "required": ["apiVersion", "kind", "metadata", "spec"], "additionalProperties": False,
        "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": _OBJECT_META,
            "spec": {"type": "object", "required": ["selector", "endpoints"], "additionalProperties": False,
                     "properties": {
                         "selector": _LABEL_SELECTOR,
                         "endpoints": {"type": "array", "minItems": 1, "items": {
                             "type": "object", "required": ["port"], "additionalProperties": False,
                             "properties": {
                                 "port": {"oneOf": [{"type": "integer"}, {"type": "string"}]},
                                 "path": {"type": "string", "pattern": "^/"},
                                 "scheme": {"enum": ["http", "https"]},
                                 "interval": {"type": "string", "pattern": r"^([0-9]+(ms|[smhdwy]))+$"},
                                 "timeout": {"type": "string", "pattern": r"^([0-9]+(ms|[smhdwy]))+$"}}}},
                         "targetLabels": {"type": "object"}, "limits": {"type": "object"},
                         "filterRunning": {"type": "boolean"}}}}},
    ("autoscaling.gke.io/v1beta1", "AutoscalingMetric"): {
        "type": "object", "required": ["apiVersion", "kind", "metadata", "spec"], "additionalProperties": False,
        "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": _OBJECT_META,
            "spec": {"type": "object", "required": ["metrics"], "additionalProperties": False, "properties": {
                "metrics": {"type": "array", "minItems": 1, "items": {
                    "type": "object", "additionalProperties": False, "minProperties": 1, "maxProperties": 1,
                    "properties": {
                        "promql": {"type": "object", "required": ["name", "query"], "additionalProperties": False,
                                   "properties": {
                                       "name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
                                                "maxLength": 63},
                                       "query": {"type": "string", "minLength": 1}}},
                        "pod": {"type": "object"}}}}}}}},
    ("secrets-store.csi.x-k8s.io/v1", "SecretProviderClass"): {
        "type": "object", "required": ["apiVersion", "kind", "metadata", "spec"], "additionalProperties": False,
        "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": _OBJECT_META,
            "spec": {"type": "object", "required": ["provider", "parameters"], "additionalProperties": False,
                     "properties": {
                         "provider": {"type": "string"},
                         # The driver hands these to the provider as a string map.
                         "parameters": {"type": "object", "additionalProperties": {"type": "string"}},
                         "secretObjects": {"type": "array"}}}}},
}


SCHEMAS = Path(__file__).resolve().parent / "schemas"
CUSTOM_RESOURCE_SCHEMAS[("cloud.google.com/v1", "ComputeClass")] = json.loads(
    (SCHEMAS / "computeclass_v1.json").read_text())


def strict(schema: Any, in_combinator: bool = False) -> Any:
    """A CRD's structural schema as the API server prunes it: a field no `properties` lists is refused (here an
    error, there silently dropped), except under x-kubernetes-preserve-unknown-fields or additionalProperties. A
    branch of oneOf/anyOf/allOf/not only adds constraints to the structural schema beside it, so it stays open."""
    if isinstance(schema, list):
        return [strict(item, in_combinator) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: strict(value, key in ("oneOf", "anyOf", "allOf", "not")) for key, value in schema.items()}
    if ("properties" in out and "additionalProperties" not in out and not in_combinator
            and not out.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


def crd_schema(file_name: str, version: str) -> dict[str, Any]:
    """The openAPIV3Schema of one served version of a CRD vendored whole in tests/schemas (its README says from
    where); CEL rules (x-kubernetes-validations) are not evaluated here. libyaml's loader when there is one: the
    HTTPRoute CRD alone takes ~0.5 s to parse in pure Python."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crd = yaml.load((SCHEMAS / file_name).read_text(), Loader=loader)
    [served] = [v for v in crd["spec"]["versions"] if v["name"] == version]
    return strict(served["schema"]["openAPIV3Schema"])


# Read when an object of the kind is first validated, not at import (every module that imports this one).
CRD_FILES = {
    ("gateway.networking.k8s.io/v1", "Gateway"): "gateway.networking.k8s.io_gateways.yaml",
    ("gateway.networking.k8s.io/v1", "HTTPRoute"): "gateway.networking.k8s.io_httproutes.yaml",
    ("inference.networking.k8s.io/v1", "InferencePool"): "inference.networking.k8s.io_inferencepools.yaml",
}
# GKE publishes no CRD repository: datreeio/CRDs-catalog's JSON Schemas of the CRDs a GKE 1.33 cluster serves
# (as computeclass_v1.json).
CUSTOM_RESOURCE_SCHEMAS[("networking.gke.io/v1", "HealthCheckPolicy")] = json.loads(
    (SCHEMAS / "healthcheckpolicy_v1.json").read_text())
CUSTOM_RESOURCE_SCHEMAS[("networking.gke.io/v1", "GCPBackendPolicy")] = json.loads(
    (SCHEMAS / "gcpbackendpolicy_v1.json").read_text())


def _integral(value: Any) -> Any:
    """The engine carries every number as a double; the API server receives JSON integers."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _integral(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_integral(item) for item in value]
    return value


def kubernetes_objects(registrations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every Kubernetes object as the API server would receive it (secrets unwrapped)."""
    return [_integral(unwrap(r["inputs"])) for r in registrations
            if r["type"].startswith("kubernetes:") and r["custom"]]


_CUSTOM_RESOURCE_VALIDATORS: dict[tuple[str, str], Any] = {}


def _custom_resource_validator(key: tuple[str, str], schema: dict[str, Any]) -> Any:
    """What jsonschema.validate builds on every call, built once per schema: checking a CRD's schema against
    its metaschema costs far more than validating an object (python-jsonschema/jsonschema
    jsonschema/validators.py, validate, v4.26.0)."""
    if key not in _CUSTOM_RESOURCE_VALIDATORS:
        validator_class = jsonschema.validators.validator_for(schema)
        validator_class.check_schema(schema)
        _CUSTOM_RESOURCE_VALIDATORS[key] = validator_class(schema)
    return _CUSTOM_RESOURCE_VALIDATORS[key]


# Every custom resource's name is checked by the API server as a DNS subdomain (apiextensions-apiserver
# pkg/registry/customresource/validator.go: NameIsDNSSubdomain, "a lowercase RFC 1123 subdomain", at most 253
# characters), whatever its CRD's schema says of metadata.
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def validation_errors(manifest: dict[str, Any]) -> list[str]:
    key = (manifest.get("apiVersion"), manifest.get("kind"))
    name = str((manifest.get("metadata") or {}).get("name", ""))
    if key in CUSTOM_RESOURCE_SCHEMAS or key in CRD_FILES:
        if len(name) > 253 or not DNS_SUBDOMAIN.fullmatch(name):
            return [f"{key}: metadata/name: {name!r} is not a lowercase RFC 1123 subdomain"]
    if key in CRD_FILES and key not in CUSTOM_RESOURCE_SCHEMAS:
        CUSTOM_RESOURCE_SCHEMAS[key] = crd_schema(CRD_FILES[key], "v1")
    schema = CUSTOM_RESOURCE_SCHEMAS.get(key)
    try:
        if schema is not None:
            error = jsonschema.exceptions.best_match(_custom_resource_validator(key, schema).iter_errors(manifest))
            if error is not None:
                raise error
        else:
            kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)
    except jsonschema.ValidationError as error:
        return [f"{key}: {'/'.join(str(p) for p in error.absolute_path)}: {error.message}"]
    except kubernetes_validate.SchemaNotFoundError as error:
        return [error.message]
    return []
