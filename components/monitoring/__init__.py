"""What the operator sees: the dashboard and alert policies both wings make from vLLM's own metrics.

`promql` (the metric names and every query), `dashboard` (the dashboard's JSON), `alerts` (the policies' bodies)
are pure functions of a `Scope`; `resources` declares them in Cloud Monitoring. A wing builds its Scope (which
series are its own, the run end, the prices) and declares `OperatorMonitoring`.
"""
