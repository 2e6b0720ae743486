"""Every service-account id comes from naming.service_account_id, and each is the id live stacks already have
(recorded from main e7f8038, before the one function: an account id cannot change in place)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from components.basis import naming

ROOT = Path(__file__).resolve().parent.parent

RECORDED = {
    "dev": {"vm": "tpu-vllm-dev-vm", "workload": "tpu-vllm-dev-wl", "nodes": "tpu-vllm-dev-nodes",
            "metrics": "tpu-vllm-dev-metrics"},
    "my_stack": {"vm": "tpu-vllm-my-stack-319ba9-vm", "workload": "tpu-vllm-my-stack-319ba9-wl",
                 "nodes": "tpu-vllm-my-stack-319ba9-nodes", "metrics": "tpu-vllm-my-stack-319b-metrics"},
    "Prod.EU": {"vm": "tpu-vllm-prod-eu-2f2363-vm", "workload": "tpu-vllm-prod-eu-2f2363-wl",
                "nodes": "tpu-vllm-prod-eu-2f2363-nodes", "metrics": "tpu-vllm-prod-eu-2f236-metrics"},
    "a" * 100: {"vm": "tpu-vllm-aaaaaaaaaaa-281659-vm", "workload": "tpu-vllm-aaaaaaaaaaa-281659-wl",
                "nodes": "tpu-vllm-aaaaaaaaaaaaaaa-nodes", "metrics": "tpu-vllm-aaaaaaaaaaaaa-metrics"},
    "team-alpha-production-us-west4": {
        "vm": "tpu-vllm-team-alpha-9dd8c5-vm", "workload": "tpu-vllm-team-alpha-9dd8c5-wl",
        "nodes": "tpu-vllm-team-alpha-prod-nodes", "metrics": "tpu-vllm-team-alpha-pr-metrics"},
    "x": {"vm": "tpu-vllm-x-vm", "workload": "tpu-vllm-x-wl", "nodes": "tpu-vllm-x-nodes",
          "metrics": "tpu-vllm-x-metrics"},
}


@pytest.mark.parametrize("stack", RECORDED, ids=lambda stack: stack[:20])
def test_each_account_keeps_the_id_it_was_deployed_with(stack):
    assert {role: naming.service_account_id(stack, role) for role in naming.SERVICE_ACCOUNTS} == RECORDED[stack]
    for account_id in RECORDED[stack].values():
        assert 6 <= len(account_id) <= naming.LIMITS["service_account"]


def test_an_unknown_role_names_the_roles():
    with pytest.raises(ValueError, match="no service account role 'node'; the roles are vm, workload, nodes, metrics"):
        naming.service_account_id("dev", "node")


def test_no_account_id_is_made_anywhere_else():
    """Every `account_id=` given to a ServiceIdentity is a naming.service_account_id call, or an Args field
    that the wing fills with one (components take explicit Args; only the wings read the settings)."""
    sources = {path: path.read_text() for path in (ROOT / "components").rglob("*.py")}
    for path, source in sources.items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "ServiceIdentityArgs":
                given = {keyword.arg: keyword.value for keyword in node.keywords}
                value = given["account_id"]
                where = f"{path.relative_to(ROOT)}:{node.lineno}: account_id={ast.unparse(value)}"
                if isinstance(value, ast.Attribute) and ast.unparse(value.value) == "args":
                    filled = [keyword for other in sources.values() for call in ast.walk(ast.parse(other))
                              if isinstance(call, ast.Call) for keyword in call.keywords if keyword.arg == value.attr]
                    assert filled and all(isinstance(keyword.value, ast.Call) and ast.unparse(keyword.value.func)
                                          == "naming.service_account_id" for keyword in filled), where
                    continue
                assert isinstance(value, ast.Call) and ast.unparse(value.func) == "naming.service_account_id", where
