"""The lakehouse commands of ``txlake``: init, tables, describe, history, log, show, doctor."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import txlake
from txlake.cli import render, sql
from txlake.cli.doctor import run_doctor
from txlake.cli.exit_codes import ExitCode, LakehouseExistsError, LakehouseNotFoundError, UsageError
from txlake.cli.jvm import InterruptWatch, start_spark, stop_spark
from txlake.cli.options import (
    Location,
    add_location_arguments,
    create_lakehouse,
    open_lakehouse,
    resolve_location,
)
from txlake.cli.output import Output, timestamp
from txlake.cli.reports import (
    CloneResult,
    InitResult,
    OptimizeResult,
    RecoverResult,
    RestoreResult,
    TagList,
    TagResult,
    TagView,
    VacuumResult,
    describe_table,
    list_tables,
    parse_columns,
    read_log,
    read_rows,
    snapshot_at,
    table_history,
)
from txlake.cli.suggest import did_you_mean, did_you_mean_or_list
from txlake.errors import TableNotFoundError

DEFAULT_LIMIT = 20
T = TypeVar("T")


def count(text: str) -> int:
    """A non-negative integer argument (argparse ``type``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {value}")
    return value


def timestamp_argument(text: str) -> dt.datetime:
    """An ISO 8601 time with a time zone (``2026-01-31T12:00:00Z``, ``2026-01-31 13:00+01:00``)."""
    try:
        value = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an ISO 8601 time such as 2026-01-31T12:00:00Z, got {text!r}"
        ) from None
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} has no time zone: add Z for UTC or an offset such as +01:00 (e.g. {value.isoformat()}Z)"
        )
    return value


def common_options() -> argparse.ArgumentParser:
    """Options every lakehouse command takes: location, storage options, ``--json``, ``--debug``."""
    parent = argparse.ArgumentParser(add_help=False)
    add_location_arguments(parent)
    parent.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    parent.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show stack traces on errors")
    return parent


def _emit(out: Output, result: T, human: Callable[[Output, T], None]) -> None:
    if out.json_mode:
        out.json(result)
    else:
        human(out, result)


def _location(args: argparse.Namespace, out: Output, uri: str | None = None) -> Location:
    location = resolve_location(args, os.environ, uri=uri)
    if getattr(args, "debug", False):
        text = f"debug: lakehouse {location.uri}, storage options {location.masked_options()}"
        out.stderr.print(text, markup=False, soft_wrap=True)
    return location


def _lake(args: argparse.Namespace) -> tuple[Output, txlake.Lakehouse]:
    out = Output(args.json)
    lake = open_lakehouse(_location(args, out))
    resolve_version(lake, args)
    return out, lake


def resolve_version(lake: txlake.Lakehouse, args: argparse.Namespace) -> None:
    """``--timestamp`` and ``--tag`` become the lakehouse version they name (``args.at_version``)."""
    if getattr(args, "at_timestamp", None) is not None:
        args.at_version = lake.version_at(args.at_timestamp)
    elif getattr(args, "at_tag", None) is not None:
        args.at_version = lake.snapshot(tag=args.at_tag).version


@contextmanager
def suggesting_tables(lake: txlake.Lakehouse, version: int | None = None) -> Iterator[None]:
    """A :class:`TableNotFoundError` for a misspelt name gets "did you mean ..." with the closest table names."""
    try:
        yield
    except TableNotFoundError as exc:
        if exc.table is None or "did you mean" in str(exc):
            raise
        names = snapshot_at(lake, version).tables() if version is not None else lake.tables()
        suggestion = did_you_mean_or_list(exc.table, names, "tables")
        raise TableNotFoundError(str(exc).splitlines()[0] + suggestion, table=exc.table) from exc


# ------------------------------------------------------------------------------------------- commands


def cmd_init(args: argparse.Namespace) -> int:
    out = Output(args.json)
    location = _location(args, out, args.target)
    if location.uri.startswith("memory://"):
        raise UsageError(
            f"cannot init {location.uri}: a memory:// lakehouse lives only as long as one process",
            hint="init a directory or an s3:// URI (memory:// suits `txlake demo` and Python sessions)",
        )
    try:
        lake = open_lakehouse(location)
    except LakehouseNotFoundError:
        lake = create_lakehouse(location)
        created = True
    else:
        if not args.exist_ok:
            raise LakehouseExistsError(
                f"a lakehouse already exists at {lake.uri} (version {lake.version()})",
                hint="use --exist-ok to accept an existing lakehouse",
            )
        created = False
    result = InitResult(lake.uri, lake.version(), created)
    _emit(out, result, render.render_init)
    return ExitCode.OK


def cmd_tables(args: argparse.Namespace) -> int:
    out, lake = _lake(args)
    result = list_tables(lake, namespace=args.namespace, version=args.at_version)
    if args.namespace is not None and not result.tables:
        namespaces = sorted(snapshot_at(lake, result.version).state.namespaces)
        if args.namespace.lower() not in {n.lower() for n in namespaces}:
            known = did_you_mean(args.namespace, namespaces) or f" (namespaces: {', '.join(namespaces) or 'none'})"
            out.note(f"note: no namespace {args.namespace!r} at lakehouse version {result.version}{known}")
    _emit(out, result, render.render_tables)
    for summary in result.tables:
        if summary.problem is not None:
            advice = "; run `txlake doctor`" if summary.damaged else ""
            sys.stderr.write(f"{'error' if summary.damaged else 'note'}: {summary.problem}{advice}\n")
    return ExitCode.CORRUPT if any(t.damaged for t in result.tables) else ExitCode.OK


def cmd_describe(args: argparse.Namespace) -> int:
    out, lake = _lake(args)
    with suggesting_tables(lake, args.at_version):
        result = describe_table(lake, args.table, version=args.at_version)
    _emit(out, result, render.render_describe)
    return ExitCode.OK


def cmd_history(args: argparse.Namespace) -> int:
    out, lake = _lake(args)
    limit = args.limit or None
    if args.table is not None:
        with suggesting_tables(lake):
            history = table_history(lake, args.table, limit=limit)
        _emit(out, history, render.render_table_history)
        return ExitCode.OK
    view = read_log(lake, start=None, limit=limit)
    if out.json_mode:
        out.json(dataclasses.replace(view, entries=tuple(reversed(view.entries))))
    else:
        render.render_lake_history(out, view)
    return ExitCode.OK


def cmd_log(args: argparse.Namespace) -> int:
    out, lake = _lake(args)
    view = read_log(lake, start=args.start, limit=args.limit or None)
    _emit(out, view, render.render_log)
    return ExitCode.OK


def cmd_show(args: argparse.Namespace) -> int:
    out, lake = _lake(args)
    with suggesting_tables(lake, args.at_version):
        result = read_rows(
            lake,
            args.table,
            version=args.at_version,
            where=args.where,
            columns=parse_columns(args.columns),
            order_by=args.order_by,
            limit=args.limit or None,
        )
    _emit(out, result, render.render_rows)
    return ExitCode.OK


def cmd_sql(args: argparse.Namespace) -> int:
    out = Output(args.json)
    location = _location(args, out)
    lake = open_lakehouse(location)  # a clear error before Spark starts when there is no lakehouse
    resolve_version(lake, args)
    return sql.cmd_sql(args, location, lake, out)


def cmd_tag(args: argparse.Namespace) -> int:
    out, lake = _lake(args)
    if args.drop:
        tag = lake.drop_tag(args.name)
        result = TagResult("dropped", tag.name, tag.version, timestamp(tag.created_ms), tag.description)
    else:
        tag = lake.tag(args.name, args.at_version, description=args.description)
        result = TagResult("created", tag.name, tag.version, timestamp(tag.created_ms), tag.description)
    _emit(out, result, render.render_tag)
    return ExitCode.OK


def cmd_tags(args: argparse.Namespace) -> int:
    out, lake = _lake(args)
    tags = tuple(TagView(t.name, t.version, timestamp(t.created_ms), t.description) for t in lake.tags())
    _emit(out, TagList(lake.uri, tags), render.render_tags)
    return ExitCode.OK


def cmd_optimize(args: argparse.Namespace) -> int:
    out, lake = _lake(args)
    before = lake.version()
    zorder = parse_columns(args.zorder_by) if args.zorder_by else None
    with suggesting_tables(lake):
        lake.snapshot().entry(args.table)  # a misspelt name fails before any Spark starts
    with suggesting_tables(lake), out.progress() as progress:
        task = progress.add_task(f"optimizing {args.table}", total=None)
        if args.engine == "spark":
            metrics = _optimize_on_spark(args, zorder)
        else:
            metrics = lake.optimize(
                args.table, args.where, target_file_size=args.target_file_size, zorder_by=zorder, engine="arrow"
            )
        progress.update(task, completed=1, total=1)
    result = OptimizeResult(
        args.table, before, lake.version(), metrics.files_removed, metrics.files_added, metrics.bytes_removed
    )
    _emit(out, result, render.render_optimize)
    return ExitCode.OK


def _optimize_on_spark(args: argparse.Namespace, zorder: list[str] | None) -> txlake.OptimizeMetrics:
    """``optimize --engine spark``: a local Spark session for the length of the command."""
    debug = bool(getattr(args, "debug", False))
    spark, created = start_spark("txlake-optimize", debug=debug)
    watch = InterruptWatch(spark)
    location = _location(args, Output(args.json))
    try:
        with watch:
            lake = txlake.connect(location.uri, dict(location.storage_options), create=False, spark=spark)
            return lake.optimize(
                args.table, args.where, target_file_size=args.target_file_size, zorder_by=zorder, engine="spark"
            )
    except Exception:
        if watch.interrupted:  # py4j turned the Ctrl-C into its own error: report the interruption
            raise KeyboardInterrupt from None
        raise
    finally:
        if created and not watch.interrupted:
            stop_spark(spark)


def duration_argument(text: str) -> dt.timedelta:
    """A retention such as ``7d``, ``168h``, ``30m``, ``90s``, ``1w`` or ``0`` (argparse ``type``)."""
    value = text.strip().lower()
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    number, unit = (value[:-1], value[-1]) if value and value[-1] in units else (value, "")
    problem = f"expected a duration with a unit such as 7d, 168h, 30m (or 0), got {text!r}"
    try:
        amount = float(number)
    except ValueError:
        raise argparse.ArgumentTypeError(problem) from None
    if amount < 0 or amount != amount or (not unit and amount != 0):
        raise argparse.ArgumentTypeError(problem)
    try:
        return dt.timedelta(seconds=amount * units.get(unit, 1))
    except OverflowError:
        raise argparse.ArgumentTypeError(f"{text!r} is too long a duration") from None


def _duration_text(delta: dt.timedelta) -> str:
    seconds = delta.total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def cmd_vacuum(args: argparse.Namespace) -> int:
    out, lake = _lake(args)
    with out.progress() as progress:
        task = progress.add_task("vacuum: deleting", total=None)

        def advance(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        report = lake.vacuum(
            args.retention,
            dry_run=not args.delete,
            force=args.force,
            progress=advance,
            log_retention=args.log_retention,
        )
    doc = report.to_json()
    result = VacuumResult(
        lake.uri,
        report.dry_run,
        _duration_text(report.retention),
        report.horizon,
        report.latest,
        report.files_deleted,
        report.bytes_deleted,
        doc["deleted_by_reason"],
        doc["files_kept"],
        report.kept_bytes,
        doc["kept_by_reason"],
        report.tables_removed,
        report.tags,
        report.log_start,
        report.log_entries_deleted,
        tuple(doc["deleted"]),
    )
    _emit(out, result, render.render_vacuum)
    return ExitCode.OK


def cmd_recover(args: argparse.Namespace) -> int:
    out, lake = _lake(args)
    with out.progress() as progress:
        task = progress.add_task("recover: transactions", total=None)

        def advance(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        report = lake.recover(guard=args.guard, dry_run=not args.delete, progress=advance)
    by_action: dict[str, int] = {}
    for t in report.transactions:
        by_action[t.action] = by_action.get(t.action, 0) + 1
    result = RecoverResult(
        lake.uri,
        report.dry_run,
        _duration_text(report.guard),
        tuple(dataclasses.asdict(t) for t in report.transactions),
        by_action,
        len(report.deleted_files),
    )
    _emit(out, result, render.render_recover)
    return ExitCode.OK


def cmd_restore(args: argparse.Namespace) -> int:
    out, lake = _lake(args)
    before = lake.version()
    with suggesting_tables(lake, args.at_version):
        result = lake.restore(args.at_version, tables=args.tables)
    restored = RestoreResult(args.at_version, before, result.version, not result.read_only, tuple(args.tables or ()))
    _emit(out, restored, render.render_restore)
    return ExitCode.OK


def cmd_clone(args: argparse.Namespace) -> int:
    out, lake = _lake(args)
    at = lake.snapshot(args.at_version).version
    with suggesting_tables(lake, at):
        result = lake.clone(args.source, args.target, version=at)
    snap = lake.snapshot(version=result.version)
    names = [args.target] if "." in args.source else snap.tables(args.target)
    files = sum(len(snap.delta_snapshot(name).files) for name in names)
    _emit(out, CloneResult(args.source, args.target, at, result.version, tuple(names), files), render.render_clone)
    return ExitCode.OK


def cmd_doctor(args: argparse.Namespace) -> int:
    out, lake = _lake(args)
    with out.progress() as progress:
        report = run_doctor(lake, quick=args.quick, repair_first=args.repair, progress=progress)
    _emit(out, report, render.render_doctor)
    return ExitCode.OK if report.healthy else ExitCode.PROBLEMS


# ------------------------------------------------------------------------------------------- parsers


def _add(
    sub: argparse._SubParsersAction[Any],
    name: str,
    run: Callable[[argparse.Namespace], int],
    help: str,
    description: str,
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=help, description=description, parents=[common_options()]
    )
    parser.set_defaults(run=run)
    return parser


def _version_option(parser: argparse.ArgumentParser, what: str) -> None:
    """``--version G`` | ``--timestamp TIME`` | ``--tag NAME``: which lakehouse version (default the latest)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--version", dest="at_version", type=count, metavar="G", help=f"{what} at lakehouse version G (default latest)"
    )
    group.add_argument(
        "--timestamp",
        dest="at_timestamp",
        type=timestamp_argument,
        metavar="TIME",
        help=f"{what} as of TIME, ISO 8601 with a time zone (e.g. 2026-01-31T12:00:00Z): the newest version "
        "decided then",
    )
    group.add_argument("--tag", dest="at_tag", metavar="NAME", help=f"{what} at the version tag NAME names")


def _limit_option(parser: argparse.ArgumentParser, default: int, what: str) -> None:
    parser.add_argument(
        "--limit", type=count, default=default, metavar="N", help=f"at most N {what} (default {default}; 0: all)"
    )


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Register the lakehouse commands on the ``txlake`` subparsers."""
    p = _add(
        sub,
        "init",
        cmd_init,
        "create an empty lakehouse",
        "Create an empty lakehouse (global version 0) at URI; an error if one exists unless --exist-ok.",
    )
    p.add_argument("target", nargs="?", metavar="URI", help="where to create it (default: --uri or $TXLAKE_URI)")
    p.add_argument("--exist-ok", action="store_true", help="succeed if a lakehouse already exists there")

    p = _add(
        sub,
        "tables",
        cmd_tables,
        "list tables with Delta version, files, rows, location",
        "List the tables of the lakehouse: Delta version, data files, rows (from file stats), location.",
    )
    p.add_argument("--namespace", help="only tables of this namespace")
    _version_option(p, "tables")

    p = _add(
        sub,
        "describe",
        cmd_describe,
        "schema, partitioning, properties, protocol and versions of a table",
        "Describe a table: columns, partition columns, properties, id, location, Delta protocol, versions, files.",
    )
    p.add_argument("table", help="namespace.table")
    _version_option(p, "the table")

    p = _add(
        sub,
        "history",
        cmd_history,
        "Delta history of a table, or the lakehouse-wide history",
        "With TABLE: its Delta history (newest first), with the txlake global version of each commit. "
        "Without: the lakehouse-wide history of global versions.",
    )
    p.add_argument("table", nargs="?", help="namespace.table (omit for the lakehouse-wide history)")
    _limit_option(p, DEFAULT_LIMIT, "entries")

    p = _add(
        sub,
        "log",
        cmd_log,
        "global log records with their outcomes",
        "Global records with their outcomes, oldest first; undecided claims are marked.",
    )
    _limit_option(p, DEFAULT_LIMIT, "records (the newest, unless --from)")
    p.add_argument("--from", dest="start", type=count, metavar="G", help="start at global version G")

    p = _add(
        sub,
        "show",
        cmd_show,
        "rows of a table",
        "Rows of a table at the latest or given lakehouse version.",
    )
    p.add_argument("table", help="namespace.table")
    _version_option(p, "rows")
    p.add_argument("--where", metavar="SQL", help="Spark SQL condition, e.g. \"id = 1 AND owner LIKE 'a%%'\"")
    p.add_argument(
        "--order-by",
        metavar="SQL",
        help='sort keys as in ORDER BY, e.g. "balance DESC, id" (default: the order of the data files)',
    )
    _limit_option(p, DEFAULT_LIMIT, "rows")
    p.add_argument("--columns", metavar="A,B", help="comma-separated columns to show (default all)")

    p = _add(
        sub,
        "sql",
        cmd_sql,
        "a Spark SQL query over one consistent snapshot",
        "Run a Spark SQL query (SELECT only) over one lakehouse version; tables are named namespace.table as "
        "in the catalog. A query of one table with WHERE, ORDER BY and LIMIT runs on Arrow in a second; anything "
        "else (joins, aggregates, ...) on a local Spark session.",
    )
    p.add_argument("query", help='e.g. "SELECT owner, balance FROM bank.north WHERE balance > 1000"')
    _version_option(p, "the query")
    _limit_option(p, DEFAULT_LIMIT, "rows")
    p.add_argument(
        "--engine",
        choices=sql.ENGINES,
        default="auto",
        help="arrow: no Spark (SELECT columns or expressions FROM one table [WHERE] [ORDER BY] [LIMIT]); "
        "spark: a local Spark session; auto (default): arrow when the query allows, else spark",
    )

    p = _add(
        sub,
        "tag",
        cmd_tag,
        "name a lakehouse version (or drop a name)",
        "Name a lakehouse version: later, --tag NAME reads it (show, sql, tables, describe) and vacuum keeps what "
        "it needs. Tags never move; --drop deletes one (not the version).",
    )
    p.add_argument("name", help="tag name: letters, digits, '_', '.', '-' (case does not matter)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--version", dest="at_version", type=count, metavar="G", help="the version (default latest)")
    which.add_argument(
        "--timestamp", dest="at_timestamp", type=timestamp_argument, metavar="TIME", help="the version as of TIME"
    )
    which.add_argument("--drop", action="store_true", help="delete the tag instead")
    p.add_argument("--description", default="", help="a note kept with the tag")

    _add(sub, "tags", cmd_tags, "list the tags", "Every tag with the lakehouse version it names, oldest first.")

    p = _add(
        sub,
        "optimize",
        cmd_optimize,
        "compact a table's small files (optionally Z-ordered)",
        "Bin-pack a table's small files into files of about --target-file-size, in its own transaction with "
        "dataChange=false: rows do not change and concurrent appends never conflict with it.",
    )
    p.add_argument("table", help="namespace.table")
    p.add_argument("--where", metavar="SQL", help="only partitions matching this condition on partition columns")
    p.add_argument("--target-file-size", default="128MB", metavar="SIZE", help="e.g. 128MB (default), 1GB, 4096")
    p.add_argument("--zorder-by", metavar="A,B", help="also cluster rows along a Z-order curve of these columns")
    p.add_argument(
        "--engine",
        choices=("arrow", "spark"),
        default="arrow",
        help="arrow (default): in this process; spark: one job on a local Spark session (tables larger than memory)",
    )

    p = _add(
        sub,
        "vacuum",
        cmd_vacuum,
        "delete files no retained version needs (a dry run unless --delete)",
        "Find the data files that no lakehouse version of the last --retention needs, nor any tag, clone or "
        "running transaction, and the tables dropped before then; list them, and with --delete delete them. "
        "Files no log references are deleted only once 26 hours old, whatever the retention.",
    )
    p.add_argument(
        "--retention",
        type=duration_argument,
        default=dt.timedelta(days=7),
        metavar="DURATION",
        help="keep every version of this long ago and since, e.g. 7d (default), 168h, 30m, 0",
    )
    p.add_argument(
        "--log-retention",
        type=duration_argument,
        default=None,
        metavar="DURATION",
        help="clean up log entries older than this (default: each table's delta.logRetentionDuration, 30 days; "
        "at least 26h)",
    )
    p.add_argument("--delete", action="store_true", help="delete the files (default: only list them)")
    p.add_argument(
        "--force",
        action="store_true",
        help="allow a retention below a table's delta.deletedFileRetentionDuration (7 days by default)",
    )

    p = _add(
        sub,
        "recover",
        cmd_recover,
        "finish the transactions of dead processes (a dry run unless --delete)",
        "Look at every transaction sublog under _txlake/txns/: one whose lease expired after claiming a version "
        "is rolled forward; any other whose lease expired is taken over, marked aborted (resume refuses it) and, "
        "once silent for --guard, its staged files and sublog are deleted. Transactions whose lease is still "
        "renewed are never touched.",
    )
    p.add_argument(
        "--guard",
        type=duration_argument,
        default=dt.timedelta(minutes=10),
        metavar="DURATION",
        help="delete an aborted transaction's files only once it has been silent this long, e.g. 10m (default), 0",
    )
    p.add_argument("--delete", action="store_true", help="act: roll forward, abort, delete (default: only report)")

    p = _add(
        sub,
        "restore",
        cmd_restore,
        "bring the lakehouse (or some tables) back to an earlier version",
        "Bring every table (or the --table ones) back to an earlier lakehouse version in one new version: names "
        "and data files as they were; a whole-lakehouse restore also drops the tables created since. History "
        "is kept.",
    )
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--version", dest="at_version", type=count, metavar="G", help="back to lakehouse version G")
    which.add_argument(
        "--timestamp",
        dest="at_timestamp",
        type=timestamp_argument,
        metavar="TIME",
        help="back to the version as of TIME",
    )
    which.add_argument("--tag", dest="at_tag", metavar="NAME", help="back to the version tag NAME names")
    p.add_argument(
        "--table",
        dest="tables",
        action="append",
        metavar="NAME",
        help="restore only this table (as it was named then; repeatable)",
    )

    p = _add(
        sub,
        "clone",
        cmd_clone,
        "zero-copy clone of a table or a namespace",
        "Create TARGET as a zero-copy clone of SOURCE (a table, or every table of a namespace into namespace "
        "TARGET) as at the given lakehouse version: new plain Delta tables over the source's data files, in one "
        "transaction; both evolve independently.",
    )
    p.add_argument("source", help="namespace.table, or a namespace")
    p.add_argument("target", help="the new table's name (a namespace for a namespace)")
    _version_option(p, "the source")

    p = _add(
        sub,
        "doctor",
        cmd_doctor,
        "verify the lakehouse (exit 1 on problems)",
        "Verify the global log, every table's Delta log and data files, and invariants I1-I4. "
        "Exit 0 when healthy, 1 when problems are found.",
    )
    p.add_argument("--quick", action="store_true", help="skip the data-file checks (one HEAD per file)")
    p.add_argument(
        "--repair",
        action="store_true",
        help="first roll undecided global versions forward, as any writer would (waits out live leases)",
    )
