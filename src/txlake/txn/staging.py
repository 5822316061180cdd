"""What a transaction has staged for one table: its view of live files, reads, and pending actions."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

import pyarrow as pa

from txlake.delta.actions import Action, Add, Metadata, Protocol, Remove
from txlake.delta.files import decode_path, read_file, read_files, resolve_file, write_data_files
from txlake.delta.schema import conform, normalize_schema, schema_from_json
from txlake.delta.state import Snapshot
from txlake.errors import SchemaMismatchError
from txlake.expr import BoundPredicate, FileStats, parse_predicate
from txlake.lakehouse.records import ReadSet, TableEntry
from txlake.storage import ObjectStore

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
        files = self.live_files()
        if predicate is None:
            return files
        schema, parts = self.schema, self.partition_columns
        return [a for a in files if predicate.may_match(FileStats.from_add(a, schema, parts))]

    def _read(self, files: Sequence[Add], columns: Sequence[str] | None = None) -> pa.Table:
        return read_files(
            self.store,
            self.entry.path,
            files,
            self.schema,
            self.partition_columns,
            columns=columns,
            table=self.entry.name,
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
            # never published: nobody else can reference it, so it is removed right away
            self._delete_own(add)
        else:
            self.removed[add.path] = add.remove()

    def write(self, data: pa.Table) -> list[Add]:
        conformed = conform(data, normalize_schema(self.schema), table=self.entry.name)
        if conformed.num_rows == 0:
            return []
        adds = write_data_files(
            self.store, self.entry.path, conformed, partition_columns=self.partition_columns, txid=self.txid
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
        removed = [a for p, a in current.items() if p not in files]
        added = [dataclasses.replace(a, data_change=True) for p, a in files.items() if p not in current]
        for add in removed:
            self._drop_file(add)
        self._stage_adds(added)
        self.operations.append("RESTORE")
        return len(removed), len(added)

    def delete_unstaged(self, adds: Iterable[Add]) -> None:
        """Delete written files that will not be staged (a statement failed after its engine wrote them)."""
        for add in adds:
            if add.path not in self.added:
                self._delete_own(add)

    def record_dml(self, where: str | None, files: Iterable[Add]) -> None:
        self.only_appends = False
        self.dml_predicates.append(where)
        self.dml_files.update(a.path for a in files if a.path not in self.added)

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

    def read_one(self, add: Add) -> pa.Table:
        """All rows of one live file."""
        return read_file(self.store, self.entry.path, add, self.schema, self.partition_columns, table=self.entry.name)

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

    def discard(self) -> None:
        """Delete every data file this transaction wrote to the table (it was never published)."""
        for add in self.added.values():
            self._delete_own(add)
        self.added.clear()

    def _delete_own(self, add: Add) -> None:
        """Delete a data file this transaction wrote. Only such a file: its name carries the txid (``part-<txid>-``);
        any other (a clone's borrowed file, a plain writer's) is another table's or version's, and stays."""
        if not decode_path(add.path).rsplit("/", 1)[-1].startswith(f"part-{self.txid}-"):
            return
        store, key = resolve_file(self.store, self.entry.path, add.path)
        store.delete(key)
