"""Temporary objects of interrupted local puts: found in the log directories, reported, reclaimed by ``--repair``.

obstore's ``LocalStore`` (every ``file://`` lakehouse) writes an object to ``<path>#<n>`` and then hard-links
(put-if-absent) or renames (put) it into place; a process killed in between leaves ``<path>#<n>`` behind.
Such a file is no object: the store hides it from LIST and refuses HEAD/DELETE on it, and no log listing
matches its name. So the doctor looks at the directories themselves, and only where txlake or Delta
writers put log entries (``_txlake/`` and each catalog table's ``_delta_log/``), and only at names those
writers produce followed by ``#<digits>``. Nothing else is ever reported or deleted. Other stores write
objects atomically and leave no such files.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime

from txlake.cli.doctor.findings import Examination, Leftover
from txlake.lakehouse.log import ROOT
from txlake.lakehouse.records import TableEntry

LEFTOVER_MIN_AGE = 3600.0
"""Seconds a temporary object must be old before ``--repair`` deletes it: a younger one may belong to a put
still in flight (deleting it would fail that put), an older one cannot."""

_TEMP = r"#\d+"
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_TXLAKE_NAME = re.compile(
    r"(?:log/\d{20}(?:\.outcome|\.checkpoint)?\.json"  # global records, outcomes, checkpoints
    r"|_last_checkpoint"
    r"|txns/[0-9a-f]{32}/spark/[0-9a-f]{16}(?:\.json|\.(?:tasks|rejected)/[0-9a-f]{32}\.json))"  # Spark staging
    rf"{_TEMP}"
)
"""Paths below ``_txlake/`` of temporary objects of what txlake writes there."""
_DELTA_LOG_NAME = re.compile(
    r"(?:\d{20}\.(?:json|crc|checkpoint\.parquet|checkpoint\.\d{10}\.\d{10}\.parquet"
    rf"|checkpoint\.{_UUID}\.(?:json|parquet))"
    r"|_last_checkpoint"
    rf"|_commit_{_UUID}\.json\.tmp)"  # delta-rs writes a commit there first, then renames it
    rf"{_TEMP}"
)
"""Names in ``_delta_log/`` of temporary objects of what Delta writers (txlake, delta-rs, Spark) write there."""


def find_leftovers(exam: Examination, tables: Iterable[TableEntry]) -> list[Leftover]:
    """Every temporary object below ``_txlake/`` and the tables' ``_delta_log/`` (local lakehouses only)."""
    root = exam.store.local_path()
    if root is None:
        return []
    found = [_leftover(root, rel, None) for rel in _txlake_candidates(root)]
    for entry in tables:
        log_dir = f"{entry.path.strip('/')}/_delta_log"
        if not _inside(root, log_dir):
            continue
        found.extend(_leftover(root, f"{log_dir}/{name}", entry.name) for name in _delta_log_candidates(root, log_dir))
    return sorted((f for f in found if f is not None), key=lambda f: f.path)


def check_leftovers(exam: Examination, leftovers: Iterable[Leftover], min_age: float) -> None:
    """One finding per temporary object: reclaimable once older than ``min_age``, else perhaps still in use."""
    now = time.time()
    for left in leftovers:
        written = left.modified.isoformat(timespec="seconds")
        if now - left.modified.timestamp() >= min_age:
            exam.add(
                "storage.leftovers",
                "warning",
                f"temporary object {left.path} ({left.size} bytes, written {written}) was left by an interrupted "
                "write; it is no log entry and every reader ignores it",
                "reclaimable: `txlake doctor --repair` deletes it",
                table=left.table,
                path=left.path,
            )
        else:
            exam.add(
                "storage.leftovers",
                "info",
                f"temporary object {left.path} ({left.size} bytes, written {written}) belongs to a write in "
                f"progress or one interrupted less than {_duration(min_age)} ago",
                f"nothing to do: `txlake doctor --repair` deletes it once it is {_duration(min_age)} old",
                table=left.table,
                path=left.path,
            )


def reclaim(exam: Examination, leftovers: Iterable[Leftover], min_age: float) -> list[Leftover]:
    """Delete the temporary objects older than ``min_age``; returns those deleted, the rest stay."""
    root = exam.store.local_path()
    if root is None:
        return []
    deleted = []
    for left in leftovers:
        full = os.path.join(root, left.path)
        current = _leftover(root, left.path, left.table)  # as it is now, not as it was listed
        if current is None or time.time() - current.modified.timestamp() < min_age:
            continue
        try:
            os.unlink(full)
        except FileNotFoundError:
            continue  # deleted by a concurrent repair
        except OSError as exc:
            exam.add(
                "storage.leftovers",
                "warning",
                f"could not delete temporary object {left.path}: {exc.strerror or exc}",
                "check the permissions of the lakehouse directory, then run `txlake doctor --repair` again",
                table=left.table,
                path=left.path,
            )
            continue
        deleted.append(current)
    return deleted


def _txlake_candidates(root: str) -> Iterator[str]:
    """Paths (relative to ``root``) of the files below ``_txlake/`` named like a temporary txlake object."""
    top = os.path.join(root, ROOT)
    for dirpath, _dirs, files in os.walk(top):  # never follows symlinked directories
        for name in files:
            if "#" not in name:
                continue
            rel = os.path.relpath(os.path.join(dirpath, name), top).replace(os.sep, "/")
            if _TXLAKE_NAME.fullmatch(rel):
                yield f"{ROOT}/{rel}"


def _delta_log_candidates(root: str, log_dir: str) -> Iterator[str]:
    try:
        with os.scandir(os.path.join(root, log_dir)) as entries:
            names = [e.name for e in entries if "#" in e.name]
    except (FileNotFoundError, NotADirectoryError):
        return
    yield from (name for name in sorted(names) if _DELTA_LOG_NAME.fullmatch(name))


def _leftover(root: str, rel: str, table: str | None) -> Leftover | None:
    """The leftover at ``rel`` if it is (still) a regular file, not a symlink."""
    try:
        st = os.lstat(os.path.join(root, rel))
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return Leftover(rel, st.st_size, datetime.fromtimestamp(st.st_mtime, tz=UTC), table)


def _inside(root: str, rel: str) -> bool:
    """Whether ``rel`` names a directory below ``root`` (a catalog path is relative; never trust ``..``)."""
    if "://" in rel or rel.startswith("/"):
        return False
    full = os.path.normpath(os.path.join(root, rel))
    return full.startswith(os.path.normpath(root) + os.sep)


def _duration(seconds: float) -> str:
    """``1 hour``, ``90 minutes``, ``5 seconds``."""
    for unit, size in (("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            n = seconds / size
            return f"{n:g} {unit}{'' if n == 1 else 's'}"
    return f"{seconds:g} second{'' if seconds == 1 else 's'}"
