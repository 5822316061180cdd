"""SQL types as Arrow types: literal typing, Spark-like implicit promotion and literal conversion.

Only the session time zone ``UTC`` is modelled: a timestamp literal without an offset is a UTC instant
when compared with a time-zone-aware column, and a wall-clock time for a ``TIMESTAMP_NTZ`` column.
"""

from __future__ import annotations

import math
import re
import struct
from datetime import UTC, date, datetime
from decimal import ROUND_DOWN, ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

import pyarrow as pa
from sqlglot import exp

SESSION_TIME_ZONE = "UTC"
MAX_DECIMAL_PRECISION = 38

_UNIT_RANK = {"s": 0, "ms": 1, "us": 2, "ns": 3}
_INTEGER_DECIMAL_DIGITS = {8: 3, 16: 5, 32: 10, 64: 19}
_INTEGER_TEXT = re.compile(r"^[+-]?\d+$")


# ------------------------------------------------------------------------------------------- families


def is_string(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t))


def is_binary(t: pa.DataType) -> bool:
    return bool(pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t))


def is_numeric(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t))


def is_temporal(t: pa.DataType) -> bool:
    return bool(pa.types.is_date(t) or pa.types.is_timestamp(t))


def is_null(t: pa.DataType) -> bool:
    return bool(pa.types.is_null(t))


def family(t: pa.DataType) -> str:
    """A coarse type family: values of one family compare with each other after promotion."""
    if is_null(t):
        return "null"
    if pa.types.is_boolean(t):
        return "boolean"
    if is_numeric(t):
        return "numeric"
    if is_string(t):
        return "string"
    if is_binary(t):
        return "binary"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp"
    return "other"


# ---------------------------------------------------------------------------------------- SQL -> Arrow


def arrow_type(data_type: exp.DataType) -> pa.DataType | None:
    """The Arrow type of a Spark SQL type name, or ``None`` when it is not supported."""
    t = data_type.this
    T = exp.DataType.Type
    simple: dict[Any, pa.DataType] = {
        T.BOOLEAN: pa.bool_(),
        T.TINYINT: pa.int8(),
        T.SMALLINT: pa.int16(),
        T.INT: pa.int32(),
        T.BIGINT: pa.int64(),
        T.FLOAT: pa.float32(),
        T.DOUBLE: pa.float64(),
        T.TEXT: pa.string(),
        T.VARCHAR: pa.string(),
        T.CHAR: pa.string(),
        T.NCHAR: pa.string(),
        T.NVARCHAR: pa.string(),
        T.DATE: pa.date32(),
        T.TIMESTAMP: pa.timestamp("us", tz=SESSION_TIME_ZONE),
        T.TIMESTAMPTZ: pa.timestamp("us", tz=SESSION_TIME_ZONE),
        T.TIMESTAMPLTZ: pa.timestamp("us", tz=SESSION_TIME_ZONE),
        T.TIMESTAMPNTZ: pa.timestamp("us"),
        T.BINARY: pa.binary(),
        T.VARBINARY: pa.binary(),
    }
    if t in simple:
        return simple[t]
    if t == T.DECIMAL:
        params = [p.this for p in data_type.expressions]
        try:
            values = [int(p.this) if isinstance(p, exp.Literal) else int(str(p)) for p in params]
        except ValueError:
            return None
        precision = values[0] if values else 10
        scale = values[1] if len(values) > 1 else 0
        if not 1 <= precision <= MAX_DECIMAL_PRECISION or not 0 <= scale <= precision:
            return None
        return pa.decimal128(precision, scale)
    return None


# -------------------------------------------------------------------------------------------- literals


def decimal_type_of(value: Decimal) -> pa.DataType:
    """Spark's type for an exact decimal literal such as ``1.50`` (``decimal(3,2)``)."""
    _sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise ValueError(f"{value} is not a finite decimal")
    scale = max(0, -exponent)
    precision = max(len(digits) + max(0, exponent), scale, 1)
    if precision > MAX_DECIMAL_PRECISION:
        raise ValueError(f"{value} has more than {MAX_DECIMAL_PRECISION} digits")
    return pa.decimal128(precision, scale)


def literal_type(value: Any) -> pa.DataType:
    """The natural Arrow type of a Python literal value (Spark's literal typing)."""
    if value is None:
        return pa.null()
    if isinstance(value, bool):
        return pa.bool_()
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return pa.int32()
        if -(2**63) <= value < 2**63:
            return pa.int64()
        return decimal_type_of(Decimal(value))
    if isinstance(value, Decimal):
        return decimal_type_of(value)
    if isinstance(value, float):
        return pa.float64()
    if isinstance(value, str):
        return pa.string()
    if isinstance(value, bytes):
        return pa.binary()
    if isinstance(value, datetime):
        return pa.timestamp("us", tz=SESSION_TIME_ZONE if value.tzinfo is not None else None)
    if isinstance(value, date):
        return pa.date32()
    raise ValueError(f"unsupported literal {value!r}")


def parse_number(text: str) -> int | Decimal | float:
    """A numeric literal's value: integers stay ``int``, exponent forms are ``float``, the rest ``Decimal``."""
    text = text.strip()
    if _INTEGER_TEXT.match(text):
        return int(text)
    if "e" in text.lower() or text.lower() in {"nan", "inf", "-inf", "infinity", "-infinity", "+inf"}:
        return float(text)
    try:
        return Decimal(text)
    except InvalidOperation as exc:
        raise ValueError(f"{text!r} is not a number") from exc


def round_to_float32(value: float) -> float:
    """``value`` rounded to the nearest 32-bit float."""
    try:
        return float(struct.unpack("f", struct.pack("f", value))[0])
    except OverflowError as exc:
        raise ValueError(f"{value} is out of range for FLOAT") from exc


def _integer_bounds(t: pa.DataType) -> tuple[int, int]:
    bits = t.bit_width
    if pa.types.is_unsigned_integer(t):
        return 0, 2**bits - 1
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def parse_timestamp(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a timestamp") from exc


def parse_date(text: str) -> date:
    text = text.strip()
    try:
        return date.fromisoformat(text)
    except ValueError:
        return parse_timestamp(text).date()


def _to_timestamp(value: Any, t: pa.DataType) -> datetime:
    if isinstance(value, datetime):
        result = value
    elif isinstance(value, date):
        result = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        result = parse_timestamp(value)
    else:
        raise ValueError(f"cannot convert {value!r} to {t}")
    if t.tz is not None and result.tzinfo is None:
        result = result.replace(tzinfo=UTC)
    elif t.tz is None and result.tzinfo is not None:
        result = result.astimezone(UTC).replace(tzinfo=None)
    if t.unit == "s":
        result = result.replace(microsecond=0)
    elif t.unit == "ms":
        result = result.replace(microsecond=result.microsecond - result.microsecond % 1000)
    return result


def _to_decimal(value: Any, t: pa.DataType) -> Decimal:
    if isinstance(value, bool):
        raise ValueError(f"cannot convert {value!r} to {t}")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value} cannot be a decimal")
        result = Decimal(repr(value))
    elif isinstance(value, (int, Decimal)):
        result = Decimal(value)
    elif isinstance(value, str):
        try:
            result = Decimal(value.strip())
        except InvalidOperation as exc:
            raise ValueError(f"{value!r} is not a number") from exc
    else:
        raise ValueError(f"cannot convert {value!r} to {t}")
    if not result.is_finite():
        raise ValueError(f"{value!r} cannot be a decimal")
    result = result.quantize(Decimal(1).scaleb(-t.scale), rounding=ROUND_HALF_UP)
    if len(result.as_tuple().digits) > t.precision and result != 0:
        raise ValueError(f"{value!r} does not fit {t}")
    return result


def convert_value(value: Any, t: pa.DataType) -> Any:
    """``value`` as a Python value of Arrow type ``t`` (SQL CAST of a literal); ``ValueError`` if impossible."""
    if value is None:
        return None
    fam = family(t)
    if fam == "null":
        raise ValueError(f"cannot convert {value!r} to NULL")
    if fam == "string":
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, datetime):
            return value.isoformat(sep=" ")
        if isinstance(value, bytes):
            return value.decode("utf-8")
        return str(value)
    if fam == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in {"true", "false"}:
            return value.strip().lower() == "true"
        if isinstance(value, (int, Decimal, float)):
            return value != 0
        raise ValueError(f"cannot convert {value!r} to BOOLEAN")
    if fam == "numeric":
        if isinstance(value, str):
            value = parse_number(value)
        if isinstance(value, bool):
            value = int(value)
        if not isinstance(value, (int, Decimal, float)):
            raise ValueError(f"cannot convert {value!r} to {t}")
        if pa.types.is_integer(t):
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"{value} cannot be an integer")
            whole = int(Decimal(value).to_integral_value(rounding=ROUND_DOWN))
            lo, hi = _integer_bounds(t)
            if not lo <= whole <= hi:
                raise ValueError(f"{value!r} is out of range for {t}")
            return whole
        if pa.types.is_floating(t):
            as_float = float(value)
            return round_to_float32(as_float) if t.bit_width == 32 else as_float
        return _to_decimal(value, t)
    if fam == "date":
        if isinstance(value, datetime):
            return _to_timestamp(value, pa.timestamp("us")).date()
        if isinstance(value, date):
            return value
        if isinstance(value, str):
            return parse_date(value)
        raise ValueError(f"cannot convert {value!r} to DATE")
    if fam == "timestamp":
        return _to_timestamp(value, t)
    if fam == "binary":
        if isinstance(value, bytes):
            return value
        if isinstance(value, str):
            return value.encode("utf-8")
        raise ValueError(f"cannot convert {value!r} to {t}")
    raise ValueError(f"literals of type {t} are not supported")


def represents_exactly(value: Any, t: pa.DataType) -> bool:
    """Whether ``value`` converts to type ``t`` without changing its value (so a column of ``t`` need not widen)."""
    if value is None:
        return True
    source = family(literal_type(value))
    if source != family(t):
        return False
    try:
        converted = convert_value(value, t)
    except (ValueError, ArithmeticError):
        return False
    if isinstance(value, datetime) and isinstance(converted, datetime):
        return (value.tzinfo is None) == (converted.tzinfo is None) and converted == value
    return bool(converted == value)


def coerce_string_literal(text: str, t: pa.DataType) -> Any:
    """A string literal compared with a column of type ``t``: Spark casts the string to the column's family."""
    fam = family(t)
    if fam == "date":
        return parse_date(text)
    if fam == "timestamp":
        return _to_timestamp(parse_timestamp(text), pa.timestamp("us", tz=t.tz))
    if fam == "numeric":
        return parse_number(text)
    if fam == "boolean":
        return convert_value(text, pa.bool_())
    if fam == "binary":
        return text.encode("utf-8")
    return text


# -------------------------------------------------------------------------------------------- promotion


def _as_decimal(t: pa.DataType) -> tuple[int, int]:
    if pa.types.is_decimal(t):
        return t.precision, t.scale
    digits = _INTEGER_DECIMAL_DIGITS.get(t.bit_width, 20)
    if pa.types.is_unsigned_integer(t):
        digits += 1
    return digits, 0


def _numeric_common(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    if pa.types.is_floating(a) or pa.types.is_floating(b):
        small = {pa.float32(), pa.float16(), pa.int8(), pa.int16(), pa.uint8(), pa.uint16()}
        if a in small and b in small:
            return pa.float32()
        return pa.float64()
    if pa.types.is_decimal(a) or pa.types.is_decimal(b):
        pa_, sa = _as_decimal(a)
        pb, sb = _as_decimal(b)
        scale = max(sa, sb)
        whole = max(pa_ - sa, pb - sb)
        if whole + scale > MAX_DECIMAL_PRECISION:
            scale = max(0, MAX_DECIMAL_PRECISION - whole)
        return pa.decimal128(min(MAX_DECIMAL_PRECISION, whole + scale), scale)
    signed_a = pa.types.is_signed_integer(a)
    signed_b = pa.types.is_signed_integer(b)
    if signed_a == signed_b:
        return a if a.bit_width >= b.bit_width else b
    signed, unsigned = (a, b) if signed_a else (b, a)
    if signed.bit_width > unsigned.bit_width:
        return signed
    return {8: pa.int16(), 16: pa.int32()}.get(unsigned.bit_width, pa.int64())


def _finer_timestamp(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    unit = a.unit if _UNIT_RANK[a.unit] >= _UNIT_RANK[b.unit] else b.unit
    if a.tz is None or b.tz is None:
        return pa.timestamp(unit, tz=a.tz or b.tz)
    return pa.timestamp(unit, tz=a.tz if a.tz == b.tz else SESSION_TIME_ZONE)


def common_type(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """The type both operands are promoted to (Spark's implicit widening), or ``None`` if they don't mix."""
    if a == b:
        return a
    fa, fb = family(a), family(b)
    if fa == "null":
        return b
    if fb == "null":
        return a
    if fa == fb == "numeric":
        return _numeric_common(a, b)
    if fa == fb == "string":
        return pa.large_string() if pa.types.is_large_string(a) or pa.types.is_large_string(b) else pa.string()
    if fa == fb == "binary":
        return pa.large_binary() if pa.types.is_large_binary(a) or pa.types.is_large_binary(b) else pa.binary()
    if fa == fb == "timestamp":
        return _finer_timestamp(a, b)
    if {fa, fb} == {"date", "timestamp"}:
        return a if fa == "timestamp" else b
    if fa == fb == "date":
        return pa.date32()
    return None


def is_monotone_widening(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether an implicit cast ``source -> target`` preserves order (so min/max bounds carry over)."""
    fs, ft = family(source), family(target)
    if fs == ft and fs in {"numeric", "timestamp", "string", "date"}:
        return True
    return fs == "date" and ft == "timestamp"
