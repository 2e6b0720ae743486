"""The sweep's plan before any cloud call: the order, which arms share a node, which boot warm, each arm's expected
time and spend, the totals, and whether the limits and each node's run end allow it. Pure arithmetic.

Node reuse. One sweep stack, one `up` per arm: an arm whose settings reach the queued resource's body gets a new
node; any other arm only changes the serving step, which pulumi-command re-runs over SSH on the same node. What
reaches the body is read off components/vm/deployment.py (queued_resource_body and node_metadata's arguments): the
tpu section, the cache disk (a data disk of the node, mounted by the startup script), vllm.image (pulled by the
startup script), vllm.serverPort and monitoring (the Ops Agent's config in metadata), access (the SSH keys in
metadata).

Warm or cold. JAX keys every cache entry on the program it compiled (jax/_src/cache_key.py), and the cache disk
outlives the node; the stack's compile key (components/gke/compile_cache.py flags_key: the `vllm serve` flags and
tpu-inference variables that change compiled programs) tells which arms compile the same programs. An arm boots
warm when an earlier arm of this sweep, on the same shape, zone, image and cache disk, had its compile key.

Every figure says where it comes from: measured (the build log's cold and warm boot, its 12-cell table) or
computed (from those and the catalog's prices).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from components.basis import boot, spending
from components.basis.price_list import HOURS_PER_MONTH
from components.catalog import chip_price, disk_price, region_of, shape
from components.settings.root import Settings
from tools.bench import reference
from tools.sweep.sweep_file import Arm, Sweep

# Settings that reach the node's request body or metadata (components/vm/deployment.py): a change means a new node.
NODE_KEYS = ("tpu", "cache", "vllm.image", "vllm.serverPort", "monitoring", "access")
# A node's own start (create to the serving step's first command) was not measured. The log's "a warm cache turns a
# preemption from ~18 minutes into ~6" (build-log.txt) less its 857 s cold boot gives 223 s, kept so the limits and
# run-end checks count something; the same sentence's warm figure (~6 min = 360 s) is less than its 497 s warm boot,
# so its recovery minutes are not node start + boot, and this figure is an assumption, not a measurement.
NODE_UP_SECONDS = 18 * 60 - boot.COLD_BOOT_SECONDS
PREEMPTION_RECOVERY_COLD = "the log's ~18 min cold recovery of a preempted node"


def node_key(settings: Settings) -> str:
    """What a node is made of: the settings NODE_KEYS name, as the stack validated them."""
    dumped = settings.model_dump(by_alias=True, mode="json")
    parts = []
    for key in NODE_KEYS:
        value: object = dumped
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        parts.append(f"{key}={value!r}")
    return "|".join(parts)


def compile_key(settings: Settings) -> str:
    """The stack's compile key of these settings (components/gke/compile_cache.py flags_key)."""
    from components.gke.compile_cache import flags_key  # imports pulumi_gcp: only when planning
    from components.serving.spec import serving_spec

    spec = serving_spec(settings)
    return flags_key(list(spec.serve_args), dict(spec.backend_environment))


@dataclass(frozen=True)
class ArmPlan:
    arm: Arm
    index: int
    node: int
    """Which node (1, 2, ...) it runs on."""
    new_node: bool
    warm: bool
    compile_key: str
    node_up_s: int
    boot_s: int
    cells_s: float
    usd_per_hour: float
    price_source: str

    @property
    def seconds(self) -> float:
        return self.node_up_s + self.boot_s + self.cells_s

    @property
    def spend_usd(self) -> float:
        return self.usd_per_hour * self.seconds / 3600


@dataclass
class Plan:
    sweep: Sweep
    arms: list[ArmPlan]
    disk_usd: float
    problems: list[str] = field(default_factory=list)
    """Why the sweep is refused: over a limit, or past a node's run end."""
    notes: list[str] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return sum(arm.seconds for arm in self.arms)

    @property
    def spend_usd(self) -> float:
        return sum(arm.spend_usd for arm in self.arms) + self.disk_usd

    def node_seconds(self, node: int) -> float:
        return sum(arm.seconds for arm in self.arms if arm.node == node)


def cell_seconds(context: int, clients: int, sweep: Sweep) -> float:
    """A cell's expected time: reps x requests x output tokens at the log's aggregate rate for that cell (computed);
    a cell the log did not run is held to its slowest cell with as many clients (or its slowest of all)."""
    cells = sweep.cells
    logged = reference.LOG.get((context, clients))
    if logged is None:
        same = [cell.aggregate_tok_s for (_, n), cell in reference.LOG.items() if n == clients]
        rate = min(same or [cell.aggregate_tok_s for cell in reference.LOG.values()])
    else:
        rate = logged.aggregate_tok_s
    return cells.reps * clients * cells.requests_per_client * cells.output_tokens / rate


def arm_cells_seconds(sweep: Sweep) -> float:
    """Every cell, and one unmeasured warm-up request per context at the log's single-stream rate."""
    cells = sweep.cells
    total = sum(cell_seconds(context, clients, sweep) for context in cells.contexts for clients in cells.clients)
    single = min(cell.per_stream_tok_s for (_, n), cell in reference.LOG.items() if n == 1)
    return total + len(cells.contexts) * cells.output_tokens / single


def _price(settings: Settings) -> tuple[float | None, str]:
    """The arm's node per hour and where the figure comes from; None where the chip has no price read anywhere
    (TPU7x): the log's v5e price is v5e's alone."""
    tpu = settings.tpu
    found = shape(tpu.accelerator_type)
    price = found and chip_price(found.generation.name, region_of(tpu.zone), tpu.provisioning_model)
    if price:
        return price.usd_per_chip_hour * found.chips, f"catalog: {price.source}"
    if found is not None and found.generation.name != "v5e" and settings.usd_per_chip_hour() is None:
        return None, settings.price_not_found()
    return spending.cost_per_hour_usd(tpu.provisioning_model), "the log's us-west4 v5e price (no catalog price)"


def order(sweep: Sweep) -> list[tuple[Arm, str, str]]:
    """Arms grouped by node (in the order each node first appears), and within a node by compile key, so every arm
    that can boot warm follows the one that compiled its programs."""
    keyed = [(arm, node_key(arm.loaded.settings), compile_key(arm.loaded.settings)) for arm in sweep.arms]
    nodes = list(dict.fromkeys(node for _, node, _ in keyed))
    compiles = list(dict.fromkeys(key for _, _, key in keyed))
    return sorted(keyed, key=lambda item: (nodes.index(item[1]), compiles.index(item[2])))


def plan(sweep: Sweep) -> Plan:
    arms: list[ArmPlan] = []
    compiled: set[tuple[str, str, str, str]] = set()
    previous_node = None
    node = 0
    unpriced: list[str] = []
    cells_s = arm_cells_seconds(sweep)
    for index, (arm, node_of_arm, key) in enumerate(order(sweep), start=1):
        settings = arm.loaded.settings
        new_node = node_of_arm != previous_node
        if new_node:
            node += 1
            previous_node = node_of_arm
        # The cache disk is the stack's: it stays while the zone, size and type stay (cache in NODE_KEYS).
        disk = (settings.tpu.zone, settings.tpu.accelerator_type, settings.vllm.image, repr(settings.cache))
        warm = (*disk, key) in compiled
        compiled.add((*disk, key))
        usd, source = _price(settings)
        if usd is None:
            unpriced.append(f"arm {arm.name}: tpu-vllm:tpu.acceleratorType = {settings.tpu.accelerator_type}: "
                            f"{source}; limits.maxSpendUsd cannot be held to it: sweep a priced shape")
            usd = 0.0
        arms.append(ArmPlan(arm=arm, index=index, node=node, new_node=new_node, warm=warm, compile_key=key,
                            node_up_s=NODE_UP_SECONDS if new_node else 0,
                            boot_s=boot.WARM_BOOT_SECONDS if warm else boot.COLD_BOOT_SECONDS,
                            cells_s=cells_s, usd_per_hour=usd, price_source=source))
    base = sweep.arms[0].loaded.settings
    # The shape's disk when cache.diskType is unset (Settings.cache_disk_type); Hyperdisk Balanced has no price read.
    disk_type, size = base.cache_disk_type, base.cache.size_gb
    found = disk_price(disk_type, region_of(base.tpu.zone))
    per_gb_month = found.usd_per_gb_month if found else spending.disk_usd_per_gb_month(disk_type)
    result = Plan(sweep=sweep, arms=arms, disk_usd=0.0)
    result.problems.extend(unpriced)
    if per_gb_month is None:
        result.notes.append(f"the {disk_type} cache disk is not priced (no price read): its share is left out")
        per_gb_month = 0.0
    result.disk_usd = per_gb_month * size * result.seconds / (HOURS_PER_MONTH * 3600)
    _judge(result)
    return result


def _judge(result: Plan) -> None:
    limits = result.sweep.limits
    if result.spend_usd > limits.max_spend_usd:
        result.problems.append(
            f"limits.maxSpendUsd = {limits.max_spend_usd:g}: the sweep is expected to spend ${result.spend_usd:.2f} "
            "(computed below); raise the limit or drop arms or cells")
    if result.seconds > limits.max_seconds:
        result.problems.append(
            f"limits.maxDuration = {limits.max_duration}: the sweep is expected to take {_minutes(result.seconds)} "
            "(computed below, queue not counted); raise the limit or drop arms or cells")
    for node in sorted({arm.node for arm in result.arms}):
        on_it = [arm for arm in result.arms if arm.node == node]
        tpu = on_it[0].arm.loaded.settings.tpu
        if tpu.provisioning_model != "flex-start":
            result.notes.append(f"node {node} is {tpu.provisioning_model}: it never stops by itself; the sweep "
                                "destroys it, and only its limits cap its spend")
            continue
        if result.node_seconds(node) > tpu.run_seconds:
            names = ", ".join(arm.arm.name for arm in on_it)
            result.problems.append(
                f"node {node} ({names}) is expected to run {_minutes(result.node_seconds(node))}, past its run end "
                f"(tpu-vllm:tpu.maxRunDuration = {tpu.max_run_duration}): GCP would delete it mid-sweep; raise "
                "tpu.maxRunDuration in an arm of its own, or split the arms across sweeps")


def _boot_estimates(result: Plan) -> list[str]:
    """Arms whose compile is not the base's: the log measured only the base's, so their boot is an estimate."""
    base = result.sweep.base_loaded
    base_key = compile_key(base.settings) if base is not None else None
    other = [f"{arm.index} {arm.arm.name}" for arm in result.arms if arm.compile_key != base_key]
    if not other:
        return []
    return [f"  boot of arm(s) {', '.join(other)}: estimate from the log's base boot (computed: the same "
            f"{boot.COLD_BOOT_SECONDS} s cold, {boot.WARM_BOOT_SECONDS} s warm), not measured: their compile "
            "differs from the base's"]


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:,.1f} min"


def render(result: Plan) -> str:
    sweep = result.sweep
    cells = sweep.cells
    lines = [
        f"sweep {sweep.path}: {len(result.arms)} arm(s) over stack {sweep.base}, in stack {sweep.stack}; "
        f"{len(cells.contexts) * len(cells.clients)} cells each (contexts {cells.contexts} x clients {cells.clients}, "
        f"{cells.reps} rep(s), {cells.requests_per_client} request(s) per client, {cells.output_tokens} tokens)",
        "",
        f"{'#':>2}  {'arm':<18} {'node':<10} {'compile':<14} {'node up':>8} {'boot':>8} {'cells':>8} "
        f"{'total':>9} {'spend':>8}",
    ]
    for arm in result.arms:
        node = f"{arm.node} ({'new' if arm.new_node else 'reused'})"
        compiled = f"{'warm' if arm.warm else 'cold'} {arm.compile_key[:8]}"
        lines.append(
            f"{arm.index:>2}  {arm.arm.name:<18} {node:<10} {compiled:<14} "
            f"{arm.node_up_s / 60:>6.1f} m {arm.boot_s / 60:>6.1f} m {arm.cells_s / 60:>6.1f} m "
            f"{arm.seconds / 60:>7.1f} m ${arm.spend_usd:>6.2f}")
    lines += [
        f"{'':>2}  {'total':<18} {'':<10} {'':<14} {'':>8} {'':>8} {'':>8} {result.seconds / 60:>7.1f} m "
        f"${result.spend_usd:>6.2f}  (cache disk ${result.disk_usd:.2f} included)",
        "",
        "where the figures come from:",
        f"  queue: not measured and not counted; each new node may wait up to tpu.queueTimeout "
        f"({sweep.arms[0].loaded.settings.tpu.queue_timeout}); whether the wait bills is not documented (the run "
        "counts its spend from its first `up`, wait included)",
        f"  node up: not measured; {NODE_UP_SECONDS} s assumed = {PREEMPTION_RECOVERY_COLD} less its "
        f"{boot.COLD_BOOT_SECONDS} s cold boot (computed; the log's warm figure, ~6 min, is less than its warm "
        "boot, so its recovery minutes are not node start + boot)",
        f"  boot: measured (the build log) for the base's compile, {boot.COLD_BOOT_SECONDS} s cold, "
        f"{boot.WARM_BOOT_SECONDS} s warm (an earlier arm on this cache disk had the same compile key)",
        *_boot_estimates(result),
        "  cells: computed, reps x clients x requests per client x output tokens / the log's aggregate tok/s for the "
        "cell, plus one warm-up request per context at the log's single-stream rate",
        f"  spend: computed, time x the chip's hourly price ({result.arms[0].price_source}), plus the cache disk's "
        "share of the sweep's hours",
        f"limits: spend ${sweep.limits.max_spend_usd:g}, duration {sweep.limits.max_duration}, at the end: "
        f"{sweep.limits.at_end}",
    ]
    for node in sorted({arm.node for arm in result.arms}):
        node_settings = next(arm for arm in result.arms if arm.node == node).arm.loaded.settings
        tpu = node_settings.tpu
        if tpu.provisioning_model == "flex-start":
            hourly = node_settings.tpu_usd_per_hour()
            most = (f"at most ${hourly * tpu.run_seconds / 3600:.2f}, computed" if hourly is not None else
                    node_settings.price_not_found())
            lines.append(f"  node {node}: {_minutes(result.node_seconds(node))} of its {tpu.max_run_duration} run "
                         f"(flex-start stops it by itself at the end: {most})")
    lines += [f"note: {note}" for note in result.notes]
    if result.problems:
        lines += ["", "refused:"] + [f"  - {problem}" for problem in result.problems]
    return "\n".join(lines)
