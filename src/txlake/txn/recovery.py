"""Resume a crashed process's transaction from its sublog, and recover (roll forward or abort) dead ones.

Both first take the transaction's lease over (``take_over``: put-if-absent of the next epoch, refused while the
lease is alive), so that the previous holder, which checks its lease before every claim, can no longer claim;
only then is the sublog's list of claims final, and exactly one client acts on it. See docs/protocol.md,
"Sublog, resume and recover".
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Literal

from txlake.delta.actions import now_ms
from txlake.delta.files import decode_path, resolve_file
from txlake.errors import (
    LeaseHeldError,
    TransactionNotFoundError,
    TransactionNotResumableError,
    TxlakeError,
    VersionNotFoundError,
)
from txlake.lakehouse.records import LakehouseState
from txlake.txn.lease import LeaseHandle, lease_path, read_lease, take_over, txn_dir
from txlake.txn.staging import TableWork
from txlake.txn.sublog import (
    StagedState,
    Sublog,
    SublogWriter,
    list_transactions,
    read_sublog,
    tombstone_path,
    write_tombstone,
)
from txlake.txn.transaction import Transaction

if TYPE_CHECKING:
    from txlake.txn.context import LakeContext

_log = logging.getLogger("txlake")

DEFAULT_GUARD = timedelta(minutes=10)
"""``recover`` deletes an aborted transaction's files only once it has been silent this long."""
TOMBSTONE_RETENTION = timedelta(hours=26)
"""A tombstone (``aborted.json``) is kept this long, then vacuum's orphan rule covers everything it named."""

RecoveryAction = Literal["live", "rolled_forward", "aborted", "pending", "cleaned", "ended", "skipped"]
FINISHED: frozenset[RecoveryAction] = frozenset({"rolled_forward", "aborted", "cleaned", "ended"})
"""What ``recover`` did to a transaction that is over: its emptied directory may go."""


@dataclass(frozen=True, slots=True)
class RecoveredTransaction:
    """What ``recover`` did (or, in a dry run, would do) with one transaction directory."""

    txid: str
    action: RecoveryAction
    """``live``: its lease is renewed, nothing touched. ``rolled_forward``: it had claimed; its version is now
    decided (``status``). ``aborted``: taken over, tombstoned, its staged files deleted. ``pending``: aborted,
    its files are kept until it has been silent for the guard. ``cleaned``: only leftovers of an ended
    transaction (an old tombstone, an empty sublog) were deleted. ``ended``: its holder ended it while recover
    looked (its sublog went before recover took the lease over): nothing to do, nothing left. ``skipped``: no
    sublog (a lease of another kind, Spark staging): left to its owner and vacuum."""
    detail: str = ""
    version: int | None = None
    status: str | None = None
    files: tuple[str, ...] = ()
    """Keys of the staged files deleted (or, in a dry run, to delete)."""


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """The result of :meth:`Lakehouse.recover`."""

    dry_run: bool
    guard: timedelta
    transactions: tuple[RecoveredTransaction, ...] = field(default_factory=tuple)

    def _with(self, action: RecoveryAction) -> list[RecoveredTransaction]:
        return [t for t in self.transactions if t.action == action]

    @property
    def live(self) -> list[RecoveredTransaction]:
        return self._with("live")

    @property
    def rolled_forward(self) -> list[RecoveredTransaction]:
        return self._with("rolled_forward")

    @property
    def aborted(self) -> list[RecoveredTransaction]:
        return self._with("aborted") + self._with("pending")

    @property
    def deleted_files(self) -> list[str]:
        return [f for t in self.transactions for f in t.files]


# ------------------------------------------------------------------------------------------------ resume


def resume(ctx: LakeContext, txid: str) -> Transaction:
    """Continue transaction ``txid`` of a dead process (see :meth:`Lakehouse.resume`)."""
    store = ctx.store
    sublog = read_sublog(store, txid)
    if sublog.aborted:
        raise TransactionNotResumableError(f"transaction {txid} was aborted by recover", txid=txid, reason="aborted")
    if sublog.header is None:
        raise TransactionNotFoundError(f"transaction {txid} has no sublog to resume from", txid=txid)
    lease = take_over(store, txid, ctx.lease_seconds, owner=ctx.heartbeat.owner)  # LeaseHeldError if alive
    handle = ctx.heartbeat.adopt(lease)
    try:
        sublog = read_sublog(store, txid)  # final now: its holder stopped writing before its lease expired
        if _ended_meanwhile(ctx, sublog, handle):
            ctx.store.remove_empty_dir(txn_dir(txid))
            raise TransactionNotFoundError(f"transaction {txid} ended meanwhile: nothing to resume", txid=txid)
        if sublog.aborted:
            raise TransactionNotResumableError(
                f"transaction {txid} was aborted by recover", txid=txid, reason="aborted"
            )
        claimed = _claimed_version(ctx, sublog)
        if claimed is not None:
            outcome = ctx.await_decided(claimed)  # rolled forward here after its lease, never claimed twice
            status = "committed" if outcome.committed else "aborted"
            _delete_sublog(ctx, read_sublog(store, txid), keep_lease=False)  # decided: the directory is done
            raise TransactionNotResumableError(
                f"transaction {txid} already claimed lakehouse version {claimed}: {status}",
                txid=txid,
                reason="decided",
                status=status,
                version=claimed,
            )
        if not sublog.resumable:
            raise TransactionNotResumableError(
                f"transaction {txid} changed the catalog or created a table: resume cannot rebuild it; "
                "`txlake recover` aborts it",
                txid=txid,
                reason="unsupported",
            )
        return _rebuild(ctx, sublog, handle)
    except BaseException:
        # our epoch stays (expired soon): the fence against the previous holder, whose late renewal would
        # otherwise go unnoticed
        ctx.heartbeat.release(handle, delete=False)
        raise


def _ended_meanwhile(ctx: LakeContext, sublog: Sublog, handle: LeaseHandle) -> bool:
    """Whether the holder ended the transaction between our look and our take-over (it deletes its sublog, then
    its lease: we took over a sublog without header). Then nothing is left to finish or fence: our lease goes."""
    if sublog.header is not None or sublog.aborted:
        return False
    ctx.heartbeat.release(handle, delete=True)
    return True


def _rebuild(ctx: LakeContext, sublog: Sublog, handle: LeaseHandle) -> Transaction:
    """A :class:`Transaction` holding exactly the staged state the sublog records (no data file is written)."""
    header = sublog.header
    assert header is not None
    start: LakehouseState = ctx.glog.state_at(header.read_version)
    states = sublog.staged_states()
    works: dict[str, TableWork] = {}
    for table_id, state in states.items():
        entry = start.tables.get(table_id)
        if entry is None:
            raise TransactionNotResumableError(
                f"transaction {header.txid} wrote table {table_id}, unknown at its read version",
                txid=header.txid,
                reason="unsupported",
            )
        snapshot = ctx.snapshots.get(entry, start.table_versions[table_id])
        works[table_id] = _work_of(TableWork(entry, snapshot, ctx.store, header.txid), state)
    writer = SublogWriter(ctx.store, header, synchronous=True)
    # every object there goes when the resumed transaction ends (older lease epochs too; ours is released)
    writer.resume_from(
        len(sublog.entries), {}, [k for k in sublog.keys if k != lease_path(header.txid, handle.lease.epoch)]
    )
    writer.adopt_written(works.values())
    forms = [e.statement for e in sublog.entries if e.statement is not None]
    tx = Transaction(ctx, header.isolation, redo=header.redo, resumable=True)
    tx._restore(
        txid=header.txid,
        start=start,
        started_ms=header.started_ms,
        works=works,
        forms=forms,
        read_data=any(e.read_data for e in sublog.entries),
        lease=handle,
        sublog=writer,
    )
    return tx


def _work_of(work: TableWork, state: StagedState) -> TableWork:
    work.added = dict(state.staged)
    work.removed = dict(state.removed)
    work.operations = list(state.operations)
    work.dml_predicates = list(state.dml_predicates)
    work.dml_files = set(state.dml_files)
    work.query_predicates = list(state.query_predicates)
    work.query_files = set(state.query_files)
    work.only_appends = state.only_appends
    work.dv_files = list(state.dv_files)
    work.new_metadata = state.new_metadata
    return work


def _claimed_version(ctx: LakeContext, sublog: Sublog) -> int | None:
    """The version the transaction claimed (its record, or a group's naming it), if any of its claims landed."""
    for version in reversed(sublog.claims):
        try:
            record = ctx.glog.read_record(version)
        except VersionNotFoundError:
            continue  # never claimed by anyone: its holder stopped before (or the claim failed)
        if record.includes(sublog.txid):
            return version
    return None


def _delete_sublog(ctx: LakeContext, sublog: Sublog, *, keep_lease: bool) -> None:
    keys = [k for k in sublog.keys if not k.endswith("/aborted.json") and not (keep_lease and "/lease-" in k)]
    if keys:
        ctx.store.delete_many(keys)


# ----------------------------------------------------------------------------------------------- recover


def recover(
    ctx: LakeContext,
    *,
    guard: timedelta = DEFAULT_GUARD,
    dry_run: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> RecoveryReport:
    """Roll forward the dead transactions that claimed, abort the others (see :meth:`Lakehouse.recover`)."""
    directories = list_transactions(ctx.store)
    results: list[RecoveredTransaction] = _expired_claims(ctx, set(directories), dry_run)
    for i, (txid, keys) in enumerate(sorted(directories.items())):
        try:
            results.append(_recover_one(ctx, txid, keys, guard, dry_run))
        except LeaseHeldError as exc:
            results.append(RecoveredTransaction(txid, "live", f"taken over by another client meanwhile ({exc})"))
        except TxlakeError as exc:
            _log.warning("txlake: recover %s: %s", txid, exc)
            results.append(RecoveredTransaction(txid, "skipped", f"{type(exc).__name__}: {exc}"))
        if not dry_run and results[-1].action in FINISHED:
            # (local: deleting its objects left the directory; never that of a transaction still at work, whose
            # next write into it would find it gone)
            ctx.store.remove_empty_dir(txn_dir(txid))
        if progress is not None:
            progress(i + 1, len(directories))
    return RecoveryReport(dry_run, guard, tuple(results))


def _expired_claims(ctx: LakeContext, with_sublog: set[str], dry_run: bool) -> list[RecoveredTransaction]:
    """Claims in the log whose lease expired undecided, of transactions without a sublog (those with one are
    recovered from it): decided by rolling them forward, as the next writer would. Until then plain Delta readers
    may see some of such a transaction's tables published and others not (docs/protocol.md, "Failure paths")."""
    try:
        expired = ctx.glog.view().expired(now_ms())
    except TxlakeError as exc:
        _log.warning("txlake: recover: reading the log: %s", exc)
        return []
    out: list[RecoveredTransaction] = []
    for record in expired:
        if record.txid in with_sublog:
            continue
        if dry_run:
            out.append(
                RecoveredTransaction(
                    record.txid, "rolled_forward", "claimed, lease expired: would decide it", record.version
                )
            )
            continue
        try:
            outcome = ctx.await_decided(record.version)
        except TxlakeError as exc:
            _log.warning("txlake: recover: rolling global version %d forward: %s", record.version, exc)
            out.append(RecoveredTransaction(record.txid, "skipped", f"{type(exc).__name__}: {exc}", record.version))
            continue
        status = "committed" if outcome.committed else "aborted"
        out.append(
            RecoveredTransaction(
                record.txid, "rolled_forward", "claimed, lease expired: decided", record.version, status
            )
        )
    return out


def _recover_one(ctx: LakeContext, txid: str, keys: list[str], guard: timedelta, dry_run: bool) -> RecoveredTransaction:
    store = ctx.store
    names = {k.rsplit("/", 1)[-1] for k in keys if k.count("/") == 3}
    has_sublog = "header.json" in names or "aborted.json" in names
    if not has_sublog:
        return RecoveredTransaction(txid, "skipped", "no sublog (a lease of another kind, or Spark staging)")
    lease = read_lease(store, txid)
    tombstoned = "aborted.json" in names  # aborted for good, fenced by an earlier recover: liveness is moot
    if lease is not None and not lease.expired() and not tombstoned:
        return RecoveredTransaction(txid, "live", f"lease held by {lease.owner}")
    sublog = read_sublog(store, txid)
    silent_ms = now_ms() - sublog.newest_ms
    leftovers = [k for k in sublog.keys if not k.endswith("/aborted.json") and "/lease-" not in k]
    if sublog.header is None and sublog.aborted and not leftovers:
        if now_ms() - sublog.aborted_ms < TOMBSTONE_RETENTION.total_seconds() * 1000:
            return RecoveredTransaction(txid, "skipped", "aborted earlier; tombstone and fencing lease kept")
        if not dry_run:  # older than any transaction may commit: the fence is no longer needed
            store.delete_many([k for k in sublog.keys if k != tombstone_path(txid)])
            store.delete(tombstone_path(txid))
        return RecoveredTransaction(txid, "cleaned", "old tombstone")
    if dry_run:
        claimed = _claimed_version(ctx, sublog)
        if claimed is not None:
            return RecoveredTransaction(txid, "rolled_forward", "claimed: would make sure it is decided", claimed)
        files = _staged_keys(ctx, sublog)
        pending = silent_ms < guard.total_seconds() * 1000
        return RecoveredTransaction(
            txid, "pending" if pending else "aborted", "would abort", files=() if pending else tuple(files)
        )
    if tombstoned:
        return _delete_aborted(ctx, read_sublog(store, txid), silent_ms, guard)
    taken = take_over(store, txid, ctx.lease_seconds, owner=ctx.heartbeat.owner)  # fencing: no claim after this
    handle = ctx.heartbeat.adopt(taken)
    try:
        sublog = read_sublog(store, txid)
        if _ended_meanwhile(ctx, sublog, handle):
            return RecoveredTransaction(txid, "ended", "ended by its holder meanwhile")
        claimed = None if sublog.aborted else _claimed_version(ctx, sublog)
        if claimed is not None:
            outcome = ctx.await_decided(claimed)
            status = "committed" if outcome.committed else "aborted"
            ctx.heartbeat.release(handle, delete=False)
            _delete_sublog(ctx, read_sublog(store, txid), keep_lease=False)  # decided: the directory is done
            return RecoveredTransaction(txid, "rolled_forward", f"claimed version {claimed}", claimed, status)
        if not sublog.aborted:
            write_tombstone(store, txid, "recovered: lease expired before any claim")
        return _delete_aborted(ctx, sublog, silent_ms, guard)
    finally:
        # our epoch stays as the fence (with the tombstone) until both are older than any transaction may live
        ctx.heartbeat.release(handle, delete=False)


def _delete_aborted(ctx: LakeContext, sublog: Sublog, silent_ms: int, guard: timedelta) -> RecoveredTransaction:
    """Delete a tombstoned transaction's staged files, then its sublog, once it has been silent for ``guard``."""
    if silent_ms < guard.total_seconds() * 1000:
        return RecoveredTransaction(sublog.txid, "pending", "aborted; files kept until the guard age")
    files = _staged_keys(ctx, sublog)
    if files:
        ctx.store.delete_many(files)
    _delete_sublog(ctx, sublog, keep_lease=True)
    return RecoveredTransaction(sublog.txid, "aborted", "lease expired before any claim", files=tuple(files))


def _staged_keys(ctx: LakeContext, sublog: Sublog) -> list[str]:
    """Store keys of the staged files the sublog names, only the transaction's own (``part-<txid>-``, DV files)."""
    keys: list[str] = []
    for table_path, path in sublog.files():
        if not table_path:
            keys.append(path)  # a deletion-vector file: recorded by key
            continue
        if not decode_path(path).rsplit("/", 1)[-1].startswith(f"part-{sublog.txid}-"):
            continue  # a clone's or restore's borrowed file: never ours to delete
        store, key = resolve_file(ctx.store, table_path, path)
        if store is ctx.store:
            keys.append(key)
    return keys


__all__ = ["DEFAULT_GUARD", "RecoveredTransaction", "RecoveryReport", "recover", "resume"]
