"""The ``storage.reclaimable`` check: what ``txlake vacuum`` would delete with the default retention."""

from __future__ import annotations

from collections import Counter

from txlake.cli.doctor.findings import Examination
from txlake.cli.output import human_size
from txlake.errors import TxlakeError
from txlake.lakehouse.vacuum import DEFAULT_RETENTION, vacuum


def check_reclaimable(exam: Examination) -> None:
    """One ``info`` finding summing up the files a vacuum with the default retention (7 days) would delete:
    orphans of crashed or aborted transactions, files removed more than 7 days ago, dropped tables."""
    task = exam.progress.add_task("looking for reclaimable files", total=None)
    try:
        report = vacuum(exam.lake.context, DEFAULT_RETENTION, dry_run=True, force=True)
    except TxlakeError:
        return  # a log vacuum cannot read: the other checks report it
    finally:
        exam.progress.remove_task(task)
    if not report.deleted:
        return
    reasons = Counter("orphans" if f.reason.startswith("orphan") else f.reason for f in report.deleted)
    detail = ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items()))
    exam.add(
        "storage.reclaimable",
        "info",
        f"{report.files_deleted} file(s), {human_size(report.bytes_deleted)}, are needed by no lakehouse version "
        f"of the last 7 days, no tag and no running transaction ({detail})",
        "`txlake vacuum` lists them; `txlake vacuum --delete` deletes them",
    )
