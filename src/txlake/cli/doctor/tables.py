"""Doctor checks of the catalog's Delta tables: logs, mapped versions, commits (I2-I4) and data files."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from txlake.cli.doctor.findings import Examination, ranges
from txlake.cli.doctor.global_log import LogFacts
from txlake.delta import (
    Action,
    Add,
    CommitInfo,
    DeltaLog,
    LogListing,
    OtherAction,
    Snapshot,
    load_snapshot,
    parse_commit,
)
from txlake.delta.files import load_deletion_vector, resolve_file
from txlake.errors import (
    CorruptLogError,
    DataFileNotFoundError,
    DeltaError,
    ObjectNotFoundError,
    TableNotFoundError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)
from txlake.lakehouse.records import TableEntry

_RESTORE_COMMIT_HINT = "restore the commit from a backup; every Delta reader fails on it"


@dataclass
class TableScan:
    """What the doctor learned about one catalog table's Delta log."""

    entry: TableEntry
    log: DeltaLog
    listing: LogListing
    snapshot: Snapshot | None = None
    markers: dict[int, Mapping[str, object]] = field(default_factory=dict)
    """``commitInfo.txlake`` of each txlake-written commit, by Delta version."""
    unreadable: set[int] = field(default_factory=set)
    """Delta versions whose commit does not parse (reported by I2.commits)."""
    mapped: int | None = None
    """The Delta version the lakehouse maps the table to, when that version exists."""

    def compensation_after(self, version: int, txid: str) -> int | None:
        """The first compensating commit of transaction ``txid`` after Delta version ``version``."""
        return next(
            (
                v
                for v, m in sorted(self.markers.items())
                if v > version and m.get("compensates") and str(m.get("txn")) == txid
            ),
            None,
        )


def _marker(actions: Iterable[Action]) -> Mapping[str, object] | None:
    info = next((a for a in actions if isinstance(a, CommitInfo)), None)
    return info.txlake if info is not None else None


def scan_tables(exam: Examination, facts: LogFacts) -> list[TableScan]:
    """Check every catalog table's Delta log and load it at its mapped version; read all commits (I2)."""
    scans = []
    for entry in sorted(facts.state.tables.values(), key=lambda e: e.name):
        log = DeltaLog(exam.store, entry.path, name=entry.name)
        scan = TableScan(entry, log, log.list())
        scans.append(scan)
        _check_log(exam, scan, facts.state.table_versions.get(entry.id))
    _read_commits(exam, scans)
    return scans


def _check_log(exam: Examination, scan: TableScan, mapped: int | None) -> None:
    name, listing = scan.entry.name, scan.listing
    commits = sorted(listing.commits)
    complete = sorted(v for v, c in listing.checkpoints.items() if c.complete)
    if not commits and not complete:
        exam.add(
            "tables.readable",
            "error",
            f"{name}: no Delta log at {exam.store.url(scan.log.log_dir)}",
            "the table's directory was deleted outside txlake; restore it from a backup or drop the table",
            table=name,
        )
        return
    gaps = [v for a, b in itertools.pairwise(commits) for v in range(a + 1, b)]
    if gaps:
        exam.add(
            "delta.contiguous",
            "error",
            f"{name}: Delta commit(s) {ranges(gaps)} are missing",
            "restore the commit files from a backup; Delta readers cannot replay across a gap",
            table=name,
            version=gaps[0],
        )
    if commits and commits[0] > 0 and not any(c >= commits[0] - 1 for c in complete):
        exam.add(
            "delta.contiguous",
            "error",
            f"{name}: the Delta log starts at commit {commits[0]} with no checkpoint before it",
            "restore the earlier commits or the checkpoint from a backup",
            table=name,
            version=commits[0],
        )
    latest = max(commits + complete)
    if mapped is None or mapped > latest or (mapped not in listing.commits and mapped not in complete):
        exam.add(
            "tables.mapped_version",
            "error",
            f"{name}: the lakehouse maps it to Delta version {mapped}, which does not exist (latest {latest})",
            "restore the missing commit from a backup",
            table=name,
            version=mapped,
        )
        return
    scan.mapped = mapped  # commits after it are classified once their markers are read: check_unadopted
    try:
        scan.snapshot = load_snapshot(scan.log, mapped)
    except UnsupportedFeatureError as exc:
        exam.add(
            "tables.readable",
            "error",
            f"{name}: needs Delta feature {exc.feature!r}, which txlake cannot read",
            "a plain writer upgraded the table; read it with an engine that supports the feature",
            table=name,
            version=mapped,
        )
    except (CorruptLogError, VersionNotFoundError, TableNotFoundError) as exc:
        exam.add(
            "tables.readable",
            "error",
            f"{name}: cannot load Delta version {mapped}: {exc}",
            "restore the damaged commit or checkpoint from a backup",
            table=name,
            version=mapped,
        )


def _read_commits(exam: Examination, scans: list[TableScan]) -> None:
    """I2: every Delta commit parses; txlake's hold no unknown actions. Keeps txlake's markers for I3/I4."""
    jobs = [(scan, v) for scan in scans for v in sorted(scan.listing.commits)]

    def read(job: tuple[TableScan, int]) -> tuple[TableScan, int, list[Action] | CorruptLogError | None]:
        scan, v = job
        try:
            data = exam.store.get(scan.log.commit_path(v))
        except ObjectNotFoundError:
            return scan, v, None  # cleaned up since the LIST
        try:
            return scan, v, parse_commit(data, table=scan.entry.name, version=v)
        except CorruptLogError as exc:
            return scan, v, exc

    for scan, v, actions in exam.map("reading Delta commits", read, jobs):
        name = scan.entry.name
        if actions is None:
            continue
        if isinstance(actions, CorruptLogError):
            scan.unreadable.add(v)
            exam.add(
                "I2.commits",
                "error",
                f"{name}: Delta commit {v} is not a valid commit: {actions}",
                _RESTORE_COMMIT_HINT,
                table=name,
                version=v,
                path=scan.log.commit_path(v),
            )
            continue
        marker = _marker(actions)
        if marker is None:
            continue
        scan.markers[v] = marker
        unknown = sorted({a.kind for a in actions if isinstance(a, OtherAction)})
        if unknown:
            exam.add(
                "I2.commits",
                "error",
                f"{name}: txlake-written Delta commit {v} holds unknown action(s) {', '.join(unknown)}",
                "concurrent Delta writers may fail on it; report this as a txlake bug",
                table=name,
                version=v,
                path=scan.log.commit_path(v),
            )


def check_txlake_commits(exam: Examination, facts: LogFacts, scans: list[TableScan]) -> None:
    """I3: each txlake Delta commit belongs to a committed global version, or its abort was compensated."""
    for scan in scans:
        name = scan.entry.name
        for v, marker in sorted(scan.markers.items()):
            if marker.get("compensates"):
                continue
            txid, g = str(marker.get("txn")), marker.get("globalVersion")
            if isinstance(g, int) and g < facts.start:
                continue  # its global version was cleaned up by vacuum (decided long ago)
            record = facts.records.get(g) if isinstance(g, int) else None
            if record is None and isinstance(g, int) and g in facts.claimed:
                continue  # the record is unreadable: reported by log.readable
            if record is None or record.txid != txid:
                exam.add(
                    "I3.txlake_commits",
                    "error",
                    f"{name}: Delta commit {v} names global version {g} of transaction {txid}, which the lakehouse "
                    "log does not hold",
                    "the commit was copied in, or the log lost a record; restore the log from a backup",
                    table=name,
                    version=v,
                )
                continue
            outcome = facts.outcomes.get(record.version)
            if outcome is None:
                continue  # undecided: reported by log.decided
            if outcome.committed and outcome.table_versions.get(scan.entry.id) != v:
                exam.add(
                    "I3.txlake_commits",
                    "error",
                    f"{name}: Delta commit {v} of committed global version {record.version} is not the one its "
                    f"outcome published ({outcome.table_versions.get(scan.entry.id)})",
                    "a duplicate publication: plain readers see the change twice; restore the table from a backup",
                    table=name,
                    version=v,
                )
            elif not outcome.committed and scan.compensation_after(v, txid) is None:
                exam.add(
                    "I3.txlake_commits",
                    "error",
                    f"{name}: Delta commit {v} is a commit of aborted global version {record.version} (transaction "
                    f"{txid}) and no compensating commit follows it",
                    "plain Delta readers see the aborted transaction's data: commit its inverse (remove the files it "
                    "added, re-add those it removed) or restore the table from a backup",
                    table=name,
                    version=v,
                )


def check_unadopted(exam: Examination, facts: LogFacts, scans: list[TableScan]) -> None:
    """Say whose the Delta commits after each table's mapped version are: plain writers', an undecided
    transaction's (a crashed client: rolled forward later) or an aborted one's (with its compensation)."""
    for scan in scans:
        if scan.mapped is None:
            continue
        name, mapped = scan.entry.name, scan.mapped
        plain: list[int] = []
        by_global: dict[int, list[int]] = {}
        for v in sorted(c for c in scan.listing.commits if c > mapped and c not in scan.unreadable):
            marker = scan.markers.get(v)
            if marker is None:
                plain.append(v)
                continue
            g = marker.get("globalVersion")
            record = facts.records.get(g) if isinstance(g, int) else None
            if marker.get("compensates") or record is None or record.txid != str(marker.get("txn")):
                continue  # a compensation is named with the commit it undoes; a stray marker is I3's
            by_global.setdefault(record.version, []).append(v)
        if plain:
            exam.add(
                "tables.mapped_version",
                "info",
                f"{name}: {len(plain)} Delta commit(s) after version {mapped} ({ranges(plain)}) by plain Delta "
                "writers are not adopted yet (lakehouse readers do not see them)",
                "the next txlake write to the table, or Lakehouse.sync(), adopts them",
                table=name,
                version=plain[0],
            )
        for g, versions in sorted(by_global.items()):
            _explain_txlake_commits(exam, facts, scan, g, versions)


def _explain_txlake_commits(exam: Examination, facts: LogFacts, scan: TableScan, g: int, versions: list[int]) -> None:
    name, txid = scan.entry.name, facts.records[g].txid
    outcome = facts.outcomes.get(g)
    if outcome is None:
        exam.add(
            "tables.mapped_version",
            "info",
            f"{name}: {_commits(versions)} published by the undecided transaction {txid} at global version {g} "
            "(lakehouse readers see nothing of it until it is decided)",
            "the next writer after its lease (or `txlake doctor --repair`) rolls it forward",
            table=name,
            version=versions[0],
        )
    elif not outcome.committed:
        for v in versions:
            undone_by = scan.compensation_after(v, txid)
            if undone_by is None:
                continue  # an error of I3.txlake_commits: plain readers see aborted data
            exam.add(
                "tables.mapped_version",
                "info",
                f"{name}: Delta commit {v} of aborted global version {g} (transaction {txid}) is undone by "
                f"compensating commit {undone_by}; neither is adopted yet",
                "harmless (plain Delta readers see no change across both); the next txlake write to the table, "
                "or Lakehouse.sync(), adopts them",
                table=name,
                version=v,
            )
    elif facts.state.version < g:
        exam.add(
            "tables.mapped_version",
            "info",
            f"{name}: {_commits(versions)} of committed global version {g} (transaction {txid}) lie beyond the "
            "part of the lakehouse log the doctor could replay",
            "fix the log problems above; the commits themselves are fine",
            table=name,
            version=versions[0],
        )


def _commits(versions: list[int]) -> str:
    """``Delta commit 3`` or ``Delta commits 3-4``."""
    return f"Delta commit{'s' if len(versions) > 1 else ''} {ranges(versions)}"


def check_published(exam: Examination, facts: LogFacts, scans: list[TableScan]) -> None:
    """I4: each committed outcome's published Delta versions exist and hold that transaction's commit."""
    by_path = {scan.entry.path: scan for scan in scans}
    listings: dict[str, LogListing] = {path: scan.listing for path, scan in by_path.items()}
    for v, outcome in sorted(facts.outcomes.items()):
        record = facts.records.get(v)
        if record is None or not outcome.committed:
            continue
        for table_id, delta_version in sorted(outcome.table_versions.items()):
            change = record.table(table_id)
            if change is None:
                exam.add(
                    "I4.published",
                    "error",
                    f"the outcome of global version {v} publishes table {table_id}, which its record does not name",
                    "restore the outcome from a backup",
                    version=v,
                )
                continue
            if delta_version < 0:
                continue
            if change.path not in listings:
                listings[change.path] = DeltaLog(exam.store, change.path).list()
            listing = listings[change.path]
            entry = facts.state.tables.get(table_id)
            if entry is None and not listing.commits and not listing.checkpoints:
                continue  # a dropped table whose files are gone
            name = entry.name if entry is not None else change.path
            covered = any(c >= delta_version and ref.complete for c, ref in listing.checkpoints.items())
            if delta_version not in listing.commits and not covered:
                exam.add(
                    "I4.published",
                    "error",
                    f"{name}: Delta version {delta_version}, published by committed global version {v}, is missing",
                    "a committed transaction's commit was deleted outside txlake; restore it from a backup",
                    table=name,
                    version=delta_version,
                )
                continue
            scan = by_path.get(change.path)
            if not change.writes or scan is None or delta_version not in listing.commits:
                continue
            marker = scan.markers.get(delta_version)
            if marker is None or marker.get("txn") != record.txid:
                exam.add(
                    "I4.published",
                    "error",
                    f"{name}: Delta version {delta_version} does not hold the commit of global version {v} "
                    f"(transaction {record.txid}) that its outcome published",
                    "the commit was replaced outside txlake; restore it from a backup",
                    table=name,
                    version=delta_version,
                )


def check_files(exam: Examination, scans: list[TableScan]) -> int:
    """Every data file of each mapped snapshot exists with its logged size (one HEAD each), every deletion vector
    reads; returns the number of data files."""
    jobs = [(scan, add) for scan in scans if scan.snapshot is not None for add in scan.snapshot.files.values()]

    def head(job: tuple[TableScan, Add]) -> tuple[str, Add, int | None]:
        scan, add = job
        store, key = resolve_file(exam.store, scan.entry.path, add.path)
        try:
            return scan.entry.name, add, store.head(key).size
        except ObjectNotFoundError:
            return scan.entry.name, add, None

    for name, add, size in exam.map("checking data files", head, jobs):
        if size is None:
            exam.add(
                "files.exist",
                "error",
                f"{name}: data file {add.path} is missing",
                "it was deleted outside txlake (a plain VACUUM with a short retention?); restore it from a backup -- "
                "reading the table fails until then",
                table=name,
                path=add.path,
            )
        elif size != add.size:
            exam.add(
                "files.exist",
                "error",
                f"{name}: data file {add.path} has {size} bytes, the Delta log says {add.size}",
                "the file was replaced outside txlake; restore the original from a backup",
                table=name,
                path=add.path,
            )
    _check_deletion_vectors(exam, scans)
    return len(jobs)


def _check_deletion_vectors(exam: Examination, scans: list[TableScan]) -> int:
    """Every on-disk deletion vector of each mapped snapshot is read (a small range GET each) and checked: it
    exists, its checksum and row count match; returns the count."""
    jobs = [
        (scan, add)
        for scan in scans
        if scan.snapshot is not None
        for add in scan.snapshot.files.values()
        if add.deletion_vector is not None and not add.deletion_vector.is_inline
    ]

    def load(job: tuple[TableScan, Add]) -> tuple[str, Add, DeltaError | None]:
        scan, add = job
        try:
            load_deletion_vector(exam.store, scan.entry.path, add, table=scan.entry.name)
        except (DataFileNotFoundError, CorruptLogError) as exc:
            return scan.entry.name, add, exc
        return scan.entry.name, add, None

    for name, add, problem in exam.map("checking deletion vectors", load, jobs):
        if isinstance(problem, DataFileNotFoundError):
            exam.add(
                "files.exist",
                "error",
                f"{name}: the deletion vector file {problem.path} of data file {add.path} is missing",
                "it was deleted outside txlake (a plain VACUUM with a short retention?); restore it from a backup -- "
                "reading the table fails until then",
                table=name,
                path=problem.path,
            )
        elif problem is not None:
            exam.add(
                "files.exist",
                "error",
                f"{name}: {problem}",
                "the deletion vector file was changed outside txlake; restore the original from a backup -- "
                "reading the table fails until then",
                table=name,
                path=add.path,
            )
    return len(jobs)
