"""``txlake doctor``: verify the lakehouse log, every table's Delta log and data files, and invariants I1-I4.

Every problem becomes a :class:`Finding` with a hint; a run never stops at the first one. The doctor only
reads, except with ``repair``, which rolls undecided global versions forward exactly as the next writer would
and deletes the temporary objects interrupted local writes left (older than ``leftover_min_age``).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.progress import Progress

import txlake
from txlake.cli.doctor.findings import (
    CHECKS,
    CheckResult,
    CheckStatus,
    DoctorReport,
    Examination,
    Finding,
    Leftover,
    RepairResult,
)
from txlake.cli.doctor.global_log import ROLL_FORWARD_HINT, LogFacts, check_global_log, repair
from txlake.cli.doctor.leftovers import LEFTOVER_MIN_AGE, check_leftovers, find_leftovers, reclaim
from txlake.cli.doctor.reclaimable import check_reclaimable
from txlake.cli.doctor.tables import (
    check_files,
    check_published,
    check_txlake_commits,
    check_unadopted,
    scan_tables,
)

__all__ = [
    "CHECKS",
    "LEFTOVER_MIN_AGE",
    "ROLL_FORWARD_HINT",
    "CheckResult",
    "DoctorReport",
    "Finding",
    "Leftover",
    "RepairResult",
    "run_doctor",
]


def run_doctor(
    lake: txlake.Lakehouse,
    *,
    quick: bool,
    repair_first: bool,
    progress: Progress,
    leftover_min_age: float = LEFTOVER_MIN_AGE,
) -> DoctorReport:
    """Check the whole lakehouse; ``quick`` skips the data-file HEADs, ``repair_first`` rolls forward first
    and, after the checks, deletes temporary objects older than ``leftover_min_age`` seconds."""
    exam = Examination(lake, progress)
    repaired = repair(exam) if repair_first else []
    facts = check_global_log(exam)
    scans = scan_tables(exam, facts)
    check_txlake_commits(exam, facts, scans)
    check_unadopted(exam, facts, scans)
    check_published(exam, facts, scans)
    data_files = None if quick else check_files(exam, scans)
    leftovers = find_leftovers(exam, facts.state.tables.values())
    reclaimed = reclaim(exam, leftovers, leftover_min_age) if repair_first else []
    gone = {r.path for r in reclaimed}
    check_leftovers(exam, [f for f in leftovers if f.path not in gone], leftover_min_age)
    if not quick:
        check_reclaimable(exam)
    delta_commits = sum(len(s.listing.commits) for s in scans)
    return _report(exam, facts, repaired, reclaimed, delta_commits, data_files)


def _status(name: str, findings: Sequence[Finding], skipped: bool) -> CheckStatus:
    if skipped:
        return "skipped"
    if any(f.severity == "error" for f in findings):
        return "failed"
    if any(f.severity == "warning" for f in findings):
        return "warning"
    return "ok"


def _report(
    exam: Examination,
    facts: LogFacts,
    repaired: Sequence[RepairResult],
    reclaimed: Sequence[Leftover],
    delta_commits: int,
    data_files: int | None,
) -> DoctorReport:
    order = {name: i for i, (name, _) in enumerate(CHECKS)}
    findings = sorted(exam.findings, key=lambda f: (order.get(f.check, len(order)), f.table or "", f.version or 0))
    checks = []
    for name, description in CHECKS:
        mine = [f for f in findings if f.check == name]
        skipped = name in ("files.exist", "storage.reclaimable") and data_files is None  # both skipped by quick
        checks.append(CheckResult(name, description, _status(name, mine, skipped), len(mine)))
    return DoctorReport(
        uri=exam.lake.uri,
        healthy=not any(f.severity == "error" for f in findings),
        lakehouse_version=facts.state.version if facts.state.version >= 0 else None,
        latest_claimed=max(facts.claimed) if facts.claimed else None,
        tables=len(facts.state.tables),
        delta_commits=delta_commits,
        data_files=data_files,
        repaired=tuple(repaired),
        reclaimed=tuple(reclaimed),
        checks=tuple(checks),
        findings=tuple(findings),
    )
