"""The status a forked child ends with, as the interpreter would end a program that ran the same code.

Used by both fork servers (tests/fork_server.py in the test venv, tests/venv_fork_server.py in the others,
which runs it as a sibling script module): standard library only.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable


def exit_status(program: Callable[[], object]) -> int:
    """Runs `program`: 0 when it returns; sys.exit's argument as the interpreter treats it (None is 0, an int is
    itself, anything else is printed to stderr and gives 1); an uncaught exception's traceback and 1."""
    try:
        program()
    except SystemExit as exit_:
        if exit_.code is None:
            return 0
        if isinstance(exit_.code, int):
            return exit_.code
        print(exit_.code, file=sys.stderr)
        return 1
    except BaseException:  # noqa: BLE001 - uncaught: the traceback and 1, as `python` ends
        traceback.print_exc()
        return 1
    return 0
