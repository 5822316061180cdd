"""Vacuum (``lake.vacuum``): deletes what no retained version, tag, clone, claim or running transaction needs."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import txlake
from tests.cli.real import txlake as cli
from tests.services import StoreLocation
from txlake.delta.actions import Add, CommitInfo, Remove
from txlake.delta.log import DeltaLog
from txlake.lakehouse.ages import ORPHAN_GUARD
from txlake.txn import reservations
from txlake.txn.reservations import Reservation

SCHEMA = pa.schema([("id", pa.int64())])
ZERO = timedelta(0)


def _rows(lake: txlake.Lakehouse | txlake.LakehouseSnapshot, name: str) -> list[int]:
    return sorted(lake.read_arrow(name)["id"].to_pylist())


def _deltars_rows(
    lake: txlake.Lakehouse, name: str, options: dict[str, str], version: int | None = None
) -> list[int] | None:
    """What delta-rs reads (``None`` on ``memory://``, which it cannot open)."""
    if lake.uri.startswith("memory://"):
        return None
    table = deltalake.DeltaTable(lake.table_location(name), version=version, storage_options=options or None)
    query = deltalake.QueryBuilder().register("t", table)
    return sorted(query.execute("SELECT id FROM t").read_all()["id"].to_pylist())


def _data_files(lake: txlake.Lakehouse, path: str) -> set[str]:
    return {m.path for m in lake.store.list(path) if m.path.endswith(".parquet")}


def _overwrites(location: StoreLocation, rounds: int) -> txlake.Lakehouse:
    """``t.a`` overwritten ``rounds`` times: each round removes the previous round's file."""
    lake = txlake.connect(location.uri, location.storage_options)
    lake.create_table("t.a", SCHEMA)
    for i in range(rounds):
        with lake.transaction() as tx:
            tx.overwrite("t.a", pa.table({"id": [i]}))
    # Vacuum keeps a file whose mtime (in ms) is not older than ``now - retention``; on memory:// the whole
    # function can run within one millisecond, so a zero retention would keep the removed files.
    time.sleep(0.005)
    return lake


def _age(root: Path, relative: str, by: timedelta) -> None:
    """Make a local file look ``by`` older (a file store's clock is the file's mtime)."""
    path = root / relative
    when = time.time() - by.total_seconds()
    os.utime(path, (when, when))


def test_a_short_retention_needs_force_and_a_dry_run_deletes_nothing(any_store_uri: StoreLocation) -> None:
    lake = _overwrites(any_store_uri, 3)
    with pytest.raises(txlake.InvalidArgumentError, match="deletedFileRetentionDuration"):
        lake.vacuum(ZERO)
    before = _data_files(lake, "t/a")
    report = lake.vacuum(ZERO, force=True, dry_run=True)
    assert report.dry_run and report.files_deleted == 2 and report.bytes_deleted > 0
    assert _data_files(lake, "t/a") == before  # a dry run deletes nothing
    assert lake.vacuum().files_deleted == 0  # 7 days: everything is newer


def test_removed_files_go_and_every_retained_version_still_reads(any_store_uri: StoreLocation) -> None:
    lake = _overwrites(any_store_uri, 3)
    old = lake.version()
    time.sleep(1.2)
    with lake.transaction() as tx:
        tx.overwrite("t.a", pa.table({"id": [10]}))
    with lake.transaction() as tx:
        tx.append("t.a", pa.table({"id": [11]}))
    # a retention reaching back to just before `old` was current keeps it readable, older versions not
    retention = timedelta(seconds=1.0)
    report = lake.vacuum(retention, force=True)
    assert report.horizon >= old
    assert {f.reason for f in report.deleted} == {"not referenced since the horizon"}
    assert report.files_deleted == 2  # the files of rounds 0 and 1
    assert _rows(lake.snapshot(old), "t.a") == [2]
    assert _rows(lake, "t.a") == [10, 11]
    table_version = lake.snapshot(old).table_version("t.a")
    assert _deltars_rows(lake, "t.a", any_store_uri.storage_options, version=table_version) in ([2], None)
    assert _deltars_rows(lake, "t.a", any_store_uri.storage_options) in ([10, 11], None)
    assert lake.vacuum(retention, force=True).files_deleted == 0  # nothing left to do


def test_a_held_snapshot_a_tag_and_a_clone_keep_their_files(any_store_uri: StoreLocation) -> None:
    lake = _overwrites(any_store_uri, 2)
    lake.create_table("t.b", SCHEMA)
    with lake.transaction() as tx:
        tx.append("t.b", pa.table({"id": [7]}))
    lake.tag("before-cleanup")
    lake.clone("t.b", "dev.b")
    with lake.transaction() as tx:
        tx.overwrite("t.a", pa.table({"id": [5]}))
        tx.overwrite("t.b", pa.table({"id": [8]}))
    held = lake.snapshot()
    with lake.transaction() as tx:
        tx.overwrite("t.a", pa.table({"id": [6]}))
    report = lake.vacuum(ZERO, force=True)
    assert report.tags == ("before-cleanup",)
    assert report.kept.get("referenced by a retained version, tag, clone or claim", 0) >= 3
    assert _rows(lake.snapshot(tag="before-cleanup"), "t.a") == [1]
    assert _rows(lake.snapshot(tag="before-cleanup"), "t.b") == [7]
    assert _rows(lake, "dev.b") == [7]  # the clone's file lives in t.b and is gone from t.b's latest version
    assert _deltars_rows(lake, "dev.b", any_store_uri.storage_options) in ([7], None)
    assert _rows(lake, "t.a") == [6]
    # the held snapshot was current before the newest commit: with no retention, its t.a file may go
    assert _rows(held, "t.b") == [8]


def test_a_tag_below_the_vacuum_horizon_is_refused(any_store_uri: StoreLocation) -> None:
    lake = _overwrites(any_store_uri, 2)
    old = lake.version() - 1
    lake.vacuum(ZERO, force=True)
    with pytest.raises(txlake.VersionNotFoundError, match="vacuum horizon"):
        lake.tag("too-late", old)
    assert lake.tags() == []
    with pytest.raises(txlake.VersionNotFoundError, match="vacuum horizon"):
        lake.restore(old)
    with pytest.raises(txlake.VersionNotFoundError, match="vacuum horizon"):
        lake.clone("t.a", "dev.a", version=old)
    with pytest.raises(txlake.VersionNotFoundError, match="files were vacuumed"):
        lake.snapshot(old).read_arrow("t.a")  # not "deleted outside txlake": vacuum did it
    lake.tag("now")  # the latest version is fine
    assert lake.vacuum(ZERO, force=True, dry_run=True).files_deleted == 0


def test_a_running_transaction_keeps_its_files_and_commits(any_store_uri: StoreLocation) -> None:
    lake = _overwrites(any_store_uri, 2)
    tx = lake.transaction()
    tx.append("t.a", pa.table({"id": [42]}))  # its file is written now, referenced by nothing yet
    time.sleep(0.05)  # older than the (zero) retention
    report = lake.vacuum(ZERO, force=True)
    assert report.kept.get("may belong to a running transaction") == 1
    tx.commit()
    assert _rows(lake, "t.a") == [1, 42]
    assert _deltars_rows(lake, "t.a", any_store_uri.storage_options) in ([1, 42], None)


def test_a_transaction_older_than_a_day_cannot_commit(any_store_uri: StoreLocation) -> None:
    lake = _overwrites(any_store_uri, 1)
    tx = lake.transaction()
    tx.append("t.a", pa.table({"id": [42]}))
    tx._started -= timedelta(hours=25).total_seconds()  # as if it had been open for 25 hours
    with pytest.raises(txlake.TransactionExpiredError, match="run it again"):
        tx.commit()
    assert isinstance(txlake.TransactionExpiredError("x"), txlake.ConflictError)  # lake.run re-runs it
    assert _rows(lake, "t.a") == [0]


def test_orphans_go_once_older_than_the_guard(tmp_path: Path) -> None:
    root = tmp_path / "lake"
    lake = _overwrites(StoreLocation(root.as_uri(), {}), 1)
    data = pa.table({"id": [99]})
    names = {
        "young": f"t/a/part-{uuid.uuid4().hex}-{uuid.uuid4()}.snappy.parquet",  # a running transaction's?
        "old": f"t/a/part-{uuid.uuid4().hex}-{uuid.uuid4()}.snappy.parquet",  # a crashed transaction's
        "plain": "t/a/part-00000-plain-writer.snappy.parquet",  # a plain Delta writer's, never committed
        "aborted-create": f"gone/t/part-{uuid.uuid4().hex}-{uuid.uuid4()}.snappy.parquet",
        "user": "notes/report.parquet",  # not txlake's, outside every table: never touched
        "staging": f"_txlake/txns/{uuid.uuid4().hex}/spark/w.json",
    }
    for name in names.values():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(data, root / name)
    for key in ("old", "plain", "aborted-create", "user", "staging"):
        _age(root, names[key], ORPHAN_GUARD + timedelta(hours=1))
    _age(root, names["young"], ORPHAN_GUARD - timedelta(hours=1))
    report = lake.vacuum()  # the default 7 days: only what is older than that and the guard
    assert report.files_deleted == 0
    for key in ("old", "plain", "aborted-create", "user", "staging"):
        _age(root, names[key], timedelta(days=8))
    report = lake.vacuum()
    gone = {f.path: f.reason for f in report.deleted}
    assert set(gone) == {names["old"], names["plain"], names["aborted-create"], names["staging"]}
    assert gone[names["old"]].startswith("orphan of transaction ")
    assert gone[names["staging"]] == "staging leftover"
    assert (root / names["young"]).exists() and (root / names["user"]).exists()
    assert report.kept == {"referenced by a retained version, tag, clone or claim": 1, "newer than the retention": 1}
    assert _rows(lake, "t.a") == [0]


def test_a_table_dropped_before_the_horizon_goes_whole(tmp_path: Path) -> None:
    root = tmp_path / "lake"
    lake = _overwrites(StoreLocation(root.as_uri(), {}), 2)
    lake.create_table("t.b", SCHEMA)
    with lake.transaction() as tx:
        tx.append("t.b", pa.table({"id": [1]}))
    lake.drop_table("t.a")
    report = lake.vacuum(ZERO, force=True)
    assert report.tables_removed == ()  # its files are younger than an hour: perhaps dropped since the horizon
    for path in (root / "t" / "a").rglob("*"):
        if path.is_file():
            _age(root, str(path.relative_to(root)), timedelta(days=2))
    report = lake.vacuum(ZERO, force=True)
    assert report.tables_removed == ("t/a",)
    assert not (root / "t" / "a").exists()  # on local disk its emptied directories go too
    lake.create_table("t.a", SCHEMA)  # the location is free again
    assert lake.table_location("t.a").rstrip("/").endswith("/t/a")
    assert _rows(lake, "t.b") == [1]


def test_a_log_naming_paths_elsewhere_never_makes_vacuum_delete_there(tmp_path: Path) -> None:
    """A hand-crafted commit adds and removes files outside the table (``..``, absolute): they stay."""
    root = tmp_path / "lake"
    outside = tmp_path / "outside"
    outside.mkdir()
    lake = _overwrites(StoreLocation(root.as_uri(), {}), 1)
    lake.create_table("t.b", SCHEMA)
    with lake.transaction() as tx:
        tx.append("t.b", pa.table({"id": [5]}))
    neighbour = sorted(_data_files(lake, "t/b"))[0]
    victims = {
        "relative": "../../../outside/a.parquet",
        "absolute": (outside / "b.parquet").as_uri(),
        "neighbour": "../b/" + neighbour.rsplit("/", 1)[-1],
    }
    pq.write_table(pa.table({"id": [1]}), outside / "a.parquet")
    pq.write_table(pa.table({"id": [1]}), outside / "b.parquet")
    log = DeltaLog(lake.store, "t/a")
    version = log.latest_version()
    assert version is not None
    now = int(time.time() * 1000)
    adds = [Add(p, {}, 10, now, True) for p in victims.values()]
    log.write_commit(version + 1, [CommitInfo({"operation": "WRITE"}), *adds])
    log.write_commit(version + 2, [CommitInfo({"operation": "DELETE"}), *(Remove(p, now) for p in victims.values())])
    for name in ("a.parquet", "b.parquet"):
        when = time.time() - timedelta(days=30).total_seconds()
        os.utime(outside / name, (when, when))
    lake.vacuum(ZERO, force=True)
    assert (outside / "a.parquet").exists() and (outside / "b.parquet").exists()
    assert (root / neighbour).exists()
    assert _rows(lake, "t.b") == [5]


def test_vacuum_while_writers_commit_loses_nothing(any_store_uri: StoreLocation) -> None:
    lake = _overwrites(any_store_uri, 1)
    stop = threading.Event()
    committed: list[int] = []
    errors: list[BaseException] = []

    def writer() -> None:
        writer_lake = txlake.connect(any_store_uri.uri, any_store_uri.storage_options)
        i = 100
        while not stop.is_set():
            try:
                with writer_lake.transaction("write_serializable") as tx:
                    tx.append("t.a", pa.table({"id": [i]}))
                committed.append(i)
            except txlake.ConflictError:
                pass
            except BaseException as exc:
                errors.append(exc)
                return
            i += 1

    threads = [threading.Thread(target=writer) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for _ in range(3):
            lake.vacuum(ZERO, force=True)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors
    assert _rows(lake, "t.a") == sorted([0, *committed])
    assert _deltars_rows(lake, "t.a", any_store_uri.storage_options) in (sorted([0, *committed]), None)


def test_bad_arguments_are_refused(any_store_uri: StoreLocation) -> None:
    lake = _overwrites(any_store_uri, 1)
    with pytest.raises(txlake.InvalidArgumentTypeError, match="timedelta"):
        lake.vacuum(7)  # type: ignore[arg-type]
    with pytest.raises(txlake.InvalidArgumentError, match="negative"):
        lake.vacuum(timedelta(hours=-1))
    with pytest.raises(txlake.InvalidArgumentTypeError, match="dry_run"):
        lake.vacuum(dry_run="yes")  # type: ignore[arg-type]


def test_a_clone_of_files_vacuum_deleted_meanwhile_is_aborted(any_store_uri: StoreLocation) -> None:
    """A transaction re-adding old files checks the vacuum horizon after claiming: it never commits
    references to files a concurrent vacuum deleted."""
    lake = _overwrites(any_store_uri, 1)
    tx = lake.transaction("snapshot")  # reads t.a as [0]; snapshot isolation does not validate the read
    with lake.transaction() as other:
        other.overwrite("t.a", pa.table({"id": [1]}))
    time.sleep(0.05)
    assert lake.vacuum(ZERO, force=True).files_deleted == 1  # [0]'s file: no retained version needs it
    tx.clone_table("t.a", "dev.a")
    before = lake.version()
    with pytest.raises(txlake.VersionNotFoundError, match="vacuum horizon"):
        tx.commit()
    assert "dev.a" not in lake.tables() and lake.version() == before + 1  # its claimed version, aborted
    assert lake.context.glog.read_outcome(before + 1).status == "aborted"  # type: ignore[union-attr]
    assert _rows(lake, "t.a") == [1]


def _age_tree(root: Path, by: timedelta) -> None:
    when = time.time() - by.total_seconds()
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (when, when))


def test_old_log_entries_are_cleaned_up_and_every_reader_still_loads(tmp_path: Path) -> None:
    root = tmp_path / "lake"
    lake = txlake.connect(root.as_uri(), checkpoint_interval=5)
    lake.create_table("t.a", SCHEMA, properties={"delta.checkpointInterval": "4"})
    for i in range(12):
        with lake.transaction() as tx:
            tx.append("t.a", pa.table({"id": [i]}))
    old_version = lake.version()
    _age_tree(root, timedelta(days=40))  # everything so far is older than the 30-day log retention
    with lake.transaction() as tx:
        tx.append("t.a", pa.table({"id": [12]}))
    report = lake.vacuum(ZERO, force=True, dry_run=True)
    assert report.log_entries_deleted > 0 and lake.context.glog.list().start == 0  # a dry run
    report = lake.vacuum(ZERO, force=True)
    start = report.log_start
    assert 0 < start <= old_version and report.log_entries_deleted > 0
    assert lake.context.glog.list().start == start
    assert not (root / "_txlake" / "log" / f"{0:020d}.json").exists()
    delta_commits = sorted(p.name for p in (root / "t" / "a" / "_delta_log").glob("*.json"))
    assert delta_commits[0] != f"{0:020d}.json"  # the Delta log starts at a checkpoint now

    fresh = txlake.connect(root.as_uri())  # a cold client: no cached state
    assert _rows(fresh, "t.a") == list(range(13))
    assert _rows(fresh.snapshot(start), "t.a") == list(range(start - 1))  # version 1 created the table
    with pytest.raises(txlake.VersionNotFoundError, match="cleaned up"):
        fresh.snapshot(start - 1)
    assert _deltars_rows(fresh, "t.a", {}) == list(range(13))
    with fresh.transaction() as tx:
        tx.append("t.a", pa.table({"id": [13]}))
    assert _rows(lake, "t.a") == list(range(14))  # a warm client catches up too
    assert lake.vacuum(ZERO, force=True).log_entries_deleted == 0
    with pytest.raises(txlake.VersionNotFoundError, match="cleaned up by vacuum"):
        fresh.snapshot(timestamp=datetime.now(UTC) - timedelta(days=400))
    doctor = cli("doctor", "--uri", root.as_uri(), "--json")
    assert doctor.returncode == 0, doctor.stdout
    assert json.loads(doctor.stdout)["healthy"] is True
    for command in (("log",), ("history",), ("history", "t.a"), ("tables",)):
        assert cli(*command, "--uri", root.as_uri()).returncode == 0, command


def test_a_tag_keeps_the_log_it_needs(tmp_path: Path) -> None:
    root = tmp_path / "lake"
    lake = txlake.connect(root.as_uri(), checkpoint_interval=3)
    lake.create_table("t.a", SCHEMA, properties={"delta.checkpointInterval": "2"})
    lake.tag("first")
    for i in range(8):
        with lake.transaction() as tx:
            tx.append("t.a", pa.table({"id": [i]}))
    _age_tree(root, timedelta(days=40))
    report = lake.vacuum(ZERO, force=True)
    assert report.log_start <= lake.tags()[0].version
    assert _rows(lake.snapshot(tag="first"), "t.a") == []


# ------------------------------------------------------------------------------- review findings (vacuum)


def test_names_that_would_land_in_reserved_directories_are_refused(tmp_path: Path) -> None:
    lake = txlake.connect((tmp_path / "lake").as_uri())
    for name in ("_txlake.txns", "a._delta_log", "_x.t"):
        with pytest.raises(txlake.InvalidArgumentError, match="may not start with '_'"):
            lake.create_table(name, "id long")
    with pytest.raises(txlake.InvalidArgumentError, match="may not start with '_'"):
        lake.create_namespace("_txlake")
    assert lake.tables() == []


def test_a_dropped_tables_files_a_clone_still_uses_stay_even_in_underscore_directories(tmp_path: Path) -> None:
    root = tmp_path / "lake"
    lake = txlake.connect(root.as_uri())
    lake.create_table("ns.src", "id long, _day string", partition_by=["_day"])
    with lake.transaction() as tx:
        tx.append("ns.src", pa.table({"id": [1, 2], "_day": ["d1", "d2"]}))
    lake.clone("ns.src", "ns.copy")
    lake.drop_table("ns.src")
    _age_tree(root / "ns" / "src", timedelta(days=3))
    report = lake.vacuum(ZERO, force=True)
    assert report.tables_removed == ("ns/src",)  # its log goes; the files the clone names stay
    assert _rows(lake, "ns.copy") == [1, 2]
    assert _deltars_rows(lake, "ns.copy", {}) == [1, 2]


def test_a_new_table_never_takes_the_directory_of_a_dropped_tables_files_a_clone_uses(tmp_path: Path) -> None:
    """Vacuum deletes a dropped table's log but keeps the data files a clone names. A table created later under
    the same name gets a directory of its own: in the old one a plain VACUUM of the new table (delta-rs,
    ``full=True``, as Spark's) would delete the files its log does not name -- the clone's data."""
    root = tmp_path / "lake"
    lake = txlake.connect(root.as_uri())
    lake.create_table("ns.t", "id long")
    with lake.transaction() as tx:
        tx.append("ns.t", pa.table({"id": [1, 2]}))
    lake.clone("ns.t", "bk.c")
    old_location = lake.table_location("ns.t")
    lake.drop_table("ns.t")
    _age_tree(root / "ns" / "t", timedelta(days=8))
    assert lake.vacuum(ZERO, force=True).tables_removed == ("ns/t",)
    lake.create_table("ns.t", "id long")
    with lake.transaction() as tx:
        tx.append("ns.t", pa.table({"id": [3]}))
    assert lake.table_location("ns.t") != old_location
    _age_tree(root / "ns", timedelta(days=8))
    deltalake.DeltaTable(lake.table_location("ns.t")).vacuum(dry_run=False, full=True)
    assert _rows(lake, "bk.c") == [1, 2]
    assert _deltars_rows(lake, "bk.c", {}) == [1, 2]
    assert _rows(lake, "ns.t") == [3]


def test_a_clone_made_through_another_spelling_of_the_root_keeps_its_files(tmp_path: Path) -> None:
    real = tmp_path / "real"
    txlake.connect(real.as_uri()).create_table("ns.src", "id long")
    link = tmp_path / "link"
    link.symlink_to(real)
    via_link = txlake.connect(f"file://{link}//")  # a symbolic link and a doubled slash
    with via_link.transaction() as tx:
        tx.append("ns.src", pa.table({"id": [1, 2]}))
    via_link.clone("ns.src", "ns.copy")
    lake = txlake.connect(real.as_uri())
    with lake.transaction() as tx:
        tx.overwrite("ns.src", pa.table({"id": [9]}))
    time.sleep(0.05)
    lake.vacuum(ZERO, force=True)
    assert _rows(lake, "ns.copy") == [1, 2] and _rows(lake, "ns.src") == [9]


def test_delta_tables_txlake_never_wrote_are_never_removed_whole(tmp_path: Path) -> None:
    root = tmp_path / "lake"
    lake = txlake.connect(root.as_uri())
    deltalake.write_deltalake(str(root / "raw" / "reg"), pa.table({"id": pa.array([1], pa.int64())}))
    deltalake.write_deltalake(str(root / "raw" / "never"), pa.table({"id": pa.array([2], pa.int64())}))
    lake.register_table("raw.reg", "raw/reg")
    lake.drop_table("raw.reg")
    _age_tree(root / "raw", timedelta(days=30))
    report = lake.vacuum(ZERO, force=True)
    assert report.tables_removed == () and report.files_deleted == 0
    assert (root / "raw" / "reg" / "_delta_log").is_dir() and (root / "raw" / "never" / "_delta_log").is_dir()


def test_restore_and_clone_of_a_tagged_version_below_the_horizon_work(tmp_path: Path) -> None:
    lake = _overwrites(StoreLocation((tmp_path / "lake").as_uri(), {}), 2)
    tagged = lake.tag("keep").version
    with lake.transaction() as tx:
        tx.overwrite("t.a", pa.table({"id": [7]}))
    time.sleep(0.05)
    assert lake.vacuum(ZERO, force=True).horizon > tagged
    lake.restore(tag="keep")
    assert _rows(lake, "t.a") == [1]
    lake.clone("t.a", "dev.a", version=tagged)
    assert _rows(lake, "dev.a") == [1]


def test_retention_properties_are_read_as_spark_writes_them(tmp_path: Path) -> None:
    lake = txlake.connect((tmp_path / "lake").as_uri())
    lake.create_table("t.a", "id long")
    for value, refused in (("interval 4 weeks 2 days", True), ("30 days", True), ("interval 1 day", False)):
        with lake.transaction() as tx:
            tx.alter_table("t.a", set_properties={"delta.deletedFileRetentionDuration": value})
        if refused:
            with pytest.raises(txlake.InvalidArgumentError, match="deletedFileRetentionDuration"):
                lake.vacuum()
        else:
            lake.vacuum()


def test_a_transaction_whose_machine_slept_past_a_day_cannot_commit(tmp_path: Path) -> None:
    lake = _overwrites(StoreLocation((tmp_path / "lake").as_uri(), {}), 1)
    tx = lake.transaction()
    tx.append("t.a", pa.table({"id": [42]}))
    tx._started_wall -= timedelta(hours=25).total_seconds()  # the wall clock moved on; the monotonic one did not
    with pytest.raises(txlake.TransactionExpiredError):
        tx.commit()


# ------------------------------------------------------------------------------- V2 checkpoints, sidecars


def test_log_clean_up_keeps_the_sidecars_of_the_checkpoint_it_starts_at(tmp_path: Path) -> None:
    """A registered v2Checkpoint table (UUID-named Parquet checkpoints with sidecars at every version): the
    clean-up deletes the commits and checkpoints below the checkpoint the log then starts at, and the sidecars
    only those named; the sidecars of the checkpoints left stay, and both clients read every retained version."""
    root = tmp_path / "lake"
    source = (
        Path(__file__).resolve().parent.parent / "data" / "delta-kernel-rs" / "v2-checkpoints-parquet-with-sidecars"
    )
    shutil.copytree(source, root / "t" / "v2")
    lake = txlake.connect(root.as_uri(), checkpoint_interval=1)
    assert lake.register_table("t.v2", "t/v2") == 6
    expected = _rows(lake, "t.v2")
    log_dir = root / "t" / "v2" / "_delta_log"
    sidecars = {p.name for p in (log_dir / "_sidecars").iterdir()}
    (checkpoint_6,) = log_dir.glob(f"{6:020d}.checkpoint.*.parquet")
    named_6 = {r["path"] for r in pq.read_table(checkpoint_6).column("sidecar").to_pylist() if r is not None}
    assert len(named_6) == 2 and named_6 < sidecars
    _age_tree(root, timedelta(days=40))
    with lake.transaction() as tx:
        tx.append("t.v2", pa.table({"id": [-1]}))
    report = lake.vacuum(ZERO, force=True)
    assert report.log_entries_deleted > 0
    assert sorted(p.name for p in log_dir.glob("*.json")) == [f"{6:020d}.json", f"{7:020d}.json"]
    assert checkpoint_6.exists() and not list(log_dir.glob(f"{5:020d}.checkpoint.*"))
    assert {p.name for p in (log_dir / "_sidecars").iterdir()} == named_6  # the others' sidecars went
    fresh = txlake.connect(root.as_uri())
    assert _rows(fresh, "t.v2") == sorted([*expected, -1])
    assert _deltars_rows(fresh, "t.v2", {}) == sorted([*expected, -1])
    assert _deltars_rows(fresh, "t.v2", {}, version=6) == expected


def test_log_clean_up_keeps_what_a_tables_own_delta_log_retention_asks_for(tmp_path: Path) -> None:
    """``delta.logRetentionDuration`` is read from the table's Delta configuration (a registered table's own,
    not in the catalog entry): its 365 days keep a 40-day-old log that a table without it loses."""
    root = tmp_path / "lake"
    location = root / "ext" / "reg"
    deltalake.write_deltalake(
        str(location), pa.table({"id": [0]}), configuration={"delta.logRetentionDuration": "interval 365 days"}
    )
    lake = txlake.connect(root.as_uri(), checkpoint_interval=3)
    lake.register_table("ext.reg", "ext/reg")
    assert "delta.logRetentionDuration" not in lake.snapshot().entry("ext.reg").properties
    lake.create_table("t.a", SCHEMA, properties={"delta.checkpointInterval": "2"})
    for i in range(6):
        with lake.transaction() as tx:
            tx.append("ext.reg", pa.table({"id": [i + 1]}))
            tx.append("t.a", pa.table({"id": [i]}))
    deltalake.DeltaTable(str(location)).create_checkpoint()
    for i in range(6, 10):
        with lake.transaction() as tx:
            tx.append("ext.reg", pa.table({"id": [i + 1]}))
            tx.append("t.a", pa.table({"id": [i]}))
    _age_tree(root, timedelta(days=40))
    with lake.transaction() as tx:
        tx.append("ext.reg", pa.table({"id": [11]}))
        tx.append("t.a", pa.table({"id": [10]}))
    assert lake.vacuum(ZERO, force=True).log_entries_deleted > 0
    assert not (root / "t" / "a" / "_delta_log" / f"{0:020d}.json").exists()  # 30 days by default
    assert (location / "_delta_log" / f"{0:020d}.json").exists()
    assert sorted(deltalake.DeltaTable(str(location), version=0).to_pyarrow_table()["id"].to_pylist()) == [0]


def test_reservations_left_by_a_crash_go_after_an_hour(tmp_path: Path) -> None:
    root = tmp_path / "lake"
    lake = _overwrites(StoreLocation(root.as_uri(), {}), 1)
    old = Reservation("a" * 32, "tid", frozenset({"x"}), 1, 2)
    fresh = Reservation("b" * 32, "tid", frozenset({"x"}), 1, 2)
    for reservation in (old, fresh):
        reservations.post(lake.store, reservation)
    _age(root, old.path, timedelta(minutes=61))
    _age(root, fresh.path, timedelta(minutes=59))
    report = lake.vacuum()
    assert {f.path: f.reason for f in report.deleted} == {old.path: "reservation left by a crashed transaction"}
    assert not (root / old.path).exists() and (root / fresh.path).exists()
