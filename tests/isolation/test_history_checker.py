"""Elle-style history checking: the list-append checker on hand-made histories, then on txlake's.

The checker (``tests/isolation/elle.py``) is first shown to find each anomaly in a history that has it
(a checker that finds nothing proves nothing), and nothing in serial histories or false cycles in modelled
snapshot-isolation ones. Then worker processes run random list-append transactions over three tables at
one isolation level, on ``file://`` and on SeaweedFS, and the history must show only what the level allows
(``docs/concepts/isolation.md``):

* ``serializable``: no anomaly at all;
* ``snapshot`` and ``write_serializable``: nothing but ``G2-item``, and G2-item does show up (write skew:
  plain reads are never validated at these levels; ``write_serializable`` validates only the predicates of
  update/delete/merge statements, here ``key = k`` of the key an append rewrites, so for this workload it
  behaves like ``snapshot``).

``pytest -s`` prints each run's anomaly table; ``--long`` adds ten-minute runs of every configuration.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

import txlake
from tests.isolation.elle import (
    CYCLE_KINDS,
    Append,
    Layout,
    Level,
    Mop,
    Read,
    RecordingTransaction,
    Report,
    Txn,
    WorkloadConfig,
    check,
    load_history,
    run_workload,
    save_history,
    setup_lake,
    txn,
)
from tests.services import SeaweedFS

LEVELS: tuple[Level, ...] = ("snapshot", "write_serializable", "serializable")
LAYOUTS: tuple[Layout, ...] = ("file_per_key", "file_per_table")
Concurrency = Literal["optimistic", "pessimistic", "mixed"]
ALLOWED: dict[Level, set[str]] = {
    "snapshot": {"G2-item"},
    "write_serializable": {"G2-item"},
    "serializable": set(),
}

# ------------------------------------------------------------------------------- the checker on hand-made


def kinds(*history: Txn, complete: bool = True) -> set[str]:
    return check(history, complete=complete).kinds()


def test_serial_history_has_no_anomaly() -> None:
    history = [
        txn(1, "ok", ("append", "x", 1), ("r", "y", [])),
        txn(2, "ok", ("r", "x", [1]), ("append", "x", 2), ("append", "y", 3), ("r", "x", [1, 2])),
        txn(3, "fail", ("append", "x", 4)),
        txn(4, "ok", ("r", "x", [1, 2]), ("r", "y", [3])),
    ]
    report = check(history, complete=True)
    assert report.anomalies == ()
    assert (report.committed, report.failed, report.info) == (3, 1, 0)
    assert report.version_orders == {"x": (1, 2), "y": (3,)}


def test_g0_write_cycle() -> None:
    """T1 and T2 each append to x and y; x shows T1 first, y shows T2 first."""
    report = check(
        [
            txn(1, "ok", ("append", "x", 1), ("append", "y", 11)),
            txn(2, "ok", ("append", "x", 2), ("append", "y", 12)),
            txn(3, "ok", ("r", "x", [1, 2]), ("r", "y", [12, 11])),
        ],
        complete=True,
    )
    assert report.kinds() == {"G0"}
    g0 = report.example("G0")
    assert g0 is not None
    assert set(g0.txns) == {1, 2}
    assert {(d.kind, d.key) for d in g0.cycle} == {("ww", "x"), ("ww", "y")}


def test_g1a_aborted_read() -> None:
    assert kinds(txn(1, "fail", ("append", "x", 1)), txn(2, "ok", ("r", "x", [1]))) == {"G1a"}


def test_g1b_intermediate_read() -> None:
    """T1 appends 1 then 2 to x; T2 sees x = [1], a state that never committed."""
    report = check(
        [
            txn(1, "ok", ("append", "x", 1), ("append", "x", 2)),
            txn(2, "ok", ("r", "x", [1])),
            txn(3, "ok", ("r", "x", [1, 2])),
        ],
        complete=True,
    )
    assert report.kinds() == {"G1b"}
    g1b = report.example("G1b")
    assert g1b is not None
    assert g1b.txns == (1, 2)


def test_g1c_circular_information_flow() -> None:
    """Each transaction reads the other's append."""
    report = check(
        [
            txn(1, "ok", ("append", "x", 1), ("r", "y", [2])),
            txn(2, "ok", ("append", "y", 2), ("r", "x", [1])),
        ],
        complete=True,
    )
    assert report.kinds() == {"G1c"}
    g1c = report.example("G1c")
    assert g1c is not None
    assert sorted(d.kind for d in g1c.cycle) == ["wr", "wr"]


def test_g_single_read_skew() -> None:
    """T1 misses T2's append to x but sees its append to y: one anti-dependency in the cycle."""
    report = check(
        [
            txn(1, "ok", ("r", "x", []), ("r", "y", [2])),
            txn(2, "ok", ("append", "x", 1), ("append", "y", 2)),
            txn(3, "ok", ("r", "x", [1]), ("r", "y", [2])),
        ],
        complete=True,
    )
    assert report.kinds() == {"G-single"}
    example = report.example("G-single")
    assert example is not None
    assert example.rw_edges == 1
    assert sorted(str(d) for d in example.cycle) == ["T1 -rw[x]-> T2", "T2 -wr[y]-> T1"]


def test_g2_item_write_skew() -> None:
    """Both read x and y empty, then each appends to a different one: two anti-dependencies."""
    report = check(
        [
            txn(1, "ok", ("r", "x", []), ("r", "y", []), ("append", "x", 1)),
            txn(2, "ok", ("r", "x", []), ("r", "y", []), ("append", "y", 2)),
            txn(3, "ok", ("r", "x", [1]), ("r", "y", [2])),
        ],
        complete=True,
    )
    assert report.kinds() == {"G2-item"}
    example = report.example("G2-item")
    assert example is not None
    assert example.rw_edges == 2
    assert "G2-item" in report.table()


def test_g2_item_through_a_long_cycle() -> None:
    """Fekete's read-only anomaly: T1 -rw-> T2 -wr-> T3 -rw-> T1 is G2-item (two rw edges), not G-single."""
    report = check(
        [
            txn(1, "ok", ("r", "x", []), ("append", "w", 1)),
            txn(2, "ok", ("append", "x", 2), ("append", "y", 3)),
            txn(3, "ok", ("r", "y", [3]), ("r", "w", [])),
            txn(4, "ok", ("r", "x", [2]), ("r", "y", [3]), ("r", "w", [1])),
        ],
        complete=True,
    )
    assert report.kinds() == {"G2-item"}
    example = report.example("G2-item")
    assert example is not None
    assert len(example.cycle) == 3
    assert example.rw_edges == 2


def test_incompatible_order() -> None:
    history = [
        txn(1, "ok", ("append", "x", 1)),
        txn(2, "ok", ("append", "x", 2)),
        txn(3, "ok", ("r", "x", [1])),
        txn(4, "ok", ("r", "x", [2])),
    ]
    assert "incompatible-order" in kinds(*history)


def test_internal_inconsistency() -> None:
    assert kinds(txn(1, "ok", ("append", "x", 1), ("r", "x", [])), txn(2, "ok", ("r", "x", [1]))) == {"internal"}
    assert kinds(txn(1, "ok", ("r", "x", []), ("r", "x", [2])), txn(2, "ok", ("append", "x", 2))) >= {"internal"}


def test_garbage_duplicates_and_lost_appends() -> None:
    assert kinds(txn(1, "ok", ("r", "x", [9]))) == {"garbage-read"}
    assert kinds(txn(1, "ok", ("append", "y", 9)), txn(2, "ok", ("r", "x", [9]), ("r", "y", [9]))) == {"garbage-read"}
    assert "duplicate-elements" in kinds(txn(1, "ok", ("append", "x", 1)), txn(2, "ok", ("r", "x", [1, 1])))
    lost = [txn(1, "ok", ("append", "x", 1)), txn(2, "ok", ("r", "x", []))]
    assert kinds(*lost) == {"lost-append"}
    assert kinds(*lost, complete=False) == set()


def test_unknown_outcomes_may_go_either_way() -> None:
    """An ``info`` transaction's appends may be seen or not; neither is an anomaly."""
    assert kinds(txn(1, "info", ("append", "x", 1)), txn(2, "ok", ("r", "x", [1]))) == set()
    assert kinds(txn(1, "info", ("append", "x", 1)), txn(2, "ok", ("r", "x", []))) == set()


def test_stale_read_breaks_real_time_order() -> None:
    """T2 begins after T1's commit returned, yet misses T1's append: serializable, but not in real time."""
    t1 = Txn(1, 0, "ok", (Append("x", 1),), start=10.0, end=11.0)
    fresh = Txn(2, 1, "ok", (Read("x", ()),), start=10.5, end=12.0)
    stale = Txn(2, 1, "ok", (Read("x", ()),), start=11.5, end=12.0)
    final = txn(3, "ok", ("r", "x", [1]))
    assert check([t1, fresh, final], complete=True).anomalies == ()
    assert check([t1, stale, final], complete=True).kinds() == {"stale-read"}


def test_a_value_appended_twice_is_an_invalid_history() -> None:
    with pytest.raises(ValueError, match="appended twice"):
        check([txn(1, "ok", ("append", "x", 1)), txn(2, "ok", ("append", "y", 1))])


def test_history_round_trips_through_json(tmp_path: Path) -> None:
    history = [txn(1, "ok", ("append", "x", 1), ("r", "y", [2, 3])), txn(2, "fail", ("r", "x", None), process=3)]
    assert load_history(save_history(history, tmp_path / "h.jsonl")) == history


# --------------------------------------------------------------- the checker on modelled databases


@dataclass
class _Open:
    """A transaction of the model in flight: its plan, snapshot and what it did so far."""

    id: int
    plan: list[tuple[str, str]]
    start: int
    snapshot: dict[str, list[int]]
    mops: list[Mop] = field(default_factory=list)


def model_history(seed: int, *, reads: Literal["snapshot", "latest"], concurrency: int, txns: int = 400) -> list[Txn]:
    """A history of an in-memory list-append database with first-committer-wins on appended keys.

    ``reads="snapshot"`` is snapshot isolation (concurrency 1: a serial database); ``"latest"`` reads the
    latest committed state at each read (read committed: read skew, G-single, is possible).
    """
    rng = random.Random(seed)
    keys = ["x", "y", "z"]
    state: dict[str, list[int]] = {k: [] for k in keys}
    writes: list[set[str]] = []  # keys appended by each commit, in commit order
    values: Iterator[int] = iter(range(1, 10**9))
    history: list[Txn] = []
    running: list[_Open] = []
    started = 0
    while started < txns or running:
        if started < txns and (len(running) < concurrency and (not running or rng.random() < 0.5)):
            plan = [("r" if rng.random() < 0.5 else "append", rng.choice(keys)) for _ in range(rng.randint(1, 4))]
            running.append(_Open(started, plan, len(writes), {k: list(v) for k, v in state.items()}))
            started += 1
            continue
        t = rng.choice(running)
        if t.plan:
            f, key = t.plan.pop(0)
            if f == "append":
                t.mops.append(Append(key, next(values)))
            else:
                seen = t.snapshot[key] if reads == "snapshot" else state[key]
                own = [m.value for m in t.mops if isinstance(m, Append) and m.key == key]
                t.mops.append(Read(key, (*seen, *own)))
            continue
        running.remove(t)
        mine = {m.key for m in t.mops if isinstance(m, Append)}
        if any(mine & later for later in writes[t.start :]):
            history.append(Txn(t.id, 0, "fail", tuple(t.mops)))
            continue
        for m in t.mops:
            if isinstance(m, Append):
                state[m.key].append(m.value)
        writes.append(mine)
        history.append(Txn(t.id, 0, "ok", tuple(t.mops)))
    history.append(Txn(txns, 1, "ok", tuple(Read(k, tuple(v)) for k, v in state.items())))
    return history


@pytest.mark.parametrize("seed", range(5))
def test_model_serial_database_has_no_anomaly(seed: int) -> None:
    report = check(model_history(seed, reads="snapshot", concurrency=1), complete=True)
    assert report.anomalies == ()
    assert report.committed == 401


@pytest.mark.parametrize("seed", range(5))
def test_model_snapshot_isolation_shows_write_skew_only(seed: int) -> None:
    """SI with first-committer-wins: G2-item cycles, never G0/G1/G-single (no false cycles)."""
    report = check(model_history(seed, reads="snapshot", concurrency=4), complete=True)
    assert report.kinds() == {"G2-item"}, report.table()
    assert report.failed > 0


def test_model_read_committed_shows_read_skew() -> None:
    """Reads of the latest committed state: non-repeatable reads (internal) and read skew (G-single)."""
    reports = [check(model_history(seed, reads="latest", concurrency=4), complete=True) for seed in range(5)]
    for report in reports:
        assert report.kinds() <= {"G-single", "G2-item", "internal"}, report.table()
    assert sum(report.counts()["G-single"] for report in reports) > 0


# ------------------------------------------------------------------------- txlake, step by step


@pytest.mark.parametrize("level", LEVELS)
def test_recorded_write_skew(level: Level, tmp_path: Path) -> None:
    """Two recorded transactions in one thread: both read x and y, each appends to one (two tables)."""
    config = WorkloadConfig((tmp_path / "lake").as_uri(), {}, level, keys_per_table=1)
    lake = setup_lake(config)
    x, y = "elle.t0/0", "elle.t1/0"
    t1, t2 = (RecordingTransaction(lake.transaction(level)) for _ in range(2))
    for rec in (t1, t2):
        assert rec.read(x) == ()
        assert rec.read(y) == ()
    t1.append(x, 1)
    t2.append(y, 2)
    t1.tx.commit()
    ended: list[Literal["ok", "fail"]] = ["ok"]
    try:
        t2.tx.commit()
        ended.append("ok")
    except txlake.ConflictError:
        ended.append("fail")
    final = RecordingTransaction(lake.transaction(level))
    for key in config.keys(0):
        final.read(key)
    history = [Txn(i, i, ended[i], tuple(rec.mops)) for i, rec in enumerate((t1, t2))]
    report = check([*history, Txn(2, 2, "ok", tuple(final.mops))], complete=True)
    if level == "serializable":
        assert ended == ["ok", "fail"]
        assert report.anomalies == ()
    else:
        assert ended == ["ok", "ok"]
        assert report.kinds() == {"G2-item"}


@pytest.mark.parametrize("level", LEVELS)
def test_recorded_concurrent_appends_to_one_key(level: Level, tmp_path: Path) -> None:
    """Read-modify-write appends to one key from two transactions: the later committer aborts (no P4)."""
    lake = setup_lake(WorkloadConfig((tmp_path / "lake").as_uri(), {}, level, keys_per_table=1))
    x = "elle.t2/0"
    t1, t2 = (RecordingTransaction(lake.transaction(level)) for _ in range(2))
    t1.append(x, 1)
    t2.append(x, 2)
    assert t2.read(x) == (2,)
    t1.tx.commit()
    with pytest.raises(txlake.ConflictError):
        t2.tx.commit()
    final = RecordingTransaction(lake.transaction(level))
    assert final.read(x) == (1,)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_recorded_scan_sees_own_appends(layout: Layout, tmp_path: Path) -> None:
    """A scan reads every key of a table, the transaction's own appends last."""
    config = WorkloadConfig((tmp_path / "lake").as_uri(), {}, "serializable", keys_per_table=2, layout=layout)
    lake = setup_lake(config)
    with lake.transaction() as tx:
        RecordingTransaction(tx).append("elle.t0/1", 1)
    rec = RecordingTransaction(lake.transaction())
    rec.append("elle.t0/1", 2)
    assert rec.scan("elle.t0") == {"elle.t0/0": (), "elle.t0/1": (1, 2)}
    assert rec.mops[1:] == [Read("elle.t0/0", ()), Read("elle.t0/1", (1, 2))]
    assert rec.tx.commit().table_versions


# ------------------------------------------------------------------------------ txlake, concurrent

PROCESSES = 4
SECONDS: dict[str, dict[str, float]] = {"ci": {"file": 8.0, "s3": 12.0}, "long": {"file": 600.0, "s3": 600.0}}
GENERATIONS = {"ci": 1, "long": 60}
MIN_COMMITTED = 50
RUN_ON = 6
"""A run goes on past its time, up to this many times it, until ``MIN_COMMITTED`` committed (a loaded machine
commits fewer: at load average 7-10 runs of 8 s committed as few as 4)."""
FORMS = [
    pytest.param("ci", marks=pytest.mark.timeout(240)),
    pytest.param("long", marks=[pytest.mark.slow, pytest.mark.timeout(3600)]),
]


def workload(
    level: Level,
    store: str,
    layout: Layout,
    uri: str,
    options: dict[str, str],
    form: str,
    root: Path,
    request: pytest.FixtureRequest,
    concurrency: Concurrency = "optimistic",
) -> Report:
    """Run the workload, save its history under ``root``, print the anomaly table, assert the level."""
    if form == "long" and not request.config.getoption("--long"):
        pytest.skip("the ten-minute history runs need --long")
    seed = random.randrange(2**32)
    # pessimistic transactions queue (one holder per table at a time): fewer commit in the same time, and a
    # conflict is rare (a deadlock, or an optimistic writer beside them)
    least = MIN_COMMITTED if concurrency == "optimistic" else MIN_COMMITTED // 2
    config = WorkloadConfig(
        uri,
        options,
        level,
        processes=PROCESSES,
        seconds=SECONDS[form][store],
        generations=GENERATIONS[form],
        layout=layout,
        concurrency=concurrency,
        seed=seed,
        min_committed=least,
        max_seconds=SECONDS[form][store] * RUN_ON,
    )
    (root / "workers").mkdir()
    run = run_workload(config, root / "workers")
    path = save_history(run.history, root / "history.jsonl")
    report = check(run.history, complete=True)
    cycles = report.counts()
    print(
        "\n"
        + report.table(
            f"elle {level} {concurrency} {store} {layout} seed={seed} {run.seconds:.1f}s {PROCESSES} processes"
        )
        + f"\n  write skew (G2-item) observed: {'yes' if cycles['G2-item'] else 'no'}; history: {path}"
    )
    assert report.committed >= least, f"only {report.committed} transactions committed"
    assert report.failed > 0 or concurrency == "pessimistic", "no transaction aborted: the workload has no contention"
    unexpected = report.kinds() - ALLOWED[level]
    assert not unexpected, f"{sorted(unexpected)} under {level} (seed {seed}); history: {path}\n{report.table()}"
    assert set(cycles) <= set(CYCLE_KINDS)
    if "G2-item" in ALLOWED[level] and concurrency == "optimistic":  # the workload shows what the level allows
        assert cycles["G2-item"] > 0, f"no write skew under {level} in {report.committed} commits"
    return report


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("level", LEVELS)
def test_history_file(level: Level, layout: Layout, form: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    workload(level, "file", layout, (tmp_path / "lake").as_uri(), {}, form, tmp_path, request)


@pytest.mark.s3
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("level", LEVELS)
def test_history_s3(
    level: Level, form: str, request: pytest.FixtureRequest, seaweedfs: SeaweedFS, s3_bucket: str, tmp_path: Path
) -> None:
    workload(
        level, "s3", "file_per_key", f"s3://{s3_bucket}/lake", seaweedfs.storage_options(), form, tmp_path, request
    )


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("level", ["snapshot", "serializable"])
def test_history_file_pessimistic_beside_optimistic(
    level: Level, form: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Half the processes pessimistic (intent markers), half optimistic, on the same keys: the level holds."""
    workload(level, "file", "file_per_key", (tmp_path / "lake").as_uri(), {}, form, tmp_path, request, "mixed")


@pytest.mark.s3
@pytest.mark.parametrize("form", FORMS)
def test_history_s3_pessimistic(
    form: str, request: pytest.FixtureRequest, seaweedfs: SeaweedFS, s3_bucket: str, tmp_path: Path
) -> None:
    workload(
        "serializable",
        "s3",
        "file_per_key",
        f"s3://{s3_bucket}/lake",
        seaweedfs.storage_options(),
        form,
        tmp_path,
        request,
        "pessimistic",
    )
