"""CrossGuard entry point: `pulumi preview --policy-pack policy`. The rules are named in rules.py (each in the
module of its subject) and gke_rules.py."""

import sys
from pathlib import Path

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    PolicyPack,
    ResourceValidationPolicy,
    StackValidationPolicy,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gke_rules  # noqa: E402 - the GKE platform's rules, same shape as rules.py
import rules  # noqa: E402 - the pack's own directory (its modules), wherever Pulumi starts it
from resource_view import Seen  # noqa: E402

CONFIG_SCHEMA = PolicyConfigSchema(properties={
    "allowUnboundedBilling": {"type": "boolean", "default": False},
    "allowOpenSsh": {"type": "boolean", "default": False},
    "allowPublicServing": {"type": "boolean", "default": False},
    "honorStackOptIns": {"type": "boolean", "default": True},
    # Added to the ports the stack serves on (its serving firewall rules, every --port of its commands).
    "servingPort": {"type": "integer", "minimum": 1, "maximum": 65535},
    **gke_rules.CONFIG_PROPERTIES,
})


def resource_policy(name, check, description):
    def validate(args, report_violation):
        for message in check(args.resource_type, args.props, args.get_config()):
            report_violation(message)

    return ResourceValidationPolicy(name=name, description=description, validate=validate,
                                    config_schema=CONFIG_SCHEMA)


def urn_resource_policy(name, check, description):
    """A rule that also reads the URN: it tells which of the stack's components made the resource."""
    def validate(args, report_violation):
        for message in check(args.resource_type, args.props, args.get_config(), urn=args.urn):
            report_violation(message)

    return ResourceValidationPolicy(name=name, description=description, validate=validate,
                                    config_schema=CONFIG_SCHEMA)


def stack_policy(name, check, description, enforcement_level=None):
    def validate(args, report_violation):
        resources = [Seen(resource.resource_type, resource.props, resource.urn) for resource in args.resources]
        for message in check(resources, args.get_config()):
            report_violation(message)

    return StackValidationPolicy(name=name, description=description, validate=validate,
                                 config_schema=CONFIG_SCHEMA, enforcement_level=enforcement_level)


POLICIES = [resource_policy(name, check, text) for name, (check, text) in rules.RESOURCE_RULES.items()]
POLICIES += [stack_policy(name, check, text) for name, (check, text) in rules.STACK_RULES.items()]
POLICIES += [stack_policy(name, check, text, EnforcementLevel.ADVISORY)
             for name, (check, text) in rules.ADVISORY_STACK_RULES.items()]
POLICIES += [urn_resource_policy(name, check, text) for name, (check, text) in gke_rules.RESOURCE_RULES.items()]

PolicyPack(name="tpu-vllm", enforcement_level=EnforcementLevel.MANDATORY, policies=POLICIES)
