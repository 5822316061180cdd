"""Delta file statistics: every value written must be a true bound, or be left out."""

from __future__ import annotations

import json
import math
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from txlake.delta import DeltaTable, compute_stats
from txlake.storage import ObjectStore


def stats(**columns: Any) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(compute_stats(pa.table(columns)))
    return doc


def test_integers() -> None:
    s = stats(x=pa.array([3, None, -7, 12], pa.int64()), y=pa.array([1, 2, 3, 4], pa.int8()))
    assert s == {
        "numRecords": 4,
        "minValues": {"x": -7, "y": 1},
        "maxValues": {"x": 12, "y": 4},
        "nullCount": {"x": 1, "y": 0},
    }


def test_floats() -> None:
    s = stats(f=pa.array([1.5, -2.25, None], pa.float64()), g=pa.array([0.5, 0.25], pa.float32()).take([0, 1, 1]))
    assert s["minValues"] == {"f": -2.25, "g": 0.25}
    assert s["maxValues"] == {"f": 1.5, "g": 0.5}
    assert s["nullCount"] == {"f": 1, "g": 0}


@pytest.mark.parametrize("poison", [float("nan"), float("inf"), float("-inf")], ids=str)
def test_nan_and_infinities_give_no_false_bounds(poison: float) -> None:
    s = stats(f=pa.array([1.0, poison, 3.0]))
    if math.isnan(poison):  # no min and no max at all
        assert "f" not in s["minValues"]
        assert "f" not in s["maxValues"]
    # an infinite value may only ever be left out, never replaced by a finite bound that excludes it
    if poison == float("inf"):
        assert "f" not in s["maxValues"]
    if poison == float("-inf"):
        assert "f" not in s["minValues"]
    assert s["nullCount"] == {"f": 0}


def test_short_strings_have_exact_bounds() -> None:
    s = stats(s=["pear", "apple", None, "zebra"])
    assert s["minValues"] == {"s": "apple"}
    assert s["maxValues"] == {"s": "zebra"}
    assert s["nullCount"] == {"s": 1}


def test_long_strings_min_is_a_prefix_and_max_is_dropped() -> None:
    low = "a" * 40
    high = "b" * 33
    s = stats(s=[high, low])
    assert s["minValues"]["s"] == "a" * 32
    assert low.startswith(s["minValues"]["s"])
    assert "s" not in s["maxValues"]


def test_long_min_with_short_max_keeps_the_max() -> None:
    s = stats(s=["a" * 100, "b"])
    assert s["minValues"]["s"] == "a" * 32
    assert s["maxValues"]["s"] == "b"


def test_string_of_exactly_32_chars_is_kept_whole() -> None:
    value = "x" * 32
    s = stats(s=[value])
    assert s["minValues"]["s"] == value
    assert s["maxValues"]["s"] == value


def test_large_string_columns_have_stats() -> None:
    s = stats(s=pa.array(["b", "a"], pa.large_string()))
    assert (s["minValues"]["s"], s["maxValues"]["s"]) == ("a", "b")


def test_timestamps_have_millisecond_precision_and_max_rounds_up() -> None:
    lo = datetime(2024, 1, 1, 12, 0, 0, 1500, tzinfo=UTC)
    hi = datetime(2024, 1, 2, 23, 59, 59, 999_001, tzinfo=UTC)
    s = stats(t=pa.array([hi, lo, None], pa.timestamp("us", tz="UTC")))
    assert s["minValues"]["t"] == "2024-01-01T12:00:00.001Z"  # floor: still <= the real minimum
    assert s["maxValues"]["t"] == "2024-01-03T00:00:00.000Z"  # ceiling, carried into the next day
    assert s["nullCount"]["t"] == 1
    assert datetime.fromisoformat(s["maxValues"]["t"]) >= hi
    assert datetime.fromisoformat(s["minValues"]["t"]) <= lo


def test_a_max_that_cannot_round_up_is_left_out() -> None:
    last = datetime(9999, 12, 31, 23, 59, 59, 999999)
    s = stats(ts=pa.array([datetime(2000, 1, 1), last], pa.timestamp("us")))
    assert s["minValues"] == {"ts": "2000-01-01T00:00:00.000"}
    assert s["maxValues"] == {}


def test_whole_millisecond_timestamps_are_exact() -> None:
    t = datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)
    s = stats(t=pa.array([t], pa.timestamp("us", tz="UTC")))
    assert s["minValues"]["t"] == s["maxValues"]["t"] == "2024-05-06T07:08:09.123Z"


def test_timestamps_in_other_zones_are_written_in_utc() -> None:
    t = datetime(2024, 1, 1, 12, 0, tzinfo=timezone(timedelta(hours=-5)))
    s = stats(t=pa.array([t], pa.timestamp("us", tz="America/New_York")))
    assert s["minValues"]["t"] == "2024-01-01T17:00:00.000Z"


def test_timestamp_ntz_has_no_zone_suffix() -> None:
    t = datetime(2024, 1, 1, 12, 0, 0, 500)
    s = stats(t=pa.array([t], pa.timestamp("us")))
    assert s["minValues"]["t"] == "2024-01-01T12:00:00.000"
    assert s["maxValues"]["t"] == "2024-01-01T12:00:00.001"


def test_dates() -> None:
    s = stats(d=pa.array([date(2024, 2, 29), None, date(1999, 12, 31)]))
    assert s["minValues"] == {"d": "1999-12-31"}
    assert s["maxValues"] == {"d": "2024-02-29"}
    assert s["nullCount"] == {"d": 1}


def test_decimals() -> None:
    s = stats(d=pa.array([Decimal("1.10"), Decimal("-2.25"), None], pa.decimal128(5, 2)))
    assert s["minValues"] == {"d": -2.25}
    assert s["maxValues"] == {"d": 1.1}
    assert s["nullCount"] == {"d": 1}


def test_decimals_a_float_cannot_hold_exactly_are_left_out() -> None:
    big = Decimal("12345678901234567890.123")
    s = stats(d=pa.array([big], pa.decimal128(23, 3)))
    assert "d" not in s["minValues"]
    assert "d" not in s["maxValues"]


def test_nested_struct_stats_and_parent_nulls() -> None:
    dtype = pa.struct([("a", pa.int64()), ("b", pa.struct([("c", pa.string())]))])
    col = pa.array([{"a": 5, "b": {"c": "x"}}, {"a": None, "b": {"c": "y"}}, None, {"a": 1, "b": None}], dtype)
    s = stats(s=col)
    assert s["minValues"] == {"s": {"a": 1, "b": {"c": "x"}}}
    assert s["maxValues"] == {"s": {"a": 5, "b": {"c": "y"}}}
    # row 3 is a null struct: each child counts it; row 4 has a null ``b``: ``c`` counts it too
    assert s["nullCount"] == {"s": {"a": 2, "b": {"c": 2}}}


def test_all_null_columns_have_only_null_counts() -> None:
    s = stats(x=pa.nulls(3, pa.int64()), s=pa.nulls(3, pa.string()), n=pa.nulls(3))
    assert s == {"numRecords": 3, "minValues": {}, "maxValues": {}, "nullCount": {"x": 3, "s": 3, "n": 3}}


def test_types_without_order_only_have_null_counts() -> None:
    s = stats(b=[True, False, None], bin=[b"a", None, b"z"], l=pa.array([[1], None, []]))
    assert s["minValues"] == {}
    assert s["maxValues"] == {}
    assert s["nullCount"] == {"b": 1, "bin": 1, "l": 1}


def test_empty_table() -> None:
    s = stats(x=pa.array([], pa.int64()))
    assert s == {"numRecords": 0, "minValues": {}, "maxValues": {}, "nullCount": {"x": 0}}


def test_appended_files_carry_stats_as_a_json_string(store: ObjectStore) -> None:
    schema = pa.schema([("id", pa.int64()), ("p", pa.string()), ("t", pa.timestamp("us", tz="UTC"))])
    table = DeltaTable.create(store, "t", schema, partition_by=["p"])
    ts = datetime(2024, 1, 1, 0, 0, 0, 1, tzinfo=UTC)
    table.append(pa.table({"id": [1, 2, 3], "p": ["a", "a", "b"], "t": [ts, None, ts]}, schema=schema))
    raw = store.get(table.log.commit_path(1)).decode().splitlines()
    adds = [json.loads(line)["add"] for line in raw if line.startswith('{"add"')]
    assert len(adds) == 2
    by_part = {a["partitionValues"]["p"]: json.loads(a["stats"]) for a in adds}
    assert all(isinstance(a["stats"], str) for a in adds)
    assert by_part["a"] == {
        "numRecords": 2,
        "minValues": {"id": 1, "t": "2024-01-01T00:00:00.000Z"},
        "maxValues": {"id": 2, "t": "2024-01-01T00:00:00.001Z"},
        "nullCount": {"id": 0, "t": 1},  # partition columns are not in file stats
    }
    assert by_part["b"]["numRecords"] == 1
    assert table.snapshot().num_records == 3
