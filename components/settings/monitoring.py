"""`tpu-vllm:monitoring`: the operator's dashboard and the alerts that carry the build log's rules."""

from __future__ import annotations

import re
from typing import ClassVar

from pydantic import Field, field_validator

from components.settings.fields import PROJECT_IN_PATH, Duration, _Section, parse_duration
from components.settings.findings import InvalidSettingError

# A notification channel's resource name, as Cloud Monitoring gives it (projects.notificationChannels).
CHANNEL_NAME = re.compile(rf"projects/{PROJECT_IN_PATH}/notificationChannels/[0-9]+")
# One address, no display name: Cloud Monitoring's email channel takes a bare `email_address` label. Plain ASCII:
# a local part of letters, digits and . _ + - (no quotes, %, $ or backticks), and a domain of host name labels.
EMAIL = re.compile(r"[A-Za-z0-9._+-]{1,64}@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}")


class MonitoringSettings(_Section):
    """The dashboard and alerts (config key `tpu-vllm:monitoring`)."""

    config_key: ClassVar[str] = "monitoring"

    enabled: bool = Field(True, description=(
        "a Cloud Monitoring dashboard from vLLM's own metrics (vm: the Ops Agent scrapes vLLM on loopback and the "
        "VM's account gets `roles/monitoring.metricWriter` and `roles/logging.logWriter`; gke: the existing "
        "PodMonitoring); `false` makes none of it"))
    alerts: bool = Field(True, description=(
        "alert policies from the build log's rules (KV use above 78% of the pool, requests waiting, the "
        "endpoint not scraped, a flex-start run ending under load); needs `enabled`; billed per condition "
        "(the plan's monitoring lines)"))
    notification_email: str | None = Field(None, description=(
        "where the alerts go: one address (letters, digits, `._+-` before the @), made into an email notification "
        "channel; without it (and without `notificationChannel`) the alerts open incidents in the console only; "
        "set together with `notificationChannel` is an error, and with `enabled` or `alerts` false a warning"))
    notification_channel: str | None = Field(None, description=(
        "an existing channel instead, by name: `projects/PROJECT/notificationChannels/ID`; with `enabled` or "
        "`alerts` false it warns (nothing is sent)"))
    kv_alert_for: Duration = Field("5m", description=(
        "how long KV-cache use must stay above the rule of thumb (78%) before the alert fires"))
    waiting_alert_for: Duration = Field("5m", description=(
        "how long requests must wait in vLLM's queue before the alert fires"))
    run_end_warning: Duration = Field("30m", description=(
        "vm on flex-start: alert this long before the run ends while requests are in flight"))

    @field_validator("notification_email")
    @classmethod
    def _one_address(cls, value: str | None) -> str | None:
        if value is not None and not EMAIL.fullmatch(value.strip()):
            raise InvalidSettingError("not one email address",
                                      "set one address, e.g. ops@example.com (or use monitoring.notificationChannel)")
        return None if value is None else value.strip()

    @field_validator("notification_channel")
    @classmethod
    def _channel_name(cls, value: str | None) -> str | None:
        if value is not None and not CHANNEL_NAME.fullmatch(value.strip()):
            raise InvalidSettingError(
                "not a notification channel's name",
                "use the name `gcloud beta monitoring channels list --format='value(name)'` prints: "
                "projects/PROJECT/notificationChannels/ID")
        return None if value is None else value.strip()

    @property
    def kv_alert_seconds(self) -> int:
        return parse_duration(self.kv_alert_for)

    @property
    def waiting_alert_seconds(self) -> int:
        return parse_duration(self.waiting_alert_for)

    @property
    def run_end_warning_seconds(self) -> int:
        return parse_duration(self.run_end_warning)
