"""Runs the real program once under mocks in a fresh process; JSON in on stdin, JSON out.

Pulumi's runtime is process-global, so each configuration gets its own process.
Secrets stay wrapped in the output so tests can see exactly where they went.
"""

import dataclasses
import json
import logging
import sys

from tools.plan.engine import run_program


class Collect(logging.Handler):
    """What the program logged through pulumi.log (the mocks' engine logger), as `pulumi up` would print it."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def main() -> int:
    request = json.load(sys.stdin)
    logged = Collect()
    logging.getLogger("tpu-vllm.mock-engine").addHandler(logged)
    # The program validates its own settings, as under `pulumi up`.
    program = run_program(request["config"], request.get("secret_keys", []), request.get("stack", "dev"),
                          request.get("fixed_outputs"), request.get("failing_calls"), validate_first=False,
                          preview=request.get("preview", False), disks=request.get("disks"))
    json.dump({
        "problems": [program.error] if program.error else None,
        "registrations": [dataclasses.asdict(r) for r in program.registrations],
        "warnings": program.warnings,
        "logged_warnings": logged.messages,
        "outputs": {name: {"value": value, "secret": secret} for name, (value, secret) in program.outputs.items()},
    }, sys.stdout, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
