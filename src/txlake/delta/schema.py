"""Delta schema JSON <-> Arrow schema, and the type rules used to enforce schemas on write."""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import pyarrow as pa

from txlake.errors import CorruptLogError, InvalidArgumentTypeError, SchemaMismatchError, UnsupportedFeatureError
from txlake.typenames import spark_type_name as spark_type_name  # (re-exported)
from txlake.variant import VARIANT, is_variant

_PRIMITIVE_TO_ARROW: dict[str, pa.DataType] = {
    "string": pa.string(),
    "long": pa.int64(),
    "integer": pa.int32(),
    "short": pa.int16(),
    "byte": pa.int8(),
    "float": pa.float32(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
}
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")


def delta_type_to_arrow(dtype: Any) -> pa.DataType:
    """Map one Delta type (a string or a nested dict) to Arrow."""
    if isinstance(dtype, str):
        if dtype in _PRIMITIVE_TO_ARROW:
            return _PRIMITIVE_TO_ARROW[dtype]
        m = _DECIMAL.match(dtype)
        if m:
            return pa.decimal128(int(m.group(1)), int(m.group(2)))
        if dtype == "variant":
            return VARIANT
        raise UnsupportedFeatureError(f"unknown Delta type {dtype!r}", feature=f"type:{dtype}")
    kind = dtype.get("type")
    if kind == "struct":
        return pa.struct([delta_field_to_arrow(f) for f in dtype["fields"]])
    if kind == "array":
        item = pa.field("element", delta_type_to_arrow(dtype["elementType"]), dtype.get("containsNull", True))
        return pa.list_(item)
    if kind == "map":
        return pa.map_(
            pa.field("key", delta_type_to_arrow(dtype["keyType"]), nullable=False),
            pa.field("value", delta_type_to_arrow(dtype["valueType"]), dtype.get("valueContainsNull", True)),
        )
    raise UnsupportedFeatureError(f"unknown Delta type {dtype!r}", feature=f"type:{kind}")


def delta_field_to_arrow(field: dict[str, Any]) -> pa.Field:
    meta = field.get("metadata") or {}
    arrow_meta = {k: json.dumps(v) for k, v in meta.items()} or None
    return pa.field(field["name"], delta_type_to_arrow(field["type"]), field.get("nullable", True), arrow_meta)


@functools.lru_cache(maxsize=512)
def schema_document(schema_string: str) -> Any:
    """The decoded JSON of a ``schemaString`` (memoized); :class:`CorruptLogError` when it is not JSON."""
    try:
        return json.loads(schema_string)
    except (ValueError, RecursionError) as exc:
        raise CorruptLogError(f"the schemaString is not valid JSON: {exc}") from exc


@functools.lru_cache(maxsize=512)
def schema_from_json(schema_string: str) -> pa.Schema:
    """Parse a Delta ``schemaString`` into an Arrow schema (memoized: schemas are immutable).

    Raises:
        CorruptLogError: the string is not JSON or not shaped like a Delta schema.
        UnsupportedFeatureError: a column has a type txlake cannot read (``feature`` names it).
    """
    doc = schema_document(schema_string)
    if not isinstance(doc, dict):
        raise CorruptLogError(f"the schemaString is not a JSON object: {schema_string[:100]!r}")
    if doc.get("type") != "struct":
        raise UnsupportedFeatureError("the table schema is not a struct", feature="schema")
    try:
        return pa.schema([delta_field_to_arrow(f) for f in doc["fields"]])
    except (KeyError, TypeError, AttributeError, ValueError, pa.ArrowException) as exc:
        raise CorruptLogError(f"the schemaString is not a valid Delta schema: {exc!r}") from exc


def arrow_type_to_delta(dtype: pa.DataType) -> Any:
    """Map an Arrow type to the Delta type JSON; raises ``TypeError`` for types Delta cannot store.

    txlake's variant struct (:data:`txlake.variant.VARIANT`) maps back to ``variant``, so a schema read from a
    table round-trips (:func:`normalize_schema`).
    """
    if is_variant(dtype):
        return "variant"
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype) or pa.types.is_string_view(dtype):
        return "string"
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype) or pa.types.is_fixed_size_binary(dtype):
        return "binary"
    simple = {
        pa.int64(): "long",
        pa.int32(): "integer",
        pa.int16(): "short",
        pa.int8(): "byte",
        pa.float32(): "float",
        pa.float64(): "double",
        pa.bool_(): "boolean",
        pa.date32(): "date",
    }
    if dtype in simple:
        return simple[dtype]
    if pa.types.is_timestamp(dtype):
        return "timestamp" if dtype.tz is not None else "timestamp_ntz"
    if pa.types.is_decimal(dtype):
        if dtype.precision > 38:
            raise TypeError(f"Delta decimals have at most 38 digits, got {dtype}")
        return f"decimal({dtype.precision},{dtype.scale})"
    if pa.types.is_struct(dtype):
        return {"type": "struct", "fields": [arrow_field_to_delta(dtype.field(i)) for i in range(dtype.num_fields)]}
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return {
            "type": "array",
            "elementType": arrow_type_to_delta(dtype.value_type),
            "containsNull": dtype.value_field.nullable,
        }
    if pa.types.is_map(dtype):
        return {
            "type": "map",
            "keyType": arrow_type_to_delta(dtype.key_type),
            "valueType": arrow_type_to_delta(dtype.item_type),
            "valueContainsNull": dtype.item_field.nullable,
        }
    raise InvalidArgumentTypeError(f"Arrow type {dtype} has no Delta equivalent", argument="schema")


def arrow_field_to_delta(field: pa.Field) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for k, v in (field.metadata or {}).items():
        key = k.decode() if isinstance(k, bytes) else k
        raw = v.decode() if isinstance(v, bytes) else v
        try:
            meta[key] = json.loads(raw)
        except ValueError:
            meta[key] = raw
    return {"name": field.name, "type": arrow_type_to_delta(field.type), "nullable": field.nullable, "metadata": meta}


def schema_to_json(schema: pa.Schema) -> str:
    """Serialize an Arrow schema as a Delta ``schemaString``."""
    names = [f.name for f in schema]
    dupes = {n.lower() for n in names if sum(1 for m in names if m.lower() == n.lower()) > 1}
    if dupes:
        raise SchemaMismatchError(f"duplicate column names (case-insensitive): {sorted(dupes)}", columns=sorted(dupes))
    return json.dumps({"type": "struct", "fields": [arrow_field_to_delta(f) for f in schema]}, separators=(",", ":"))


def normalize_schema(schema: pa.Schema) -> pa.Schema:
    """The Arrow schema a table stores, as read back (large/view types narrowed, timestamps in us)."""
    return schema_from_json(schema_to_json(schema))


def _widenable(src: pa.DataType, dst: pa.DataType) -> bool:
    """Whether values of ``src`` can be stored as ``dst`` without loss."""
    if src == dst:
        return True
    if pa.types.is_null(src):
        return True
    ints = [pa.int8(), pa.int16(), pa.int32(), pa.int64()]
    if src in ints and dst in ints:
        return ints.index(src) <= ints.index(dst)
    if src in ints[:2] and dst in (pa.float32(), pa.float64()):
        return True
    if src == pa.int32() and dst == pa.float64():
        return True
    if src == pa.float32() and dst == pa.float64():
        return True
    if (pa.types.is_string(src) or pa.types.is_large_string(src) or pa.types.is_string_view(src)) and (
        pa.types.is_string(dst)
    ):
        return True
    if (pa.types.is_binary(src) or pa.types.is_large_binary(src)) and pa.types.is_binary(dst):
        return True
    if pa.types.is_timestamp(src) and pa.types.is_timestamp(dst):
        units = ["s", "ms", "us", "ns"]
        same_zone = (src.tz is None) == (dst.tz is None)
        return bool(same_zone and units.index(src.unit) <= units.index(dst.unit))
    if pa.types.is_decimal(src) and pa.types.is_decimal(dst):
        return bool(src.scale <= dst.scale and (src.precision - src.scale) <= (dst.precision - dst.scale))
    if pa.types.is_struct(src) and pa.types.is_struct(dst):
        return _struct_compatible(src, dst) == []
    if (pa.types.is_list(src) or pa.types.is_large_list(src)) and pa.types.is_list(dst):
        return _widenable(src.value_type, dst.value_type)
    if pa.types.is_map(src) and pa.types.is_map(dst):
        return _widenable(src.key_type, dst.key_type) and _widenable(src.item_type, dst.item_type)
    return False


def _struct_compatible(src: pa.StructType, dst: pa.StructType) -> list[str]:
    problems = []
    dst_fields = {dst.field(i).name: dst.field(i) for i in range(dst.num_fields)}
    for i in range(src.num_fields):
        f = src.field(i)
        target = dst_fields.get(f.name)
        if target is None or not _widenable(f.type, target.type):
            problems.append(f.name)
    return problems


def _strict_child(dtype: pa.DataType) -> bool:
    """Whether a nested type has a non-nullable child at some level (a variant's ``metadata`` and ``value``)."""
    nested = [dtype.field(i) for i in range(dtype.num_fields)] if pa.types.is_nested(dtype) else []
    return any(not f.nullable or _strict_child(f.type) for f in nested)


def null_column(length: int, dtype: pa.DataType) -> pa.Array:
    """``length`` nulls of ``dtype``; the children of null structs hold empty values rather than nulls, so that
    non-nullable children (a variant's) survive casts."""
    if _strict_child(dtype):
        return pa.array([None] * length, type=dtype)
    return pa.nulls(length, dtype)


def cast_problem(exc: BaseException) -> str:
    """Arrow's reason a cast failed, on one line."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def conform(data: pa.Table, schema: pa.Schema, *, table: str | None = None) -> pa.Table:
    """Cast ``data`` to the table ``schema`` losslessly, or raise :class:`SchemaMismatchError`.

    Columns are matched by name; missing nullable columns become nulls; extra columns, missing
    non-nullable columns, lossy casts and nulls in non-nullable columns are errors. Types are named as Spark
    SQL names them (:func:`spark_type_name`): ``bigint``, ``decimal(10,2)``, ``array<string>``.
    """
    names = set(data.column_names)
    extra = [n for n in data.column_names if n not in schema.names]
    if extra:
        raise SchemaMismatchError(f"columns not in the table schema: {extra}", table=table, columns=extra)
    arrays = []
    for field in schema:
        if field.name not in names:
            if not field.nullable:
                raise SchemaMismatchError(
                    f"non-nullable column {field.name!r} is missing", table=table, columns=[field.name]
                )
            arrays.append(null_column(data.num_rows, field.type))
            continue
        col = data.column(field.name)
        if not _widenable(col.type, field.type):
            raise SchemaMismatchError(
                f"column {field.name!r} has type {spark_type_name(col.type)}, the table has "
                f"{spark_type_name(field.type)} (no lossy casts)",
                table=table,
                columns=[field.name],
            )
        if col.type != field.type:
            try:
                col = col.cast(field.type)
            except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                # e.g. a struct lacking a non-nullable child, or nulls in one: not a Delta-valid value
                raise SchemaMismatchError(
                    f"column {field.name!r} cannot be stored as {spark_type_name(field.type)}: {cast_problem(exc)}",
                    table=table,
                    columns=[field.name],
                ) from exc
        if not field.nullable and col.null_count:
            raise SchemaMismatchError(
                f"column {field.name!r} is not nullable but has {col.null_count} nulls",
                table=table,
                columns=[field.name],
            )
        arrays.append(col)
    return pa.Table.from_arrays(arrays, schema=schema)
