"""``SparkEngine``: the data engine behind ``tx.read``/``tx.append(df)`` (runs in the user's interpreter).

Reads: the transaction (or snapshot) fixes the exact file list; the engine turns it into a DataFrame, either with
Spark's own Parquet reader over those files (local lakehouses; partition columns are attached from the Delta
log, never parsed from paths) or through the ``txlake`` Python data source (any store, e.g. ``s3://`` via
obstore inside the tasks). ``where`` is applied by Spark; txlake uses it only to prune files.

Writes: the DataFrame's schema is checked against the table on the driver before any job runs, then Spark's
Parquet writer (:mod:`txlake.spark.native`) or the ``txlake`` data source writes the files in the executors; the
data source's job commit leaves a write record which the engine reads here, once every task attempt of the job
has ended, and hands back to the transaction as add actions. Nothing is committed to Delta.
"""

from __future__ import annotations

import math
import re
import threading
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, date, datetime
from decimal import Decimal
from functools import reduce
from typing import Any

import pyarrow as pa
from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StringType, StructField, StructType, VariantType

from txlake.delta.actions import Add
from txlake.delta.colmap import is_mapped
from txlake.delta.files import decode_path, parse_partition_value, resolve_file
from txlake.delta.schema import conform, normalize_schema
from txlake.errors import (
    DataFileNotFoundError,
    PredicateError,
    SchemaMismatchError,
    TxlakeError,
    UnsupportedFeatureError,
)
from txlake.expr import parse_predicate
from txlake.expr.nodes import walk
from txlake.spark import dml
from txlake.spark.compact import compact as spark_compact
from txlake.spark.dml import FILE_COLUMN, TaggedScan, local_file_key, quote, spark_file_key
from txlake.spark.jobs import awaited_jobs, job_tag
from txlake.spark.native import native_write_problem, write_native
from txlake.spark.source import FORMAT, TxlakeDataSource, spark_schema
from txlake.spark.specs import encode_scan, encode_write
from txlake.spark.writing import (
    DEFAULT_TARGET_FILE_BYTES,
    Committer,
    WriteRecord,
    clear_staging,
    load_rejection,
    load_write,
    new_write_id,
    remove_staging_dirs,
    remove_unrecorded,
)
from txlake.storage import ObjectStore
from txlake.txn.engine import (
    MergeOutcome,
    MergeSpec,
    RewriteOutcome,
    ScanSpec,
    SparkReader,
    SparkWriter,
    TableLocation,
    WriteOutcome,
    WriteSpec,
)
from txlake.variant import has_variant

ReaderChoice = SparkReader
READERS: tuple[SparkReader, ...] = ("auto", "native", "python")
WRITERS: tuple[SparkWriter, ...] = ("auto", "native", "python")
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
NATIVE_MAX_PARTITION_GROUPS = 64
"""``auto`` reads partitioned local tables natively only up to this many distinct partitions (one scan each)."""

_UTC_ZONES = {"utc", "etc/utc", "gmt", "etc/gmt", "z", "+00:00", "utc+0", "gmt+0", "zulu", "universal"}
_SIZE = re.compile(r"^\s*(\d+)\s*([kmgtp]?)i?b?\s*$", re.IGNORECASE)


def parse_bytes(text: str) -> int:
    """Spark's byte-size strings (``134217728b``, ``128m``, ``1k``) as a number of bytes."""
    m = _SIZE.match(text)
    if m is None:
        raise ValueError(f"not a byte size: {text!r}")
    return int(m.group(1)) * int(1024 ** " kmgtp".index(m.group(2).lower() or " "))


_REGISTERED: weakref.WeakSet[SparkSession] = weakref.WeakSet()
_REGISTER_LOCK = threading.Lock()


def register_source(spark: SparkSession) -> None:
    """Register the ``txlake`` data source on ``spark``, once per session (thread-safe).

    Registering takes a few seconds, so it happens before the first read or write through the data source, not
    when a lakehouse is opened with a session. Call it before using ``spark.read.format("txlake")`` yourself.
    """
    with _REGISTER_LOCK:
        if spark in _REGISTERED:
            return
        # Spark refuses a name that the *thread's* active session already resolves (another session's txlake)
        if not spark._jsparkSession.sessionState().dataSourceManager().dataSourceExists(FORMAT):
            with active(spark):
                spark.dataSource.register(TxlakeDataSource)
        _REGISTERED.add(spark)


@contextmanager
def active(spark: SparkSession) -> Iterator[None]:
    """``spark`` the active session of the JVM thread serving this Python thread for the block; the thread's
    previous active session (or none) after it.

    Spark finds a Python data source for ``DataFrame.write.format(...)`` through the *thread's* active session
    (``SparkSession.getActiveSession`` in ``DataSource.lookupDataSource``), not the DataFrame's, and checks a
    name to register against it too. PySpark runs each Python thread on its own JVM thread, which has no active
    session until something such as ``createDataFrame`` sets one: without this a write from a thread of the
    caller's pool failed with ``ClassNotFoundException: txlake.DefaultSource``, and with another session active
    (``spark.newSession()``) registering failed with ``DATA_SOURCE_ALREADY_EXISTS``. The previous session is put
    back: the caller's own code on the thread keeps resolving through the session it made active.
    """
    jvm = spark._jvm.SparkSession  # type: ignore[union-attr]
    previous = jvm.getActiveSession()
    jvm.setActiveSession(spark._jsparkSession)
    try:
        yield
    finally:
        if previous.isDefined():
            jvm.setActiveSession(previous.get())
        else:
            jvm.clearActiveSession()


class SparkEngine:
    """Reads txlake tables into Spark DataFrames and writes DataFrames as staged data files.

    Registers the ``txlake`` data source on ``spark`` before its first use (:func:`register_source`) and turns
    on Spark's Python filter push-down (``spark.sql.python.filterPushdown.enabled``) unless the session set it
    explicitly.

    ``reader``: ``"native"`` reads local tables with Spark's Parquet reader, ``"python"`` with the ``txlake``
    data source, ``"auto"`` picks native for local tables. ``writer``: ``"native"`` writes with Spark's Parquet
    writer (local tables; :mod:`txlake.spark.native` lists what it takes, anything else is a ``ValueError``),
    ``"python"`` through the ``txlake`` data source, ``"auto"`` native whenever it can.
    """

    def __init__(
        self,
        spark: SparkSession,
        *,
        reader: ReaderChoice = "auto",
        writer: SparkWriter = "auto",
        native_max_partition_groups: int = NATIVE_MAX_PARTITION_GROUPS,
        target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES,
    ) -> None:
        if reader not in READERS:
            raise ValueError(f"spark reader must be one of {READERS}, got {reader!r}")
        if writer not in WRITERS:
            raise ValueError(f"spark writer must be one of {WRITERS}, got {writer!r}")
        self.spark = spark
        self.reader: ReaderChoice = reader
        self.writer: SparkWriter = writer
        self.native_max_partition_groups = native_max_partition_groups
        self.target_file_bytes = target_file_bytes
        self.last_write: WriteRecord | None = None
        """The write record of the latest successful DataFrame write (for diagnostics)."""
        if spark.conf.get(PUSHDOWN_CONF, None) is None:
            spark.conf.set(PUSHDOWN_CONF, "true")

    def accepts(self, data: object) -> bool:
        return isinstance(data, DataFrame)

    # ------------------------------------------------------------------------------------------- reads

    def arrow_schema(self, schema: object, *, table: str) -> pa.Schema | None:
        """A Spark ``StructType`` as the Arrow schema of a new table (timestamps in UTC)."""
        if not isinstance(schema, StructType):
            return None
        return pa.schema([_arrow_field(f, table) for f in schema.fields])

    def session_is_utc(self) -> bool:
        zone = str(self.spark.conf.get("spark.sql.session.timeZone") or "")
        return zone.strip().lower() in _UTC_ZONES

    def pruning_predicate(self, where: str | None, schema: pa.Schema) -> str | None:
        """``where`` when txlake reads it exactly as Spark does, else ``None`` (no pruning, whole-table read set).

        txlake predicates interpret timestamps in UTC; in a session with another time zone a condition that
        involves time-zone-aware timestamps may mean other instants to Spark, so it is not used for pruning.
        Conditions txlake cannot bind (functions it does not know) are left to Spark alone.
        """
        if where is None:
            return None
        try:
            bound = parse_predicate(where).bind(schema)
        except PredicateError:
            return None
        if not self.session_is_utc() and any(
            pa.types.is_timestamp(n.type) and n.type.tz is not None for n in walk(bound.node)
        ):
            return None
        return where

    def read(self, scan: ScanSpec, *, where: str | None = None, columns: Sequence[str] | None = None) -> DataFrame:
        schema = spark_schema(scan.table)
        if not scan.files:
            df = self.spark.createDataFrame([], schema)
        elif self.uses_native_reader(scan):
            df = self._read_native(scan, schema)  # (Spark's Parquet reader prunes columns itself)
        else:
            df = self._read_source(scan, _needed_columns(schema, scan, where, columns))
        if where is not None:
            df = df.where(where)
        if columns is not None:
            df = df.select(*[F.col(quote(c)) for c in columns])
        return df

    def uses_native_reader(self, scan: ScanSpec) -> bool:
        """Whether ``scan`` is read by Spark's Parquet reader (else by the ``txlake`` data source).

        Files with a deletion vector are always read by the data source, which drops the rows the DV deletes
        (Spark's Parquet reader would return them), whatever the reader setting; so are tables that map column
        names (column mapping) and tables with variant columns (only the data source checks that a file's
        variants are not shredded).
        """
        if self.reader == "python" or len(scan.table.partition_columns) == len(scan.table.schema):
            return False  # (when every column is a partition column, no column lives in the files)
        if is_mapped(scan.table.schema):
            return False  # the files store physical names, which only the data source maps back
        if any(has_variant(f.type) for f in scan.table.schema):
            return False  # the data source refuses shredded variant files (txlake.delta.files); Spark would not
        if any(a.deletion_vector is not None for a in scan.files):
            return False
        local = scan.table.store_uri.startswith("file://") and all(
            "://" not in a.path or a.path.startswith("file:") for a in scan.files
        )
        if self.reader == "native":
            if not local:
                raise ValueError(f"the native reader reads local tables only, not {scan.table.store_uri}")
            return True
        groups = {_partition_key(a, scan.table.partition_columns) for a in scan.files}
        return local and len(groups) <= self.native_max_partition_groups

    def read_tagged(self, scan: ScanSpec) -> TaggedScan:
        """All rows of ``scan.files`` plus the column :data:`~txlake.spark.dml.FILE_COLUMN` naming each row's file.

        Spark's Parquet reader tags rows with ``_metadata.file_path`` (a URL mapped back to the add action);
        the ``txlake`` data source with the add path (also when a table column is called ``_metadata``, which
        would hide Spark's metadata column).
        """
        schema = spark_schema(scan.table)
        files = {a.path: a for a in scan.files}
        if not scan.files:
            tagged = StructType([*schema.fields, StructField(FILE_COLUMN, StringType(), True)])
            return TaggedScan(self.spark.createDataFrame([], tagged), files)
        shadowed = any(f.name.lower() == "_metadata" for f in schema.fields)
        if self.uses_native_reader(scan) and not shadowed:
            frame = self._read_native(scan, schema, file_column=FILE_COLUMN)
            by_path = {local_file_key(_local_url(scan.table, a)): a for a in scan.files}
            return TaggedScan(frame, by_path, spark_file_key)
        return TaggedScan(self._read_source(scan, schema, file_column=FILE_COLUMN), files)

    def _read_native(self, scan: ScanSpec, schema: StructType, *, file_column: str | None = None) -> DataFrame:
        table = scan.table
        parts = set(table.partition_columns)
        data_schema = StructType([f for f in schema.fields if f.name not in parts])
        groups: dict[tuple[tuple[str, str | None], ...], list[str]] = {}
        for add in scan.files:
            groups.setdefault(_partition_key(add, table.partition_columns), []).append(_local_url(table, add))
        arrow = normalize_schema(table.schema)
        frames = []
        for key, urls in groups.items():
            values = dict(key)
            files = self.spark.read.schema(data_schema).parquet(*urls)
            if not parts and file_column is None:
                frames.append(files)  # already the table's columns in the table's order
                continue
            columns = [
                _partition_literal(values.get(f.name), arrow.field(f.name).type, f).alias(f.name)
                if f.name in parts
                else F.col(quote(f.name))
                for f in schema.fields
            ]
            if file_column is not None:
                columns.append(F.col("_metadata.file_path").alias(file_column))
            frames.append(files.select(*columns))
        return reduce(DataFrame.unionAll, frames)

    def register_source(self) -> None:
        """Register the ``txlake`` data source on this engine's session (once; see :func:`register_source`)."""
        register_source(self.spark)

    def _read_source(self, scan: ScanSpec, schema: StructType, *, file_column: str | None = None) -> DataFrame:
        conf = self.spark.conf
        self.register_source()
        reader = self.spark.read.format(FORMAT)
        if file_column is not None:
            schema = StructType([*schema.fields, StructField(file_column, StringType(), True)])
            reader = reader.option("fileColumn", file_column)
        return (
            reader.schema(schema)
            .option("scan", encode_scan(scan))
            .option("pushdown", str(conf.get(PUSHDOWN_CONF, "false")).lower())
            .option("parallelism", str(self.spark.sparkContext.defaultParallelism))
            .option("maxPartitionBytes", str(parse_bytes(str(conf.get("spark.sql.files.maxPartitionBytes")))))
            .option("openCostInBytes", str(parse_bytes(str(conf.get("spark.sql.files.openCostInBytes")))))
            .load()
        )

    # ------------------------------------------------------------------------------------------ writes

    def write(self, target: WriteSpec, data: Any) -> WriteOutcome:
        """Run the Spark job writing ``data`` as files of ``target``; return their adds (nothing is committed).

        Whatever the outcome, nothing of the write stays below ``_txlake/txns/<txid>/spark`` (on a local
        lakehouse not even the directories).
        """
        df = self.conform(target.table, data)
        write_id = new_write_id()
        store = target.table.open_store()
        try:
            if self.writer != "python":
                root = store.local_path()
                problem = native_write_problem(root, target, df)
                if problem is None and root is not None:
                    outcome = write_native(self.spark, root, target, df, write_id)
                    self.last_write = WriteRecord(
                        target.txid, write_id, target.table.table_name, outcome.adds, outcome.num_rows, Committer.here()
                    )
                    return outcome
                if self.writer == "native":
                    raise ValueError(f"Spark's Parquet writer cannot write into {target.table.table_name}: {problem}")
            return self._write_source(store, target, df, write_id)
        finally:
            remove_staging_dirs(store, target.txid, write_id)

    def _write_source(self, store: ObjectStore, target: WriteSpec, df: DataFrame, write_id: str) -> WriteOutcome:
        """Write through the ``txlake`` data source; clean up only once every task attempt of the job ended.

        When the job fails, Spark raises as soon as one task failed, while other attempts may still be writing
        or not even have begun (:mod:`txlake.spark.jobs`). The task manifests are read after all of them ended,
        so they name every file any attempt wrote.
        """
        self.register_source()
        try:
            with active(self.spark), awaited_jobs(self.spark.sparkContext, job_tag(write_id)):
                (
                    df.write.format(FORMAT)
                    .mode("append")
                    .option("write", encode_write(target))
                    .option("writeId", write_id)
                    .option("targetFileBytes", str(self.target_file_bytes))
                    .save()
                )
        except Exception as exc:
            # abort() deleted the files of the tasks that succeeded; the manifests name the files of the others
            rejection = load_rejection(store, target.txid, write_id)
            remove_unrecorded(store, target, write_id)
            clear_staging(store, target.txid, write_id)
            if rejection is not None:
                raise rejection from exc
            raise
        record = load_write(store, target.txid, write_id)
        if record is None:
            remove_unrecorded(store, target, write_id)
            clear_staging(store, target.txid, write_id)
            raise TxlakeError(f"the Spark write {write_id} into {target.table.table_name} left no write record")
        self.last_write = record
        # files of attempts that failed or lost to another attempt (retries, speculation) are not in the record
        remove_unrecorded(store, target, write_id, keep=record.adds)
        clear_staging(store, target.txid, write_id)
        return WriteOutcome(adds=record.adds, num_rows=record.num_rows)

    # ------------------------------------------------------------------------------- update/delete/merge

    def rewrite(
        self,
        scan: ScanSpec,
        target: WriteSpec,
        *,
        where: str | None,
        set: Mapping[str, str] | None = None,
        delete: bool = False,
    ) -> RewriteOutcome:
        """Copy-on-write UPDATE/DELETE of ``scan.files`` as Spark jobs (:func:`txlake.spark.dml.rewrite`)."""
        return dml.rewrite(self, scan, target, where=where, set=set, delete=delete)

    def compact(self, scan: ScanSpec, target: WriteSpec, *, files: int, zorder_by: Sequence[str] = ()) -> WriteOutcome:
        """``optimize`` as one Spark job (:func:`txlake.spark.compact.compact`). A data file missing from
        storage is :class:`DataFileNotFoundError`, as on Arrow (Spark reports it in its own words)."""
        try:
            return spark_compact(self, scan, target, files=files, zorder_by=zorder_by)
        except Exception as exc:
            store = scan.table.open_store()
            for add in scan.files:
                file_store, key = resolve_file(store, scan.table.table_path, add.path)
                if not file_store.exists(key):
                    raise DataFileNotFoundError(
                        f"data file {add.path} of {scan.table.table_name} is missing",
                        table=scan.table.table_name,
                        path=add.path,
                    ) from exc
            raise

    def merge_pruning_predicate(self, source: Any, spec: MergeSpec, table: TableLocation) -> str | None:
        """Target key ranges of ``source`` (:func:`txlake.spark.dml.merge_pruning_predicate`)."""
        return dml.merge_pruning_predicate(source, spec, table)

    def merge(self, scan: ScanSpec, target: WriteSpec, source: Any, spec: MergeSpec) -> MergeOutcome:
        """MERGE a DataFrame into ``scan.files`` as Spark jobs (:func:`txlake.spark.dml.merge`)."""
        return dml.merge(self, scan, target, source, spec)

    def conform(self, table: TableLocation, df: DataFrame) -> DataFrame:
        """``df`` with its columns named as the table's; raises :class:`SchemaMismatchError` before any job.

        Columns match case-insensitively (as in Spark); types must convert losslessly to the table's (the same
        rules as Arrow appends). Nulls in non-nullable columns can only be found while writing.
        """
        target = normalize_schema(table.schema)
        by_lower = {n.lower(): n for n in target.names}
        extra = [c for c in df.columns if c.lower() not in by_lower]
        if extra:
            raise SchemaMismatchError(
                f"columns not in the table schema: {extra}", table=table.table_name, columns=extra
            )
        names = [by_lower[c.lower()] for c in df.columns]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise SchemaMismatchError(f"duplicate columns {dupes}", table=table.table_name, columns=dupes)
        renamed = df.select(*[F.col(quote(c)).alias(n) for c, n in zip(df.columns, names, strict=True)])
        fields = []
        for field in renamed.schema.fields:
            fields.append(_arrow_field(field, table.table_name))
        conform(pa.schema(fields).empty_table(), target, table=table.table_name)
        return renamed


# ------------------------------------------------------------------------------------------------ helpers


def _arrow_field(field: StructField, table: str) -> pa.Field:
    problem = SchemaMismatchError(
        f"column {field.name!r} has Spark type {field.dataType.simpleString()}, which no Delta type stores",
        table=table,
        columns=[field.name],
    )
    if _has_variant(field.dataType):  # Delta stores variants; txlake reads them but does not write them
        raise UnsupportedFeatureError(
            f"column {field.name!r} is or holds a variant, which txlake does not write",
            table=table,
            feature="variantType",
        )
    try:
        return to_arrow_schema(StructType([field]), timezone="UTC").field(0)
    except (TypeError, ValueError, PySparkException) as exc:
        raise problem from exc


def _has_variant(dtype: Any) -> bool:
    if isinstance(dtype, VariantType):
        return True
    if isinstance(dtype, StructType):
        return any(_has_variant(f.dataType) for f in dtype.fields)
    children = [getattr(dtype, a) for a in ("elementType", "keyType", "valueType") if hasattr(dtype, a)]
    return any(_has_variant(c) for c in children)


def _needed_columns(schema: StructType, scan: ScanSpec, where: str | None, columns: Sequence[str] | None) -> StructType:
    """``schema`` cut to ``columns`` and the columns ``where`` reads, for the data source (which cannot learn
    from Spark which columns a query needs); the whole schema when ``where`` cannot be bound."""
    if columns is None:
        return schema
    wanted = {c.lower() for c in columns}
    if where is not None:
        try:
            wanted |= {c.lower() for c in parse_predicate(where).bind(normalize_schema(scan.table.schema)).columns}
        except PredicateError:
            return schema
    kept = [f for f in schema.fields if f.name.lower() in wanted]
    return StructType(kept) if kept else schema


def _partition_key(add: Add, partition_columns: Sequence[str]) -> tuple[tuple[str, str | None], ...]:
    return tuple((c, add.partition_values.get(c)) for c in partition_columns)


def _local_url(table: TableLocation, add: Add) -> str:
    if "://" in add.path or add.path.startswith("file:"):
        return decode_path(add.path)
    root = table.store_uri.rstrip("/")
    path = f"{table.table_path}/{decode_path(add.path)}" if table.table_path else decode_path(add.path)
    return f"{root}/{path}"


def _partition_literal(raw: str | None, dtype: pa.DataType, field: StructField) -> Column:
    """A partition value from the Delta log as a typed Spark literal (independent of the session time zone)."""
    value = parse_partition_value(raw, dtype)
    spark_type = field.dataType
    if value is None:
        return F.lit(None).cast(spark_type)
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            return F.lit(value.astimezone(UTC).isoformat()).cast(spark_type)
        return F.lit(value.isoformat(sep=" ")).cast(spark_type)
    if isinstance(value, float) and not math.isfinite(value):
        text = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        return F.lit(text).cast(spark_type)
    if isinstance(value, (date, Decimal)):
        return F.lit(str(value)).cast(spark_type)
    return F.lit(value).cast(spark_type)
