"""Run inside the policy pack's own venv: load policy/__main__.py with PolicyPack captured, call each policy.

Prints JSON: the pack's name, enforcement level, policy names, and what each policy reported
for the resources given on stdin.
"""

import json
import runpy
import sys
from pathlib import Path
from types import SimpleNamespace

import pulumi_policy

captured = {}


class CapturedPack:
    def __init__(self, name, policies, enforcement_level=None, **kwargs):
        captured.update(name=name, policies=policies, enforcement_level=enforcement_level.value)


pulumi_policy.PolicyPack = CapturedPack
runpy.run_path(str(Path(__file__).resolve().parent.parent / "policy" / "__main__.py"), run_name="__main__")

resources = json.load(sys.stdin)
reports = {}
for policy in captured["policies"]:
    messages = []
    if isinstance(policy, pulumi_policy.StackValidationPolicy):
        args = SimpleNamespace(resources=[SimpleNamespace(resource_type=t, props=p) for t, p in resources],
                               get_config=lambda: {})
        policy.validate(args, messages.append)
    else:
        for type_, props in resources:
            args = SimpleNamespace(resource_type=type_, props=props, get_config=lambda: {})
            policy.validate(args, messages.append)
    reports[policy.name] = messages

json.dump({"name": captured["name"], "enforcement_level": captured["enforcement_level"],
           "reports": reports}, sys.stdout)
