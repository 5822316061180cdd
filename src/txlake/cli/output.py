"""The two outputs of every command: ``--json`` on stdout, or rich tables for people; value formatting."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import decimal
import json
import math
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import pyarrow as pa
from rich import box
from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

MAX_CELL = 40
"""Longest value shown in a table cell on a terminal before it is cut with an ellipsis (never in a pipe or file)."""
UNLIMITED = 1 << 20
"""A width no table reaches: what a table measures at most when nothing is cut."""


def to_jsonable(value: Any) -> Any:
    """``value`` as plain JSON data: dataclasses by field, timestamps ISO-8601, bytes base64, Arrow as rows."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        return [to_jsonable(v) for v in items]
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, pa.Table):
        return [to_jsonable(row) for row in value.to_pylist()]
    return str(value)


def timestamp(ms: int | None) -> dt.datetime | None:
    """A UTC datetime from epoch milliseconds (``None`` stays ``None``)."""
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC) if ms is not None else None


def human_time(value: dt.datetime | None) -> str:
    return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S") if value is not None else "-"


def human_size(size: int | None) -> str:
    if size is None:
        return "-"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover - the loop always returns


def one_line(text: str) -> str:
    """``text`` on one line: each line break shown as ``⏎``, other control characters (escape sequences that
    could recolour the terminal or move its cursor) as ``\\xNN`` escapes."""
    text = text.replace("\r", "").replace("\n", "⏎")
    if any(_is_control(c) for c in text):
        text = "".join(f"\\x{ord(c):02x}" if _is_control(c) else c for c in text)
    return text


def _is_control(c: str) -> bool:
    code = ord(c)
    return (code < 0x20 and c != "\t") or 0x7F <= code < 0xA0


def truncate(text: str, width: int = MAX_CELL) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    flat = one_line(text)
    return flat if len(flat) <= width else flat[: max(width - 1, 1)] + "…"


class Cell(Text):
    """A table cell: its whole value on one line, and the width it is cut to on a terminal (``limit``).

    :meth:`Output.table` cuts it, on a terminal only: output to a pipe or file keeps every value whole.
    """

    def __init__(self, text: str, limit: int) -> None:
        super().__init__(text)
        self.limit = limit


def cell(value: Any, width: int = MAX_CELL) -> Text:
    """One table cell: ``null`` dimmed, numbers as-is, nested values as compact JSON, on one line; cut to
    ``width`` with an ellipsis when it is shown on a terminal (see :class:`Cell`)."""
    if value is None:
        return Text("null", style="dim")
    if isinstance(value, Text):
        return value
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, dt.datetime):
        text = value.isoformat(sep=" ")
    elif isinstance(value, (bytes, bytearray)):
        text = "0x" + bytes(value).hex()
    elif isinstance(value, (Mapping, list, tuple)):
        text = json.dumps(to_jsonable(value), separators=(",", ":"), ensure_ascii=False)
    else:
        text = str(value)
    return Cell(one_line(text), width)


def is_numeric(dtype: pa.DataType) -> bool:
    return bool(pa.types.is_integer(dtype) or pa.types.is_floating(dtype) or pa.types.is_decimal(dtype))


@dataclass(frozen=True, slots=True)
class Column:
    """A table column: numbers right-aligned; ``wrap`` columns fold long values, others cut them with "…"."""

    header: str
    numeric: bool = False
    min_width: int | None = None
    wrap: bool = False


def new_table(columns: Sequence[Column]) -> Table:
    """A rich table that keeps short columns whole and shrinks (folds) only the ``wrap`` columns."""
    table = Table(box=box.SIMPLE_HEAD, show_lines=False, pad_edge=False, collapse_padding=True)
    for c in columns:
        table.add_column(
            c.header,
            justify="right" if c.numeric else "left",
            overflow="fold" if c.wrap else "ellipsis",
            no_wrap=not c.wrap,
            min_width=c.min_width if c.wrap else max(len(c.header), c.min_width or 0),
        )
    return table


def key_value_table(rows: Iterable[tuple[str, Any]]) -> Table:
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column("key", style="bold")
    table.add_column("value", overflow="fold")
    for key, value in rows:
        table.add_row(key, cell(value, width=200))
    return table


PIPE_WIDTH = 160
"""Line width of human output that goes to a pipe or file (a terminal's own width is used otherwise)."""


def _columns() -> int | None:
    """``$COLUMNS`` when it is a positive number (rich would take ``COLUMNS=0`` literally and drop every title)."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        return None
    return columns if columns > 0 else None


def _width(stream: TextIO | None = None) -> int | None:
    """The line width: ``$COLUMNS`` if set to a positive number, else the terminal's width, else (a pipe or a
    file) :data:`PIPE_WIDTH` instead of rich's 80."""
    stream = stream if stream is not None else sys.stdout
    columns = _columns()
    if columns is not None:
        return columns
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        tty = False
    if not tty:
        return PIPE_WIDTH
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (AttributeError, OSError, ValueError):
        return 80


def plain_text() -> bool:
    """``NO_COLOR`` is set (to anything but the empty text): no colour and no other terminal styles."""
    return os.environ.get("NO_COLOR", "") != ""


class PipeConsole(Console):
    """A rich console whose reader going away (``txlake show ... | head``) ends the command as a quiet success.

    rich's own answer is ``SystemExit(1)``; the CLI answers every broken pipe with exit 0 (``cli.main``).
    """

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


def console_for(*, stderr: bool = False) -> PipeConsole:
    """A console on stdout (or stderr): :data:`PIPE_WIDTH` wide when it is not a terminal, no styles at all
    under ``NO_COLOR``."""
    return PipeConsole(
        stderr=stderr,
        highlight=False,
        width=_width(sys.stderr if stderr else sys.stdout),
        color_system=None if plain_text() else "auto",
    )


def _measure(console: Console, table: Table) -> Measurement:
    """The narrowest ``table`` can be without dropping or cutting columns below their minimum, and its natural
    width (every value whole), whatever the console's width."""
    return Measurement.get(console, console.options.update_width(UNLIMITED), table)


class Output:
    """Where a command's result goes: JSON on stdout (``--json``) or rich renderables for people.

    Progress bars and notes go to stderr, so stdout stays clean for pipes and ``--json``.
    """

    def __init__(self, json_mode: bool, *, console: Console | None = None, stderr: Console | None = None) -> None:
        self.json_mode = json_mode
        self.console = console or console_for()
        self.stderr = stderr or console_for(stderr=True)

    def json(self, doc: Any) -> None:
        sys.stdout.write(json.dumps(to_jsonable(doc), indent=2, ensure_ascii=False, allow_nan=False) + "\n")

    def print(self, *renderables: RenderableType) -> None:
        self.console.print(*renderables)

    def line(self, text: Text) -> None:
        """One logical line: never broken by rich (the terminal wraps it), so ``grep`` sees it whole."""
        self.console.print(text, soft_wrap=True)

    def table(self, title: str, table: Table, caption: str | None = None) -> None:
        """A titled table (title and caption on their own lines, so a narrow table does not wrap them).

        Nothing is ever left out. On a terminal long values are cut with an ellipsis, and a table whose columns
        cannot all fit the width is shown one row per block instead (column: value lines). To a pipe or file
        nothing is cut: the table is as wide as its longest row.
        """
        self.console.print(Text(title, style="bold"))
        if self.console.is_terminal:
            for column in table.columns:
                for value in column.cells:
                    if isinstance(value, Cell):
                        value.truncate(value.limit, overflow="ellipsis")
            if _measure(self.console, table).minimum > self.console.width:
                self._vertical(table)
            else:
                self.console.print(table)
        else:
            width = self.console.width
            self.console.width = max(width, _measure(self.console, table).maximum)  # (print cannot go wider)
            try:
                self.console.print(table)
            finally:
                self.console.width = width
        if caption:
            self.console.print(Text(caption, style="dim"))

    def _vertical(self, table: Table) -> None:
        """``table`` one row per block, each value on its own line after its column's name (as ``psql -x``)."""
        headers = [Text(str(column.header), style="bold") for column in table.columns]
        rows = list(zip(*(list(column.cells) for column in table.columns), strict=True))
        self.console.print(
            Text(f"(one row per block: the {len(headers)} columns do not fit {self.console.width} characters)")
            if rows
            else Text("(no rows)"),
            style="dim",
        )
        for number, values in enumerate(rows, start=1):
            self.console.print(Text(f"-[ row {number} ]" + "-" * max(0, min(self.console.width, 40) - 12)))
            block = Table.grid(padding=(0, 1))
            block.add_column(overflow="fold")
            block.add_column(overflow="fold")
            for header, value in zip(headers, values, strict=True):
                block.add_row(header, value)
            self.console.print(block)

    def note(self, text: str) -> None:
        """A remark for people (never in ``--json`` output)."""
        if not self.json_mode:
            self.stderr.print(Text(text, style="dim"))

    def progress(self) -> Progress:
        """A progress display on stderr; silent with ``--json`` or when stderr is not a terminal."""
        return Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.stderr,
            transient=True,
            disable=self.json_mode or not self.stderr.is_terminal,
        )
