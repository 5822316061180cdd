"""Cross-engine tests: what txlake writes, delta-rs reads and extends, and the reverse, on file:// and S3.

At every version both clients must list the same live files and return the same rows; delta-rs must also
prune files with txlake's statistics without losing rows, read txlake's checkpoints, and its history must
parse every commit txlake wrote. Time travel by timestamp must pick the same version in both.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from tests.interop.deltars import TableLocation, assert_same_version, deltars_files, rows, txlake_files
from txlake.delta import DeltaTable, commit_info, read_files
from txlake.delta.actions import Action
from txlake.errors import DataFileNotFoundError, VersionNotFoundError
from txlake.storage import ObjectStore

# ------------------------------------------------------------------------------------------------ data

RICH_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("i8", pa.int8()),
        ("i16", pa.int16()),
        ("i32", pa.int32()),
        ("f32", pa.float32()),
        ("f64", pa.float64()),
        ("dec", pa.decimal128(10, 2)),
        ("dec38", pa.decimal128(38, 10)),
        ("s", pa.string()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("tsn", pa.timestamp("us")),
        ("flag", pa.bool_()),
        ("bin", pa.binary()),
        ("st", pa.struct([("x", pa.int32()), ("y", pa.string()), ("inner", pa.struct([("z", pa.float64())]))])),
        ("l", pa.list_(pa.int64())),
        ("m", pa.map_(pa.string(), pa.int64())),
        ("part", pa.string()),
        ("grp", pa.int32()),
        ("day", pa.date32()),
        ("pts", pa.timestamp("us", tz="UTC")),
    ]
)
EPOCH = datetime(2024, 1, 1, tzinfo=UTC)
PARTS = ["a b", "x/y", None, "é%=&?#", "plain"]

# Layouts: no partitions; a string partition whose values need escaping; several typed partitions.
LAYOUTS = {"unpartitioned": (), "string": ("part",), "typed": ("grp", "day", "pts")}


def rich_row(i: int, *, extra: bool = False) -> dict[str, Any]:
    """One row of RICH_SCHEMA; every 7th row has nulls in all nullable columns."""
    null = i % 7 == 3
    strings = [f"s{i:04d}", f"ünï-{i}", "x" * 40 + str(i), ""]
    special = {5: math.nan, 6: math.inf, 9: -math.inf, 13: -0.0}
    row: dict[str, Any] = {
        "id": i,
        "i8": (i % 200) - 100,
        "i16": i * 3 - 500,
        "i32": i * 1000,
        "f32": i / 4,
        "f64": special.get(i, i / 3),
        "dec": Decimal(i * 7).scaleb(-2),
        "dec38": Decimal(f"{i}1234567890123456.1234567891"),
        "s": strings[i % len(strings)],
        "d": date(2024, 1, 1) + timedelta(days=i),
        "ts": EPOCH + timedelta(hours=i, microseconds=i * 1001),
        "tsn": datetime(2024, 1, 1) + timedelta(minutes=i, microseconds=i * 7),
        "flag": i % 2 == 0,
        "bin": bytes([i % 256, 0, 255]),
        "st": {"x": i, "y": f"y{i}", "inner": {"z": i / 2}},
        "l": [i, None, i + 1] if i % 3 else [],
        "m": [("k", i), ("j", None)],
        "part": PARTS[i % len(PARTS)],
        "grp": i % 3,
        "day": date(2024, 1, 1 + i % 2),
        "pts": EPOCH + timedelta(hours=i % 2, microseconds=123456),
    }
    if null:
        row = {k: (v if k == "id" else None) for k, v in row.items()}
    if extra:
        row["extra"] = None if null else f"e{i}"
    return row


def rich_batch(start: int, n: int, *, schema: pa.Schema = RICH_SCHEMA, extra: bool = False) -> pa.Table:
    return pa.Table.from_pylist([rich_row(i, extra=extra) for i in range(start, start + n)], schema=schema)


def _cmp(col: str, op: Callable[[Any, Any], bool], value: Any) -> Callable[[Mapping[str, Any]], bool]:
    """A SQL comparison in Python: NULL compares false."""
    return lambda r: r[col] is not None and op(r[col], value)


ROW_10_TS = EPOCH + timedelta(hours=10, microseconds=10010)
# SQL condition -> the same condition in Python. Each is evaluated by delta-rs with file pruning on the
# stats and partition values txlake wrote, so a wrong bound loses rows.
PREDICATES: dict[str, Callable[[Mapping[str, Any]], bool]] = {
    "id >= 25": _cmp("id", lambda a, b: a >= b, 25),
    "i8 < -80": _cmp("i8", lambda a, b: a < b, -80),
    "i32 < 12000": _cmp("i32", lambda a, b: a < b, 12000),
    "f32 > 5.0": _cmp("f32", lambda a, b: a > b, 5.0),
    "dec > 1.00": _cmp("dec", lambda a, b: a > b, Decimal("1.00")),
    "s >= 's0020'": _cmp("s", lambda a, b: a >= b, "s0020"),
    "s = '" + "x" * 40 + "2'": _cmp("s", lambda a, b: a == b, "x" * 40 + "2"),
    "d < DATE '2024-01-20'": _cmp("d", lambda a, b: a < b, date(2024, 1, 20)),
    "ts >= TIMESTAMP '2024-01-02T00:00:00Z'": _cmp("ts", lambda a, b: a >= b, EPOCH + timedelta(days=1)),
    "ts <= TIMESTAMP '2024-01-01T10:00:00.010010Z'": _cmp("ts", lambda a, b: a <= b, ROW_10_TS),
    "ts >= TIMESTAMP '2024-01-01T10:00:00.010010Z'": _cmp("ts", lambda a, b: a >= b, ROW_10_TS),
    "tsn > TIMESTAMP '2024-01-01 00:20:00'": _cmp("tsn", lambda a, b: a > b, datetime(2024, 1, 1, 0, 20)),
    "part = 'x/y'": _cmp("part", lambda a, b: a == b, "x/y"),
    "part IS NULL": lambda r: r["part"] is None,
    "grp = 1": _cmp("grp", lambda a, b: a == b, 1),
    "day = DATE '2024-01-02'": _cmp("day", lambda a, b: a == b, date(2024, 1, 2)),
    "pts > TIMESTAMP '2024-01-01T00:30:00Z'": _cmp("pts", lambda a, b: a > b, EPOCH + timedelta(minutes=30)),
}


# --------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(params=["file", pytest.param("s3", marks=pytest.mark.s3)])
def lake(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[ObjectStore, dict[str, str]]:
    """A fresh lake root on the local filesystem or in a SeaweedFS bucket, with its storage options."""
    if request.param == "file":
        return ObjectStore.from_uri((tmp_path / "lake").as_uri()), {}
    uri: str = request.getfixturevalue("s3_uri")
    options: dict[str, str] = dict(request.getfixturevalue("s3_options"))
    return ObjectStore.from_uri(uri, options), options


def location(lake: tuple[ObjectStore, dict[str, str]], name: str) -> TableLocation:
    store, options = lake
    return TableLocation(store, name, options)


# ------------------------------------------------------------------------------------ helpers (txlake)

Updater = Callable[[dict[str, Any]], dict[str, Any]]


def rewrite(
    table: DeltaTable,
    hit: Callable[[Mapping[str, Any]], bool],
    *,
    update: Updater | None = None,
    operation: str,
    predicate: str,
) -> int:
    """An UPDATE (``update`` given) or DELETE done by hand: remove every file with a hit row, re-add the rest.

    Returns the committed version.
    """
    snap = table.snapshot()
    actions: list[Action] = [commit_info(operation, {"predicate": predicate})]
    new_rows: list[dict[str, Any]] = []
    for add in snap.files.values():
        records = read_files(table.store, table.path, [add], snap.schema, snap.partition_columns).to_pylist()
        if not any(hit(r) for r in records):
            continue
        actions.append(add.remove())
        for r in records:
            if not hit(r):
                new_rows.append(r)
            elif update is not None:
                new_rows.append(update(r))
    if new_rows:
        actions.extend(table.write_files(pa.Table.from_pylist(new_rows, schema=snap.schema), snap))
    version = snap.version + 1
    table.commit(version, actions)
    return version


def delete_commit_files(loc: TableLocation, versions: Sequence[int]) -> None:
    """Remove JSON commits the way log clean-up does (only below a checkpoint)."""
    for v in versions:
        loc.store.delete(loc.txlake().log.commit_path(v))


# ------------------------------------------------------------------------------- 1. txlake -> delta-rs


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_txlake_writes_deltars_reads_every_version(lake: tuple[ObjectStore, dict[str, str]], layout: str) -> None:
    loc = location(lake, f"t_{layout}")
    table = DeltaTable.create(loc.store, loc.path, RICH_SCHEMA, partition_by=LAYOUTS[layout])
    model: dict[int, dict[str, Any]] = {}  # the rows the table must hold, by id

    def append(start: int, n: int) -> int:
        model.update((i, rich_row(i)) for i in range(start, start + n))
        return table.append(rich_batch(start, n))

    def change(hit: Callable[[Mapping[str, Any]], bool], predicate: str, update: Updater | None = None) -> int:
        for i, r in list(model.items()):
            if hit(r):
                if update is None:
                    del model[i]
                else:
                    model[i] = update(r)
        return rewrite(
            table, hit, update=update, operation="DELETE" if update is None else "UPDATE", predicate=predicate
        )

    def moved(r: dict[str, Any]) -> dict[str, Any]:
        return {**r, "s": "updated", "i32": -(r["i32"] or 0), "part": "moved", "grp": 7, "st": None}

    assert append(0, 12) == 1
    assert append(12, 12) == 2
    assert append(24, 12) == 3
    assert change(lambda r: r["id"] % 5 == 0, "id % 5 = 0", moved) == 4
    assert change(lambda r: r["id"] % 4 == 1, "id % 4 = 1") == 5
    assert change(lambda r: r["part"] == "x/y", "part = 'x/y'") == 6
    assert table.checkpoint().version == 6
    assert append(36, 12) == 7
    assert change(lambda r: 36 <= r["id"] < 40, "id BETWEEN 36 AND 39") == 8
    hint = table.checkpoint(parts=3)
    assert (hint.version, hint.parts) == (8, 3)
    assert append(48, 6) == 9
    assert rows(table.read_arrow()) == rows(model.values())

    for v in range(10):
        assert_same_version(loc, v, predicates=PREDICATES)
    ops = [h["operation"] for h in loc.deltars().history()]
    assert ops == [e.operation for e in table.history()]
    assert ops[-1] == "CREATE TABLE" and len(ops) == 10
    protocol = loc.deltars().protocol()  # timestamp_ntz needs (3, 7) + timestampNtz, which delta-rs enforces
    assert (protocol.min_reader_version, protocol.min_writer_version) == (3, 7)
    assert protocol.reader_features == protocol.writer_features == ["timestampNtz"]

    # delta-rs extends the txlake-written table; txlake reads and extends what it wrote.
    more = rich_batch(100, 8, schema=table.snapshot().schema)
    write_deltalake(loc.uri, more, mode="append", storage_options=dict(loc.storage_options))
    model.update((i, rich_row(i)) for i in range(100, 108))
    assert table.latest_version() == 10
    assert rows(table.read_arrow()) == rows(model.values())
    assert append(200, 3) == 11
    assert loc.deltars().delete("id >= 100 AND id < 104")["num_deleted_rows"] == 4
    for i in range(100, 104):
        del model[i]
    assert table.latest_version() == 12
    assert rows(table.read_arrow()) == rows(model.values())
    for v in (10, 11, 12):
        assert_same_version(loc, v, predicates=PREDICATES)

    # Log clean-up below the checkpoints: delta-rs can only rebuild these versions from txlake's checkpoints.
    delete_commit_files(loc, range(6))
    for v in range(6, 13):
        assert_same_version(loc, v, readers=("datafusion",))
    with pytest.raises(VersionNotFoundError):
        table.snapshot(5)
    delete_commit_files(loc, (6, 7))
    for v in (8, 9, 12):
        assert_same_version(loc, v, readers=("datafusion",))


def test_unpartitioned_blind_appends_and_whole_file_removes(lake: tuple[ObjectStore, dict[str, str]]) -> None:
    """Removing whole files with no replacement, down to an empty table, and appending again."""
    loc = location(lake, "simple")
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    table = DeltaTable.create(loc.store, loc.path, schema)
    for i in range(3):
        table.append(pa.table({"id": [i, i + 10], "v": [f"a{i}", None]}))
    snap = table.snapshot()
    first = next(iter(snap.files.values()))
    table.commit(4, [commit_info("DELETE", {"predicate": "true"}), first.remove()])
    snap = table.snapshot()
    table.commit(5, [commit_info("DELETE", {"predicate": "true"}), *(a.remove() for a in snap.files.values())])
    table.append(pa.table({"id": [99], "v": ["z"]}))
    protocol = loc.deltars().protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 2)
    for v in range(7):
        assert_same_version(loc, v)
    assert table.read_arrow(5).num_rows == 0
    assert len(loc.deltars(5).file_uris()) == 0


# ------------------------------------------------------------------------------- 2. delta-rs -> txlake


def assert_txlake_files_match(loc: TableLocation, version: int) -> None:
    """txlake's replay (log and delta-rs checkpoints) lists the same live files as delta-rs."""
    assert txlake_files(loc.txlake(), version) == deltars_files(loc.deltars(version))


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_deltars_writes_txlake_replays_every_version(lake: tuple[ObjectStore, dict[str, str]], layout: str) -> None:
    loc = location(lake, f"d_{layout}")
    opts = dict(loc.storage_options)
    partition_by = list(LAYOUTS[layout]) or None
    merged = RICH_SCHEMA.append(pa.field("extra", pa.string()))
    write_deltalake(loc.uri, rich_batch(0, 10), partition_by=partition_by, storage_options=opts, name="interop")
    write_deltalake(loc.uri, rich_batch(10, 10), mode="append", storage_options=opts)
    write_deltalake(
        loc.uri, rich_batch(20, 10, schema=merged, extra=True), mode="append", schema_mode="merge", storage_options=opts
    )
    write_deltalake(loc.uri, rich_batch(30, 12, schema=merged, extra=True), mode="overwrite", storage_options=opts)
    write_deltalake(loc.uri, rich_batch(42, 12, schema=merged, extra=True), mode="append", storage_options=opts)
    write_deltalake(
        loc.uri,
        rich_batch(48, 4, schema=merged, extra=True),
        mode="overwrite",
        predicate="id >= 48",
        storage_options=opts,
    )
    dt = loc.deltars()
    dt.delete("id % 4 = 0")  # v6
    dt.update(updates={"s": "'upd'", "i32": "i32 + 1"}, predicate="id % 5 = 1")  # v7
    source = rich_batch(40, 20, schema=merged, extra=True)
    (
        dt.merge(source, predicate="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )  # v8
    write_deltalake(loc.uri, rich_batch(70, 5, schema=merged, extra=True), mode="append", storage_options=opts)
    dt = loc.deltars()
    dt.create_checkpoint()  # at v9
    dt.optimize.compact()  # v10
    dt.restore(8)  # v11
    write_deltalake(loc.uri, rich_batch(80, 5, schema=merged, extra=True), mode="append", storage_options=opts)
    latest = loc.deltars().version()
    assert latest == 12
    assert [e.operation for e in loc.txlake().history()] == [h["operation"] for h in loc.deltars().history()]

    expected = {v: assert_same_version(loc, v, readers=("datafusion",)) for v in range(latest + 1)}
    assert loc.txlake().snapshot().metadata.name == "interop"
    assert "extra" in loc.txlake().snapshot().schema.names

    # VACUUM writes commitInfo-only START/END commits and deletes unreferenced files.
    deleted = loc.deltars().vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    assert deleted
    table = loc.txlake()
    assert table.latest_version() == latest + 2
    assert [e.operation for e in table.history(2)] == ["VACUUM END", "VACUUM START"]
    for v in range(latest + 3):
        assert_txlake_files_match(loc, v)
    for v in (latest + 1, latest + 2):
        assert rows(table.read_arrow(v)) == expected[latest]
    vacuumed = {p.split("/")[-1] for p in deleted}
    gone = {v for v in range(latest + 1) if any(p.split("/")[-1] in vacuumed for p in table.snapshot(v).files)}
    assert 0 in gone and latest not in gone
    for v in range(latest + 1):
        if v in gone:
            with pytest.raises(DataFileNotFoundError):
                table.read_arrow(v)
        else:
            assert rows(table.read_arrow(v)) == expected[v]

    # A table property change, a checkpoint, and delta-rs's log clean-up: txlake starts from that checkpoint.
    dt = loc.deltars()
    dt.alter.set_table_properties({"delta.logRetentionDuration": "interval 0 seconds"})
    dt = loc.deltars()
    dt.create_checkpoint()
    dt.cleanup_metadata()
    final = dt.version()
    assert table.snapshot().metadata.configuration["delta.logRetentionDuration"] == "interval 0 seconds"
    assert 0 not in table.log.list().commits
    assert rows(table.read_arrow()) == expected[latest]
    assert_same_version(loc, final)
    with pytest.raises(VersionNotFoundError):
        table.snapshot(0)

    # txlake appends to the delta-rs table (whose protocol delta-rs upgraded on the way) and delta-rs reads it.
    more = rich_batch(90, 3, schema=merged, extra=True)
    assert table.append(more) == final + 1
    assert rows(table.read_arrow()) == sorted(expected[latest] + rows(more), key=repr)
    assert_same_version(loc, final + 1)


def test_deltars_table_declaring_deletion_vectors_reads_and_writes(
    lake: tuple[ObjectStore, dict[str, str]],
) -> None:
    """delta-rs rewrites files instead of writing deletion vectors, but the table still declares the feature:
    txlake reads it as delta-rs does, and appends to it (plain files) as delta-rs reads back."""
    loc = location(lake, "dv")
    opts = dict(loc.storage_options)
    write_deltalake(
        loc.uri,
        pa.table({"id": list(range(10))}),
        configuration={"delta.enableDeletionVectors": "true"},
        storage_options=opts,
    )
    loc.deltars().delete("id < 3")
    assert all(a.get("deletionVector") is None for a in _log_adds(loc))
    final = loc.txlake().latest_version()
    assert final is not None
    # (delta-rs's pyarrow reader refuses tables with the deletionVectors reader feature)
    assert assert_same_version(loc, final, readers=("datafusion",)) == rows(pa.table({"id": list(range(3, 10))}))
    assert loc.txlake().append(pa.table({"id": [10]})) == final + 1
    assert assert_same_version(loc, final + 1, readers=("datafusion",)) == rows(pa.table({"id": list(range(3, 11))}))


def test_empty_string_partition_value_is_null(lake: tuple[ObjectStore, dict[str, str]]) -> None:
    """PROTOCOL.md: an empty partition string is null for every type. txlake writes and reads it so.

    delta-rs writes ``""`` as ``""``; its pyarrow reader then gives null like txlake, while its DataFusion
    reader gives ``""`` (a delta-rs deviation, not compared here).
    """
    data = pa.table({"id": [1, 2, 3], "p": ["", None, "a"]})
    loc = location(lake, "empty_txlake")
    table = DeltaTable.create(loc.store, loc.path, data.schema, partition_by=["p"])
    table.append(data)
    assert sorted(str(a.partition_values["p"]) for a in table.snapshot().files.values()) == ["None", "None", "a"]
    assert_same_version(loc, 1)
    assert rows(table.read_arrow()) == rows([{"id": 1, "p": None}, {"id": 2, "p": None}, {"id": 3, "p": "a"}])

    theirs = location(lake, "empty_deltars")
    write_deltalake(theirs.uri, data, partition_by=["p"], storage_options=dict(theirs.storage_options))
    assert "" in {a.partition_values["p"] for a in theirs.txlake().snapshot().files.values()}
    assert_same_version(theirs, 0, readers=("pyarrow",))
    assert rows(theirs.txlake().read_arrow()) == rows(table.read_arrow())


def _log_adds(loc: TableLocation) -> list[dict[str, Any]]:
    table = loc.txlake()
    out = []
    for v in sorted(table.log.list().commits):
        for line in loc.store.get(table.log.commit_path(v)).decode().splitlines():
            if line.startswith('{"add"'):
                out.append(json.loads(line)["add"])
    return out


# ------------------------------------------------------------------------------------------ 3. time travel


def _commit_times(loc: TableLocation) -> dict[int, datetime]:
    table = loc.txlake()
    return {v: meta.last_modified for v, meta in table.log.list().commits.items()}


def _deltars_version_at(loc: TableLocation, when: datetime) -> int:
    dt = loc.deltars()
    dt.load_as_version(when)
    return dt.version()


def test_time_travel_by_timestamp_agrees(lake: tuple[ObjectStore, dict[str, str]]) -> None:
    """Commits from both clients, spaced beyond the store's mtime resolution; probes around every commit."""
    loc = location(lake, "tt")
    gap = 0.02 if loc.backend == "file" else 1.1  # S3 Last-Modified has whole seconds
    schema = pa.schema([("id", pa.int64())])
    table = DeltaTable.create(loc.store, loc.path, schema)
    for i in range(1, 5):
        time.sleep(gap)
        if i % 2:
            table.append(pa.table({"id": [i]}))
        else:
            write_deltalake(loc.uri, pa.table({"id": [i]}), mode="append", storage_options=dict(loc.storage_options))
    times = _commit_times(loc)
    assert sorted(times) == [0, 1, 2, 3, 4]
    stamps = [int(times[v].timestamp() * 1000) for v in range(5)]
    assert stamps == sorted(set(stamps)), "commit mtimes must be distinct for this test"
    ms = timedelta(milliseconds=1)
    for v, when in times.items():
        floor_ms = when.replace(microsecond=when.microsecond - when.microsecond % 1000)
        for probe in (floor_ms - timedelta(microseconds=1), floor_ms, floor_ms + ms / 2, floor_ms + ms, when):
            if v == 0 and probe < floor_ms:
                with pytest.raises(VersionNotFoundError):  # delta-rs answers 0 here: see below
                    table.snapshot(timestamp=probe)
                continue
            mine = table.snapshot(timestamp=probe).version
            assert mine == _deltars_version_at(loc, probe), f"probe {probe.isoformat()} near v{v}"
            assert mine == (v if probe >= floor_ms else v - 1)
    far = datetime.now(UTC) + timedelta(days=1)
    assert table.snapshot(timestamp=far).version == _deltars_version_at(loc, far) == 4
    assert rows(table.read_arrow(table.snapshot(timestamp=times[2]).version)) == [(("id", i),) for i in range(1, 3)]
    # Before the first commit Delta (Spark) and txlake refuse; delta-rs answers version 0 instead.
    early = times[0] - timedelta(seconds=5)
    with pytest.raises(VersionNotFoundError):
        table.snapshot(timestamp=early)
    assert _deltars_version_at(loc, early) == 0


def test_time_travel_ties_follow_delta_monotonization(tmp_path: Path) -> None:
    """Two commits with the same mtime: txlake gives the later one the next millisecond, as Delta does.

    delta-rs does not monotonize: at the tied instant it may answer the later version. Everywhere else the
    two agree.
    """
    loc = TableLocation(ObjectStore.from_uri((tmp_path / "lake").as_uri()), "ties", {})
    table = DeltaTable.create(loc.store, loc.path, pa.schema([("id", pa.int64())]))
    for i in range(3):
        table.append(pa.table({"id": [i]}))
    base = datetime(2030, 1, 1, tzinfo=UTC)
    mtimes = {0: base, 1: base + timedelta(seconds=1), 2: base + timedelta(seconds=1), 3: base + timedelta(seconds=2)}
    for v, when in mtimes.items():
        path = loc.store.local_path(table.log.commit_path(v))
        assert path is not None
        os.utime(path, ns=(int(when.timestamp()) * 10**9, int(when.timestamp()) * 10**9))
    tie = mtimes[1]
    ms = timedelta(milliseconds=1)
    assert table.snapshot(timestamp=tie).version == 1
    assert table.snapshot(timestamp=tie + ms).version == 2
    assert _deltars_version_at(loc, tie) in (1, 2)
    for probe in (base, base + ms, tie - ms, tie + 2 * ms, mtimes[3], mtimes[3] + ms):
        assert table.snapshot(timestamp=probe).version == _deltars_version_at(loc, probe)
