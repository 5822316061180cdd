"""Helpers of the group-commit suites: clients that commit in groups, tables, what a table holds."""

from __future__ import annotations

import txlake
from tests.services import StoreLocation
from tests.txn.conftest import ACCOUNTS


def grouping_lake(loc: StoreLocation, lease: float = 30.0) -> txlake.Lakehouse:
    """A client with group commit on, as after a lost race (its next commits go in groups)."""
    lake = txlake.connect(loc.uri, loc.storage_options, lease_seconds=lease, group_commit=True)
    lake.context.note_contention()
    return lake


def create_tables(loc: StoreLocation, *names: str) -> None:
    lake = txlake.connect(loc.uri, loc.storage_options)
    with lake.transaction() as tx:
        for name in names:
            tx.create_table(name, ACCOUNTS)


def ids(lake: txlake.Lakehouse, name: str) -> list[int]:
    return sorted(lake.read_arrow(name)["id"].to_pylist())
