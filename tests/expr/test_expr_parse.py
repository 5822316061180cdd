"""Parsing Spark SQL into predicates/expressions: errors, columns, conjunctions, binding."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

from txlake.errors import PredicateError
from txlake.expr import (
    TRUE,
    BoundExpression,
    BoundPredicate,
    Expression,
    Predicate,
    parse_expression,
    parse_predicate,
    split_conjuncts,
)

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("Name", pa.string()),
        pa.field("my col", pa.int32()),
        pa.field("s", pa.struct([pa.field("a", pa.int64()), pa.field("B", pa.string())])),
    ]
)


@pytest.mark.parametrize(
    "sql",
    [
        "",
        "   ",
        "a =",
        "a = 1 AND",
        "SELECT 1",
        "a = 1; b = 2",
        "a = 1 b",
        "a IN (SELECT 1)",
        "x IN ()",
        "foo(a) = 1",
        "ts > current_date()",
        "a LIKE 'x!%' ESCAPE '!'",
        "d > INTERVAL 1 DAY",
        "a & b = 1",
        "a = :param",
        "a = ?",
    ],
)
def test_unparsable_or_unsupported_raises_predicate_error_with_expression(sql: str) -> None:
    with pytest.raises(PredicateError) as info:
        parse_predicate(sql).bind(SCHEMA)
    assert info.value.expression == sql
    assert isinstance(info.value, ValueError)


def test_unsupported_constructs_are_rejected_at_parse_time() -> None:
    with pytest.raises(PredicateError):
        parse_predicate("SELECT 1")
    with pytest.raises(PredicateError):
        parse_expression("foo(id)")


def test_non_string_input_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        parse_predicate(1)  # type: ignore[arg-type]


def test_parse_keeps_text_and_lists_columns_lower_cased() -> None:
    pred = parse_predicate("ID = 1 AND (Name LIKE 'a%' OR s.A > 2)")
    assert isinstance(pred, Predicate)
    assert pred.sql == "ID = 1 AND (Name LIKE 'a%' OR s.A > 2)"
    assert str(pred) == pred.sql
    assert pred.columns == frozenset({"id", "name", "s.a"})
    expr = parse_expression("t.balance - s.amount")
    assert isinstance(expr, Expression)
    assert expr.columns == frozenset({"t.balance", "s.amount"})


def test_unknown_column_fails_bind() -> None:
    pred = parse_predicate("nope = 1")
    with pytest.raises(PredicateError) as info:
        pred.bind(SCHEMA)
    assert info.value.expression == "nope = 1"
    with pytest.raises(PredicateError):
        parse_predicate("s.zzz = 1").bind(SCHEMA)
    with pytest.raises(PredicateError):
        parse_predicate("id.x = 1").bind(SCHEMA)


def test_columns_resolve_case_insensitively_to_schema_spelling() -> None:
    bound = parse_predicate("NAME = 'x' AND `MY COL` = 1 AND S.b = 'y'").bind(SCHEMA)
    assert isinstance(bound, BoundPredicate)
    assert bound.columns == frozenset({"Name", "my col", "s"})
    assert bound.type == pa.bool_()


def test_exact_spelling_wins_over_case_insensitive_duplicates() -> None:
    schema = pa.schema([pa.field("a", pa.int64()), pa.field("A", pa.string())])
    bound = parse_predicate("A = 'x'").bind(schema)
    assert bound.columns == frozenset({"A"})
    with pytest.raises(PredicateError):
        parse_predicate("`a` = 1 AND x = 1").bind(schema)


def test_case_insensitive_ambiguity_is_an_error() -> None:
    schema = pa.schema([pa.field("Ab", pa.int64()), pa.field("aB", pa.int64())])
    with pytest.raises(PredicateError):
        parse_predicate("ab = 1").bind(schema)


def test_predicate_must_be_boolean() -> None:
    with pytest.raises(PredicateError):
        parse_predicate("id + 1").bind(SCHEMA)
    with pytest.raises(PredicateError):
        parse_predicate("Name").bind(SCHEMA)
    bound = parse_predicate("NULL").bind(SCHEMA)
    assert bound.type == pa.bool_()


@pytest.mark.parametrize(
    "sql",
    [
        "id = 'abc'",
        "Name + 1 > 0",
        "Name = 1",
        "id LIKE Name",
        "s = 1",
        "DATE '2020-13-45' IS NULL",
        "TIMESTAMP 'garbage' IS NULL",
        "id AND TRUE",
        "NOT id",
        "substring(Name, id) = 'a'",
        "CAST(id AS ARRAY<INT>) IS NULL",
        "id BETWEEN SYMMETRIC 1 AND 2",
        "trim(BOTH 'x' FROM Name) = 'a'",
        "1.5 DIV 2 = 0",
    ],
)
def test_type_errors_fail_bind(sql: str) -> None:
    with pytest.raises(PredicateError) as info:
        parse_predicate(sql).bind(SCHEMA)
    assert info.value.expression == sql


def test_expression_bind_reports_result_type() -> None:
    bound = parse_expression("id * 2").bind(SCHEMA)
    assert isinstance(bound, BoundExpression)
    assert bound.type == pa.int64()
    assert parse_expression("id / 2").bind(SCHEMA).type == pa.float64()
    assert parse_expression("upper(Name)").bind(SCHEMA).type == pa.string()
    assert parse_expression("s.a").bind(SCHEMA).type == pa.int64()


def test_true_conjunction_and_split() -> None:
    assert TRUE.is_true
    assert not parse_predicate("id = 1").is_true
    assert Predicate.conjunction() is TRUE
    assert Predicate.conjunction(TRUE, "id = 1").sql == "id = 1"
    both = Predicate.conjunction("id = 1", parse_predicate("Name = 'a' OR id > 3"))
    assert both.columns == frozenset({"id", "name"})
    parts = split_conjuncts(both)
    assert len(parts) == 2
    assert all(isinstance(p, Predicate) for p in parts)
    assert parts[1].columns == frozenset({"id", "name"})
    assert split_conjuncts("a = 1 AND b = 2 AND (c = 3 AND d = 4)")[3].columns == frozenset({"d"})
    assert split_conjuncts("a = 1 OR b = 2")[0].sql == "a = 1 OR b = 2"
    table = pa.table({"id": [1, 4, 1], "Name": ["a", "a", "b"], "my col": [1, 2, 3], "s": [None] * 3}, schema=SCHEMA)
    assert both.bind(SCHEMA).mask(table).to_pylist() == [True, False, False]


def test_equalities_finds_column_pairs_only() -> None:
    pred = parse_predicate("t.id = s.id AND s.x > 0 AND (t.`a b` = s.k) AND t.z = 5 AND (t.q = s.q OR 1 = 1)")
    assert pred.equalities() == (("t.id", "s.id"), ("t.`a b`", "s.k"))
    sides = [parse_expression(side) for side in pred.equalities()[1]]
    assert sides[0].columns == frozenset({"t.a b"})


def test_predicates_compare_by_text_and_pickle() -> None:
    assert parse_predicate("id = 1") == parse_predicate("id = 1")
    assert hash(parse_predicate("id = 1")) == hash(parse_predicate("id = 1"))
    pred = parse_predicate("id = 1 AND Name = 'x'")
    again = pickle.loads(pickle.dumps(pred))
    assert again == pred
    assert isinstance(again, Predicate)
    bound = pred.bind(SCHEMA)
    rebound = pickle.loads(pickle.dumps(bound))
    assert isinstance(rebound, BoundPredicate)
    table = pa.table({"id": [1, 1], "Name": ["x", "y"], "my col": [1, 2], "s": [None, None]}, schema=SCHEMA)
    assert rebound.mask(table).to_pylist() == [True, False]
    expr = pickle.loads(pickle.dumps(parse_expression("id + 1").bind(SCHEMA)))
    assert type(expr) is BoundExpression
