"""Parquet data files of a Delta table: writing with Delta statistics, partition paths, reading back."""

from __future__ import annotations

import io
import json
import math
import posixpath
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import quote, unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from txlake.delta.actions import Add, now_ms
from txlake.delta.colmap import FileFields, physical_name, shredded_variant, to_logical, to_physical
from txlake.delta.dv import (
    FILE_FORMAT_VERSION,
    DeletionVectorDescriptor,
    deleted_rows,
    encode_roaring_bitmap_array,
    file_range,
    frame,
    inline_bytes,
    keep_mask,
    new_file_descriptor,
    unframe,
)
from txlake.delta.roaring import U64Array
from txlake.delta.schema import cast_problem, null_column, spark_type_name
from txlake.errors import (
    CorruptLogError,
    DataFileNotFoundError,
    ObjectNotFoundError,
    SchemaMismatchError,
    StorageError,
    UnsupportedFeatureError,
)
from txlake.storage import ObjectStore
from txlake.storage.threads import map_concurrently
from txlake.variant import has_variant

STRING_STATS_PREFIX = 32
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
READ_CONCURRENCY = 8


# ------------------------------------------------------------------------------------------- statistics


def _ts_to_json(value: datetime, *, utc: bool, round_up: bool) -> str:
    """Timestamps in stats have millisecond precision; max values are rounded up to stay an upper bound."""
    if round_up and value.microsecond % 1000:
        value = value + timedelta(microseconds=1000 - value.microsecond % 1000)
    else:
        value = value - timedelta(microseconds=value.microsecond % 1000)
    if utc:
        value = value.astimezone(UTC)
        return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}"


def _stat_value(value: Any, dtype: pa.DataType, *, is_max: bool) -> Any:
    """A min/max value in Delta's stats JSON encoding, or ``None`` when it cannot be a safe bound."""
    if value is None:
        return None
    if pa.types.is_timestamp(dtype):
        try:
            return _ts_to_json(value, utc=dtype.tz is not None, round_up=is_max)
        except OverflowError:  # rounding 9999-12-31 23:59:59.999xxx up: no millisecond upper bound exists
            return None
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        f = float(value)
        return f if Decimal(repr(f)) == value else None
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, str):
        if len(value) <= STRING_STATS_PREFIX:
            return value
        # A prefix is a valid lower bound; there is no short valid upper bound, so drop the max.
        return None if is_max else value[:STRING_STATS_PREFIX]
    if isinstance(value, (bool, bytes)):
        return None
    return value


def _has_minmax(dtype: pa.DataType) -> bool:
    return bool(
        pa.types.is_integer(dtype)
        or pa.types.is_floating(dtype)
        or pa.types.is_decimal(dtype)
        or pa.types.is_string(dtype)
        or pa.types.is_large_string(dtype)
        or pa.types.is_date(dtype)
        or pa.types.is_timestamp(dtype)
    )


def _column_stats(col: pa.ChunkedArray | pa.Array, dtype: pa.DataType) -> tuple[Any, Any, Any]:
    """(min, max, nullCount) for one column; nested structs recurse into dicts."""
    if pa.types.is_struct(dtype):
        chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
        flat = [c.flatten() for c in chunks]  # children with the parent's nulls applied
        children = [dtype.field(i) for i in range(dtype.num_fields)]
        mins, maxs, nulls = _gather(
            (child.name, _column_stats(pa.chunked_array([f[i] for f in flat], type=child.type), child.type))
            for i, child in enumerate(children)
        )
        return (mins or None), (maxs or None), nulls
    null_count = col.null_count
    if not _has_minmax(dtype) or len(col) == null_count:
        return None, None, null_count
    mm = pc.min_max(col)
    lo = _stat_value(mm["min"].as_py(), dtype, is_max=False)
    hi = _stat_value(mm["max"].as_py(), dtype, is_max=True)
    if pa.types.is_floating(dtype) and pc.any(pc.is_nan(col)).as_py():
        return None, None, null_count
    return lo, hi, null_count


def _gather(
    columns: Iterable[tuple[str, tuple[Any, Any, Any]]],
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Per-column (min, max, nullCount) as Delta's three maps; unknown values (``None``) are left out."""
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    for name, (lo, hi, nc) in columns:
        if lo is not None:
            mins[name] = lo
        if hi is not None:
            maxs[name] = hi
        if nc is not None:
            nulls[name] = nc
    return mins, maxs, nulls


def _stats_json(num_records: int, columns: Iterable[tuple[str, tuple[Any, Any, Any]]]) -> str:
    mins, maxs, nulls = _gather(columns)
    doc = {"numRecords": num_records, "minValues": mins, "maxValues": maxs, "nullCount": nulls}
    return json.dumps(doc, separators=(",", ":"))


def compute_stats(data: pa.Table) -> str:
    """Delta ``stats`` JSON for ``data``: numRecords, minValues, maxValues, nullCount."""
    return _stats_json(data.num_rows, ((f.name, _column_stats(data.column(f.name), f.type)) for f in data.schema))


def _leaf_count(dtype: pa.DataType) -> int:
    """How many Parquet leaf columns store a column of ``dtype``."""
    if pa.types.is_struct(dtype):
        return sum(_leaf_count(dtype.field(i).type) for i in range(dtype.num_fields))
    if pa.types.is_map(dtype):
        return _leaf_count(dtype.key_type) + _leaf_count(dtype.item_type)
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or pa.types.is_fixed_size_list(dtype):
        return _leaf_count(dtype.value_type)
    return 1


def _footer_leaf_stats(meta: pq.FileMetaData, leaf: int, dtype: pa.DataType) -> tuple[Any, Any, Any]:
    """(min, max, nullCount) of one top-level or struct-child leaf over every row group of ``meta``.

    A row group without statistics makes the column's stats unknown (``None``). Floating point min/max are
    dropped when a bound is NaN (Parquet writers that order NaN last report it as the max when present).
    """
    nulls = 0
    lo: Any = None
    hi: Any = None
    bounded = _has_minmax(dtype)
    for i in range(meta.num_row_groups):
        group = meta.row_group(i)
        stats = group.column(leaf).statistics
        if stats is None or not stats.has_null_count:
            return None, None, None
        nulls += stats.null_count
        if not bounded or stats.null_count >= group.num_rows:
            continue  # only nulls here: nothing to bound
        if not stats.has_min_max:
            bounded = False
            continue
        gmin, gmax = stats.min, stats.max
        if isinstance(gmin, float) and (math.isnan(gmin) or math.isnan(gmax)):
            bounded = False
            continue
        lo = gmin if lo is None or gmin < lo else lo
        hi = gmax if hi is None or gmax > hi else hi
    if not bounded or lo is None:
        return None, None, nulls
    return _stat_value(lo, dtype, is_max=False), _stat_value(hi, dtype, is_max=True), nulls


def _footer_field_stats(meta: pq.FileMetaData, leaf: int, dtype: pa.DataType) -> tuple[Any, Any, Any]:
    if not pa.types.is_struct(dtype):
        return _footer_leaf_stats(meta, leaf, dtype)
    mins, maxs, nulls = _gather(_footer_fields_stats(meta, leaf, [dtype.field(i) for i in range(dtype.num_fields)]))
    return (mins or None), (maxs or None), (nulls or None)


def _footer_fields_stats(
    meta: pq.FileMetaData, leaf: int, fields: Iterable[pa.Field]
) -> Iterator[tuple[str, tuple[Any, Any, Any]]]:
    """(name, (min, max, nullCount)) per field of ``fields`` (whose leaves start at ``leaf``), lists and maps
    left out."""
    for field in fields:
        if not (pa.types.is_list(field.type) or pa.types.is_large_list(field.type) or pa.types.is_map(field.type)):
            yield field.name, _footer_field_stats(meta, leaf, field.type)
        leaf += _leaf_count(field.type)


def stats_from_footer(meta: pq.FileMetaData, schema: pa.Schema) -> str:
    """Delta ``stats`` JSON of a Parquet file written by another engine (e.g. Spark), from its footer.

    ``schema``: the table's columns stored in the file, in file order (partition columns are not in the
    files). Parquet statistics are exact bounds; they go through the same encoding as :func:`compute_stats`
    (millisecond timestamps rounded outwards, long strings cut to a prefix for the min and dropped for the max).
    Null counts of leaves inside structs include the rows where the struct itself is null, as in
    :func:`compute_stats`. List and map columns get no statistics.
    """
    return _stats_json(meta.num_rows, _footer_fields_stats(meta, 0, schema))


# ------------------------------------------------------------------------------------------- partitions


def serialize_partition_value(value: Any) -> str | None:
    """Delta's string form of a partition value; ``None`` and ``""`` are null (the protocol reads ``""`` as null)."""
    if value is None or (isinstance(value, str) and not value):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return str(value.strftime("%Y-%m-%d %H:%M:%S.%f"))
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return str(value)


def parse_partition_value(raw: str | None, dtype: pa.DataType) -> Any:
    """The typed value of a Delta partition string (an empty string is null for every type, PROTOCOL.md)."""
    if raw is None or raw == "" or raw == HIVE_NULL:
        return None
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return raw
    if pa.types.is_boolean(dtype):
        return raw.lower() == "true"
    if pa.types.is_integer(dtype):
        return int(raw)
    if pa.types.is_floating(dtype):
        return float(raw)
    if pa.types.is_decimal(dtype):
        return Decimal(raw)
    if pa.types.is_date(dtype):
        return date.fromisoformat(raw)
    if pa.types.is_timestamp(dtype):
        value = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        if dtype.tz is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value
    if pa.types.is_binary(dtype):
        return raw.encode("latin-1")
    raise TypeError(f"type {dtype} cannot be a partition column")


def partition_dir(partition_columns: Sequence[str], values: Mapping[str, str | None]) -> str:
    """Hive-style directory ``a=1/b=x`` for a file's partition values (escaped like Spark).

    ``partition_columns`` name the keys of ``values`` (physical names on a table that maps columns).
    """
    parts = []
    for col in partition_columns:
        raw = values.get(col)
        text = HIVE_NULL if raw is None else quote(raw, safe=" ")
        parts.append(f"{quote(col, safe='')}={text}")
    return "/".join(parts)


def split_by_partition(
    data: pa.Table, partition_columns: Sequence[str]
) -> list[tuple[dict[str, str | None], pa.Table]]:
    """Split rows by partition value; partition columns are dropped from the returned tables.

    The values are keyed by the columns' physical names (their names unless the table maps columns), in the
    order of ``partition_columns``: what ``add.partitionValues`` holds and :func:`partition_dir` takes.
    """
    if not partition_columns:
        return [({}, data)]
    if data.num_rows == 0:
        return []
    keys = data.select(list(partition_columns))
    groups = keys.group_by(list(partition_columns), use_threads=False).aggregate([])
    out = []
    for row in groups.to_pylist():
        mask = None
        for col in partition_columns:
            value = row[col]
            if value is None:
                cond = pc.is_null(data.column(col))
            elif isinstance(value, float) and math.isnan(value):
                cond = pc.is_nan(data.column(col))  # NaN != NaN: equality would drop these rows
            else:
                cond = pc.equal(data.column(col), value)
            cond = pc.fill_null(cond, False)
            mask = cond if mask is None else pc.and_(mask, cond)
        part = data.filter(mask).drop_columns(list(partition_columns))
        values = {c: serialize_partition_value(row[c]) for c in partition_columns}
        empty = [c for c in partition_columns if values[c] is None and not data.schema.field(c).nullable]
        values = {physical_name(data.schema.field(c)): v for c, v in values.items()}
        if empty:  # an empty string: Delta stores it as null, which the column does not allow
            raise SchemaMismatchError(
                f"non-nullable partition columns {empty} hold empty strings (stored as null in Delta)",
                columns=empty,
            )
        out.append((values, part))
    return out


# ------------------------------------------------------------------------------------------------ write


def data_file_name(txid: str | None = None) -> str:
    """``part-<txid>-<uuid>.parquet``: the txid lets GC tell an aborted transaction's files from live ones."""
    tag = txid or "00000"
    return f"part-{tag}-{uuid.uuid4()}.snappy.parquet"


def encode_path(relative: str) -> str:
    """The form of a relative path stored in ``add.path`` (a URI-encoded relative path)."""
    return quote(relative, safe="/=")


def decode_path(path: str) -> str:
    return unquote(path)


def write_data_files(
    store: ObjectStore,
    table_path: str,
    data: pa.Table,
    *,
    partition_columns: Sequence[str] = (),
    txid: str | None = None,
    target_rows: int = 1_000_000,
    table: str | None = None,
    put: Callable[[str, bytes], None] | None = None,
) -> list[Add]:
    """Write ``data`` (already conformed to the table schema) as Parquet files; return their add actions.

    ``put(key, payload)`` sends each file instead of ``store.put`` (a transaction's write-behind uploads)."""
    check_data_columns(data, partition_columns, table=table or table_path)
    adds = []
    for values, part in split_by_partition(data, partition_columns):
        for offset in range(0, max(part.num_rows, 1), target_rows):
            chunk = part.slice(offset, target_rows)
            if chunk.num_rows == 0 and part.num_rows:
                continue
            rel = data_file_name(txid)
            pdir = partition_dir(list(values), values)
            if pdir:
                rel = f"{pdir}/{rel}"
            adds.append(write_one_file(store, table_path, rel, chunk, values, put=put))
    return adds


def check_data_columns(data: pa.Table, partition_columns: Sequence[str], *, table: str | None) -> None:
    """Refuse rows for a table whose every column partitions it (another tool made it so).

    Its data files would hold no column, and a Parquet file of no columns holds no rows: they would be lost.

    Raises:
        SchemaMismatchError: ``data`` has rows and no column outside ``partition_columns``.
    """
    if data.num_rows and all(name in partition_columns for name in data.column_names):
        raise SchemaMismatchError(
            f"{table} has no column outside its partition columns: txlake does not write rows to it (a Parquet file "
            "of no columns holds no rows)",
            table=table,
            columns=list(partition_columns),
        )


def write_one_file(
    store: ObjectStore,
    table_path: str,
    relative: str,
    data: pa.Table,
    partition_values: Mapping[str, str | None],
    *,
    put: Callable[[str, bytes], None] | None = None,
) -> Add:
    """Write one Parquet file at ``relative`` below the table and describe it as an add action.

    ``data`` has the table's fields (their metadata included): on a table that maps columns the file stores the
    physical names (and field ids), as its stats do; ``partition_values`` are keyed by physical names already.
    """
    check_data_columns(data, (), table=table_path)
    data = to_physical(data)
    buf = io.BytesIO()
    pq.write_table(data, buf, compression="snappy", version="2.6")
    payload = buf.getvalue()
    full = f"{table_path}/{relative}" if table_path else relative
    (put or store.put)(full, payload)
    return Add(
        path=encode_path(relative),
        partition_values=dict(partition_values),
        size=len(payload),
        modification_time=now_ms(),
        data_change=True,
        stats=compute_stats(data),
    )


# ------------------------------------------------------------------------------------------------- read


def resolve_file(store: ObjectStore, table_path: str, add_path: str) -> tuple[ObjectStore, str]:
    """The store and key of a data file; absolute URIs (clones) may point into another store."""
    if "://" in add_path:
        full = decode_path(add_path)  # the whole URI is encoded, directories included (PROTOCOL.md)
        if full.startswith(store.uri + "/"):
            return store, posixpath.normpath(full[len(store.uri) + 1 :])
        root, _, key = full.rpartition("/")
        return ObjectStore.from_uri(root, store.storage_options), key
    if add_path.startswith("/"):  # an absolute local path without a scheme (some writers log them so)
        return resolve_file(store, table_path, "file://" + add_path)
    rel = decode_path(add_path)
    key = posixpath.normpath(f"{table_path}/{rel}" if table_path else rel)  # "./" and "../" segments
    if key.startswith("../") or key == "..":
        raise CorruptLogError(f"data file {add_path} lies outside the lakehouse root", path=add_path)
    return store, key


def read_file(
    store: ObjectStore,
    table_path: str,
    add: Add,
    schema: pa.Schema,
    partition_columns: Sequence[str],
    *,
    columns: Sequence[str] | None = None,
    table: str | None = None,
    data: bytes | None = None,
) -> pa.Table:
    """Read one data file as ``schema`` (partition columns filled in, missing columns as nulls); ``data``: its
    bytes when the caller has them (a file it wrote), instead of a GET."""
    if data is None:
        file_store, key = resolve_file(store, table_path, add.path)
        try:
            data = file_store.get(key)
        except ObjectNotFoundError as exc:
            raise DataFileNotFoundError(
                f"data file {add.path} of {table or table_path} is missing", table=table, path=add.path
            ) from exc
    wanted = list(columns) if columns is not None else schema.names
    try:
        # INT96 (Spark's default timestamp encoding) read as nanoseconds overflows outside 1677-2262: Delta
        # timestamps are microseconds, so read them as such.
        pf = pq.ParquetFile(pa.BufferReader(data), coerce_int96_timestamp_unit="us")
        stored = {}  # logical name -> the file's field (a physical name, or a field id, on mapped tables)
        file_fields = FileFields(pf.schema_arrow)
        for name in wanted:
            if name not in partition_columns:
                found = file_fields.find(schema.field(name))
                if found is not None:
                    stored[name] = found
        raw = pf.read(columns=[f.name for f in stored.values()])
    except (pa.ArrowInvalid, OSError) as exc:
        raise CorruptLogError(
            f"data file {add.path} of {table or table_path} is not readable Parquet: {exc}", table=table, path=add.path
        ) from exc
    shredded = [n for n, f in stored.items() if _shredded(f, schema.field(n))]
    if shredded:  # checked per file: a table that allows shredding may still hold unshredded files only
        raise UnsupportedFeatureError(
            f"data file {add.path} of {table or table_path} stores the variants of {shredded} shredded, which txlake "
            "does not reassemble",
            table=table,
            feature="variantShredding",
        )
    if add.deletion_vector is not None:
        raw = _drop_deleted(raw, add, load_deletion_vector(store, table_path, add, table=table), table)
    if stored:  # (a table of no columns keeps its row count)
        raw = pa.Table.from_arrays(
            [to_logical(raw.column(f.name), schema.field(name)) for name, f in stored.items()], names=list(stored)
        )
    return _assemble(raw, add, schema, partition_columns, wanted, table=table)


def _shredded(stored: pa.Field, field: pa.Field) -> bool:
    return has_variant(field.type) and shredded_variant(stored.type, field.type)


def deletion_vector_location(
    store: ObjectStore, table_path: str, dv: DeletionVectorDescriptor
) -> tuple[ObjectStore, str]:
    """The store and key of the file holding an on-disk DV (``u``: below the table root, ``p``: a URI)."""
    if dv.storage_type == "u":
        rel = dv.relative_path()  # built from a UUID and a prefix: a key, not a URI to decode
        return store, (f"{table_path}/{rel}" if table_path else rel)
    return resolve_file(store, table_path, dv.path_or_inline_dv)


def load_deletion_vector(store: ObjectStore, table_path: str, add: Add, *, table: str | None = None) -> U64Array:
    """The row indexes of ``add``'s data file its deletion vector deletes (sorted; empty without a DV).

    Raises:
        DataFileNotFoundError: the DV file is missing.
        CorruptLogError: the DV is malformed, fails its checksum or does not hold ``cardinality`` rows.
    """
    dv = add.deletion_vector
    if dv is None:
        return np.empty(0, dtype=np.uint64)
    where = "inline" if dv.is_inline else (dv.relative_path() if dv.storage_type == "u" else dv.path_or_inline_dv)
    try:
        if dv.is_inline:
            data = inline_bytes(dv)
        else:
            dv_store, key = deletion_vector_location(store, table_path, dv)
            where = key
            start, end = file_range(dv)
            try:
                framed = dv_store.get_range(key, start, end)
            except ObjectNotFoundError as exc:
                raise DataFileNotFoundError(
                    f"deletion vector file {key} of {add.path} in {table or table_path} is missing",
                    table=table,
                    path=dv.relative_path() if dv.storage_type == "u" else dv.path_or_inline_dv,
                ) from exc
            except StorageError:
                size = dv_store.head(key).size  # a range past the end of the file: it was truncated
                if size < end:
                    raise ValueError(f"the file holds {size} bytes, the DV lies at [{start}, {end})") from None
                raise
            data = unframe(dv, framed)
        return deleted_rows(dv, data)
    except ValueError as exc:  # RoaringFormatError included
        raise CorruptLogError(
            f"deletion vector ({where}) of data file {add.path} of {table or table_path} is unreadable: {exc}",
            table=table,
            path=add.path,
        ) from exc


def write_deletion_vectors(
    store: ObjectStore, table_path: str, deleted: Sequence[U64Array]
) -> tuple[str, list[DeletionVectorDescriptor]]:
    """Write one DV file ``deletion_vector_<uuid>.bin`` in the table root holding a DV per entry of ``deleted``
    (sorted row indexes): format version 1, then each DV framed (size, portable RoaringBitmapArray, CRC-32).
    Returns its key and the descriptors (storage type ``u``, the UUID in Z85, each DV's offset)."""
    file_id = uuid.uuid4()
    out = bytearray([FILE_FORMAT_VERSION])
    descriptors = []
    for rows in deleted:
        data = encode_roaring_bitmap_array(rows)
        descriptors.append(new_file_descriptor(file_id, len(out), data, len(rows)))
        out += frame(data)
    rel = descriptors[0].relative_path() if descriptors else f"deletion_vector_{file_id}.bin"
    key = f"{table_path}/{rel}" if table_path else rel
    store.put(key, bytes(out))
    return key, descriptors


def _drop_deleted(raw: pa.Table, add: Add, deleted: U64Array, table: str | None) -> pa.Table:
    """``raw`` (all rows of one data file, in file order) without the rows its deletion vector deletes."""
    if not len(deleted):
        return raw
    try:
        mask = keep_mask(raw.num_rows, deleted)
    except ValueError as exc:
        raise CorruptLogError(f"data file {add.path} of {table}: {exc}", table=table, path=add.path) from exc
    return raw.filter(pa.array(mask))


def _partition_column(add: Add, name: str, dtype: pa.DataType, n: int, table: str | None) -> pa.Array:
    """The constant column of one partition value; :class:`CorruptLogError` when the log's text does not parse.

    ``name`` is the key in ``add.partitionValues`` (the physical name on a table that maps columns).
    """
    raw = add.partition_values.get(name)
    try:
        return pa.repeat(pa.scalar(parse_partition_value(raw, dtype), type=dtype), n)
    except (ValueError, TypeError, ArithmeticError, AttributeError, pa.ArrowException) as exc:
        raise CorruptLogError(
            f"partition value {raw!r} of column {name!r} ({dtype}) in {add.path} of {table} does not parse: {exc}",
            table=table,
            path=add.path,
        ) from exc


def _cast_column(arr: pa.ChunkedArray, field: pa.Field, add: Add, table: str | None) -> pa.ChunkedArray:
    """A data file's column as the table's type; timestamps of a finer unit are truncated to microseconds.

    Text and bytes are never made from other types or into them (Spark refuses to read such a file too): a
    number stored where the table has a string is a mismatch, not a string of its digits.
    """
    if _is_text(arr.type) != _is_text(field.type):
        raise SchemaMismatchError(
            f"column {field.name!r} of data file {add.path} of {table} is {spark_type_name(arr.type)}, not readable "
            f"as {spark_type_name(field.type)}",
            table=table,
            columns=[field.name],
        )
    try:
        if pa.types.is_timestamp(arr.type) and pa.types.is_timestamp(field.type) and arr.type.unit == "ns":
            return arr.cast(field.type, safe=False)  # ns -> us: drop sub-microsecond digits, as Delta readers do
        return arr.cast(field.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise SchemaMismatchError(
            f"column {field.name!r} of data file {add.path} of {table} is {spark_type_name(arr.type)}, not readable "
            f"as {spark_type_name(field.type)}: {cast_problem(exc)}",
            table=table,
            columns=[field.name],
        ) from exc


def _is_text(dtype: pa.DataType) -> bool:
    """A string or binary type (of any width or layout, dictionary-encoded or not)."""
    if pa.types.is_dictionary(dtype):
        return _is_text(dtype.value_type)
    return bool(
        pa.types.is_string(dtype)
        or pa.types.is_large_string(dtype)
        or pa.types.is_string_view(dtype)
        or pa.types.is_binary(dtype)
        or pa.types.is_large_binary(dtype)
        or pa.types.is_binary_view(dtype)
        or pa.types.is_fixed_size_binary(dtype)
    )


def _assemble(
    raw: pa.Table,
    add: Add,
    schema: pa.Schema,
    partition_columns: Sequence[str],
    wanted: Sequence[str],
    *,
    table: str | None = None,
) -> pa.Table:
    n = raw.num_rows
    arrays = []
    fields = []
    for name in wanted:
        field = schema.field(name)
        if name in partition_columns:
            arr: pa.Array | pa.ChunkedArray = _partition_column(add, physical_name(field), field.type, n, table)
        elif name in raw.column_names:
            arr = raw.column(name)
            if arr.type != field.type:
                arr = _cast_column(arr, field, add, table)
        else:
            arr = null_column(n, field.type)
        if arr.null_count and not field.nullable:
            missing = name not in raw.column_names and name not in partition_columns
            raise SchemaMismatchError(
                f"column {name!r} of {table} is NOT NULL but data file {add.path} "
                + ("lacks it" if missing else f"holds {arr.null_count} nulls in it"),
                table=table,
                columns=[name],
            )
        arrays.append(arr)
        fields.append(field)
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def read_files(
    store: ObjectStore,
    table_path: str,
    adds: Iterable[Add],
    schema: pa.Schema,
    partition_columns: Sequence[str],
    *,
    columns: Sequence[str] | None = None,
    table: str | None = None,
    held: Callable[[Add], bytes | None] | None = None,
) -> pa.Table:
    """Read and concatenate data files (concurrently) as one Arrow table of ``schema``; ``held(add)``: the bytes
    of a file the caller has in memory (``None``: GET it)."""
    adds = list(adds)
    target = pa.schema([schema.field(c) for c in columns]) if columns is not None else schema
    if not adds:
        return target.empty_table()

    def one(add: Add) -> pa.Table:
        data = held(add) if held is not None else None
        return read_file(store, table_path, add, schema, partition_columns, columns=columns, table=table, data=data)

    parts = map_concurrently(one, adds, max_workers=READ_CONCURRENCY)
    return pa.concat_tables([p.cast(target) for p in parts])
