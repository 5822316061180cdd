"""Group commit: transactions that lost a claim race join the version the next claimer claims.

A writer that lost the claim of global version ``G`` re-validates against the winner's record and, when its
transaction is *groupable* (blind appends only: no reads, no catalog change, nothing adopted), posts it as
an intent under ``_txlake/groups/<G+1>/<txid>.json`` before racing for ``G+1`` itself. Whoever claims
``G+1`` lists the intents for ``G+1`` and merges every compatible one into its record (``members``), so a
burst of writers needs one claim, one outcome and one Delta commit per table instead of one of each per
writer.

Every intent is bound to one version: it can be merged only into the record of the version its key names.
Once that record exists the intent is decided -- the record names its txid (it commits or aborts with that
version) or it does not (it never can, and its owner tries again under a new key). So an owner never needs
to withdraw an intent, and an owner told "failed" can never see its transaction appear later.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from txlake.delta.actions import Add, now_ms
from txlake.errors import CorruptLogError, ObjectNotFoundError, TxlakeError
from txlake.lakehouse.ages import MAX_INTENT_AGE
from txlake.lakehouse.log import ROOT
from txlake.lakehouse.records import GlobalRecord, TableChange
from txlake.storage import ObjectStore
from txlake.storage.threads import map_concurrently

GROUPS_DIR = f"{ROOT}/groups"
MAX_MEMBERS = 64
"""Most transactions merged into one version (bounds the record's size and the claimer's reads)."""
READ_CONCURRENCY = 16


def intent_dir(version: int) -> str:
    return f"{GROUPS_DIR}/{version:020d}/"


def intent_path(version: int, txid: str) -> str:
    return f"{intent_dir(version)}{txid}.json"


def _pure_append(change: TableChange) -> bool:
    return (
        change.writes
        and change.blind_append
        and change.adopted_from is None
        and change.dml_reads.empty
        and change.query_reads.empty
        and all(isinstance(a, Add) for a in change.actions)
    )


def groupable(record: GlobalRecord) -> bool:
    """Whether another claimer may commit this transaction in its version: only blind appends.

    Blind appends read nothing, so putting one after any other transaction of the same version keeps
    every isolation level; they conflict only with a schema or catalog change of their table, which the
    claimer rules out in :func:`merge`.
    """
    return bool(record.tables) and not record.catalog and not record.members and all(map(_pure_append, record.tables))


def post_intent(store: ObjectStore, record: GlobalRecord) -> None:
    """Offer ``record`` to the claimer of ``record.version`` (one PUT)."""
    store.put(intent_path(record.version, record.txid), record.to_bytes())


def _read_intent(store: ObjectStore, path: str, version: int) -> GlobalRecord | None:
    try:
        record = GlobalRecord.from_bytes(store.get(path), version=version)
    except (ObjectNotFoundError, CorruptLogError):
        return None
    expected = f"{record.txid}.json"
    if record.version != version or not path.endswith("/" + expected) or not groupable(record):
        return None  # not a well-formed intent for this version: never merged
    if record.timestamp_ms < now_ms() - MAX_INTENT_AGE.total_seconds() * 1000:
        return None  # too old: vacuum may have deleted its files (see txlake.lakehouse.ages)
    return record


def listed(store: ObjectStore, version: int) -> list[str]:
    """The keys of the intents posted for ``version``, in txid order (one LIST; none if it fails)."""
    try:
        return sorted(m.path for m in store.list(intent_dir(version)) if m.path.endswith(".json"))
    except TxlakeError:
        return []


def leader(paths: Sequence[str]) -> str | None:
    """The txid whose owner claims the version when several writers that posted an intent for it find it
    unclaimed: the smallest of those ``paths`` (:func:`listed`) name. The others wait for its claim instead of
    each reading every intent and racing to claim (see ``Commit._defer``)."""
    return paths[0].rsplit("/", 1)[-1].removesuffix(".json") if paths else None


def collect(store: ObjectStore, version: int, paths: Sequence[str], *, exclude: str) -> list[GlobalRecord]:
    """The groupable intents for ``version`` among ``paths`` (what :func:`listed` gave; one GET each),
    ``exclude``'s left out.

    Best effort: a failed LIST or GET only leaves intents out (their owners try the next version).
    """
    paths = [p for p in paths if not p.endswith(f"/{exclude}.json")][:MAX_MEMBERS]
    if not paths:
        return []

    def read(path: str) -> GlobalRecord | None:
        try:
            return _read_intent(store, path, version)
        except TxlakeError:
            return None

    found = map_concurrently(read, paths, max_workers=READ_CONCURRENCY)
    return [r for r in found if r is not None]


def clean(store: ObjectStore, through: int) -> int:
    """Delete the intents of versions up to ``through`` (all claimed, so all decided in or out); their count.

    Best effort and safe at any time: a claimer still reading an intent of such a version finds it gone and
    leaves it out, and its claim of that version fails anyway.
    """
    try:
        paths = [
            m.path for m in store.list(GROUPS_DIR + "/") if (v := _intent_version(m.path)) is not None and v <= through
        ]
    except TxlakeError:
        return 0
    try:
        store.delete_many(paths)
    except TxlakeError:
        return 0
    for directory in sorted({path.rsplit("/", 1)[0] for path in paths}):
        store.remove_empty_dir(directory)  # local disk: a directory per contended version otherwise stays
    return len(paths)


def _intent_version(path: str) -> int | None:
    """The version an intent's key names (``None``: not an intent's key, never deleted)."""
    parts = path.rsplit("/", 2)
    return int(parts[-2]) if len(parts) == 3 and parts[-2].isdigit() else None


def merge(record: GlobalRecord, intents: Sequence[GlobalRecord], *, live_tables: frozenset[str]) -> GlobalRecord:
    """``record`` with every compatible intent merged in (their appends follow the claimer's changes).

    An intent is left out when the claimer changes the catalog (a drop or rename could touch its tables),
    when the claimer's own change of one of its tables is not a blind append (a schema change or a rewrite
    that the append was not validated against), or when one of its tables is not in ``live_tables`` (the
    tables of the claimed state the claimer validated against).
    """
    if record.catalog or not intents:
        return record
    own = {c.table_id: c for c in record.tables}
    merged: dict[str, TableChange] = dict(own)
    order = [c.table_id for c in record.tables]
    members: list[str] = []
    for intent in intents:
        if len(members) >= MAX_MEMBERS or intent.txid == record.txid or intent.version != record.version:
            continue
        if any(
            c.table_id not in live_tables or (c.table_id in own and not _pure_append(own[c.table_id]))
            for c in intent.tables
        ):
            continue
        for change in intent.tables:
            current = merged.get(change.table_id)
            if current is None:
                merged[change.table_id] = change
                order.append(change.table_id)
            else:
                merged[change.table_id] = dataclasses.replace(
                    current,
                    base_version=min(current.base_version, change.base_version),
                    actions=current.actions + change.actions,
                )
        members.append(intent.txid)
    if not members:
        return record
    return dataclasses.replace(record, tables=tuple(merged[t] for t in order), members=tuple(members))
