"""``txlake sql``: a query over one consistent snapshot, on Arrow when simple, else on Spark."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import txlake
from txlake.cli import arrow_sql
from txlake.cli.main import main
from txlake.cli.sql import bind_tables, parse_query, run_arrow, spark_query_error
from txlake.errors import InvalidArgumentError, PredicateError, TableNotFoundError

SCHEMA = pa.schema([("id", pa.int64()), ("balance", pa.int64())])


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """One local session for the module (``txlake sql`` in-process reuses the active session)."""
    pytest.importorskip("pyspark.sql")
    from txlake.spark.session import local_session

    session, created = local_session("txlake-cli-sql-tests")
    yield session
    if created:
        session.stop()


def test_bind_tables_rewrites_catalog_names() -> None:
    sql, used = bind_tables("SELECT a.id FROM bank.north a JOIN Bank.South ON true", ["bank.north", "bank.south"])
    assert used == {"bank.north": "txlake__bank__north", "bank.south": "txlake__bank__south"}
    assert "txlake__bank__north AS a" in sql and "bank.north" not in sql


def test_bind_tables_keeps_ctes_and_table_functions() -> None:
    sql, used = bind_tables(
        "WITH n AS (SELECT * FROM bank.north) SELECT * FROM n CROSS JOIN range(3)", ["bank.north", "bank.south"]
    )
    assert list(used) == ["bank.north"] and "range(3)" in sql.lower()


@pytest.mark.parametrize(
    "query", ["DROP TABLE bank.north", "INSERT INTO bank.north VALUES (1, 2)", "SELECT FROM (", "SELECT 1"]
)
def test_bind_tables_refuses_non_queries_and_queries_of_no_table(query: str) -> None:
    with pytest.raises(PredicateError) as err:
        bind_tables(query, ["bank.north"])
    assert err.value.expression == query


@pytest.mark.parametrize(
    ("query", "reason", "caret"),
    [
        ("SELEC * FROM bank.north", "a query starts with SELECT or WITH, found 'SELEC'; did you mean SELECT?", 0),
        ("  selct id FROM bank.north", "a query starts with SELECT or WITH, found 'selct'; did you mean SELECT?", 2),
        ("DELETE FROM bank.north", "txlake sql runs queries (SELECT or WITH ...), not DELETE statements", 0),
        ("SELECT 1; SELECT 2", "txlake sql runs one query; a second statement follows this ';'", 8),
        ("SELECT * FROM bank.north WHERE", "expected an expression after 'WHERE'", 30),
        ("SELECT id, FROM bank.north", "an empty item in a list at this comma", 9),
        ("SELECT upper(owner,) FROM bank.north", "an empty argument at this comma", 18),
        ("SELECT FROM bank.north", "SELECT names no columns (SELECT * or SELECT a, b ...)", 7),
    ],
)
def test_a_query_that_does_not_parse_gets_the_caret_where_the_mistake_is(query: str, reason: str, caret: int) -> None:
    """``SELEC * FROM x`` is a misspelt keyword at the start, not "an expression expected after '*'"."""
    with pytest.raises(PredicateError) as err:
        parse_query(query)
    first, line, marker = str(err.value).splitlines()
    assert first == f"cannot parse the query: {reason}"
    assert line == f"  {query}" and marker == "  " + " " * caret + "^"


@pytest.mark.parametrize("query", ["", "   ", ";", " ; ;"])
def test_an_empty_query_is_a_usage_error(query: str) -> None:
    with pytest.raises(InvalidArgumentError) as err:
        parse_query(query)
    assert err.value.argument == "query" and "the query is empty" in str(err.value)


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("SELECT * FROM bank.north WHERE id IN (SELECT 1)", "it uses a subquery"),
        ("SELECT owner FROM bank.north GROUP BY owner", "it uses GROUP BY"),
        ("SELECT count(*) FROM bank.north", "it uses the aggregate function COUNT()"),
        ("SELECT * FROM bank.north WHERE id = ?", "cannot use a parameter placeholder (? or :name)"),
    ],
)
def test_why_arrow_cannot_run_a_query_is_said_in_sql_words(tmp_path: Path, query: str, named: str) -> None:
    lake = txlake.connect(tmp_path.as_uri())
    lake.create_table("bank.north", pa.schema([("id", pa.int64()), ("owner", pa.string())]))
    snap = lake.snapshot()
    with pytest.raises(arrow_sql.NeedsSpark) as why:
        run_arrow(snap, parse_query(query), "bank.north", query, limit=None)
    assert named in str(why.value)
    for internal in ("SUBQUERY", "GROUP,", "PLACEHOLDER", "construct"):
        assert internal not in str(why.value)


@pytest.mark.parametrize(
    ("query", "close"),
    [
        ("SELECT * FROM other.table", None),
        ("SELECT * FROM bank.nort", "bank.north"),
        ("SELECT * FROM north", "bank.north"),
        ("SELECT * FROM bank.north n JOIN bank.sout s USING (id)", "bank.south"),
    ],
)
def test_an_unknown_table_is_not_found_with_the_closest_names(query: str, close: str | None) -> None:
    with pytest.raises(TableNotFoundError) as err:
        bind_tables(query, ["bank.north", "bank.south"], version=3)
    assert "at lakehouse version 3" in str(err.value)
    if close is None:
        assert "(tables: bank.north, bank.south)" in str(err.value)
    else:
        assert f"did you mean {close!r}?" in str(err.value)


def test_sql_over_a_snapshot_and_time_travel(tmp_path: Path, capsys: pytest.CaptureFixture[str], spark: Any) -> None:
    lake = txlake.connect(f"file://{tmp_path}")
    with lake.transaction() as tx:
        tx.create_table("bank.north", SCHEMA)
        tx.create_table("bank.south", SCHEMA)
        tx.append("bank.north", pa.table({"id": [1, 2], "balance": [10, 20]}, schema=SCHEMA))
        tx.append("bank.south", pa.table({"id": [1, 2], "balance": [1, 2]}, schema=SCHEMA))
    first = lake.version()
    with lake.transaction() as tx:
        tx.update("bank.north", set={"balance": "balance * 100"})
    query = "SELECT n.id, n.balance + s.balance AS total FROM bank.north n JOIN bank.south s USING (id) ORDER BY n.id"
    assert main(["sql", "--uri", str(tmp_path), query, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rows"] == [{"id": 1, "total": 1001}, {"id": 2, "total": 2002}]
    assert out["lakehouse_version"] == lake.version() and out["engine"] == "spark"
    assert main(["sql", "--uri", str(tmp_path), query, "--version", str(first), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == [{"id": 1, "total": 11}, {"id": 2, "total": 22}]
    assert main(["sql", "--uri", str(tmp_path), "SELECT id FROM bank.north", "--limit", "1"]) == 0
    assert "1 of 2 row(s)" in capsys.readouterr().out
    assert main(["sql", "--uri", str(tmp_path), "DELETE FROM bank.north"]) == 8
    assert main(["sql", "--uri", str(tmp_path / "nothing"), "SELECT 1 FROM bank.north"]) == 3


def test_spark_errors_about_the_query_become_predicate_errors(spark: Any) -> None:
    """Real exceptions of the session: parse, analysis and data errors are the user's (exit 8); others not."""
    caught: list[BaseException] = []
    for sql in ("SELECT * FROM (", "SELECT nosuch FROM range(3)", "SELECT CAST('abc' AS INT)", "SELECT nofn(1)"):
        try:
            spark.sql(sql).collect()
        except Exception as exc:  # the session's own exception classes
            caught.append(exc)
    assert len(caught) == 4
    errors = [spark_query_error(exc, "q", {}, ["id", "balance"], version=1) for exc in caught]
    assert all(isinstance(e, PredicateError) for e in errors), errors
    parse, column, cast, function = (str(e) for e in errors)
    assert parse.startswith("cannot parse the query: syntax error at or near")
    assert column == "unknown column 'nosuch' in the query (columns: id, balance)"
    assert "abc" in cast and "SQLSTATE" not in cast and "\n" not in cast
    assert "nofn" in function
    assert spark_query_error(RuntimeError("boom"), "q", {}, [], version=1) is None


# ------------------------------------------------------------------------------------------ arrow engine


def _lake(tmp_path: Path) -> txlake.LakehouseSnapshot:
    lake = txlake.connect(tmp_path.as_uri())
    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64())])
    lake.create_table("app.people", schema)
    rows = {
        "id": [1, 2, 3, 4, 5],
        "name": ["ann", None, "cy", "bo", "al"],
        "score": [2.5, 1.0, None, math.nan, 3.0],
    }
    with lake.transaction() as tx:
        tx.append("app.people", pa.table(rows, schema=schema))
    return lake.snapshot()


def _rows(snap: txlake.LakehouseSnapshot, query: str, limit: int | None = None) -> list[dict[str, Any]]:
    result = run_arrow(snap, parse_query(query), "app.people", query, limit=limit)
    assert result.engine == "arrow"
    columns = result.rows.to_pydict()
    return [dict(zip(columns, values, strict=True)) for values in zip(*columns.values(), strict=True)]


def test_arrow_engine_selects_filters_sorts_and_limits(tmp_path: Path) -> None:
    snap = _lake(tmp_path)
    assert [r["id"] for r in _rows(snap, "SELECT * FROM app.people")] == [1, 2, 3, 4, 5]
    got = _rows(snap, "SELECT p.id, upper(p.name) AS n FROM app.people p WHERE id > 1 ORDER BY n DESC LIMIT 2")
    assert got == [{"id": 3, "n": "CY"}, {"id": 4, "n": "BO"}]
    # Spark's NULL ordering: first when ascending, last when descending; NaN above every number
    assert [r["id"] for r in _rows(snap, "SELECT id FROM app.people ORDER BY score")] == [3, 2, 1, 5, 4]
    assert [r["id"] for r in _rows(snap, "SELECT id FROM app.people ORDER BY score DESC")] == [4, 5, 1, 2, 3]
    assert [r["id"] for r in _rows(snap, "SELECT id FROM app.people ORDER BY name NULLS LAST, 1")] == [5, 1, 4, 3, 2]
    assert [r["id"] for r in _rows(snap, "SELECT id, name FROM app.people ORDER BY 2 DESC")] == [3, 4, 1, 5, 2]
    assert _rows(snap, "SELECT app.people.id FROM app.people WHERE name = 'al'") == [{"id": 5}]
    assert _rows(snap, "SELECT id * 10 AS x FROM app.people ORDER BY id LIMIT 3", limit=2) == [{"x": 10}, {"x": 20}]


@pytest.mark.parametrize(
    "query",
    [
        "SELECT count(*) FROM app.people",
        "SELECT DISTINCT name FROM app.people",
        "SELECT name FROM app.people GROUP BY name",
        "SELECT id FROM app.people WHERE id IN (SELECT id FROM app.people)",
        "SELECT id, row_number() OVER (ORDER BY id) FROM app.people",
        "SELECT date_format(current_date(), 'y') FROM app.people",
        "SELECT id FROM app.people UNION SELECT id FROM app.people",
    ],
)
def test_arrow_engine_leaves_the_rest_to_spark(tmp_path: Path, query: str) -> None:
    snap = _lake(tmp_path)
    with pytest.raises(arrow_sql.NeedsSpark):
        run_arrow(snap, parse_query(query), "app.people", query, limit=None)


def test_arrow_engine_names_unknown_columns_itself(tmp_path: Path) -> None:
    snap = _lake(tmp_path)
    with pytest.raises(PredicateError, match=r"unknown column 'nmae' in the query; did you mean 'name'\?"):
        run_arrow(snap, parse_query("SELECT nmae FROM app.people"), "app.people", "q", limit=None)


def test_arrow_and_spark_agree(tmp_path: Path, capsys: pytest.CaptureFixture[str], spark: Any) -> None:
    """``--engine auto`` gives Spark's rows: on Arrow when it can, on Spark where NaN would compare otherwise."""
    _lake(tmp_path)
    queries = {
        "SELECT id, name FROM app.people WHERE score > 1.5 OR name IS NULL ORDER BY id": "spark",  # NaN > 1.5
        "SELECT id, name FROM app.people WHERE id > 1 AND name LIKE '%o%' ORDER BY id": "arrow",
        "SELECT id, score FROM app.people ORDER BY score DESC NULLS FIRST, id LIMIT 4": "arrow",
        "SELECT id, coalesce(name, 'none') AS n, id % 2 AS odd FROM app.people ORDER BY n": "arrow",
    }
    for query, engine in queries.items():
        docs = []
        for asked in ("auto", "spark"):
            assert main(["sql", query, "--uri", str(tmp_path), "--engine", asked, "--json"]) == 0
            docs.append(json.loads(capsys.readouterr().out))
        auto, on_spark = docs
        assert auto["rows"] == on_spark["rows"], query
        assert (auto["engine"], on_spark["engine"]) == (engine, "spark"), query


def test_arrow_and_spark_agree_where_spark_ansi_mode_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spark: Any
) -> None:
    """Spark (ANSI) fails a division by zero and a CAST of a string that is no number, where txlake's
    expressions give NULL: ``--engine auto`` gives Spark's answer (the error, exit 8), ``--engine arrow``
    refuses (exit 8) rather than return NULLs, and a query whose rows never meet the case stays on Arrow."""
    _lake(tmp_path)
    for query in (
        "SELECT id / (id - 3) AS q FROM app.people",
        "SELECT CAST(name AS int) AS n FROM app.people",
        "SELECT id FROM app.people WHERE id % (id - 2) = 0",
        "SELECT id FROM app.people ORDER BY id div (id - 5)",
    ):
        for asked in ("auto", "spark", "arrow"):
            assert main(["sql", query, "--uri", str(tmp_path), "--engine", asked]) == 8, (query, asked)
            err = capsys.readouterr().err
            assert err.startswith("error: ") and "Traceback" not in err, err
    queries = {
        "SELECT id, id / (id - 3) AS q FROM app.people WHERE id <> 3 ORDER BY id": "arrow",
        "SELECT id, CAST(name AS int) AS n FROM app.people WHERE name IS NULL": "arrow",
        "SELECT id, TRY_CAST(name AS int) AS n FROM app.people ORDER BY id": "arrow",
        "SELECT id, CASE WHEN id <> 3 THEN 10 / (id - 3) END AS q FROM app.people ORDER BY id": "spark",
    }
    for query, engine in queries.items():
        docs = []
        for asked in ("auto", "spark"):
            assert main(["sql", query, "--uri", str(tmp_path), "--engine", asked, "--json"]) == 0, query
            docs.append(json.loads(capsys.readouterr().out))
        auto, on_spark = docs
        assert auto["rows"] == on_spark["rows"], query
        assert (auto["engine"], on_spark["engine"]) == (engine, "spark"), query
