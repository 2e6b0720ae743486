"""Run inside the policy pack's own venv: load policy/__main__.py with PolicyPack captured, call each policy.

Usage: python tests/policy_entry_check.py [PACK_DIR] < cases.json (PACK_DIR defaults to policy/).

Reads JSON on stdin: {"cases": {name: {"resources": [[type, props, urn], ...], "config": {...}}}}.
Each case goes through every policy as the analyzer would call it: pulumi_policy's own argument
classes, properties behind its unknown-checking proxy. Prints JSON: the pack's name, enforcement
level, each policy's own level, and per case what each policy reported.
"""

import json
import runpy
import sys
from pathlib import Path

import pulumi_policy
from pulumi_policy.policy import PolicyResource, PolicyResourceOptions
from pulumi_policy.proxy import UnknownValueError, unknown_checking_proxy

captured = {}


class CapturedPack:
    def __init__(self, name, policies, enforcement_level=None, **kwargs):
        captured.update(name=name, policies=policies, enforcement_level=enforcement_level.value)


pulumi_policy.PolicyPack = CapturedPack
pack = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "policy"
runpy.run_path(str(pack / "__main__.py"), run_name="__main__")


def options():
    return PolicyResourceOptions(protect=False, ignore_changes=[], delete_before_replace=None, aliases=[],
                                 custom_timeouts=None, additional_secret_outputs=[])


# What pulumi_policy's analyzer reports, per resource (or per stack), when a policy reads a value unknown
# at preview (pulumi_policy/policy.py, Analyze and AnalyzeStack): an advisory note, not a violation.
ADVISORY_PREFIX = "advisory, can't run during preview: "


def validated(policy, args, messages):
    try:
        policy.validate(args, messages.append)
    except UnknownValueError as error:
        messages.append(f"{ADVISORY_PREFIX}{error.message}")


def reports_for(resources, config):
    reports = {}
    for policy in captured["policies"]:
        messages = []
        if isinstance(policy, pulumi_policy.StackValidationPolicy):
            seen = [PolicyResource(type_, unknown_checking_proxy(props), urn, urn.rsplit("::", 1)[-1], options(),
                                   None, None, [], {}) for type_, props, urn in resources]
            validated(policy, pulumi_policy.StackValidationArgs(seen, config), messages)
        else:
            for type_, props, urn in resources:
                validated(policy, pulumi_policy.ResourceValidationArgs(
                    type_, unknown_checking_proxy(props), urn, urn.rsplit("::", 1)[-1], options(), None, config),
                    messages)
        reports[policy.name] = messages
    return reports


request = json.load(sys.stdin)
json.dump({"name": captured["name"], "enforcement_level": captured["enforcement_level"],
           # A policy's own level, where it sets one (else the pack's).
           "levels": {policy.name: (policy.enforcement_level.value if policy.enforcement_level else None)
                      for policy in captured["policies"]},
           "cases": {name: reports_for(case["resources"], case.get("config") or {})
                     for name, case in request["cases"].items()}}, sys.stdout)
