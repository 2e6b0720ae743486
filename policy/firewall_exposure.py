"""SSH and the serving ports are not open to the internet, judged by the addresses the rules cover, as GCP
applies them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

try:
    from . import address_ranges, opt_in
    from .resource_view import COMMAND_TYPES, FIREWALL_TYPE, Seen, as_seen, with_defaults
    from .shell_commands import VLLM_DEFAULT_PORT, command_texts, listening_ports
except ImportError:  # run by the pack's __main__, which puts this directory on sys.path
    import address_ranges
    import opt_in
    from resource_view import COMMAND_TYPES, FIREWALL_TYPE, Seen, as_seen, with_defaults
    from shell_commands import VLLM_DEFAULT_PORT, command_texts, listening_ports

# The component that writes opt-in notes, and only from the stack's settings (components/vm/network.py).
NODE_FIREWALL_TYPE = "tpu-vllm:network:NodeFirewall"
SSH_PORT = 22
# GCP takes a protocol by name or by IP protocol number; "all" includes TCP.
TCP_PROTOCOLS = {"tcp", "6", "all"}
# An ingress rule with no source at all applies to every IPv4 source.
NO_SOURCE_MEANS = ["0.0.0.0/0"]


def _port_spans(allows: Iterable[Mapping[str, Any]] | None) -> list[tuple[int, int]]:
    """The TCP port ranges a rule allows."""
    spans: list[tuple[int, int]] = []
    for allow in allows or []:
        if str(allow.get("protocol", "")).strip().lower() not in TCP_PROTOCOLS:
            continue
        ports = list(allow.get("ports") or [])
        if not ports:
            spans.append((0, 65535))  # no ports: every port
        for port in ports:
            low, _, high = str(port).strip().partition("-")
            try:
                spans.append((int(low), int(high or low)))
            except ValueError:  # GCP would refuse it; count it as every port rather than none
                spans.append((0, 65535))
    return spans


def _ingress_sources(props: Mapping[str, Any]) -> list[str]:
    """Source ranges of an ingress allow rule; none for egress, deny-only or tag-only rules."""
    if str(props.get("direction") or "INGRESS").strip().upper() != "INGRESS":
        return []
    ranges = [str(text) for text in props.get("sourceRanges") or []]
    if ranges:
        return ranges
    if props.get("sourceTags") or props.get("sourceServiceAccounts"):
        return []  # only from the VPC's own tagged instances or service accounts
    return NO_SOURCE_MEANS


def _made_by_the_stack(urn: str) -> bool:
    """A rule the stack's NodeFirewall component made (urn:pulumi:stack::project::Parent$Type::name)."""
    parts = urn.split("::")
    types = parts[2].split("$") if len(parts) >= 4 else []
    return types[-2:] == [NODE_FIREWALL_TYPE, FIREWALL_TYPE]


def _cleared(rule: Seen, port: int, setting: str, config: Mapping[str, Any]) -> set[address_ranges.Network]:
    """Ranges the stack's own opt-in note clears on this rule, for this port, under this setting only."""
    if not config["honorStackOptIns"] or not _made_by_the_stack(rule.urn):
        return set()
    cleared = set()
    for note in opt_in.read(str(rule.props.get("description") or "")):
        if note.setting != setting or note.port != port:
            continue
        for text in note.ranges:
            try:
                cleared.add(address_ranges.parse(text))
            except ValueError:
                continue
    return cleared


def serving_ports(resources: Iterable[Seen | tuple], config: Mapping[str, Any] | None = None) -> list[int]:
    """Where the stack serves: the stack's serving firewall rules, every --port of its commands, policy config."""
    config = with_defaults(config)
    ports = {int(config["servingPort"])} if config["servingPort"] else set()
    for resource in as_seen(resources):
        if resource.type in COMMAND_TYPES:
            for text in command_texts(resource.props):
                ports |= listening_ports(text)
        elif (resource.type == FIREWALL_TYPE and _made_by_the_stack(resource.urn)
              and str(resource.props.get("description") or "").startswith("tpu-vllm serving")):
            ports |= {low for low, high in _port_spans(resource.props.get("allows")) if low == high}
    return sorted(ports) or [VLLM_DEFAULT_PORT]


def firewall_not_open_to_the_world(resources: Iterable[Seen | tuple],
                                   config: Mapping[str, Any] | None = None) -> list[str]:
    """Stack-wide: no set of ingress rules opens SSH or a serving port to the internet unless opted in."""
    config = with_defaults(config)
    resources = as_seen(resources)
    rules = [r for r in resources if r.type == FIREWALL_TYPE]
    checks = [(SSH_PORT, "SSH", opt_in.SSH_OPT_IN, "allowOpenSsh",
               "narrow tpu-vllm:access.sshSourceRanges to your address")]
    checks += [(port, "the serving port", opt_in.SERVING_OPT_IN, "allowPublicServing",
                "use the SSH tunnel, or narrow tpu-vllm:access.servingSourceRanges")
               for port in serving_ports(resources, config) if port != SSH_PORT]
    violations = []
    for port, what, setting, policy_setting, fix in checks:
        if config[policy_setting]:
            continue
        reaching: list[tuple[str, str]] = []  # (rule name, range as written)
        for rule in rules:
            if not any(low <= port <= high for low, high in _port_spans(rule.props.get("allows"))):
                continue
            name = str(rule.props.get("name") or rule.urn.rsplit("::", 1)[-1])
            cleared = _cleared(rule, port, setting, config)
            for text in _ingress_sources(rule.props):
                try:
                    network = address_ranges.parse(text)
                except ValueError:
                    violations.append(f"firewall {name}: cannot read source range {text!r}, so cannot tell who "
                                      f"reaches {what} (tcp:{port}); write it as CIDR, e.g. 203.0.113.7/32")
                    continue
                if network not in cleared:
                    reaching.append((name, text))
        exposure = address_ranges.internet_exposure(text for _, text in reaching)
        if exposure:
            names = sorted({name for name, text in reaching if text in exposure.ranges})
            violations.append(
                f"{what} (tcp:{port}) is open to the internet: {exposure.describe()} (firewall "
                f"{', '.join(names)}); {fix}, or opt in explicitly (stack setting tpu-vllm:access.{setting}, "
                f"or policy config {policy_setting})")
    return violations
