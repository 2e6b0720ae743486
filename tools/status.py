"""Where a deployed stack stands, and what to do next.

    python -m tools.status [--stack dev]

A gke stack (its `platform` output) is read with kubectl instead (tools/status_gke.py): the ComputeClass,
its nodes and run ends, each replica, the HPA.

Reads the stack's outputs (`pulumi stack output`), the queued resource's live state from the
TPU API (or, on `tpu.api: compute`, the instance's from Compute Engine: tools/status_compute.py),
and, once the node is up, the boot script's status file, the vLLM container and its
/health over SSH with the stack's own key. One state, a few facts and the next step:
not deployed, queued, provisioning, booting, compiling, ready, run ended (or what went wrong).

Exit codes: 0 ready, 1 not ready yet or needs action, 2 could not find out (with why).

By concern: this module decides and prints; tools/status_outputs.py reads the stack's outputs and settings,
tools/status_node.py the vm wing's node over SSH, tools/status_gke.py the gke wing with kubectl,
tools/status_report.py is the report they share.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from components.settings.text import escaped
from components.vm import container
from components.vm.queued_resource import WAITING_STATES
from components.vm.tpu_api import TpuApi, TpuApiError
from tools.status_node import (
    NodeFacts,
    SshHostKeyError,
    SshRefusedError,
    SshTarget,
    SshUnreachableError,
    read_node,
    ssh_target,
)
from tools.status_outputs import Redactor, request_from_settings, required, serving_port, stack_outputs
from tools.status_report import EXIT_ERROR, EXIT_READY, Report, StatusError, parse_time, span

KEY_SETUP_HINT = 'eval "$(pulumi stack output sshPrivateKeySetup)"'

QUEUED_RESOURCE_NAME = re.compile(r"^projects/[^/]+/locations/([^/]+)/queuedResources/([^/]+)$")
QUEUED_STATES = WAITING_STATES - {"PROVISIONING"}
ENDED_STATES = {"SUSPENDING", "SUSPENDED"}
NODE_COMING_UP = {"STATE_UNSPECIFIED", "CREATING", "STARTING", "RESTARTING", "REPAIRING", "REIMAGING"}


# ---- time ----

def run_end_fact(termination: str, now: datetime) -> tuple[str, str] | None:
    ends = parse_time(termination)
    if ends is None:
        return None
    left = (ends - now).total_seconds()
    when = ends.strftime("%Y-%m-%d %H:%M UTC")
    return ("run ends", f"{when} ({span(left)} left)" if left >= 0 else f"{when} (ended {span(left)} ago)")


# ---- deciding ----

def untracked(name: str, stack_label: str, api: TpuApi) -> Report | None:
    """A request that exists while the stack tracks none: left by an interrupted first `pulumi up`."""
    try:
        queued = api.get(name)
    except TpuApiError as error:
        raise StatusError(str(error)) from None
    if queued is None:
        return None
    project, zone, queued_id = name.split("/")[1], name.split("/")[3], name.rsplit("/", 1)[-1]
    state = (queued.get("state") or {}).get("state", "STATE_UNSPECIFIED")
    delete = (f"gcloud alpha compute tpus queued-resources delete {queued_id} --project={project} --zone={zone} "
              "--force --quiet")
    bills = "it bills now" if state == "ACTIVE" else "it bills once it goes ACTIVE"
    return Report(
        "untracked", f"the queued resource {queued_id} exists ({state}) but {stack_label} does not track it (an "
        f"interrupted first `pulumi up`): `pulumi destroy` will not delete it, and {bills}",
        f"delete it: {delete}; then `pulumi refresh --clear-pending-creates` and `pulumi up` (or let `pulumi up` "
        "adopt it: it does when the request is exactly what the stack asks for)",
        facts=[("queued resource", f"{queued_id} in {zone}: {state}, not in the stack's state")])


def decide(outputs: dict[str, Any] | None, stack_label: str, api: TpuApi, now: datetime,
           node_reader: Callable[[SshTarget, int], NodeFacts] = read_node,
           settings_name: str | None = None) -> Report:
    """settings_name: the request's name from the stack's settings, looked up when the outputs name none."""
    if not outputs and settings_name:
        report = untracked(settings_name, stack_label, api)
        if report is not None:
            return report
    if outputs is None:
        return Report("not deployed", f"there is no {stack_label}",
                      "create it: `pulumi stack select --create NAME`, set its config (README, One-time "
                      "config), then `pulumi up`")
    if not outputs:
        return Report("not deployed", f"{stack_label} has no outputs: nothing is deployed",
                      "`pulumi up` (about 20 minutes the first time). If a first `pulumi up` is running now, "
                      "its outputs appear when it finishes; it reports its own progress meanwhile")

    name = required(outputs, "queuedResourceName", stack_label)
    match = QUEUED_RESOURCE_NAME.match(name)
    if not match:
        raise StatusError(f"{stack_label}'s queuedResourceName output is not a queued resource's name: {name!r}")
    zone, queued_id = match.groups()
    delete_hint = f"gcloud alpha compute tpus queued-resources delete {queued_id} --zone={zone} --force --quiet"
    try:
        queued = api.get(name)
    except TpuApiError as error:
        raise StatusError(str(error)) from None
    if queued is None:
        return Report("not deployed", f"the queued resource {queued_id} no longer exists (deleted by hand, or "
                      "by the deploy after its queue deadline)", "`pulumi up` requests a new one",
                      facts=[("queued resource", f"{queued_id}: gone")])

    state = (queued.get("state") or {}).get("state", "STATE_UNSPECIFIED")
    facts = [("queued resource", f"{queued_id} in {zone}: {state}")]
    termination = (queued.get("runDuration") or {}).get("terminationTime") or outputs.get("runEndsAt") or ""

    if state in QUEUED_STATES:
        created = parse_time(queued.get("createTime", ""))
        if created:
            facts.append(("waiting", f"{span((now - created).total_seconds())} since the request"))
        deadline = (queued.get("queueingPolicy") or {}).get("validUntilDuration")
        if deadline:
            facts.append(("queue deadline", f"{deadline} after the request (tpu-vllm:tpu.queueTimeout)"))
        return Report("queued", "waiting for TPU capacity (flex-start)",
                      "nothing to do: keep `pulumi up` running, it continues when capacity arrives; "
                      "nothing bills while queued", facts=facts)
    if state == "PROVISIONING":
        return Report("provisioning", "capacity granted; GCP is creating the TPU VM",
                      "wait a few minutes: the boot script and the serving step follow", facts=facts)
    if state in ENDED_STATES:
        fact = run_end_fact(termination, now)
        return Report("run ended", "the run duration is over: GCP deleted the node and billing stopped",
                      "`pulumi up` to re-queue: it replaces the request; the compile cache makes the next "
                      "boot warm (~8 min)", facts=facts + ([fact] if fact else []))
    if state == "FAILED":
        error = (((queued.get("state") or {}).get("failedData") or {}).get("error") or {})
        return Report("failed", f"the queued resource failed: {error.get('message') or 'no reason given'}",
                      f"delete it ({delete_hint}), then `pulumi up` queues a fresh one", facts=facts)
    if state != "ACTIVE":
        return Report(state.lower(), f"the queued resource is {state}",
                      "wait for the `pulumi up` or `pulumi destroy` that is changing it", facts=facts)

    fact = run_end_fact(termination, now)
    if fact:
        facts.append(fact)
    return _active(queued, outputs, stack_label, api, now, facts, delete_hint, node_reader)


def _active(queued: dict[str, Any], outputs: dict[str, Any], stack_label: str, api: TpuApi, now: datetime,
            facts: list[tuple[str, str]], delete_hint: str,
            node_reader: Callable[[SshTarget, int], NodeFacts]) -> Report:
    spec = ((queued.get("tpu") or {}).get("nodeSpec") or [{}])[0]
    node_name = f"{spec.get('parent', '')}/nodes/{spec.get('nodeId', '')}"
    try:
        node = api.get_node(node_name)
    except TpuApiError as error:
        raise StatusError(str(error)) from None
    node_state = (node or {}).get("state", "missing")
    host = (((node or {}).get("networkEndpoints") or [{}])[0].get("accessConfig") or {}).get("externalIp", "")
    facts.append(("node", f"{node_state}" + (f", {host}" if host else "")))
    if node is None or node_state in NODE_COMING_UP or (node_state == "READY" and not host):
        return Report("provisioning", "the request is active; the TPU VM is still coming up",
                      "wait a minute or two", facts=facts)
    if node_state != "READY":
        return Report("node lost", f"the node is {node_state}: it cannot serve",
                      f"delete the request ({delete_hint}), then `pulumi up` queues a fresh one", facts=facts)

    return serving(outputs, host, stack_label, facts, now, node_reader)


def serving(outputs: dict[str, Any], host: str, stack_label: str, facts: list[tuple[str, str]], now: datetime,
            node_reader: Callable[[SshTarget, int], NodeFacts]) -> Report:
    """A node that is up, on either path: what its boot script, container and /health say over SSH."""
    port = serving_port(outputs, stack_label)
    target = ssh_target(outputs, host, stack_label)
    try:
        seen = node_reader(target, port)
    except SshRefusedError as refusal:
        return Report("ssh refused", f"the node refused the stack's SSH key ({refusal})",
                      "an organisation policy that enforces OS Login overrides the node's enable-oslogin=FALSE; "
                      "allow the stack's key, or deploy in a project without that policy", facts=facts)
    except SshHostKeyError as mismatch:
        return Report("booting", f"the node answers SSH with another host key ({mismatch})",
                      "wait a minute: its boot script installs the stack's key after reading it from Secret "
                      "Manager; if it persists, the boot script failed before that (read its log in the node's "
                      "serial console or Cloud Logging) or another machine answers at this address; nothing "
                      "was sent to it", facts=facts)
    except SshUnreachableError as reason:
        return Report("booting", f"the node is up but SSH does not answer yet ({reason})",
                      "wait a minute (sshd and the guest agent start after boot); if it persists, check that "
                      "tpu-vllm:access.sshSourceRanges includes your address", facts=facts)
    return _on_node(seen, target, facts, port, now)


def _on_node(seen: NodeFacts, target: SshTarget, facts: list[tuple[str, str]], port: int,
             now: datetime) -> Report:
    ssh = target.command_hint
    name = container.CONTAINER_NAME
    startup = seen.startup_status
    facts.append(("boot script", startup or "not started"))
    if startup.startswith("failed"):
        return Report("booting", "the boot script failed (its reason below)",
                      f"read its log: {ssh} sudo journalctl -u google-startup-scripts; after the fix, run it "
                      f"again: {ssh} sudo google_metadata_script_runner startup, then `pulumi up`", facts=facts)
    if startup != "ready":
        return Report("booting", "the boot script is reading the secrets and mounting the cache disk",
                      "wait a minute or two; the serving step starts the container when it is done",
                      facts=facts)

    status, _, rest = seen.container.partition(" ")
    exit_code, _, started_text = rest.partition(" ")
    if not status:
        facts.append(("container", f"{name}: not created"))
        return Report("booting", "the boot script is done; the vLLM container has not been started yet",
                      "`pulumi up` runs the serving step that starts it (if one is running now, it will in a "
                      "moment)", facts=facts)
    if status != "running":
        facts.append(("container", f"{name}: {status} (exit code {exit_code})"))
        if seen.last_log:
            facts.append(("last log line", seen.last_log))
        return Report("container stopped", f"the vLLM container is not running ({status})",
                      f"see why: {ssh} sudo docker logs --tail 100 {name}; to try the same command again: "
                      f"{ssh} sudo docker start {name}", facts=facts)

    started = parse_time(started_text)
    since = f" for {span((now - started).total_seconds())} (since {started:%H:%M:%S} UTC)" if started else ""
    facts.append(("container", f"{name}: running{since}"))
    answer = seen.health if seen.health.strip("0") else "nothing (not listening yet)"  # curl says 000
    facts.append(("health", f"/health on :{port} answered {answer}"))
    if seen.health == "200":
        return Report("ready", f"vLLM is serving on port {port}",
                      "open the tunnel: $(pulumi stack output sshTunnelCommand) & then use "
                      "$(pulumi stack output localEndpoint) with the apiKey output", exit_code=EXIT_READY,
                      facts=facts)
    if seen.progress or seen.last_log:
        facts.append(("progress", seen.progress or seen.last_log))
    return Report("compiling", "the container is up; vLLM is loading and compiling (/health not 200 yet)",
                  f"wait: a cold start takes ~14 min (857 s, 80% XLA compile), a warm one ~8 (497 s); "
                  f"follow it: {ssh} sudo docker logs -f {name}", facts=facts)


# ---- output ----

def render(report: Report, stack_label: str) -> str:
    """The report, each piece one inert line: what the cluster, the node or the API said (a pod's name, a condition's
    message, a log line) passes through the project's one sanitizer (components/settings/text.py)."""
    facts = [(escaped(label), escaped(value)) for label, value in report.facts]
    width = max([len(label) for label, _ in facts] + [10])
    lines = [f"tpu-vllm status, {escaped(stack_label)}: {escaped(report.state.upper())}",
             f"  {escaped(report.headline)}"]
    lines += [f"  {label.ljust(width)}  {value}" for label, value in facts]
    lines.append(f"next: {escaped(report.next_step)}")
    if "ssh -i " in report.next_step:
        lines.append(f"      (the key file, once: {KEY_SETUP_HINT})")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tools.status", description=__doc__.splitlines()[0])
    parser.add_argument("--stack", help="the Pulumi stack (default: the selected one)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None, *, api: TpuApi | None = None,
         clock: Callable[[], datetime] = lambda: datetime.now(UTC),
         node_reader: Callable[[SshTarget, int], NodeFacts] = read_node) -> int:
    args = parse_args(argv)
    stack_label = f"stack {args.stack}" if args.stack else "the selected stack"
    outputs: dict[str, Any] | None = None
    redact = Redactor(None)
    try:
        outputs = stack_outputs(args.stack)
        redact = Redactor(outputs)
        if outputs and outputs.get("platform") == "gke":
            from tools import status_gke  # the gke wing's reading, in its own module

            report = status_gke.decide(outputs, stack_label, clock())
        elif outputs and outputs.get("instanceName"):
            from tools import status_compute  # the vm wing's node through Compute Engine (tpu.api: compute)

            report = status_compute.decide(outputs, stack_label, clock(), serving, node_reader=node_reader)
        else:
            settings_name = request_from_settings(args.stack) if args.stack and not outputs else None
            report = decide(outputs, stack_label, api or TpuApi(max_attempts=3), clock(), node_reader,
                            settings_name)
    except StatusError as error:
        print(f"error: {escaped(redact(str(error)))}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as error:  # noqa: BLE001 - credentials and transport faults: a message, not a traceback
        print(f"error: {escaped(redact(_explain(error)))}", file=sys.stderr)
        return EXIT_ERROR
    print(redact(render(report, stack_label)))
    return report.exit_code


def _explain(error: Exception) -> str:
    from google.auth import exceptions as auth_exceptions

    if isinstance(error, auth_exceptions.DefaultCredentialsError):
        return ("no Google credentials to read the TPU API: run `gcloud auth application-default login` "
                "(a viewer role such as roles/tpu.viewer is enough)")
    if isinstance(error, auth_exceptions.RefreshError):
        return f"the Google credentials were refused ({error}); run `gcloud auth application-default login` again"
    return f"{error.__class__.__name__}: {error}"


if __name__ == "__main__":
    sys.exit(main())
