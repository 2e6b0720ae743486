"""Kubernetes objects as plain manifests (what the API receives, testable without Pulumi), declared through
pulumi-kubernetes: the typed class for a built-in kind, CustomResource for the rest."""

from __future__ import annotations

import re
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

BUILT_IN_KINDS = {
    ("v1", "Namespace"): k8s.core.v1.Namespace,
    ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
    ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
    ("v1", "ResourceQuota"): k8s.core.v1.ResourceQuota,
    ("v1", "Service"): k8s.core.v1.Service,
    ("apps/v1", "StatefulSet"): k8s.apps.v1.StatefulSet,
    ("apps/v1", "Deployment"): k8s.apps.v1.Deployment,
    ("policy/v1", "PodDisruptionBudget"): k8s.policy.v1.PodDisruptionBudget,
    ("networking.k8s.io/v1", "NetworkPolicy"): k8s.networking.v1.NetworkPolicy,
    ("storage.k8s.io/v1", "StorageClass"): k8s.storage.v1.StorageClass,
    ("autoscaling/v2", "HorizontalPodAutoscaler"): k8s.autoscaling.v2.HorizontalPodAutoscaler,
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): k8s.rbac.v1.ClusterRole,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): k8s.rbac.v1.ClusterRoleBinding,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): k8s.rbac.v1.RoleBinding,
    ("apiregistration.k8s.io/v1", "APIService"): k8s.apiregistration.v1.APIService,
}


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def declare(name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """One Kubernetes object. Nested keys go through as written (camelCase, as in the API)."""
    api_version, kind = manifest["apiVersion"], manifest["kind"]
    fields = {key: value for key, value in manifest.items() if key not in ("apiVersion", "kind")}
    resource_class = BUILT_IN_KINDS.get((api_version, kind))
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
