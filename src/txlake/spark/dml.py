"""UPDATE, DELETE and MERGE as Spark jobs over the candidate files only (copy-on-write, DESIGN §8).

The transaction picks the candidate files (live files whose statistics may match) and records the read; this
module moves the rows. Every statement runs in two steps, as Delta's own copy-on-write commands do:

1. **Find the touched files.** One job reads only the candidate files, each row tagged with its file, and
   aggregates per file how many rows the statement changes (a merge also counts target rows matched by more
   than one source row: :class:`~txlake.errors.MergeCardinalityError` is raised here, before anything is
   written). Files without a changed row are not touched again.
2. **Rewrite them.** A second job reads only the touched files, applies the statement to every row (rows that
   do not match are copied) and writes the result, plus a merge's inserted rows, through the engine's write
   path: executors write Parquet files with statistics, the add actions come back to the transaction, which
   stages them with removes of exactly the touched files. Nothing is committed to Delta.

Semantics are Spark SQL's (conditions, expressions, NULL: a row whose condition is NULL is neither updated
nor deleted) and Delta's (merge clause order, ``*`` maps, cardinality). A new value is cast to its column's
type as Spark's ANSI store assignment does (numbers to numbers, datetimes to datetimes, decimals rounded
half-up; a value out of range fails the job); other type changes are a :class:`SchemaMismatchError` before any
job. Conditions and expressions must be deterministic: each step evaluates them again (as in Delta). A merge
source is evaluated by each step (key range, touched files, rewrite): it must give the same rows every time
(cache it if it is expensive or non-deterministic).

Tagging rows with their file: Spark's Parquet reader reports ``_metadata.file_path`` (a URL, mapped back to
the file's add action here); the ``txlake`` data source adds the add action's path as a column.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    NullType,
    NumericType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from txlake.delta.actions import Add
from txlake.errors import MergeCardinalityError, PredicateError, SchemaMismatchError, TxlakeError
from txlake.expr import parse_expression, parse_predicate
from txlake.spark.planning import literal_sql
from txlake.spark.source import spark_schema
from txlake.txn.engine import (
    ColumnMap,
    MergeOutcome,
    MergeSpec,
    RewriteOutcome,
    ScanSpec,
    TableLocation,
    WriteOutcome,
    WriteSpec,
)

FILE_COLUMN = "__txlake_file"
"""The column a tagged scan adds: which data file a row came from."""
_ROW = "__txlake_row"
_PAIRS = "__txlake_pairs"
_ACTION = "__txlake_action"
_MATCHED = "__txlake_matched"
NOTHING = "FALSE"
"""The pruning predicate of a merge whose source has no join key value: no target row can match."""

_INTEGRAL = (ByteType, ShortType, IntegerType, LongType)
_DATETIME = (DateType, TimestampType, TimestampNTZType)


def quote(name: str) -> str:
    """A name as a Spark identifier (dots and spaces inside names stay part of the name)."""
    return "`" + name.replace("`", "``") + "`"


# ---------------------------------------------------------------------------------------------- scans


def local_file_key(url: str) -> str:
    """The local path of a ``file:`` URL as txlake builds them (not percent-encoded)."""
    path = url
    if path.startswith("file://"):
        rest = path[len("file://") :]
        path = rest if rest.startswith("/") else "/" + rest.partition("/")[2]
    elif path.startswith("file:"):
        path = path[len("file:") :]
    return os.path.normpath(path)


def spark_file_key(url: str) -> str:
    """The local path of a file URL as Spark reports it (``_metadata.file_path``: percent-encoded)."""
    return os.path.normpath(unquote(urlsplit(url).path))


@dataclass(frozen=True)
class TaggedScan:
    """A DataFrame over a scan's files with the extra column :data:`FILE_COLUMN` naming each row's file.

    ``files`` maps a tag (after ``key``) to the file's add action: the add path itself for the ``txlake`` data
    source, the local path for Spark's Parquet reader (whose tags are URLs).
    """

    frame: DataFrame
    files: Mapping[str, Add]
    key: Callable[[str], str] = str

    def file_of(self, tag: str) -> Add:
        add = self.files.get(self.key(tag))
        if add is None:
            raise TxlakeError(f"Spark reported a row of file {tag!r}, which is not a file of the scan")
        return add


class FrameEngine(Protocol):
    """What the DML jobs need from the Spark engine: reads over fixed files and staged writes."""

    spark: SparkSession

    def read(self, scan: ScanSpec, *, where: str | None = None, columns: Sequence[str] | None = None) -> DataFrame: ...

    def read_tagged(self, scan: ScanSpec) -> TaggedScan: ...

    def write(self, target: WriteSpec, data: Any) -> WriteOutcome: ...


# --------------------------------------------------------------------------------------- expressions


def _expr(sql: str) -> Column:
    try:
        return F.expr(sql)
    except AnalysisException as exc:  # ParseException is an AnalysisException
        raise PredicateError(f"cannot parse {sql!r}: {exc.getMessage()}", expression=sql) from exc


def _analyze(frame: DataFrame, columns: Sequence[Column], sql: str) -> StructType:
    """The schema of ``frame.select(columns)`` (analysis on the driver, no job); errors name ``sql``."""
    try:
        return frame.select(*columns).schema
    except AnalysisException as exc:
        raise PredicateError(f"{sql!r}: {exc.getMessage()}", expression=sql) from exc


def _condition(frame: DataFrame, sql: str) -> Column:
    """``sql`` as a boolean Column valid on ``frame`` (checked now, before any job)."""
    column = _expr(sql)
    dtype = _analyze(frame, [column], sql).fields[0].dataType
    if not isinstance(dtype, (BooleanType, NullType)):
        raise PredicateError(f"{sql!r} is not a boolean condition ({dtype.simpleString()})", expression=sql)
    return column


def _store_assignable(source: DataType, target: DataType) -> bool:
    """Whether Spark's ANSI store assignment casts ``source`` values to ``target`` (else: a type error)."""
    if isinstance(source, NullType) or source == target:
        return True
    if isinstance(source, NumericType) and isinstance(target, NumericType):
        return True
    if isinstance(source, _DATETIME) and isinstance(target, _DATETIME):
        return True
    atomic = (StringType, BinaryType, BooleanType)
    if any(isinstance(source, t) and isinstance(target, t) for t in atomic):
        return True
    return source.simpleString() == target.simpleString()


def _assignment(frame: DataFrame, sql: str, field: StructField, table: str) -> Column:
    """``sql`` as a value of column ``field`` (checked on ``frame`` now, cast to the column's type)."""
    value = _expr(sql)
    dtype = _analyze(frame, [value], sql).fields[0].dataType
    if not _store_assignable(dtype, field.dataType):
        raise SchemaMismatchError(
            f"{sql!r} is {dtype.simpleString()}, which cannot be stored in column {field.name!r} "
            f"({field.dataType.simpleString()})",
            table=table,
            columns=[field.name],
        )
    if dtype != field.dataType:
        value = value.cast(field.dataType)
    return value


def target_column(schema: StructType, key: str, alias: str | None, table: str) -> str:
    """The target column a SET/INSERT key names (``col``, ``t.col``, case-insensitive, exact spelling first)."""
    name = key.strip().strip("`")
    if alias is not None and name.lower().startswith(alias.lower() + "."):
        name = name[len(alias) + 1 :].strip("`")
    names = schema.fieldNames()
    hits = [n for n in names if n == name] or [n for n in names if n.lower() == name.lower()]
    if len(hits) != 1:
        raise SchemaMismatchError(f"no column {key!r} in the target", table=table, columns=[key])
    return hits[0]


def column_map(
    mapping: ColumnMap, target: StructType, source: StructType, spec: MergeSpec, table: str
) -> dict[str, str]:
    """Target column -> SQL; ``"*"`` takes every target column from the source column of that name."""
    if mapping == "*":
        out: dict[str, str] = {}
        missing = []
        for name in target.fieldNames():
            hits = [n for n in source.fieldNames() if n.lower() == name.lower()]
            if not hits:
                missing.append(name)
                continue
            exact = [n for n in hits if n == name]
            out[name] = f"{quote(spec.source_alias)}.{quote((exact or hits)[0])}"
        if missing:
            raise SchemaMismatchError(
                f"source lacks target columns {missing} needed by '*'", table=table, columns=missing
            )
        return out
    assert not isinstance(mapping, str)
    return {target_column(target, key, spec.target_alias, table): sql for key, sql in mapping.items()}


# ----------------------------------------------------------------------------------- update / delete


def rewrite(
    engine: FrameEngine,
    scan: ScanSpec,
    target: WriteSpec,
    *,
    where: str | None,
    set: Mapping[str, str] | None = None,
    delete: bool = False,
) -> RewriteOutcome:
    """Copy-on-write UPDATE (``set``) or DELETE (``delete=True``) over ``scan.files`` (see the module doc)."""
    if (set is None) == (not delete):
        raise ValueError("rewrite needs exactly one of set= and delete=True")
    if not scan.files:
        return RewriteOutcome()
    table = scan.table
    schema = spark_schema(table)
    tagged = engine.read_tagged(scan)
    condition = _condition(tagged.frame, where) if where is not None else None
    values: dict[str, Column] = {}
    for key, sql in (set or {}).items():
        name = target_column(schema, key, None, table.table_name)
        if name in table.partition_columns:
            raise ValueError(f"updating partition column {name!r} is not supported")
        values[name] = _assignment(tagged.frame, sql, schema[name], table.table_name)

    matched = _matched_rows(tagged, condition, scan.files)
    if not matched:
        return RewriteOutcome()
    removed = tuple(a for a in scan.files if a.path in matched)
    if delete:
        # files whose every row is deleted need no rewrite (a partition predicate deletes whole files)
        kept = [a for a in removed if condition is not None and a.num_records != matched[a.path]]
        if not kept:
            return RewriteOutcome(removed, (), matched)
        assert condition is not None
        frame = engine.read(ScanSpec(table, tuple(kept))).where(~F.coalesce(condition, F.lit(False)))
    else:
        frame = engine.read(ScanSpec(table, removed))
        columns = []
        for field in schema.fields:
            column = F.col(quote(field.name))
            value = values.get(field.name)
            if value is not None:
                column = value if condition is None else F.when(condition, value).otherwise(column)
            columns.append(column.alias(field.name))
        frame = frame.select(*columns)
    written = engine.write(target, frame)
    return RewriteOutcome(removed, written.adds, matched)


def _matched_rows(tagged: TaggedScan, condition: Column | None, files: Sequence[Add]) -> dict[str, int]:
    """Rows matching ``condition`` per file path (files without a match are left out): step 1."""
    if condition is None and all(a.num_records is not None for a in files):
        return {a.path: int(a.num_records or 0) for a in files if a.num_records}
    hits = tagged.frame if condition is None else tagged.frame.where(condition)
    counts: dict[str, int] = {}
    for row in hits.groupBy(FILE_COLUMN).count().collect():
        path = tagged.file_of(row[FILE_COLUMN]).path
        counts[path] = counts.get(path, 0) + int(row["count"])
    return counts


# --------------------------------------------------------------------------------------------- merge


def merge_pruning_predicate(source: DataFrame, spec: MergeSpec, table: TableLocation) -> str | None:
    """A predicate on the target implied by every match of the merge: key ranges of the source (one small job).

    For each ``t.col = s.expr`` conjunct of ``spec.on`` whose sides have the same kind of type (integers,
    decimals, strings, dates, timestamps; not floats: NaN), the source's min and max of ``s.expr`` bound
    ``col``. A key whose source values are all NULL matches nothing (:data:`NOTHING`). ``None``: no such
    conjunct, prune nothing.
    """
    try:
        condition = parse_predicate(spec.on)
    except PredicateError:
        return None
    t, s = spec.target_alias.lower(), spec.source_alias.lower()
    spark_target = spark_schema(table)
    aliased = source.alias(spec.source_alias)
    keys: list[tuple[str, str]] = []
    for left, right in condition.equalities():
        sides = {}
        for sql in (left, right):
            refs = parse_expression(sql).columns
            owner = next(iter(refs)).split(".", 1)[0] if len(refs) == 1 else None
            sides[owner] = sql
        if set(sides) != {t, s}:
            continue
        column = next(iter(parse_expression(sides[t]).columns)).split(".", 1)[1]
        hits = [f for f in spark_target.fields if f.name.lower() == column]
        if len(hits) != 1:
            continue
        try:
            source_type = aliased.select(F.expr(sides[s])).schema.fields[0].dataType
        except AnalysisException:
            return None  # the merge itself reports it
        if _comparable(hits[0].dataType, source_type):
            keys.append((hits[0].name, sides[s]))
    if not keys:
        return None
    aggregates = []
    for i, (_, sql) in enumerate(keys):
        aggregates += [F.min(F.expr(sql)).alias(f"lo{i}"), F.max(F.expr(sql)).alias(f"hi{i}")]
    bounds = aliased.agg(*aggregates).toArrow().to_pylist()[0]
    parts = []
    for i, (name, _) in enumerate(keys):
        lo, hi = bounds[f"lo{i}"], bounds[f"hi{i}"]
        if lo is None or hi is None:
            return NOTHING
        lo_sql, hi_sql = literal_sql(lo), literal_sql(hi)
        if lo_sql is None or hi_sql is None:
            continue
        parts.append(f"{quote(name)} >= {lo_sql} AND {quote(name)} <= {hi_sql}")
    if not parts:
        return None
    predicate = " AND ".join(parts)
    try:
        parse_predicate(predicate).bind(table.schema)
    except PredicateError:
        return None
    return predicate


def _comparable(target: DataType, source: DataType) -> bool:
    if isinstance(target, _INTEGRAL) and isinstance(source, _INTEGRAL):
        return True
    if isinstance(target, DecimalType) and isinstance(source, (DecimalType, *_INTEGRAL)):
        return True
    return type(target) is type(source) and isinstance(target, (StringType, DateType, TimestampType, TimestampNTZType))


@dataclass(frozen=True)
class _MergePlan:
    """A merge's Columns, resolved and type-checked on the driver before any job."""

    on: Column
    action: Column
    """Per joined row: the first matched clause that applies (``'update'``/``'delete'``), else NULL."""
    updates: Mapping[str, Column]
    inserts: Mapping[str, Column]
    insert_condition: Column | None


def _plan_merge(tagged: TaggedScan, source: DataFrame, spec: MergeSpec, schema: StructType, table: str) -> _MergePlan:
    t, s = spec.target_alias, spec.source_alias
    target_frame = tagged.frame.drop(FILE_COLUMN).alias(t)
    aliased = source.alias(s)
    on = _expr(spec.on)
    try:
        joined = target_frame.join(aliased, on, "inner")
        joined.schema  # noqa: B018 (analysis: a bad ON condition fails here)
    except AnalysisException as exc:
        raise PredicateError(f"{spec.on!r}: {exc.getMessage()}", expression=spec.on) from exc
    action: Column = F.lit(None).cast("string")
    branches = [
        (clause.kind, _condition(joined, clause.condition) if clause.condition else F.lit(True))
        for clause in spec.matched_clauses()
    ]
    if branches:
        kind, cond = branches[0]
        action = F.when(cond, F.lit(kind))
        for kind, cond in branches[1:]:
            action = action.when(cond, F.lit(kind))
    updates: dict[str, Column] = {}
    if spec.matched_update is not None:
        for name, sql in column_map(spec.matched_update, schema, source.schema, spec, table).items():
            updates[name] = _assignment(joined, sql, schema[name], table)
    inserts: dict[str, Column] = {}
    insert_condition = None
    if spec.not_matched_insert is not None:
        mapping = column_map(spec.not_matched_insert, schema, source.schema, spec, table)
        for field in schema.fields:
            value = mapping.get(field.name)
            inserts[field.name] = (
                _assignment(aliased, value, field, table) if value is not None else F.lit(None).cast(field.dataType)
            )
        if spec.not_matched_insert_condition is not None:
            insert_condition = _condition(aliased, spec.not_matched_insert_condition)
    return _MergePlan(on, action, updates, inserts, insert_condition)


@dataclass(frozen=True)
class _Touched:
    """Step 1 of a merge: per touched file path, rows updated and deleted."""

    updated: Mapping[str, int]
    deleted: Mapping[str, int]

    @property
    def paths(self) -> set[str]:
        return {p for p, n in self.updated.items() if n} | {p for p, n in self.deleted.items() if n}


def _touched_files(tagged: TaggedScan, source: DataFrame, spec: MergeSpec, plan: _MergePlan, table: str) -> _Touched:
    """Match target rows with source rows; raise on ambiguous matches; count changes per file (one job)."""
    target = tagged.frame.withColumn(_ROW, F.monotonically_increasing_id()).alias(spec.target_alias)
    joined = target.join(source.alias(spec.source_alias), plan.on, "inner")
    per_row = joined.groupBy(_ROW, FILE_COLUMN).agg(F.count(F.lit(1)).alias(_PAIRS), F.max(plan.action).alias(_ACTION))
    per_file = per_row.groupBy(FILE_COLUMN).agg(
        F.sum(F.when(F.col(_PAIRS) > 1, 1).otherwise(0)).alias("ambiguous"),
        F.sum(F.when(F.col(_ACTION) == "update", 1).otherwise(0)).alias("updated"),
        F.sum(F.when(F.col(_ACTION) == "delete", 1).otherwise(0)).alias("deleted"),
    )
    rows = per_file.collect()
    ambiguous = sum(int(r["ambiguous"]) for r in rows)
    if ambiguous and not spec.only_delete:
        raise MergeCardinalityError(
            f"{ambiguous} target rows of {table} match more than one source row", table=table, rows=ambiguous
        )
    updated: dict[str, int] = {}
    deleted: dict[str, int] = {}
    for r in rows:
        path = tagged.file_of(r[FILE_COLUMN]).path
        updated[path] = updated.get(path, 0) + int(r["updated"])
        deleted[path] = deleted.get(path, 0) + int(r["deleted"])
    return _Touched(updated, deleted)


def merge(engine: FrameEngine, scan: ScanSpec, target: WriteSpec, source: DataFrame, spec: MergeSpec) -> MergeOutcome:
    """MERGE ``source`` into the rows of ``scan.files`` (see the module doc); writes, never stages."""
    table: TableLocation = scan.table
    schema = spark_schema(table)
    tagged = engine.read_tagged(scan)
    plan = _plan_merge(tagged, source, spec, schema, table.table_name)
    t, s = spec.target_alias, spec.source_alias

    touched = _Touched({}, {})
    if spec.matched_clauses() and scan.files:
        touched = _touched_files(tagged, source, spec, plan, table.table_name)
    paths = touched.paths
    removed = tuple(a for a in scan.files if a.path in paths)
    num_updated = sum(touched.updated.values())
    num_deleted = sum(touched.deleted.values())

    parts: list[DataFrame] = []
    if removed:
        frame = engine.read(ScanSpec(table, removed)).alias(t)
        if spec.only_delete:
            rewritten = frame.join(source.alias(s), plan.on, "left_anti")
        else:
            flagged = source.withColumn(_MATCHED, F.lit(True)).alias(s)
            joined = frame.join(flagged, plan.on, "left")
            action = F.when(F.col(_MATCHED).isNull(), F.lit(None).cast("string")).otherwise(plan.action)
            columns = []
            for field in schema.fields:
                column = F.col(f"{quote(t)}.{quote(field.name)}")
                value = plan.updates.get(field.name)
                if value is not None:
                    column = F.when(action == "update", value).otherwise(column)
                columns.append(column.alias(field.name))
            rewritten = joined.where(action.isNull() | (action != "delete")).select(*columns)
        parts.append(rewritten)
    inserted: DataFrame | None = None
    if spec.not_matched_insert is not None:
        candidates = tagged.frame.drop(FILE_COLUMN).alias(t)
        unmatched = source.alias(s).join(candidates, plan.on, "left_anti")
        if plan.insert_condition is not None:
            unmatched = unmatched.where(plan.insert_condition)
        inserted = unmatched.select(*[plan.inserts[f.name].alias(f.name) for f in schema.fields])
        parts.append(inserted)
    if not parts:
        return MergeOutcome()

    copied: int | None = None
    if all(a.num_records is not None for a in removed):
        copied = sum(int(a.num_records or 0) for a in removed) - num_deleted
    num_inserted = 0
    if inserted is not None and copied is None:
        num_inserted = inserted.count()  # rows per rewritten file unknown: count the inserts on their own
    frame = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    written = engine.write(target, frame)
    if inserted is not None and copied is not None:
        num_inserted = written.num_rows - copied
    return MergeOutcome(removed, written.adds, num_updated, num_deleted, num_inserted)
