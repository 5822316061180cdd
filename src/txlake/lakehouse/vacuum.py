"""Vacuum: delete the data files that no retained lakehouse version, tag, clone or live transaction needs.

What is kept (docs/protocol.md, "Vacuum"):

* every file of every table at every lakehouse version decided since ``now - retention`` (the *horizon* is the
  version that was current then), of every tagged version, and of every claim still in flight;
* every file a table's Delta log adds after the version the horizon maps it to (plain writers' commits too);
* every file any table references by absolute URI (clones), wherever its log lives;
* every file younger than ``retention``, and every file no log references that is younger than
  :data:`~txlake.lakehouse.ages.ORPHAN_GUARD` (26 h): it may belong to a transaction still running.

What may go: data files (``*.parquet``, outside ``_``/``.`` directories) under a table's own location that
none of the above keeps; tables dropped before the horizon, log included; staging objects under
``_txlake/txns/`` older than the guard; group intents of claimed versions; reservations older than an hour.
Candidates come only from listing the lakehouse root: a log naming a path elsewhere (absolute, or with
``..``) can only make vacuum *keep* a file, never delete one.

Before reading the tags, a non-dry run records its horizon under ``_txlake/vacuum/``; creating a tag of a
version below the highest recorded horizon fails (its files may be gone), so a tag either is seen by vacuum
or is refused.
"""

from __future__ import annotations

import os
import posixpath
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from txlake.delta.actions import Add, CommitInfo, now_ms
from txlake.delta.checkpoint import checkpoint_sidecars
from txlake.delta.files import decode_path
from txlake.delta.log import SIDECARS, DeltaLog, LogListing
from txlake.delta.snapshot import load_snapshot
from txlake.errors import InvalidArgumentError, ObjectNotFoundError, TxlakeError, VersionNotFoundError
from txlake.lakehouse.ages import CLOCK_SKEW, ORPHAN_GUARD
from txlake.lakehouse.log import ROOT
from txlake.lakehouse.records import LakehouseState, TableEntry
from txlake.lakehouse.tags import TagStore
from txlake.storage import ObjectMeta, ObjectStore
from txlake.storage.threads import map_concurrently
from txlake.txn.reservations import RESERVATIONS_DIR

if TYPE_CHECKING:
    from txlake.txn.context import LakeContext

VACUUM_DIR = f"{ROOT}/vacuum"
TXNS_DIR = f"{ROOT}/txns/"
GROUPS_DIR = f"{ROOT}/groups/"
INTENTS_DIR = f"{ROOT}/intents/"
RESERVATION_AGE_MS = 3_600_000
"""Reservations (txn/reservations.py) hold seconds; one this old, by the store's clock, was left by a crash."""
DEFAULT_RETENTION = timedelta(days=7)
"""Delta's default ``delta.deletedFileRetentionDuration``."""
DEFAULT_LOG_RETENTION = timedelta(days=30)
"""Delta's default ``delta.logRetentionDuration``; also the global log's."""
MAX_WINDOW_RECORDS = 50_000
"""Most records vacuum reads to prove a table directory was dropped before the horizon."""
_JOINS = ("create_table", "register_table")
GUARD_SLACK_MS = 60_000
"""Commits this much older than the guard are read too (a commit is written after its files)."""
INTENT_GRACE_MS = 60_000
"""Group intents of claimed versions are deleted once this old (a claimer may be reading them)."""

_TXID_FILE = re.compile(r"^part-([0-9a-f]{32})-")
_INTERVAL_PART = re.compile(r"(\d+)\s*([a-z]+?)s?\b")
_UNITS = {
    "nanosecond": 1e-9,
    "microsecond": 1e-6,
    "millisecond": 1e-3,
    "second": 1,
    "minute": 60,
    "hour": 3600,
    "day": 86400,
    "week": 604800,
}

SIDECAR_GUARD_MS = 24 * 3600 * 1000
"""Sidecar files younger than this stay even if no checkpoint names them yet (PROTOCOL.md, "Metadata Cleanup")."""

DELETE_BATCH = 1000
T = TypeVar("T")

Progress = Callable[[int, int], None]
"""``progress(done, total)``: called as files are deleted."""


@dataclass(frozen=True, slots=True)
class VacuumFile:
    """One object vacuum deleted (or, in a dry run, would delete)."""

    path: str
    """Relative to the lakehouse root."""
    size: int
    reason: str


@dataclass(frozen=True, slots=True)
class VacuumReport:
    """What a vacuum run deleted (or would delete: ``dry_run``) and what it kept, and why."""

    dry_run: bool
    retention: timedelta
    horizon: int
    """The oldest lakehouse version whose files are all kept (the one current ``retention`` ago)."""
    latest: int
    deleted: tuple[VacuumFile, ...]
    kept: Mapping[str, int] = field(default_factory=dict)
    """Data files kept, by reason."""
    kept_bytes: int = 0
    tables_removed: tuple[str, ...] = ()
    """Locations of tables dropped before the horizon, removed whole."""
    tags: tuple[str, ...] = ()
    """Tags whose versions were kept."""
    log_start: int = 0
    """The oldest lakehouse version left in the log (0 unless a clean-up removed older ones)."""
    log_entries_deleted: int = 0
    """Global log entries and Delta commits/checkpoints cleaned up (or, in a dry run, to clean up)."""

    @property
    def files_deleted(self) -> int:
        return len(self.deleted)

    @property
    def bytes_deleted(self) -> int:
        return sum(f.size for f in self.deleted)

    def to_json(self) -> dict[str, Any]:
        reasons = Counter(f.reason for f in self.deleted)
        return {
            "dry_run": self.dry_run,
            "retention_seconds": self.retention.total_seconds(),
            "horizon": self.horizon,
            "latest": self.latest,
            "files_deleted": self.files_deleted,
            "bytes_deleted": self.bytes_deleted,
            "deleted_by_reason": dict(sorted(reasons.items())),
            "files_kept": sum(self.kept.values()),
            "bytes_kept": self.kept_bytes,
            "kept_by_reason": dict(sorted(self.kept.items())),
            "tables_removed": list(self.tables_removed),
            "tags": list(self.tags),
            "log_start": self.log_start,
            "log_entries_deleted": self.log_entries_deleted,
            "deleted": [{"path": f.path, "size": f.size, "reason": f.reason} for f in self.deleted],
        }


def parse_interval(value: str) -> timedelta | None:
    """A Delta interval property value as Spark reads it (``interval 7 days``, ``30 days``,
    ``interval 4 weeks 2 days``); ``None`` if it is not one."""
    text = value.strip().lower()
    text = text[len("interval") :].strip() if text.startswith("interval") else text
    parts = _INTERVAL_PART.findall(text)
    if not parts or _INTERVAL_PART.sub("", text).strip():
        return None
    seconds = 0.0
    for amount, unit in parts:
        if unit not in _UNITS:
            return None
        seconds += int(amount) * _UNITS[unit]
    return timedelta(seconds=seconds)


def highest_horizon(store: ObjectStore) -> int:
    """The highest horizon any vacuum run recorded (-1: never vacuumed)."""
    return max((_marker_horizon(m.path) for m in store.list(VACUUM_DIR)), default=-1)


def _marker_horizon(path: str) -> int:
    head = path.rsplit("/", 1)[-1].split("-", 1)[0]
    return int(head) if head.isdigit() else -1


def _in_root(key: str) -> str | None:
    """``key`` normalized, or ``None`` if it leaves the root (``..``) or is absolute."""
    if not key or key.startswith("/"):
        return None
    norm = posixpath.normpath(key)
    if norm == "." or norm == ".." or norm.startswith("../"):
        return None
    return norm


_S3_SCHEMES = ("s3", "s3a", "s3n")


def _file_key(store: ObjectStore, table_path: str, add_path: str) -> str | None:
    """The root-relative key of a file a log names; ``None`` if it lies outside this lakehouse.

    Absolute paths are matched in every spelling readers accept: any case of the scheme, ``file:/p``,
    ``file:///p``, ``file://localhost/p``, a bare ``/p``, symbolic links and ``//`` in local paths (resolved),
    ``s3a://`` and ``s3n://`` for ``s3://``.
    """
    full = decode_path(add_path)
    scheme, sep, rest = full.partition(":")
    local = store.local_path()
    if (sep and scheme.lower() == "file") or (not sep and full.startswith("/")):
        if local is None:
            return None
        path = rest if sep else full
        if path.startswith("//"):
            host, _, tail = path[2:].partition("/")
            if host not in ("", "localhost"):
                return None
            path = "/" + tail
        return _local_key(local, path)
    if sep and scheme.lower() in _S3_SCHEMES:
        full = "s3:" + rest  # s3a://, S3:// ... name the same object as s3://
    if sep and rest.startswith("//"):
        for root in {store.uri, store.public_url(), store.url()}:
            root = root.rstrip("/")
            if full.startswith(root + "/"):
                return _in_root(full[len(root) + 1 :])
        return None
    return _in_root(f"{table_path}/{full}" if table_path else full)


def _local_key(root: str, path: str) -> str | None:
    """``path`` relative to the local ``root``, after resolving symbolic links and redundant separators."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if real.startswith(real_root.rstrip("/") + "/"):
        return _in_root(real[len(real_root.rstrip("/")) + 1 :])
    return None


def _hidden(relative: str) -> bool:
    """Whether a path below a table is Delta's own (``_delta_log``, ``_change_data``) or hidden (``.``)."""
    return any(part.startswith(("_", ".")) for part in relative.split("/"))


class _Vacuum:
    def __init__(
        self,
        ctx: LakeContext,
        retention: timedelta,
        *,
        dry_run: bool,
        force: bool,
        progress: Progress | None,
        log_retention: timedelta | None = None,
    ) -> None:
        self.ctx = ctx
        self.log_retention = log_retention
        self.store = ctx.store
        self.retention = retention
        self.dry_run = dry_run
        self.force = force
        self.progress = progress
        self.started_ms = now_ms()
        self.cutoff_ms = self.started_ms - int(retention.total_seconds() * 1000)
        self.guard_ms = self.started_ms - int(max(retention, ORPHAN_GUARD).total_seconds() * 1000)
        self.keep: set[str] = set()
        self.tracked: set[str] = set()  # files some log adds (their transaction is decided, or in flight)
        self.unsure: set[str] = set()  # table locations whose logs could not be read: nothing deleted there
        self.kept: Counter[str] = Counter()
        self.kept_bytes = 0
        self.needed_global = 1 << 62  # the oldest global record a Delta commit beyond its table's mapped version names
        self.aborted_txids: set[str] = set()  # tombstoned by recover: will never commit
        self.leased_txids: set[str] = set()  # hold a lease object: recover, not vacuum, decides them

    # ------------------------------------------------------------------------------------------ main

    def run(self) -> VacuumReport:
        # 1. List first: a file listed now that a commit references later is either that young, or its
        #    transaction is too old to commit (txlake.lakehouse.ages).
        objects = self.store.list("")
        self._read_sublogs(objects)
        # 2. The log, after the listing.
        view = self.ctx.glog.view()  # read only: claims in flight are kept from their records
        latest = view.decided
        horizon = self._horizon(latest.version)
        horizon_state = self.ctx.glog.state_at(horizon)
        # 3. Record the horizon before reading the tags (a tag created from now on below it is refused).
        if not self.dry_run:
            self._record_horizon(horizon)
        tags = TagStore(self.store).list()
        tag_states = [self.ctx.glog.state_at(t.version) for t in tags]
        claimed = view.claimed_state()
        self._check_retention([horizon_state, latest, claimed, *tag_states])

        # Tables of retained versions: from the Delta version the horizon maps them to (0 if created since).
        start: dict[str, int] = {}
        entries: dict[str, TableEntry] = {}
        for state in (claimed, latest, horizon_state):
            for tid, entry in state.tables.items():
                entries[tid] = entry
                start[tid] = horizon_state.table_versions.get(tid, 0) if tid in horizon_state.tables else 0
        pinned: dict[str, set[int]] = {}
        for state in tag_states:
            for tid, entry in state.tables.items():
                entries.setdefault(tid, entry)
                if tid in state.table_versions:
                    pinned.setdefault(tid, set()).add(state.table_versions[tid])
        for p in view.pending:  # claims in flight: their actions are in their records
            for change in p.record.tables:
                for action in change.actions:
                    if isinstance(action, Add):
                        self._keep(change.path, action.path)

        retained_paths = {e.path.strip("/") for e in entries.values()}
        by_location = self._group(objects)
        for tid, entry in entries.items():
            self._scan_retained(entry, start.get(tid), pinned.get(tid, set()), latest.table_versions.get(tid, -1))
        dropped: list[str] = []
        retained_ids = _Lazy(lambda: self._retained_ids(set(entries), horizon, latest.version))
        for location, metas in by_location.items():
            if location in retained_paths or not location:
                continue
            has_log = any(m.path.startswith(f"{location}/_delta_log/") for m in metas)
            if has_log and self._scan_unknown(location, metas, retained_ids):
                dropped.append(location)

        deletions = self._choose(objects, by_location, retained_paths, set(dropped), view.latest)
        if not self.dry_run:
            self._delete(deletions, {m.path: m for m in objects})
            self._remove_empty_dirs(deletions, dropped)
        floor = min([horizon, self.needed_global, *(t.version for t in tags)])
        log_start, log_entries = self._clean_logs(objects, floor, latest)
        return VacuumReport(
            dry_run=self.dry_run,
            retention=self.retention,
            horizon=horizon,
            latest=latest.version,
            deleted=tuple(deletions),
            kept=dict(self.kept),
            kept_bytes=self.kept_bytes,
            tables_removed=tuple(sorted(dropped)),
            tags=tuple(t.name for t in tags),
            log_start=log_start,
            log_entries_deleted=log_entries,
        )

    def _record_horizon(self, horizon: int) -> None:
        """Write this run's horizon marker; then drop lower ones (the highest is all that counts)."""
        marker = f"{VACUUM_DIR}/{horizon:020d}-{uuid.uuid4().hex}.json"
        self.store.put(marker, f'{{"horizon": {horizon}, "started": {self.started_ms}}}'.encode())
        lower = [m.path for m in self.store.list(VACUUM_DIR) if _marker_horizon(m.path) < horizon]
        if lower:
            self.store.delete_many(lower)

    def _horizon(self, latest: int) -> int:
        try:
            return min(self.ctx.glog.version_at_time(self.cutoff_ms), latest)
        except VersionNotFoundError:
            return 0

    def _check_retention(self, states: Iterable[LakehouseState]) -> None:
        if self.force:
            return
        for state in states:
            for entry in state.tables.values():
                config = self._configuration(entry, state)
                logs = config.get("delta.logRetentionDuration")
                needed_log = ((parse_interval(logs) or timedelta.max) if logs else None) or DEFAULT_LOG_RETENTION
                if self.log_retention is not None and self.log_retention < needed_log:
                    raise InvalidArgumentError(
                        f"a log retention of {_human(self.log_retention)} is below {entry.name}'s "
                        f"delta.logRetentionDuration ({_human(needed_log)}): time travel to older versions would "
                        "end there; force it (force=True, txlake vacuum --force)",
                        argument="log_retention",
                    )
                value = config.get("delta.deletedFileRetentionDuration")
                needed = parse_interval(value) if value else DEFAULT_RETENTION
                if needed is None:
                    raise InvalidArgumentError(
                        f"{entry.name}'s delta.deletedFileRetentionDuration {value!r} is not an interval txlake can "
                        "read: force it (force=True, txlake vacuum --force) to vacuum with the retention given",
                        argument="retention",
                    )
                if self.retention < needed:
                    raise InvalidArgumentError(
                        f"a retention of {_human(self.retention)} is below {entry.name}'s "
                        f"delta.deletedFileRetentionDuration ({_human(needed)}): readers of older versions and "
                        "long transactions may lose files; force it (force=True, txlake vacuum --force)",
                        argument="retention",
                    )

    def _configuration(self, entry: TableEntry, state: LakehouseState) -> Mapping[str, str]:
        """The table's Delta configuration at ``state`` (where its retention properties live), over its catalog
        properties."""
        version = state.table_versions.get(entry.id)
        if version is None:
            return entry.properties
        try:
            delta = self.ctx.snapshots.get(entry, version).metadata.configuration
        except TxlakeError:
            return entry.properties
        return {**entry.properties, **{k: v for k, v in delta.items() if v is not None}}

    # ------------------------------------------------------------------------------------------ scan

    def _group(self, objects: list[ObjectMeta]) -> dict[str, list[ObjectMeta]]:
        """Objects by the table location holding them (the longest location with a log, or a catalog path)."""
        locations = {m.path.split("/_delta_log/", 1)[0] for m in objects if "/_delta_log/" in m.path}
        locations.discard("")
        grouped: dict[str, list[ObjectMeta]] = {}
        for meta in objects:
            if meta.path.startswith(ROOT + "/"):
                continue
            owner = _owner(meta.path, locations)
            if owner is not None:
                grouped.setdefault(owner, []).append(meta)
        return grouped

    def _read(self, log: DeltaLog, versions: Iterable[int]) -> list[tuple[int, list[Any]]]:
        wanted = sorted(set(versions))
        return list(zip(wanted, log.read_commits(wanted), strict=True))

    def _scan_retained(self, entry: TableEntry, first: int | None, pinned: set[int], mapped: int) -> None:
        """Keep what the table's retained versions reference; note what its recent commits added.

        A log that cannot be read raises (typed): it may reference files of other tables (a clone), so
        nothing is deleted anywhere.
        """
        path = entry.path.strip("/")
        log = DeltaLog(self.store, path, name=entry.name)
        listing = log.list()
        latest = listing.latest_version
        if latest is None:
            return  # not published yet: a claim in flight holds its files
        first = min(first if first is not None else 0, latest)
        for version in sorted({first, *(v for v in pinned if v <= latest)}):
            try:
                snap = load_snapshot(log, version)
            except VersionNotFoundError:
                complete = [v for v, c in listing.checkpoints.items() if c.complete]
                if version != first or not complete:
                    continue  # a tagged version whose log was cleaned up: unreadable already
                first = min(complete)  # the log starts later (cleaned up by its writer): keep from there
                snap = load_snapshot(log, first)
            for add in snap.files.values():
                self._keep(path, add.path)
        recent = [v for v, m in listing.commits.items() if _ms(m) >= self.guard_ms - GUARD_SLACK_MS]
        after = [v for v in listing.commits if v > first]
        for version, actions in self._read(log, [*after, *recent]):
            for action in actions:
                if isinstance(action, CommitInfo) and version > mapped:
                    g = (action.values.get("txlake") or {}).get("globalVersion")
                    if isinstance(g, int):  # its record is needed (to compensate it, or to publish it)
                        self.needed_global = min(self.needed_global, g)
                if isinstance(action, Add):
                    key = _file_key(self.store, path, action.path)
                    if key is not None:
                        self.tracked.add(key)
                        if version > first:
                            self.keep.add(key)

    def _retained_ids(self, known: set[str], horizon: int, latest: int) -> set[str] | None:
        """``known`` plus the ids of the tables created or registered at versions after the horizon (read from
        their records): every table some retained version holds. ``None`` if the window holds more than
        :data:`MAX_WINDOW_RECORDS` versions (then no table directory is removed whole). Computed only when an
        old directory txlake wrote needs it."""
        versions = list(range(horizon + 1, latest + 1))
        if len(versions) > MAX_WINDOW_RECORDS:
            return None
        ids = set(known)
        for record in map_concurrently(self.ctx.glog.read_record, versions, max_workers=16):
            ids.update(op.table_id for op in record.catalog if op.table_id and op.op in _JOINS)
        return ids

    def _scan_unknown(self, location: str, metas: list[ObjectMeta], retained_ids: _Lazy[set[str] | None]) -> bool:
        """A table directory no retained state names. Recent: keep all its log references (it may have been
        created and dropped since the horizon). Old: removed whole (``True``) only if it provably was a
        lakehouse table (txlake wrote to it) that no retained version holds (its Delta id is not one of
        ``retained_ids``); a never-registered Delta table is never removed. A log that cannot be read leaves
        the directory alone."""
        log = DeltaLog(self.store, location)
        recent = any(_ms(m) >= self.cutoff_ms - CLOCK_SKEW.total_seconds() * 1000 for m in metas)
        try:
            listing = log.list()
            if not recent and not self._dropped_lakehouse_table(log, listing, retained_ids):
                recent = True  # not provably dropped before the horizon: keep what its log references
            if recent:
                versions = list(listing.commits)
                best = listing.best_checkpoint(max(listing.checkpoints)) if listing.checkpoints else None
                if best is not None:
                    for add in load_snapshot(log, best.version).files.values():
                        self._keep(location, add.path)
            else:
                versions = [v for v, m in listing.commits.items() if _ms(m) >= self.guard_ms - GUARD_SLACK_MS]
            for _, actions in self._read(log, versions):
                for action in actions:
                    if isinstance(action, Add):
                        key = _file_key(self.store, location, action.path)
                        if key is not None:
                            self.tracked.add(key)
                            if recent:
                                self.keep.add(key)
        except TxlakeError:
            self.unsure.add(location)
            return False
        return not recent

    def _dropped_lakehouse_table(self, log: DeltaLog, listing: Any, retained_ids: _Lazy[set[str] | None]) -> bool:
        """Whether txlake wrote this table (its newest commit says so) and no retained version holds it."""
        if not listing.commits:
            return False
        if not any(isinstance(a, CommitInfo) and a.txlake is not None for a in log.read_commit(max(listing.commits))):
            return False  # never a lakehouse table's directory to remove
        ids = retained_ids.get()
        return ids is not None and load_snapshot(log).metadata.id not in ids

    def _keep(self, table_path: str, add_path: str) -> None:
        key = _file_key(self.store, table_path, add_path)
        if key is not None:
            self.keep.add(key)

    # ---------------------------------------------------------------------------------------- choose

    def _choose(
        self,
        objects: list[ObjectMeta],
        by_location: Mapping[str, list[ObjectMeta]],
        retained: set[str],
        dropped: set[str],
        claimed_through: int,
    ) -> list[VacuumFile]:
        out: list[VacuumFile] = []
        for location, metas in sorted(by_location.items()):
            if location in self.unsure:
                continue
            whole = location in dropped
            for meta in metas:
                relative = meta.path[len(location) + 1 :]
                data = relative.endswith(".parquet") and not _hidden(relative)
                if not data:
                    if whole and self._deletable_log(meta) and meta.path not in self.keep:
                        out.append(VacuumFile(meta.path, meta.size, "dropped table"))
                    continue
                reason = self._data_reason(meta, "dropped table" if whole else "not referenced since the horizon")
                if reason is not None:
                    out.append(VacuumFile(meta.path, meta.size, reason))
        out.extend(self._orphans_outside_tables(objects, by_location))
        out.extend(self._staging(objects, claimed_through))
        return out

    def _read_sublogs(self, objects: list[ObjectMeta]) -> None:
        """Which transactions the listing shows tombstoned (``aborted.json``: recover aborted them for good) or
        holding a lease (alive, or dead and not recovered yet): no request, the names are in the listing."""
        for meta in objects:
            if not meta.path.startswith(TXNS_DIR):
                continue
            txid, _, name = meta.path[len(TXNS_DIR) :].partition("/")
            if name == "aborted.json":
                self.aborted_txids.add(txid)
            elif name.startswith("lease-"):
                self.leased_txids.add(txid)
        self.leased_txids -= self.aborted_txids

    def _data_reason(self, meta: ObjectMeta, reason: str) -> str | None:
        """Why this data file may go; ``None`` (counted as kept, by reason) if it must stay."""
        mtime = _ms(meta)
        txid = _TXID_FILE.match(meta.path.rsplit("/", 1)[-1])
        untracked = txid is not None and meta.path not in self.tracked
        why = None
        if meta.path in self.keep:
            why = "referenced by a retained version, tag, clone or claim"
        elif mtime >= self.cutoff_ms:
            why = "newer than the retention"
        elif untracked and txid is not None and txid.group(1) in self.leased_txids:
            why = "of a transaction holding a lease (alive, or for `txlake recover` to decide)"
        elif untracked and txid is not None and txid.group(1) in self.aborted_txids:
            pass  # aborted for good by recover (it took the lease over first): no 26-hour wait
        elif txid is not None and mtime >= self.guard_ms and meta.path not in self.tracked:
            why = "may belong to a running transaction"
        if why is not None:
            self.kept[why] += 1
            self.kept_bytes += meta.size
            return None
        if meta.path not in self.tracked and txid is not None:
            return f"orphan of transaction {txid.group(1)}"
        return reason

    def _deletable_log(self, meta: ObjectMeta) -> bool:
        return _ms(meta) < self.cutoff_ms

    def _orphans_outside_tables(
        self, objects: list[ObjectMeta], by_location: Mapping[str, list[ObjectMeta]]
    ) -> list[VacuumFile]:
        """txlake data files in directories that hold no table (an aborted create's files)."""
        placed = {m.path for metas in by_location.values() for m in metas}
        out = []
        for meta in objects:
            name = meta.path.rsplit("/", 1)[-1]
            if meta.path in placed or meta.path.startswith(ROOT + "/") or "/" not in meta.path:
                continue
            if not name.endswith(".parquet") or not _TXID_FILE.match(name) or _hidden(meta.path):
                continue
            reason = self._data_reason(meta, "orphan")
            if reason is not None:
                out.append(VacuumFile(meta.path, meta.size, reason))
        return out

    def _staging(self, objects: list[ObjectMeta], claimed_through: int) -> list[VacuumFile]:
        out = []
        intents = [meta for meta in objects if meta.path.startswith(INTENTS_DIR)]
        for meta in self.ctx.dead_intents(intents, at_ms=self.started_ms) if intents else ():
            out.append(VacuumFile(meta.path, meta.size, "intent marker of a dead holder"))
        for meta in objects:
            if meta.path.startswith(TXNS_DIR) and _ms(meta) < min(self.guard_ms, self.cutoff_ms):
                out.append(VacuumFile(meta.path, meta.size, "staging leftover"))
            elif meta.path.startswith(GROUPS_DIR):
                parts = meta.path[len(GROUPS_DIR) :].split("/")
                claimed = len(parts) == 2 and parts[0].isdigit() and int(parts[0]) <= claimed_through
                if claimed and _ms(meta) < self.started_ms - INTENT_GRACE_MS:
                    out.append(VacuumFile(meta.path, meta.size, "group intent of a claimed version"))
            elif meta.path.startswith(RESERVATIONS_DIR) and _ms(meta) < self.started_ms - RESERVATION_AGE_MS:
                out.append(VacuumFile(meta.path, meta.size, "reservation left by a crashed transaction"))
        return out

    # ------------------------------------------------------------------------------------- log clean-up

    def _log_cut_ms(self, properties: Mapping[str, str]) -> int:
        value = properties.get("delta.logRetentionDuration")
        own = parse_interval(value) if value else None
        retention = self.log_retention if self.log_retention is not None else (own or DEFAULT_LOG_RETENTION)
        return self.started_ms - int(max(retention, ORPHAN_GUARD).total_seconds() * 1000)

    def _clean_logs(self, objects: list[ObjectMeta], floor: int, latest: LakehouseState) -> tuple[int, int]:
        """Delete global log entries below the newest global checkpoint C that is at most ``floor`` and older than
        the log retention, and each table's Delta log entries below its newest checkpoint at or below the version
        C maps it to. Returns (where the global log starts now, entries deleted or, in a dry run, to delete)."""
        cut = self._log_cut_ms({})
        glog_dir = f"{ROOT}/log/"
        entries: dict[int, list[ObjectMeta]] = {}
        checkpoints: dict[int, ObjectMeta] = {}
        for meta in objects:
            if meta.path.startswith(glog_dir):
                name = meta.path[len(glog_dir) :]
                head = name.split(".", 1)[0]
                if head.isdigit() and "/" not in name:
                    entries.setdefault(int(head), []).append(meta)
                    if name.endswith(".checkpoint.json"):
                        checkpoints[int(head)] = meta
        candidates = [c for c, m in checkpoints.items() if c <= min(floor, latest.version) and _ms(m) < cut]
        start = 0 if 0 in entries else min(checkpoints, default=0)
        if not candidates or max(candidates) <= start:
            return start, 0
        target = max(candidates)
        doomed = {v: metas for v, metas in entries.items() if v < target}
        if any(_ms(m) >= cut for metas in doomed.values() for m in metas):
            return start, 0  # something below it is young (a clock problem): leave the log whole
        at_target = self.ctx.glog.read_checkpoint(target)
        listed = {m.path: m for m in objects}
        deleted = sum(
            self._clean_delta_log(
                entry, at_target.table_versions.get(tid), listed, self._log_cut_of(tid, at_target, latest)
            )
            for tid, entry in at_target.tables.items()
        )
        deleted += sum(len(metas) for metas in doomed.values())
        if not self.dry_run:
            # checkpoints first (the oldest remaining one is where readers start, and every record after it
            # still exists), then records and outcomes, oldest first (version 0 first: from then on the log
            # starts at `target`, the oldest checkpoint left)
            old_checkpoints = sorted(c for c in checkpoints if c < target)
            for c in old_checkpoints:
                self.store.delete(checkpoints[c].path)
            for v in sorted(doomed):
                for meta in doomed[v]:
                    if not meta.path.endswith(".checkpoint.json"):
                        self.store.delete(meta.path)
        return target, deleted

    def _log_cut_of(self, table_id: str, *states: LakehouseState) -> int:
        """The log-retention cut of a table: its own Delta configuration's ``delta.logRetentionDuration`` (a
        registered table's, or one a plain writer altered) over its catalog properties, the longest of the
        retentions it has at ``states`` (the version being cleaned and the latest)."""
        cuts = [
            self._log_cut_ms(self._configuration(state.tables[table_id], state))
            for state in states
            if table_id in state.tables
        ]
        return min(cuts, default=self._log_cut_ms({}))

    def _clean_delta_log(
        self, entry: TableEntry, version: int | None, listed: Mapping[str, ObjectMeta], cut: int
    ) -> int:
        """Delete the table's commits and checkpoints below its newest checkpoint at or below ``version``
        (``listed``: the root listing vacuum began with; anything newer is above that checkpoint), then the
        sidecar files no remaining checkpoint names (PROTOCOL.md, "Metadata Cleanup"); ``cut``: entries younger
        than this (ms) stay."""
        if version is None:
            return 0
        log = DeltaLog(self.store, entry.path.strip("/"), name=entry.name)
        listing = log.list()
        best = listing.best_checkpoint(version)
        if best is None:
            return 0
        if any(p not in listed or _ms(listed[p]) >= cut for p in best.paths):
            return 0  # a checkpoint younger than the log retention (or than this run)
        doomed: list[tuple[int, ObjectMeta]] = []
        prefix = log.log_dir + "/"
        for meta in (m for path, m in listed.items() if path.startswith(prefix)):
            name = meta.path[len(prefix) :]
            head = name.split(".", 1)[0]
            if "/" in name or not head.isdigit() or int(head) >= best.version:
                continue
            doomed.append((int(head), meta))
        if any(_ms(m) >= cut for _, m in doomed):
            return 0  # a young entry below the checkpoint (a clock problem): leave the log whole
        sidecars = self._unreferenced_sidecars(log, listing, best.version, listed, cut)
        if not self.dry_run:
            checkpoints = sorted((v, m.path) for v, m in doomed if ".checkpoint" in m.path)
            others = sorted((v, m.path) for v, m in doomed if ".checkpoint" not in m.path)
            for _, path in checkpoints + others:
                self.store.delete(path)
            for path in sidecars:  # after the checkpoints that named them
                self.store.delete(path)
        return len(doomed) + len(sidecars)

    def _unreferenced_sidecars(
        self, log: DeltaLog, listing: LogListing, start: int, listed: Mapping[str, ObjectMeta], cut: int
    ) -> list[str]:
        """Sidecar files older than the log retention (and than a day: a checkpoint being written names its
        sidecars last) that no checkpoint at or above ``start`` (those the clean-up leaves) names."""
        directory = f"{log.log_dir}/{SIDECARS}/"
        old = min(cut, self.started_ms - SIDECAR_GUARD_MS)
        candidates = [p for p, m in listed.items() if p.startswith(directory) and _ms(m) < old]
        if not candidates:
            return []
        named: set[str] = set()
        for v, ref in listing.checkpoints.items():
            if v >= start:
                named.update(checkpoint_sidecars(log, ref))
        return sorted(p for p in candidates if p not in named)

    # ---------------------------------------------------------------------------------------- delete

    def _delete(self, files: list[VacuumFile], listed: Mapping[str, ObjectMeta]) -> None:
        """Data first, then dropped tables' logs newest version first (version 0 last: until it goes, the
        location counts as taken and no new table is created there). A log object is deleted only if it is
        still the one listed (a new table at the same location writes new objects under the same names)."""
        logs = [f for f in files if "/_delta_log/" in f.path]
        data = [f.path for f in files if "/_delta_log/" not in f.path]
        total = len(files)
        done = 0
        for start in range(0, len(data), DELETE_BATCH):
            batch = data[start : start + DELETE_BATCH]
            self.store.delete_many(batch)
            done += len(batch)
            if self.progress is not None:
                self.progress(done, total)
        for f in sorted(logs, key=lambda f: _log_order(f.path), reverse=True):
            try:
                now = self.store.head(f.path)
            except ObjectNotFoundError:
                now = None
            seen = listed[f.path]
            if now is not None and (now.last_modified, now.e_tag, now.size) == (
                seen.last_modified,
                seen.e_tag,
                seen.size,
            ):
                self.store.delete(f.path)
            done += 1
            if self.progress is not None and (done % 100 == 0 or done == total):
                self.progress(done, total)

    def _remove_empty_dirs(self, files: list[VacuumFile], dropped: list[str]) -> None:
        """On local disk, the directories of dropped tables that deleting their files left empty, innermost
        first: a location with nothing in it is free for a new table (:meth:`LakeContext.table_path`)."""
        dirs: set[str] = set()
        locations = set(dropped)
        for f in files:
            location = _owner(f.path, locations)
            head = f.path
            while location is not None and "/" in head and head != location:
                head = head.rsplit("/", 1)[0]
                dirs.add(head)
        for d in sorted(dirs, key=lambda d: (-d.count("/"), d)):
            self.store.remove_empty_dir(d)


class _Lazy(Generic[T]):
    """A value computed on first use (some requests are worth making only if they are needed)."""

    def __init__(self, compute: Callable[[], T]) -> None:
        self._compute: Callable[[], T] | None = compute
        self._value: T | None = None

    def get(self) -> T:
        if self._compute is not None:
            self._value, self._compute = self._compute(), None
        return self._value  # type: ignore[return-value]


def _owner(path: str, locations: set[str]) -> str | None:
    head = path
    while "/" in head:
        head = head.rsplit("/", 1)[0]
        if head in locations:
            return head
    return None


def _log_order(path: str) -> tuple[int, str]:
    name = path.rsplit("/", 1)[-1]
    digits = name.split(".", 1)[0]
    return (int(digits) if digits.isdigit() else 1 << 62, name)


def _ms(meta: ObjectMeta) -> int:
    return int(meta.last_modified.timestamp() * 1000)


def _human(delta: timedelta) -> str:
    seconds = delta.total_seconds()
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
        if seconds >= size or unit == "second":
            amount = round(seconds / size, 2)
            return f"{amount:g} {unit}" + ("" if amount == 1 else "s")
    raise AssertionError("unreachable")


def vacuum(
    ctx: LakeContext,
    retention: timedelta = DEFAULT_RETENTION,
    *,
    dry_run: bool = False,
    force: bool = False,
    progress: Progress | None = None,
    log_retention: timedelta | None = None,
) -> VacuumReport:
    """Delete what no retained version needs (see the module docstring); the report says what and why."""
    return _Vacuum(ctx, retention, dry_run=dry_run, force=force, progress=progress, log_retention=log_retention).run()


__all__ = ["DEFAULT_RETENTION", "VacuumFile", "VacuumReport", "highest_horizon", "parse_interval", "vacuum"]
