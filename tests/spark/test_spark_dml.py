"""UPDATE, DELETE and MERGE as Spark jobs (copy-on-write over candidate files), on both Spark readers.

Each statement runs twice: on a lakehouse with Spark and, fed the same data, on a lakehouse without Spark
(txlake's Arrow path); results, returned counts and merge metrics must agree, and delta-rs must read the same
rows from the published tables. Data is tiny and loaded one transaction per file, so that file-level effects
(which files a statement rewrites) are visible.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession

import txlake
from tests.interop.deltars import rows
from tests.spark.helpers import deltars_read, df_rows, live_files, staging_objects, txid_files
from txlake.errors import (
    AppendOnlyTableError,
    ConcurrentAppendError,
    ConflictError,
    MergeCardinalityError,
    PredicateError,
    SchemaMismatchError,
)
from txlake.txn.engine import NoDataEngineError
from txlake.txn.transaction import Transaction

T = TypeVar("T")

ACCOUNTS = pa.schema([pa.field("id", pa.int64(), nullable=False), ("owner", pa.string()), ("balance", pa.int64())])
EVENTS = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("day", pa.date32()),
        ("amount", pa.decimal128(10, 2)),
        ("at", pa.timestamp("us", tz="UTC")),
        ("note", pa.string()),
    ]
)


def accounts(ids: Sequence[int], owners: Sequence[str | None], balances: Sequence[int | None]) -> pa.Table:
    return pa.table({"id": list(ids), "owner": list(owners), "balance": list(balances)}, schema=ACCOUNTS)


def events(
    ids: Sequence[int], days: Sequence[date], amounts: Sequence[str | None], hours: Sequence[int | None]
) -> pa.Table:
    return pa.table(
        {
            "id": list(ids),
            "day": list(days),
            "amount": [None if a is None else Decimal(a) for a in amounts],
            "at": [None if h is None else datetime(2024, 1, 1, tzinfo=UTC).replace(hour=h) for h in hours],
            "note": [f"e{i}" for i in ids],
        },
        schema=EVENTS,
    )


D1, D2, D3 = date(2024, 1, 1), date(2024, 1, 2), date(2024, 1, 3)
# three files of accounts: ids 1-3, 11-13, 21-23; NULL owners and balances in each
ACCOUNT_FILES = [
    accounts([1, 2, 3], ["ann", "bob", None], [100, 50, None]),
    accounts([11, 12, 13], ["cy", None, "dee"], [10, None, 70]),
    accounts([21, 22, 23], ["eve", "fay", "gus"], [5, 60, 0]),
]
# events partitioned by day; two loads, so every day has two files
EVENT_FILES = [
    events([1, 2, 3, 4], [D1, D1, D2, D3], ["10.25", "3.50", None, "7.05"], [1, 2, 3, None]),
    events([5, 6, 7], [D1, D2, D3], ["20.00", "1.10", "99.99"], [4, 5, 6]),
]


@dataclass
class Twin:
    """The same data and statements on a lakehouse with Spark and on one without it (the Arrow path)."""

    lake: txlake.Lakehouse
    plain: txlake.Lakehouse
    spark: SparkSession

    def create(self, name: str, schema: pa.Schema, files: Sequence[pa.Table], **kwargs: Any) -> None:
        for lake in (self.lake, self.plain):
            lake.create_table(name, schema, **kwargs)
            for data in files:
                with lake.transaction() as tx:
                    tx.append(name, data)

    def frame(self, data: pa.Table) -> DataFrame:
        return self.spark.createDataFrame(data)

    def run(self, statements: Callable[[Transaction, Callable[[pa.Table], Any]], T]) -> T:
        """Run ``statements(tx, source)`` in one transaction on each lakehouse (``source`` makes merge sources:
        a DataFrame on the Spark side, the Arrow table itself on the other); both must return the same."""
        with self.lake.transaction() as tx:
            mine = statements(tx, self.frame)
        with self.plain.transaction() as tx:
            arrow = statements(tx, lambda t: t)
        assert mine == arrow
        return mine

    def assert_same(self, name: str) -> list[Any]:
        """Both lakehouses hold the same rows; delta-rs and Spark read them from the published table too."""
        mine = rows(self.lake.read_arrow(name))
        assert mine == rows(self.plain.read_arrow(name))
        assert rows(deltars_read(self.lake.table_location(name))) == mine
        assert df_rows(self.lake.snapshot().read(name)) == mine
        return mine


@pytest.fixture
def twin(lake: txlake.Lakehouse, tmp_path: Path, spark: SparkSession) -> Twin:
    return Twin(lake, txlake.connect((tmp_path / "plain").as_uri()), spark)


@pytest.fixture
def one_lake(tmp_path: Path, spark: SparkSession) -> txlake.Lakehouse:
    """A lakehouse with Spark for tests where the reader does not matter (``auto``)."""
    return txlake.connect((tmp_path / "lake").as_uri(), spark=spark)


def file_of(lake: txlake.Lakehouse, name: str, id_: int) -> str:
    """The live data file whose ``id`` range (statistics) holds ``id_`` (the test data never overlaps)."""
    hits = []
    for path, add in lake.snapshot().delta_snapshot(name).files.items():
        stats = json.loads(add.stats or "{}")
        if stats["minValues"]["id"] <= id_ <= stats["maxValues"]["id"]:
            hits.append(path)
    assert len(hits) == 1, hits
    return hits[0]


# ------------------------------------------------------------------------------------------- statements


def test_multi_statement_multi_table(twin: Twin) -> None:
    twin.create("bank.accounts", ACCOUNTS, ACCOUNT_FILES)
    twin.create("bank.events", EVENTS, EVENT_FILES, partition_by=["day"])

    def statements(tx: Transaction, source: Callable[[pa.Table], Any]) -> list[object]:
        out: list[object] = []
        out.append(tx.update("bank.accounts", set={"balance": "balance - 5"}, where="balance >= 50"))
        # read-your-writes: the second statement sees the first one's staged files
        out.append(tx.update("bank.accounts", set={"owner": "upper(owner)", "balance": "balance * 2"}, where="id < 3"))
        out.append(tx.delete("bank.accounts", where="balance < 10"))
        out.append(rows(tx.read_arrow("bank.accounts")))
        out.append(tx.delete("bank.events", where="id = 4 OR amount > 50"))
        out.append(tx.update("bank.events", set={"note": "concat(note, '!')"}, where="day = DATE'2024-01-02'"))
        merged = tx.merge(
            "bank.accounts",
            source(accounts([2, 12, 13, 40], ["B", "C", "D", "new"], [1, 2, -3, 4])),
            on="t.id = s.id",
            when_matched_update={"balance": "t.balance + s.balance", "owner": "s.owner"},
            when_matched_delete="s.balance < 0",
            when_not_matched_insert="*",
        )
        out.append(merged)
        out.append(rows(tx.read_arrow("bank.accounts")))
        return out

    results = twin.run(statements)
    assert results[:3] == [4, 2, 2]
    assert results[4:6] == [2, 2]
    assert results[6] == txlake.MergeMetrics(num_updated=2, num_deleted=1, num_inserted=1)
    twin.assert_same("bank.accounts")
    twin.assert_same("bank.events")
    assert rows(twin.lake.read_arrow("bank.accounts", where="id = 2")) == rows(accounts([2], ["B"], [91]))


def test_dataframe_reads_see_the_rewritten_files(twin: Twin) -> None:
    twin.create("s.t", ACCOUNTS, ACCOUNT_FILES)
    with twin.lake.transaction() as tx:
        assert tx.update("s.t", set={"balance": "0"}, where="owner = 'bob'") == 1
        assert df_rows(tx.read("s.t")) == rows(tx.read_arrow("s.t"))
        assert tx.read("s.t", where="id = 2").collect()[0]["balance"] == 0
        assert tx.delete("s.t") == 9
        assert tx.read("s.t").count() == 0
        tx.append("s.t", accounts([7], ["z"], [7]))
    assert rows(twin.lake.read_arrow("s.t")) == rows(accounts([7], ["z"], [7]))
    assert rows(deltars_read(twin.lake.table_location("s.t"))) == rows(accounts([7], ["z"], [7]))


def test_only_candidate_files_are_rewritten(twin: Twin) -> None:
    twin.create("s.t", ACCOUNTS, ACCOUNT_FILES)
    lake, name = twin.lake, "s.t"
    first, second, third = (file_of(lake, name, i) for i in (1, 11, 21))

    def changed(statement: Callable[[Transaction], object]) -> tuple[object, set[str], set[str]]:
        before = live_files(lake, name)
        with lake.transaction() as tx:
            result = statement(tx)
        after = live_files(lake, name)
        return result, before - after, after - before

    # stats prune to the second file; only it is rewritten
    n, removed, added = changed(lambda tx: tx.update(name, set={"balance": "1"}, where="id = 12"))
    assert (n, removed, len(added)) == (1, {second}, 1)
    second = added.pop()
    # stats admit all three files (balance ranges overlap 60), but only the third holds a 60
    n, removed, added = changed(lambda tx: tx.update(name, set={"owner": "'x'"}, where="balance = 60"))
    assert (n, removed, len(added)) == (1, {third}, 1)
    third = added.pop()
    # candidates without a matching row: nothing is rewritten, nothing committed
    version = lake.version()
    n, removed, added = changed(lambda tx: tx.delete(name, where="balance = 55"))
    assert (n, removed, added) == (0, set(), set())
    assert lake.version() == version
    # a delete of every row of a file drops it without writing a new one
    n, removed, added = changed(lambda tx: tx.delete(name, where="id < 10"))
    assert (n, removed, added) == (3, {first}, set())
    assert live_files(lake, name) == {second, third}
    # the same statements on the Arrow path give the same rows
    with twin.plain.transaction() as tx:
        tx.update(name, set={"balance": "1"}, where="id = 12")
        tx.update(name, set={"owner": "'x'"}, where="balance = 60")
        tx.delete(name, where="balance = 55")
        tx.delete(name, where="id < 10")
    twin.assert_same(name)


def test_partitioned_table(twin: Twin) -> None:
    twin.create("s.ev", EVENTS, EVENT_FILES, partition_by=["day"])
    lake, name = twin.lake, "s.ev"
    by_day = {
        d: {p for p, a in lake.snapshot().delta_snapshot(name).files.items() if a.partition_values["day"] == d}
        for d in ("2024-01-01", "2024-01-02", "2024-01-03")
    }
    assert all(len(files) == 2 for files in by_day.values())
    # a partition predicate deletes whole files: no file is written
    before = live_files(lake, name)
    assert twin.run(lambda tx, _: tx.delete(name, where="day = DATE'2024-01-01'")) == 3
    assert before - live_files(lake, name) == by_day["2024-01-01"]
    assert live_files(lake, name) <= before
    # an update of a non-partition column rewrites the matching files of that partition only
    before = live_files(lake, name)
    assert (
        twin.run(lambda tx, _: tx.update(name, set={"note": "'late'"}, where="day > DATE'2024-01-02' AND id > 5")) == 1
    )
    removed = before - live_files(lake, name)
    assert len(removed) == 1 and removed < by_day["2024-01-03"]
    added = live_files(lake, name) - before
    assert [lake.snapshot().delta_snapshot(name).files[p].partition_values["day"] for p in added] == ["2024-01-03"]
    with lake.transaction() as tx, pytest.raises(ValueError):
        tx.update(name, set={"day": "DATE'2024-02-01'"})
    twin.assert_same(name)


def test_partition_values_that_need_escaping(lake: txlake.Lakehouse) -> None:
    """Rows are traced back to their files also when partition directories are percent-encoded."""
    schema = pa.schema([("id", pa.int64()), ("tag", pa.string())])
    lake.create_table("s.p", schema, partition_by=["tag"])
    tags = ["a b", "100%", "x/y#z", "=?&", None]
    with lake.transaction() as tx:
        tx.append("s.p", pa.table({"id": list(range(len(tags))), "tag": tags}, schema=schema))
    with lake.transaction() as tx:
        assert tx.update("s.p", set={"id": "id + 10"}, where="tag IN ('a b', 'x/y#z') OR tag IS NULL") == 3
        assert tx.delete("s.p", where="tag = '100%' OR id = 12") == 2
    expected = pa.table({"id": [10, 14, 3], "tag": ["a b", None, "=?&"]}, schema=schema)
    assert rows(lake.read_arrow("s.p")) == rows(expected)
    assert rows(deltars_read(lake.table_location("s.p"))) == rows(expected)


def test_nulls_in_conditions(twin: Twin) -> None:
    twin.create("s.t", ACCOUNTS, ACCOUNT_FILES)

    def statements(tx: Transaction, source: Callable[[pa.Table], Any]) -> list[object]:
        return [
            # NULL balances are neither updated nor deleted by a comparison, nor by its negation
            tx.update("s.t", set={"owner": "'rich'"}, where="balance > 60"),
            tx.delete("s.t", where="NOT (balance > 20)"),
            tx.update("s.t", set={"balance": "coalesce(balance, -1)"}, where="balance IS NULL OR owner IS NULL"),
            tx.update("s.t", set={"owner": "NULL"}, where="owner = 'cy' OR owner <=> NULL"),
            # a NULL key never matches: that source row is inserted, the target's NULL-owner rows stay
            tx.merge(
                "s.t",
                source(accounts([98, 99], [None, "fay"], [1, 2])),
                on="t.owner = s.owner",
                when_matched_update={"balance": "s.balance"},
                when_not_matched_insert="*",
            ),
        ]

    assert twin.run(statements) == [2, 3, 2, 2, txlake.MergeMetrics(1, 0, 1)]
    twin.assert_same("s.t")


def test_decimal_date_timestamp_expressions(twin: Twin) -> None:
    twin.create("s.ev", EVENTS, EVENT_FILES)

    def statements(tx: Transaction, source: Callable[[pa.Table], Any]) -> list[object]:
        return [
            # decimal arithmetic rounds half-up to the column's scale (10.25 * 1.5 = 15.375 -> 15.38)
            tx.update("s.ev", set={"amount": "amount * 1.5"}, where="amount BETWEEN 5 AND 15"),
            tx.update(
                "s.ev",
                set={"at": "TIMESTAMP'2023-12-31 12:00:00'", "day": "DATE'2024-06-01'"},
                where="at < TIMESTAMP'2024-01-01 03:00:00' AND day <= DATE'2024-01-01'",
            ),
            tx.delete("s.ev", where="at >= TIMESTAMP'2024-01-01 05:00:00' OR day = DATE'2024-01-03'"),
            tx.update("s.ev", set={"amount": "CAST(amount AS DECIMAL(10, 2)) + 0.005"}, where="id = 5"),
            tx.merge(
                "s.ev",
                source(events([1, 8], [D3, D3], ["0.01", "8.88"], [0, 23])),
                on="t.id = s.id AND t.day = DATE'2024-06-01'",
                when_matched_update={"amount": "t.amount + s.amount", "at": "s.at"},
                when_not_matched_insert="*",
            ),
        ]

    results = twin.run(statements)
    assert results == [2, 2, 3, 1, txlake.MergeMetrics(1, 0, 1)]
    published = {r["id"]: r for r in twin.lake.read_arrow("s.ev").to_pylist()}
    assert published[1]["amount"] == Decimal("15.39")
    assert published[5]["amount"] == Decimal("20.01")
    assert published[2]["day"] == date(2024, 6, 1)
    twin.assert_same("s.ev")


# ---------------------------------------------------------------------------------------------- merge


def test_merge_clauses_and_star_maps(twin: Twin) -> None:
    twin.create("s.t", ACCOUNTS, ACCOUNT_FILES)
    source = accounts([1, 2, 3, 12, 22, 50, 51], ["A", "B", "C", "D", "E", "F", "G"], [1, -1, 3, 4, 5, 6, -7])

    def statements(tx: Transaction, make: Callable[[pa.Table], Any]) -> list[object]:
        return [
            tx.merge(
                "s.t",
                make(source),
                on="t.id = s.id",
                when_matched_delete="s.balance < 0",
                when_matched_update="*",
                when_matched_update_condition="s.owner <> 'C'",
                when_not_matched_insert={"id": "s.id", "owner": "lower(s.owner)"},
                when_not_matched_insert_condition="s.balance > 0",
            ),
            # only an unconditional delete: several matches of one target row are fine
            tx.merge(
                "s.t",
                make(accounts([21, 21, 23], ["x", "y", "z"], [0, 0, 0])),
                on="t.id = s.id",
                when_matched_delete=True,
            ),
            # a condition without an equality: a nested-loop join over every live file
            tx.merge(
                "s.t",
                make(accounts([0], ["zz"], [65])),
                on="t.balance > s.balance",
                when_matched_update={"owner": "concat(t.owner, '+')"},
            ),
            rows(tx.read_arrow("s.t")),
        ]

    results = twin.run(statements)
    assert results[:3] == [txlake.MergeMetrics(3, 1, 1), txlake.MergeMetrics(0, 2, 0), txlake.MergeMetrics(1, 0, 0)]
    twin.assert_same("s.t")


def test_merge_cardinality_error_stages_nothing(lake: txlake.Lakehouse, spark: SparkSession) -> None:
    lake.create_table("m.t", ACCOUNTS)
    for data in ACCOUNT_FILES:
        with lake.transaction() as tx:
            tx.append("m.t", data)
    before = lake.version()
    tx = lake.transaction()
    source = spark.createDataFrame(accounts([11, 12, 12, 13, 13, 60], ["a", "b", "c", "d", "e", "f"], [1] * 6))
    with pytest.raises(MergeCardinalityError) as err:
        tx.merge("m.t", source, on="t.id = s.id", when_matched_update="*", when_not_matched_insert="*")
    assert (err.value.table, err.value.rows) == ("m.t", 2)
    assert txid_files(lake, "m.t", tx.txid) == []
    assert staging_objects(lake, tx.txid) == []
    # the transaction goes on; nothing of the failed statement is committed
    assert tx.update("m.t", set={"balance": "0"}, where="id = 1") == 1
    tx.commit()
    assert lake.version() == before + 1
    assert rows(lake.read_arrow("m.t", where="id >= 11 AND id < 20")) == rows(ACCOUNT_FILES[1])


def test_merge_prunes_target_files_by_source_key_range(one_lake: txlake.Lakehouse, spark: SparkSession) -> None:
    lake, name = one_lake, "m.t"
    lake.create_table(name, ACCOUNTS)
    for data in ACCOUNT_FILES:
        with lake.transaction() as tx:
            tx.append(name, data)
    second = file_of(lake, name, 11)
    plain = txlake.connect(lake.store.uri)

    def merge(tx: Transaction) -> txlake.MergeMetrics:
        source = spark.createDataFrame(accounts([12, 14], ["u", "new"], [1, 2]))
        return tx.merge(name, source, on="s.id = t.id", when_matched_update="*", when_not_matched_insert="*")

    # a concurrent append outside the source's key range [12, 14] does not conflict (the read set is the range)
    tx = lake.transaction(isolation="write_serializable")
    assert merge(tx) == txlake.MergeMetrics(1, 0, 1)
    with plain.transaction() as other:
        other.append(name, accounts([30], ["late"], [1]))
    before = live_files(lake, name)
    tx.commit()
    assert before - live_files(lake, name) == {second}
    # one inside the range does: the merge would have matched it
    tx = lake.transaction(isolation="write_serializable", redo=False)
    merge(tx)
    with plain.transaction() as other:
        other.append(name, accounts([14], ["in"], [1]))
    with pytest.raises(ConcurrentAppendError) as err:
        tx.commit()
    assert err.value.table == name
    # with redo (the default) the merge runs again as a Spark job over the newer table: it matches the 17
    # appended meanwhile, so 17 is updated, not inserted a second time
    tx = lake.transaction(isolation="write_serializable")
    source = spark.createDataFrame(accounts([12, 17], ["u", "new"], [1, 2]))
    tx.merge(name, source, on="s.id = t.id", when_matched_update="*", when_not_matched_insert="*")
    with plain.transaction() as other:
        other.append(name, accounts([17], ["in"], [1]))
    assert tx.commit().redone == 1
    seventeen = lake.read_arrow(name, where="id = 17").to_pylist()
    assert [(r["owner"], r["balance"]) for r in seventeen] == [("new", 2)]


def test_merge_a_table_into_itself_and_dml_on_a_new_table(one_lake: txlake.Lakehouse, spark: SparkSession) -> None:
    lake, name = one_lake, "s.t"
    lake.create_table(name, ACCOUNTS)
    for data in ACCOUNT_FILES:
        with lake.transaction() as tx:
            tx.append(name, data)
    with lake.transaction() as tx:
        copies = tx.read(name, where="balance IS NOT NULL").selectExpr("id + 100 AS id", "owner", "balance")
        assert tx.merge(name, copies, on="t.id = s.id", when_not_matched_insert="*") == txlake.MergeMetrics(0, 0, 7)
        # the source reads this transaction's own staged files; the merge rewrites the original ones
        back = tx.read(name, where="id > 100").selectExpr("id - 100 AS id", "balance")
        assert tx.merge(
            name, back, on="t.id = s.id", when_matched_update={"balance": "t.balance + s.balance"}
        ) == txlake.MergeMetrics(7, 0, 0)
        # a table created in this transaction
        tx.create_table("s.new", ACCOUNTS)
        tx.append("s.new", spark.createDataFrame(ACCOUNT_FILES[2]))
        assert tx.update("s.new", set={"owner": "'z'"}, where="balance > 0") == 2
        assert tx.delete("s.new", where="owner = 'z'") == 2
    got = {r["id"]: r["balance"] for r in lake.read_arrow(name).to_pylist()}
    assert (got[1], got[101], got[23], got[3], len(got)) == (200, 100, 0, None, 16)
    assert rows(lake.read_arrow("s.new")) == rows(accounts([23], ["gus"], [0]))
    assert rows(deltars_read(lake.table_location("s.new"))) == rows(accounts([23], ["gus"], [0]))


# ------------------------------------------------------------------------------------- conflicts, errors


def test_spark_update_conflicts_with_arrow_update_of_the_same_file(one_lake: txlake.Lakehouse) -> None:
    lake, name = one_lake, "c.t"
    lake.create_table(name, ACCOUNTS)
    for data in ACCOUNT_FILES:
        with lake.transaction() as tx:
            tx.append(name, data)
    plain = txlake.connect(lake.store.uri)
    target = file_of(lake, name, 1)
    # the Spark update loses against an Arrow update of another row of the same file
    spark_tx = lake.transaction(isolation="snapshot", redo=False)
    assert spark_tx.update(name, set={"balance": "balance + 1"}, where="id = 1") == 1
    with plain.transaction(isolation="snapshot") as arrow_tx:
        assert arrow_tx.update(name, set={"balance": "balance + 1"}, where="id = 2") == 1
    with pytest.raises(ConflictError) as err:
        spark_tx.commit()
    assert err.value.table == name
    assert target in err.value.files
    # the other way round: the Arrow update loses
    target = file_of(lake, name, 1)
    arrow_tx = plain.transaction(isolation="snapshot", redo=False)
    arrow_tx.update(name, set={"balance": "0"}, where="id = 1")
    with lake.transaction(isolation="snapshot") as tx:
        tx.update(name, set={"balance": "0"}, where="id = 3")
    with pytest.raises(ConflictError) as err:
        arrow_tx.commit()
    assert target in err.value.files
    # updates of rows in different files do not conflict
    with lake.transaction(isolation="serializable") as tx:
        tx.update(name, set={"owner": "'a'"}, where="id = 11")
        with plain.transaction(isolation="serializable") as other:
            other.update(name, set={"owner": "'b'"}, where="id = 21")
    got = {r["id"]: r["owner"] for r in lake.read_arrow(name).to_pylist()}
    assert (got[1], got[2], got[3], got[11], got[21]) == ("ann", "bob", None, "a", "b")
    assert {r["id"]: r["balance"] for r in lake.read_arrow(name, where="id <= 3").to_pylist()} == {1: 100, 2: 51, 3: 0}
    # with redo, the Spark update that lost runs again as a Spark job on the newer file: both updates stand
    spark_tx = lake.transaction(isolation="snapshot")
    spark_tx.update(name, set={"balance": "balance + 1"}, where="id = 1")
    with plain.transaction(isolation="snapshot") as arrow_tx:
        arrow_tx.update(name, set={"balance": "balance + 1"}, where="id = 2")
    assert spark_tx.commit().redone == 1
    assert {r["id"]: r["balance"] for r in lake.read_arrow(name, where="id <= 2").to_pylist()} == {1: 101, 2: 52}


def test_spark_only_condition_and_forced_arrow_path(one_lake: txlake.Lakehouse, tmp_path: Path) -> None:
    lake, name = one_lake, "s.t"
    lake.create_table(name, ACCOUNTS)
    for data in ACCOUNT_FILES:
        with lake.transaction() as tx:
            tx.append(name, data)
    with lake.transaction() as tx:
        # a function txlake's predicates do not know: Spark evaluates it, the read set is the whole table
        assert tx.update(name, set={"balance": "balance + 1"}, where="instr(owner, 'e') > 0") == 2
        assert tx.delete(name, where="id = 1", engine="arrow") == 1
        with pytest.raises(PredicateError):
            tx.update(name, set={"balance": "1"}, where="instr(owner, 'e') > 0", engine="arrow")
    got = {r["id"]: r["balance"] for r in lake.read_arrow(name).to_pylist()}
    assert (1 in got, got[13], got[21], got[22]) == (False, 71, 6, 60)
    plain = txlake.connect((tmp_path / "plain").as_uri())
    plain.create_table(name, ACCOUNTS)
    with plain.transaction() as tx, pytest.raises(NoDataEngineError):
        tx.delete(name, engine="spark")


def test_bad_statements_raise_typed_errors_and_stage_nothing(one_lake: txlake.Lakehouse, spark: SparkSession) -> None:
    lake, name = one_lake, "s.t"
    lake.create_table(name, ACCOUNTS)
    with lake.transaction() as tx:
        tx.append(name, ACCOUNT_FILES[0])
    tx = lake.transaction()
    with pytest.raises(PredicateError):
        tx.update(name, set={"balance": "1"}, where="nope = 1")
    with pytest.raises(PredicateError):
        tx.delete(name, where="balance +")
    with pytest.raises(PredicateError):
        tx.delete(name, where="balance + 1")  # not a condition
    with pytest.raises(SchemaMismatchError) as err:
        tx.update(name, set={"balance": "owner"})
    assert err.value.columns == ("balance",)
    with pytest.raises(SchemaMismatchError):
        tx.update(name, set={"nope": "1"})
    source = spark.createDataFrame(accounts([1], ["x"], [1])).drop("balance")
    with pytest.raises(SchemaMismatchError):
        tx.merge(name, source, on="t.id = s.id", when_not_matched_insert="*")
    with pytest.raises(PredicateError):
        tx.merge(name, source, on="t.id = s.nope", when_matched_delete=True)
    with pytest.raises(ValueError):
        tx.merge(name, source, on="t.id = s.id")
    assert txid_files(lake, name, tx.txid) == []
    tx.commit()
    assert rows(lake.read_arrow(name)) == rows(ACCOUNT_FILES[0])


def test_an_append_only_table_refuses_spark_statements_before_any_job(
    one_lake: txlake.Lakehouse, spark: SparkSession
) -> None:
    """``delta.appendOnly=true`` on the Spark path: DELETE, UPDATE, overwrite and MERGE with matched clauses
    are refused (:class:`AppendOnlyTableError`) and write nothing; appending a DataFrame works."""
    lake, name = one_lake, "s.t"
    lake.create_table(name, ACCOUNTS, properties={"delta.appendOnly": "true"})
    with lake.transaction() as tx:
        tx.append(name, ACCOUNT_FILES[0])
    source = spark.createDataFrame(accounts([1], ["x"], [1]))
    tx = lake.transaction()
    with pytest.raises(AppendOnlyTableError):
        tx.delete(name, where="id = 1", engine="spark")
    with pytest.raises(AppendOnlyTableError):
        tx.update(name, set={"balance": "1"}, engine="spark")
    with pytest.raises(AppendOnlyTableError):
        tx.overwrite(name, source)
    with pytest.raises(AppendOnlyTableError):
        tx.merge(name, source, on="t.id = s.id", when_matched_update="*")
    assert txid_files(lake, name, tx.txid) == []
    tx.append(name, spark.createDataFrame(accounts([99], ["new"], [0])))
    tx.commit()
    assert sorted(lake.read_arrow(name)["id"].to_pylist()) == sorted([*ACCOUNT_FILES[0]["id"].to_pylist(), 99])
