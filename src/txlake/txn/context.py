"""What a transaction needs from its lakehouse: storage, the global log, snapshot cache, settings."""

from __future__ import annotations

import posixpath
import random
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from urllib.parse import unquote

from txlake.delta.checkpoint import write_checkpoint
from txlake.delta.log import DeltaLog
from txlake.errors import InvalidArgumentError, InvalidArgumentTypeError
from txlake.lakehouse.log import GlobalLog, LogView
from txlake.lakehouse.records import GlobalRecord, LakehouseState, Outcome, TableEntry
from txlake.lakehouse.tables import SnapshotCache
from txlake.storage import ObjectMeta, ObjectStore
from txlake.storage.threads import map_concurrently
from txlake.storage.uploads import UploadPool
from txlake.txn import group
from txlake.txn.engine import DataEngine, NoDataEngineError
from txlake.txn.intents import stale_markers
from txlake.txn.lease import Heartbeat
from txlake.txn.publish import compensate_aborted, delta_commit, publish
from txlake.txn.reservations import ReservationReader

PROBE_CONCURRENCY = 16
AWAIT_FIRST_DELAY = 0.002
AWAIT_MAX_DELAY = 0.02
"""Polling of an earlier claim's outcome: one GET per wait, backing off from 2 ms to 20 ms."""
CONTENTION_WINDOW = 1.0
"""Seconds after a lost claim race during which this client commits in groups (posts and collects intents)."""
ROUND_TRIP = 0.002
"""First estimate of one small request's round trip (then a moving average of what this client measures)."""
DELTA_CHECKPOINT_INTERVAL = 100
"""Default ``delta.checkpointInterval`` (delta-rs's default; Spark's is 10). A checkpoint rewrites every
live file of the table, so a small interval makes frequent small commits pay for it (measured: 10 costs
about 3x the commit time of a table without checkpoints). Tables may set the property themselves."""


@dataclass
class LakeContext:
    """Shared, thread-safe services of one connected lakehouse."""

    store: ObjectStore
    glog: GlobalLog
    snapshots: SnapshotCache
    lease_seconds: float = 30.0
    commit_timeout: float = 120.0
    checkpoint_interval: int = 100
    helped: list[int] = field(default_factory=list)
    engine: DataEngine | None = None
    """Optional data engine for DataFrame reads/writes (``txlake.spark.SparkEngine``); the Arrow path needs none."""
    group_commit: bool = False
    """Whether contended commits go in groups (see :mod:`txlake.txn.group`)."""
    lost_race_until: float = 0.0
    """``time.monotonic()`` until which this client counts as racing others (see :data:`CONTENTION_WINDOW`)."""
    round_trip: float = ROUND_TRIP
    """Moving average of small requests' round trips, in seconds (paces group commit)."""
    reserve_after: int = 0
    """Redos of one table in one commit after which the transaction reserves its files; 0 (the default):
    reservations off, neither posted nor waited for (``connect(reservations=True)``; see
    :mod:`txlake.txn.reservations`)."""
    reservations: ReservationReader = field(default_factory=ReservationReader, repr=False)
    reservations_due: float = 0.0
    """``time.monotonic()`` from which this client looks at the reservations again even when not racing."""
    reservations_seen_until: float = 0.0
    """``time.monotonic()`` until which this client looks before every claim: it saw others' reservations."""
    uploads: UploadPool = field(default_factory=UploadPool, repr=False)
    """The threads that upload transactions' data files in the background (:mod:`txlake.storage.uploads`)."""
    _heartbeat: Heartbeat | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        # every committed version this client walks past: its Delta commits are known from its record, so the
        # snapshots after it (a new transaction's, a redo's) need no GET of them
        self.glog.on_committed = self.remember_commits

    @property
    def heartbeat(self) -> Heartbeat:
        """Renews the leases of this client's live transactions (:mod:`txlake.txn.lease`); made on first use."""
        if self._heartbeat is None:
            self._heartbeat = Heartbeat(self.store, self.lease_seconds)
        return self._heartbeat

    def note_contention(self) -> None:
        """A claim race was lost (or a conflict redone): re-read the tail before committing, commit in groups,
        and respect reservations, for a while."""
        self.lost_race_until = max(self.lost_race_until, time.monotonic() + CONTENTION_WINDOW)

    @property
    def racing(self) -> bool:
        """Whether this client lost a claim race within the last :data:`CONTENTION_WINDOW` seconds."""
        return time.monotonic() < self.lost_race_until

    @property
    def contended(self) -> bool:
        """Whether commits go in groups now: group commit is on and this client is racing others."""
        return self.group_commit and self.racing

    def observe_round_trip(self, seconds: float) -> None:
        self.round_trip = 0.8 * self.round_trip + 0.2 * min(seconds, 0.5)

    def require_engine(self) -> DataEngine:
        if self.engine is None:
            raise NoDataEngineError("this needs a Spark session: connect with txlake.connect(uri, spark=spark)")
        return self.engine

    def latest_state(self) -> LakehouseState:
        """The newest decided lakehouse state (what a new transaction or snapshot reads)."""
        return self.glog.tail().state

    def await_decided(self, version: int, *, first_delay: float = AWAIT_FIRST_DELAY) -> Outcome:
        """The outcome of a claimed version: waited for, or after its lease decided by us (roll-forward)."""
        record = self.glog.read_record(version)
        delay = first_delay
        while (outcome := self.glog.read_outcome(version)) is None:
            if time.time() * 1000 >= record.lease_until_ms:
                result = publish(self.store, self.glog, record, self.await_decided)
                self.helped.append(version)
                return result.outcome
            time.sleep(delay * random.uniform(0.5, 1.0))
            delay = min(delay * 1.5, AWAIT_MAX_DELAY)
        return outcome

    def remember_commits(self, record: GlobalRecord, outcome: Outcome) -> None:
        """A committed version's Delta commits are its record's changes: cache them (no GET to read them).

        Called for our own versions and, through ``glog.on_committed``, for every committed version the log
        walks past."""
        if outcome.committed:
            self.snapshots.remember(
                {
                    (change.table_id, change.path, outcome.table_versions[change.table_id]): delta_commit(
                        record, change
                    )
                    for change in record.tables
                    if change.writes and change.table_id in outcome.table_versions
                }
            )

    def settle(self, version: int) -> None:
        """Wait for the outcome of a claimed version; after its lease, finish it ourselves (roll-forward)."""
        self.await_decided(version)

    def view(self) -> LogView:
        """The log as a committer sees it: claims whose lease has expired are rolled forward first."""
        view = self.glog.view()
        expired = view.expired(time.time() * 1000)
        for record in expired:
            self.await_decided(record.version)
        return self.glog.view() if expired else view

    def await_prefix(self, version: int) -> LakehouseState:
        """Wait until every version up to ``version`` is decided (rolling expired ones forward); its state."""
        known = self.glog.nearest_state(version)
        if known is not None and known.version == version:  # the usual case: we decided it on a decided prefix
            return known
        walked = self.glog.through(version)
        if walked is not None:  # the usual case: nothing to read beyond our version
            waits: Collection[int] = walked.undecided
        else:
            waits = range(self.glog.tail().state.version + 1, version + 1)
        for v in waits:  # in order: each wait polls one outcome
            self.await_decided(v)
        return self.glog.state_at(version)

    def probe_delta_latest(self, entry: TableEntry, mapped: int) -> int:
        """The table's newest Delta version, normally ``mapped`` (one HEAD); plain writers may be ahead.

        Commits of aborted versions that a crash left without their compensation are compensated first,
        so nothing of an aborted transaction is ever adopted into the lakehouse.
        """
        log = DeltaLog(self.store, entry.path, name=entry.name)
        if not self.store.exists(log.commit_path(mapped + 1)):
            return mapped
        latest = log.list(from_version=mapped + 1).latest_commit
        if latest is None:
            return mapped
        versions = list(range(mapped + 1, latest + 1))
        commits = dict(zip(versions, self.snapshots.commits(entry, versions), strict=True))
        if compensate_aborted(self.glog, log, commits):
            latest = log.list(from_version=mapped + 1).latest_commit or latest
        return latest

    def probe_all(self, tables: list[tuple[TableEntry, int]]) -> list[int]:
        """:meth:`probe_delta_latest` of several tables, concurrently."""
        return map_concurrently(lambda t: self.probe_delta_latest(*t), tables, max_workers=PROBE_CONCURRENCY)

    def dead_intents(self, listed: list[ObjectMeta], *, at_ms: int) -> list[ObjectMeta]:
        """Of listed intent markers, those whose holders are dead (for vacuum; one lease read per holder)."""
        return stale_markers(self.store, listed, at_ms=at_ms)

    def relative_location(self, location: str) -> str:
        """``location`` (a path below the root, or a URI inside it) as a normalized path below the root;
        :class:`InvalidArgumentError` if it lies outside the lakehouse root."""
        if not isinstance(location, str):
            raise InvalidArgumentTypeError(
                f"location must be a path or URI string, got {type(location).__name__} {location!r}",
                argument="location",
            )
        if not location.strip():
            raise InvalidArgumentError(f"location must be a path or URI, got {location!r}", argument="location")
        text = location.strip()
        if "://" in text or text.startswith("/"):
            roots = {self.store.uri.rstrip("/"), self.store.public_url().rstrip("/")}
            local = self.store.local_path()
            if local is not None:
                roots.add(local.rstrip("/"))
            inside = next((text[len(r) + 1 :] for r in roots if text.startswith(r + "/")), None)
            if inside is None:
                raise InvalidArgumentError(
                    f"{location} is outside the lakehouse root {self.store.uri}: register only tables inside it "
                    "(open the lakehouse at a directory that holds the table: it adds only _txlake/ there)",
                    argument="location",
                )
            text = unquote(inside) if "%" in inside and "://" in location else inside
        path = posixpath.normpath(text.strip("/"))
        if path in (".", "") or path.startswith("..") or path.split("/")[0] == "_txlake":
            raise InvalidArgumentError(f"{location} is not a table location inside the lakehouse", argument="location")
        return path

    def table_path(self, namespace: str, short: str, table_id: str, *, taken: list[str]) -> str:
        """``<namespace>/<table>`` unless that location holds anything (one LIST), then suffixed.

        Not only a Delta log: vacuum keeps a dropped table's data files that a clone still references (and
        deletes its log), and a new table there would own them -- a plain VACUUM of it deletes what its log
        does not reference, the clone's data."""
        path = namespace + "/" + short  # one directory per namespace, dots kept: never inside another table
        if path in taken or any(self.store.list_dir(path)):
            path = f"{path}-{table_id[:8]}"
        return path

    def after_commit(self, version: int, tables: Collection[str], *, global_checkpoint: bool = True) -> None:
        """Maintenance after a committed version: the global checkpoint (its claimer), and the Delta checkpoints
        due on ``tables``, the ids of the tables this client's transaction wrote in it.

        Each transaction of a group version checkpoints its own tables: its client has their snapshots, so
        knowing whether one is due costs no request. A claimer that did this for its members' tables too had to
        load tables it had never read (a ``_last_checkpoint``, a LIST, a checkpoint and the commits since) after
        every commit: 7.6 of 32 requests per commit with 16 writers on disjoint tables. A table written by
        several transactions of the version is checkpointed by each of them: the same checkpoint, written again.
        """
        state = self.glog.state_at(version)
        if global_checkpoint and self.checkpoint_interval and version % self.checkpoint_interval == 0:
            self.glog.write_checkpoint(state)
            group.clean(self.store, version)
        outcome = self.glog.read_outcome(version)
        record = self.glog.read_record(version)
        if outcome is None:
            return
        for change in record.tables:
            delta_version = outcome.table_versions.get(change.table_id)
            entry = state.tables.get(change.table_id)
            if change.table_id not in tables or not change.writes or entry is None or not delta_version:
                continue
            # the table's own Delta configuration (a registered table's, or one a plain writer altered) decides
            snapshot = self.snapshots.get(entry, delta_version)
            configured = snapshot.metadata.configuration.get("delta.checkpointInterval")
            interval = _checkpoint_interval(configured or entry.properties.get("delta.checkpointInterval"))
            if interval > 0 and delta_version % interval == 0:
                write_checkpoint(DeltaLog(self.store, entry.path, name=entry.name), snapshot)


def _checkpoint_interval(value: str | None) -> int:
    """The table's ``delta.checkpointInterval`` (the default when absent or not a number)."""
    try:
        return int(value) if value is not None else DELTA_CHECKPOINT_INTERVAL
    except ValueError:
        return DELTA_CHECKPOINT_INTERVAL
