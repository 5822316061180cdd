"""Arrow evaluation of bound predicates and expressions: every operator, NULL semantics, coercions."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from txlake.errors import PredicateError
from txlake.expr import parse_expression, parse_predicate

TABLE = pa.table(
    {
        "i": pa.array([1, 2, 3, None], pa.int32()),
        "j": pa.array([10, None, -3, 4], pa.int64()),
        "f": pa.array([1.5, -0.5, None, 2.0], pa.float64()),
        "dec": pa.array([Decimal("1.50"), Decimal("2.25"), None, Decimal("-3.00")], pa.decimal128(10, 2)),
        "name": pa.array(["alice", "Bob", None, "carol_x"], pa.string()),
        "flag": pa.array([True, False, None, True], pa.bool_()),
        "d": pa.array([date(2020, 1, 1), date(2021, 6, 15), None, date(2019, 12, 31)], pa.date32()),
        "ts": pa.array(
            [
                datetime(2020, 1, 1, 12, 0, tzinfo=UTC),
                datetime(2020, 1, 2, tzinfo=UTC),
                None,
                datetime(2019, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
            ],
            pa.timestamp("us", tz="UTC"),
        ),
        "ntz": pa.array([datetime(2020, 1, 1), datetime(2020, 1, 2), None, datetime(2020, 1, 3)], pa.timestamp("ms")),
        "s": pa.array(
            [{"a": 1, "b": "x"}, None, {"a": None, "b": "z"}, {"a": 4, "b": None}],
            pa.struct([pa.field("a", pa.int64()), pa.field("b", pa.string())]),
        ),
    }
)


def mask(sql: str) -> list[bool | None]:
    result = parse_predicate(sql).bind(TABLE.schema).mask(TABLE)
    assert isinstance(result, pa.BooleanArray)
    assert len(result) == TABLE.num_rows
    return list(result.to_pylist())


def values(sql: str) -> list[Any]:
    result = parse_expression(sql).bind(TABLE.schema).evaluate(TABLE)
    assert isinstance(result, pa.Array)
    assert len(result) == TABLE.num_rows
    return list(result.to_pylist())


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("i = 2", [False, True, False, None]),
        ("i == 2", [False, True, False, None]),
        ("i != 2", [True, False, True, None]),
        ("i <> 2", [True, False, True, None]),
        ("i < 2", [True, False, False, None]),
        ("i <= 2", [True, True, False, None]),
        ("i > 2", [False, False, True, None]),
        ("i >= 2", [False, True, True, None]),
        ("2 < i", [False, False, True, None]),
        ("i <=> 2", [False, True, False, False]),
        ("i <=> NULL", [False, False, False, True]),
        ("i <=> j", [False, False, False, False]),
        ("i IS NOT DISTINCT FROM 3", [False, False, True, False]),
        ("i IS DISTINCT FROM 3", [True, True, False, True]),
        ("i = j", [False, None, False, None]),
        ("i < j", [True, None, False, None]),
    ],
)
def test_comparisons(sql: str, expected: list[bool | None]) -> None:
    assert mask(sql) == expected


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("i > 1 AND j > 0", [False, None, False, None]),
        ("i > 1 OR j > 0", [True, True, True, True]),
        ("i > 5 OR j > 5", [True, None, False, None]),
        ("NOT i = 2", [True, False, True, None]),
        ("NOT (i = 2)", [True, False, True, None]),
        ("!(i = 2)", [True, False, True, None]),
        ("flag", [True, False, None, True]),
        ("NOT flag", [False, True, None, False]),
        ("flag AND NULL", [None, False, None, None]),
        ("flag OR NULL", [True, None, None, True]),
        ("flag IS TRUE", [True, False, False, True]),
        ("flag IS NOT TRUE", [False, True, True, False]),
        ("flag IS FALSE", [False, True, False, False]),
        ("i IS NULL", [False, False, False, True]),
        ("i IS NOT NULL", [True, True, True, False]),
        ("TRUE", [True, True, True, True]),
        ("FALSE", [False, False, False, False]),
        ("NULL", [None, None, None, None]),
        ("1 = 1", [True, True, True, True]),
    ],
)
def test_boolean_logic_is_three_valued(sql: str, expected: list[bool | None]) -> None:
    assert mask(sql) == expected


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("i IN (1, 3)", [True, False, True, None]),
        ("i IN (1, NULL)", [True, None, None, None]),
        ("i NOT IN (1, 3)", [False, True, False, None]),
        ("i NOT IN (1, NULL)", [False, None, None, None]),
        ("i IN (j, 2)", [False, True, False, None]),
        ("name IN ('alice', 'Bob')", [True, True, None, False]),
        ("d IN ('2020-01-01', DATE '2019-12-31')", [True, False, None, True]),
        ("i BETWEEN 2 AND 3", [False, True, True, None]),
        ("i NOT BETWEEN 2 AND 3", [True, False, False, None]),
        ("j BETWEEN i AND 10", [True, None, False, None]),
    ],
)
def test_in_and_between(sql: str, expected: list[bool | None]) -> None:
    assert mask(sql) == expected


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("name LIKE 'a%'", [True, False, None, False]),
        ("name LIKE '_ob'", [False, True, None, False]),
        ("name NOT LIKE '%o%'", [True, False, None, False]),
        ("name LIKE 'carol\\_%'", [False, False, None, True]),
        ("name LIKE 'carol_%'", [False, False, None, True]),
        ("name ILIKE 'BOB'", [False, True, None, False]),
        ("name NOT ILIKE 'bob'", [True, False, None, True]),
        ("name RLIKE '^[ab]'", [True, False, None, False]),
        ("name NOT RLIKE 'o'", [True, False, None, False]),
        ("i LIKE '1%'", [True, False, False, None]),
    ],
)
def test_like(sql: str, expected: list[bool | None]) -> None:
    assert mask(sql) == expected


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("i + 1", [2, 3, 4, None]),
        ("i - j", [-9, None, 6, None]),
        ("i * 2", [2, 4, 6, None]),
        ("j / 4", [2.5, None, -0.75, 1.0]),
        ("i / 2", [0.5, 1.0, 1.5, None]),
        ("j % 3", [1, None, 0, 1]),
        ("-7 % 3 + i * 0", [-1, -1, -1, None]),
        ("j DIV 3", [3, None, -1, 1]),
        ("-i", [-1, -2, -3, None]),
        ("- j", [-10, None, 3, -4]),
        ("f * 2", [3.0, -1.0, None, 4.0]),
        ("i + f", [2.5, 1.5, None, None]),
        ("i + 1.5", [Decimal("2.5"), Decimal("3.5"), Decimal("4.5"), None]),
        ("dec + 1", [Decimal("2.50"), Decimal("3.25"), None, Decimal("-2.00")]),
        ("dec * 2", [Decimal("3.00"), Decimal("4.50"), None, Decimal("-6.00")]),
        ("i / 0", [None, None, None, None]),
        ("j % 0", [None, None, None, None]),
        ("f / 0", [None, None, None, None]),
        ("1 + 2", [3, 3, 3, 3]),
        ("NULL + i", [None, None, None, None]),
    ],
)
def test_arithmetic(sql: str, expected: list[Any]) -> None:
    assert values(sql) == expected


def test_division_gives_double_and_decimal_stays_decimal() -> None:
    assert parse_expression("i / 2").bind(TABLE.schema).type == pa.float64()
    assert parse_expression("j / i").bind(TABLE.schema).type == pa.float64()
    dec = parse_expression("dec / 2").bind(TABLE.schema)
    assert pa.types.is_decimal(dec.type)
    assert dec.evaluate(TABLE).to_pylist()[0] == Decimal("0.75")


def test_a_bigint_beyond_2_53_divides_to_the_nearest_double_as_in_spark() -> None:
    big = pa.table({"v": pa.array([9223372036854775000, 7, None], pa.int64())})
    nearest = float(9223372036854775000)  # 2**63 - 1024: doubles are 1,024 apart there
    assert parse_expression("v / 2").bind(big.schema).evaluate(big).to_pylist() == [nearest / 2, 3.5, None]
    assert parse_expression("CAST(v AS double)").bind(big.schema).evaluate(big).to_pylist()[0] == nearest


def test_integer_overflow_raises_instead_of_wrapping() -> None:
    bound = parse_expression("i + 2147483647").bind(TABLE.schema)
    with pytest.raises(PredicateError) as info:
        bound.evaluate(TABLE)
    assert info.value.expression == "i + 2147483647"


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("COALESCE(i, j, 0)", [1, 2, 3, 4]),
        ("COALESCE(name, 'none')", ["alice", "Bob", "none", "carol_x"]),
        ("nvl(i, -1)", [1, 2, 3, -1]),
        ("CASE WHEN i = 1 THEN 'one' WHEN i = 2 THEN 'two' ELSE 'many' END", ["one", "two", "many", "many"]),
        ("CASE WHEN i > 1 THEN i END", [None, 2, 3, None]),
        ("CASE i WHEN 1 THEN 'a' WHEN 3 THEN 'c' END", ["a", None, "c", None]),
        ("CASE WHEN flag THEN 1 ELSE 0 END", [1, 0, 0, 1]),
        ("IF(i > 1, 'big', 'small')", ["small", "big", "big", "small"]),
        ("IF(flag, i, j)", [1, None, -3, None]),
        ("upper(name)", ["ALICE", "BOB", None, "CAROL_X"]),
        ("lower(name)", ["alice", "bob", None, "carol_x"]),
        ("length(name)", [5, 3, None, 7]),
        ("char_length(name)", [5, 3, None, 7]),
        ("concat(name, '-', i)", ["alice-1", "Bob-2", None, None]),
        ("name || '!'", ["alice!", "Bob!", None, "carol_x!"]),
        ("substring(name, 2, 3)", ["lic", "ob", None, "aro"]),
        ("substring(name, 2)", ["lice", "ob", None, "arol_x"]),
        ("substr(name, -2)", ["ce", "ob", None, "_x"]),
        ("substring(name, -3, 2)", ["ic", "Bo", None, "l_"]),
        ("substring(name, 0, 2)", ["al", "Bo", None, "ca"]),
        ("abs(j)", [10, None, 3, 4]),
        ("abs(dec)", [Decimal("1.50"), Decimal("2.25"), None, Decimal("3.00")]),
        ("round(f)", [2.0, -1.0, None, 2.0]),
        ("round(dec, 1)", [Decimal("1.50"), Decimal("2.30"), None, Decimal("-3.00")]),
        ("round(j, -1)", [10, None, 0, 0]),
        ("trim(concat('  ', name, ' '))", ["alice", "Bob", None, "carol_x"]),
        ("nullif(i, 2)", [1, None, 3, None]),
        ("greatest(i, j)", [10, 2, 3, 4]),
        ("least(i, j, 0)", [0, 0, -3, 0]),
        ("s.a", [1, None, None, 4]),
        ("s.b", ["x", None, "z", None]),
    ],
)
def test_functions(sql: str, expected: list[Any]) -> None:
    assert values(sql) == expected


def test_case_evaluates_only_well_typed_branches_eagerly_without_failing() -> None:
    assert values("CASE WHEN j = 0 THEN 0 ELSE 100 / j END") == [10.0, None, pytest.approx(-33.333333), 25.0]


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("CAST(i AS STRING)", ["1", "2", "3", None]),
        ("CAST(name AS INT)", [None, None, None, None]),
        ("CAST('12' AS INT) + i", [13, 14, 15, None]),
        ("CAST(f AS INT)", [1, 0, None, 2]),
        ("CAST(dec AS DECIMAL(5,1))", [Decimal("1.5"), Decimal("2.3"), None, Decimal("-3.0")]),
        (
            "CAST(d AS TIMESTAMP)",
            [
                datetime(2020, 1, 1, tzinfo=UTC),
                datetime(2021, 6, 15, tzinfo=UTC),
                None,
                datetime(2019, 12, 31, tzinfo=UTC),
            ],
        ),
        ("CAST(i AS DOUBLE)", [1.0, 2.0, 3.0, None]),
        ("try_cast(name AS BIGINT)", [None, None, None, None]),
        ("10L + i", [11, 12, 13, None]),
        ("1.5D + i", [2.5, 3.5, 4.5, None]),
    ],
)
def test_casts_and_typed_literals(sql: str, expected: list[Any]) -> None:
    assert values(sql) == expected


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("d < '2020-06-01'", [True, False, None, True]),
        ("d = '2020-01-01'", [True, False, None, False]),
        ("'2020-01-01' = d", [True, False, None, False]),
        ("d >= DATE '2020-01-01'", [True, True, None, False]),
        ("d BETWEEN '2020-01-01' AND '2021-12-31'", [True, True, None, False]),
        ("d < TIMESTAMP '2020-01-01 00:00:01'", [True, False, None, True]),
        ("ts < '2020-01-02'", [True, False, None, True]),
        ("ts = '2020-01-02 00:00:00'", [False, True, None, False]),
        ("ts = '2020-01-02T00:00:00Z'", [False, True, None, False]),
        ("ts = '2020-01-02T01:00:00+01:00'", [False, True, None, False]),
        ("ts > TIMESTAMP '2020-01-01 11:59:59.999999'", [True, True, None, False]),
        ("ts >= d", [True, False, None, True]),
        ("ntz > '2020-01-01 12:00'", [False, True, None, True]),
        ("ntz = TIMESTAMP_NTZ '2020-01-02 00:00:00'", [False, True, None, False]),
        ("ntz < ts", [True, False, None, False]),
        ("j = '10'", [True, None, False, False]),
        ("f > '1.0'", [True, False, None, True]),
        ("dec = 1.5", [True, False, None, False]),
        ("dec = '2.25'", [False, True, None, False]),
        ("dec > 1.499", [True, True, None, False]),
        ("i = 1.0", [True, False, False, None]),
        ("i = 1.5", [False, False, False, None]),
        ("i < 1.5", [True, False, False, None]),
        ("f = 1.5", [True, False, None, False]),
        ("flag = 'true'", [True, False, None, True]),
    ],
)
def test_literal_coercion_like_spark(sql: str, expected: list[bool | None]) -> None:
    assert mask(sql) == expected


def test_invalid_string_literal_for_typed_column_is_an_error() -> None:
    for sql in ["d < 'yesterday'", "ts > 'soon'", "j = 'ten'"]:
        with pytest.raises(PredicateError):
            parse_predicate(sql).bind(TABLE.schema)


def test_nested_struct_child_with_null_parent_is_null() -> None:
    assert mask("s.a > 0") == [True, None, None, True]
    assert mask("s.a IS NULL") == [False, True, True, False]


def test_filter_keeps_only_true_rows_and_evaluate_broadcasts_constants() -> None:
    bound = parse_predicate("i >= 2").bind(TABLE.schema)
    assert bound.filter(TABLE).column("i").to_pylist() == [2, 3]
    assert bound.matches(TABLE).to_pylist() == [False, True, True, False]
    assert parse_expression("'x'").bind(TABLE.schema).evaluate(TABLE).to_pylist() == ["x"] * 4
    empty = TABLE.slice(0, 0)
    assert parse_predicate("i > 1").bind(TABLE.schema).filter(empty).num_rows == 0


def test_evaluation_on_table_missing_a_column_raises_predicate_error() -> None:
    bound = parse_predicate("i > 1").bind(TABLE.schema)
    with pytest.raises(PredicateError):
        bound.mask(TABLE.drop_columns(["i"]))


def test_chunked_tables_evaluate_like_contiguous_ones() -> None:
    chunked = pa.concat_tables([TABLE.slice(0, 2), TABLE.slice(2)])
    bound = parse_predicate("i > 1 OR name LIKE 'c%'").bind(TABLE.schema)
    assert bound.mask(chunked).to_pylist() == bound.mask(TABLE).to_pylist()
