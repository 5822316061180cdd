"""Publication (DESIGN §3 steps 3-4): turn a claimed global record into Delta commits and an outcome.

Publication is deterministic and idempotent: the owner or any helper (after the owner's lease) may run
it, any number of times, and they all reach the same Delta versions and the same outcome.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from txlake.delta.actions import Action, Add, CommitInfo, Metadata, Remove, now_ms
from txlake.delta.log import DeltaLog
from txlake.delta.schema import schema_from_json
from txlake.delta.snapshot import load_snapshot
from txlake.delta.table import commit_info
from txlake.errors import ConflictError, CorruptLogError, InvalidObjectPathError, VersionAlreadyExistsError
from txlake.lakehouse.log import GlobalLog
from txlake.lakehouse.records import GlobalRecord, LakehouseState, Outcome, TableChange
from txlake.storage import ObjectStore
from txlake.storage.threads import map_concurrently
from txlake.txn.conflicts import ChangeSummary, PendingChange, check


@dataclass(frozen=True, slots=True)
class PublishResult:
    """The outcome of a record, and why it was aborted when publication itself aborted it.

    ``published`` are the tables whose Delta commit of this record exists (compensated when aborted): their
    files stay referenced by the Delta log. ``conflict`` is a racing plain writer's incompatible commit,
    ``unpublishable`` the store's refusal of a path the record needs (it can never be published).
    """

    outcome: Outcome
    conflict: ConflictError | None = None
    unpublishable: InvalidObjectPathError | None = None
    published: frozenset[str] = frozenset()


_Published = tuple[str, DeltaLog, int, Sequence[Action]]
"""(table id, its log, the Delta version this record's commit has there, the actions of that commit)"""


def marker(actions: Sequence[Action]) -> dict[str, object] | None:
    """The ``commitInfo.txlake`` annotation of a Delta commit, if txlake wrote it."""
    for a in actions:
        if isinstance(a, CommitInfo):
            value = a.txlake
            return dict(value) if value is not None else None
    return None


def load_actions(store: ObjectStore, change: TableChange) -> tuple[Action, ...]:
    """A table change's actions (kept inline in its record)."""
    return change.actions


def _put_walking(
    log: DeltaLog,
    start: int,
    actions: Sequence[Action],
    is_ours: Callable[[dict[str, object] | None], bool],
    on_foreign: Callable[[int, list[Action]], None],
    *,
    skip_unreadable: bool = False,
) -> int:
    """Put the commit at the first free version from ``start``; recognise our own earlier attempt.

    A slot holding something no Delta reader can read makes the commit unpublishable, or with
    ``skip_unreadable`` (compensations, which must never be blocked) is passed over.
    """
    version = start
    while True:
        try:
            log.write_commit(version, actions)
            return version
        except VersionAlreadyExistsError:
            try:
                existing = log.read_commit(version)
            except CorruptLogError as exc:  # the slot is taken by something no Delta reader can use
                if skip_unreadable:
                    version += 1
                    continue
                raise InvalidObjectPathError(
                    f"Delta commit {version} of {log.name} exists but cannot be read: {exc}",
                    path=log.commit_path(version),
                    kind="GET",
                ) from exc
            if is_ours(marker(existing)):
                return version
            on_foreign(version, existing)
            version += 1


def _pending(store: ObjectStore, change: TableChange, actions: Sequence[Action], log: DeltaLog) -> PendingChange:
    meta = next((a for a in actions if isinstance(a, Metadata)), None)
    if meta is None:
        meta = load_snapshot(log, change.base_version).metadata
    return PendingChange(
        table=log.name,
        schema=schema_from_json(meta.schema_string),
        partition_columns=meta.partition_columns,
        mine=ChangeSummary.of(actions),
        dml_reads=change.dml_reads,
        query_reads=change.query_reads,
    )


def _compensate(log: DeltaLog, record: GlobalRecord, after: int, actions: Sequence[Action]) -> None:
    """Undo a commit of an aborted record with an inverse commit (only when a plain writer raced us)."""
    inverse: list[Action] = [
        commit_info("TXLAKE COMPENSATE", {"globalVersion": record.version}, txlake=_tag(record, compensates=True))
    ]
    ts = now_ms()
    for a in actions:
        if isinstance(a, Add):
            inverse.append(a.remove(deletion_timestamp=ts))
        elif isinstance(a, Remove) and a.size is not None:
            inverse.append(  # the same logical file: its deletion vector comes back with it
                Add(a.path, dict(a.partition_values or {}), a.size, ts, True, a.stats, a.tags, a.deletion_vector),
            )

    def ours(m: dict[str, object] | None) -> bool:
        return m is not None and m.get("txn") == record.txid and bool(m.get("compensates"))

    _put_walking(log, after + 1, inverse, ours, lambda v, a: None, skip_unreadable=True)


def delta_commit(record: GlobalRecord, change: TableChange) -> list[Action]:
    """The Delta commit publishing ``change`` of ``record``: its commitInfo (with our marker), its actions."""
    info = commit_info(
        change.operation,
        {"globalVersion": record.version, "isolation": record.isolation},
        isBlindAppend=change.blind_append,
        txlake=_tag(record),
    )
    return [info, *change.actions]


def _tag(record: GlobalRecord, *, compensates: bool = False) -> dict[str, object]:
    tag: dict[str, object] = {"txn": record.txid, "globalVersion": record.version}
    if compensates:
        tag["compensates"] = True
    return tag


AwaitDecided = Callable[[int], Outcome]
"""Wait for (or, after its lease, finish) the outcome of an earlier claimed version."""


def _state_before(glog: GlobalLog, version: int) -> LakehouseState:
    """A decided state at or below ``version - 1`` (the newest this client knows; read if none)."""
    known = glog.nearest_state(version - 1)
    if known is None:
        glog.tail()
        known = glog.nearest_state(version - 1)
    return known if known is not None else glog.state_at(version - 1)


def _before(
    glog: GlobalLog, record: GlobalRecord, table_id: str, await_decided: AwaitDecided
) -> tuple[int, frozenset[int]]:
    """The table's Delta version once every earlier claim on it is decided, and the slots those claims took.

    Claims are pipelined, so earlier versions may still be publishing: each one that writes (or adopts into)
    the table is waited for first, which keeps every table's Delta commits in global-version order.
    """
    state = _state_before(glog, record.version)
    latest = state.table_versions.get(table_id, -1)
    taken: set[int] = set()
    for v in range(state.version + 1, record.version):
        change = glog.read_record(v).table(table_id)
        if change is None or not change.moves_version:
            continue
        outcome = await_decided(v)
        if outcome.committed and table_id in outcome.table_versions:
            taken.add(outcome.table_versions[table_id])
            latest = max(latest, outcome.table_versions[table_id])
    return latest, frozenset(taken)


def _earlier_txlake(record: GlobalRecord, existing: Sequence[Action]) -> bool:
    """A commit an earlier claimed version (or its compensation) made: validated before our claim."""
    m = marker(existing)
    if m is None:
        return False
    g = m.get("globalVersion")
    return isinstance(g, int) and g < record.version


PUBLISH_CONCURRENCY = 16
"""Tables of one record published at once (each waits only for earlier claims on itself)."""


@dataclass(frozen=True, slots=True)
class _TableOutcome:
    """How publishing one table of a record ended: its Delta version, or why it could not be published."""

    table_id: str
    version: int | None = None
    published: _Published | None = None
    error: Exception | None = None


def _finish_abort(glog: GlobalLog, log: DeltaLog, version: int, existing: Sequence[Action]) -> None:
    """If ``existing`` (at ``version``) is an aborted version's commit, make sure its compensation follows it.

    The version's decider compensates right after deciding; until then (or after its crash) a later claim
    publishing on the table must not put its commit on top of the aborted one, so it compensates first
    (idempotent: an existing compensation by that transaction is recognised).
    """
    m = marker(existing)
    if m is None or m.get("compensates"):
        return
    g = m.get("globalVersion")
    if not isinstance(g, int):
        return
    outcome = glog.read_outcome(g)
    if outcome is None or outcome.committed:
        return
    _compensate(log, glog.read_record(g), version, [a for a in existing if not isinstance(a, CommitInfo)])


def _table_name(glog: GlobalLog, record: GlobalRecord, change: TableChange) -> str:
    """The table's name for errors, from the newest state this client knows (no request); else its path."""
    state = glog.nearest_state(record.version)
    entry = state.tables.get(change.table_id) if state is not None else None
    return entry.name if entry is not None else change.path


def _publish_table(
    store: ObjectStore, glog: GlobalLog, record: GlobalRecord, change: TableChange, await_decided: AwaitDecided
) -> _TableOutcome:
    after, taken = _before(glog, record, change.table_id, await_decided)
    log = DeltaLog(store, change.path, name=_table_name(glog, record, change))
    actions = load_actions(store, change)

    def ours(m: dict[str, object] | None) -> bool:
        return m is not None and m.get("txn") == record.txid and not m.get("compensates")

    # ours as a conflict check sees it (its schema from the base snapshot): built at the first plain commit met,
    # once per publication, not per plain commit
    pending = functools.cache(functools.partial(_pending, store, change, actions, log))

    def foreign(version: int, existing: list[Action]) -> None:
        """Another commit in the table's log ahead of ours: an earlier claim's, or a plain writer's."""
        if _earlier_txlake(record, existing):
            _finish_abort(glog, log, version, existing)
            return
        m = marker(existing)
        if m is not None and isinstance(m.get("globalVersion"), int) and not m.get("compensates"):
            # a txlake commit for this or a later global version, not ours: only a log that lost entries
            # (deleted outside txlake) lets a version be claimed twice; never adopt it as a plain writer's
            raise CorruptLogError(
                f"Delta commit {version} of {change.path} was written by txlake transaction {m.get('txn')} for "
                f"global version {m.get('globalVersion')}, not by {record.txid}: the lakehouse log lost entries "
                "(run `txlake doctor`)",
                table=change.path,
                version=version,
            )
        summary = ChangeSummary.of(existing)
        check(
            pending(),
            summary,
            record.isolation,
            read_version=record.read_version,
            winning_version=summary.global_version,
            delta_version=version,
        )

    try:
        # commits between what this record validated and the earlier claims' last one: those claims'
        # own slots are known; anything else there (plain writers an earlier claim walked over, aborted
        # claims' commits and their compensations) is looked at -- also for tables this record only read
        found: int | None = None
        for v in range(change.base_version + 1, after + 1):
            if v in taken:
                continue
            existing = log.read_commit(v)
            if ours(marker(existing)):
                found = v
                break
            foreign(v, existing)
        if not change.writes:  # read (serializable, or a DML statement that matched nothing) or adopted
            adopted = change.adopted_from is not None
            return _TableOutcome(change.table_id, max(change.base_version, after) if adopted else None)
        if found is None:
            found = _put_walking(log, max(change.base_version, after) + 1, delta_commit(record, change), ours, foreign)
    except (ConflictError, InvalidObjectPathError, CorruptLogError) as exc:
        return _TableOutcome(change.table_id, error=exc)
    return _TableOutcome(change.table_id, found, (change.table_id, log, found, actions))


def publish(store: ObjectStore, glog: GlobalLog, record: GlobalRecord, await_decided: AwaitDecided) -> PublishResult:
    """Publish every table change of ``record`` and decide its outcome (idempotent, any client).

    Tables are published concurrently. A table's commit goes to the first free Delta version after every
    earlier claim's commit on that table (``await_decided`` waits for those). Plain writers' commits met on
    the way are conflict-checked; an incompatible one aborts the version (decided first, then the tables
    already published are compensated). Other failures are raised: publication can simply be run again.
    """
    changes = sorted(record.tables, key=lambda c: c.table_id)
    outcomes = map_concurrently(
        lambda c: _publish_table(store, glog, record, c, await_decided), changes, max_workers=PUBLISH_CONCURRENCY
    )
    done = [o.published for o in outcomes if o.published is not None]
    for o in outcomes:  # in table-id order: every client names the same reason
        if isinstance(o.error, ConflictError):
            return _abort(glog, record, done, f"plain writer: {o.error}", conflict=o.error)
        if isinstance(o.error, InvalidObjectPathError):
            # deterministic: every client would fail the same way, so the version is decided aborted
            # (compensating what is published) instead of blocking the log forever
            return _abort(glog, record, done, f"unpublishable: {o.error}", unpublishable=o.error)
    versions = {o.table_id: o.version for o in outcomes if o.version is not None}
    outcome = glog.decide(Outcome(record.version, record.txid, "committed", versions, now_ms()))
    if not outcome.committed:
        # a helper decided aborted (our lease had expired) while we were still publishing: undo ours too
        _compensate_all(record, done)
    return PublishResult(outcome, published=frozenset(t for t, *_ in done))


def _compensate_all(record: GlobalRecord, done: Sequence[_Published]) -> None:
    for _, done_log, done_version, done_actions in done:
        _compensate(done_log, record, done_version, done_actions)


def _abort(
    glog: GlobalLog,
    record: GlobalRecord,
    done: Sequence[_Published],
    reason: str,
    *,
    conflict: ConflictError | None = None,
    unpublishable: InvalidObjectPathError | None = None,
) -> PublishResult:
    """Decide ``aborted`` (unless decided already), then compensate the tables already published.

    Deciding first means a version another client decided ``committed`` is never compensated. A crash
    between the two leaves an aborted commit without its compensation: the next writer of the table
    finishes it (:func:`compensate_aborted`) before it adopts anything there.
    """
    published = frozenset(t for t, *_ in done)
    outcome = glog.decide(Outcome(record.version, record.txid, "aborted", {}, now_ms(), reason=reason))
    if outcome.committed:  # another client finished it first: nothing to undo
        return PublishResult(outcome, published=published)
    _compensate_all(record, done)
    return PublishResult(outcome, conflict, unpublishable, published)


def compensate_aborted(glog: GlobalLog, log: DeltaLog, commits: Mapping[int, Sequence[Action]]) -> bool:
    """Compensate commits of aborted global versions that no compensation follows (a crash left them).

    ``commits`` are the table's commits beyond the lakehouse's map. Returns whether anything was written.
    """
    compensated = {str(m.get("txn")) for a in commits.values() if (m := marker(a)) is not None and m.get("compensates")}
    wrote = False
    for version in sorted(commits):
        m = marker(commits[version])
        if m is None or m.get("compensates") or str(m.get("txn")) in compensated:
            continue
        g = m.get("globalVersion")
        if not isinstance(g, int):
            continue
        outcome = glog.read_outcome(g)
        if outcome is None or outcome.committed:
            continue  # undecided (its publisher decides and compensates) or committed
        actions = [a for a in commits[version] if not isinstance(a, CommitInfo)]
        _compensate(log, glog.read_record(g), version, actions)
        wrote = True
    return wrote
