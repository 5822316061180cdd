"""DataFrame writes into local tables with Spark's own Parquet writer (no Python worker touches the rows).

The job writes into a directory of the transaction (``_txlake/txns/<txid>/spark/<write-id>.out``) under Spark's
usual commit protocol, so a failed job leaves nothing there that counts. After the job the driver reads each
file's footer (row count and Delta statistics), then moves the files into the table as
``[<partition dir>/]part-<txid>-<write-id>-<spark name>`` and returns their add actions for the transaction
to stage. The directory is deleted once every task attempt of the job has ended (:mod:`txlake.spark.jobs`), so
that none writes into it afterwards. Nothing is committed to Delta; a crash between the moves leaves files
named by the transaction id.

The table's nullability is enforced inside the job: where the DataFrame may hold a null the table forbids (a
non-nullable column, partition column, struct field, array element or map value), a row holding one makes its
task fail with a marker naming the check, and the write raises :class:`~txlake.errors.SchemaMismatchError`.

What Spark writes has to be what the table stores, so a write goes this way only when
:func:`native_write_problem` finds nothing against it (else the ``txlake`` data source writes it):

- the lakehouse is on the local file system (the files are moved by ``rename``);
- no replace condition (``overwrite(where=...)`` checks every row in the data source's tasks);
- the DataFrame's nested columns have the table's nested types, field names and order (nullability aside);
  top-level columns may be narrower (e.g. ``int`` into ``long``: Spark casts them);
- partition columns are strings, integers, booleans, dates or decimals (their Delta partition strings are
  Spark's casts of the table-typed value to string), and no column name starts with the writer's
  partition-key prefix ``__txlake_p``.

Timestamps are written as ``TIMESTAMP_MICROS`` (not Spark's default INT96), dates and timestamps in the
proleptic Gregorian calendar, lists and maps in the standard layout: :data:`PARQUET_CONF` is set for the
duration of the job and restored afterwards.
"""

from __future__ import annotations

import operator
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import reduce
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
)

from txlake.delta.actions import Add
from txlake.delta.colmap import is_mapped
from txlake.delta.files import HIVE_NULL, encode_path, partition_dir, stats_from_footer
from txlake.delta.schema import normalize_schema
from txlake.errors import SchemaMismatchError
from txlake.spark.dml import quote
from txlake.spark.jobs import awaited_jobs, job_tag
from txlake.spark.source import spark_schema
from txlake.spark.writing import file_tag, staging_dir
from txlake.txn.engine import WriteOutcome, WriteSpec

PARQUET_CONF = {
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.parquet.writeLegacyFormat": "false",
    "spark.sql.parquet.datetimeRebaseModeInWrite": "CORRECTED",
}
"""Session settings in force while the job plans its write (what Delta readers expect in the files)."""
PARTITION_TYPES = (StringType, ByteType, ShortType, IntegerType, LongType, BooleanType, DateType, DecimalType)
_PARTITION_PREFIX = "__txlake_p"
_NULL_MARKER = "TXLAKE_NULLABILITY_CHECK_"


def output_dir(txid: str, write_id: str) -> str:
    """Where the job writes before the files are moved into the table (relative to the lakehouse root)."""
    return f"{staging_dir(txid)}/{write_id}.out"


def native_write_problem(root: str | None, target: WriteSpec, df: DataFrame) -> str | None:
    """Why Spark's Parquet writer cannot write ``df`` into ``target`` as the table stores it (``None``: it can).

    ``root``: the lakehouse's local directory (``None`` for object stores). ``df`` has the table's column names.
    """
    if root is None:
        return f"{target.table.store_uri} is not on the local file system"
    if target.where is not None:
        return "an overwrite with a condition checks its rows in the txlake data source"
    if is_mapped(target.table.schema):
        return "the table maps column names (its files store physical names)"
    table = {f.name: f for f in spark_schema(target.table).fields}
    parts = set(target.table.partition_columns)
    if len(parts) == len(table):
        return "every column is a partition column (Spark writes no file without a data column)"
    reserved = [n for n in table if n.lower().startswith(_PARTITION_PREFIX)]
    if parts and reserved:
        return f"column {reserved[0]!r} uses the prefix of the writer's partition keys"
    for field in df.schema.fields:
        want = table[field.name]
        if field.name in parts:
            if not isinstance(want.dataType, PARTITION_TYPES):
                return f"partition column {field.name!r} of type {want.dataType.simpleString()}"
            continue
        nested = isinstance(want.dataType, (StructType, ArrayType, MapType))
        if nested and not _same_nested(field.dataType, want.dataType):
            have, table_has = field.dataType.simpleString(), want.dataType.simpleString()
            return f"column {field.name!r} is {have}, the table has {table_has}"
    return None


def _same_nested(src: DataType, dst: DataType) -> bool:
    """Same types and field names in the same order, nullability aside (checked row by row in the job)."""
    if isinstance(src, StructType) and isinstance(dst, StructType):
        return len(src.fields) == len(dst.fields) and all(
            s.name == d.name and _same_nested(s.dataType, d.dataType)
            for s, d in zip(src.fields, dst.fields, strict=True)
        )
    if isinstance(src, ArrayType) and isinstance(dst, ArrayType):
        return _same_nested(src.elementType, dst.elementType)
    if isinstance(src, MapType) and isinstance(dst, MapType):
        return _same_nested(src.keyType, dst.keyType) and _same_nested(src.valueType, dst.valueType)
    return src == dst


def _loosens(src: DataType, dst: DataType) -> bool:
    """Whether values of ``src`` may hold a null below the top level where ``dst`` forbids one."""
    if isinstance(src, StructType) and isinstance(dst, StructType):
        return any(
            (s.nullable and not d.nullable) or _loosens(s.dataType, d.dataType)
            for s, d in zip(src.fields, dst.fields, strict=True)
        )
    if isinstance(src, ArrayType) and isinstance(dst, ArrayType):
        return (src.containsNull and not dst.containsNull) or _loosens(src.elementType, dst.elementType)
    if isinstance(src, MapType) and isinstance(dst, MapType):
        return (src.valueContainsNull and not dst.valueContainsNull) or _loosens(src.valueType, dst.valueType)
    return False


def _nested_violation(value: Column, src: DataType, dst: DataType) -> Column | None:
    """True where a non-null ``value`` holds a null below the top level that ``dst`` forbids (``None``: it cannot)."""
    if not _loosens(src, dst):
        return None
    if isinstance(src, StructType) and isinstance(dst, StructType):
        conditions: list[Column] = []
        for s, d in zip(src.fields, dst.fields, strict=True):
            child = value.getField(s.name)
            if s.nullable and not d.nullable:
                conditions.append(child.isNull())
            inner = _nested_violation(child, s.dataType, d.dataType)
            if inner is not None:
                conditions.append(F.coalesce(inner, F.lit(False)))
        return value.isNotNull() & reduce(operator.or_, conditions)
    if isinstance(src, ArrayType) and isinstance(dst, ArrayType):
        return _any_element(value, src.elementType, dst.elementType, src.containsNull and not dst.containsNull)
    assert isinstance(src, MapType) and isinstance(dst, MapType)
    nulls = src.valueContainsNull and not dst.valueContainsNull
    return _any_element(F.map_values(value), src.valueType, dst.valueType, nulls)


def _any_element(values: Column, src: DataType, dst: DataType, forbid_nulls: bool) -> Column:
    """True where an element of the array ``values`` is null (if ``forbid_nulls``) or breaks ``dst`` below."""

    def bad(element: Column) -> Column:
        checks = [element.isNull()] if forbid_nulls else []
        inner = _nested_violation(element, src, dst)
        if inner is not None:
            checks.append(F.coalesce(inner, F.lit(False)))
        return reduce(operator.or_, checks)

    return F.coalesce(F.exists(values, bad), F.lit(False))


def _null_checks(df: DataFrame, target: WriteSpec, table: dict[str, StructField]) -> list[tuple[str, Column]]:
    """Per column that may break the table's nullability, the condition of a row that breaks it.

    Top-level columns the table declares non-nullable and the DataFrame does not (partition columns included;
    an empty string partition value is null in Delta), and nulls inside nested values where the table's type
    forbids them. Spark's non-nullable columns are trusted, as Spark itself does. ``table``: the table's
    Spark fields by name.
    """
    parts = set(target.table.partition_columns)
    checks = []
    for field in df.schema.fields:
        want = table[field.name]
        col = F.col(quote(field.name))
        conditions = []
        if not want.nullable and field.nullable:
            conditions.append(col.isNull())
        if not want.nullable and field.name in parts and isinstance(field.dataType, StringType):
            conditions.append(col == F.lit(""))
        nested = _nested_violation(col, field.dataType, want.dataType)
        if nested is not None:
            conditions.append(F.coalesce(nested, F.lit(False)))
        if conditions:
            checks.append((field.name, reduce(operator.or_, conditions)))
    missing = [n for n, f in table.items() if not f.nullable and n not in set(df.columns)]
    if missing:  # (conform refuses these before any job; kept as a guard)
        raise SchemaMismatchError(
            f"non-nullable columns {missing} are missing", table=target.table.table_name, columns=missing
        )
    return checks


@dataclass(frozen=True, slots=True)
class _Written:
    """A file of the job's output, checked and described, not yet moved."""

    source: str
    relative: str
    add: Add


def write_native(spark: SparkSession, root: str, target: WriteSpec, df: DataFrame, write_id: str) -> WriteOutcome:
    """Write ``df`` (checked by :func:`native_write_problem`) with Spark's Parquet writer; return the adds."""
    table = target.table
    fields = {f.name: f for f in spark_schema(table).fields}
    parts = list(table.partition_columns)
    present = {f.name: f.dataType for f in df.schema.fields}
    checks = _null_checks(df, target, fields)
    names: list[str] = []
    select: list[Column] = []
    for field in fields.values():
        if field.name in parts:
            continue
        col = F.col(quote(field.name)) if field.name in present else F.lit(None)
        cast = field.name not in present or not _same_nested(present[field.name], field.dataType)
        names.append(field.name)
        select.append(col.cast(field.dataType) if cast else col)
    if checks:
        # a row that breaks the table's nullability fails its task with a message naming the check
        failed = F.coalesce(*[F.when(bad, F.lit(f"{_NULL_MARKER}{i}:")) for i, (_, bad) in enumerate(checks)])
        select[0] = F.when(failed.isNotNull(), F.raise_error(failed)).otherwise(select[0])
    select = [col.alias(name) for col, name in zip(select, names, strict=True)]
    keys = []
    for i, field in enumerate(fields[n] for n in parts):
        key = f"{_PARTITION_PREFIX}{i}"
        value = F.col(quote(field.name)) if field.name in present else F.lit(None)
        select.append(value.cast(field.dataType).cast(StringType()).alias(key))  # Delta's partition string
        keys.append(key)
    out = os.path.join(root, output_dir(target.txid, write_id))
    try:
        with _session_conf(spark, PARQUET_CONF):
            frame = df.select(*select)
            writer = frame.write.mode("errorifexists")
            if keys:
                writer = writer.partitionBy(*keys)
            try:
                with awaited_jobs(spark.sparkContext, job_tag(write_id)):  # no attempt writes below out afterwards
                    writer.parquet(out)
            except Exception as exc:
                broken = _broken_column(exc, checks)
                if broken is None:
                    raise
                raise SchemaMismatchError(
                    f"column {broken!r} holds nulls the table does not allow", table=table.table_name, columns=[broken]
                ) from exc
        written = _describe(out, target, write_id)
        adds = _move(root, table.table_path, written)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return WriteOutcome(adds=adds, num_rows=sum(int(a.num_records or 0) for a in adds))


def _broken_column(exc: BaseException, checks: list[tuple[str, Column]]) -> str | None:
    """The column whose nullability check failed the job, from the marker the failing task raised."""
    match = re.search(re.escape(_NULL_MARKER) + r"(\d+):", str(exc))
    if match is None or int(match.group(1)) >= len(checks):
        return None
    return checks[int(match.group(1))][0]


@contextmanager
def _session_conf(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    old = {k: spark.conf.get(k, None) for k in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, previous in old.items():
            if previous is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, previous)


def _describe(out: str, target: WriteSpec, write_id: str) -> list[_Written]:
    """Every data file of the job's output with its add action; raises if a non-nullable column has nulls."""
    table = target.table
    schema = normalize_schema(table.schema)
    parts = list(table.partition_columns)
    data_fields = {f.name: f for f in schema if f.name not in parts}
    tag = file_tag(target.txid, write_id)
    found: list[_Written] = []
    for directory, subdirs, names in os.walk(out):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith(("_", ".")) or d.startswith(_PARTITION_PREFIX))
        for name in sorted(names):
            if name.startswith(("_", ".")) or not name.endswith(".parquet"):
                continue  # _SUCCESS, Hadoop's .crc checksums
            source = os.path.join(directory, name)
            values = _partition_values(os.path.relpath(directory, out), parts)
            meta = pq.read_metadata(source)
            if meta.num_rows == 0:
                continue  # (Spark writes one empty file for an empty DataFrame)
            file_schema = pa.schema([data_fields[n] for n in meta.schema.to_arrow_schema().names])
            stats = stats_from_footer(meta, file_schema)
            pdir = partition_dir(parts, values)
            file_name = f"part-{tag}-{name.removeprefix('part-')}"
            relative = f"{pdir}/{file_name}" if pdir else file_name
            stat = os.stat(source)
            add = Add(
                path=encode_path(relative),
                partition_values=values,
                size=stat.st_size,
                modification_time=int(stat.st_mtime * 1000),
                data_change=True,
                stats=stats,
            )
            found.append(_Written(source, relative, add))
    return found


def _partition_values(relative_dir: str, parts: list[str]) -> dict[str, str | None]:
    """Delta partition values from Spark's ``__txlake_p<i>=<escaped value>`` directories."""
    if not parts:
        return {}
    segments = relative_dir.split(os.sep)
    values: dict[str, str | None] = {}
    for i, name in enumerate(parts):
        key, _, raw = segments[i].partition("=")
        if key != f"{_PARTITION_PREFIX}{i}":
            raise RuntimeError(f"unexpected directory {relative_dir!r} in Spark's output")
        text = unquote(raw)
        values[name] = None if text in (HIVE_NULL, "") else text
    return values


def _move(root: str, table_path: str, written: list[_Written]) -> tuple[Add, ...]:
    """Rename the checked files into the table (the names carry the txid, so a crash here leaves findable files)."""
    base = os.path.join(root, table_path) if table_path else root
    made: set[str] = set()
    for item in written:
        target = os.path.join(base, *item.relative.split("/"))
        parent = os.path.dirname(target)
        if parent not in made:
            os.makedirs(parent, exist_ok=True)
            made.add(parent)
        os.rename(item.source, target)
    return tuple(w.add for w in written)
