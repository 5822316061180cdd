"""``txlake sql``: a Spark SQL query over one consistent lakehouse snapshot."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import sqlglot
from sqlglot import exp

import txlake
from txlake.cli.options import Location
from txlake.cli.output import Column, Output, cell, is_numeric, new_table
from txlake.errors import PredicateError

if TYPE_CHECKING:
    from txlake.spark.session import SparkSession


@dataclass(frozen=True)
class SqlResult:
    """The rows a query returned at one lakehouse version (at most ``limit`` of ``matched``)."""

    query: str
    lakehouse_version: int
    tables: tuple[str, ...]
    matched: int
    limit: int | None
    truncated: bool
    rows: pa.Table


def view_name(table: str) -> str:
    """The temporary view a lakehouse table is registered as (``bank.accounts`` -> ``txlake__bank__accounts``)."""
    return "txlake__" + table.replace(".", "__")


def bind_tables(query: str, tables: list[str]) -> tuple[str, dict[str, str]]:
    """Rewrite ``namespace.table`` references of ``query`` to view names; only a query (SELECT) is allowed.

    Returns the rewritten SQL and {lakehouse table: view} for the tables it references.
    """
    try:
        tree = sqlglot.parse_one(query, read="spark")
    except sqlglot.errors.ParseError as exc:
        raise PredicateError(f"cannot parse the query: {exc}", expression=query) from exc
    if not isinstance(tree, exp.Query):
        raise PredicateError("only queries (SELECT ...) can run over a snapshot", expression=query)
    known = {t.lower(): t for t in tables}
    used: dict[str, str] = {}
    for node in tree.find_all(exp.Table):
        parts = [p for p in (node.catalog, node.db, node.name) if p]
        name = known.get(".".join(parts).lower())
        if name is None:
            continue
        used[name] = view_name(name)
        alias = node.args.get("alias")
        node.replace(exp.Table(this=exp.to_identifier(used[name]), alias=alias or exp.TableAlias(this=node.name)))
    if not used:
        raise PredicateError(f"the query names none of the lakehouse tables ({', '.join(tables)})", expression=query)
    return tree.sql(dialect="spark"), used


def run_sql(
    lake: txlake.Lakehouse, spark: SparkSession, query: str, *, version: int | None, limit: int | None
) -> SqlResult:
    """Register the referenced tables of one snapshot as views and run ``query`` on Spark."""
    snap = lake.snapshot(version)
    sql, used = bind_tables(query, snap.tables())
    for name, view in used.items():
        snap.read(name).createOrReplaceTempView(view)
    df = spark.sql(sql)
    fetched = (df.limit(limit + 1) if limit else df).toArrow()
    truncated = bool(limit) and fetched.num_rows > (limit or 0)
    rows = fetched.slice(0, limit) if limit else fetched
    matched = rows.num_rows if not truncated else df.count()
    return SqlResult(query, snap.version, tuple(sorted(used)), matched, limit, truncated, rows)


def render_sql(out: Output, result: SqlResult) -> None:
    table = new_table([Column(f.name, numeric=is_numeric(f.type), wrap=True) for f in result.rows.schema])
    names = result.rows.column_names
    for row in result.rows.to_pylist():
        table.add_row(*(cell(row[n]) for n in names))
    caption = f"{result.rows.num_rows} of {result.matched} row(s)"
    if result.truncated:
        caption += " (--limit N or --limit 0 for more)"
    out.table(f"lakehouse version {result.lakehouse_version}: {', '.join(result.tables)}", table, caption)


def cmd_sql(args: argparse.Namespace, location: Location, out: Output) -> int:
    from txlake.spark.session import local_session  # pyspark is optional: only this command needs it

    spark, created = local_session("txlake-sql")
    try:
        lake = txlake.connect(location.uri, dict(location.storage_options), create=False, spark=spark)
        result = run_sql(lake, spark, args.query, version=args.at_version, limit=args.limit or None)
    finally:
        if created:
            spark.stop()
    if out.json_mode:
        out.json(result)
    else:
        render_sql(out, result)
    return 0
