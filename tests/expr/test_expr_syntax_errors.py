"""A predicate that does not parse says where and what was expected, in plain text (no sqlglot internals)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from txlake.errors import PredicateError
from txlake.expr import parse_predicate


def _error(sql: str) -> list[str]:
    with pytest.raises(PredicateError) as err:
        parse_predicate(sql)
    assert err.value.expression == sql
    text = str(err.value)
    for internal in ("\x1b[", "sqlglot", "<class", "Line 1", "Col:", "Token"):
        assert internal not in text, text
    return text.splitlines()


@pytest.mark.parametrize(
    ("sql", "reason", "caret"),
    [
        ("balance +", "expected an expression after '+'", 9),
        ("id = 1 AND", "expected an expression after 'AND'", 10),
        ("id = = 1", "expected an expression after '=', found '='", 5),
        ("id != ", "expected an expression after '!='", 5),
        ("id IN (1, 2", "expected ')'", 11),
        ("(id = 1", "expected ')'", 7),
        ("balance > 10 10", "unexpected '10'", 13),
        ("id = 1)", "unexpected ')'", 6),
        ("owner = 'abc", "unterminated string: the ' here is never closed", 8),
        ("id BETWEEN 1", "expected 'AND <upper bound>' after 'BETWEEN <lower bound>'", 12),
    ],
)
def test_the_caret_points_at_the_problem(sql: str, reason: str, caret: int) -> None:
    first, line, marker = _error(sql)
    assert first == f"cannot parse {sql!r}: {reason}"
    assert line == f"  {sql}"
    assert marker == "  " + " " * caret + "^"


@pytest.mark.parametrize(
    ("sql", "same_columns"),
    [
        ("id\t= +", "id = +"),  # a tab under the tab (then it lines up whatever the tab stops)
        ("名前 = +", "abcd = +"),  # wide characters take two columns
        ("cafe\u0301 = +", "cafe = +"),  # a combining accent takes none
    ],
)
def test_the_caret_lines_up_under_tabs_and_wide_characters(sql: str, same_columns: str) -> None:
    _, line, marker = _error(sql)
    _, _, plain_marker = _error(same_columns)
    assert line == f"  {sql}"
    assert marker.replace("\t", " ") == plain_marker, (marker, plain_marker)
    assert ("\t" in marker) == ("\t" in sql)


def test_a_multi_line_expression_shows_the_line_with_the_problem() -> None:
    first, line, marker = _error("id = 1 AND\n  balance >")
    assert first.endswith("expected an expression after '>'")
    assert line == "    balance >" and marker == "  " + " " * 11 + "^"


def test_an_unknown_column_suggests_the_closest() -> None:
    schema = pa.schema([("id", pa.int64()), ("balance", pa.int64())])
    with pytest.raises(PredicateError, match=r"unknown column 'balanse' in 'balanse > 1'; did you mean 'balance'\?"):
        parse_predicate("balanse > 1").bind(schema)
    with pytest.raises(PredicateError, match=r"unknown column 'zzz' in 'zzz = 1' \(columns: id, balance\)"):
        parse_predicate("zzz = 1").bind(schema)


@pytest.mark.parametrize(
    ("sql", "named"),
    [
        ("id = 1; SELECT 1", "several statements separated by ';'"),
        ("id IN (SELECT 1)", "a subquery"),
        ("EXISTS (SELECT 1)", "EXISTS (subquery)"),
        ("id = ?", "a parameter placeholder (? or :name)"),
        ("array(1, 2)[0] = 1", "indexing with [...]"),
        ("sum(id) > 1", "the aggregate function SUM()"),
        ("row_number() OVER () = 1", "a window function (OVER ...)"),
        ("id = (1, 2)", "a tuple (a, b, ...)"),
        ("nosuchfn(id) = 1", "function NOSUCHFN()"),
    ],
)
def test_what_txlake_cannot_evaluate_is_named_in_sql_words(sql: str, named: str) -> None:
    """Not sqlglot's class names (BLOCK, SUBQUERY, PLACEHOLDER, BRACKET): what the user wrote."""
    with pytest.raises(PredicateError) as err:
        parse_predicate(sql)
    text = str(err.value)
    assert text == f"cannot use {named} in {sql!r}"
    for internal in ("BLOCK", "SUBQUERY", "PLACEHOLDER", "BRACKET", "TUPLE", "construct"):
        assert internal not in text
