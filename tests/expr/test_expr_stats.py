"""FileStats from real add actions, and the precision of statistics pruning (may_match)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pyarrow as pa
import pytest

from txlake.delta.actions import Add
from txlake.delta.files import compute_stats, write_data_files
from txlake.expr import FileStats, parse_predicate
from txlake.storage import ObjectStore

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("name", pa.string()),
        pa.field("d", pa.date32()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("ntz", pa.timestamp("us")),
        pa.field("amount", pa.decimal128(10, 2)),
        pa.field("f", pa.float64()),
        pa.field("s", pa.struct([pa.field("a", pa.int32()), pa.field("b", pa.string())])),
        pa.field("empty", pa.int32()),
        pa.field("part", pa.string()),
    ]
)


def sample(part: str, ids: list[int]) -> pa.Table:
    n = len(ids)
    return pa.table(
        {
            "id": ids,
            "name": [f"n{i:02d}" for i in ids],
            "d": [date(2020, 1, 1) + timedelta(days=i) for i in ids],
            "ts": [datetime(2020, 1, 1, 0, 0, 0, 123456, tzinfo=UTC) + timedelta(hours=i) for i in ids],
            "ntz": [datetime(2021, 1, 1) + timedelta(minutes=i) for i in ids],
            "amount": [Decimal(i) / 4 for i in ids],
            "f": [i * 0.5 for i in ids],
            "s": [{"a": i, "b": None} for i in ids],
            "empty": pa.nulls(n, pa.int32()),
            "part": [part] * n,
        },
        schema=SCHEMA,
    )


@pytest.fixture
def adds() -> dict[str, Add]:
    store = ObjectStore.from_uri(f"memory://{uuid.uuid4()}")
    data = pa.concat_tables([sample("a", list(range(1, 11))), sample("b", list(range(100, 105)))])
    written = write_data_files(store, "tbl", data, partition_columns=["part"])
    return {a.partition_values["part"] or "": a for a in written}


def file_stats(add: Add) -> FileStats:
    return FileStats.from_add(add, SCHEMA, ["part"])


def test_stats_from_real_add_are_typed(adds: dict[str, Add]) -> None:
    stats = file_stats(adds["a"])
    assert stats.num_records == 10
    assert stats.min_values["id"] == 1
    assert stats.max_values["id"] == 10
    assert stats.min_values["name"] == "n01"
    assert stats.min_values["d"] == date(2020, 1, 2)
    assert isinstance(stats.max_values["d"], date)
    lo, hi = stats.min_values["ts"], stats.max_values["ts"]
    assert isinstance(lo, datetime)
    assert lo.tzinfo is not None
    # millisecond stats: min truncated down, max rounded up (and widened by 1 ms for foreign writers)
    assert lo <= datetime(2020, 1, 1, 1, 0, 0, 123456, tzinfo=UTC)
    assert hi >= datetime(2020, 1, 1, 10, 0, 0, 123456, tzinfo=UTC)
    assert stats.min_values["ntz"].tzinfo is None
    assert stats.min_values["amount"] == Decimal("0.25")
    assert isinstance(stats.max_values["amount"], Decimal)
    assert stats.min_values["f"] <= 0.5 <= stats.max_values["f"]
    assert stats.min_values["s"] == {"a": 1}
    assert stats.null_count["s"] == {"a": 0, "b": 10}
    assert "empty" not in stats.min_values
    assert stats.null_count["empty"] == 10
    assert stats.min_values["part"] == stats.max_values["part"] == "a"
    assert stats.null_count["part"] == 0


def test_column_lookup_reports_missing_entries_as_none(adds: dict[str, Add]) -> None:
    stats = file_stats(adds["a"])
    child = stats.column("s", ["a"])
    assert (child.lo, child.hi, child.null_count, child.num_records) == (1, 10, 0, 10)
    nothing = stats.column("nope")
    assert (nothing.lo, nothing.hi, nothing.null_count) == (None, None, None)
    assert nothing.may_have_nulls
    assert nothing.may_have_values


@pytest.mark.parametrize(
    "sql",
    [
        "id > 100",
        "id < 1",
        "id = 11",
        "id >= 11",
        "100 < id",
        "NOT (id <= 10)",
        "id IN (0, 11, 50)",
        "id NOT IN (1, 2, 3, 4, 5, 6, 7, 8, 9, 10) AND id > 10",
        "id BETWEEN 20 AND 30",
        "id IS NULL",
        "empty IS NOT NULL",
        "empty = 1",
        "id = NULL",
        "id > 100 OR name = 'zzz'",
        "name LIKE 'x%'",
        "name LIKE 'n2%'",
        "name = 'm'",
        "d < '2020-01-01'",
        "d > DATE '2020-02-01'",
        "d >= TIMESTAMP '2020-01-12 00:00:00'",
        "ts > '2020-01-02'",
        "ts < TIMESTAMP '2019-12-31 23:00:00'",
        "ntz > '2021-01-02'",
        "amount > 3",
        "amount < 0.25",
        "amount = 2.75",
        "amount IN (0.2, 3)",
        "f < 0.25",  # (f > 5.5 may match: a NaN row, which no stats bound, is above every number in Spark)
        "s.a > 10",
        "part = 'b'",
        "part <> 'a'",
        "part IN ('b', 'c')",
        "part IS NULL",
        "id + 0 > 100 AND part = 'b'",
        "NOT (part = 'a' OR id < 1000)",
        "(id > 100) IS TRUE",
        "(id < 100) IS FALSE",
        "(id < 100) = FALSE",
        "(id > 100) != FALSE",
        "id <=> 50",
    ],
)
def test_clearly_disjoint_predicates_skip_the_file(adds: dict[str, Add], sql: str) -> None:
    bound = parse_predicate(sql).bind(SCHEMA)
    assert bound.may_match(file_stats(adds["a"])) is False
    data = sample("a", list(range(1, 11)))
    assert bound.filter(data).num_rows == 0  # the claim is true


@pytest.mark.parametrize(
    "sql",
    [
        "id = 5",
        "id >= 10",
        "id <= 1",
        "id != 5",
        "NOT (id = 5)",
        "id IN (10, 11)",
        "id BETWEEN 0 AND 1",
        "id IS NOT NULL",
        "empty IS NULL",
        "name LIKE 'n0%'",
        "name LIKE '%1'",
        "name > 'n09'",
        "d = '2020-01-05'",
        "ts >= '2020-01-01 10:00:00.123'",
        "amount = 2.5",
        "f = 5.0",
        "s.a = 10",
        "part = 'a'",
        "abs(id) > 100",
        "id > 100 OR upper(name) = 'X'",
        "CASE WHEN id > 100 THEN TRUE ELSE FALSE END",
        "id <=> NULL OR id = 3",
        "(id > 5) IS TRUE",
        "(id > 5) = FALSE",
        "(empty > 5) IS NOT TRUE",
    ],
)
def test_possibly_matching_predicates_keep_the_file(adds: dict[str, Add], sql: str) -> None:
    assert parse_predicate(sql).bind(SCHEMA).may_match(file_stats(adds["a"])) is True


def test_min_equals_max_allows_pruning_negations() -> None:
    add = Add(path="x", partition_values={}, size=1, modification_time=0, stats=compute_stats(pa.table({"k": [7, 7]})))
    schema = pa.schema([pa.field("k", pa.int64())])
    stats = FileStats.from_add(add, schema, [])
    for sql, expected in [("k != 7", False), ("NOT k = 7", False), ("k NOT IN (7, 8)", False), ("k <> 8", True)]:
        assert parse_predicate(sql).bind(schema).may_match(stats) is expected, sql


def test_missing_or_broken_stats_mean_may_match() -> None:
    schema = pa.schema([pa.field("k", pa.int64())])
    pred = parse_predicate("k > 100").bind(schema)
    for raw in [None, "", "not json", "[1, 2]", '{"numRecords": 3}', '{"minValues": {"k": "x"}}']:
        add = Add(path="x", partition_values={}, size=1, modification_time=0, stats=raw)
        assert pred.may_match(FileStats.from_add(add, schema, [])) is True
    assert pred.may_match(FileStats.unknown()) is True


def test_empty_file_never_matches() -> None:
    schema = pa.schema([pa.field("k", pa.int64())])
    stats = FileStats.from_json(json.dumps({"numRecords": 0}), schema)
    assert parse_predicate("TRUE").bind(schema).may_match(stats) is False


def test_null_partition_value_is_all_nulls() -> None:
    schema = pa.schema([pa.field("k", pa.int64()), pa.field("p", pa.int32())])
    add = Add(path="x", partition_values={"p": None}, size=1, modification_time=0, stats='{"numRecords": 4}')
    stats = FileStats.from_add(add, schema, ["p"])
    assert stats.null_count["p"] == 4
    assert parse_predicate("p = 1").bind(schema).may_match(stats) is False
    assert parse_predicate("p IS NULL").bind(schema).may_match(stats) is True
    assert parse_predicate("p IS NOT NULL").bind(schema).may_match(stats) is False


def test_partition_value_missing_from_add_is_unknown_not_null() -> None:
    schema = pa.schema([pa.field("k", pa.int64()), pa.field("p", pa.int32())])
    add = Add(path="x", partition_values={"col-1234": "5"}, size=1, modification_time=0, stats='{"numRecords": 4}')
    stats = FileStats.from_add(add, schema, ["p"])
    assert parse_predicate("p = 5").bind(schema).may_match(stats) is True
    assert parse_predicate("p IS NULL").bind(schema).may_match(stats) is True


def test_typed_partition_values() -> None:
    schema = pa.schema([pa.field("day", pa.date32()), pa.field("n", pa.int64()), pa.field("amt", pa.decimal128(5, 1))])
    add = Add(path="x", partition_values={"day": "2020-03-04", "n": "7", "amt": "1.5"}, size=1, modification_time=0)
    stats = FileStats.from_add(add, schema, ["day", "n", "amt"])
    assert stats.min_values == {"day": date(2020, 3, 4), "n": 7, "amt": Decimal("1.5")}
    assert parse_predicate("day = '2020-03-04' AND n = 7 AND amt = 1.5").bind(schema).may_match(stats)
    assert not parse_predicate("day > '2020-03-04'").bind(schema).may_match(stats)
    assert not parse_predicate("n != 7").bind(schema).may_match(stats)


def test_timestamp_max_truncated_by_foreign_writer_still_bounds() -> None:
    # Spark truncates max stats to milliseconds: the true max 00:00:00.000900 is stored as .000
    schema = pa.schema([pa.field("ts", pa.timestamp("us", tz="UTC"))])
    raw = {
        "numRecords": 1,
        "minValues": {"ts": "2020-01-01T00:00:00.000Z"},
        "maxValues": {"ts": "2020-01-01T00:00:00.000Z"},
    }
    stats = FileStats.from_json(json.dumps(raw), schema)
    assert parse_predicate("ts > '2020-01-01 00:00:00.0005'").bind(schema).may_match(stats)


def test_long_strings_use_prefix_min_and_no_max() -> None:
    schema = pa.schema([pa.field("s", pa.string())])
    long_value = "m" * 40
    add = Add(
        path="x", partition_values={}, size=1, modification_time=0, stats=compute_stats(pa.table({"s": [long_value]}))
    )
    stats = FileStats.from_add(add, schema, [])
    assert stats.min_values["s"] == "m" * 32
    assert "s" not in stats.max_values
    assert parse_predicate(f"s = '{long_value}'").bind(schema).may_match(stats)
    assert parse_predicate("s > 'zzz'").bind(schema).may_match(stats)
    assert not parse_predicate("s < 'a'").bind(schema).may_match(stats)
    assert parse_predicate(f"s != '{long_value}'").bind(schema).may_match(stats) is not False


def test_float_stats_with_nan_rows_stay_sound() -> None:
    schema = pa.schema([pa.field("f", pa.float64())])
    # a foreign writer whose min/max ignore NaN
    raw = {"numRecords": 2, "minValues": {"f": 1.0}, "maxValues": {"f": 1.0}, "nullCount": {"f": 0}}
    stats = FileStats.from_json(json.dumps(raw), schema)
    assert parse_predicate("f != 1.0").bind(schema).may_match(stats)
    assert parse_predicate("NOT f > 0").bind(schema).may_match(stats)
    assert parse_predicate("f > 2").bind(schema).may_match(stats)  # Spark: NaN > 2
    assert parse_predicate("f = double('NaN')").bind(schema).may_match(stats)
    assert not parse_predicate("f < 0.5").bind(schema).may_match(stats)  # NaN < 0.5 is false too


def test_nan_compares_as_in_spark() -> None:
    """NaN = NaN, and NaN is above every number (Spark SQL), in filters and DML alike."""
    schema = pa.schema([pa.field("d", pa.float64())])
    data = pa.table({"d": pa.array([float("nan"), float("inf"), 0.5, None], pa.float64())}, schema=schema)
    cases = {
        "d > 1": [float("inf"), "nan"],
        "d >= double('NaN')": ["nan"],
        "d = double('NaN')": ["nan"],
        "d < 1": [0.5],
        "d != 0.5": [float("inf"), "nan"],
        "d <=> double('NaN')": ["nan"],
        "NOT d > 1": [0.5],
    }
    for sql, expected in cases.items():
        rows = parse_predicate(sql).bind(schema).filter(data)["d"].to_pylist()
        assert sorted(map(str, rows)) == sorted(map(str, expected)), sql


def test_float32_stats_written_as_short_decimals() -> None:
    schema = pa.schema([pa.field("g", pa.float32())])
    raw = {"numRecords": 1, "minValues": {"g": 0.1}, "maxValues": {"g": 0.1}, "nullCount": {"g": 0}}
    stats = FileStats.from_json(json.dumps(raw), schema)
    data = pa.table({"g": pa.array([0.1], pa.float32())})
    pred = parse_predicate("g >= 0.10000000149011612").bind(schema)
    assert pred.filter(data).num_rows == 1
    assert pred.may_match(stats)


def test_nan_in_functions_and_column_lists_as_in_spark() -> None:
    schema = pa.schema([pa.field("d", pa.float64()), pa.field("e", pa.float64())])
    nan = float("nan")
    data = pa.table({"d": [nan, 1.0, 200.0], "e": [nan, 2.0, 0.0]}, schema=schema)
    cases = {
        "d IN (e)": ["nan"],
        "greatest(d, 0) > 100": ["200.0", "nan"],
        "nullif(d, e) IS NULL": ["nan"],
        "least(d, 0) < 1": ["1.0", "200.0", "nan"],
    }
    for sql, expected in cases.items():
        rows = parse_predicate(sql).bind(schema).filter(data)["d"].to_pylist()
        assert sorted(map(str, rows)) == expected, sql
