"""Delta column mapping: users see logical column names, data files and stats use physical names (and ids).

PROTOCOL.md "Column Mapping": with ``delta.columnMapping.mode`` = ``name`` or ``id`` every schema field (at every
nesting level) carries ``delta.columnMapping.physicalName`` and ``delta.columnMapping.id`` in its metadata. Data
files store columns under physical names (in ``id`` mode also as Parquet field ids); ``partitionValues`` and the
``stats`` maps are keyed by physical names; ``partitionColumns`` and the schema use logical names. The Arrow
schema of a table (:func:`txlake.delta.schema.schema_from_json`) keeps that metadata on its fields, so everything
here works from the Arrow fields alone.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import pyarrow as pa

from txlake.delta.schema import null_column
from txlake.errors import UnsupportedFeatureError
from txlake.variant import children as _children
from txlake.variant import is_variant

PHYSICAL_NAME = "delta.columnMapping.physicalName"
COLUMN_ID = "delta.columnMapping.id"
MODE = "delta.columnMapping.mode"
MAX_COLUMN_ID = "delta.columnMapping.maxColumnId"
PARQUET_FIELD_ID = b"PARQUET:field_id"

MappingMode = Literal["none", "name", "id"]


def mapping_mode(configuration: Mapping[str, str]) -> MappingMode:
    """The table's column mapping mode (``none`` when unset); ``ValueError`` for an unknown mode."""
    mode = (configuration.get(MODE) or "none").lower()
    if mode not in ("none", "name", "id"):
        raise ValueError(f"unknown column mapping mode {mode!r}")
    return mode  # type: ignore[return-value]


def _meta(field: pa.Field, key: str) -> Any:
    raw = (field.metadata or {}).get(key.encode())
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode()


def physical_name(field: pa.Field) -> str:
    """The name a field's values have in data files, stats and partition values."""
    name = _meta(field, PHYSICAL_NAME)
    return name if isinstance(name, str) and name else str(field.name)


def column_id(field: pa.Field) -> int | None:
    value = _meta(field, COLUMN_ID)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def is_mapped(fields: Iterable[pa.Field]) -> bool:
    """Whether any field (at any level) has a physical name or id other than its plain name."""
    return any(physical_name(f) != f.name or column_id(f) is not None or is_mapped(_children(f.type)) for f in fields)


# ------------------------------------------------------------------------------------------------ write


def _physical_type(dtype: pa.DataType) -> pa.DataType:
    if pa.types.is_struct(dtype):
        return pa.struct([physical_field(f) for f in _children(dtype)])
    if pa.types.is_list(dtype):
        return pa.list_(_physical_inner(dtype.value_field))
    if pa.types.is_large_list(dtype):
        return pa.large_list(_physical_inner(dtype.value_field))
    if pa.types.is_map(dtype):
        return pa.map_(_physical_inner(dtype.key_field), _physical_inner(dtype.item_field))
    return dtype


def _physical_inner(field: pa.Field) -> pa.Field:
    """A list element or map key/value: Delta gives these no names, only their struct fields are mapped."""
    return field.with_type(_physical_type(field.type))


def physical_field(field: pa.Field) -> pa.Field:
    """``field`` as a data file stores it: physical names at every level, Parquet field ids where known."""
    metadata = dict(field.metadata or {})
    cid = column_id(field)
    if cid is not None:
        metadata[PARQUET_FIELD_ID] = str(cid).encode()
    return pa.field(physical_name(field), _physical_type(field.type), field.nullable, metadata or None)


def to_physical(data: pa.Table) -> pa.Table:
    """``data`` (with the table's fields) with physical column names: what a data file stores (zero copy)."""
    if not is_mapped(data.schema):
        return data
    fields = [physical_field(f) for f in data.schema]
    columns = [
        pa.chunked_array([c.view(f.type) for c in data.column(i).chunks], type=f.type) for i, f in enumerate(fields)
    ]
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


# ------------------------------------------------------------------------------------------------- read


class FileFields:
    """The fields of one level of a data file's schema, found by name or Parquet field id."""

    def __init__(self, fields: Iterable[pa.Field]) -> None:
        self.by_name: dict[str, pa.Field] = {}
        self.by_id: dict[int, pa.Field] = {}
        for f in fields:
            self.by_name.setdefault(f.name, f)
            raw = (f.metadata or {}).get(PARQUET_FIELD_ID)
            if raw is not None and raw.strip().lstrip(b"-").isdigit():
                self.by_id.setdefault(int(raw), f)

    def find(self, field: pa.Field) -> pa.Field | None:
        """The data file's field holding the table's ``field``: by physical name, else by Parquet field id.

        A file without the column (written before the column was added) gives ``None``: its values are nulls.
        """
        found = self.by_name.get(physical_name(field))
        if found is not None:
            return found
        cid = column_id(field)
        return self.by_id.get(cid) if cid is not None else None


def _logical_array(arr: pa.Array, field: pa.Field) -> pa.Array:
    """One chunk of a data file's column as the table's ``field`` (logical names, missing children as nulls)."""
    dtype = field.type
    if pa.types.is_struct(dtype) and pa.types.is_struct(arr.type):
        file_fields = FileFields(_children(arr.type))
        children = []
        for child in _children(dtype):
            found = file_fields.find(child)
            if found is None:
                children.append(null_column(len(arr), child.type))
            else:
                children.append(_logical_array(arr.field(arr.type.get_field_index(found.name)), child))
        mask = arr.is_null() if arr.null_count else None
        fields = [c.with_type(a.type) for c, a in zip(_children(dtype), children, strict=True)]
        return pa.StructArray.from_arrays(children, fields=fields, mask=mask)
    if (pa.types.is_list(dtype) and pa.types.is_list(arr.type)) or (
        pa.types.is_large_list(dtype) and pa.types.is_large_list(arr.type)
    ):
        values = _logical_array(arr.values, dtype.value_field)
        cls = pa.ListArray if pa.types.is_list(dtype) else pa.LargeListArray
        item = dtype.value_field.with_type(values.type)
        list_type = pa.list_(item) if pa.types.is_list(dtype) else pa.large_list(item)
        return cls.from_arrays(arr.offsets, values, type=list_type, mask=arr.is_null() if arr.null_count else None)
    if pa.types.is_map(dtype) and pa.types.is_map(arr.type):
        keys = _logical_array(arr.keys, dtype.key_field)
        items = _logical_array(arr.items, dtype.item_field)
        map_type = pa.map_(dtype.key_field.with_type(keys.type), dtype.item_field.with_type(items.type))
        return pa.MapArray.from_arrays(
            arr.offsets, keys, items, type=map_type, mask=arr.is_null() if arr.null_count else None
        )
    return arr


def shredded_variant(stored: pa.DataType, dtype: pa.DataType) -> bool:
    """Whether a data file's column of type ``stored`` holds a variant of the table's ``dtype`` in any layout but
    the unshredded one (exactly ``metadata`` and ``value``, both required binaries).

    A shredded variant (Parquet variant shredding: a ``typed_value`` beside a ``value`` that may be null) has to
    be put back together from both; read as unshredded it would lose values.
    """
    if is_variant(dtype):
        if not pa.types.is_struct(stored) or stored.num_fields != 2:
            return True
        fields = {f.name: f for f in _children(stored)}
        return sorted(fields) != ["metadata", "value"] or any(
            f.nullable or not (pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type)) for f in fields.values()
        )
    if pa.types.is_struct(dtype) and pa.types.is_struct(stored):
        file_fields = FileFields(_children(stored))
        return any(
            (found := file_fields.find(child)) is not None and shredded_variant(found.type, child.type)
            for child in _children(dtype)
        )
    stored_children, children = _children(stored), _children(dtype)
    if len(stored_children) != len(children) or pa.types.is_struct(stored) or pa.types.is_struct(dtype):
        return False  # a type mismatch: the cast to the table's type reports it
    return any(shredded_variant(a.type, b.type) for a, b in zip(stored_children, children, strict=True))


def _has_struct(dtype: pa.DataType) -> bool:
    return pa.types.is_struct(dtype) or any(_has_struct(f.type) for f in _children(dtype))


def to_logical(column: pa.ChunkedArray, field: pa.Field) -> pa.ChunkedArray:
    """A data file's column (physical names inside) with the logical names of the table's ``field``."""
    if not _has_struct(field.type):
        return column
    chunks = [_logical_array(c, field) for c in column.chunks]
    if not chunks:
        return pa.chunked_array([], type=_logical_array(pa.array([], type=column.type), field).type)
    return pa.chunked_array(chunks)


# ---------------------------------------------------------------------------------------------- assign


def new_physical_name() -> str:
    return f"col-{uuid.uuid4()}"


def assign(fields: Iterable[pa.Field], max_id: int) -> tuple[list[pa.Field], int]:
    """Give every field (at every level) without a physical name a fresh ``col-<uuid>`` and the next id.

    Returns the fields and the new ``maxColumnId``. Fields that already have both keep them.
    """
    out = []
    for f in fields:
        new_type, max_id = _assign_type(f.type, max_id)
        metadata = dict(f.metadata or {})
        if column_id(f) is None:
            max_id += 1
            metadata[COLUMN_ID.encode()] = str(max_id).encode()
        if _meta(f, PHYSICAL_NAME) is None:
            metadata[PHYSICAL_NAME.encode()] = json.dumps(new_physical_name()).encode()
        out.append(pa.field(f.name, new_type, f.nullable, metadata))
    return out, max_id


def _assign_type(dtype: pa.DataType, max_id: int) -> tuple[pa.DataType, int]:
    if pa.types.is_struct(dtype):
        fields, max_id = assign(_children(dtype), max_id)
        return pa.struct(fields), max_id
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        inner, max_id = _assign_type(dtype.value_type, max_id)
        item = dtype.value_field.with_type(inner)
        return (pa.list_(item) if pa.types.is_list(dtype) else pa.large_list(item)), max_id
    if pa.types.is_map(dtype):
        key, max_id = _assign_type(dtype.key_type, max_id)
        value, max_id = _assign_type(dtype.item_type, max_id)
        return pa.map_(dtype.key_field.with_type(key), dtype.item_field.with_type(value)), max_id
    return dtype, max_id


def max_column_id(fields: Iterable[pa.Field]) -> int:
    """The largest column id in ``fields`` at any level (0 when none has one)."""
    best = 0
    for f in fields:
        best = max(best, column_id(f) or 0, max_column_id(_children(f.type)))
    return best


def mapped_for_new_table(
    schema: pa.Schema, configuration: Mapping[str, str] | None
) -> tuple[pa.Schema, dict[str, str]]:
    """A new table's schema and configuration: with ``delta.columnMapping.mode`` ``name`` or ``id``, every field
    gets a fresh physical name and id and the configuration ``delta.columnMapping.maxColumnId``.

    Raises:
        UnsupportedFeatureError: an unknown mapping mode.
    """
    config = dict(configuration or {})
    try:
        mode = mapping_mode(config)
    except ValueError as exc:
        raise UnsupportedFeatureError(str(exc), feature="columnMapping") from exc
    if MODE in config:  # stored lowercase: Spark reads "Name" as name, delta-rs only "name"
        config[MODE] = mode
    if mode == "none":  # a schema read from a mapped table must not make this one look mapped
        return pa.schema([_unmapped(f) for f in schema], metadata=schema.metadata), config
    fields, max_id = assign([_unmapped(f) for f in schema], 0)
    config[MAX_COLUMN_ID] = str(max_id)
    return pa.schema(fields, metadata=schema.metadata), config


def _unmapped(field: pa.Field) -> pa.Field:
    """``field`` without mapping keys a caller's schema may carry over from another table (at every level)."""
    metadata = {
        k: v for k, v in (field.metadata or {}).items() if k not in (PHYSICAL_NAME.encode(), COLUMN_ID.encode())
    }
    dtype = field.type
    if pa.types.is_struct(dtype):
        dtype = pa.struct([_unmapped(f) for f in _children(dtype)])
    elif pa.types.is_list(dtype):
        dtype = pa.list_(dtype.value_field.with_type(_unmapped(dtype.value_field).type))
    elif pa.types.is_large_list(dtype):
        dtype = pa.large_list(dtype.value_field.with_type(_unmapped(dtype.value_field).type))
    elif pa.types.is_map(dtype):
        dtype = pa.map_(
            dtype.key_field.with_type(_unmapped(dtype.key_field).type),
            dtype.item_field.with_type(_unmapped(dtype.item_field).type),
        )
    return pa.field(field.name, dtype, field.nullable, metadata or None)


def mapped_added_columns(
    fields: Iterable[pa.Field], configuration: Mapping[str, str], existing: Iterable[pa.Field]
) -> tuple[list[pa.Field], dict[str, str]]:
    """Columns added to a table that maps columns get fresh physical names and ids above ``maxColumnId``; on
    other tables they lose any mapping keys they carry (e.g. fields of a schema read from a mapped table)."""
    config = dict(configuration)
    if mapping_mode(config) == "none":
        return [_unmapped(f) for f in fields], config
    existing = list(existing)
    try:
        start = int(config.get(MAX_COLUMN_ID) or 0)
    except ValueError:
        start = 0
    start = max(start, max_column_id(existing))
    out, max_id = assign([_unmapped(f) for f in fields], start)
    config[MAX_COLUMN_ID] = str(max_id)
    return out, config
