"""Fixtures for the transaction suites: a fresh lakehouse on every backend (file, memory, SeaweedFS)."""

from __future__ import annotations

import dataclasses
import struct

import pyarrow as pa
import pyroaring
import pytest

import txlake
from tests.services import StoreLocation
from txlake.delta import DeltaTable
from txlake.delta.actions import Add, Protocol
from txlake.delta.dv import MAGIC, DeletionVectorDescriptor, z85_encode

ACCOUNTS = pa.schema([("id", pa.int64()), ("balance", pa.int64())])


@pytest.fixture
def lake(any_store_uri: StoreLocation) -> txlake.Lakehouse:
    return txlake.connect(any_store_uri.uri, any_store_uri.storage_options)


@pytest.fixture
def local_lake(tmp_path: object) -> txlake.Lakehouse:
    return txlake.connect(f"file://{tmp_path}")


def accounts(ids: list[int], balances: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "balance": pa.array(balances, pa.int64())})


def rows(table: pa.Table) -> list[tuple[object, ...]]:
    """Rows as sorted tuples, for order-insensitive comparison."""
    cols = table.column_names
    return sorted(tuple(r[c] for c in cols) for r in table.to_pylist())


def delete_with_deletion_vector(lake: txlake.Lakehouse, name: str, positions: list[int]) -> None:
    """Act as a plain writer (Spark) on a one-file table: turn deletion vectors on, then delete the rows at
    ``positions`` of its file with an inline DV (two plain commits, not adopted yet)."""
    log = lake.delta_log(name)
    snap = lake.snapshot().delta_snapshot(name)
    (add,) = snap.files.values()
    enable = dataclasses.replace(
        snap.metadata, configuration={**snap.metadata.configuration, "delta.enableDeletionVectors": "true"}
    )
    log.write_commit(snap.version + 1, [Protocol(3, 7, ("deletionVectors",), ("deletionVectors",)), enable])
    update_deletion_vector(lake, name, add.path, positions)


def update_deletion_vector(lake: txlake.Lakehouse, name: str, path: str, positions: list[int]) -> Add:
    """Act as a plain writer on a DV table: replace the deletion vector of data file ``path`` (live at the table's
    newest Delta version) by an inline one deleting ``positions`` (CRoaring's bitmap, via pyroaring): one plain
    commit of ``remove (path, old DV)`` + ``add (path, new DV)``, as Spark's DELETE writes it. Returns the add."""
    log = lake.delta_log(name)
    snap = DeltaTable(lake.store, log.path).snapshot()
    add = snap.files[path]
    bitmap = struct.pack("<I", MAGIC) + pyroaring.BitMap64(positions).serialize()
    dv = DeletionVectorDescriptor("i", z85_encode(bitmap), len(bitmap), len(set(positions)))
    updated = dataclasses.replace(add, deletion_vector=dv)
    log.write_commit(snap.version + 1, [updated, add.remove()])
    return updated
