"""The ``txlake`` console script, kept outside the :mod:`txlake` package so that it starts without importing it.

Importing the CLI (pyarrow, obstore, rich, ...) takes a noticeable fraction of a second; a Ctrl-C in that time
used to print a ``KeyboardInterrupt`` traceback. Here it is one ``error: interrupted`` line and exit code 130,
as for a Ctrl-C anywhere else.
"""

from __future__ import annotations

import sys

INTERRUPTED = 130
"""The exit code of an interrupted command (128 + SIGINT), as :class:`txlake.cli.exit_codes.ExitCode` has it."""


def interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` is a Ctrl-C, or an error Python raised because of one: a ``KeyboardInterrupt`` inside
    ``__set_name__`` (a class body being imported) becomes a ``RuntimeError`` caused by it."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def main() -> int:
    """Import and run :func:`txlake.cli.main.main`; a Ctrl-C before it handles one itself exits 130 quietly."""
    try:
        from txlake.cli.main import main as run

        return run()
    except BaseException as exc:
        if not interrupted(exc):
            raise
        sys.stderr.write("error: interrupted\n")
        return INTERRUPTED
