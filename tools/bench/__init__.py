"""`python -m tools.bench`: the build log's 12-cell sweep against an OpenAI-compatible endpoint.

One concern per module: `sse` (the event-stream format), `request` (one endpoint: calibration and one timed
stream), `results` (the figures and their definitions), `sweep` (repetitions from one queue), `reference`
(the build log's table and yardstick), `report` (tables, comparisons, plot), `fleet` (the agent-fleet mode:
agents resending their own prefixes over kept connections, TTFT per endpoint), `cli` (the command).
"""
