"""The Arrow form of Delta's ``variant`` type (a leaf module: :mod:`txlake.delta`, :mod:`txlake.expr` and
:mod:`txlake.spark` use it).

A variant value is stored in Parquet as a group of two binaries, ``metadata`` (the dictionary of object keys) and
``value`` (the encoded value); PROTOCOL.md "Variant Data Type". txlake reads it as delta-rs does: an Arrow
``struct<metadata: binary not null, value: binary not null>``, the bytes unchanged. The ``metadata`` child field
carries the Arrow field metadata ``variant: true`` (as PySpark marks its variants), so txlake tells a variant from
a struct of the same shape; type equality ignores field metadata, so the type equals delta-rs's.
"""

from __future__ import annotations

import pyarrow as pa

MARKER = {b"variant": b"true"}
VARIANT = pa.struct(
    [pa.field("metadata", pa.binary(), nullable=False, metadata=MARKER), pa.field("value", pa.binary(), nullable=False)]
)
"""The Arrow type of a Delta ``variant`` column."""


def is_variant(dtype: pa.DataType) -> bool:
    """Whether ``dtype`` is txlake's Arrow form of a variant (the struct above, marked)."""
    if not pa.types.is_struct(dtype) or dtype.num_fields != 2:
        return False
    meta = dtype.field(0)
    return bool(
        meta.name == "metadata"
        and dtype.field(1).name == "value"
        and (meta.metadata or {}).get(b"variant") == b"true"
        and pa.types.is_binary(meta.type)
        and pa.types.is_binary(dtype.field(1).type)
    )


def children(dtype: pa.DataType) -> list[pa.Field]:
    """The child fields of a nested type (struct fields, list element, map key and value)."""
    if pa.types.is_struct(dtype):
        return [dtype.field(i) for i in range(dtype.num_fields)]
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return [dtype.value_field]
    if pa.types.is_map(dtype):
        return [dtype.key_field, dtype.item_field]
    return []


def has_variant(dtype: pa.DataType) -> bool:
    """Whether ``dtype`` is a variant or holds one at any nesting level."""
    return is_variant(dtype) or any(has_variant(f.type) for f in children(dtype))


def unmarked(field: pa.Field) -> pa.Field:
    """``field`` with every variant marker removed, at any nesting level (a plain struct of the same shape)."""
    dtype = field.type
    if pa.types.is_struct(dtype):
        dtype = pa.struct([unmarked(f) for f in children(dtype)])
    elif pa.types.is_large_list(dtype):
        dtype = pa.large_list(unmarked(dtype.value_field))
    elif pa.types.is_list(dtype):
        dtype = pa.list_(unmarked(dtype.value_field))
    elif pa.types.is_map(dtype):
        dtype = pa.map_(unmarked(dtype.key_field), unmarked(dtype.item_field), keys_sorted=dtype.keys_sorted)
    metadata = {k: v for k, v in (field.metadata or {}).items() if k != b"variant"} or None
    return pa.field(field.name, dtype, nullable=field.nullable, metadata=metadata)
