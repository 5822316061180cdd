"""Helpers for the Spark suites: rows of a DataFrame, an independent delta-rs read, leftover files."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

import deltalake
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

import txlake
from tests.interop.deltars import Row, rows, unescaped


def df_rows(df: Any) -> list[Row]:
    """Canonical sorted rows of a Spark DataFrame (through Arrow: instants compare in UTC)."""
    return rows(df.toArrow())


def _filesystem(uri: str, storage_options: Mapping[str, str] | None) -> tuple[pafs.FileSystem, str]:
    if uri.startswith("file://") or uri.startswith("/"):
        return pafs.LocalFileSystem(), uri.removeprefix("file://")
    opts = {k.upper(): v for k, v in (storage_options or {}).items()}
    endpoint = urlsplit(opts["AWS_ENDPOINT_URL"])
    fs = pafs.S3FileSystem(
        access_key=opts["AWS_ACCESS_KEY_ID"],
        secret_key=opts["AWS_SECRET_ACCESS_KEY"],
        region=opts["AWS_REGION"],
        endpoint_override=endpoint.netloc,
        scheme=endpoint.scheme,
    )
    return fs, uri.removeprefix("s3://")


def deltars_read(uri: str, storage_options: Mapping[str, str] | None = None) -> pa.Table:
    """The table as delta-rs sees it: its live files (``file_uris``) read with pyarrow, partition values from
    delta-rs's add actions (never ``to_pyarrow_table`` without a filesystem: delta-rs#2184)."""
    dt = deltalake.DeltaTable(uri, storage_options=dict(storage_options or {}))
    schema = pa.schema(dt.schema().to_arrow())
    partitions = dt.metadata().partition_columns
    adds = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
    fs, root = _filesystem(uri, storage_options)
    assert sorted(unescaped(u).rsplit("/", 1)[-1] for u in dt.file_uris()) == sorted(
        unescaped(a["path"]).rsplit("/", 1)[-1] for a in adds
    )
    parts = []
    for add in adds:
        data = pq.read_table(f"{root.rstrip('/')}/{unquote(add['path'])}", filesystem=fs)
        n = data.num_rows
        columns = []
        for field in schema:
            if field.name in partitions:
                columns.append(pa.array([add[f"partition.{field.name}"]] * n, field.type))
            elif field.name in data.column_names:
                columns.append(data.column(field.name).cast(field.type))
            else:
                columns.append(pa.nulls(n, field.type))
        parts.append(pa.Table.from_arrays(columns, schema=schema))
    return pa.concat_tables(parts) if parts else schema.empty_table()


def txid_files(lake: txlake.Lakehouse, name: str, txid: str) -> list[str]:
    """Data files under the table's directory whose name carries ``txid`` (written by that transaction)."""
    entry = lake.snapshot().entry(name)
    return [m.path for m in lake.store.list(entry.path) if f"part-{txid}-" in m.path.rsplit("/", 1)[-1]]


def staging_objects(lake: txlake.Lakehouse, txid: str) -> list[str]:
    return [m.path for m in lake.store.list(f"_txlake/txns/{txid}/spark")]


def live_files(lake: txlake.Lakehouse, name: str) -> set[str]:
    """Paths of the table's live data files at the latest committed version."""
    return set(lake.snapshot().delta_snapshot(name).files)
