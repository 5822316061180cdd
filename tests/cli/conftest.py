"""A small bank lakehouse built with the library, and a clean environment for every CLI test."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

import txlake
from tests.cli.real import TERMINAL_ENV
from txlake.cli.main import main
from txlake.cli.options import STORAGE_ENV, URI_ENV

SCHEMA = pa.schema([("id", pa.int64()), ("owner", pa.string()), ("balance", pa.int64())])


@dataclass(frozen=True)
class Run:
    """What one in-process ``txlake`` run printed and returned."""

    code: int
    out: str
    err: str

    def json(self) -> object:
        return json.loads(self.out)


Txlake = Callable[..., Run]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No lakehouse URI, credentials, terminal width or forced terminal leak in from the developer's shell."""
    for var in (URI_ENV, *TERMINAL_ENV, *STORAGE_ENV):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def txlake_cli(capsys: pytest.CaptureFixture[str]) -> Txlake:
    """Run ``txlake *args`` in-process; returns exit code and captured stdout/stderr."""

    def run(*args: str) -> Run:
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return Run(code, captured.out, captured.err)

    return run


def accounts(ids: list[int], owners: list[str], balances: list[int]) -> pa.Table:
    return pa.table({"id": ids, "owner": owners, "balance": balances}, schema=SCHEMA)


def build_bank(uri: str, **connect: object) -> txlake.Lakehouse:
    """Versions 1-2 create bank.checking (plain) and bank.savings (partitioned by owner); 3 deposits; 4 a transfer."""
    lake = txlake.connect(uri, **connect)  # type: ignore[arg-type]
    lake.create_table("bank.checking", SCHEMA, description="checking accounts", properties={"team": "core"})
    lake.create_table("bank.savings", SCHEMA, partition_by=["owner"])
    with lake.transaction() as tx:
        tx.append("bank.checking", accounts([1, 2, 3], ["ann", "bob", "x" * 100], [100, 50, 7]))
        tx.append("bank.savings", accounts([1, 2], ["ann", "bob"], [0, 0]))
    with lake.transaction("serializable") as tx:
        tx.update("bank.checking", set={"balance": "balance - 30"}, where="id = 1")
        tx.update("bank.savings", set={"balance": "balance + 30"}, where="id = 1")
    return lake


@pytest.fixture
def bank(tmp_path: Path) -> txlake.Lakehouse:
    return build_bank(f"file://{tmp_path / 'lake'}")
