"""Human renderings of the command results (the ``--json`` form is the result itself)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.table import Table
from rich.text import Text

from txlake.cli.doctor import DoctorReport, Finding
from txlake.cli.output import Column, Output, cell, human_size, human_time, is_numeric, key_value_table, new_table
from txlake.cli.reports import (
    CatalogChangeView,
    CloneResult,
    InitResult,
    LogEntry,
    LogView,
    OptimizeResult,
    RecoverResult,
    RestoreResult,
    RowsResult,
    TableChangeView,
    TableDescription,
    TableHistory,
    TableList,
    TagList,
    TagResult,
    VacuumResult,
)

STATUS_STYLE = {"committed": "green", "aborted": "red", "undecided": "yellow"}
SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
CHECK_MARK = {"ok": ("✓", "green"), "failed": ("✗", "bold red"), "warning": ("!", "yellow"), "skipped": ("-", "dim")}
TXID_WIDTH = 9


def _num(value: int | None) -> Text:
    return Text("-", style="dim") if value is None else Text(str(value))


def render_init(out: Output, result: InitResult) -> None:
    verb = "created an empty lakehouse" if result.created else "a lakehouse already exists"
    out.line(Text(f"{verb} at {result.uri} (version {result.version})"))


# ----------------------------------------------------------------------------------- tables, describe


def render_tables(out: Output, result: TableList) -> None:
    table = new_table(
        [
            Column("table", min_width=12),
            Column("delta version", numeric=True),
            Column("files", numeric=True),
            Column("rows", numeric=True),
            Column("size", numeric=True),
            Column("location", min_width=10, wrap=True),
        ]
    )
    for t in result.tables:
        table.add_row(
            cell(t.name),
            _num(t.delta_version),
            _num(t.files),
            _num(t.rows),
            _num(None) if t.size_bytes is None else Text(human_size(t.size_bytes)),
            cell(t.location, width=4096),
        )
    scope = f" in namespace {result.namespace}" if result.namespace else ""
    out.table(
        f"tables{scope} at lakehouse version {result.version} — {result.uri}",
        table,
        f"{len(result.tables)} table(s)",
    )


def render_optimize(out: Output, result: OptimizeResult) -> None:
    if not result.files_removed:
        out.line(Text(f"{result.table}: no small files to compact (lakehouse version {result.version})"))
        return
    out.line(
        Text(
            f"{result.table}: {result.files_removed} file(s) ({human_size(result.bytes_removed)}) compacted into "
            f"{result.files_added} at lakehouse version {result.version}"
        )
    )


def render_vacuum(out: Output, result: VacuumResult) -> None:
    verb = "would delete" if result.dry_run else "deleted"
    head = (
        f"vacuum of {result.uri} (retention {result.retention}; every file of lakehouse versions "
        f"{result.horizon}-{result.latest} and of every tag kept): {verb} {result.files_deleted} file(s), "
        f"{human_size(result.bytes_deleted)}"
    )
    out.line(Text(head))
    for reason, n in sorted(result.deleted_by_reason.items()):
        out.line(Text(f"  {verb} {n}: {reason}"))
    for location in result.tables_removed:
        out.line(Text(f"  {'would remove' if result.dry_run else 'removed'} dropped table {location}"))
    out.line(Text(f"kept {result.files_kept} data file(s), {human_size(result.bytes_kept)}"))
    for reason, n in sorted(result.kept_by_reason.items()):
        out.line(Text(f"  kept {n}: {reason}"))
    if result.log_entries_deleted:
        log_verb = "would clean up" if result.dry_run else "cleaned up"
        out.line(
            Text(
                f"{log_verb} {result.log_entries_deleted} log entries: the log starts at lakehouse version "
                f"{result.log_start}"
            )
        )
    if result.dry_run and (result.files_deleted or result.log_entries_deleted):
        out.line(Text("dry run: nothing was deleted; run `txlake vacuum --delete` (same options) to delete them"))


def render_recover(out: Output, result: RecoverResult) -> None:
    verbs = {
        "live": "alive (lease renewed), left alone",
        "rolled_forward": "claimed a version: rolled forward" if not result.dry_run else "claimed: would roll forward",
        "aborted": "aborted, staged files deleted" if not result.dry_run else "would abort and delete staged files",
        "pending": "aborted, files kept until the guard" if not result.dry_run else "would abort (files within guard)",
        "cleaned": "leftovers deleted" if not result.dry_run else "would delete leftovers",
        "ended": "ended by its own process meanwhile, left alone",
        "skipped": "skipped (no sublog, or an earlier abort)",
    }
    verb = "would delete" if result.dry_run else "deleted"
    out.line(
        Text(
            f"recover of {result.uri} (guard {result.guard}): {len(result.transactions)} transaction(s), "
            f"{verb} {result.files_deleted} staged file(s)"
        )
    )
    for action, n in sorted(result.by_action.items()):
        out.line(Text(f"  {n}: {verbs.get(action, action)}"))
    for t in result.transactions:
        version = f" v{t['version']}" if t.get("version") is not None else ""
        out.line(Text(f"  {t['txid']} {t['action']}{version}: {t['detail']}"))
    if result.dry_run and any(t["action"] not in ("live", "ended", "skipped") for t in result.transactions):
        out.line(Text("dry run: nothing was changed; run `txlake recover --delete` (same options) to act"))


def render_restore(out: Output, result: RestoreResult) -> None:
    what = ", ".join(result.tables) if result.tables else "the lakehouse"
    if not result.changed:
        out.line(Text(f"{what} is already as it was at lakehouse version {result.restored_version}: nothing to do"))
        return
    out.line(Text(f"restored {what} to lakehouse version {result.restored_version} as new version {result.version}"))


def render_clone(out: Output, result: CloneResult) -> None:
    tables = ", ".join(result.tables) or "no tables"
    out.line(
        Text(
            f"cloned {result.source} (lakehouse version {result.from_version}) -> {tables} at lakehouse version "
            f"{result.version}: {result.files} data file(s) referenced, none copied"
        )
    )


def render_tag(out: Output, result: TagResult) -> None:
    note = f" ({result.description})" if result.description else ""
    out.line(Text(f"{result.action} tag {result.name} -> lakehouse version {result.version}{note}"))


def render_tags(out: Output, result: TagList) -> None:
    table = new_table(
        [Column("tag", min_width=8), Column("version", numeric=True), Column("created"), Column("description")]
    )
    for t in result.tags:
        table.add_row(cell(t.name), _num(t.version), Text(human_time(t.created)), cell(t.description))
    out.table(f"tags — {result.uri}", table, f"{len(result.tags)} tag(s)")


def _protocol(result: TableDescription) -> str:
    p = result.protocol
    text = f"reader {p.min_reader_version}, writer {p.min_writer_version}"
    features = sorted(set(p.reader_features or ()) | set(p.writer_features or ()))
    return text + (f" (features: {', '.join(features)})" if features else "")


def render_describe(out: Output, result: TableDescription) -> None:
    delta = str(result.delta_version)
    if result.latest_delta_version is not None and result.latest_delta_version > result.delta_version:
        delta += f" (the Delta log has {result.latest_delta_version}: plain-writer commits not adopted yet)"
    out.print(Text(f"table {result.name}", style="bold"))
    out.print(
        key_value_table(
            [
                ("id", result.id),
                ("location", result.location),
                ("description", result.description or "-"),
                ("lakehouse version", result.lakehouse_version),
                ("delta version", delta),
                ("created at version", result.created_version),
                ("created (UTC)", human_time(result.created_time)),
                ("protocol", _protocol(result)),
                ("partitioned by", ", ".join(result.partition_columns) or "-"),
                ("files", f"{result.files} ({human_size(result.size_bytes)})"),
                ("rows", "-" if result.rows is None else result.rows),
            ]
        )
    )
    columns = new_table([Column("column"), Column("type", wrap=True), Column("nullable"), Column("partition")])
    for c in result.columns:
        columns.add_row(cell(c.name), cell(c.type, width=60), cell(c.nullable), Text("yes" if c.partition else ""))
    out.table("columns", columns)
    if result.properties:
        out.table("properties", _properties(result.properties))
    if result.catalog_properties and result.catalog_properties != result.properties:
        out.table("catalog properties", _properties(result.catalog_properties))


def _properties(props: Mapping[str, str]) -> Table:
    table = new_table([Column("key", wrap=True), Column("value", wrap=True)])
    for key, value in sorted(props.items()):
        table.add_row(cell(key, width=60), cell(value, width=60))
    return table


# --------------------------------------------------------------------------------------------- history


def _metrics(values: Mapping[str, object]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(values.items()))


def render_table_history(out: Output, result: TableHistory) -> None:
    table = new_table(
        [
            Column("delta version", numeric=True),
            Column("time (UTC)", min_width=19),
            Column("operation", min_width=9),
            Column("global version", numeric=True),
            Column("transaction", min_width=TXID_WIDTH),
            Column("visible", min_width=7),
            Column("metrics", min_width=10, wrap=True),
        ]
    )
    for c in result.commits:
        op = c.operation or "-"
        if c.compensates:
            op += " (compensation)"
        visible = Text("yes") if c.in_lakehouse else Text("not adopted", style="yellow")
        table.add_row(
            _num(c.version),
            Text(human_time(c.timestamp)),
            cell(op, width=30),
            _num(c.global_version),
            cell(c.txid or "-", width=TXID_WIDTH),
            visible,
            cell(_metrics(c.operation_metrics) or "-", width=60),
        )
    out.table(
        f"history of {result.table} ({result.location}) — mapped to Delta version {result.mapped_version} at "
        f"lakehouse version {result.lakehouse_version}",
        table,
        f"{len(result.commits)} commit(s), newest first; visible: seen by lakehouse readers",
    )


def _status(entry: LogEntry) -> Text:
    label: str = entry.status
    if entry.status == "undecided":
        label += " (lease expired)" if entry.lease_expired else " (in progress)"
    return Text(label, style=STATUS_STYLE.get(entry.status, ""))


def _tables(changes: Sequence[TableChangeView], *, versions: bool) -> str:
    parts = []
    for c in changes:
        text = c.table
        if c.adopted_from is not None:
            text += f" (adopted v{c.adopted_from}..v{c.base_version})"
        if not c.writes:
            text += "" if c.adopted_from is not None else " (read)"
        elif versions and c.published_version is not None:
            text += f"→v{c.published_version}"
        parts.append(text)
    return ", ".join(parts) or "-"


def _catalog(ops: Sequence[CatalogChangeView]) -> str:
    return ", ".join(f"{o.op} {o.name}" + (f" → {o.new_name}" if o.new_name else "") for o in ops) or "-"


def _log_caption(view: LogView) -> str:
    n = len(view.entries)
    text = f"{n} entr{'y' if n == 1 else 'ies'}; latest decided version {view.latest_version}, "
    text += f"latest claimed {view.latest_claimed}"
    if view.undecided:
        text += f"; undecided: {', '.join(map(str, view.undecided))}"
    return text


def render_log(out: Output, view: LogView) -> None:
    reasons = any(e.reason for e in view.entries)
    kinds = any(e.kind not in ("txn", "init") for e in view.entries)
    columns = [
        Column("version", numeric=True),
        Column("status", min_width=9, wrap=True),
        Column("transaction", min_width=TXID_WIDTH),
        *([Column("kind", min_width=4)] if kinds else []),
        Column("isolation", min_width=12),
        Column("read", numeric=True),
        Column("tables (→ Delta version)", min_width=10, wrap=True),
        Column("catalog", min_width=10, wrap=True),
        *([Column("reason", min_width=10, wrap=True)] if reasons else []),
    ]
    table = new_table(columns)
    for e in view.entries:
        row = [
            _num(e.version),
            _status(e),
            cell(e.txid, width=TXID_WIDTH),
            *([Text(e.kind)] if kinds else []),
            Text(e.isolation),
            _num(e.read_version if e.read_version >= 0 else None),
            cell(_tables(e.tables, versions=True), width=60),
            cell(_catalog(e.catalog), width=50),
            *([cell(e.reason or "", width=60)] if reasons else []),
        ]
        table.add_row(*row)
    out.table(f"lakehouse log — {view.uri} (read: the version the transaction read)", table, _log_caption(view))


def render_lake_history(out: Output, view: LogView) -> None:
    table = new_table(
        [
            Column("version", numeric=True),
            Column("decided (UTC)", min_width=19),
            Column("status", min_width=9, wrap=True),
            Column("transaction", min_width=TXID_WIDTH),
            Column("isolation", min_width=12),
            Column("tables", min_width=10, wrap=True),
            Column("catalog", min_width=10, wrap=True),
        ]
    )
    for e in reversed(view.entries):
        table.add_row(
            _num(e.version),
            Text(human_time(e.decided_at or e.timestamp)),  # the time --timestamp / snapshot(timestamp=) use
            _status(e),
            cell(e.txid, width=TXID_WIDTH),
            Text(e.isolation),
            cell(_tables(e.tables, versions=False), width=60),
            cell(_catalog(e.catalog), width=60),
        )
    out.table(f"lakehouse history — {view.uri}", table, _log_caption(view) + "; newest first")


# ------------------------------------------------------------------------------------------------ show


def render_rows(out: Output, result: RowsResult) -> None:
    names = result.rows.column_names
    table = new_table([Column(f.name, numeric=is_numeric(f.type), wrap=True) for f in result.rows.schema])
    for row in result.rows.to_pylist():
        table.add_row(*(cell(row[name]) for name in names))
    where = f" where {result.where}" if result.where else ""
    where += f" order by {result.order_by}" if result.order_by else ""
    caption = f"{result.rows.num_rows} of {result.matched} row(s)"
    if result.truncated:
        caption += " (--limit N or --limit 0 for more)"
    out.table(
        f"{result.table}{where} — lakehouse version {result.lakehouse_version} (Delta version {result.delta_version})",
        table,
        caption,
    )


# ---------------------------------------------------------------------------------------------- doctor


def finding_line(finding: Finding) -> Text:
    """One line per finding: severity, check, message and hint."""
    line = Text()
    line.append(f"{finding.severity.upper():<7}", style=SEVERITY_STYLE[finding.severity])
    line.append(f" [{finding.check}] ", style="bold")
    line.append(finding.message)
    line.append(" — hint: ", style="dim")
    line.append(finding.hint, style="dim")
    return line


def render_doctor(out: Output, report: DoctorReport) -> None:
    files = "data files not checked (--quick)" if report.data_files is None else f"{report.data_files} data files"
    out.line(
        Text(
            f"txlake doctor — {report.uri}: lakehouse version {report.lakehouse_version}, {report.tables} table(s), "
            f"{report.delta_commits} Delta commits, {files}",
            style="bold",
        )
    )
    for r in report.repaired:
        out.line(Text(f"repaired: rolled global version {r.version} forward ({r.status}, transaction {r.txid})"))
    for left in report.reclaimed:
        out.line(
            Text(
                f"repaired: deleted temporary object {left.path} ({left.size} bytes, "
                f"written {human_time(left.modified)})"
            )
        )
    for check in report.checks:
        mark, style = CHECK_MARK[check.status]
        line = Text(f" {mark} ", style=style)
        line.append(f"{check.name:<22} ")
        line.append(check.description, style="dim")
        if check.findings:
            line.append(f"  ({check.findings} finding{'s' if check.findings != 1 else ''})")
        out.line(line)
    for finding in report.findings:
        out.line(finding_line(finding))
    errors = sum(1 for f in report.findings if f.severity == "error")
    if report.healthy:
        out.line(Text("healthy", style="bold green"))
    else:
        out.line(Text(f"{errors} problem(s) found", style="bold red"))
