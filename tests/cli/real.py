"""Running the installed ``txlake`` executable as a user does (its own process, stdout and stderr pipes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from txlake.cli.options import STORAGE_ENV, URI_ENV

EXE = Path(sys.executable).parent / "txlake"
TERMINAL_ENV = ("COLUMNS", "TTY_COMPATIBLE", "FORCE_COLOR")
"""Terminal width and a forced terminal (rich reads both): never inherited from the developer's shell."""
TRACEBACK_MARKERS = ("Traceback (most recent call last)", "at org.apache", "py4j", '{"ts":', "WARN ", "log4j")
"""What must never reach stderr without ``--debug``: Python or Java stack traces, py4j, JVM logging."""


def environment(**extra: str) -> dict[str, str]:
    """The caller's environment without a lakehouse URI, AWS settings, terminal width or forced terminal; Spark on
    loopback."""
    env = {k: v for k, v in os.environ.items() if k not in {URI_ENV, *TERMINAL_ENV, *STORAGE_ENV}}
    return {**env, "SPARK_LOCAL_IP": "127.0.0.1", **extra}


def txlake(*args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess[str]:
    """``txlake *args`` in its own process; never raises on a non-zero exit."""
    return subprocess.run(
        [str(EXE), *args], capture_output=True, text=True, timeout=timeout, env=environment(**env), check=False
    )


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def assert_clean_failure(done: subprocess.CompletedProcess[str], code: int) -> str:
    """Exit ``code``, exactly one ``error:`` line, no stack trace or JVM output; returns that line."""
    assert done.returncode == code, (done.returncode, done.stderr[-3000:])
    for marker in TRACEBACK_MARKERS:
        assert marker not in done.stderr, f"{marker!r} on stderr:\n{done.stderr[-3000:]}"
    errors = error_lines(done.stderr)
    assert len(errors) == 1, done.stderr
    return errors[0]


def tree(path: Path) -> list[tuple[str, int, int]]:
    """Every file below ``path`` with its size and modification time (to show that nothing was written)."""
    if not path.exists():
        return []
    return sorted((str(p.relative_to(path)), p.lstat().st_size, p.lstat().st_mtime_ns) for p in path.rglob("*"))
