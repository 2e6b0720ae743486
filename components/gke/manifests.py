"""Kubernetes objects as plain manifests (what the API receives, testable without Pulumi), declared through
pulumi-kubernetes: the typed class for a built-in kind, CustomResource for the rest."""

from __future__ import annotations

import re
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

# Each built-in kind's typed class, as a path under pulumi_kubernetes, looked up when an object of that kind is
# declared: the package loads a group's module on the first read of its attribute (pulumi/pulumi-kubernetes v4.34.2,
# sdk/python/pulumi_kubernetes/__init__.py, _utilities.lazy_import), and core.v1 alone takes ~0.4 s of CPU to
# load, which importing this module (settings checks, plan tool, tests) need not pay.
BUILT_IN_KINDS = {
    ("v1", "Namespace"): "core.v1.Namespace",
    ("v1", "ConfigMap"): "core.v1.ConfigMap",
    ("v1", "ServiceAccount"): "core.v1.ServiceAccount",
    ("v1", "ResourceQuota"): "core.v1.ResourceQuota",
    ("v1", "Service"): "core.v1.Service",
    ("apps/v1", "StatefulSet"): "apps.v1.StatefulSet",
    ("apps/v1", "Deployment"): "apps.v1.Deployment",
    ("policy/v1", "PodDisruptionBudget"): "policy.v1.PodDisruptionBudget",
    ("networking.k8s.io/v1", "NetworkPolicy"): "networking.v1.NetworkPolicy",
    ("storage.k8s.io/v1", "StorageClass"): "storage.v1.StorageClass",
    ("autoscaling/v2", "HorizontalPodAutoscaler"): "autoscaling.v2.HorizontalPodAutoscaler",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "rbac.v1.ClusterRole",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "rbac.v1.ClusterRoleBinding",
    ("rbac.authorization.k8s.io/v1", "Role"): "rbac.v1.Role",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "rbac.v1.RoleBinding",
    ("apiregistration.k8s.io/v1", "APIService"): "apiregistration.v1.APIService",
}


def built_in_class(api_version: str, kind: str) -> type[pulumi.CustomResource] | None:
    """The typed pulumi-kubernetes class of a built-in kind, or None for a kind declared as a CustomResource."""
    path = BUILT_IN_KINDS.get((api_version, kind))
    if path is None:
        return None
    found: Any = k8s
    for attribute in path.split("."):
        found = getattr(found, attribute)
    return found


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def declare(name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """One Kubernetes object. Nested keys go through as written (camelCase, as in the API)."""
    api_version, kind = manifest["apiVersion"], manifest["kind"]
    fields = {key: value for key, value in manifest.items() if key not in ("apiVersion", "kind")}
    resource_class = built_in_class(api_version, kind)
    if resource_class is None:
        return k8s.apiextensions.CustomResource(name, api_version=api_version, kind=kind, opts=opts, **fields)
    return resource_class(name, opts=opts, **{_snake(key): value for key, value in fields.items()})


def metadata(name: str, namespace: str | None = None, labels: dict[str, str] | None = None,
             annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta
