"""``TxlakeDataSource``: the ``"txlake"`` PySpark Python data source (read: planned files; write: staged files).

Where each piece runs:

- ``DataSource.reader``/``writer``, ``pushFilters`` and ``partitions``: a Python worker that Spark starts on the
  driver machine while planning. It only decodes the spec from the options; no store is contacted.
- ``DataSourceReader.read`` and ``TxlakeArrowWriter.write``: Python workers of the executors (one per task).
  They open their own object-store client from the picklable spec.
- ``TxlakeArrowWriter.commit``/``abort``: a Python worker on the driver machine (not the user's interpreter),
  once the job succeeded or failed. ``commit`` persists the adds as a write record; ``abort`` deletes the
  files of the tasks that succeeded.

Options (all strings): ``scan`` (an encoded :class:`~txlake.txn.engine.ScanSpec`) or ``lake`` + ``table``
(+ ``version``, ``storage.<key>``) to read a committed table directly; ``write`` (an encoded
:class:`~txlake.txn.engine.WriteSpec`) + ``writeId`` to write; ``pushdown`` (``"true"`` when Spark's
``spark.sql.python.filterPushdown.enabled`` is on), ``parallelism``, ``maxPartitionBytes``,
``openCostInBytes``, ``targetFileBytes``; ``fileColumn``: add a string column of that name holding each row's data
file (its add action's path; the DataFrame's schema must end with it), which UPDATE/DELETE/MERGE use to find the
files they touch.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceWriter,
    Filter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from txlake.delta.actions import Add
from txlake.delta.files import read_file
from txlake.delta.schema import normalize_schema
from txlake.errors import TableNotFoundError, VersionNotFoundError
from txlake.lakehouse.log import GlobalLog
from txlake.lakehouse.tables import SnapshotCache
from txlake.spark.planning import PackingPolicy, pack_files, prune, pruning_predicates
from txlake.spark.specs import decode_scan, decode_write
from txlake.spark.writing import DEFAULT_TARGET_FILE_BYTES, TaskFiles, TaskWriter, abort_write, commit_write
from txlake.storage import ObjectStore
from txlake.txn.engine import ScanSpec, TableLocation, WriteSpec
from txlake.variant import MARKER, has_variant, is_variant

FORMAT = "txlake"


def spark_schema(location: TableLocation) -> StructType:
    """The Spark schema of a table: Delta's schema JSON is Spark's own StructType JSON (``variant`` columns are
    Spark's ``VariantType``)."""
    return StructType.fromJson(json.loads(location.schema_json))


SPARK_VARIANT = pa.struct(
    [pa.field("value", pa.binary(), nullable=False), pa.field("metadata", pa.binary(), nullable=False, metadata=MARKER)]
)
"""How PySpark's Arrow conversion lays out a ``VariantType`` value (``value`` first, ``metadata`` marked)."""


def _spark_arrow_type(dtype: pa.DataType) -> pa.DataType:
    if is_variant(dtype):
        return SPARK_VARIANT
    if pa.types.is_struct(dtype):
        return pa.struct([f.with_type(_spark_arrow_type(f.type)) for f in dtype])
    if pa.types.is_list(dtype):
        return pa.list_(dtype.value_field.with_type(_spark_arrow_type(dtype.value_type)))
    if pa.types.is_large_list(dtype):
        return pa.large_list(dtype.value_field.with_type(_spark_arrow_type(dtype.value_type)))
    if pa.types.is_map(dtype):
        key, item = dtype.key_field, dtype.item_field
        return pa.map_(key.with_type(_spark_arrow_type(key.type)), item.with_type(_spark_arrow_type(item.type)))
    return dtype


def has_variant_column(schema: pa.Schema) -> bool:
    return any(has_variant(f.type) for f in schema)


def spark_arrow_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` (as txlake reads a table) with every variant in PySpark's layout, so that Spark takes the record
    batches as ``VariantType`` columns (the bytes unchanged; Arrow casts structs by field name)."""
    return pa.schema([f.with_type(_spark_arrow_type(f.type)) for f in schema], metadata=schema.metadata)


# ------------------------------------------------------------------------------------------------ read


@dataclass
class FilesPartition(InputPartition):
    """One read task: whole data files of the table (picklable)."""

    index: int
    files: tuple[Add, ...]


class TxlakeReader(DataSourceReader):
    """Reads planned data files as Arrow record batches (partition values filled in, missing columns null)."""

    def __init__(
        self,
        scan: ScanSpec,
        policy: PackingPolicy,
        file_column: str | None = None,
        columns: Sequence[str] | None = None,
    ) -> None:
        self.scan = scan
        self.files: tuple[Add, ...] = scan.files
        self.policy = policy
        self.file_column = file_column
        self.columns = tuple(columns) if columns is not None else None
        """The table columns to read (``None``: all of them), from the schema the DataFrame was given."""

    def partitions(self) -> Sequence[InputPartition]:
        groups = pack_files(self.files, self.policy)
        if not groups:
            return [FilesPartition(0, ())]
        return [FilesPartition(i, group) for i, group in enumerate(groups)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, FilesPartition)
        table = self.scan.table
        if not partition.files:
            return
        store = table.open_store()
        schema = normalize_schema(table.schema)
        for add in partition.files:
            data = read_file(
                store,
                table.table_path,
                add,
                schema,
                table.partition_columns,
                table=table.table_name,
                columns=self.columns,
            )
            if has_variant_column(data.schema):
                data = data.cast(spark_arrow_schema(data.schema))
            if self.file_column is not None:
                data = data.append_column(self.file_column, pa.array([add.path] * data.num_rows, pa.string()))
            yield from data.to_batches()


class TxlakePushdownReader(TxlakeReader):
    """A reader that also prunes its files by the filters Spark pushes down.

    Every filter is returned to Spark (none is claimed as handled): pruning drops files that cannot hold a
    matching row, Spark still filters the rows of the files that remain.
    """

    def pushFilters(self, filters: list[Filter]) -> list[Filter]:
        schema = normalize_schema(self.scan.table.schema)
        predicates = pruning_predicates(filters, schema)
        self.files = tuple(prune(self.files, predicates, schema, self.scan.table.partition_columns))
        return list(filters)


# ----------------------------------------------------------------------------------------------- write


@dataclass
class TxlakeCommitMessage(WriterCommitMessage):
    """What a write task sends to the job commit: its files and row count."""

    files: TaskFiles


class TxlakeArrowWriter(DataSourceArrowWriter):
    """Writes each task's batches as staged data files; the job commit records them for the transaction."""

    def __init__(self, spec: WriteSpec, write_id: str, target_bytes: int) -> None:
        self.spec = spec
        self.write_id = write_id
        self.target_bytes = target_bytes

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TxlakeCommitMessage:
        task = TaskWriter(self.spec, self.write_id, target_bytes=self.target_bytes)
        return TxlakeCommitMessage(task.write(iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        commit_write(self.spec, self.write_id, _task_files(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        abort_write(self.spec, self.write_id, _task_files(messages))


def _task_files(messages: Sequence[WriterCommitMessage | None]) -> list[TaskFiles | None]:
    return [m.files if isinstance(m, TxlakeCommitMessage) else None for m in messages]


# ---------------------------------------------------------------------------------------- data source


class TxlakeDataSource(DataSource):
    """The ``txlake`` format: ``spark.read.format("txlake")`` / ``df.write.format("txlake")`` (see module doc)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def _option(self, key: str, default: str | None = None) -> str | None:
        value = self.options.get(key)
        return default if value is None else str(value)

    def _scan(self) -> ScanSpec:
        encoded = self._option("scan")
        if encoded is not None:
            return decode_scan(encoded)
        lake_uri, table = self._option("lake"), self._option("table")
        if lake_uri is None or table is None:
            raise ValueError("the txlake data source reads a planned scan (option 'scan') or 'lake' + 'table'")
        return committed_scan(lake_uri, table, self._storage_options(), self._option("version"))

    def _storage_options(self) -> dict[str, str]:
        prefix = "storage."
        return {k[len(prefix) :]: str(v) for k, v in self.options.items() if k.lower().startswith(prefix)}

    def schema(self) -> StructType:
        encoded = self._option("write")
        if encoded is not None:
            return spark_schema(decode_write(encoded).table)
        return spark_schema(self._scan().table)

    def reader(self, schema: StructType) -> DataSourceReader:
        scan = self._scan()
        policy = PackingPolicy(
            max_partition_bytes=int(self._option("maxPartitionBytes", "134217728") or 0),
            open_cost_bytes=int(self._option("openCostInBytes", "4194304") or 0),
            parallelism=int(self._option("parallelism", "1") or 1),
        )
        file_column = self._option("fileColumn")
        columns = requested_columns(scan.table, schema, file_column)
        if (self._option("pushdown", "false") or "").lower() == "true":
            return TxlakePushdownReader(scan, policy, file_column, columns)
        return TxlakeReader(scan, policy, file_column, columns)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        encoded, write_id = self._option("write"), self._option("writeId")
        if encoded is None or write_id is None:
            raise ValueError("txlake tables are written through a transaction: tx.append(name, dataframe)")
        if overwrite:
            raise ValueError("use tx.overwrite(name, dataframe) instead of mode('overwrite')")
        target = int(self._option("targetFileBytes", str(DEFAULT_TARGET_FILE_BYTES)) or DEFAULT_TARGET_FILE_BYTES)
        return TxlakeArrowWriter(decode_write(encoded), write_id, target)


def requested_columns(table: TableLocation, schema: StructType, file_column: str | None) -> list[str] | None:
    """The table columns a DataFrame given ``schema`` reads (``None``: every column, in table order).

    PySpark does not tell Python data sources which columns a query uses, so a reader given a schema with
    fewer columns (``.schema(...)``, or ``tx.read(name, columns=[...])``) reads only those from the files.
    Each must be a table column of the table's type.
    """
    fields = {f.name: f for f in spark_schema(table).fields}
    names = []
    for field in schema.fields:
        if field.name == file_column:
            continue
        known = fields.get(field.name)
        if known is None or known.dataType != field.dataType:
            have = "no such column" if known is None else f"the table has {known.dataType.simpleString()}"
            raise ValueError(
                f"schema field {field.name} {field.dataType.simpleString()} does not match {table.table_name}: {have}"
            )
        names.append(field.name)
    return None if names == list(fields) else names


def committed_scan(
    lake_uri: str, table: str, storage_options: Mapping[str, str], version: str | None = None
) -> ScanSpec:
    """Every file of ``table`` at a committed lakehouse version (the latest when ``version`` is ``None``)."""
    store = ObjectStore.from_uri(lake_uri, storage_options, must_exist=True)
    glog = GlobalLog(store)
    if version is not None and int(version) < 0:
        raise VersionNotFoundError(f"no lakehouse version {version}", version=int(version))
    state = glog.tail().state if version is None else glog.state_at(int(version))
    entry = state.table_by_name(table)
    if entry is None:
        raise TableNotFoundError(f"no table {table!r} at lakehouse version {state.version}", table=table)
    delta = SnapshotCache(store).get(entry, state.table_versions[entry.id])
    location = TableLocation.of(store, entry, delta.metadata)
    return ScanSpec(location, tuple(delta.files.values()))
