"""Evaluating bound expressions on Arrow tables with ``pyarrow.compute`` (SQL three-valued logic).

Every composite node is computed by :func:`apply` from its children's values; binding calls the same
function on empty arrays to learn each node's result type, so types at bind time and at run time agree.
Semantics follow Spark with ANSI mode off where that keeps guarded expressions safe under eager evaluation
(``x / 0`` and ``x % 0`` are NULL, an invalid CAST is NULL) and refuse silently wrong results elsewhere
(integer overflow raises). Where Spark's ANSI answer matters (``txlake sql``), :func:`ansi_violation` tells
whether any row meets one of those cases.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txlake.errors import PredicateError
from txlake.expr.nodes import (
    And,
    Arith,
    Call,
    Case,
    Cast,
    ColumnRef,
    Compare,
    Const,
    InList,
    IsNull,
    Like,
    Negate,
    Node,
    Not,
    Or,
    walk,
)
from txlake.expr.types import is_string
from txlake.typenames import spark_type_name

Datum = Any  # a pa.Array or a pa.Scalar

ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError)

_COMPARE = {
    "=": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}


def broadcast(value: Datum, n: int) -> pa.Array:
    """``value`` as an array of ``n`` rows (scalars are repeated)."""
    if isinstance(value, pa.Scalar):
        return pa.repeat(value, n)
    if isinstance(value, pa.ChunkedArray):
        return value.combine_chunks()
    return value


def _column(node: ColumnRef, table: pa.Table) -> pa.Array:
    if node.name in table.column_names:
        arr = table.column(node.name)
    else:
        lowered = [c for c in table.column_names if c.lower() == node.name.lower()]
        if len(lowered) != 1:
            raise PredicateError(f"column {node.name!r} is not in the table being evaluated")
        arr = table.column(lowered[0])
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    for child in node.path:
        arr = pc.struct_field(arr, child)
    if arr.type != node.type:
        arr = pc.cast(arr, node.type)
    return arr


def evaluate(node: Node, table: pa.Table) -> Datum:
    """The value of ``node`` on ``table``: an array of ``table.num_rows`` values or a scalar."""
    if isinstance(node, ColumnRef):
        return _column(node, table)
    if isinstance(node, Const):
        return pa.scalar(node.value, type=node.type)
    args = [evaluate(child, table) for child in node.children()]
    return apply(node, args, table.num_rows)


def ansi_violation(node: Node, table: pa.Table) -> str | None:
    """What in ``node`` Spark's ANSI mode would fail on some row of ``table`` where :func:`evaluate` gives NULL:
    a division or remainder by zero, a CAST (not TRY_CAST) of a value it cannot convert; ``None`` if nothing.

    Every part of ``node`` is checked on every row, as :func:`evaluate` computes it, so a part Spark would skip
    (``CASE WHEN b <> 0 THEN a / b END``) counts too: the answer is "Spark may differ", for callers that then
    leave the expression to Spark.
    """
    for part in walk(node):
        if isinstance(part, Arith) and part.op in ("/", "%", "div"):
            divisor = broadcast(evaluate(part.right, table), table.num_rows)
            zero = pa.scalar(Decimal(0) if pa.types.is_decimal(divisor.type) else 0, type=divisor.type)
            if pc.any(pc.equal(divisor, zero)).as_py():
                return "a division by zero"
        elif isinstance(part, Cast) and part.mode == "strict":
            source = broadcast(evaluate(part.arg, table), table.num_rows)
            result = broadcast(apply(part, [source], table.num_rows), table.num_rows)
            if result.null_count > source.null_count:
                return f"a CAST of a value that is not a valid {spark_type_name(part.type)}"
    return None


def result_type(node: Node) -> pa.DataType:
    """The type ``apply`` produces for ``node`` (probed on empty inputs of the children's types)."""
    args = [pa.array([], type=child.type) for child in node.children()]
    return apply(node, args, 0).type


# ------------------------------------------------------------------------------------------- kernels


def _null_if_zero(divisor: Datum) -> Datum:
    zero = pa.scalar(Decimal(0) if pa.types.is_decimal(divisor.type) else 0, type=divisor.type)
    return pc.if_else(pc.equal(divisor, zero), pa.scalar(None, type=divisor.type), divisor)


def _is_nan(value: Datum) -> Datum:
    """NaN-ness of a floating value (null where null); ``False`` for any other type."""
    return pc.is_nan(value) if pa.types.is_floating(value.type) else pa.scalar(False)


def compare(op: str, a: Datum, b: Datum) -> Datum:
    """``a op b`` with Spark's NaN semantics: NaN equals NaN and is greater than every other number (Arrow, like
    IEEE 754, makes every comparison with NaN false). Nulls give null, as in SQL."""
    ieee = _COMPARE[op](a, b)
    if not (pa.types.is_floating(a.type) or pa.types.is_floating(b.type)):
        return ieee
    nan_a, nan_b = _is_nan(a), _is_nan(b)
    both = pc.and_(nan_a, nan_b)
    only_a = pc.and_(nan_a, pc.invert(nan_b))
    only_b = pc.and_(nan_b, pc.invert(nan_a))
    # (both NaN, only a NaN, only b NaN) -> result; otherwise the IEEE comparison
    table = {
        "=": (True, False, False),
        "!=": (False, True, True),
        ">": (False, True, False),
        ">=": (True, True, False),
        "<": (False, False, True),
        "<=": (True, False, True),
    }[op]
    return pc.if_else(both, table[0], pc.if_else(only_a, table[1], pc.if_else(only_b, table[2], ieee)))


def _null_safe_equal(a: Datum, b: Datum) -> Datum:
    both_null = pc.and_(pc.is_null(a), pc.is_null(b))
    equal = pc.fill_null(compare("=", a, b), False)
    return pc.or_(both_null, equal)


def _in_list(arg: Datum, values: Sequence[Datum], n: int) -> Datum:
    if all(isinstance(v, pa.Scalar) for v in values):
        present = [v for v in values if v.is_valid]
        has_null = len(present) < len(values)
        x = broadcast(arg, n)
        value_set = pa.array([v.as_py() for v in present], type=x.type)
        result = pc.is_in(x, value_set=value_set)
        result = pc.if_else(pc.is_null(x), pa.scalar(None, pa.bool_()), result)
        if has_null:
            result = pc.if_else(result, True, pa.scalar(None, pa.bool_()))
        return result
    result = None
    for value in values:
        eq = compare("=", arg, value)
        result = eq if result is None else pc.or_kleene(result, eq)
    return broadcast(result, n)


def _try_cast(value: Datum, target: pa.DataType) -> Datum:
    source = value.type
    if pa.types.is_decimal(target) and (pa.types.is_floating(source) or pa.types.is_decimal(source)):
        value = pc.round(value, ndigits=target.scale, round_mode="half_towards_infinity")
    elif pa.types.is_integer(target) and (pa.types.is_floating(source) or pa.types.is_decimal(source)):
        value = pc.trunc(value)
    try:
        return pc.cast(value, target, safe=not _widens_to_float(value.type, target))
    except pa.ArrowInvalid:
        if isinstance(value, pa.Scalar):
            return _try_cast_scalar(value, target)
        return pa.array([_try_cast_scalar(v, target).as_py() for v in value], type=target)


def _widens_to_float(source: pa.DataType, target: pa.DataType) -> bool:
    """An integer to a floating type: Spark rounds to the nearest float (above 2**53 not every integer has one);
    Arrow's safe cast refuses such values instead."""
    return bool(pa.types.is_integer(source) and pa.types.is_floating(target))


def _try_cast_scalar(value: pa.Scalar, target: pa.DataType) -> pa.Scalar:
    try:
        return value.cast(target, safe=True)
    except pa.ArrowInvalid:
        return pa.scalar(None, type=target)


def _substring(value: Datum, start: int, length: int | None) -> Datum:
    """Spark's 1-based ``substring(str, pos[, len])`` (``pos`` 0 acts as 1, negative counts from the end)."""
    if start > 0:
        begin = start - 1
    elif start == 0:
        begin = 0
    else:
        begin = start
    stop: int | None
    if length is None:
        stop = None
    elif begin < 0:
        stop = begin + length if begin + length < 0 else None
        if length <= 0:
            stop = begin
    else:
        stop = begin + max(length, 0)
    if stop is None:
        return pc.utf8_slice_codeunits(value, begin)
    return pc.utf8_slice_codeunits(value, begin, stop)


def _to_string(value: Datum) -> Datum:
    return value if is_string(value.type) else pc.cast(value, pa.string())


def _call(node: Call, args: Sequence[Datum], n: int) -> Datum:
    name = node.name
    if name == "coalesce":
        return pc.coalesce(*args)
    if name == "upper":
        return pc.utf8_upper(args[0])
    if name == "lower":
        return pc.utf8_lower(args[0])
    if name == "length":
        return pc.cast(pc.utf8_length(args[0]), pa.int32())
    if name == "trim":
        return pc.utf8_trim(args[0], characters=" ")
    if name == "concat":
        return pc.binary_join_element_wise(*[_to_string(a) for a in args], "")
    if name == "substring":
        start, length = node.params
        return _substring(args[0], start, length)
    if name == "abs":
        return pc.abs_checked(args[0])
    if name == "round":
        (digits,) = node.params
        if pa.types.is_integer(args[0].type) and digits >= 0:
            return args[0]
        return pc.round(args[0], ndigits=digits, round_mode="half_towards_infinity")
    if name == "nullif":
        same = pc.fill_null(compare("=", args[0], args[1]), False)
        return pc.if_else(same, pa.scalar(None, type=args[0].type), args[0])
    if name == "greatest":
        result = pc.max_element_wise(*args, skip_nulls=True)
        if pa.types.is_floating(result.type):  # Spark: NaN is above every number (Arrow skips it)
            nan = functools.reduce(pc.or_kleene, [pc.fill_null(_is_nan(a), False) for a in args])
            result = pc.if_else(nan, pa.scalar(float("nan"), result.type), result)
        return result
    if name == "least":
        return pc.min_element_wise(*args, skip_nulls=True)
    raise NotImplementedError(name)


def _arith(node: Arith, a: Datum, b: Datum) -> Datum:
    op = node.op
    if op == "+":
        return pc.add_checked(a, b)
    if op == "-":
        return pc.subtract_checked(a, b)
    if op == "*":
        return pc.multiply_checked(a, b)
    if op == "/":
        return pc.divide_checked(a, _null_if_zero(b))
    if op == "%":
        return pc.remainder_checked(a, _null_if_zero(b))
    quotient = pc.divide_checked(a, _null_if_zero(b))
    return pc.cast(quotient, pa.int64())


def apply(node: Node, args: Sequence[Datum], n: int) -> Datum:
    """Compute ``node`` from its children's values ``args`` (in ``node.children()`` order) over ``n`` rows."""
    if isinstance(node, Cast):
        if node.mode in ("try", "strict"):
            return _try_cast(args[0], node.type)
        return pc.cast(args[0], node.type, safe=not _widens_to_float(args[0].type, node.type))
    if isinstance(node, Compare):
        if node.op == "<=>":
            return _null_safe_equal(args[0], args[1])
        return compare(node.op, args[0], args[1])
    if isinstance(node, And):
        result = args[0]
        for arg in args[1:]:
            result = pc.and_kleene(result, arg)
        return result
    if isinstance(node, Or):
        result = args[0]
        for arg in args[1:]:
            result = pc.or_kleene(result, arg)
        return result
    if isinstance(node, Not):
        return pc.invert(args[0])
    if isinstance(node, IsNull):
        return pc.is_null(args[0])
    if isinstance(node, InList):
        return _in_list(args[0], args[1:], n)
    if isinstance(node, Like):
        strings = broadcast(args[0], n)
        if node.mode == "rlike":
            return pc.match_substring_regex(strings, pattern=node.pattern)
        return pc.match_like(strings, pattern=node.pattern, ignore_case=node.mode == "ilike")
    if isinstance(node, Arith):
        return _arith(node, args[0], args[1])
    if isinstance(node, Negate):
        return pc.negate_checked(args[0])
    if isinstance(node, Case):
        values = [broadcast(a, n) for a in args]
        conds = [pc.fill_null(values[2 * i], False) for i in range(len(node.whens))]
        results = [values[2 * i + 1] for i in range(len(node.whens))]
        if node.default is not None:
            results.append(values[-1])
        names = [f"c{i}" for i in range(len(conds))]
        return pc.case_when(pc.make_struct(*conds, field_names=names), *results)
    if isinstance(node, Call):
        return _call(node, args, n)
    raise NotImplementedError(type(node).__name__)
