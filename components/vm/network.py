"""Firewall rules on the node's network tag: SSH in, the serving port closed to outsiders."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp

from policy import address_ranges, opt_in


@dataclass
class NodeFirewallArgs:
    project: str
    network: str
    name_prefix: str
    target_tag: str
    serving_port: int
    ssh_source_ranges: list[str]
    internal_source_ranges: list[str]
    """VPC ranges that may call the endpoint."""
    serving_source_ranges: list[str] = field(default_factory=list)
    """Outside ranges; none by default (the SSH tunnel is the way in)."""
    ssh_from_anywhere_allowed: bool = False
    public_serving_allowed: bool = False


class NodeFirewall(pulumi.ComponentResource):
    rules: dict[str, gcp.compute.Firewall]

    def __init__(self, name: str, args: NodeFirewallArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-vllm:network:NodeFirewall", name, None, opts)
        wanted = {
            "ssh": (22, args.ssh_source_ranges, args.ssh_from_anywhere_allowed, opt_in.SSH_OPT_IN),
            "serving-internal": (args.serving_port, args.internal_source_ranges, False, ""),
            "serving-external": (args.serving_port, args.serving_source_ranges,
                                 args.public_serving_allowed, opt_in.SERVING_OPT_IN),
        }
        self.rules = {
            rule: gcp.compute.Firewall(
                f"{name}-{rule}",
                project=args.project,
                network=args.network,
                name=f"{args.name_prefix}-{rule}",
                direction="INGRESS",
                allows=[{"protocol": "tcp", "ports": [str(port)]}],
                source_ranges=ranges,
                target_tags=[args.target_tag],
                description=_description(rule, port, ranges, allowed, setting),
                opts=pulumi.ResourceOptions(parent=self),
            )
            for rule, (port, ranges, allowed, setting) in wanted.items()
            if ranges
        }
        self.register_outputs({"rules": [rule.name for rule in self.rules.values()]})


def _description(rule: str, port: int, ranges: list[str], allowed: bool, setting: str) -> str:
    """The policy pack honours an opt-in only as recorded here, from the settings, for this port and these ranges."""
    text = f"tpu-vllm {rule}"
    if allowed and address_ranges.internet_exposure(ranges):
        # Every range with public addresses, not only the widest: the pack clears nothing else.
        text += "; " + opt_in.note(setting, port, address_ranges.reaching_public(ranges))
    return text
