"""``txlake sql``: Spark SQL over one consistent snapshot."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

import txlake
from txlake.cli.main import main
from txlake.cli.sql import bind_tables
from txlake.errors import PredicateError

SCHEMA = pa.schema([("id", pa.int64()), ("balance", pa.int64())])


def test_bind_tables_rewrites_catalog_names() -> None:
    sql, used = bind_tables("SELECT a.id FROM bank.north a JOIN Bank.South ON true", ["bank.north", "bank.south"])
    assert used == {"bank.north": "txlake__bank__north", "bank.south": "txlake__bank__south"}
    assert "txlake__bank__north AS a" in sql and "bank.north" not in sql


@pytest.mark.parametrize(
    "query",
    ["DROP TABLE bank.north", "INSERT INTO bank.north VALUES (1, 2)", "SELECT * FROM other.table", "SELECT FROM ("],
)
def test_bind_tables_refuses_non_queries_and_unknown_tables(query: str) -> None:
    with pytest.raises(PredicateError) as err:
        bind_tables(query, ["bank.north"])
    assert err.value.expression == query


def test_sql_over_a_snapshot_and_time_travel(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lake = txlake.connect(f"file://{tmp_path}")
    with lake.transaction() as tx:
        tx.create_table("bank.north", SCHEMA)
        tx.create_table("bank.south", SCHEMA)
        tx.append("bank.north", pa.table({"id": [1, 2], "balance": [10, 20]}, schema=SCHEMA))
        tx.append("bank.south", pa.table({"id": [1, 2], "balance": [1, 2]}, schema=SCHEMA))
    first = lake.version()
    with lake.transaction() as tx:
        tx.update("bank.north", set={"balance": "balance * 100"})
    query = "SELECT n.id, n.balance + s.balance AS total FROM bank.north n JOIN bank.south s USING (id) ORDER BY n.id"
    assert main(["sql", "--uri", str(tmp_path), query, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rows"] == [{"id": 1, "total": 1001}, {"id": 2, "total": 2002}]
    assert out["lakehouse_version"] == lake.version()
    assert main(["sql", "--uri", str(tmp_path), query, "--version", str(first), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == [{"id": 1, "total": 11}, {"id": 2, "total": 22}]
    assert main(["sql", "--uri", str(tmp_path), "SELECT id FROM bank.north", "--limit", "1"]) == 0
    assert "1 of 2 row(s)" in capsys.readouterr().out
    assert main(["sql", "--uri", str(tmp_path), "DELETE FROM bank.north"]) == 8
    assert main(["sql", "--uri", str(tmp_path / "nothing"), "SELECT 1 FROM bank.north"]) == 3
