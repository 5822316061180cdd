"""delta-rs as an independent Delta client: open a txlake table location in it and compare what both see.

delta-rs is only ever read through DataFusion (``QueryBuilder``) or through ``to_pyarrow_table`` with an
explicit pyarrow filesystem: without one, a process that called ``to_pyarrow_table`` often aborts at exit
(delta-rs#2184).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import unquote, urlsplit

import deltalake
import pyarrow as pa
import pyarrow.fs as pafs

from txlake.delta import DeltaTable
from txlake.storage import ObjectStore

Row = tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class TableLocation:
    """One table reachable by both clients: txlake through ``store``/``path``, delta-rs through ``uri``."""

    store: ObjectStore
    path: str
    storage_options: Mapping[str, str]

    @property
    def uri(self) -> str:
        return self.store.url(self.path)

    @property
    def backend(self) -> str:
        return self.store.scheme

    def txlake(self) -> DeltaTable:
        return DeltaTable(self.store, self.path)

    def deltars(self, version: int | None = None) -> deltalake.DeltaTable:
        return deltalake.DeltaTable(self.uri, version=version, storage_options=dict(self.storage_options))

    def pyarrow_filesystem(self) -> pafs.FileSystem:
        """A pyarrow filesystem rooted at the table (what delta-rs's pyarrow reader resolves paths against)."""
        local = self.store.local_path(self.path)
        if local is not None:
            return pafs.SubTreeFileSystem(local, pafs.LocalFileSystem())
        opts = {k.upper(): v for k, v in self.storage_options.items()}
        endpoint = urlsplit(opts["AWS_ENDPOINT_URL"])
        s3 = pafs.S3FileSystem(
            access_key=opts["AWS_ACCESS_KEY_ID"],
            secret_key=opts["AWS_SECRET_ACCESS_KEY"],
            region=opts["AWS_REGION"],
            endpoint_override=endpoint.netloc,
            scheme=endpoint.scheme,
        )
        return pafs.SubTreeFileSystem(self.uri.removeprefix("s3://"), s3)

    def relative(self, file_uri: str) -> str:
        """A delta-rs ``file_uris()`` entry as a path relative to the table root (see :func:`unescaped`)."""
        root = self.uri.removeprefix("file://")
        path = file_uri.removeprefix("file://")
        assert path.startswith(root + "/"), (file_uri, self.uri)
        return unescaped(path[len(root) + 1 :])


def unescaped(path: str) -> str:
    """``path`` with every level of percent-escaping undone.

    A data file's key is escaped once more in ``add.path``; delta-rs gives local files as plain paths but
    object-store files as URLs that escape some characters again and leave others. Fully unescaped forms
    are comparable across all of them (file names hold a UUID, so nothing distinct collapses).
    """
    while (once := unquote(path)) != path:
        path = once
    return path


# ------------------------------------------------------------------------------------------------ rows


def canonical(value: Any) -> Any:
    """A comparable, hashable form of one Arrow value (NaN equal to itself, instants in UTC, maps as pairs)."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, Decimal):
        text = format(value, "f")
        text = text.rstrip("0").rstrip(".") if "." in text else text
        return ("decimal", "0" if text in {"-0", ""} else text)
    if isinstance(value, datetime):
        return ("instant", value.astimezone(UTC).isoformat()) if value.tzinfo else ("local", value.isoformat())
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), canonical(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(canonical(v) for v in value)
    return value


def rows(table: pa.Table | Iterable[Mapping[str, Any]]) -> list[Row]:
    """The rows of ``table`` in canonical form, sorted: equal lists mean equal multisets of rows."""
    records = table.to_pylist() if isinstance(table, pa.Table) else list(table)
    out: list[Row] = [canonical(r) for r in records]
    return sorted(out, key=repr)


def sql_rows(dt: deltalake.DeltaTable, sql: str) -> pa.Table:
    """Run ``sql`` over ``dt`` registered as ``t`` in delta-rs's DataFusion engine."""
    return pa.table(deltalake.QueryBuilder().register("t", dt).execute(sql).read_all())


def deltars_read_datafusion(dt: deltalake.DeltaTable) -> list[Row]:
    return rows(sql_rows(dt, "SELECT * FROM t"))


def deltars_read_pyarrow(dt: deltalake.DeltaTable, filesystem: pafs.FileSystem) -> list[Row]:
    return rows(dt.to_pyarrow_table(filesystem=filesystem))


# ----------------------------------------------------------------------------------------------- files


@dataclass(frozen=True)
class FileView:
    """What one client says about one live data file."""

    size: int
    num_records: int | None


def deltars_files(dt: deltalake.DeltaTable) -> dict[str, FileView]:
    """Live files as delta-rs lists them: log path -> size and record count."""
    adds = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
    return {a["path"]: FileView(int(a["size_bytes"]), a.get("num_records")) for a in adds}


def txlake_files(table: DeltaTable, version: int) -> dict[str, FileView]:
    snap = table.snapshot(version)
    return {path: FileView(add.size, add.num_records) for path, add in snap.files.items()}


# --------------------------------------------------------------------------------------- the comparison


def assert_same_version(
    loc: TableLocation,
    version: int,
    *,
    readers: Sequence[str] = ("datafusion", "pyarrow"),
    predicates: Mapping[str, Callable[[Mapping[str, Any]], bool]] | None = None,
) -> list[Row]:
    """Assert txlake and delta-rs agree on ``version``: files, file URIs, rows, and pruned filter results.

    ``predicates`` maps a SQL condition to the same condition in Python; delta-rs prunes files with the
    stats txlake wrote, so a wrong bound shows up as a missing row. Returns the (canonical) rows.
    """
    table = loc.txlake()
    dt = loc.deltars(version)
    assert dt.version() == version
    mine_files = txlake_files(table, version)
    assert deltars_files(dt) == mine_files, f"v{version}: live files differ"
    assert sorted(loc.relative(u) for u in dt.file_uris()) == sorted(unescaped(p) for p in mine_files)
    mine_table = table.read_arrow(version)
    mine = rows(mine_table)
    for reader in readers:
        theirs = (
            deltars_read_datafusion(dt)
            if reader == "datafusion"
            else deltars_read_pyarrow(dt, loc.pyarrow_filesystem())
        )
        assert theirs == mine, f"v{version}: delta-rs ({reader}) rows differ from txlake's"
    records = mine_table.to_pylist()
    for sql, keep in (predicates or {}).items():
        want = sorted(r["id"] for r in records if keep(r))
        got = sorted(sql_rows(dt, f"SELECT id FROM t WHERE {sql}").column("id").to_pylist())
        assert got == want, f"v{version}: delta-rs disagrees on WHERE {sql}"
    return mine
