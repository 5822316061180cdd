"""Helpers of the group-commit suites: clients that commit in groups, tables, what a table holds."""

from __future__ import annotations

import math

import txlake
from tests.services import StoreLocation
from tests.txn.conftest import ACCOUNTS


def grouping_lake(loc: StoreLocation, lease: float = 30.0) -> txlake.Lakehouse:
    """A client with group commit on, racing others for its whole life (all its commits go in groups; after
    one lost race a client races for :data:`~txlake.txn.context.CONTENTION_WINDOW`, which a loaded machine
    can outlast between two steps of a test)."""
    lake = txlake.connect(loc.uri, loc.storage_options, lease_seconds=lease, group_commit=True)
    lake.context.lost_race_until = math.inf
    return lake


def create_tables(loc: StoreLocation, *names: str) -> None:
    lake = txlake.connect(loc.uri, loc.storage_options)
    with lake.transaction() as tx:
        for name in names:
            tx.create_table(name, ACCOUNTS)


def ids(lake: txlake.Lakehouse, name: str) -> list[int]:
    return sorted(lake.read_arrow(name)["id"].to_pylist())
