"""Cross-key rules of monitoring: where the alerts go, and whether any alert is made to go there."""

from __future__ import annotations

from components.settings.facts import NAMESPACE
from components.settings.findings import Finding
from components.settings.root import Settings


def monitoring_checks(settings: Settings) -> list[Finding]:
    findings: list[Finding] = []
    monitoring = settings.monitoring
    email, channel = monitoring.notification_email, monitoring.notification_channel
    if email and channel:
        # One destination, named once: the stack either makes an email channel or uses yours, never both, so an
        # address beside a channel would be dropped without a word.
        findings.append(Finding(
            "monitoring.notificationEmail", email,
            f"set together with {NAMESPACE}:monitoring.notificationChannel, and the alerts go to one channel: "
            "either the stack makes an email channel for this address, or it uses yours",
            f"keep one: `pulumi config rm --path {NAMESPACE}:monitoring.notificationEmail` to use your channel, or "
            f"`pulumi config rm --path {NAMESPACE}:monitoring.notificationChannel` for an email channel",
            also_keys=("monitoring.notificationChannel",),
        ))
    if monitoring.enabled and monitoring.alerts:
        return findings
    off = "monitoring.enabled" if not monitoring.enabled else "monitoring.alerts"
    for key, value in (("monitoring.notificationEmail", email), ("monitoring.notificationChannel", channel)):
        if value:
            findings.append(Finding.warning(
                key, value, f"no alert is made ({NAMESPACE}:{off} is false), so nothing is ever sent here",
                f"turn alerts on (`pulumi config set --path {NAMESPACE}:{off} true`), or remove the key",
                also_keys=(off,),
            ))
    return findings
