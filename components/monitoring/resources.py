"""OperatorMonitoring: the dashboard, the notification channel and the alert policies in Cloud Monitoring."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from datetime import datetime

import pulumi
import pulumi_gcp as gcp

from components.monitoring import alerts, dashboard
from components.monitoring.promql import Scope
from components.settings.monitoring import MonitoringSettings

# The TPU API's runDuration.terminationTime: RFC 3339 UTC, up to nanoseconds (google.protobuf.Timestamp's JSON).
_RFC3339 = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:\d\d)")


def epoch_of(timestamp: str) -> int:
    """Seconds since the epoch of a terminationTime; ValueError when it is not one."""
    found = _RFC3339.fullmatch(timestamp.strip())
    if found is None:
        raise ValueError(f"the run end {timestamp!r} is not an RFC 3339 time")
    zone = "+00:00" if found.group(2) == "Z" else found.group(2)
    return int(datetime.fromisoformat(found.group(1) + zone).timestamp())


@dataclass
class OperatorMonitoringArgs:
    project: str
    settings: MonitoringSettings
    scope: Scope
    labels: dict[str, str]
    run_end: pulumi.Input[str] | None = None
    """vm on flex-start: the queued resource's terminationTime; the run's tiles and alert follow it."""
    depends_on: list[pulumi.Resource] = dataclasses.field(default_factory=list)
    """What must exist first (the Monitoring API)."""


class OperatorMonitoring(pulumi.ComponentResource):
    """One dashboard; with monitoring.alerts, one policy per rule and the email channel monitoring names."""

    def __init__(self, name: str, args: OperatorMonitoringArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-vllm:monitoring:OperatorMonitoring", name, None, opts)
        cfg = args.settings
        child = pulumi.ResourceOptions(parent=self, depends_on=args.depends_on)
        if args.run_end is None:
            scope: pulumi.Output[Scope] = pulumi.Output.from_input(args.scope)
        else:
            scope = pulumi.Output.from_input(args.run_end).apply(
                lambda end: dataclasses.replace(args.scope, run_end_epoch=epoch_of(end)))
        self.dashboard = gcp.monitoring.Dashboard(
            f"{name}-dashboard", project=args.project, dashboard_json=scope.apply(dashboard.dashboard_json), opts=child)
        self.policies: list[gcp.monitoring.AlertPolicy] = []
        if cfg.alerts:
            channels: list[pulumi.Input[str]] = []
            if cfg.notification_channel:
                channels.append(cfg.notification_channel)
            elif cfg.notification_email:
                channel = gcp.monitoring.NotificationChannel(
                    f"{name}-email", project=args.project, display_name=f"{args.scope.title} alerts",
                    type="email", labels={"email_address": cfg.notification_email},
                    user_labels=dict(args.labels), opts=child)
                channels.append(channel.name)
            thresholds = {"kv_for_seconds": cfg.kv_alert_seconds, "waiting_for_seconds": cfg.waiting_alert_seconds,
                          "run_end_warning_seconds": cfg.run_end_warning_seconds}
            # Which rules exist is known now (the run-end rule needs a run end); their queries may wait for it.
            known = dataclasses.replace(args.scope, run_end_epoch=0 if args.run_end is not None else None)
            for rule in alerts.rules(known, **thresholds):
                body = pulumi.Output.all(scope, channels).apply(
                    lambda values, key=rule.key: alerts.pulumi_args(alerts.policy_body(
                        next(r for r in alerts.rules(values[0], **thresholds) if r.key == key),
                        list(values[1]), args.labels)))
                self.policies.append(gcp.monitoring.AlertPolicy(
                    f"{name}-alert-{rule.key}", project=args.project,
                    display_name=body["display_name"], combiner=body["combiner"], severity=body["severity"],
                    conditions=body["conditions"], documentation=body["documentation"],
                    notification_channels=body["notification_channels"], user_labels=body["user_labels"],
                    opts=child))
        self.register_outputs({"dashboard": self.dashboard.id})
