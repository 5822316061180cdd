"""What a transaction has staged for one table: its view of live files, reads, and pending actions."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txlake.delta.actions import Action, Add, Metadata, Protocol, Remove
from txlake.delta.dv import unique_id
from txlake.delta.features import is_append_only
from txlake.delta.files import (
    decode_path,
    load_deletion_vector,
    read_file,
    read_files,
    resolve_file,
    write_data_files,
    write_deletion_vectors,
)
from txlake.delta.roaring import U64Array
from txlake.delta.schema import conform, normalize_schema, schema_from_json
from txlake.delta.state import Snapshot
from txlake.errors import AppendOnlyTableError, PredicateError, SchemaMismatchError
from txlake.expr import BoundPredicate, FileStats, parse_predicate
from txlake.lakehouse.records import ReadSet, TableEntry
from txlake.storage import ObjectStore
from txlake.storage.store import delete_keys
from txlake.storage.uploads import Uploads

if TYPE_CHECKING:
    from txlake.txn.sublog import TableEffect

FileKey: TypeAlias = tuple[str, str | None]
"""A logical file: its path and its deletion vector's unique id (Delta's ``(path, DV)``)."""
RowTransform: TypeAlias = Callable[[pa.Table, BoundPredicate | None], tuple[pa.Table, int]]
"""(rows of one file, bound predicate) -> (the file's new rows, number of rows changed)."""


@dataclass
class TableWork:
    """One table as a transaction sees it: the snapshot at its start plus its own staged changes.

    ``snapshot`` is ``None`` for a table created by this transaction (its first Delta version is 0).
    """

    entry: TableEntry
    snapshot: Snapshot | None
    store: ObjectStore
    txid: str
    created_metadata: Metadata | None = None
    created_protocol: Protocol | None = None
    new_metadata: Metadata | None = None
    """A schema or property change of an existing table (``alter_table``), published before the data."""
    added: dict[str, Add] = field(default_factory=dict)
    removed: dict[str, Remove] = field(default_factory=dict)
    operations: list[str] = field(default_factory=list)
    dml_predicates: list[str | None] = field(default_factory=list)
    dml_files: set[str] = field(default_factory=set)
    query_predicates: list[str | None] = field(default_factory=list)
    query_files: set[str] = field(default_factory=set)
    only_appends: bool = True
    dv_files: list[str] = field(default_factory=list)
    """Keys of the deletion-vector files this transaction wrote (deleted if it never commits)."""
    read_keys: list[FileKey] = field(default_factory=list)
    """Every file a DML statement read, in order, its own staged files included (a redo's dependencies)."""
    dropped: dict[str, Add] = field(default_factory=dict)
    """Files this transaction wrote and a later statement replaced: never published, deleted with
    :meth:`release_dropped` (a redo may still read them when it keeps the statement that wrote them)."""
    owns_files: Callable[[], bool] | None = None
    """Whether this client may still delete the files it staged: ``False`` once its lease may have been taken
    over (``resume``): they are then the new holder's, and nothing is deleted here."""
    uploads: Uploads | None = None
    """The transaction's write-behind uploads (:mod:`txlake.storage.uploads`): data files go out in the
    background; ``None`` writes each file before the statement returns."""

    # ------------------------------------------------------------------------------------------- view

    @property
    def metadata(self) -> Metadata:
        if self.created_metadata is not None:
            return self.created_metadata
        if self.new_metadata is not None:
            return self.new_metadata
        assert self.snapshot is not None
        return self.snapshot.metadata

    @property
    def schema(self) -> pa.Schema:
        return schema_from_json(self.metadata.schema_string)

    @property
    def partition_columns(self) -> tuple[str, ...]:
        return self.metadata.partition_columns

    @property
    def base_version(self) -> int:
        return self.snapshot.version if self.snapshot is not None else -1

    @property
    def writes(self) -> bool:
        return bool(self.added or self.removed or self.created_metadata is not None or self.new_metadata is not None)

    def live_files(self) -> list[Add]:
        """Files visible to this transaction: the snapshot's, minus its removes, plus its adds."""
        base = [] if self.snapshot is None else [a for p, a in self.snapshot.files.items() if p not in self.removed]
        return base + list(self.added.values())

    def bind(self, where: str | None) -> BoundPredicate | None:
        return None if where is None else parse_predicate(where).bind(self.schema)

    def candidates(self, predicate: BoundPredicate | None) -> list[Add]:
        """Live files that may hold rows matching ``predicate`` (partition values and min/max stats)."""
        if predicate is None:
            return self.live_files()
        schema, parts = self.schema, self.partition_columns
        if self.snapshot is None or self.new_metadata is not None:
            return [a for a in self.live_files() if predicate.may_match(FileStats.from_add(a, schema, parts))]
        # the snapshot's files through its index (parsed once), less those removed; then the staged ones
        matching = self.snapshot.stats_index.matching(predicate.node)
        base = [a for a in matching if a.path not in self.removed] if self.removed else matching
        return base + [a for a in self.added.values() if predicate.may_match(FileStats.from_add(a, schema, parts))]

    def _held(self, add: Add) -> bytes | None:
        """The bytes of ``add`` when it is a file this transaction wrote and still holds in memory (read without
        waiting for its upload or GETting it), else ``None``."""
        if self.uploads is None or (add.path not in self.added and add.path not in self.dropped):
            return None
        return self.uploads.held(*resolve_file(self.store, self.entry.path, add.path))

    def _await(self, files: Iterable[Add]) -> None:
        """Before reading ``files``: wait for the uploads when one of them is a file this transaction wrote and
        no longer holds in memory (and raise if an upload failed). Reading others' files waits for nothing."""
        if self.uploads is not None and any(
            (a.path in self.added or a.path in self.dropped) and self._held(a) is None for a in files
        ):
            self.uploads.flush()

    def _settle_uploads(self) -> None:
        """Before deleting files this transaction wrote: let every upload in flight land or fail first."""
        if self.uploads is not None:
            self.uploads.settle()

    def _put(self) -> Callable[[str, bytes], None] | None:
        return None if self.uploads is None else functools.partial(self.uploads.put, self.store)

    def _read(self, files: Sequence[Add], columns: Sequence[str] | None = None) -> pa.Table:
        self._await(files)
        return read_files(
            self.store,
            self.entry.path,
            files,
            self.schema,
            self.partition_columns,
            columns=columns,
            table=self.entry.name,
            held=self._held,
        )

    # ------------------------------------------------------------------------------------------ reads

    def plan_query(self, where: str | None, columns: Sequence[str] | None = None) -> list[Add]:
        """The live files a query read of ``where`` covers; records the read (serializable validation)."""
        predicate = self.bind(where)
        if columns is not None:
            unknown = [c for c in columns if c not in self.schema.names]
            if unknown:
                raise SchemaMismatchError(f"unknown columns {unknown}", table=self.entry.name, columns=unknown)
        files = self.candidates(predicate)
        self.query_predicates.append(where)
        self.query_files.update(a.path for a in files if a.path not in self.added)
        return files

    def scan(self, where: str | None, columns: Sequence[str] | None) -> pa.Table:
        """Rows matching ``where`` (a query read: recorded for serializable validation)."""
        files = self.plan_query(where, columns)
        predicate = self.bind(where)
        data = self._read(files)
        if predicate is not None:
            data = predicate.filter(data)
        return data.select(list(columns)) if columns is not None else data

    # ----------------------------------------------------------------------------------------- writes

    def _stage_adds(self, adds: Iterable[Add]) -> None:
        for add in adds:
            self.added[add.path] = add

    def _drop_file(self, add: Add) -> None:
        """Logically delete a live file: our own staged file is forgotten, a snapshot file gets a remove."""
        if add.path in self.added:
            del self.added[add.path]
            # never published: nobody else can reference it; deleted at the end of the transaction (a redo that
            # keeps the statement that wrote it may have to read it again)
            self.dropped[add.path] = add
        else:
            self.check_removable()
            self.removed[add.path] = add.remove()

    def check_removable(self) -> None:
        """Refuse removing or changing rows of an append-only table (Delta's ``delta.appendOnly``)."""
        if is_append_only(self.metadata):
            raise AppendOnlyTableError(
                f"{self.entry.name} is append-only (delta.appendOnly=true): rows cannot be deleted, updated or "
                "overwritten",
                table=self.entry.name,
            )

    def write(self, data: pa.Table) -> list[Add]:
        conformed = conform(data, normalize_schema(self.schema), table=self.entry.name)
        if conformed.num_rows == 0:
            return []
        adds = write_data_files(
            self.store,
            self.entry.path,
            conformed,
            partition_columns=self.partition_columns,
            txid=self.txid,
            table=self.entry.name,
            put=self._put(),
        )
        return list(adds)

    def append(self, data: pa.Table) -> int:
        self._stage_adds(self.write(data))
        self.operations.append("WRITE")
        return int(data.num_rows)

    def stage_adds(self, adds: Iterable[Add], operation: str = "WRITE") -> None:
        """Stage data files another engine already wrote for this transaction (e.g. a Spark job) as new rows."""
        self._stage_adds(a for a in adds if a.num_records != 0)
        self.operations.append(operation)

    def replace_all(self, adds: Sequence[Add]) -> None:
        """Overwrite every live file with already written files ``adds`` (an overwrite without condition)."""
        files = self.live_files()
        self.record_dml(None, files)
        for add in files:
            self._drop_file(add)
        self._stage_adds(a for a in adds if a.num_records != 0)
        self.operations.append("OVERWRITE")

    def replace_files(self, removed: Iterable[Add], adds: Iterable[Add], operation: str) -> None:
        """Stage a copy-on-write rewrite another engine wrote: live files ``removed`` go, files ``adds`` come."""
        for add in removed:
            self._drop_file(add)
        self._stage_adds(a for a in adds if a.num_records != 0)
        self.operations.append(operation)

    def plan_compaction(self, where: str | None, target_bytes: int, zorder_by: Sequence[str] = ()) -> list[list[Add]]:
        """The bins an ``optimize`` rewrites: live files smaller than ``target_bytes`` (in partitions matching
        ``where``, which may name partition columns only), packed per partition into bins of about
        ``target_bytes``; with ``zorder_by``, every file of a partition. Each bin becomes about one file."""
        predicate = self.bind(where)
        if predicate is not None:
            outside = sorted(predicate.columns - set(self.partition_columns))
            if outside:
                raise PredicateError(
                    f"optimize's where may use partition columns only ({', '.join(self.partition_columns) or 'none'}), "
                    f"not {', '.join(outside)}",
                    expression=where or "",
                )
        self.zorder_columns(zorder_by)
        groups: dict[tuple[tuple[str, str | None], ...], list[Add]] = {}
        for add in self.candidates(predicate):
            if add.path not in self.added:
                groups.setdefault(tuple(sorted(add.partition_values.items())), []).append(add)
        bins: list[list[Add]] = []
        for files in groups.values():
            chosen = sorted(files, key=lambda a: a.path) if zorder_by else [a for a in files if a.size < target_bytes]
            bins.extend(_bins(chosen, target_bytes, whole=bool(zorder_by)))
        return bins

    def zorder_columns(self, zorder_by: Sequence[str]) -> list[str]:
        """``zorder_by`` as the table's column names (matched case-insensitively); :class:`SchemaMismatchError`
        for an unknown column, a partition column, or a column of a type without an order (struct, list, map)."""
        by_lower = {n.lower(): n for n in self.schema.names}
        unknown = [c for c in zorder_by if c.lower() not in by_lower]
        if unknown:
            raise SchemaMismatchError(
                f"zorder_by names no column of {self.entry.name}: {', '.join(unknown)} "
                f"(columns: {', '.join(self.schema.names)})",
                table=self.entry.name,
                columns=unknown,
            )
        names = [by_lower[c.lower()] for c in zorder_by]
        partitions = [c for c in names if c in self.partition_columns]
        if partitions:
            raise SchemaMismatchError(
                f"zorder_by needs data columns of {self.entry.name}, not partition columns: {', '.join(partitions)}",
                table=self.entry.name,
                columns=partitions,
            )
        nested = [c for c in names if pa.types.is_nested(self.schema.field(c).type)]
        if nested:
            raise SchemaMismatchError(
                f"zorder_by needs columns with an order; {', '.join(nested)} of {self.entry.name} is a struct, "
                "list or map",
                table=self.entry.name,
                columns=nested,
            )
        return names

    def compact(self, where: str | None, target_bytes: int, zorder_by: Sequence[str] = ()) -> tuple[int, int, int]:
        """Compaction on Arrow, in this process: each bin of :meth:`plan_compaction` read, Z-ordered when asked,
        and written again (see :meth:`stage_compaction`). Returns (files removed, files added, bytes removed).
        """
        rewritten: list[Add] = []
        written: list[Add] = []
        try:
            for bin_ in self.plan_compaction(where, target_bytes, zorder_by):
                data = self._read(bin_)
                if zorder_by:
                    data = data.take(zorder_indices(data, zorder_by))
                written.extend(
                    write_data_files(
                        self.store,
                        self.entry.path,
                        data,
                        partition_columns=self.partition_columns,
                        txid=self.txid,
                        table=self.entry.name,
                        put=self._put(),
                    )
                )
                rewritten.extend(bin_)
        except BaseException:
            self.delete_unstaged(written)  # the bins compacted before the failure: never staged
            raise
        return self.stage_compaction(rewritten, written)

    def stage_compaction(self, rewritten: Sequence[Add], written: Iterable[Add]) -> tuple[int, int, int]:
        """Stage a compaction: files ``rewritten`` replaced by ``written``, which hold the same rows. Removes and
        adds carry ``dataChange=false``, so readers and concurrent appends are unaffected; only a concurrent
        removal of a rewritten file conflicts. Returns (files removed, files added, bytes removed)."""
        adds = [dataclasses.replace(a, data_change=False) for a in written if a.num_records != 0]
        self.only_appends = False
        self.dml_files.update(a.path for a in rewritten)  # a read of these files, without a predicate
        for add in rewritten:
            self.removed[add.path] = add.remove(data_change=False)
        self._stage_adds(adds)
        self.operations.append("OPTIMIZE")
        return len(rewritten), len(adds), sum(a.size for a in rewritten)

    def change_metadata(self, metadata: Metadata, operation: str) -> None:
        """Stage a new schema or new properties (a table created in this transaction just gets them)."""
        if self.created_metadata is not None:
            self.created_metadata = metadata
        else:
            self.new_metadata = metadata
        self.only_appends = False
        self.operations.append(operation)

    def restore(self, files: Mapping[str, Add]) -> tuple[int, int]:
        """Make ``files`` (an earlier version's live files, by path) the table's live files: every other live file
        is removed, every missing one added back as it was. Reads the whole table (a DML read). Returns the
        numbers of files removed and added."""
        current = {a.path: a for a in self.live_files()}
        self.record_dml(None, current.values())
        # a logical file is (path, DV): a data file whose deletion vector changed since is removed and re-added
        same = {
            p
            for p, a in current.items()
            if p in files and unique_id(files[p].deletion_vector) == unique_id(a.deletion_vector)
        }
        removed = [a for p, a in current.items() if p not in same]
        added = [dataclasses.replace(a, data_change=True) for p, a in files.items() if p not in same]
        for add in removed:
            self._drop_file(add)
        self._stage_adds(added)
        self.operations.append("RESTORE")
        return len(removed), len(added)

    def delete_unstaged(self, adds: Iterable[Add]) -> None:
        """Delete written files that will not be staged (a statement failed after its engine wrote them)."""
        self._delete_own([a for a in adds if a.path not in self.added])

    def record_dml(self, where: str | None, files: Iterable[Add]) -> None:
        self.only_appends = False
        self.dml_predicates.append(where)
        files = list(files)
        self.dml_files.update(a.path for a in files if a.path not in self.added)
        self.read_keys.extend(file_key(a) for a in files)

    def rewrite(
        self,
        where: str | None,
        operation: str,
        transform: RowTransform,
    ) -> int:
        """Copy-on-write: for each candidate file, transform its rows; changed files are replaced."""
        predicate = self.bind(where)
        files = self.candidates(predicate)
        self.record_dml(where, files)
        touched = 0
        for add in files:
            new_rows, changed = transform(self.read_one(add), predicate)
            if changed:
                touched += changed
                self.replace_file(add, new_rows)
        self.operations.append(operation)
        return touched

    @property
    def writes_deletion_vectors(self) -> bool:
        """Whether DELETE marks rows deleted with deletion vectors (merge-on-read) instead of rewriting files: the
        table supports the ``deletionVectors`` writer feature and ``delta.enableDeletionVectors`` is ``true``."""
        protocol = self.created_protocol or (self.snapshot.protocol if self.snapshot is not None else None)
        supported = protocol is not None and "deletionVectors" in (protocol.writer_features or ())
        return supported and self.metadata.configuration.get("delta.enableDeletionVectors", "").lower() == "true"

    def delete_with_deletion_vectors(self, where: str | None, transform: RowTransform) -> int:
        """Merge-on-read DELETE: a data file with matching rows keeps its data and gets a deletion vector of its
        old DV's rows plus the matching ones (remove ``(path, old DV)``, add ``(path, new DV)``); a file left with
        no row is removed. Files this transaction wrote itself, or without ``numRecords`` (a DV needs it), are
        rewritten by ``transform`` instead. The new DVs go to one DV file. Returns the number of rows deleted."""
        predicate = self.bind(where)
        files = self.candidates(predicate)
        self.record_dml(where, files)
        columns = sorted(predicate.columns) if predicate is not None else []
        touched = 0
        marked: list[tuple[Add, U64Array]] = []
        for add in files:
            own = add.path in self.added and add.path not in self.removed
            if predicate is None or own or add.num_records is None:
                new_rows, changed = transform(self.read_one(add), predicate)
                if changed:
                    touched += changed
                    self.replace_file(add, new_rows)
                continue
            old = load_deletion_vector(self.store, self.entry.path, add, table=self.entry.name)
            physical = read_file(
                self.store,
                self.entry.path,
                dataclasses.replace(add, deletion_vector=None),
                self.schema,
                self.partition_columns,
                columns=columns or self.schema.names[:1],
                table=self.entry.name,
            )
            hits = np.flatnonzero(predicate.matches(physical).fill_null(False).to_numpy(zero_copy_only=False))
            deleted = np.union1d(old, hits.astype(np.uint64))
            if len(deleted) == len(old):
                continue
            touched += len(deleted) - len(old)
            if len(deleted) == physical.num_rows:
                self._drop_file(add)
            else:
                marked.append((add, deleted))
        if marked:
            key, descriptors = write_deletion_vectors(self.store, self.entry.path, [d for _, d in marked])
            self.dv_files.append(key)
            for (add, _), dv in zip(marked, descriptors, strict=True):
                if add.path not in self.added:  # a snapshot file; one already marked here was removed then
                    self.check_removable()
                    self.removed[add.path] = add.remove()
                self.added[add.path] = dataclasses.replace(add.with_wide_bounds(), deletion_vector=dv, data_change=True)
        self.operations.append("DELETE")
        return touched

    def rewrite_as(self, schema: pa.Schema, transform: RowTransform) -> None:
        """Rewrite every live file, reading it as ``schema`` (the schema it was written with) through
        ``transform`` (``alter_table(widen=)``)."""
        files = self.live_files()
        self.record_dml(None, files)
        self._await(files)
        for add in files:
            rows = read_file(
                self.store,
                self.entry.path,
                add,
                schema,
                self.partition_columns,
                table=self.entry.name,
                data=self._held(add),
            )
            new_rows, _ = transform(rows, None)
            self.replace_file(add, new_rows)

    def read_one(self, add: Add) -> pa.Table:
        """All rows of one live file."""
        self._await([add])
        return read_file(
            self.store,
            self.entry.path,
            add,
            self.schema,
            self.partition_columns,
            table=self.entry.name,
            data=self._held(add),
        )

    def replace_file(self, add: Add, rows: pa.Table) -> None:
        """Replace a live file by a new file holding ``rows`` (dropped entirely when empty)."""
        self._drop_file(add)
        self._stage_adds(self.write(rows))

    def overwrite_all(self, data: pa.Table) -> int:
        files = self.live_files()
        self.record_dml(None, files)
        adds = self.write(data)
        for add in files:
            self._drop_file(add)
        self._stage_adds(adds)
        self.operations.append("OVERWRITE")
        return int(data.num_rows)

    # ----------------------------------------------------------------------------------------- commit

    def actions(self) -> list[Action]:
        """The Delta actions to publish (commitInfo is added at publication)."""
        out: list[Action] = []
        if self.created_protocol is not None:
            out.append(self.created_protocol)
        if self.created_metadata is not None:
            out.append(self.created_metadata)
        if self.new_metadata is not None:
            out.append(self.new_metadata)
        if any(r.data_change for r in self.removed.values()):
            self.check_removable()  # (the table may have become append-only after its rows were removed)
        out.extend(self.removed.values())
        out.extend(self.added.values())
        return out

    def dml_reads(self) -> ReadSet:
        return ReadSet(tuple(self.dml_predicates), frozenset(self.dml_files))

    def query_reads(self) -> ReadSet:
        return ReadSet(tuple(self.query_predicates), frozenset(self.query_files))

    def operation(self) -> str:
        if self.created_metadata is not None:
            return "CREATE TABLE"
        ops = list(dict.fromkeys(self.operations))
        return ops[0] if len(ops) == 1 else "TXLAKE TRANSACTION"

    def discard(self, *, keep: Collection[str] = ()) -> None:
        """Delete every data and deletion-vector file this transaction wrote to the table (it was never published),
        except the paths in ``keep`` (a resumed append's data, staged again by its redo)."""
        if self.owns_files is not None and not self.owns_files():
            self.added.clear()
            self.dropped.clear()
            self.dv_files.clear()
            return
        self._delete_own([a for a in [*self.added.values(), *self.dropped.values()] if a.path not in keep])
        self.added.clear()
        self.dropped.clear()
        self.store.delete_many(self.dv_files)
        self.dv_files.clear()

    def forget(self, keep: Collection[str]) -> None:
        """Delete the files this transaction wrote here except ``keep`` (a redo rebuilt the table's state in
        another :class:`TableWork`, which stages ``keep``)."""
        self._delete_own([a for a in [*self.added.values(), *self.dropped.values()] if a.path not in keep])
        self.added.clear()
        self.dropped.clear()

    def mark(self) -> WorkMark:
        """The staged state now, to :meth:`roll_back` to if the statement about to run fails."""
        return WorkMark(
            added=dict(self.added),
            removed=dict(self.removed),
            dropped=dict(self.dropped),
            operations=len(self.operations),
            dml_predicates=len(self.dml_predicates),
            dml_files=frozenset(self.dml_files),
            query_predicates=len(self.query_predicates),
            query_files=frozenset(self.query_files),
            only_appends=self.only_appends,
            dv_files=len(self.dv_files),
            read_keys=len(self.read_keys),
            new_metadata=self.new_metadata,
            created_metadata=self.created_metadata,
        )

    def roll_back(self, mark: WorkMark) -> None:
        """Undo a statement that failed part-way: the staged state becomes ``mark`` again, the files written
        since are deleted, and the staged files replaced since are staged again (a statement has all its
        effect or none)."""
        written = [
            a for p, a in [*self.added.items(), *self.dropped.items()] if p not in mark.added and p not in mark.dropped
        ]
        dv_files = self.dv_files[mark.dv_files :]
        self.added, self.removed, self.dropped = dict(mark.added), dict(mark.removed), dict(mark.dropped)
        del self.operations[mark.operations :]
        del self.dml_predicates[mark.dml_predicates :]
        self.dml_files = set(mark.dml_files)
        del self.query_predicates[mark.query_predicates :]
        self.query_files = set(mark.query_files)
        self.only_appends = mark.only_appends
        del self.dv_files[mark.dv_files :]
        del self.read_keys[mark.read_keys :]
        self.new_metadata, self.created_metadata = mark.new_metadata, mark.created_metadata
        self._delete_own(written)
        if self.owns_files is None or self.owns_files():
            self.store.delete_many(dv_files)

    def release_dropped(self) -> None:
        """Delete the files this transaction wrote and replaced again (none of them was ever published)."""
        dropped, self.dropped = list(self.dropped.values()), {}
        self._delete_own(dropped)

    def apply_effect(self, effect: TableEffect) -> None:
        """Stage a statement's recorded effect again without running it (a redo keeps the statement): its
        removes and adds, its reads and operations. The caller checked that every file it read is live here."""
        for path in effect.unstaged:
            self._drop_file(self.added[path])
        for remove in effect.removed:
            self.removed[remove.path] = remove
        for add in effect.staged:
            self.added[add.path] = add
            self.dropped.pop(add.path, None)
        self.operations.extend(effect.operations)
        self.dml_predicates.extend(effect.dml_predicates)
        self.dml_files.update(effect.dml_files)
        self.query_predicates.extend(effect.query_predicates)
        self.query_files.update(effect.query_files)
        self.only_appends = self.only_appends and effect.only_appends
        self.dv_files.extend(effect.dv_files)

    def _delete_own(self, adds: Collection[Add]) -> None:
        """Delete data files this transaction wrote, in bulk (S3: one request per 1,000). Only such files: their
        names carry the txid (``part-<txid>-``); any other (a clone's borrowed file, a plain writer's) is another
        table's or version's, and stays."""
        if not adds or (self.owns_files is not None and not self.owns_files()):
            return
        self._settle_uploads()  # none may land after its delete
        own = f"part-{self.txid}-"
        delete_keys(
            resolve_file(self.store, self.entry.path, a.path)
            for a in adds
            if decode_path(a.path).rsplit("/", 1)[-1].startswith(own)
        )


@dataclass(frozen=True, slots=True)
class WorkMark:
    """A :class:`TableWork`'s staged state at one moment (:meth:`TableWork.mark`)."""

    added: dict[str, Add]
    removed: dict[str, Remove]
    dropped: dict[str, Add]
    operations: int
    dml_predicates: int
    dml_files: frozenset[str]
    query_predicates: int
    query_files: frozenset[str]
    only_appends: bool
    dv_files: int
    read_keys: int
    new_metadata: Metadata | None
    created_metadata: Metadata | None

    @classmethod
    def empty(cls) -> WorkMark:
        """The state of a table's work before its first statement."""
        return cls({}, {}, {}, 0, 0, frozenset(), 0, frozenset(), True, 0, 0, None, None)


def file_key(file: Add | Remove) -> FileKey:
    """The logical file ``(path, DV)`` an add or remove names."""
    return file.path, unique_id(file.deletion_vector)


def _bins(files: Sequence[Add], target_bytes: int, *, whole: bool) -> list[list[Add]]:
    """Greedy bins of about ``target_bytes``; a bin of one file is left alone unless ``whole`` (Z-order)."""
    bins: list[list[Add]] = []
    current: list[Add] = []
    size = 0
    for add in sorted(files, key=lambda a: a.size) if not whole else files:
        if current and size + add.size > target_bytes:
            bins.append(current)
            current, size = [], 0
        current.append(add)
        size += add.size
    if current:
        bins.append(current)
    return [b for b in bins if len(b) > 1 or whole]


def zorder_indices(data: pa.Table, columns: Sequence[str]) -> pa.Array:
    """Row order along a Z-order curve of ``columns``: each column's dense rank (nulls last) scaled to
    ``min(32, 64 // len(columns))`` bits, the bits interleaved into one key."""
    bits = min(32, 64 // len(columns))  # (float64 carries the scaled rank exactly up to 2**53)
    scale = (1 << bits) - 1
    ranks = []
    for name in columns:
        rank = pc.rank(data.column(name), sort_keys="ascending", tiebreaker="dense")
        values = rank.to_numpy(zero_copy_only=False).astype(np.float64) - 1
        top = max(float(values.max()) if len(values) else 0.0, 1.0)
        ranks.append((values / top * scale).astype(np.uint64))
    return pa.array(np.argsort(interleave(ranks, bits), kind="stable"))


def interleave(ranks: Sequence[np.ndarray], bits: int) -> np.ndarray:
    """Z-order keys: the low ``bits`` bits of each column's ``ranks`` (uint64) interleaved, most significant
    first (the Arrow and the Spark compaction share it)."""
    keys = np.zeros(len(ranks[0]) if ranks else 0, dtype=np.uint64)
    for bit in range(bits - 1, -1, -1):
        for rank in ranks:
            keys = (keys << np.uint64(1)) | ((rank >> np.uint64(bit)) & np.uint64(1))
    return keys
