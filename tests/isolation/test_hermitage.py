"""The Hermitage isolation suite (ept/hermitage), single- and two-table, in two file layouts.

Spec: ``shared/research/isolation-tests.md`` §2-§3; expected results: ``docs/protocol.md`` §5-§6.
Level mapping: ``snapshot`` = LH-SI, ``serializable`` = LH-SER, ``write_serializable`` = LH-SI plus
validation of the predicates that update/delete/merge statements read (so G2 with blind inserts slips
through, as in Delta).

Each case runs twice:

* ``test_safety`` asserts what must hold whoever aborts: no anomalous value is read, the committed
  writers are a combination the level allows (never both sides of a write-write conflict), and every
  lakehouse version shows exactly the writes of the transactions committed up to it, in every table
  (all-or-nothing, each row once).
* ``test_precision`` (``-m precision``) also asserts who commits and which conflict class the loser
  gets. Where x and y share one Parquet file, a write to either rewrites that file, so a commit the
  level allows may abort on a file-level conflict: no commit is demanded there.

All transactions begin when the case starts (snapshot at BEGIN, for all tables at once) unless the
script says otherwise; txlake detects conflicts lazily, at commit.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

import txlake
from tests.isolation.hermitage import (
    INITIAL,
    LAYOUTS,
    LEVELS,
    Expectation,
    Hermitage,
    Layout,
    Level,
    Session,
)
from txlake import (
    ConcurrentAppendError,
    ConcurrentDeleteDeleteError,
    ConcurrentDeleteReadError,
    ConflictError,
    Lakehouse,
    Transaction,
    TransactionClosedError,
)
from txlake.delta.colmap import physical_name


@pytest.fixture(params=["file", "memory"])
def lake(request: pytest.FixtureRequest, tmp_path: Path) -> Lakehouse:
    """An empty lakehouse on local disk below ``tmp_path`` or in a fresh ``memory://`` store."""
    if request.param == "file":
        return txlake.connect(f"file://{tmp_path}/lake")
    return txlake.connect(f"memory://{uuid.uuid4().hex}")


# ---------------------------------------------------------------------------------- expectations


def ww(winner: str, loser: str, *also_commit: str) -> Callable[[Level, Layout], Expectation]:
    """A write-write conflict at every level: the first committer wins, the loser removed its file too.

    Under serializable a loser that also read a table the winner wrote may be stopped by that read
    first (tables are checked one after the other): ``ConcurrentDeleteReadError`` is as right. Under
    write_serializable and serializable a loser whose update/delete predicate matches what the winner
    added to another table (even if the statement changed nothing there) may get
    ``ConcurrentAppendError`` first.
    """

    def expect(level: Level, layout: Layout) -> Expectation:
        error: tuple[type[ConflictError], ...] = (ConcurrentDeleteDeleteError,)
        if level == "serializable":
            error += (ConcurrentDeleteReadError,)
        if level != "snapshot":
            error += (ConcurrentAppendError,)
        return {winner: True, loser: error, **dict.fromkeys(also_commit, True)}

    return expect


def all_commit(*names: str) -> Callable[[Level, Layout], Expectation]:
    """Nothing to abort for: every transaction commits at every level and in every layout."""

    def expect(level: Level, layout: Layout) -> Expectation:
        return dict.fromkeys(names, True)

    return expect


def rw(
    loser: str,
    others: tuple[str, ...],
    error: type[ConflictError] = ConcurrentDeleteReadError,
    *,
    shares_file: bool = True,
) -> Callable[[Level, Layout], Expectation]:
    """An rw anti-dependency: only serializable aborts ``loser`` (with ``error``).

    With ``shares_file`` the writes of the two transactions land in the one shared file of the
    ``one_file`` layout; there a file-level conflict may abort ``loser`` at any level (any class).
    """

    def expect(level: Level, layout: Layout) -> Expectation:
        out: dict[str, bool | type[ConflictError] | tuple[type[ConflictError], ...]] = dict.fromkeys(others, True)
        false_conflict = shares_file and layout == "one_file"
        if level == "serializable":
            out[loser] = ConflictError if false_conflict else error
        elif not false_conflict:
            out[loser] = True
        return out

    return expect


@dataclass(frozen=True)
class Case:
    run: Callable[[Hermitage], None]
    expect: Callable[[Level, Layout], Expectation]


CASES: dict[str, Case] = {}


def case(name: str, expect: Callable[[Level, Layout], Expectation]) -> Callable[[Callable[[Hermitage], None]], Case]:
    def register(run: Callable[[Hermitage], None]) -> Case:
        CASES[name] = Case(run, expect)
        return CASES[name]

    return register


def begin(h: Hermitage, *names: str) -> list[Session]:
    return [h.begin(n) for n in names]


def serializable_forbids(h: Hermitage, *names: str) -> list[tuple[str, ...]]:
    return [names] if h.level == "serializable" else []


# ------------------------------------------------------------------------------------------ cases


@case("G0", ww("T1", "T2"))
def g0(h: Hermitage) -> None:
    """Write cycles: T2's writes interleave T1's; T2 must not commit, and no mix of both appears."""
    t1, t2 = begin(h, "T1", "T2")
    t1.w("x", 11)
    t2.w("x", 12)
    t1.w("y", 21)
    t1.commit()
    if t1.committed:
        assert h.fresh_state() == {1: 11, 2: 21}
    t2.w("y", 22)
    t2.commit()
    h.check(
        {(): INITIAL, ("T1",): {1: 11, 2: 21}, ("T2",): {1: 12, 2: 22}},
        forbidden=[("T1", "T2")],
    )


@case("G1a", all_commit("T2"))
def g1a(h: Hermitage) -> None:
    """Aborted reads: T1's staged writes are never visible, before or after its abort."""
    t1, t2 = begin(h, "T1", "T2")
    t1.w("x", 101)
    if h.mt:
        t1.w("y", 201)
    assert t2.r("x") == 10
    if h.mt:
        assert t2.r("y") == 20
    t1.abort()
    assert t2.r("x") == 10
    if h.mt:
        assert t2.r("y") == 20
    t2.commit()
    h.check({(): INITIAL})


@case("G1b", all_commit("T1", "T2", "T3"))
def g1b(h: Hermitage) -> None:
    """Intermediate reads: 101 is never read; T1 publishes only its final write (one row per id)."""
    t1, t2 = begin(h, "T1", "T2")
    t1.w("x", 101)
    if h.mt:
        t1.w("y", 201)
    assert t2.r("x") == 10
    if h.mt:
        assert t2.r("y") == 20
    t1.w("x", 11)
    if h.mt:
        t1.w("y", 21)
    t1.commit()
    assert t2.r("x") == 10
    if h.mt:
        assert t2.r("y") == 20
    t2.commit()
    final = {1: 11, 2: 21 if h.mt else 20}
    (t3,) = begin(h, "T3")
    assert t3.r_all() == (final if t1.committed else INITIAL)
    t3.commit()
    h.check({(): INITIAL, ("T1",): final})


@case("G1c", rw("T2", ("T1",)))
def g1c(h: Hermitage) -> None:
    """Circular information flow: allowed (write skew) under SI and WS, T2 aborts under serializable."""
    t1, t2 = begin(h, "T1", "T2")
    t1.w("x", 11)
    t2.w("y", 22)
    assert t1.r("y") == 20
    assert t2.r("x") == 10
    t1.commit()
    t2.commit()
    h.check(
        {(): INITIAL, ("T1",): {1: 11, 2: 20}, ("T2",): {1: 10, 2: 22}, ("T1", "T2"): {1: 11, 2: 22}},
        forbidden=serializable_forbids(h, "T1", "T2"),
    )


@case("OTV", ww("T1", "T2", "T3"))
def otv(h: Hermitage) -> None:
    """Observed transaction vanishes: T3 (begun before T1's commit) reads 10,20,20,10; T2 aborts."""
    t1, t2, t3 = begin(h, "T1", "T2", "T3")
    t1.w("x", 11)
    t1.w("y", 19)
    t2.w("x", 12)
    t1.commit()
    assert t3.r("x") == 10
    t2.w("y", 18)
    assert t3.r("y") == 20
    t2.commit()
    assert t3.r("y") == 20
    assert t3.r("x") == 10
    t3.commit()
    h.check(
        {(): INITIAL, ("T1",): {1: 11, 2: 19}, ("T2",): {1: 12, 2: 18}},
        forbidden=[("T1", "T2")],
    )


@case("E3-OTV-2", all_commit("T1", "T2", "T3"))
def e3_lazy_pinning(h: Hermitage) -> None:
    """Lazy pinning (§3 E3): T3 begins after T1, reads x, T2 commits; T3 still reads y=19 (never 18)."""
    (t1,) = begin(h, "T1")
    t1.w("x", 11)
    t1.w("y", 19)
    t1.commit()
    seen = {1: 11, 2: 19} if t1.committed else INITIAL
    (t3,) = begin(h, "T3")
    assert t3.r("x") == seen[1]
    (t2,) = begin(h, "T2")
    t2.w("x", 12)
    t2.w("y", 18)
    t2.commit()
    assert t3.r("y") == seen[2]
    assert t3.r("x") == seen[1]
    t3.commit()
    h.check({(): INITIAL, ("T1",): {1: 11, 2: 19}, ("T2",): {1: 12, 2: 18}, ("T1", "T2"): {1: 12, 2: 18}})


@case("PMP", all_commit("T1", "T2"))
def pmp(h: Hermitage) -> None:
    """Predicate-many-preceders: T1's second predicate read does not see T2's insert."""
    t1, t2 = begin(h, "T1", "T2")
    assert t1.pr("value = 30") == {}
    t2.ins("B", 3, 30)
    t2.commit()
    assert t1.pr("value % 3 = 0") == {}
    t1.commit()
    h.check({(): INITIAL, ("T2",): {**INITIAL, 3: 30}})


@case("PMP-write", ww("T1", "T2"))
def pmp_write(h: Hermitage) -> None:
    """Write predicate: T2 deletes y on its own snapshot; it must abort after T1's update commits."""
    t1, t2 = begin(h, "T1", "T2")
    t1.pupd("value + 10")
    t2.pdel("value = 20")
    assert t2.r_all() == {1: 10}
    t1.commit()
    t2.commit()
    h.check(
        {(): INITIAL, ("T1",): {1: 20, 2: 30}, ("T2",): {1: 10}},
        forbidden=[("T1", "T2")],
    )


@case("P4", ww("T1", "T2"))
def p4(h: Hermitage) -> None:
    """Lost update; the two-table variant increments A.x and B.y in both transactions."""
    t1, t2 = begin(h, "T1", "T2")
    if not h.mt:
        assert t1.r("x") == 10
        assert t2.r("x") == 10
        t1.w("x", 11)
        t2.w("x", 11)
        t1.commit()
        t2.commit()
        h.check({(): INITIAL, ("T1",): {1: 11, 2: 20}, ("T2",): {1: 11, 2: 20}}, forbidden=[("T1", "T2")])
        return
    x1, x2 = t1.r("x"), t2.r("x")
    assert x1 == 10
    assert x2 == 10
    t1.w("x", x1 + 1)
    t2.w("x", x2 + 1)
    y1, y2 = t1.r("y"), t2.r("y")
    assert y1 == 20
    assert y2 == 20
    t1.w("y", y1 + 1)
    t2.w("y", y2 + 1)
    t1.commit()
    t2.commit()
    h.check({(): INITIAL, ("T1",): {1: 11, 2: 21}, ("T2",): {1: 11, 2: 21}}, forbidden=[("T1", "T2")])


@case("G-single", all_commit("T1", "T2"))
def g_single(h: Hermitage) -> None:
    """Read skew: T1 reads y=20 after T2 committed x=12,y=18 (the key test against lazy pinning)."""
    t1, t2 = begin(h, "T1", "T2")
    assert t1.r("x") == 10
    assert t2.r("x") == 10
    assert t2.r("y") == 20
    t2.w("x", 12)
    t2.w("y", 18)
    t2.commit()
    assert t1.r("y") == 20
    t1.commit()
    h.check({(): INITIAL, ("T2",): {1: 12, 2: 18}})


@case("G-single-dependencies", all_commit("T1", "T2"))
def g_single_dependencies(h: Hermitage) -> None:
    """Predicate read skew: T1's second predicate read does not see T2's update of x to 12."""
    t1, t2 = begin(h, "T1", "T2")
    assert t1.pr("value % 5 = 0") == {1: 10, 2: 20}
    t2.pupd("12", "value = 10", on=("A",))
    t2.commit()
    assert t1.pr("value % 3 = 0") == {}
    t1.commit()
    h.check({(): INITIAL, ("T2",): {1: 12, 2: 20}})


@case("G-single-write-1", ww("T2", "T1"))
def g_single_write_1(h: Hermitage) -> None:
    """T1 deletes y=20 on its snapshot after T2 overwrote y: T1 sees its delete, then must abort."""
    t1, t2 = begin(h, "T1", "T2")
    assert t1.r("x") == 10
    assert t2.r_all() == INITIAL
    t2.w("x", 12)
    t2.w("y", 18)
    t2.commit()
    t1.pdel("value = 20", on=("B",))
    assert t1.r_all() == {1: 10}
    t1.commit()
    h.check(
        {(): INITIAL, ("T2",): {1: 12, 2: 18}, ("T1",): {1: 10}},
        forbidden=[("T1", "T2")],
    )


@case("G-single-write-2", all_commit("T2"))
def g_single_write_2(h: Hermitage) -> None:
    """An aborted transaction's staged delete never makes anyone else conflict: T2 commits."""
    t1, t2 = begin(h, "T1", "T2")
    assert t1.r("x") == 10
    assert t2.r_all() == INITIAL
    t2.w("x", 12)
    t1.pdel("value = 20", on=("B",))
    t2.w("y", 18)
    t1.abort()
    t2.commit()
    h.check({(): INITIAL, ("T2",): {1: 12, 2: 18}})


@case("G2-item", rw("T2", ("T1",)))
def g2_item(h: Hermitage) -> None:
    """Write skew: both read x,y, write different rows (tables); serializable aborts T2."""
    t1, t2 = begin(h, "T1", "T2")
    assert t1.r("x") == 10
    assert t1.r("y") == 20
    assert t2.r("x") == 10
    assert t2.r("y") == 20
    t1.w("x", 11)
    t2.w("y", 21)
    t1.commit()
    t2.commit()
    h.check(
        {(): INITIAL, ("T1",): {1: 11, 2: 20}, ("T2",): {1: 10, 2: 21}, ("T1", "T2"): {1: 11, 2: 21}},
        forbidden=serializable_forbids(h, "T1", "T2"),
    )


@case("G2", rw("T2", ("T1",), ConcurrentAppendError, shares_file=False))
def g2(h: Hermitage) -> None:
    """Anti-dependency cycle on a predicate with blind inserts: only serializable aborts T2."""
    t1, t2 = begin(h, "T1", "T2")
    assert t1.pr("value % 3 = 0") == {}
    assert t2.pr("value % 3 = 0") == {}
    t1.ins("A", 3, 30)
    t2.ins("B", 4, 42)
    t1.commit()
    t2.commit()
    h.check(
        {
            (): INITIAL,
            ("T1",): {**INITIAL, 3: 30},
            ("T2",): {**INITIAL, 4: 42},
            ("T1", "T2"): {**INITIAL, 3: 30, 4: 42},
        },
        forbidden=serializable_forbids(h, "T1", "T2"),
    )


@case("G2-two-edges", rw("T1", ("T2", "T3")))
def g2_two_edges(h: Hermitage) -> None:
    """Fekete's read-only anomaly: T3 sees T2 but not T1; serializable aborts T1 (y is in its read set)."""
    t1, t2 = begin(h, "T1", "T2")
    assert t1.r_all() == INITIAL
    t2.w("y", "value + 5")
    t2.commit()
    (t3,) = begin(h, "T3")
    assert t3.r_all() == ({1: 10, 2: 25} if t2.committed else INITIAL)
    t3.commit()
    t1.w("x", 0)
    t1.commit()
    h.check(
        {(): INITIAL, ("T2",): {1: 10, 2: 25}, ("T1",): {1: 0, 2: 20}, ("T1", "T2"): {1: 0, 2: 25}},
        forbidden=serializable_forbids(h, "T1", "T2"),
    )


def dml_skew_expect(level: Level, layout: Layout) -> Expectation:
    if level == "snapshot":
        return {"T1": True, "T2": True}
    return {"T2": True, "T1": ConcurrentAppendError}


@case("WS-DML-skew", dml_skew_expect)
def ws_dml_skew(h: Hermitage) -> None:
    """Derived (not Hermitage): G2 whose two rw edges are both DML predicate reads.

    T1 updates rows with value >= 20 (y -> 21; nothing in A); T2 deletes rows with value = 21 from B
    (nothing on its snapshot) and inserts (3,30) into A. Both committing matches no serial order
    (T1;T2 deletes y, T2;T1 makes 3 -> 31), so write_serializable, which validates the predicates of
    update/delete statements, must abort the later committer, also where a statement's table was
    left unchanged by it (A for T1, B for T2).
    """
    t1, t2 = begin(h, "T1", "T2")
    t1.pupd("value + 1", "value >= 20")
    t2.pdel("value = 21", on=("B",))
    t2.ins("A", 3, 30)
    t2.commit()
    t1.commit()
    h.check(
        {
            (): INITIAL,
            ("T1",): {1: 10, 2: 21},
            ("T2",): {**INITIAL, 3: 30},
            ("T1", "T2"): {1: 10, 2: 21, 3: 30},
        },
        forbidden=[] if h.level == "snapshot" else [("T1", "T2")],
    )


# ------------------------------------------------------------------------------------------ tests


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", list(CASES))
def test_safety(name: str, level: Level, layout: Layout, lake: Lakehouse) -> None:
    CASES[name].run(Hermitage(lake, level, layout))


@pytest.mark.precision
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", list(CASES))
def test_precision(name: str, level: Level, layout: Layout, lake: Lakehouse) -> None:
    h = Hermitage(lake, level, layout)
    CASES[name].run(h)
    h.assert_outcomes(CASES[name].expect(level, layout))


@pytest.mark.parametrize("layout", ["two_files", "two_tables"])
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", list(CASES))
def test_precision_on_column_mapped_tables(name: str, level: Level, layout: Layout) -> None:
    """The same outcomes when the tables map columns: files, stats and partition values use physical names,
    conflict checks and predicates logical ones."""
    lake = txlake.connect(f"memory://{uuid.uuid4().hex}")
    h = Hermitage(lake, level, layout, properties={"delta.columnMapping.mode": "name"})
    CASES[name].run(h)
    h.assert_outcomes(CASES[name].expect(level, layout))
    assert physical_name(lake.snapshot().schema(h.table("A")).field("id")).startswith("col-")


DV_CASES = ["G0", "G1c", "OTV", "PMP-write", "P4", "G-single-write-1", "G2-item", "G2", "WS-DML-skew"]
"""A representative subset (write-write, read-write and predicate conflicts) run on deletion-vector tables."""


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", DV_CASES)
def test_safety_and_precision_on_deletion_vector_tables(
    name: str, level: Level, layout: Layout, lake: Lakehouse
) -> None:
    """Every file a case rewrites has a deletion vector: the same outcomes, and the ghost rows never come back."""
    h = Hermitage(lake, level, layout, deletion_vectors=True)
    snap = lake.snapshot()
    assert all(a.deletion_vector is not None for t in h.tables for a in snap.delta_snapshot(t).files.values())
    CASES[name].run(h)
    h.assert_outcomes(CASES[name].expect(level, layout))


def _value(tx: Transaction, name: str, ident: int) -> int:
    (value,) = tx.read_arrow(name, where=f"id = {ident}").column("value").to_pylist()
    return int(value)


def _increment(tx: Transaction) -> tuple[int, int]:
    """P4's MT transaction: x = r(A.x); w A.x = x+1; y = r(B.y); w B.y = y+1."""
    x = _value(tx, "h.a", 1)
    tx.update("h.a", set={"value": str(x + 1)}, where="id = 1")
    y = _value(tx, "h.b", 2)
    tx.update("h.b", set={"value": str(y + 1)}, where="id = 2")
    return x, y


@pytest.mark.parametrize("level", LEVELS)
def test_p4_retry_reruns_on_a_new_snapshot(level: Level, lake: Lakehouse) -> None:
    """E5: ``Lakehouse.run`` retries P4's loser by re-reading (12,22), never by replaying its writes."""
    h = Hermitage(lake, level, "two_tables")
    seen: list[tuple[int, int]] = []
    winners: list[txlake.CommitResult] = []

    def t2(tx: Transaction) -> None:
        x = _value(tx, "h.a", 1)
        tx.update("h.a", set={"value": str(x + 1)}, where="id = 1")
        if not seen:  # first attempt: T1 runs and commits between T2's statements and T2's commit
            t1 = lake.transaction(isolation=level)
            assert _increment(t1) == (10, 20)
            winners.append(t1.commit())
        y = _value(tx, "h.b", 2)
        tx.update("h.b", set={"value": str(y + 1)}, where="id = 2")
        seen.append((x, y))

    lake.run(t2, isolation=level, retries=3, base_delay=0.0)
    assert len(winners) == 1
    assert seen == [(10, 20), (11, 21)]
    assert h.fresh_state() == {1: 12, 2: 22}


def test_p4_without_retry_raises_and_loses_nothing(lake: Lakehouse) -> None:
    """A plain ``with`` block does not retry: the loser gets the conflict and the winner's update stays."""
    h = Hermitage(lake, "snapshot", "two_tables")
    t1 = lake.transaction(isolation="snapshot")
    with pytest.raises(ConcurrentDeleteDeleteError) as info, lake.transaction(isolation="snapshot") as t2:
        assert _increment(t2) == (10, 20)
        assert _increment(t1) == (10, 20)
        t1.commit()
    assert info.value.table in ("h.a", "h.b")
    assert info.value.read_version == t1.read_version
    assert t2.status == "aborted"
    assert h.fresh_state() == {1: 11, 2: 21}


@pytest.mark.parametrize("level", LEVELS)
def test_closed_after_commit_abort_and_conflict(level: Level, lake: Lakehouse) -> None:
    """A transaction is unusable once committed, aborted, or failed by a conflict."""
    h = Hermitage(lake, level, "two_files")
    committed, aborted, loser = (lake.transaction(isolation=level, redo=False) for _ in range(3))
    committed.update("h.test", set={"value": "11"}, where="id = 1")
    loser.update("h.test", set={"value": "12"}, where="id = 1")
    committed.commit()
    aborted.abort()
    with pytest.raises(ConcurrentDeleteDeleteError):
        loser.commit()
    for tx in (committed, aborted, loser):
        with pytest.raises(TransactionClosedError):
            tx.read_arrow("h.test")
        with pytest.raises(TransactionClosedError):
            tx.update("h.test", set={"value": "0"})
        with pytest.raises(TransactionClosedError):
            tx.commit()
        with pytest.raises(TransactionClosedError):
            tx.abort()
    assert h.fresh_state() == {1: 11, 2: 20}


def _files_of(lake: Lakehouse, txid: str) -> list[str]:
    """Objects below the tables whose names carry ``txid`` (data files are named by their transaction)."""
    paths = [lake.snapshot().entry(name).path for name in ("h.a", "h.b")]
    return [m.path for path in paths for m in lake.store.list(path) if txid in m.path]


def test_aborted_transactions_leave_no_files_and_no_version(lake: Lakehouse) -> None:
    """G1a (MT): an abort or a lost conflict deletes its staged files and claims no lakehouse version."""
    Hermitage(lake, "serializable", "two_tables")
    version = lake.version()
    aborted = lake.transaction()
    aborted.update("h.a", set={"value": "101"}, where="id = 1")
    aborted.update("h.b", set={"value": "201"}, where="id = 2")
    aborted.update("h.a", set={"value": "11"}, where="id = 1")
    assert _files_of(lake, aborted.txid)
    aborted.abort()
    assert _files_of(lake, aborted.txid) == []
    winner, loser = lake.transaction(), lake.transaction(redo=False)
    winner.update("h.b", set={"value": "21"}, where="id = 2")
    loser.update("h.a", set={"value": "11"}, where="id = 1")
    loser.update("h.b", set={"value": "22"}, where="id = 2")
    winner.commit()
    with pytest.raises(ConcurrentDeleteDeleteError) as info:
        loser.commit()
    assert info.value.table == "h.b"
    assert _files_of(lake, loser.txid) == []
    assert lake.version() == version + 1


def test_aborted_delete_of_a_whole_file_leaves_no_files(lake: Lakehouse) -> None:
    """G-single-write-2 (MT): T1's delete empties y's file; after T1 aborts nothing of T1 is stored."""
    Hermitage(lake, "serializable", "two_tables")
    t1 = lake.transaction()
    assert t1.delete("h.b", where="value = 20") == 1
    t1.abort()
    assert _files_of(lake, t1.txid) == []


@pytest.mark.s3
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", list(CASES))
def test_precision_on_seaweedfs(name: str, level: Level, s3_uri: str, s3_options: dict[str, str]) -> None:
    """The two-table variant of every case, with its exact outcomes, on a real S3 server."""
    h = Hermitage(txlake.connect(s3_uri, s3_options), level, "two_tables")
    CASES[name].run(h)
    h.assert_outcomes(CASES[name].expect(level, "two_tables"))
