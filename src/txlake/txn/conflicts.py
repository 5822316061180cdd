"""Conflict detection (DESIGN §4): a committing transaction against each winning change since its start.

Granularity is the data file, refined by predicates evaluated on per-file min/max statistics
(precision locking). Winners are lakehouse records committed after the transaction's read version and
commits by plain Delta writers that the lakehouse has not adopted yet.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pyarrow as pa

from txlake.delta.actions import Action, Add, CommitInfo, Metadata, Protocol, Remove, Txn
from txlake.errors import (
    ConcurrentAppendError,
    ConcurrentDeleteDeleteError,
    ConcurrentDeleteReadError,
    ConcurrentTransactionError,
    ConflictError,
    MetadataChangedError,
    PredicateError,
    ProtocolChangedError,
)
from txlake.expr import FileStats, parse_predicate
from txlake.lakehouse.records import Isolation, ReadSet


@dataclass(frozen=True, slots=True)
class IsolationPolicy:
    """What an isolation level validates, in one place (the checks themselves are in :func:`check`).

    - snapshot: write-write conflicts on files and metadata only;
    - write_serializable: also the reads of the transaction's update/delete/merge/overwrite statements;
    - serializable: also its queries (``read_arrow``/``read``) and its catalog reads, on every table it read.
    """

    level: Isolation

    @property
    def query_reads(self) -> bool:
        """Whether queries (and catalog lookups) join the read set that is validated and recorded."""
        return self.level == "serializable"

    @property
    def dml_reads(self) -> bool:
        return self.level != "snapshot"

    def validates(self, *, writes: bool, dml_reads: bool, query_reads: bool) -> bool:
        """Whether a table the transaction touched this way must be validated against concurrent changes."""
        return writes or dml_reads or (self.query_reads and query_reads)

    def records(self, *, writes: bool, dml_reads: bool, query_reads: bool) -> bool:
        """Whether the table appears in the transaction's global record: written, or read in a way this level
        validates (publication checks those reads against plain commits an earlier claim absorbed)."""
        return self.validates(writes=writes, dml_reads=self.dml_reads and dml_reads, query_reads=query_reads)


@dataclass(frozen=True, slots=True)
class ChangeSummary:
    """The conflict-relevant effect of one commit on one table."""

    added: tuple[Add, ...]
    removed: frozenset[str]
    removed_data: frozenset[str]
    metadata_changed: bool
    protocol_changed: bool
    app_ids: frozenset[str]
    global_version: int | None = None

    @classmethod
    def of(cls, actions: Iterable[Action]) -> ChangeSummary:
        added: list[Add] = []
        removed: set[str] = set()
        removed_data: set[str] = set()
        meta = proto = False
        apps: set[str] = set()
        global_version: int | None = None
        for a in actions:
            if isinstance(a, Add):
                if a.data_change:
                    added.append(a)
            elif isinstance(a, Remove):
                removed.add(a.path)
                if a.data_change:
                    removed_data.add(a.path)
            elif isinstance(a, Metadata):
                meta = True
            elif isinstance(a, Protocol):
                proto = True
            elif isinstance(a, Txn):
                apps.add(a.app_id)
            elif isinstance(a, CommitInfo) and a.txlake is not None:
                g = a.txlake.get("globalVersion")
                global_version = g if isinstance(g, int) else None
        return cls(
            tuple(added), frozenset(removed), frozenset(removed_data), meta, proto, frozenset(apps), global_version
        )

    @property
    def writes_data(self) -> bool:
        return bool(self.added or self.removed)


@dataclass(frozen=True, slots=True)
class PendingChange:
    """The committing transaction's side for one table."""

    table: str
    schema: pa.Schema
    partition_columns: tuple[str, ...]
    mine: ChangeSummary
    dml_reads: ReadSet
    query_reads: ReadSet

    @property
    def writes(self) -> bool:
        return self.mine.writes_data or self.mine.metadata_changed


def _may_match_any(adds: Sequence[Add], predicates: Sequence[str | None], pending: PendingChange) -> list[str]:
    """Paths of winner adds that may contain rows matching any of ``predicates`` (``None`` = all rows)."""
    if not adds or not predicates:
        return []
    if any(p is None for p in predicates):
        return [a.path for a in adds]
    bound = []
    for sql in predicates:
        assert sql is not None
        try:
            bound.append(parse_predicate(sql).bind(pending.schema))
        except PredicateError:
            return [a.path for a in adds]  # the schema changed under the predicate: be safe
    hits = []
    for add in adds:
        stats = FileStats.from_add(add, pending.schema, pending.partition_columns)
        if any(b.may_match(stats) for b in bound):
            hits.append(add.path)
    return hits


def check(
    pending: PendingChange,
    winner: ChangeSummary,
    isolation: Isolation,
    *,
    read_version: int | None,
    winning_version: int | None,
    delta_version: int | None = None,
) -> None:
    """Raise the typed :class:`ConflictError` subclass if ``winner`` conflicts with ``pending``."""

    def conflict(kind: type[ConflictError], message: str, files: Sequence[str] = ()) -> ConflictError:
        return kind(
            message,
            table=pending.table,
            read_version=read_version,
            winning_version=winning_version,
            delta_version=delta_version,
            files=files,
        )

    if pending.writes and winner.protocol_changed:
        raise conflict(ProtocolChangedError, f"the protocol of {pending.table} changed concurrently")
    if (pending.writes and winner.metadata_changed) or (pending.mine.metadata_changed and winner.writes_data):
        raise conflict(MetadataChangedError, f"the metadata of {pending.table} changed concurrently")
    both = pending.mine.removed & winner.removed
    if both:
        raise conflict(
            ConcurrentDeleteDeleteError,
            f"{len(both)} file(s) of {pending.table} were removed concurrently",
            sorted(both),
        )
    apps = pending.mine.app_ids & winner.app_ids
    if apps:
        raise conflict(
            ConcurrentTransactionError,
            f"application transaction {sorted(apps)} of {pending.table} committed concurrently",
        )
    policy = IsolationPolicy(isolation)
    if not policy.dml_reads:
        return
    # A DML statement's predicate read decided what it wrote (even when it matched nothing), so it is
    # validated at write_serializable; query reads only at serializable.
    reads = pending.dml_reads
    if policy.query_reads:
        reads = reads.union(pending.query_reads)
    gone = reads.files & winner.removed_data
    if gone:
        raise conflict(
            ConcurrentDeleteReadError,
            f"{len(gone)} file(s) of {pending.table} that this transaction read were removed concurrently",
            sorted(gone),
        )
    matched = _may_match_any(winner.added, reads.predicates, pending)
    if matched:
        raise conflict(
            ConcurrentAppendError,
            f"{len(matched)} file(s) added concurrently to {pending.table} may match what this transaction read",
            matched,
        )
