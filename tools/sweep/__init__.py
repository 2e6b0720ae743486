"""`python -m tools.sweep SWEEP.yaml`: the build log's arms compared on one rented chip, nothing left billing.

One concern per module: `sweep_file` (the sweep file, every arm checked by the settings package), `config_paths`
(an arm as `pulumi config set --path` leaves), `estimate` (order, node reuse, expected time and spend, the limits;
pure), `stack_ops` (the Automation API: the pinned CLI, the sweep's stack, `up` with events, cancel, destroy),
`journal` (what finished, for --resume), `bench_step` (tunnel, health, the cells through tools.bench), `compare`
(the table, JSON and plot), `runner` (the loop and its clean-up), `cli` (the command).
"""
