"""The seam between transactions and a data engine (Spark): what to read, what to write, and the protocol.

The transaction core stays engine-agnostic: it decides *which* files a read covers and records the read, and it
stages the add actions a write produced. An engine (``txlake.spark.SparkEngine``) only moves rows. Everything here
is plain data, picklable, so an engine can ship it to its workers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

import pyarrow as pa

from txlake.delta.actions import Add, Metadata
from txlake.delta.schema import schema_from_json
from txlake.errors import InvalidArgumentError, InvalidArgumentTypeError, TxlakeError
from txlake.lakehouse.records import TableEntry
from txlake.storage import ObjectStore

SparkReader = Literal["auto", "native", "python"]
SparkWriter = Literal["auto", "native", "python"]
"""How a Spark engine reads files: Spark's Parquet reader, the txlake Python data source, or chosen per scan."""


class NoDataEngineError(TxlakeError, RuntimeError):
    """The operation needs a data engine (a Spark session: ``txlake.connect(..., spark=spark)``)."""


@dataclass(frozen=True, slots=True)
class TableLocation:
    """Where a table lives and what it looks like: enough to reopen its store on any machine."""

    store_uri: str
    storage_options: Mapping[str, Any]
    table_path: str
    table_name: str
    schema_json: str
    partition_columns: tuple[str, ...]

    @classmethod
    def of(cls, store: ObjectStore, entry: TableEntry, metadata: Metadata) -> TableLocation:
        return cls(
            store_uri=store.uri,
            storage_options=store.storage_options,
            table_path=entry.path,
            table_name=entry.name,
            schema_json=metadata.schema_string,
            partition_columns=tuple(metadata.partition_columns),
        )

    @property
    def schema(self) -> pa.Schema:
        return schema_from_json(self.schema_json)

    def open_store(self) -> ObjectStore:
        """A fresh store client for the lakehouse root (opened where it is used, e.g. in a Spark task)."""
        return ObjectStore.from_uri(self.store_uri, self.storage_options)


@dataclass(frozen=True, slots=True)
class ScanSpec:
    """A planned read: the table and the exact data files it covers (already pruned and recorded)."""

    table: TableLocation
    files: tuple[Add, ...] = ()


@dataclass(frozen=True, slots=True)
class WriteSpec:
    """A write into a table for transaction ``txid``: files are named with the txid and staged, never committed.

    ``where``: every written row must satisfy this predicate (``overwrite(..., where=...)``).
    """

    table: TableLocation
    txid: str
    where: str | None = None


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    """What an engine wrote: the add actions to stage and the number of rows."""

    adds: tuple[Add, ...] = ()
    num_rows: int = 0


@dataclass(frozen=True, slots=True)
class RewriteOutcome:
    """What a copy-on-write UPDATE or DELETE did to the candidate files of its scan (nothing staged yet).

    ``removed``: the candidate files that held at least one matching row (the others are untouched);
    ``matched``: rows that matched per removed file path; ``adds``: the files holding the rewritten rows.
    """

    removed: tuple[Add, ...] = ()
    adds: tuple[Add, ...] = ()
    matched: Mapping[str, int] = field(default_factory=dict)

    @property
    def num_rows(self) -> int:
        """Rows updated or deleted."""
        return sum(self.matched.values())


ColumnMap: TypeAlias = Mapping[str, str] | Literal["*"]
"""Target column -> SQL expression, or ``"*"``: every target column from the source column of that name."""


@dataclass(frozen=True, slots=True)
class MergeClause:
    """One ``WHEN MATCHED [AND condition] THEN UPDATE/DELETE`` clause."""

    kind: Literal["update", "delete"]
    condition: str | None = None


@dataclass(frozen=True, slots=True)
class MergeSpec:
    """``MERGE INTO target AS t USING source AS s ON on WHEN ...`` (Delta semantics, see ``engine.arrow_dml``).

    Matched clauses apply in the order of :meth:`matched_clauses` (conditional before unconditional, delete
    before update): the first clause whose condition holds decides a matched row. A target row matched by
    several source rows is an error (:class:`~txlake.errors.MergeCardinalityError`) unless the only matched
    clause is an unconditional delete.
    """

    on: str
    matched_update: ColumnMap | None = None
    matched_update_condition: str | None = None
    matched_delete: bool | str | None = None
    not_matched_insert: ColumnMap | None = None
    not_matched_insert_condition: str | None = None
    target_alias: str = "t"
    source_alias: str = "s"

    def __post_init__(self) -> None:
        if self.matched_update is None and not self.matched_delete and self.not_matched_insert is None:
            raise InvalidArgumentError("merge needs at least one clause")
        if self.target_alias.lower() == self.source_alias.lower():
            raise InvalidArgumentError("target_alias and source_alias must differ")
        for mapping in (self.matched_update, self.not_matched_insert):
            if mapping is not None and mapping != "*" and not isinstance(mapping, Mapping):
                raise InvalidArgumentTypeError(f"a column map must be a mapping or '*', got {mapping!r}")
        if self.matched_update_condition is not None and self.matched_update is None:
            raise InvalidArgumentError("matched_update_condition needs matched_update")
        if self.not_matched_insert_condition is not None and self.not_matched_insert is None:
            raise InvalidArgumentError("not_matched_insert_condition needs not_matched_insert")
        unconditional = (self.matched_delete is True) + (
            self.matched_update is not None and self.matched_update_condition is None
        )
        if unconditional > 1:
            raise InvalidArgumentError(
                "only one matched clause may be unconditional (give the delete or the update a condition)"
            )

    def matched_clauses(self) -> tuple[MergeClause, ...]:
        """Matched clauses in evaluation order: conditional before unconditional, delete before update."""
        conditional: list[MergeClause] = []
        unconditional: list[MergeClause] = []
        if isinstance(self.matched_delete, str):
            conditional.append(MergeClause("delete", self.matched_delete))
        elif self.matched_delete:
            unconditional.append(MergeClause("delete"))
        if self.matched_update is not None:
            clause = MergeClause("update", self.matched_update_condition)
            (conditional if clause.condition is not None else unconditional).append(clause)
        return tuple(conditional + unconditional)

    @property
    def only_delete(self) -> bool:
        """The only matched clause is an unconditional delete (several matches of one row are then allowed)."""
        return self.matched_clauses() == (MergeClause("delete"),)


@dataclass(frozen=True, slots=True)
class MergeOutcome:
    """What a merge did (nothing staged yet): target files rewritten, new files, and Delta's row metrics."""

    removed: tuple[Add, ...] = ()
    adds: tuple[Add, ...] = ()
    num_updated: int = 0
    num_deleted: int = 0
    num_inserted: int = 0


@runtime_checkable
class DataEngine(Protocol):
    """A data engine the transaction delegates engine-native reads and writes to."""

    def accepts(self, data: object) -> bool:
        """Whether ``data`` is this engine's kind of dataset (e.g. a Spark DataFrame)."""
        ...

    def pruning_predicate(self, where: str | None, schema: pa.Schema) -> str | None:
        """The part of ``where`` txlake may use for file pruning and read sets (``None``: all files)."""
        ...

    def arrow_schema(self, schema: object, *, table: str) -> pa.Schema | None:
        """``schema`` as Arrow if it is this engine's schema type (a Spark StructType), else ``None``."""
        ...

    def read(self, scan: ScanSpec, *, where: str | None = None, columns: Sequence[str] | None = None) -> Any:
        """The rows of ``scan.files`` matching ``where`` as the engine's dataset (lazy)."""
        ...

    def write(self, target: WriteSpec, data: Any) -> WriteOutcome:
        """Write ``data`` as data files of ``target`` and return their add actions (nothing is committed)."""
        ...

    def rewrite(
        self,
        scan: ScanSpec,
        target: WriteSpec,
        *,
        where: str | None,
        set: Mapping[str, str] | None = None,
        delete: bool = False,
    ) -> RewriteOutcome:
        """Copy-on-write UPDATE (``set``) or DELETE (``delete=True``) of the rows of ``scan.files`` matching ``where``.

        Only the files holding a matching row are rewritten (as files of ``target``); nothing is committed.
        """
        ...

    def compact(self, scan: ScanSpec, target: WriteSpec, *, files: int, zorder_by: Sequence[str] = ()) -> WriteOutcome:
        """Write the rows of ``scan.files`` again as about ``files`` files of ``target`` (per partition at most
        as many as needed), clustered along a Z-order curve of ``zorder_by`` when given; nothing is committed.
        """
        ...

    def merge_pruning_predicate(self, source: Any, spec: MergeSpec, table: TableLocation) -> str | None:
        """A predicate on the target that every row a merge of ``source`` can match satisfies (``None``: all)."""
        ...

    def merge(self, scan: ScanSpec, target: WriteSpec, source: Any, spec: MergeSpec) -> MergeOutcome:
        """MERGE ``source`` into the rows of ``scan.files`` (copy-on-write; nothing is committed)."""
        ...
