"""``txlake sql``: a query over one consistent lakehouse snapshot, on Arrow when it is simple, else on Spark."""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError

import txlake
from txlake.cli import arrow_sql
from txlake.cli.jvm import InterruptWatch, Phases, start_spark, stop_spark
from txlake.cli.options import Location
from txlake.cli.output import Column, Output, cell, is_numeric, new_table
from txlake.cli.reports import snapshot_at
from txlake.cli.suggest import did_you_mean, did_you_mean_or_list
from txlake.errors import InvalidArgumentError, PredicateError, TableNotFoundError, TxlakeError
from txlake.expr.binder import SqlNode
from txlake.expr.syntax import caret_lines, describe_syntax_error, empty_item

if TYPE_CHECKING:
    from txlake.spark.session import SparkSession

Engine = Literal["auto", "arrow", "spark"]
ENGINES: tuple[Engine, ...] = ("auto", "arrow", "spark")


@dataclass(frozen=True)
class SqlResult:
    """The rows a query returned at one lakehouse version (at most ``limit`` of ``matched``)."""

    query: str
    lakehouse_version: int
    tables: tuple[str, ...]
    engine: str
    matched: int
    limit: int | None
    truncated: bool
    rows: pa.Table


def view_name(table: str) -> str:
    """The temporary view a lakehouse table is registered as (``bank.accounts`` -> ``txlake__bank__accounts``)."""
    return "txlake__" + table.replace(".", "__")


_QUERY_STARTS = frozenset({"SELECT", "WITH", "FROM", "VALUES", "TABLE", "L_PAREN"})
"""Token types a Spark SQL query may start with (``FROM t SELECT ...`` is Spark SQL too)."""
_KEYWORDS = ("SELECT", "WITH", "FROM", "VALUES")


def _syntax_error(query: str, reason: str, position: int) -> PredicateError:
    return PredicateError(f"cannot parse the query: {reason}\n{caret_lines(query, position)}", expression=query)


def _check_statement(query: str) -> None:
    """One query, starting like one: "the query is empty", a second statement or ``SELEC`` are named at once,
    with the caret where they are (sqlglot would read ``SELEC *`` as a column times something)."""
    empty = InvalidArgumentError('the query is empty: give one, e.g. "SELECT * FROM namespace.table"', argument="query")
    if not query.strip():
        raise empty
    try:
        tokens = Dialect.get_or_raise("spark").tokenize(query)
    except SqlglotError:
        return  # the parser says what is wrong
    kinds = [token.token_type.name for token in tokens]
    while kinds and kinds[-1] == "SEMICOLON":
        kinds.pop()
    if not kinds:  # only semicolons
        raise empty
    if "SEMICOLON" in kinds:
        semicolon = tokens[kinds.index("SEMICOLON")]
        raise _syntax_error(query, "txlake sql runs one query; a second statement follows this ';'", semicolon.start)
    word = tokens[0].text
    if kinds[0] == "VAR":  # not a keyword: a misspelt one?
        close = difflib.get_close_matches(word.upper(), _KEYWORDS, n=1, cutoff=0.6)
        reason = f"a query starts with SELECT or WITH, found {word!r}"
        raise _syntax_error(query, reason + (f"; did you mean {close[0]}?" if close else ""), tokens[0].start)
    if kinds[0] not in _QUERY_STARTS:
        reason = f"txlake sql runs queries (SELECT or WITH ...), not {word.upper()} statements"
        raise _syntax_error(query, reason, tokens[0].start)
    comma = empty_item(query)
    if comma is not None:
        what = "an empty argument" if comma[1] else "an empty item in a list"
        raise _syntax_error(query, f"{what} at this comma", comma[0])


def parse_query(query: str) -> exp.Query:
    """The sqlglot tree of a query (``SELECT``, ``WITH``, set operations); :class:`PredicateError` otherwise
    (:class:`InvalidArgumentError` for an empty one)."""
    _check_statement(query)
    try:
        tree = sqlglot.parse_one(query, read="spark")
    except SqlglotError as exc:
        problem = describe_syntax_error(query, exc)
        raise _syntax_error(query, problem.reason, problem.position) from exc
    if not isinstance(tree, exp.Query):
        raise PredicateError("only queries (SELECT ...) can run over a snapshot", expression=query)
    if any(not select.expressions for select in tree.find_all(exp.Select)):
        bare = re.search(r"\bselect\s+(?=from\b)", query, re.IGNORECASE)
        position = bare.end() if bare else len(query.rstrip())
        raise _syntax_error(query, "SELECT names no columns (SELECT * or SELECT a, b ...)", position)
    return tree


def _table_names(tree: SqlNode) -> list[tuple[exp.Table, str]]:
    """The named relations of the query (not table functions such as ``range(10)``) with their dotted names."""
    return [
        (node, ".".join(p for p in (node.catalog, node.db, node.name) if p))
        for node in tree.find_all(exp.Table)
        if isinstance(node.this, exp.Identifier)
    ]


def referenced_tables(tree: SqlNode, tables: Sequence[str], *, version: int | None = None) -> list[str]:
    """The lakehouse tables ``tree`` names; a name that is neither one nor a CTE is :class:`TableNotFoundError`."""
    known = {t.lower(): t for t in tables}
    ctes = {cte.alias.lower() for cte in tree.find_all(exp.CTE)}
    used: list[str] = []
    for _, name in _table_names(tree):
        if "." not in name and name.lower() in ctes:
            continue
        found = known.get(name.lower())
        if found is None:
            at = f" at lakehouse version {version}" if version is not None else ""
            raise TableNotFoundError(f"no table {name!r}{at}{did_you_mean_or_list(name, tables, 'tables')}", table=name)
        if found not in used:
            used.append(found)
    return used


def bind_tables(query: str, tables: list[str], *, version: int | None = None) -> tuple[str, dict[str, str]]:
    """Rewrite ``namespace.table`` references of ``query`` to view names; only a query (SELECT) is allowed.

    Returns the rewritten SQL and {lakehouse table: view} for the tables it references. A table that does not
    exist is :class:`TableNotFoundError` (with the closest names); a query naming no table a
    :class:`PredicateError`.
    """
    tree = parse_query(query)
    used = {name: view_name(name) for name in referenced_tables(tree, tables, version=version)}
    if not used:
        raise PredicateError(f"the query names none of the lakehouse tables ({', '.join(tables)})", expression=query)
    known = {t.lower(): t for t in used}
    for node, name in _table_names(tree):
        table = known.get(name.lower())
        if table is None:
            continue  # a CTE
        alias = node.args.get("alias")
        node.replace(exp.Table(this=exp.to_identifier(used[table]), alias=alias or exp.TableAlias(this=node.name)))
    return tree.sql(dialect="spark"), used


# ------------------------------------------------------------------------------------------ Spark errors

# SQLSTATE classes of mistakes in the query or its data: 42 syntax or access rule (unknown column, table,
# function; type mismatch), 22 data exception (bad cast, division by zero), 21 cardinality, 0A unsupported.
_USER_SQLSTATES = ("42", "22", "21", "0A")
_ERROR_CLASS = re.compile(r"^\[[A-Z0-9_.]+\]\s*")
_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+.*$")


def _spark_message(exc: BaseException, views: Mapping[str, str]) -> str:
    lines = str(exc).strip().splitlines()
    text = _SQLSTATE.sub("", _ERROR_CLASS.sub("", lines[0] if lines else type(exc).__name__)).rstrip(" ;.")
    for table, view in views.items():
        text = re.sub(re.escape(view), table, text, flags=re.IGNORECASE)
    return text


def _unquote(name: str) -> str:
    return ".".join(part.strip("`") for part in re.findall(r"`[^`]*`|[^.]+", name))


def spark_query_error(
    exc: BaseException, query: str, views: Mapping[str, str], columns: Sequence[str], *, version: int
) -> TxlakeError | None:
    """The txlake error for Spark's error about the query (unknown column, syntax, bad cast), else ``None``."""
    try:
        from txlake.spark.session import pyspark_exception  # pyspark is optional: only the Spark path has it

        spark_error = pyspark_exception()
    except ImportError:  # pragma: no cover - the Spark path imports pyspark first
        return None
    if not isinstance(exc, spark_error):
        return None
    state = exc.getSqlState() or ""
    condition = exc.getCondition() or ""
    if not state.startswith(_USER_SQLSTATES) and not condition.startswith(("PARSE_", "UNRESOLVED_")):
        return None
    params = exc.getMessageParameters() or {}
    if condition.startswith("UNRESOLVED_COLUMN") and "objectName" in params:
        name = _unquote(params["objectName"])
        hint = did_you_mean(name.rsplit(".", 1)[-1], columns) or f" (columns: {', '.join(columns)})"
        return PredicateError(f"unknown column {name!r} in the query{hint}", expression=query)
    if condition.startswith("TABLE_OR_VIEW_NOT_FOUND") and "relationName" in params:
        name = _unquote(params["relationName"])
        return TableNotFoundError(
            f"no table {name!r} at lakehouse version {version}{did_you_mean(name, views)}", table=name
        )
    if condition.startswith("UNRESOLVED_ROUTINE") and "routineName" in params:
        return PredicateError(f"unknown function {_unquote(params['routineName'])} in the query", expression=query)
    if condition == "PARSE_SYNTAX_ERROR" and "error" in params:
        return PredicateError(f"cannot parse the query: syntax error at or near {params['error']}", expression=query)
    return PredicateError(_spark_message(exc, views), expression=query)


# ------------------------------------------------------------------------------------------------ engines


def run_sql(
    lake: txlake.Lakehouse, spark: SparkSession, query: str, *, version: int | None, limit: int | None
) -> SqlResult:
    """Register the referenced tables of one snapshot as views and run ``query`` on Spark."""
    snap = lake.snapshot(version)
    sql, used = bind_tables(query, snap.tables(), version=snap.version)
    for name, view in used.items():
        snap.read(name).createOrReplaceTempView(view)
    try:
        df = spark.sql(sql)
        fetched = (df.limit(limit + 1) if limit else df).toArrow()
        truncated = bool(limit) and fetched.num_rows > (limit or 0)
        rows = fetched.slice(0, limit) if limit else fetched
        matched = rows.num_rows if not truncated else df.count()
    except Exception as exc:
        columns = list(dict.fromkeys(c for name in used for c in snap.schema(name).names))
        error = spark_query_error(exc, query, used, columns, version=snap.version)
        if error is None:
            raise
        raise error from exc
    return SqlResult(query, snap.version, tuple(sorted(used)), "spark", matched, limit, truncated, rows)


def run_arrow(
    snap: txlake.LakehouseSnapshot, tree: exp.Query, table: str, query: str, *, limit: int | None
) -> SqlResult:
    """Run a simple single-table query on Arrow; :class:`arrow_sql.NeedsSpark` when it is not simple."""
    planned = arrow_sql.plan(tree, table, snap.schema(table), query)
    got = arrow_sql.run(snap, planned, limit=limit)
    truncated = got.rows.num_rows < got.matched
    return SqlResult(query, snap.version, (table,), "arrow", got.matched, limit, truncated, got.rows)


def render_sql(out: Output, result: SqlResult) -> None:
    table = new_table([Column(f.name, numeric=is_numeric(f.type), wrap=True) for f in result.rows.schema])
    for values in zip(*(c.to_pylist() for c in result.rows.columns), strict=True):
        table.add_row(*(cell(v) for v in values))
    caption = f"{result.rows.num_rows} of {result.matched} row(s)"
    if result.truncated:
        caption += " (--limit N or --limit 0 for more)"
    out.table(
        f"lakehouse version {result.lakehouse_version}: {', '.join(result.tables)} ({result.engine})", table, caption
    )


def _spark(args: argparse.Namespace, location: Location, version: int, phases: Phases, debug: bool) -> SqlResult:
    spark, created = start_spark("txlake-sql", debug=debug)
    phases.done("spark start")
    watch = InterruptWatch(spark)
    try:
        with watch:
            lake = txlake.connect(location.uri, dict(location.storage_options), create=False, spark=spark)
            phases.done("connect")
            result = run_sql(lake, spark, args.query, version=version, limit=args.limit or None)
            phases.done("query")
    except Exception:
        if watch.interrupted:  # py4j turned the Ctrl-C into its own error: report the interruption
            raise KeyboardInterrupt from None
        raise
    finally:
        if created and not watch.interrupted:  # after a Ctrl-C the JVM goes when this process exits
            stop_spark(spark)
            phases.done("spark stop")
    return result


def cmd_sql(args: argparse.Namespace, location: Location, lake: txlake.Lakehouse, out: Output) -> int:
    """Plan on the snapshot first (names, syntax: no JVM for a typo), then run on Arrow or Spark."""
    debug = bool(getattr(args, "debug", False))
    engine: Engine = args.engine
    phases = Phases()
    snap = snapshot_at(lake, args.at_version)
    tree = parse_query(args.query)
    used = referenced_tables(tree, snap.tables(), version=snap.version)
    if not used:
        raise PredicateError(
            f"the query names none of the lakehouse tables ({', '.join(snap.tables())})", expression=args.query
        )
    phases.done("plan")
    result: SqlResult | None = None
    if engine != "spark":
        try:
            if len(used) != 1:
                raise arrow_sql.NeedsSpark("it reads more than one table")
            result = run_arrow(snap, tree, used[0], args.query, limit=args.limit or None)
            phases.done("arrow query")
        except arrow_sql.NeedsSpark as why:
            if engine == "arrow":
                raise PredicateError(
                    f"--engine arrow cannot run this query: {why}; use --engine spark (or auto)",
                    expression=args.query,
                ) from None
    if result is None:
        result = _spark(args, location, snap.version, phases, debug)
    if debug:
        out.stderr.print(f"debug: engine {result.engine}; {phases}", markup=False, soft_wrap=True)
    if out.json_mode:
        out.json(result)
    else:
        render_sql(out, result)
    return 0
