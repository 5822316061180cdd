"""The commit protocol of a transaction: settle, validate, (redo), claim, publish, decide.

:class:`Commit` is one commit of one :class:`~txlake.txn.transaction.Transaction`: it settles the log (claims
whose lease expired are rolled forward), validates the transaction against it (:class:`Validation`, the one
place that consults the transaction's :class:`~txlake.txn.conflicts.IsolationPolicy`), redoes a table's
statements when that resolves a data conflict, claims the next global version (group commit: as one of a
group), publishes the claimed record's Delta commits and decides the version's outcome (``txn/publish.py``).
The transaction's own state (``_claimed``, ``_redone``, ``_reserved``, ...) stays on the transaction: what it
stages, and what ``abort``, ``resume`` and ``recover`` need to know of its claim. See docs/protocol.md.

Imports only downward: this module knows the transaction by its type alone.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, TypeVar

from txlake.delta.actions import Action, Remove, now_ms
from txlake.errors import (
    CatalogChangedError,
    CommitStateUnknownError,
    ConcurrentAppendError,
    ConcurrentDeleteDeleteError,
    ConcurrentDeleteReadError,
    ConcurrentTransactionError,
    ConflictError,
    CorruptLogError,
    TransactionExpiredError,
    TransientStorageError,
    TxlakeError,
    VersionNotFoundError,
)
from txlake.lakehouse.ages import MAX_TRANSACTION_AGE
from txlake.lakehouse.log import GlobalVersionTakenError, LogView
from txlake.lakehouse.records import (
    CatalogOp,
    GlobalRecord,
    Isolation,
    LakehouseState,
    Outcome,
    ReadSet,
    RegisterTable,
    TableChange,
)
from txlake.lakehouse.tags import TagStore
from txlake.lakehouse.vacuum import highest_horizon
from txlake.storage.threads import map_concurrently
from txlake.txn import group, reservations
from txlake.txn.conflicts import ChangeSummary, PendingChange, check
from txlake.txn.context import CONTENTION_WINDOW
from txlake.txn.publish import PublishResult, load_actions, marker, publish
from txlake.txn.reservations import LOOK_INTERVAL, RESERVATION_TTL, Reservation
from txlake.txn.staging import TableWork

if TYPE_CHECKING:
    from txlake.delta.state import Snapshot
    from txlake.txn.transaction import Transaction

GROUP_WAIT_ROUND_TRIPS = 3
"""A writer that posted a group intent waits up to this many request round trips for someone to claim it."""
LEADER_POLLS = 4
"""A writer that defers to a group's leader (``Commit._defer``) looks this many times for its claim."""
START_VIEW_REUSE = 0.25
"""Seconds during which a transaction commits from the log view it started with (no re-read of the tail)."""
PROBE_AHEAD_SLACK = 0.1
"""Seconds by which a transaction's uploads may outlast the plain-writer probes sent while they land before the
tables are probed again (see ``Commit._probe_while_uploading``)."""
PUBLISH_ATTEMPTS = 4
"""Publication attempts after a claim before the commit reports :class:`CommitStateUnknownError`."""
_log = logging.getLogger("txlake")
T = TypeVar("T")

REDO_CONFLICTS = (ConcurrentAppendError, ConcurrentDeleteReadError, ConcurrentDeleteDeleteError)
"""Conflicts a redo resolves: another commit changed data a statement read or rewrote (not the schema,
protocol, catalog or an application transaction id)."""
REPLAYABLE_OPERATIONS = frozenset({"WRITE", "OVERWRITE", "DELETE", "UPDATE", "MERGE"})
REDO_BASE_DELAY = 0.01
REDO_MAX_DELAY = 1.0
MAX_REDOS = 100
"""Redos per commit (and the commit timeout) before the conflict is raised: a table rewritten again and again."""


@dataclass(frozen=True, slots=True)
class CommitResult:
    """What a successful commit did."""

    version: int
    read_version: int
    table_versions: Mapping[str, int] = field(default_factory=dict)
    read_only: bool = False
    rebases: int = 0
    redone: int = 0
    """Statements re-executed on a newer snapshot because a concurrent commit conflicted with them (redo)."""


def joining_tables(ops: Sequence[CatalogOp]) -> set[str]:
    """Tables a transaction with catalog operations ``ops`` brings into the catalog with their existing Delta
    log."""
    return {op.table_id for op in ops if isinstance(op, RegisterTable) and op.table_id is not None}


def _files_read(work: TableWork) -> frozenset[str]:
    """The paths of the table's files ``work``'s statements read, its own staged files left out (nobody else's)."""
    return frozenset(k[0] for k in work.read_keys) - frozenset(work.added)


def pending_change(work: TableWork) -> PendingChange:
    """What a transaction's work on one table changes and read, as conflict checks see it."""
    return PendingChange(
        table=work.entry.name,
        schema=work.schema,
        partition_columns=work.partition_columns,
        mine=ChangeSummary.of(work.actions()),
        dml_reads=work.dml_reads(),
        query_reads=work.query_reads(),
    )


def withdraw(tx: Transaction) -> None:
    """Delete the transaction's reservations (claimed, or the commit ended whatever its outcome)."""
    if tx._reserved:
        reservations.withdraw(tx._ctx.store, [r.path for r in tx._reserved.values()])
        tx._reserved.clear()


def _changes(record: GlobalRecord, table_id: str) -> bool:
    """Whether a claimed version writes the table or adopts plain commits into it."""
    change = record.table(table_id)
    return change is not None and change.moves_version


class Validation:
    """The validation of one transaction's tables and catalog against log views, for one commit.

    :meth:`validate` is the one entry point; the transaction's :class:`~txlake.txn.conflicts.IsolationPolicy`
    is consulted here only: which tables a level validates, the level each change is checked at, and what
    the global record carries (publication checks the recorded reads against plain commits an earlier claim
    absorbed). It remembers, per table, the Delta version validated up to (``checked``) and the claims
    already checked from their records (``seen``), so that a round after a lost claim checks only what is new.
    """

    def __init__(self, tx: Transaction) -> None:
        self.tx = tx
        self.ctx = tx._ctx
        self.policy = tx._policy
        self.checked: dict[str, int] = {tid: w.base_version for tid, w in tx._work.items()}
        self.seen: set[tuple[str, int]] = set()  # (table, claimed version) already validated from its record

    def validate(self, view: LogView, claimed: LakehouseState | None = None) -> dict[str, int]:
        """Validate the transaction against ``view`` (``claimed``: its :meth:`~LogView.claimed_state`): first its
        catalog assumptions, then every change to the tables it touched. Returns the Delta version each
        written table's commit follows (see :meth:`_tables`); raises the :class:`ConflictError` of the first
        conflict found."""
        if claimed is None:
            claimed = view.claimed_state()
        self._catalog(claimed)
        return self._tables(view, claimed)

    def rebase(self, table_id: str, version: int) -> None:
        """After a redo: the table's statements were run again on Delta version ``version``; nothing of the
        table after it is validated yet (the claims included: they are checked against the new staged state)."""
        self.checked[table_id] = version
        self.seen.difference_update({key for key in self.seen if key[0] == table_id})
        self.tx._probed.pop(table_id, None)

    def _catalog(self, latest: LakehouseState) -> None:
        """Re-check this transaction's catalog assumptions against the latest state (requirements)."""
        if self.policy.query_reads and latest.version != self.tx._start.version:
            self._catalog_reads(latest)
        joining = joining_tables(self.tx._ops)
        for tid, work in self.tx._work.items():
            if work.snapshot is None or tid in joining:
                continue
            touched = self.policy.validates(
                writes=work.writes, dml_reads=bool(work.dml_predicates), query_reads=bool(work.query_predicates)
            )
            if touched and tid not in latest.tables:
                raise ConcurrentTransactionError(
                    f"table {work.entry.name} was dropped concurrently",
                    table=work.entry.name,
                    read_version=self.tx.read_version,
                    winning_version=latest.version,
                )
        state = latest
        for op in self.tx._ops:
            try:
                op.validate(state)
            except ConcurrentTransactionError as exc:
                self._conflict_catalog(str(exc), exc.table or op.name, latest)
            state = op.apply(state, state.version)

    def _catalog_reads(self, latest: LakehouseState) -> None:
        """Serializable: every catalog lookup and listing this transaction made still gives the same answer."""
        start = self.tx._start

        def changed(message: str, name: str) -> CatalogChangedError:
            return CatalogChangedError(
                message, table=name, read_version=self.tx.read_version, winning_version=latest.version
            )

        for name in sorted(self.tx._read_names):
            before, after = start.table_by_name(name), latest.table_by_name(name)
            if (before.id if before else None) != (after.id if after else None):
                raise changed(f"table {name} was created, dropped or renamed concurrently", name)
        for ns in sorted(self.tx._read_namespaces):
            if start.has_namespace(ns) != latest.has_namespace(ns):
                raise changed(f"namespace {ns} was created or dropped concurrently", ns)
        for listed in sorted(self.tx._read_listings, key=lambda n: n or ""):
            if start.table_names(listed) != latest.table_names(listed):
                where = f"namespace {listed}" if listed is not None else "the lakehouse"
                raise changed(f"the tables of {where} changed concurrently", listed or "*")

    def _conflict_catalog(self, message: str, name: str, latest: LakehouseState) -> None:
        raise ConcurrentTransactionError(
            message, table=name, read_version=self.tx.read_version, winning_version=latest.version
        )

    def _tables(self, view: LogView, claimed: LakehouseState) -> dict[str, int]:
        """Check every change since this transaction's snapshot of each table it touched.

        Published changes are checked as Delta commits (the decided prefix's, and plain writers' commits a
        probe finds beyond it); claimed versions that may not be published yet are checked from their
        records. Returns the Delta version each written table's commit follows (its base), including
        plain-Delta commits found beyond the lakehouse's map (which this record then adopts).
        """
        bases: dict[str, int] = {}
        decided = view.decided
        live = self._live(view, claimed)
        bases.update((tid, -1) for tid, work in self.tx._work.items() if work.snapshot is None)
        # their commit follows the newest version of their own log (checked on publishing)
        joining = joining_tables(self.tx._ops)
        bases.update((tid, w.snapshot.version) for tid, w in self.tx._work.items() if tid in joining and w.snapshot)
        claims_on = self._claims_on(view, live)
        self._probe(view, live, claims_on)
        probed = {
            tid: self.tx._probed[tid][1]
            for tid, _ in live
            if tid in self.tx._probed and self.tx._probed[tid][0] == decided.table_versions[tid] and not claims_on[tid]
        }
        for tid, work in live:
            pending = pending_change(work)
            relevant = self.policy.validates(writes=work.writes, dml_reads=bool(work.dml_predicates), query_reads=True)
            mapped = decided.table_versions[tid]
            claims = claims_on[tid]
            upto = probed.get(tid, mapped)
            if not relevant:
                bases[tid] = upto
                continue
            if upto > self.checked[tid]:
                versions = list(range(self.checked[tid] + 1, upto + 1))
                self.check_commits(work, pending, versions, mapped)
                self.checked[tid] = upto
            for claim in claims:
                if (tid, claim.version) not in self.seen:
                    self._check_claim(work, pending, claim)
                    self.seen.add((tid, claim.version))
            bases[tid] = upto
        return bases

    def _live(self, view: LogView, claimed: LakehouseState) -> list[tuple[str, TableWork]]:
        """The tables this transaction touched that existed at its start and still exist in ``view``."""
        decided = view.decided
        return [
            (tid, work)
            for tid, work in self.tx._work.items()
            if work.snapshot is not None and tid in claimed.tables and tid in decided.tables
        ]

    @staticmethod
    def _claims_on(view: LogView, live: Sequence[tuple[str, TableWork]]) -> dict[str, list[GlobalRecord]]:
        return {tid: [p.record for p in view.pending if not p.aborted and _changes(p.record, tid)] for tid, _ in live}

    def probe(self, view: LogView, claimed: LakehouseState) -> None:
        """Look for plain writers' commits beyond the lakehouse's map of each table this transaction writes: one
        HEAD per table, all at once. With claims on the table in flight, plain writers' commits are met when
        publishing instead; a table probed before at the same mapped version is not probed again (so a
        :class:`Commit` may call this ahead of validation, while its uploads land)."""
        live = self._live(view, claimed)
        self._probe(view, live, self._claims_on(view, live))

    def _probe(
        self, view: LogView, live: Sequence[tuple[str, TableWork]], claims_on: Mapping[str, list[GlobalRecord]]
    ) -> None:
        decided = view.decided
        probes = [
            (work.entry, decided.table_versions[tid])
            for tid, work in live
            if (work.writes or tid in self.tx._adopt)
            and not claims_on[tid]
            and self.tx._probed.get(tid, (-2, -2))[0] != decided.table_versions[tid]
        ]
        for (entry, mapped), upto in zip(probes, self.ctx.probe_all(probes), strict=True):
            self.tx._probed[entry.id] = (mapped, upto)

    def check_commits(
        self,
        work: TableWork,
        pending: PendingChange,
        versions: list[int],
        mapped: int,
        *,
        isolation: Isolation | None = None,
    ) -> None:
        """Conflict-check the table's Delta commits ``versions`` against the transaction's change ``pending``, at
        ``isolation`` (default: the policy's level). Commits beyond ``mapped`` (the version the lakehouse maps
        the table to) are plain writers' or claims' in flight."""
        for v, actions in zip(versions, self.ctx.snapshots.commits(work.entry, versions), strict=True):
            summary = ChangeSummary.of(actions)
            if v > mapped:
                self._check_not_orphaned(work, v, actions)
            try:
                check(
                    pending,
                    summary,
                    isolation or self.policy.level,
                    read_version=self.tx.read_version,
                    winning_version=summary.global_version,
                    delta_version=v,
                )
            except ConflictError:
                if v > mapped and summary.global_version is None:  # a plain writer's, not adopted yet
                    self.tx._unadopted.add(work.entry.id)
                raise

    def _check_not_orphaned(self, work: TableWork, version: int, actions: Sequence[Action]) -> None:
        """A txlake commit beyond the lakehouse's map belongs to a claim in flight; if its global record does
        not exist, the log lost it (deleted outside txlake): adopting the commit as a plain writer's would commit
        one table's part of that transaction alone."""
        tag = marker(actions)
        g = tag.get("globalVersion") if tag is not None else None
        if not isinstance(g, int) or tag is None or tag.get("compensates"):
            return
        try:
            self.ctx.glog.read_record(g)
        except VersionNotFoundError:
            raise CorruptLogError(
                f"Delta commit {version} of {work.entry.name} was written by txlake transaction {tag.get('txn')} for "
                f"global version {g}, whose record is gone: the lakehouse log lost entries (run `txlake doctor`)",
                table=work.entry.name,
                version=version,
            ) from None

    def _check_claim(self, work: TableWork, pending: PendingChange, claim: GlobalRecord) -> None:
        """Check a claimed version's change on the table (from its record: it may not be published yet)."""
        change = claim.table(work.entry.id)
        assert change is not None
        if change.adopted_from is not None:  # plain writers' commits it adopts are published
            adopted = list(range(change.adopted_from, change.base_version + 1))
            self.check_commits(work, pending, adopted, change.base_version)
        if change.writes:
            check(
                pending,
                ChangeSummary.of(load_actions(self.ctx.store, change)),
                self.policy.level,
                read_version=self.tx.read_version,
                winning_version=claim.version,
                delta_version=None,
            )

    def record(self, view: LogView, bases: Mapping[str, int]) -> GlobalRecord:
        """The record to claim the version after ``view``'s latest with: the tables written, or read in a way the
        level validates, each on its base from ``bases`` (what :meth:`validate` returned), and the catalog
        operations."""
        latest = view.decided
        changes = []
        for tid, work in self.tx._work.items():
            if tid not in bases:
                continue
            adopting = tid in self.tx._adopt and bases[tid] > latest.table_versions.get(tid, -1)
            recorded = self.policy.records(
                writes=work.writes, dml_reads=bool(work.dml_predicates), query_reads=bool(work.query_predicates)
            )
            if not adopting and not recorded:
                continue
            mapped = latest.table_versions.get(tid, -1)
            actions = tuple(work.actions()) if work.writes else ()
            changes.append(
                TableChange(
                    table_id=tid,
                    path=work.entry.path,
                    base_version=bases[tid],
                    actions=actions,
                    operation=work.operation(),
                    blind_append=work.only_appends and work.snapshot is not None,
                    dml_reads=work.dml_reads(),
                    query_reads=work.query_reads() if self.policy.query_reads else ReadSet(),
                    adopted_from=mapped + 1 if bases[tid] > mapped >= 0 else None,
                )
            )
        now = now_ms()
        version = view.latest + 1
        return GlobalRecord(
            version=version,
            txid=self.tx.txid,
            kind="txn",
            read_version=self.tx.read_version,
            isolation=self.policy.level,  # (what publication validates: serializable for pessimistic ones)
            timestamp_ms=now,
            lease_until_ms=now + int(self.ctx.lease_seconds * 1000),
            tables=tuple(changes),
            catalog=tuple(self.tx._ops),
            decided=self.ctx.glog.outcomes_to_embed(version),
        )


class Commit:
    """One commit of one transaction: settle, validate, (redo), claim, publish, decide.

    It owns what lasts one commit: the :class:`Validation` (tables checked up to which version, claims seen),
    the claims lost (``rebases``), the deadline, the log view it validates against and the redos per table.
    """

    def __init__(self, tx: Transaction) -> None:
        self.tx = tx
        self.ctx = tx._ctx
        if tx._lease is not None:
            tx._lease.ensure()  # taken over (resumed, recovered): nothing of ours may be claimed any more
        self.validation = Validation(tx)
        self.rebases = 0
        self.deadline = time.monotonic() + self.ctx.commit_timeout
        # without competition a view of a moment ago is as good as a new one (a claim taken since makes ours
        # fail and names the winner); when racing others it is likely stale, and a lost claim costs more
        fresh = not self.ctx.racing and time.monotonic() - tx._started < START_VIEW_REUSE
        self.view = tx._start_view if fresh else self._settle()
        self.redos: dict[str, int] = {}  # redos per table in this commit

    def _settle(self) -> LogView:
        """The log as a committer sees it: claims whose lease has expired are rolled forward first."""
        return self.ctx.view()

    def run(self) -> CommitResult:
        """Validate (redoing a table's statements when that resolves a data conflict), claim the next global
        version, publish, decide; after a lost claim, validate again against the newer view."""
        ahead = True
        while True:
            view = self.view
            claimed = view.claimed_state()
            # the record names our data files: every one must be there before we validate and claim (a redo
            # just wrote some; see storage/uploads.py). The first time, the plain-writer probes validation
            # makes go out while the uploads land (a probe is as good before them as after: a plain writer
            # may commit after either, and publishing meets that commit)
            if ahead and self.tx._uploads.pending:
                self._probe_while_uploading(view, claimed)
            else:
                self.tx._uploads.flush()
            ahead = False
            try:
                bases = self.validation.validate(view, claimed)
            except ConflictError as exc:
                # one table at a time: redoing every conflicting table in one round was measured slower
                # (more statements run again: the round's window is longer)
                entry = self.tx._view.table_by_name(exc.table) if exc.table else None
                redoable = entry is not None and self._redoable(entry.id, exc) and time.monotonic() < self.deadline
                redone = self._redo_after(entry.id, exc) if entry and redoable else None
                if redone is None:
                    raise
                self.view = redone
                continue
            record = self.validation.record(view, bases)
            if not record.tables and not record.catalog:
                return CommitResult(view.decided.version, self.tx.read_version, read_only=True)
            if self._wait_for_reservations(record):
                self.view = self._settle()  # the holder committed (or gave up) meanwhile: validate against it
                continue
            self._check_age()
            self.tx._log_claim(record.version)
            winner: GlobalRecord | None = None
            lost = False
            if self.ctx.contended:  # group commit: offer ours to the next claimer, take in the others'
                posted = group.groupable(record)
                if posted:
                    self._post_intent(record)
                    winner = self._claimed_meanwhile(record.version)
                    lost = winner is not None
                if not lost:
                    paths = group.listed(self.ctx.store, record.version)
                    if posted and group.leader(paths) not in (None, self.tx.txid):
                        winner = self._defer(record.version)
                        lost = winner is not None
                if not lost:
                    intents = group.collect(self.ctx.store, record.version, paths, exclude=self.tx.txid)
                    record = group.merge(record, intents, live_tables=frozenset(claimed.tables))
            if not lost:
                try:
                    self._claim(record)
                except GlobalVersionTakenError:
                    lost = True
                    winner = self._winner(record.version)
                except CommitStateUnknownError:
                    raise
                except TxlakeError:
                    if self.tx._claimed is None:
                        raise
                    # our intent for this version is posted: whoever claims it may take us in, so only its
                    # record can say we failed (read back with retries; absent or unreadable: unknown)
                    theirs = self._winner(record.version)
                    if theirs is None or not theirs.includes(self.tx.txid):
                        self.tx._claimed = None  # decided without us: nothing of ours can appear
                        raise
                    if theirs.txid != self.tx.txid:
                        return self._as_member(theirs, self.rebases)
                    record = theirs  # our own claim landed after all: publish it
            if lost and winner is not None and winner.txid == self.tx.txid:  # read back: our own claim landed
                lost, record = False, winner
                self.tx._claimed = record.version
            if lost:
                self.rebases += 1
                self.ctx.note_contention()
                if winner is not None and winner.includes(self.tx.txid):
                    return self._as_member(winner, self.rebases)
                self.tx._claimed = None  # the version is someone else's, without us: nothing of ours is claimed
                if time.monotonic() > self.deadline:
                    raise ConcurrentTransactionError(
                        f"could not claim a global version within {self.ctx.commit_timeout:.0f}s",
                        read_version=self.tx.read_version,
                    ) from None
                self.view = self._next_view(view, winner, self.rebases)
                continue
            return self._decide(record)

    def _probe_while_uploading(self, view: LogView, claimed: LakehouseState) -> None:
        """Wait for the uploads while the plain-writer probes go out. A plain writer that commits after a probe
        is met when publishing, which then aborts an incompatible claim (compensating the tables already
        published: plain readers see it there for a moment); a probe while the uploads land widens that window
        by their duration, so when they outlast the probes by more than :data:`PROBE_AHEAD_SLACK` the tables are
        probed again (by the validation that follows)."""
        probed_at = 0.0

        def probe() -> None:
            nonlocal probed_at
            self.validation.probe(view, claimed)
            probed_at = time.monotonic()

        map_concurrently(lambda step: step(), [self.tx._uploads.flush, probe], max_workers=2)
        if time.monotonic() - probed_at > PROBE_AHEAD_SLACK:  # (both done: now is when the later one ended)
            self.tx._probed.clear()

    def _decide(self, record: GlobalRecord) -> CommitResult:
        """Our claim of ``record.version`` is in the log: publish it, which decides its outcome; the result once
        the versions before it are decided too."""
        withdraw(self.tx)  # our claim is in the log: those waiting for us validate against it now
        self._after_claim(record)
        published = self._publish(record)
        if not published.outcome.committed:
            self._aborted(record, published)
        self._await_visible(record.version)
        self._maintain(record, published.outcome, global_checkpoint=True)
        return CommitResult(
            record.version,
            self.tx.read_version,
            self._versions(published.outcome),
            rebases=self.rebases,
            redone=self.tx._redone,
        )

    # ------------------------------------------------------------------------------------------- redo

    def _redoable(self, table_id: str, conflict: ConflictError) -> bool:
        """Whether redo may resolve ``conflict`` on table ``table_id``: the statements there read only their
        own table (and literals or sources the application passed in), the application read no data in this
        transaction, and nothing is claimed yet."""
        tx = self.tx
        if not tx._redo or tx._read_data or tx._claimed is not None or not isinstance(conflict, REDO_CONFLICTS):
            return False
        if table_id in tx._unadopted or not tx._owns_files():  # taken over: the staged files are the new holder's
            return False
        work = tx._work.get(table_id)
        statements = tx._statements.get(table_id)
        return not (
            work is None
            or work.snapshot is None
            or not statements
            or work.new_metadata is not None
            or any(op not in REPLAYABLE_OPERATIONS for op in work.operations)
            or not all(s.replayable for s in statements)
        )

    def _redo_after(self, table_id: str, conflict: ConflictError) -> LogView | None:
        """Resolve a data conflict by redo: re-execute the statements of table ``table_id`` (which
        :meth:`_redoable` allows) on its newest decided snapshot (this transaction's other tables keep what
        they staged); the newer view to validate again, or ``None`` when the conflict stands (too many redos,
        or the table dropped meanwhile).

        Sound because every statement redone reads only its own table (and literals or sources the application
        passed in), and the application read no data in this transaction: the transaction is then equivalent
        to one that ran all its statements at the newer version, where its other tables, validated up to it,
        hold what they held at its start for everything it touched. See docs/protocol.md, "Redo".
        """
        if sum(self.redos.values()) >= MAX_REDOS:
            return None
        self.ctx.note_contention()  # from now on this client waits for others' reservations too
        again = self.redos.get(table_id, 0)
        reserve = 0 < self.ctx.reserve_after <= again + 1
        # this table conflicted again after its redo: a hot table. Reserving its files gives the next attempt
        # its turn; without (or when that does not help: writers of other clients or plain Delta writers) back
        # off, with full jitter, as lake.run does
        backoff = again - (self.ctx.reserve_after + 2 if reserve else 0)
        if backoff > 0:
            time.sleep(random.uniform(0, min(REDO_MAX_DELAY, REDO_BASE_DELAY * 2**backoff)))
        self.redos[table_id] = again + 1
        work = self.tx._work[table_id]
        entry = work.entry
        # redo on top of every claim on the table known now (waiting for their outcomes, rolling forward after
        # their lease), not just the one that conflicted: under contention each redo would meet the next one.
        # With reservations on, first wait for the commits of those reserving a file the redo would read: a
        # redo before theirs is stale at once (it was the second of two redos for every wait before a claim)
        wait = self.ctx.reserve_after > 0
        while True:
            view = self._settle()
            claims = [p.record.version for p in view.pending if _changes(p.record, table_id)]
            last = max([*claims, conflict.winning_version or -1])
            if last > view.decided.version:
                self._or_unknown(last, partial(self.ctx.await_prefix, last))
                view = self._settle()
            decided = view.decided
            if table_id not in decided.tables:
                return None  # dropped meanwhile: the catalog validation reports it
            snapshot = self.ctx.snapshots.get(entry, decided.table_versions[table_id])
            if not (wait and self._wait_before_redo(work, snapshot)):
                break
            wait = False  # the holders committed (or were waited out): redo on the log as it is now
        statements = self.tx._statements[table_id]
        redone = self.tx._redo_statements(entry, work, snapshot, statements)
        _log.debug(
            "txlake: %s: %s with global version %s; ran %d of %d statement(s) on %s again at Delta version %d "
            "(global version %d)",
            self.tx.txid,
            type(conflict).__name__,
            conflict.winning_version,
            redone,
            len(statements),
            entry.name,
            snapshot.version,
            decided.version,
        )
        self.tx._redone += redone
        if reserve:
            self._reserve(table_id, whole=again + 1 >= reservations.WHOLE_AFTER)
        self.validation.rebase(table_id, snapshot.version)
        return view

    def _reserve(self, table_id: str, *, whole: bool = False) -> None:
        """Post (or renew) our reservation of the files our statements on ``table_id`` read now (``whole``:
        of the whole table)."""
        work = self.tx._work[table_id]
        # the files the statements run again read (kept statements' files were not the hot ones)
        files = _files_read(work)
        if whole:
            files = frozenset({reservations.WHOLE_TABLE})
        held = self.tx._reserved.get(table_id)
        if not files:
            return
        now = now_ms()
        since = min([now, *(r.since_ms for r in self.tx._reserved.values())])
        ttl = int(RESERVATION_TTL * 1000)
        reservation = Reservation(self.tx.txid, table_id, files, since, now + ttl)
        if held is not None and held.files == files and held.until_ms - now > ttl // 2:
            return  # the same files, still well within its time
        if reservations.post(self.ctx.store, reservation):
            self.tx._reserved[table_id] = reservation

    def _wait_before_redo(self, work: TableWork, snapshot: Snapshot) -> bool:
        """Before a redo of ``work``'s statements on ``snapshot``: wait while another transaction reserves a file
        the redo may read -- one the statements read, or one the concurrent commits wrote (a holder reserves
        the files of the snapshot it redid on). Whether we waited."""
        if work.snapshot is None:
            return False
        files = _files_read(work) | frozenset(path for path in snapshot.files if path not in work.snapshot.files)
        return bool(files) and self._wait_for_holders({work.entry.id: files})

    def _wait_for_reservations(self, record: GlobalRecord) -> bool:
        """Before a claim: wait while another transaction reserves a file our record removes (see
        :mod:`txlake.txn.reservations`). Whether we waited (the view is then stale).

        Looked at when this client is racing, has seen reservations of others within the last second, or has
        not looked for :data:`~txlake.txn.reservations.LOOK_INTERVAL` (a client that keeps winning never
        races): at most one LIST a second otherwise.
        """
        ctx = self.ctx
        if ctx.reserve_after <= 0:
            return False
        removes = {
            c.table_id: frozenset(a.path for a in c.actions if isinstance(a, Remove)) for c in record.tables if c.writes
        }
        removes = {tid: paths for tid, paths in removes.items() if paths}
        now = time.monotonic()
        if not removes or not (ctx.racing or now < ctx.reservations_seen_until or now >= ctx.reservations_due):
            return False
        return self._wait_for_holders(removes)

    def _wait_for_holders(self, removes: Mapping[str, frozenset[str]]) -> bool:
        """Wait while a reservation of another transaction (older than ours, if we hold one) names a file of
        ``removes`` (by table id), within this transaction's :data:`~txlake.txn.reservations.RESERVATION_WAIT`.
        Whether we waited."""
        ctx = self.ctx
        own = min((r.priority for r in self.tx._reserved.values()), default=None)
        waited = 0
        began: float | None = None
        while True:
            live = ctx.reservations.live(ctx.store, removes)
            now = time.monotonic()
            if began is not None:  # the pause and the look after it count (on an object store, mostly the LIST)
                self.tx._reservation_wait -= now - began
            ctx.reservations_due = now + LOOK_INTERVAL
            if any(r.txid != self.tx.txid for r in live):
                ctx.reservations_seen_until = now + CONTENTION_WINDOW
            ahead = reservations.blocking(live, removes, txid=self.tx.txid, own=own, ignore=self.tx._waited_out)
            if not ahead:
                return waited > 0
            if self.tx._reservation_wait <= 0:
                # waited long enough (a crashed holder's reservation waits out its TTL): go ahead, and never wait
                # for these again in this transaction
                self.tx._waited_out.update(r.path for r in ahead)
                return waited > 0
            began = time.monotonic()
            reservations.pause(waited)
            waited += 1

    # ------------------------------------------------------------------------------------------ claim

    def _check_age(self) -> None:
        """Refuse to claim (or offer ourselves to a group) past :data:`MAX_TRANSACTION_AGE`: vacuum deletes the
        files of transactions that old which no version references, so ours may be gone."""
        if self.tx._lease is not None:
            self.tx._lease.ensure()  # LeaseLostError once another client may have taken this transaction over
        age = max(time.monotonic() - self.tx._started, time.time() - self.tx._started_wall)
        if age > MAX_TRANSACTION_AGE.total_seconds():
            raise TransactionExpiredError(
                f"transaction {self.tx.txid} began {age / 3600:.1f} hours ago; a transaction may commit only within "
                f"{MAX_TRANSACTION_AGE.total_seconds() / 3600:.0f} hours of its start (vacuum may have deleted "
                "the files it wrote): run it again",
                read_version=self.tx.read_version,
            )

    def _versions(self, outcome: Outcome) -> dict[str, int]:
        """The Delta versions this transaction's tables got (a group's outcome names its members' too)."""
        return {tid: v for tid, v in outcome.table_versions.items() if tid in self.tx._work}

    def _post_intent(self, record: GlobalRecord) -> None:
        """Offer our record to whoever claims its version; from now on it may be committed by them."""
        self.tx._claimed = record.version
        try:
            group.post_intent(self.ctx.store, record)
        except TxlakeError as exc:  # it may have landed all the same: the version's record tells
            _log.debug("txlake: posting the group intent for global version %d: %s", record.version, exc)

    def _claimed_meanwhile(self, version: int) -> GlobalRecord | None:
        """After posting an intent: give the other writers of this burst a moment to claim ``version``.

        The wait is random, up to a few request round trips, so that one of them claims (taking in every
        intent posted so far) and the others find its record and are done. ``None``: nobody claimed it yet.
        """
        time.sleep(random.uniform(0, GROUP_WAIT_ROUND_TRIPS * self.ctx.round_trip))
        return self._claim_of(version)

    def _claim_of(self, version: int) -> GlobalRecord | None:
        """The record of ``version`` (one GET, timed into the round-trip estimate); ``None`` if not claimed yet
        (or not readable now)."""
        began = time.monotonic()
        try:
            return self.ctx.glog.read_record(version)
        except TxlakeError:
            return None
        finally:
            self.ctx.observe_round_trip(time.monotonic() - began)

    def _defer(self, version: int) -> GlobalRecord | None:
        """Our intent for ``version`` is posted, and so is one of a smaller txid (:func:`group.leader`): its owner
        claims the version, taking in every intent it lists. Wait for that claim: a GET of the record after 3
        round trips, then after every further one, :data:`LEADER_POLLS` times. ``None``: not claimed (the leader
        is slow or gone), so we collect and claim ourselves.

        Without it every writer of a burst that found the version unclaimed read all its intents and raced to
        claim it, one of them winning: at 16 writers on SeaweedFS about 3 collectors per version.
        """
        for poll in range(LEADER_POLLS):
            time.sleep((3 if poll == 0 else 1) * self.ctx.round_trip)
            if (record := self._claim_of(version)) is not None:
                return record
        return None

    def _winner(self, version: int) -> GlobalRecord | None:
        """The record that beat our claim of ``version``; ``None`` if unreadable and nothing of ours is in it.

        With an intent of ours posted for ``version``, only that record says whether we are in: if it
        cannot be read (after retries), the commit state is unknown.
        """
        if self.tx._claimed is None:
            try:
                return self.ctx.glog.read_record(version)
            except TxlakeError:
                return None
        return self._or_unknown(version, lambda: self.ctx.glog.read_record(version))

    def _as_member(self, winner: GlobalRecord, rebases: int) -> CommitResult:
        """Another client's claim of ``winner.version`` includes our transaction: its outcome is ours."""
        version = winner.version
        self.tx._claimed = version
        first_delay = GROUP_WAIT_ROUND_TRIPS * self.ctx.round_trip
        outcome = self._or_unknown(version, lambda: self.ctx.await_decided(version, first_delay=first_delay))
        if not outcome.committed:
            raise ConcurrentTransactionError(
                f"global version {version} (claimed by transaction {winner.txid}, with this one in its group) "
                f"was aborted: {outcome.reason}",
                read_version=self.tx.read_version,
                winning_version=version,
            )
        self._await_visible(version)
        self._maintain(winner, outcome, global_checkpoint=False)  # the claimer writes the global checkpoint
        return CommitResult(version, self.tx.read_version, self._versions(outcome), rebases=rebases)

    def _maintain(self, record: GlobalRecord, outcome: Outcome, *, global_checkpoint: bool) -> None:
        """After our committed version ``record`` (as claimer or member): cache its Delta commits (the snapshots
        after it need no GET), then the checkpoints it makes due on the tables we wrote (best effort)."""
        self.ctx.remember_commits(record, outcome)
        try:
            self.ctx.after_commit(record.version, frozenset(self.tx._work), global_checkpoint=global_checkpoint)
        except Exception as exc:  # the commit stands whatever fails now (checkpoints come with later ones)
            _log.warning("txlake: after committing global version %d: %s", record.version, exc)

    def _await_visible(self, version: int) -> None:
        """Wait until the versions before ours are decided, so that a read right after commit() sees it.

        Our version is committed; if the earlier ones cannot be read after retries, the caller learns the
        state is not established yet (``transaction_status`` says ``committed`` once they are decided).
        """
        self._or_unknown(version, lambda: self.ctx.await_prefix(version))

    def _or_unknown(self, version: int, fn: Callable[[], T]) -> T:
        """``fn()``, retried with backoff; still failing after :data:`PUBLISH_ATTEMPTS` tries, the state of our
        claim (or intent) of ``version`` is unknown: :class:`CommitStateUnknownError`."""
        delay = 0.02
        for attempt in range(PUBLISH_ATTEMPTS):
            try:
                return fn()
            except TxlakeError as exc:
                if attempt + 1 == PUBLISH_ATTEMPTS:
                    raise self._unknown(version, exc) from exc
            time.sleep(delay * random.uniform(0.5, 1.0))
            delay *= 2
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _next_view(self, view: LogView, winner: GlobalRecord | None, rebases: int) -> LogView:
        """After losing a claim: extend the view by the winner's record instead of re-listing."""
        if winner is None or rebases % 16 == 0:  # now and then afresh: the decided prefix moved, leases expire
            return self._settle()
        time.sleep(random.uniform(0, min(0.005, 0.0005 * 2 ** min(rebases, 4))))
        try:
            return view.with_claim(winner)
        except TxlakeError:
            return self._settle()

    def _claim(self, record: GlobalRecord) -> None:
        """Put-if-absent the record; an ambiguous failure makes the commit state unknown."""
        try:
            self.ctx.glog.claim(record)
        except TransientStorageError as exc:
            # the put may have landed: only our record at that version proves it, another one disproves it
            self.tx._claimed = record.version
            try:
                theirs = self.ctx.glog.read_record(record.version)
            except TxlakeError:
                raise self._unknown(record.version, exc) from exc
            if theirs.txid != self.tx.txid:
                raise GlobalVersionTakenError(record.version) from exc
            return
        self.tx._claimed = record.version

    def _unknown(self, version: int, cause: BaseException) -> CommitStateUnknownError:
        return CommitStateUnknownError(
            f"transaction {self.tx.txid} claimed (or may have claimed) global version {version} and could not "
            f"finish it ({cause}); another client rolls it forward after its lease: ask "
            f"Lakehouse.transaction_status({self.tx.txid!r}, {version})",
            txid=self.tx.txid,
            version=version,
        )

    # ------------------------------------------------------------------------------- publish, decide

    def _after_claim(self, record: GlobalRecord) -> None:
        """A transaction that re-adds old files (restore, clone) looks for a vacuum horizon above their version
        *after* claiming: vacuum records its horizon *before* it reads the claims, so either vacuum saw our
        claim (and keeps its files) or we see its horizon and decide our version aborted before publishing."""
        if self.tx._borrows_from is None:
            return
        try:
            horizon = highest_horizon(self.ctx.store)
            problem = None if horizon <= self.tx._borrows_from else f"vacuum horizon {horizon} is above it"
            if problem is not None and self.tx._borrows_from in {t.version for t in TagStore(self.ctx.store).list()}:
                problem = None  # a tagged version: every vacuum keeps its files (it reads the tags after its horizon)
        except TxlakeError as exc:
            problem = f"the vacuum horizon cannot be read: {exc}"
        if problem is None:
            return
        reason = f"it re-adds data files of lakehouse version {self.tx._borrows_from}, and the {problem}"
        outcome = self._or_unknown(
            record.version,
            lambda: self.ctx.glog.decide(Outcome(record.version, self.tx.txid, "aborted", {}, now_ms(), reason)),
        )
        if outcome.committed:
            return  # rolled forward by another client after our lease: it stands
        self.tx._claimed = None
        raise VersionNotFoundError(
            f"lakehouse version {self.tx._borrows_from} is older than the vacuum horizon: its files may have been "
            f"deleted ({reason}); nothing was committed",
            version=self.tx._borrows_from,
        )

    # ------------------------------------------------------------------------------------------ sublog

    def _publish(self, record: GlobalRecord) -> PublishResult:
        """Publish our claimed record; storage failures are retried, then the outcome is unknown."""
        delay = 0.02
        failure: TxlakeError | None = None
        for _ in range(PUBLISH_ATTEMPTS):
            try:
                return publish(self.ctx.store, self.ctx.glog, record, self.ctx.await_decided)
            except TxlakeError as exc:  # publication is idempotent: run it again from the start
                failure = exc
            time.sleep(delay * random.uniform(0.5, 1.0))
            delay *= 2
        assert failure is not None
        try:  # a helper may have decided it meanwhile
            outcome = self.ctx.glog.read_outcome(record.version)
        except TxlakeError:
            outcome = None
        if outcome is None:
            raise self._unknown(record.version, failure) from failure
        if outcome.txid != record.txid:  # an outcome left without its record: the log is damaged
            raise failure
        # decided by someone else: which tables they published is not known here, so keep every file
        return PublishResult(outcome, published=frozenset(c.table_id for c in record.tables))

    def _aborted(self, record: GlobalRecord, published: PublishResult) -> None:
        """Our claimed version was decided aborted: delete the files no published commit references, raise."""
        reason: TxlakeError | None = published.conflict or published.unpublishable
        if published.conflict is not None:  # a plain writer's commit raced the publication: adopt it
            named = published.conflict.table  # publication names a table by its path
            self.tx._unadopted.update(tid for tid, w in self.tx._work.items() if named in (w.entry.path, w.entry.name))
        if reason is not None:  # decided by our own publication: ``published`` names every published table
            for tid, work in self.tx._work.items():
                if tid not in published.published:
                    try:
                        work.discard()
                    except TxlakeError:
                        continue  # an orphan named by its txid, for vacuum
            raise reason
        raise ConcurrentTransactionError(
            f"global version {record.version} was aborted: {published.outcome.reason}",
            read_version=self.tx.read_version,
            winning_version=record.version,
        )
