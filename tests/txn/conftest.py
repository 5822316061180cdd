"""Fixtures for the transaction suites: a fresh lakehouse on every backend (file, memory, SeaweedFS)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import txlake
from tests.services import StoreLocation

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
