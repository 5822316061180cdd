"""What a doctor run reports (findings, check results) and the context every check writes findings to."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, TypeAlias, TypeVar

from rich.progress import Progress

import txlake
from txlake.lakehouse.log import GlobalLog
from txlake.storage import ObjectStore

Severity: TypeAlias = Literal["error", "warning", "info"]
CheckStatus: TypeAlias = Literal["ok", "failed", "warning", "skipped"]
T = TypeVar("T")
R = TypeVar("R")
CONCURRENCY = 16

CHECKS: tuple[tuple[str, str], ...] = (
    ("log.readable", "every global record and outcome parses and names the same transaction"),
    ("log.contiguous", "global versions run from 0 to the latest without gaps"),
    ("log.decided", "every claimed global version is decided (committed or aborted)"),
    ("I1.checkpoints", "replaying the global log gives exactly each global checkpoint's state"),
    ("tables.readable", "every catalog table loads at its mapped Delta version with supported features"),
    ("tables.mapped_version", "the Delta version the lakehouse maps each table to exists"),
    ("delta.contiguous", "each table's Delta commits are contiguous"),
    ("I2.commits", "Delta commits are valid JSON; txlake-written commits hold no unknown actions"),
    ("I3.txlake_commits", "each txlake Delta commit belongs to a committed global version or is compensated"),
    ("I4.published", "every committed outcome's published Delta versions exist and hold its commit"),
    ("files.exist", "every data file of each table's mapped snapshot exists with its logged size"),
    ("storage.leftovers", "no temporary objects of interrupted local writes lie in the log directories"),
    ("storage.reclaimable", "files no version of the last 7 days needs (what `txlake vacuum` would delete)"),
)
"""Every check the doctor runs, in report order: (name, what it verifies)."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem (``error``), oddity (``warning``) or remark (``info``) found by check ``check``."""

    check: str
    severity: Severity
    message: str
    hint: str
    table: str | None = None
    version: int | None = None
    path: str | None = None


@dataclass(frozen=True, slots=True)
class CheckResult:
    name: str
    description: str
    status: CheckStatus
    findings: int


@dataclass(frozen=True, slots=True)
class RepairResult:
    """A global version ``--repair`` rolled forward, and how it was decided."""

    version: int
    txid: str
    status: str


@dataclass(frozen=True, slots=True)
class Leftover:
    """A temporary object ``<name>#<n>`` that an interrupted local put left next to a log entry."""

    path: str
    """Relative to the lakehouse root, as the other findings' paths."""
    size: int
    modified: datetime
    table: str | None = None
    """The catalog table whose ``_delta_log/`` holds it; ``None`` under ``_txlake/``."""


@dataclass(frozen=True)
class DoctorReport:
    uri: str
    healthy: bool
    lakehouse_version: int | None
    latest_claimed: int | None
    tables: int
    delta_commits: int
    data_files: int | None
    repaired: tuple[RepairResult, ...]
    reclaimed: tuple[Leftover, ...]
    """Temporary objects ``--repair`` deleted."""
    checks: tuple[CheckResult, ...]
    findings: tuple[Finding, ...]


class Examination:
    """One doctor run: the lakehouse under examination, the findings so far, and the progress display."""

    def __init__(self, lake: txlake.Lakehouse, progress: Progress) -> None:
        self.lake = lake
        self.store: ObjectStore = lake.store
        self.glog: GlobalLog = lake.context.glog
        self.progress = progress
        self.findings: list[Finding] = []

    def add(
        self,
        check: str,
        severity: Severity,
        message: str,
        hint: str,
        *,
        table: str | None = None,
        version: int | None = None,
        path: str | None = None,
    ) -> None:
        self.findings.append(Finding(check, severity, message, hint, table, version, path))

    def map(self, description: str, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``fn`` over ``items`` concurrently, results in order, advancing a progress bar."""
        task = self.progress.add_task(description, total=len(items))

        def one(item: T) -> R:
            try:
                return fn(item)
            finally:
                self.progress.advance(task)

        if len(items) <= 1:
            return [one(i) for i in items]
        with ThreadPoolExecutor(max_workers=min(CONCURRENCY, len(items))) as pool:
            return list(pool.map(one, items))


def ranges(numbers: Sequence[int]) -> str:
    """``1-3, 7`` for ``[1, 2, 3, 7]``."""
    parts: list[str] = []
    ordered = sorted(numbers)
    start = 0
    for i in range(1, len(ordered) + 1):
        if i == len(ordered) or ordered[i] != ordered[i - 1] + 1:
            first, last = ordered[start], ordered[i - 1]
            parts.append(str(first) if first == last else f"{first}-{last}")
            start = i
    return ", ".join(parts)
