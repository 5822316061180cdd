"""Arrow types as Spark SQL names them, for error messages (a leaf module: both :mod:`txlake.delta` and
:mod:`txlake.expr` use it)."""

from __future__ import annotations

import pyarrow as pa

from txlake.variant import is_variant


def spark_type_name(dtype: pa.DataType) -> str:
    """An Arrow type as Spark SQL spells it (``bigint``, ``decimal(10,2)``, ``array<string>``, ``struct<a:int>``);
    else Arrow's name. Error messages name types so, as Spark's own messages and ``simpleString()`` do."""
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype) or pa.types.is_string_view(dtype):
        return "string"
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype) or pa.types.is_fixed_size_binary(dtype):
        return "binary"
    simple = {
        pa.int64(): "bigint",
        pa.int32(): "int",
        pa.int16(): "smallint",
        pa.int8(): "tinyint",
        pa.float32(): "float",
        pa.float64(): "double",
        pa.bool_(): "boolean",
        pa.date32(): "date",
        pa.null(): "void",
    }
    if dtype in simple:
        return simple[dtype]
    if pa.types.is_timestamp(dtype):
        return "timestamp" if dtype.tz is not None else "timestamp_ntz"
    if pa.types.is_decimal(dtype):
        return f"decimal({dtype.precision},{dtype.scale})"
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return f"array<{spark_type_name(dtype.value_type)}>"
    if pa.types.is_map(dtype):
        return f"map<{spark_type_name(dtype.key_type)},{spark_type_name(dtype.item_type)}>"
    if is_variant(dtype):
        return "variant"
    if pa.types.is_struct(dtype):
        return "struct<" + ",".join(f"{f.name}:{spark_type_name(f.type)}" for f in dtype) + ">"
    return str(dtype)
