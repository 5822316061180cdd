"""Lakehouse-wide time travel by timestamp and by tag (``lake.snapshot(timestamp=...)``, ``lake.tag``)."""

from __future__ import annotations

import math
import random
import threading
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pytest

import txlake
from tests.services import StoreLocation
from txlake.lakehouse.log import bisect_time
from txlake.lakehouse.tags import TagStore
from txlake.storage import FaultRule

SCHEMA = pa.schema([("id", pa.int64())])


def _lake_with_versions(location: StoreLocation, commits: int) -> txlake.Lakehouse:
    lake = txlake.connect(location.uri, location.storage_options)
    lake.create_table("t.a", SCHEMA)
    lake.create_table("t.b", SCHEMA)
    for i in range(commits):
        with lake.transaction() as tx:
            tx.append("t.a" if i % 2 else "t.b", pa.table({"id": [i]}))
    return lake


def _at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def _rows(snap: txlake.LakehouseSnapshot) -> dict[str, list[int]]:
    return {name: sorted(snap.read_arrow(name)["id"].to_pylist()) for name in snap.tables()}


def test_a_timestamp_reads_the_newest_version_decided_by_then(any_store_uri: StoreLocation) -> None:
    lake = _lake_with_versions(any_store_uri, 8)
    glog = lake.context.glog
    latest = lake.version()
    times = [glog.decided_at_ms(v) for v in range(latest + 1)]
    assert times == sorted(times)  # one client, one clock
    for version, decided in enumerate(times):
        newest = max(v for v, t in enumerate(times) if t <= decided)  # versions decided in the same millisecond
        assert lake.version_at(_at(decided)) == newest
        if version > 0 and times[version - 1] < decided:
            assert lake.version_at(_at(decided - 1)) == version - 1  # a millisecond earlier: not yet
        assert _rows(lake.snapshot(timestamp=_at(decided))) == _rows(lake.snapshot(version=newest))
    assert lake.snapshot(timestamp=datetime.now(UTC)).version == latest
    # any time zone names the same instant
    shifted = _at(times[3]).astimezone(timezone(timedelta(hours=-7)))
    assert lake.version_at(shifted) == max(v for v, t in enumerate(times) if t <= times[3])


def test_a_fresh_client_bisects_instead_of_reading_every_outcome(tmp_path: Path) -> None:
    location = StoreLocation(f"file://{tmp_path}/lake", {})
    lake = _lake_with_versions(location, 40)
    target = 17
    when = _at(lake.context.glog.decided_at_ms(target))
    fresh = txlake.connect(location.uri)
    fresh.version()  # the tail walk of a cold client (records carry the recent outcomes)
    before = fresh.store.counters.snapshot()
    assert fresh.version_at(when) == target
    gets = fresh.store.counters.snapshot().get - before.get
    assert gets <= 2 * math.ceil(math.log2(lake.version() + 1)) + 2, gets


def test_a_past_time_names_the_same_version_before_and_after_a_slow_outcome_lands(
    any_store_uri: StoreLocation,
) -> None:
    """A claimer takes its outcome's time before it writes the outcome. Asked for a time after that, while the
    outcome is still on its way, a reader waits for it: the answer is the version the outcome decides, then
    and later (before, the reader answered with the version before it, and later with this one). A time from
    before the claim is answered without waiting."""
    lake = _lake_with_versions(any_store_uri, 1)
    writer = txlake.connect(any_store_uri.uri, any_store_uri.storage_options)
    writing, landed = threading.Event(), threading.Event()

    def hold() -> None:
        writing.set()
        assert landed.wait(30)

    claimed = lake.version() + 1
    outcome = f"{claimed:020d}.outcome.json"
    writer.store.faults.add(FaultRule("PUT", 1, "hook", path_contains=outcome, hook=hold))
    done: list[int] = []

    def commit_it() -> None:
        with writer.transaction() as tx:
            tx.append("t.a", pa.table({"id": [9]}))
        done.append(tx.result.version if tx.result else -1)

    earlier = datetime.now(UTC)
    time.sleep(0.002)
    commit = threading.Thread(target=commit_it)
    commit.start()
    assert writing.wait(30)
    when = datetime.now(UTC)  # after the outcome's time, before the outcome is there
    reader = txlake.connect(any_store_uri.uri, any_store_uri.storage_options)
    assert reader.version_at(earlier) == claimed - 1  # a time before the claim: no wait for its outcome
    looked = threading.Event()
    reader.store.faults.add(FaultRule("GET", 1, "hook", path_contains=outcome, times=10**6, hook=looked.set))
    answers: list[int] = []
    ask = threading.Thread(target=lambda: answers.append(reader.version_at(when)))
    ask.start()
    assert looked.wait(30)  # the reader met the undecided claim
    landed.set()
    ask.join(30)
    commit.join(30)
    assert done == [claimed]
    assert answers == [claimed]
    assert txlake.connect(any_store_uri.uri, any_store_uri.storage_options).version_at(when) == claimed
    assert _rows(reader.snapshot(timestamp=when))["t.a"] == [9]


@pytest.mark.parametrize("seed", range(20))
def test_the_answer_for_a_time_stays_as_the_log_grows_even_where_times_do_not_grow(seed: int) -> None:
    """Pipelined claims are decided out of order: a version's time can be earlier than the one's before it. The
    bisection still names the same version for ``t`` however many versions (all decided after ``t``) follow,
    and that version has ``time(G) <= t < time(G + 1)``."""
    rng = random.Random(seed)
    times = [rng.randrange(0, 1000) for _ in range(rng.randrange(1, 60))]
    t = rng.randrange(0, 1000)
    later = [1000 + i for i in range(200)]
    first = bisect_time(t, len(times) - 1, 0, times.__getitem__)
    assert first == -1 or times[first] <= t
    assert first + 1 == len(times) or times[first + 1] > t
    grown = times + later
    for latest in range(len(times), len(grown)):
        assert bisect_time(t, latest, 0, grown.__getitem__) == first


@pytest.mark.parametrize(
    ("timestamp", "error"),
    [
        (datetime(2026, 1, 1, 12, 0), txlake.InvalidArgumentError),  # no time zone
        (datetime.now(UTC) + timedelta(hours=1), txlake.InvalidArgumentError),  # not yet
        (datetime(2000, 1, 1, tzinfo=UTC), txlake.VersionNotFoundError),  # before the lakehouse
        ("2026-01-01T00:00:00Z", txlake.InvalidArgumentTypeError),  # a string, not a datetime
    ],
)
def test_a_timestamp_that_names_no_version_is_a_typed_error(
    tmp_path: Path, timestamp: object, error: type[Exception]
) -> None:
    lake = _lake_with_versions(StoreLocation(f"file://{tmp_path}/lake", {}), 1)
    with pytest.raises(error):
        lake.snapshot(timestamp=timestamp)  # type: ignore[arg-type]
    with pytest.raises(error):
        lake.version_at(timestamp)  # type: ignore[arg-type]


def test_tags_name_versions_for_good(any_store_uri: StoreLocation) -> None:
    lake = _lake_with_versions(any_store_uri, 4)
    first = lake.version()
    tag = lake.tag("Release-1", description="end of the first load")
    assert (tag.name, tag.version, tag.description) == ("Release-1", first, "end of the first load")
    with lake.transaction() as tx:
        tx.append("t.a", pa.table({"id": [100]}))
    lake.tag("nightly.2026-11-24", version=2)
    other = txlake.connect(
        any_store_uri.uri, any_store_uri.storage_options
    )  # tags are in the lakehouse, not the client
    assert [(t.name, t.version) for t in other.tags()] == [("nightly.2026-11-24", 2), ("Release-1", first)]
    assert other.snapshot(tag="release-1").version == first  # case does not matter
    assert _rows(other.snapshot(tag="RELEASE-1")) == _rows(other.snapshot(version=first))
    assert 100 not in _rows(other.snapshot(tag="Release-1"))["t.a"]

    with pytest.raises(txlake.TagAlreadyExistsError) as taken:
        other.tag("release-1", version=2)  # tags never move
    assert taken.value.version == first and "exists already (version" in str(taken.value)
    assert other.snapshot(tag="release-1").version == first

    dropped = other.drop_tag("RELEASE-1")
    assert dropped.version == first
    with pytest.raises(txlake.TagNotFoundError, match=r"no tag 'release-1' \(tags: nightly.2026-11-24\)"):
        lake.snapshot(tag="release-1")
    with pytest.raises(txlake.TagNotFoundError):
        lake.drop_tag("release-1")
    assert lake.tag("release-1", version=2).version == 2  # dropped, the name can name another version


def test_a_tag_needs_a_decided_version_and_a_valid_name(tmp_path: Path) -> None:
    lake = _lake_with_versions(StoreLocation(f"file://{tmp_path}/lake", {}), 1)
    store = TagStore(lake.store)
    for bad, error in (
        ("", txlake.InvalidArgumentError),
        ("a b", txlake.InvalidArgumentError),
        ("../x", txlake.InvalidArgumentError),
        ("-x", txlake.InvalidArgumentError),
        ("x" * 129, txlake.InvalidArgumentError),
        (5, txlake.InvalidArgumentTypeError),
    ):
        with pytest.raises(error):
            lake.tag(bad)  # type: ignore[arg-type]
    with pytest.raises(txlake.VersionNotFoundError):
        lake.tag("later", version=lake.version() + 1)
    with pytest.raises(txlake.VersionNotFoundError):
        lake.tag("negative", version=-1)
    with pytest.raises(txlake.InvalidArgumentError):
        lake.snapshot(version=1, tag="x")
    assert store.list() == [] and not lake.store.list("_txlake/tags")  # nothing was written


@pytest.mark.parametrize("backend", ["file", pytest.param("s3", marks=pytest.mark.s3)])
def test_racing_writers_of_one_tag_leave_exactly_one(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "s3":
        location = StoreLocation(request.getfixturevalue("s3_uri"), request.getfixturevalue("s3_options"))
    else:
        location = StoreLocation(f"file://{tmp_path}/lake", {})
    lake = _lake_with_versions(location, 7)
    clients = [txlake.connect(location.uri, location.storage_options) for _ in range(8)]
    barrier = threading.Barrier(len(clients))
    won: list[int] = []
    lost: list[txlake.TagAlreadyExistsError] = []

    def tag(i: int) -> None:
        barrier.wait()
        try:
            won.append(clients[i].tag("golden", version=i).version)
        except txlake.TagAlreadyExistsError as exc:
            lost.append(exc)

    threads = [threading.Thread(target=tag, args=(i,)) for i in range(len(clients))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1 and len(lost) == len(clients) - 1
    assert {exc.version for exc in lost} == set(won)  # every loser is told which version won
    assert [(t.name, t.version) for t in lake.tags()] == [("golden", won[0])]
