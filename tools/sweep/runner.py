"""The sweep itself: for each arm, set its config by path, `up` (events to a log, one progress line), tunnel, health,
the cells; then the comparison and the end action. Ctrl-C, SIGTERM, SIGHUP or any error: stop the running `pulumi
up` (SIGINT, then SIGTERM, then SIGKILL: stack_ops.UpProcess), clear the lock and the pending creates it left,
destroy the sweep's stack, and say so; a second signal says what is left and the exact command that removes it.

Signals. CPython turns SIGINT into KeyboardInterrupt and leaves SIGTERM and SIGHUP at their default, which ends
the process at once, no `finally` run (Doc/library/signal.rst, 3.11): so a `kill PID`, a CI runner's timeout or a
closed terminal left the node billing. Here both are handled as Ctrl-C is, by a handler on the main thread that
raises `Stopped` (a KeyboardInterrupt, so every clean-up path takes it). Who else got the signal differs: the
terminal's Ctrl-C reaches the CLI too (one process group), a `kill PID` reaches the sweep alone, and a closed
terminal sends SIGHUP to the CLI as well, which the CLI does not handle (pkg/backend/cancellation_scope.go notifies
only os.Interrupt and SIGTERM), so Go's runtime ends it at once (golang/go src/os/signal/doc.go: "A SIGHUP, SIGINT,
or SIGTERM signal causes the program to exit"), its lock left behind and its create pending. Every line the
clean-up says also goes to `sweep.log` under --out: after a hang-up no terminal reads stderr."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pulumi.automation.errors import CommandError, InvalidVersionError

from components.settings.text import escaped
from tools.sweep import bench_step, compare, config_paths, ownership, stack_ops
from tools.sweep.estimate import ArmPlan, Plan
from tools.sweep.journal import Journal

HEALTH_TIMEOUT_S = 600.0
# How long the CLI may take to end its update after its first signal (it finishes the steps in flight: a
# queued-resource create can wait up to its queue timeout) before the second, which terminates it; and after that
# (the engine kills its plugins within 5 s: plugin.go kill) before SIGKILL. A destroy never runs beside it.
CANCEL_GRACE_S = 120.0
TERMINATE_GRACE_S = 60.0
POLL_S = 0.1


def clock() -> float:
    """The sweep's own clock: elapsed time, spend so far and each node's run end are read on it."""
    return time.monotonic()


class LimitError(Exception):
    pass


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised on the main thread where the sweep runs (see the module's notes)."""

    def __init__(self, number: int):
        super().__init__(number)
        self.number = number

    @property
    def reason(self) -> str:
        name = signal.Signals(self.number).name
        return f"stopped by {name}" + (" (the terminal closed)" if self.number == signal.SIGHUP else "")


HANDLED_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
LOG: list[Path] = []
"""Where _say also writes (out/sweep.log), once run() knows --out."""


def _say(text: str) -> None:
    for path in LOG:
        with contextlib.suppress(OSError), path.open("a", encoding="utf-8") as log:
            log.write(text + "\n")
    with contextlib.suppress(OSError, ValueError):  # a hung-up terminal: EIO; a closed stream: ValueError
        print(text, file=sys.stderr, flush=True)


def _raise_stopped(number: int, frame: object) -> None:
    raise Stopped(number)


@contextlib.contextmanager
def signals_stop_the_sweep() -> Iterator[None]:
    """SIGTERM and SIGHUP raise Stopped while the sweep runs (main thread only: CPython runs handlers there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.signal(number, _raise_stopped) for number in HANDLED_SIGNALS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _event_record(event: Any) -> dict[str, Any]:
    """One engine event (pulumi.automation.events.EngineEvent) as a log line: which kind, and what it names."""
    record: dict[str, Any] = {"sequence": event.sequence, "timestamp": event.timestamp}
    for kind in ("prelude_event", "resource_pre_event", "res_outputs_event", "res_op_failed_event",
                 "diagnostic_event", "summary_event", "cancel_event", "stdout_event", "policy_event"):
        found = getattr(event, kind, None)
        if found is None:
            continue
        record["kind"] = kind
        metadata = getattr(found, "metadata", None)
        if metadata is not None:
            record.update(op=str(metadata.op.value), urn=metadata.urn, type=metadata.type)
        if kind == "diagnostic_event":
            record.update(severity=found.severity, message=found.message)
        if kind == "summary_event":
            record["resource_changes"] = {str(getattr(op, "value", op)): n for op, n in found.resource_changes.items()}
    return record


class Runner:
    def __init__(self, planned: Plan, out: Path, journal: Journal, stack: stack_ops.SweepStack,
                 tunnel: Callable[[dict[str, Any]], contextlib.AbstractContextManager[tuple[str, str]]],
                 ticker: Callable[[str], None] | None):
        self.planned, self.sweep, self.out, self.journal, self.stack = planned, planned.sweep, out, journal, stack
        self.tunnel, self.ticker = tunnel, ticker or (lambda phase: None)
        self.started = clock()
        self.billing_since: float | None = None
        self.usd_per_hour = planned.arms[0].usd_per_hour
        self.current: ArmPlan | None = None
        self.phase = "start"
        self.events_log: Any = None
        self.node_started: float | None = None
        self.in_flight: dict[str, str] = {}
        """Steps of the running `up` begun and not ended (urn -> type), from its engine events."""
        self.cut_short: list[str] = []
        """Queued-resource creates in flight when the `up` had to be terminated or killed."""

    # ---- progress ----

    def spent(self) -> float:
        """Computed: the finished arms' node time, and the node time since this run's first `up`, x $/hour."""
        running = (clock() - self.billing_since) if self.billing_since is not None else 0.0
        return self.journal.spent_usd + self.usd_per_hour * running / 3600

    def progress(self, detail: str = "") -> None:
        arm = self.current
        where = f"arm {arm.index} of {len(self.planned.arms)} ({arm.arm.name})" if arm else "sweep"
        elapsed = int(clock() - self.started)
        _say(f"[{where}] {self.phase}, {elapsed // 60}m{elapsed % 60:02d}s, ${self.spent():.2f} spent so far "
             f"(computed){': ' + detail if detail else ''}")

    def enter(self, phase: str) -> None:
        self.phase = phase
        self.progress()
        self.tick()

    def tick(self) -> None:
        self.ticker(self.phase)
        limits = self.sweep.limits
        if self.spent() > limits.max_spend_usd:
            raise LimitError(f"limits.maxSpendUsd = {limits.max_spend_usd:g}: ${self.spent():.2f} spent (computed)")
        if clock() - self.started > limits.max_seconds:
            raise LimitError(f"limits.maxDuration = {limits.max_duration}: reached")

    # ---- one arm ----

    def arm_dir(self, arm: ArmPlan) -> Path:
        return self.out / f"{arm.index:02d}-{arm.arm.name}"

    def deploy(self, config: dict[str, Any], events_log: Path) -> None:
        current = self.journal.applied or self.sweep.base_config
        to_set, to_remove = config_paths.changes(current, config)
        self.stack.apply(to_set, to_remove)
        self.journal.applied = config
        self.journal.deployed = True
        self.journal.save()
        self.enter("up")
        events_log.parent.mkdir(parents=True, exist_ok=True)
        # Open until the `up` ends, however it ends: after Ctrl-C the cancelled update still reports its events.
        log = self.events_log = events_log.open("a", encoding="utf-8")

        def write(record: dict[str, Any]) -> None:
            if not log.closed:
                log.write(json.dumps(record) + "\n")
                log.flush()

        def on_event(event: Any) -> None:
            record = _event_record(event)
            write(record)
            if record.get("kind") == "resource_pre_event":
                self.in_flight[record["urn"]] = record["type"]
                self.progress(f"{record['op']} {record['type']}")
            elif record.get("kind") in ("res_outputs_event", "res_op_failed_event"):
                self.in_flight.pop(record.get("urn", ""), None)

        if self.billing_since is None:
            self.billing_since = clock()
        self.in_flight.clear()
        self.stack.start_up(on_event, lambda line: write({"output": line}))
        while not self.stack.wait_up(POLL_S):
            self.tick()
        log.close()

    def measure(self, arm: ArmPlan) -> Path:
        settings = arm.arm.loaded.settings
        self.enter("config")
        self.deploy(arm.arm.config, self.arm_dir(arm) / "events.jsonl")
        outputs = self.stack.outputs()
        self.enter("tunnel")
        with self.tunnel(outputs) as (base_url, api_key):
            self.enter("health")
            bench_step.wait_healthy(base_url, HEALTH_TIMEOUT_S, self.tick)
            self.enter("cells")
            kv = settings.kv_budget()
            result = self.arm_dir(arm) / "bench.json"
            bench_step.run_cells(base_url, api_key, settings.vllm.model, self.sweep.cells,
                                 kv.kv_tokens if kv else None, result, arm.arm.name)
        return result

    def run_arms(self) -> None:
        limits = self.sweep.limits
        for arm in self.planned.arms:
            if arm.arm.name in self.journal.finished:
                continue
            self.current = arm
            if self.spent() + arm.spend_usd > limits.max_spend_usd:
                raise LimitError(f"limits.maxSpendUsd = {limits.max_spend_usd:g}: ${self.spent():.2f} spent and "
                                 f"arm {arm.arm.name} is expected to cost ${arm.spend_usd:.2f} more (computed)")
            if arm.new_node or self.node_started is None:
                self.node_started = clock()
            tpu = arm.arm.loaded.settings.tpu
            if tpu.provisioning_model == "flex-start" and \
                    clock() - self.node_started + arm.seconds > tpu.run_seconds:
                raise LimitError(
                    f"arm {arm.arm.name} would run past node {arm.node}'s run end: it has run "
                    f"{(clock() - self.node_started) / 60:.0f} min of its {tpu.max_run_duration} and the arm is "
                    f"expected to take {arm.seconds / 60:.0f} min (computed); GCP would delete the node mid-arm")
            arm_started = clock()
            result = self.measure(arm)
            self.journal.finished[arm.arm.name] = str(result)
            self.journal.spent_usd += self.usd_per_hour * (clock() - arm_started) / 3600
            self.billing_since = clock()
            self.journal.save()
            self.progress(f"finished: {result}")

    # ---- the end ----

    def finish(self) -> int:
        rows = [row for arm in self.planned.arms
                for row in compare.rows_of(arm.arm.name, Path(self.journal.finished[arm.arm.name]), arm.usd_per_hour)]
        written = compare.write(rows, self.out)
        print(compare.markdown(rows))
        _say("comparison: " + ", ".join(str(path) for path in written))
        self.current, action = None, self.sweep.limits.at_end
        if action == "destroy":
            self.destroy()
            return 0
        best = compare.winner(rows)
        name = best.arm if action == "keep-best" and best else self.planned.arms[0].arm.name
        config = (next(arm.arm.config for arm in self.planned.arms if arm.arm.name == name)
                  if action == "keep-best" else self.sweep.restored_base)
        self.enter("keep" if action == "keep-best" else "restore")
        self.deploy(config, self.out / f"{action}-events.jsonl")
        _say(f"left up on purpose (limits.atEnd = {action}): stack {self.sweep.stack} serves "
             f"{name if action == 'keep-best' else 'the base'}'s configuration and bills "
             f"${self.usd_per_hour:.2f}/hour {self.billing_until()}: "
             f"{stack_ops.destroy_command(self.sweep.project_dir, self.sweep.stack)}")
        return 0

    def destroy(self, clear_pending: bool = False) -> None:
        self.enter("destroy")
        log = (self.out / "destroy.log").open("a", encoding="utf-8")
        with log:
            if clear_pending:
                self.stack.clear_pending_creates(lambda line: log.write(line + "\n"))
            self.stack.destroy(lambda line: log.write(line + "\n"))
        # The interrupted arm's node time is spent too: a resumed sweep counts it against maxSpendUsd.
        self.journal.spent_usd = self.spent()
        self.journal.deployed, self.journal.applied = False, None
        self.journal.save()
        self.billing_since = None
        if self.cut_short:
            _say(f"destroyed stack {self.sweep.stack} and removed it. CHECK: {self.check_cut_short()}")
        else:
            _say(f"destroyed stack {self.sweep.stack} and removed it: nothing of the sweep is left billing")

    def wait_for_up(self, seconds: float) -> bool:
        """True once the `up` ended, however (its error is already being handled)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                if self.stack.wait_up(POLL_S):
                    return True
            if not self.stack.up_running():
                return True
        return False

    def stop_up(self, interrupted: bool) -> bool:
        """End the running `pulumi up` by its own signals (stack_ops.UpProcess); True when it had to be killed,
        which leaves its lock. `pulumi cancel` would not stop it (stack_ops' notes): it only clears that lock, after."""
        process = self.stack.up_process()
        if interrupted:
            _say("the Pulumi CLI got the same Ctrl-C and is cancelling its update (it finishes the steps in flight)")
        elif process.signal(signal.SIGINT):
            _say("sent the Pulumi CLI SIGINT: it cancels its update (it finishes the steps in flight)")
        if self.wait_for_up(CANCEL_GRACE_S):
            return False
        self.cut_short = [urn for urn, type_ in self.in_flight.items() if type_.endswith(":QueuedResource")]
        _say(f"the update still runs {CANCEL_GRACE_S:.0f} s later (in flight: "
             f"{', '.join(self.in_flight) or 'nothing the events named'}); sending it SIGTERM, its second signal: it "
             "terminates, killing its plugins")
        process.signal(signal.SIGTERM)
        if self.wait_for_up(TERMINATE_GRACE_S):
            return False
        # A Ctrl-C that never reached it (a signal sent to this process alone) made that SIGTERM its first.
        _say(f"the update still runs {TERMINATE_GRACE_S:.0f} s after SIGTERM: sending it SIGTERM again")
        process.signal(signal.SIGTERM)
        if self.wait_for_up(TERMINATE_GRACE_S):
            return False
        _say(f"the update still runs {TERMINATE_GRACE_S:.0f} s after its second SIGTERM: killing it and its plugins "
             "(SIGKILL)")
        process.kill()
        if not self.wait_for_up(TERMINATE_GRACE_S):
            raise RuntimeError("the `pulumi up` process still runs after SIGKILL")
        return True

    def check_cut_short(self) -> str:
        settings = (self.current or self.planned.arms[0]).arm.loaded.settings
        return (f"the update was stopped while it created {', '.join(self.cut_short)}; this project's create watchdog "
                "deletes that queued-resource request when its provider host dies (components/vm/create_watchdog.py), "
                "which the sweep cannot see. If it is still listed, it bills until deleted: "
                f"gcloud alpha compute tpus queued-resources delete {settings.node_id} --project="
                f"{self.sweep.project or 'PROJECT'} --zone={settings.tpu.zone} --force --quiet")

    def clean_up(self, reason: str, interrupted: bool, exit_code: int | None = None) -> int:
        """After a signal or an error: end the running update, clear its lock and pending creates, destroy, say so.
        `interrupted`: the terminal's Ctrl-C, which the CLI got too. Returns exit_code (130 after Ctrl-C, 128 + the
        signal after SIGTERM or SIGHUP, else 1)."""
        code = exit_code if exit_code is not None else (130 if interrupted else 1)
        _say(f"sweep stopped in phase {self.phase}: {reason}. Cleaning up (a second Ctrl-C or signal stops that "
             "too, and says what is left).")
        try:
            running = self.stack.up_running()
            killed = running and self.stop_up(interrupted)
            ended_by_signal = self.stack.up_ended_by_signal()
            if ended_by_signal and not self.cut_short:
                self.cut_short = [urn for urn, type_ in self.in_flight.items() if type_.endswith(":QueuedResource")]
            if killed or ended_by_signal:
                _say(self.stack.cancel())  # the lock a CLI ended by a signal left; it is gone now
            if self.events_log is not None:
                self.events_log.close()
            if self.journal.deployed:
                self.destroy(clear_pending=self.stack.up_unfinished())
            else:
                self.stack.workspace.remove_stack(self.sweep.stack)
                self.journal.applied = None
                self.journal.save()
                _say(f"nothing was deployed: nothing of the sweep is billing; removed stack {self.sweep.stack}, "
                     "which held no resources")
        except KeyboardInterrupt as again:
            _say(f"the clean-up was stopped too ({again.reason if isinstance(again, Stopped) else 'Ctrl-C'})")
            self.left_behind()
            return code
        except Exception as error:  # the clean-up itself failed: say what is left, never a traceback
            lines = str(error).strip().splitlines()
            _say(f"the clean-up failed: {error.__class__.__name__}: {escaped(lines[-1] if lines else '')}")
            self.left_behind()
            return 1
        return code

    def billing_until(self) -> str:
        """Until when the node bills, by its provisioning model (build-log.txt: spot and on-demand have no
        automatic stop; flex-start's node is deleted at its run end)."""
        tpu = (self.current or self.planned.arms[0]).arm.loaded.settings.tpu
        if tpu.provisioning_model == "flex-start":
            return f"until its flex-start run end ({tpu.max_run_duration} after it started) or until you remove it"
        return f"until you remove it ({tpu.provisioning_model} has no automatic stop)"

    def left_behind(self) -> None:
        running = self.stack.up_running()
        text = (f"LEFT BEHIND: stack {self.sweep.stack} may still hold a TPU node (${self.usd_per_hour:.2f}/hour, "
                f"bills {self.billing_until()}) and its cache disk (bills until deleted).")
        if running:
            text += (" Its `pulumi up` still runs: stop it first (Ctrl-C in its terminal, or kill it), then remove "
                     "them with:")
        else:
            text += " Remove them with:"
        text += "\n  " + stack_ops.destroy_command(self.sweep.project_dir, self.sweep.stack)
        if self.cut_short:
            text += f"\nCHECK: {self.check_cut_short()}"
        _say(text)


def run(planned: Plan, out: Path, *, resume: bool, install_cli: bool, pulumi_command: Any = None,
        tunnel: Callable[[dict[str, Any]], contextlib.AbstractContextManager[tuple[str, str]]] | None = None,
        ticker: Callable[[str], None] | None = None, journal: Journal | None = None) -> int:
    """`journal`: the one --resume read and checked (cli.main), else None."""
    sweep = planned.sweep
    names = [arm.arm.name for arm in planned.arms]
    journal_path = out / "journal.json"
    if resume and journal is None:
        _say(f"error: --resume: no sweep to resume in {escaped(str(out))} (no journal.json); run it without --resume")
        return 2
    if journal is not None and (journal.arms != names or journal.stack != sweep.stack):
        _say(f"error: --resume: {escaped(str(journal_path))} is of another sweep (arms "
             f"{escaped(', '.join(journal.arms))}, stack {escaped(journal.stack)}); run this one without --resume, "
             "with another --out")
        return 2
    if journal is not None and journal.mark is None:
        _say(f"error: --resume: {escaped(str(journal_path))} holds no mark of the stack it made (an older sweep's "
             f"journal): the sweep cannot tell stack {sweep.stack} is its own. Remove that stack as its LEFT BEHIND "
             f"line said ({stack_ops.destroy_command(sweep.project_dir, sweep.stack)}), then run without --resume")
        return 2
    journal = journal or Journal(journal_path, str(sweep.path), sweep.stack, names, mark=ownership.new_mark())
    with signals_stop_the_sweep():
        try:
            return _run(planned, out, journal, resume, install_cli, pulumi_command, tunnel, ticker)
        except Stopped as stopped:  # before the runner was there to clean up: nothing was deployed yet
            _say(f"sweep {stopped.reason} before anything was deployed. If stack {sweep.stack} was made, it holds "
                 f"no resources: pulumi stack rm --yes {sweep.stack} --cwd {sweep.project_dir}")
            return 128 + stopped.number
        finally:
            LOG.clear()


def _run(planned: Plan, out: Path, journal: Journal, resume: bool, install_cli: bool, pulumi_command: Any,
         tunnel: Any, ticker: Any) -> int:
    sweep = planned.sweep
    out.mkdir(parents=True, exist_ok=True)
    LOG[:] = [out / "sweep.log"]
    try:
        command = pulumi_command or stack_ops.pulumi_command(install_cli)
    except (OSError, subprocess.CalledProcessError, InvalidVersionError) as error:
        _say(f"error: the sweep needs the Pulumi CLI {stack_ops.PULUMI_CLI_VERSION} or a later 3.x "
             f"({error.__class__.__name__}: {error}); install it (https://www.pulumi.com/docs/install/), or add "
             "--install-cli to install that version under ~/.pulumi/versions/. Nothing was started.")
        return 2
    stack = stack_ops.SweepStack(sweep.project_dir, sweep.base, sweep.stack, command)
    try:
        made = stack.open(resume, journal.mark)
    except (stack_ops.StackExistsError, stack_ops.NotTheSweepsStackError) as error:
        _say(f"error: {error}. Nothing was started.")
        return 2
    except CommandError as error:  # e.g. not logged in: nothing was made yet
        said = escaped(str(error).rpartition("stderr:")[2].strip())  # CommandResult.__str__: code, stdout, stderr
        _say(f"error: the Pulumi CLI refused to open stack {sweep.stack}: {said}. Log in "
             "(pulumi login) and check the base stack exists. Nothing was started.")
        return 2
    if made:
        journal.applied, journal.deployed = None, False
    journal.save()
    runner = Runner(planned, out, journal, stack, tunnel or bench_step.ssh_tunnel, ticker)
    if journal.finished:
        _say(f"resuming after {', '.join(journal.finished)}")
    try:
        runner.run_arms()
        return runner.finish()
    except Stopped as stopped:
        return runner.clean_up(stopped.reason, interrupted=False, exit_code=128 + stopped.number)
    except KeyboardInterrupt:
        return runner.clean_up("interrupted (Ctrl-C)", interrupted=True)
    except Exception as error:  # any error: nothing may be left billing
        detail = escaped(str(error).strip().splitlines()[-1]) if str(error).strip() else ""
        return runner.clean_up(f"{error.__class__.__name__}: {detail}", interrupted=False)


@contextlib.contextmanager
def no_tunnel(base_url: str, api_key: str) -> Iterator[tuple[str, str]]:
    yield base_url, api_key
