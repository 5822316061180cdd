"""Property: statistics pruning is sound — may_match never rules out a file holding a matching row."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from txlake.delta.actions import Add
from txlake.delta.files import compute_stats, serialize_partition_value
from txlake.expr import FileStats, parse_predicate

SCHEMA = pa.schema(
    [
        pa.field("i", pa.int32()),
        pa.field("j", pa.int64()),
        pa.field("f", pa.float64()),
        pa.field("s", pa.string()),
        pa.field("d", pa.date32()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("dec", pa.decimal128(6, 2)),
        pa.field("b", pa.bool_()),
        pa.field("st", pa.struct([pa.field("x", pa.int64())])),
    ]
)
PARTITIONED = ("p",)
FULL_SCHEMA = pa.schema([*SCHEMA, pa.field("p", pa.int64())])

BASE_DAY = date(2020, 1, 1)
BASE_TS = datetime(2020, 1, 1, tzinfo=UTC)

ints = st.integers(-4, 4)
floats = st.sampled_from([-1.5, -0.1, 0.0, 0.1, 0.5, 1.0, 2.25, 1e-9, float("nan"), float("inf")])
strings = st.one_of(st.text(alphabet="ab_%", max_size=3), st.sampled_from(["a" * 33, "a" * 32 + "b", "b" * 40]))
days = st.integers(-3, 3).map(lambda n: BASE_DAY + timedelta(days=n))
stamps = st.integers(-3000, 3000).map(lambda n: BASE_TS + timedelta(microseconds=n * 997))
decimals = st.integers(-400, 400).map(lambda n: Decimal(n).scaleb(-2))
bools = st.booleans()


def nullable(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy, strategy)


COLUMNS: dict[str, st.SearchStrategy[Any]] = {
    "i": ints,
    "j": ints,
    "f": floats,
    "s": strings,
    "d": days,
    "ts": stamps,
    "dec": decimals,
    "b": bools,
    "x": ints,
    "p": ints,
}


@st.composite
def tables(draw: st.DrawFn) -> tuple[pa.Table, int | None]:
    n = draw(st.integers(1, 6))
    data: dict[str, list[Any]] = {}
    for name in SCHEMA.names:
        if name == "st":
            data[name] = [draw(st.one_of(st.none(), nullable(ints).map(lambda v: {"x": v}))) for _ in range(n)]
        else:
            data[name] = [draw(nullable(COLUMNS[name])) for _ in range(n)]
    partition = draw(nullable(ints))
    return pa.table(data, schema=SCHEMA), partition


def literal(column: str, value: Any) -> str:
    if value is None:
        return "NULL"
    if column in {"i", "j", "x", "p"}:
        return str(value)
    if column == "f":
        return repr(float(value)) if value == value and abs(value) != float("inf") else "0.5"
    if column == "s":
        return "'" + str(value).replace("\\", "\\\\") + "'"
    if column == "d":
        return f"'{value.isoformat()}'" if value.day % 2 else f"DATE '{value.isoformat()}'"
    if column == "ts":
        text = value.strftime("%Y-%m-%d %H:%M:%S.%f")
        return f"TIMESTAMP '{text}'" if value.microsecond % 2 else f"'{text}'"
    if column == "dec":
        return str(value)
    return "TRUE" if value else "FALSE"


def ref(column: str) -> str:
    return "st.x" if column == "x" else column


@st.composite
def atoms(draw: st.DrawFn) -> str:
    column = draw(st.sampled_from(sorted(COLUMNS)))
    value = draw(nullable(COLUMNS[column]))
    col = ref(column)
    kind = draw(st.sampled_from(["cmp", "cmp", "cmp", "flip", "in", "between", "null", "like", "cross", "bool"]))
    if kind == "cmp":
        op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">=", "<=>"]))
        return f"{col} {op} {literal(column, value)}"
    if kind == "flip":
        op = draw(st.sampled_from(["=", "<", ">=", "<=>"]))
        return f"{literal(column, value)} {op} {col}"
    if kind == "in":
        values = draw(st.lists(nullable(COLUMNS[column]), min_size=1, max_size=3))
        negate = "NOT " if draw(st.booleans()) else ""
        return f"{col} {negate}IN ({', '.join(literal(column, v) for v in values)})"
    if kind == "between":
        other = draw(COLUMNS[column])
        return f"{col} BETWEEN {literal(column, value)} AND {literal(column, other)}"
    if kind == "null":
        return f"{col} IS {'NOT ' if draw(st.booleans()) else ''}NULL"
    if kind == "like":
        pattern = draw(st.text(alphabet="ab_%", max_size=3))
        return f"s {'NOT ' if draw(st.booleans()) else ''}LIKE '{pattern}'"
    if kind == "cross":
        return draw(st.sampled_from(["i < j", "i = st.x", "d < ts", "f > i", "dec >= i", "j + 1 > 2", "-i < 0"]))
    return draw(st.sampled_from(["b", "NOT b", "b IS TRUE", "b IS NOT FALSE", "(i > 0) IS TRUE", "(j < 2) = FALSE"]))


def predicates(depth: int = 3) -> st.SearchStrategy[str]:
    return st.recursive(
        atoms(),
        lambda inner: st.one_of(
            st.tuples(inner, inner).map(lambda p: f"({p[0]}) AND ({p[1]})"),
            st.tuples(inner, inner).map(lambda p: f"({p[0]}) OR ({p[1]})"),
            inner.map(lambda p: f"NOT ({p})"),
        ),
        max_leaves=depth * 2,
    )


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table_and_partition=tables(), sql=predicates())
def test_may_match_is_sound(table_and_partition: tuple[pa.Table, int | None], sql: str) -> None:
    table, partition = table_and_partition
    add = Add(
        path="f.parquet",
        partition_values={"p": serialize_partition_value(partition)},
        size=1,
        modification_time=0,
        stats=compute_stats(table),
    )
    full = table.append_column("p", pa.array([partition] * table.num_rows, pa.int64()))
    bound = parse_predicate(sql).bind(FULL_SCHEMA)
    stats = FileStats.from_add(add, FULL_SCHEMA, PARTITIONED)
    has_match = bool(pc.any(bound.matches(full)).as_py())
    if has_match:
        assert bound.may_match(stats), (sql, full.to_pylist(), stats)


@settings(max_examples=200, deadline=None)
@given(table_and_partition=tables(), sql=predicates(2))
def test_may_match_is_sound_without_stats_columns(table_and_partition: tuple[pa.Table, int | None], sql: str) -> None:
    """Partially missing statistics (only numRecords and the partition value) must never prune a match."""
    table, partition = table_and_partition
    add = Add(
        path="f.parquet",
        partition_values={"p": serialize_partition_value(partition)},
        size=1,
        modification_time=0,
        stats=f'{{"numRecords": {table.num_rows}}}',
    )
    full = table.append_column("p", pa.array([partition] * table.num_rows, pa.int64()))
    bound = parse_predicate(sql).bind(FULL_SCHEMA)
    if pc.any(bound.matches(full)).as_py():
        assert bound.may_match(FileStats.from_add(add, FULL_SCHEMA, PARTITIONED))
