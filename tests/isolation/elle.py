"""Elle's list-append checker (Kingsbury & Alvaro, VLDB 2020) and a txlake workload that feeds it.

**History.** A history is a sequence of :class:`Txn`: the micro-operations a transaction ran
(``append(k, v)`` with a value unique in the history, ``r(k) -> [v1, v2, ...]``, the whole list in
append order) and how it ended: ``ok`` (committed), ``fail`` (aborted for sure: a ``ConflictError``) or
``info`` (commit state unknown: ``CommitStateUnknownError``).

**Checker** (:func:`check`). Because every read returns the whole list, the version order of each key is
the longest list read of it (every other read must be a prefix of it, else ``incompatible-order``). From
the version orders it builds the dependency graph over committed transactions: ``ww`` (T1 appended the
element before T2's in a key's list), ``wr`` (a read ends with T1's element) and ``rw`` (a read did not
see T2's element, the next one in the list). It reports, per type:

* ``G0`` a cycle of ``ww`` edges; ``G1c`` a cycle of ``ww``/``wr`` edges with a ``wr`` edge;
* ``G-single`` a cycle with exactly one ``rw`` edge; ``G2-item`` a cycle with two or more;
* ``G1a`` a committed read saw an element of a failed transaction; ``G1b`` a read ends with an element its
  writer followed with another append to the same key (an intermediate state);
* ``internal`` a transaction's reads disagree with its own earlier reads and appends;
* ``incompatible-order``, ``garbage-read`` (an element nobody appended), ``duplicate-elements``,
  (when the history ends with a read of every key after all writers) ``lost-append``, and (when
  transactions carry wall-clock times) ``stale-read``: a transaction missed an append whose transaction
  had committed, and told its client so, before it began (a real-time order violation).

A cycle is counted once per distinct set of transactions; one example per type is printed with the edges
explained.

**Workload** (:func:`run_workload`). Each key is one row ``(key, elements)`` of one of three tables, in
its own data file (or all keys of a table in one file); ``append(k, v)`` is
``UPDATE SET elements = elements || ' v' WHERE key = k`` (a read-modify-write in the engine, so lists keep
append order exactly), ``r(k)`` a ``read_arrow`` of the row, and a scan reads a whole table at once.
Worker *processes* (``multiprocessing``, spawn) run random transactions of a few micro-operations at one
isolation level; the history ends with one read of every key.
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import random
import time
from collections import Counter, defaultdict, deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import networkx as nx
import pyarrow as pa

import txlake

TxnType = Literal["ok", "fail", "info"]
EdgeKind = Literal["ww", "wr", "rw"]
Level = Literal["snapshot", "write_serializable", "serializable"]
Layout = Literal["file_per_key", "file_per_table"]

CYCLE_KINDS = ("G0", "G1c", "G-single", "G2-item")
ANOMALY_KINDS = (
    "G0",
    "G1a",
    "G1b",
    "G1c",
    "G-single",
    "G2-item",
    "internal",
    "incompatible-order",
    "garbage-read",
    "duplicate-elements",
    "lost-append",
    "stale-read",
)

# ------------------------------------------------------------------------------------------------ history


@dataclass(frozen=True)
class Append:
    """``append(key, value)``: add ``value`` (unique in the history) to the end of ``key``'s list."""

    key: str
    value: int


@dataclass(frozen=True)
class Read:
    """``r(key)``: the whole list of ``key`` as the transaction saw it (``None``: not read, or unknown)."""

    key: str
    values: tuple[int, ...] | None


Mop = Append | Read


@dataclass(frozen=True)
class Txn:
    """One transaction of a history: its micro-operations in program order and how it ended."""

    id: int
    process: int
    type: TxnType
    mops: tuple[Mop, ...]
    error: str | None = None
    start: float | None = None
    """Wall-clock time (``time.time()``) before the transaction began, when known."""
    end: float | None = None
    """Wall-clock time after its commit returned or failed, when known."""

    def appends(self, key: str) -> list[int]:
        return [m.value for m in self.mops if isinstance(m, Append) and m.key == key]

    def describe(self) -> str:
        ops = []
        for m in self.mops:
            if isinstance(m, Append):
                ops.append(f"append({m.key}, {m.value})")
            else:
                seen = "?" if m.values is None else _short(m.values)
                ops.append(f"r({m.key}) -> {seen}")
        end = self.type if self.error is None else f"{self.type} {self.error}"
        return f"T{self.id} (p{self.process}, {end}): " + ", ".join(ops)

    def to_json(self) -> dict[str, Any]:
        mops: list[list[Any]] = [
            ["append", m.key, m.value]
            if isinstance(m, Append)
            else ["r", m.key, None if m.values is None else list(m.values)]
            for m in self.mops
        ]
        return {
            "id": self.id,
            "process": self.process,
            "type": self.type,
            "mops": mops,
            "error": self.error,
            "start": self.start,
            "end": self.end,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Txn:
        mops: list[Mop] = []
        for f, key, value in data["mops"]:
            if f == "append":
                mops.append(Append(key, int(value)))
            else:
                mops.append(Read(key, None if value is None else tuple(int(v) for v in value)))
        return cls(
            int(data["id"]),
            int(data["process"]),
            data["type"],
            tuple(mops),
            data.get("error"),
            data.get("start"),
            data.get("end"),
        )


def _short(values: Sequence[int], last: int = 4) -> str:
    """A list as ``[1 2 3]``, or ``[...+9 7 8 9 10]`` when long (a dependency is about its end)."""
    if len(values) <= last + 1:
        return "[" + " ".join(map(str, values)) + "]"
    return f"[...+{len(values) - last} " + " ".join(map(str, values[-last:])) + "]"


def txn(id: int, type: TxnType, *ops: tuple[str, str, int | Sequence[int] | None], process: int = 0) -> Txn:
    """A hand-made transaction: ``txn(1, "ok", ("append", "x", 1), ("r", "y", [2, 3]))``."""
    mops: list[Mop] = []
    for f, key, value in ops:
        if f == "append":
            assert isinstance(value, int)
            mops.append(Append(key, value))
        else:
            assert f == "r" and not isinstance(value, int)
            mops.append(Read(key, None if value is None else tuple(value)))
    return Txn(id, process, type, tuple(mops))


def save_history(history: Iterable[Txn], path: Path) -> Path:
    """Write a history as JSON lines (one transaction a line); returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(t.to_json()) + "\n" for t in history))
    return path


def load_history(path: Path) -> list[Txn]:
    return [Txn.from_json(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


# ------------------------------------------------------------------------------------------------ checker


@dataclass(frozen=True)
class Dependency:
    """An edge ``source -kind[key]-> target`` of the dependency graph."""

    source: int
    kind: EdgeKind
    key: str
    target: int

    def __str__(self) -> str:
        return f"T{self.source} -{self.kind}[{self.key}]-> T{self.target}"


@dataclass(frozen=True)
class Anomaly:
    """One anomaly: its type, the transactions involved and, for a cycle, the cycle's edges."""

    kind: str
    txns: tuple[int, ...]
    detail: str = ""
    cycle: tuple[Dependency, ...] = ()

    @property
    def rw_edges(self) -> int:
        return sum(d.kind == "rw" for d in self.cycle)


@dataclass(frozen=True)
class Report:
    """What :func:`check` found in a history."""

    committed: int
    failed: int
    info: int
    anomalies: tuple[Anomaly, ...]
    txns: Mapping[int, Txn]
    version_orders: Mapping[str, tuple[int, ...]]

    def counts(self) -> Counter[str]:
        return Counter(a.kind for a in self.anomalies)

    def kinds(self) -> set[str]:
        return {a.kind for a in self.anomalies}

    def example(self, kind: str) -> Anomaly | None:
        """The shortest anomaly of ``kind`` found (fewest transactions)."""
        found = [a for a in self.anomalies if a.kind == kind]
        return min(found, key=lambda a: (len(a.txns), a.txns)) if found else None

    def table(self, title: str = "") -> str:
        """The anomaly table (type -> count) and an explained example of each type found."""
        lines = [f"{title}: " if title else ""]
        lines[0] += f"{self.committed} committed, {self.failed} aborted, {self.info} unknown"
        counts = self.counts()
        lines.append(f"  {'anomaly':<20} {'count':>6}")
        for kind in ANOMALY_KINDS:
            lines.append(f"  {kind:<20} {counts.get(kind, 0):>6}")
        for kind in ANOMALY_KINDS:
            example = self.example(kind)
            if example is None:
                continue
            lines.append(f"  example {kind}: {example.detail}".rstrip())
            for dep in example.cycle:
                lines.append(f"    {dep}")
            for t in example.txns:
                if t in self.txns:
                    lines.append(f"      {self.txns[t].describe()}")
        return "\n".join(lines)


@dataclass
class _Graph:
    """The dependency graph: one networkx edge per ordered pair, with the key of each kind that caused it."""

    g: nx.DiGraph = field(default_factory=nx.DiGraph)

    def add(self, source: int, kind: EdgeKind, key: str, target: int) -> None:
        if source == target:
            return
        if not self.g.has_edge(source, target):
            self.g.add_edge(source, target, why={})
        self.g.edges[source, target]["why"].setdefault(kind, key)

    def why(self, source: int, target: int) -> dict[EdgeKind, str]:
        why: dict[EdgeKind, str] = self.g.edges[source, target]["why"]
        return why

    def dependency(self, source: int, target: int, kinds: tuple[EdgeKind, ...]) -> Dependency:
        """The edge labelled with its first kind among ``kinds`` (the strongest: ww, then wr, then rw)."""
        why = self.why(source, target)
        kind = next(k for k in kinds if k in why)
        return Dependency(source, kind, why[kind], target)

    def components(self, kinds: tuple[EdgeKind, ...]) -> dict[int, int]:
        """Node -> index of its strongly connected component, in the subgraph of edges of ``kinds``."""
        sub = nx.DiGraph()
        sub.add_nodes_from(self.g.nodes)
        sub.add_edges_from((a, b) for a, b, why in self.g.edges(data="why") if any(k in why for k in kinds))
        return {node: i for i, comp in enumerate(nx.strongly_connected_components(sub)) for node in comp}

    def path(self, source: int, target: int, kinds: tuple[EdgeKind, ...], within: set[int]) -> list[int] | None:
        """A shortest path over edges of ``kinds`` between nodes of ``within`` (BFS), or ``None``."""
        parent: dict[int, int] = {source: source}
        queue = deque([source])
        while queue:
            node = queue.popleft()
            if node == target:
                out = [node]
                while node != source:
                    node = parent[node]
                    out.append(node)
                return out[::-1]
            for nxt, attrs in self.g.adj[node].items():
                if nxt in parent or nxt not in within or not any(k in attrs["why"] for k in kinds):
                    continue
                parent[nxt] = node
                queue.append(nxt)
        return None


def check(history: Iterable[Txn], *, complete: bool = False) -> Report:
    """Check a list-append history; ``complete``: it ends with reads of every key after all writers ended."""
    txns = {t.id: t for t in history}
    anomalies: list[Anomaly] = []
    writer = _writers(txns.values())
    ok = [t for t in txns.values() if t.type == "ok"]

    reads: dict[str, list[tuple[int, tuple[int, ...]]]] = defaultdict(list)  # every read of a committed txn
    external: list[tuple[Txn, str, tuple[int, ...]]] = []  # its first read of each key, without own appends
    for t in ok:
        for m in t.mops:
            if isinstance(m, Read) and m.values is not None:
                reads[m.key].append((t.id, m.values))
                anomalies += _read_anomalies(t, m.key, m.values, txns, writer)
        found, wrong = _external_reads(t)
        external += [(t, key, values) for key, values in found]
        anomalies += wrong

    orders: dict[str, tuple[int, ...]] = {}
    for key, observed in reads.items():
        longest = max((values for _, values in observed), key=len)
        orders[key] = longest
        for reader, values in observed:
            if values != longest[: len(values)]:
                anomalies.append(
                    Anomaly(
                        "incompatible-order",
                        (reader,),
                        f"r({key}) of T{reader} {list(values)} is not a prefix of {list(longest)}",
                    )
                )
    if complete:
        for t in ok:
            for m in t.mops:
                if isinstance(m, Append) and m.value not in orders.get(m.key, ()):
                    anomalies.append(
                        Anomaly("lost-append", (t.id,), f"append({m.key}, {m.value}) of T{t.id} is in no read")
                    )

    def appender(key: str, value: int) -> int | None:
        """The transaction that appended ``value`` to ``key`` (``None``: garbage, reported already)."""
        found = writer.get(value)
        return found[0] if found is not None and found[1] == key else None

    graph = _Graph()
    graph.g.add_nodes_from(t.id for t in ok)
    for key, order in orders.items():
        for before, after in itertools.pairwise(order):
            a, b = appender(key, before), appender(key, after)
            if a is not None and b is not None:
                graph.add(a, "ww", key, b)
    for t, key, values in external:
        order = orders[key]
        if values != order[: len(values)]:
            continue  # reported as incompatible-order
        source = appender(key, values[-1]) if values else None
        if source is not None:
            graph.add(source, "wr", key, t.id)
            if source != t.id and txns[source].appends(key)[-1] != values[-1]:
                anomalies.append(
                    Anomaly(
                        "G1b",
                        (source, t.id),
                        f"r({key}) of T{t.id} ends with {values[-1]}, which T{source} followed with another append",
                    )
                )
        following = appender(key, order[len(values)]) if len(values) < len(order) else None
        if following is not None and following != source:
            graph.add(t.id, "rw", key, following)  # (a read that stops inside a writer's appends is G1b)
            late = txns[following]
            if late.type == "ok" and late.end is not None and t.start is not None and late.end < t.start:
                anomalies.append(
                    Anomaly(
                        "stale-read",
                        (following, t.id),
                        f"r({key}) of T{t.id} misses {order[len(values)]} of T{following}, "
                        f"which committed {t.start - late.end:.3f}s before T{t.id} began",
                    )
                )
    anomalies += _cycles(graph)
    return Report(
        committed=len(ok),
        failed=sum(t.type == "fail" for t in txns.values()),
        info=sum(t.type == "info" for t in txns.values()),
        anomalies=tuple(anomalies),
        txns=txns,
        version_orders=orders,
    )


def _writers(txns: Iterable[Txn]) -> dict[int, tuple[int, str]]:
    """Value -> (transaction, key) that appended it; a value appended twice makes the history invalid."""
    out: dict[int, tuple[int, str]] = {}
    for t in txns:
        for m in t.mops:
            if isinstance(m, Append):
                if m.value in out:
                    raise ValueError(f"value {m.value} appended twice (T{out[m.value][0]}, T{t.id})")
                out[m.value] = (t.id, m.key)
    return out


def _read_anomalies(
    t: Txn, key: str, values: tuple[int, ...], txns: Mapping[int, Txn], writer: Mapping[int, tuple[int, str]]
) -> list[Anomaly]:
    """G1a, garbage and duplicate elements in one read of a committed transaction."""
    out: list[Anomaly] = []
    if len(set(values)) != len(values):
        twice = sorted(v for v, n in Counter(values).items() if n > 1)
        out.append(Anomaly("duplicate-elements", (t.id,), f"r({key}) of T{t.id} holds {twice} twice"))
    for v in values:
        if v not in writer or writer[v][1] != key:
            out.append(Anomaly("garbage-read", (t.id,), f"r({key}) of T{t.id} holds {v}, never appended to {key}"))
        elif txns[writer[v][0]].type == "fail":
            w = writer[v][0]
            out.append(Anomaly("G1a", (w, t.id), f"r({key}) of T{t.id} holds {v} of aborted T{w}"))
    return out


def _external_reads(t: Txn) -> tuple[list[tuple[str, tuple[int, ...]]], list[Anomaly]]:
    """The first read of each key without the transaction's own earlier appends, and internal anomalies.

    Within a transaction a read must show its own earlier appends last, and later reads of a key must
    equal the earlier read plus the appends in between.
    """
    expected: dict[str, list[int]] = {}
    own: dict[str, list[int]] = defaultdict(list)
    found: list[tuple[str, tuple[int, ...]]] = []
    wrong: list[Anomaly] = []
    for m in t.mops:
        if isinstance(m, Append):
            own[m.key].append(m.value)
            if m.key in expected:
                expected[m.key].append(m.value)
            continue
        if m.values is None:
            continue
        values = list(m.values)
        if m.key in expected:
            if values != expected[m.key]:
                wrong.append(
                    Anomaly("internal", (t.id,), f"T{t.id} read {m.key} = {values}, expected {expected[m.key]}")
                )
        else:
            mine = own[m.key]
            if values[len(values) - len(mine) :] != mine:
                wrong.append(
                    Anomaly("internal", (t.id,), f"T{t.id} read {m.key} = {values} after its own appends {mine}")
                )
            else:
                found.append((m.key, tuple(values[: len(values) - len(mine)])))
        expected[m.key] = values
    return found, wrong


def _cycles(graph: _Graph) -> list[Anomaly]:
    """Cycle anomalies, each anchored at one edge and closed by a shortest path; distinct cycles only.

    G0: a ww edge closed by ww edges. G1c: a wr edge closed by ww/wr edges. G-single: a rw-only edge
    closed by ww/wr edges. G2-item: a rw-only edge closed only through another rw edge.
    """
    ww: tuple[EdgeKind, ...] = ("ww",)
    wwr: tuple[EdgeKind, ...] = ("ww", "wr")
    every: tuple[EdgeKind, ...] = ("ww", "wr", "rw")
    comp = {kinds: graph.components(kinds) for kinds in (ww, wwr, every)}
    members: dict[int, set[int]] = defaultdict(set)
    for node, c in comp[every].items():
        members[c].add(node)
    out: list[Anomaly] = []
    seen: set[tuple[str, frozenset[int]]] = set()

    def close(kind: str, source: int, target: int, anchor: EdgeKind, kinds: tuple[EdgeKind, ...]) -> bool:
        path = graph.path(target, source, kinds, members[comp[every][source]])
        if path is None:
            return False
        key = (kind, frozenset(path))
        if key not in seen:
            seen.add(key)
            why = graph.why(source, target)
            edges = [Dependency(source, anchor, why[anchor], target)]
            edges += [graph.dependency(a, b, kinds) for a, b in itertools.pairwise(path)]
            rws = sum(e.kind == "rw" for e in edges)
            out.append(
                Anomaly(kind, tuple([source, *path[:-1]]), f"a cycle of {len(edges)} edges, {rws} rw", tuple(edges))
            )
        return True

    for source, target, why in graph.g.edges(data="why"):
        if comp[every][source] != comp[every][target]:
            continue
        if "ww" in why and comp[ww][source] == comp[ww][target]:
            close("G0", source, target, "ww", ww)
        if "wr" in why and comp[wwr][source] == comp[wwr][target]:
            close("G1c", source, target, "wr", wwr)
        if "rw" in why and "ww" not in why and "wr" not in why and not close("G-single", source, target, "rw", wwr):
            close("G2-item", source, target, "rw", every)
    return out


# ----------------------------------------------------------------------------------------------- workload

SCHEMA = pa.schema([("key", pa.int64()), ("elements", pa.string())])
TABLES = ("elle.t0", "elle.t1", "elle.t2")


@dataclass(frozen=True)
class WorkloadConfig:
    """One workload run: where, at which level, how many processes, keys and micro-operations, how long."""

    uri: str
    storage_options: dict[str, str]
    level: Level
    processes: int = 4
    seconds: float = 10.0
    keys_per_table: int = 2
    """Active keys per table (few keys: much contention, so conflicts and, below serializable, write skew)."""
    generations: int = 1
    """Key sets used one after the other, ``seconds / generations`` each (long runs keep lists short)."""
    max_mops: int = 4
    read_fraction: float = 0.5
    scan_fraction: float = 0.1
    """Of the reads, the share that reads a whole table (every key of it: a query over all its files)."""
    checkpoint_interval: int = 20
    """Global and Delta checkpoints this often, so that runs cross many of them."""
    concurrency: Literal["optimistic", "pessimistic", "mixed"] = "optimistic"
    """``pessimistic``: every transaction places intent markers (``lake.transaction(concurrency=...)``);
    ``mixed``: odd processes do, even ones stay optimistic (both kinds on the same keys)."""
    redo: Literal["all", "none", "half"] = "half"
    """Which processes let a conflicting transaction be redone (``lake.transaction(redo=True)``): redo keeps
    write-only transactions from aborting and, while it backs off, lowers contention; ``half`` checks redone
    transactions among processes that still abort (and so still race enough to show write skew)."""
    layout: Layout = "file_per_key"
    """``file_per_key``: each key's row in its own data file (conflicts per key); ``file_per_table``: all keys
    of a table in one file, which every append rewrites, copying the other keys' rows (conflicts per table)."""
    seed: int = 0
    min_committed: int = 0
    """Past ``seconds``, run on until the processes together committed this many transactions (or
    ``max_seconds`` passed): a loaded machine commits fewer in the same time, and a check of the level needs
    enough of them."""
    max_seconds: float = 0.0
    """The cap on running on for ``min_committed`` (``0``: ``seconds``, no running on)."""

    @property
    def cap_seconds(self) -> float:
        """The longest a run may take: ``seconds``, or up to ``max_seconds`` while ``min_committed`` is not met."""
        return max(self.seconds, self.max_seconds)

    def keys(self, generation: int) -> list[str]:
        first = generation * self.keys_per_table
        return [f"{table}/{k}" for table in TABLES for k in range(first, first + self.keys_per_table)]

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkloadConfig:
        return cls(**json.loads(text))


def _row(key: str) -> tuple[str, int]:
    table, _, k = key.partition("/")
    return table, int(k)


def setup_lake(config: WorkloadConfig) -> txlake.Lakehouse:
    """Create the three tables with an empty list for every key of every generation, in the layout's files."""
    lake = txlake.connect(config.uri, config.storage_options, checkpoint_interval=config.checkpoint_interval)
    for table in TABLES:
        lake.create_table(table, SCHEMA, properties={"delta.checkpointInterval": str(config.checkpoint_interval)})
    rows: dict[str, list[int]] = defaultdict(list)
    for g in range(config.generations):
        for key in config.keys(g):
            table, k = _row(key)
            rows[table].append(k)
    with lake.transaction() as tx:
        for table, keys in rows.items():
            files = [keys] if config.layout == "file_per_table" else [[k] for k in keys]
            for file in files:
                tx.append(table, pa.table({"key": file, "elements": [""] * len(file)}, schema=SCHEMA))
    return lake


class RecordingTransaction:
    """A txlake transaction run as list-append micro-operations, recording what each one saw."""

    def __init__(self, tx: txlake.Transaction) -> None:
        self.tx = tx
        self.mops: list[Mop] = []

    def append(self, key: str, value: int) -> None:
        self.mops.append(Append(key, value))
        table, k = _row(key)
        updated = self.tx.update(table, set={"elements": f"elements || ' {value}'"}, where=f"key = {k}")
        assert updated == 1, f"append({key}, {value}) updated {updated} rows"

    def read(self, key: str) -> tuple[int, ...]:
        self.mops.append(Read(key, None))
        table, k = _row(key)
        rows = self.tx.read_arrow(table, where=f"key = {k}").to_pylist()
        assert len(rows) == 1, f"r({key}) found {len(rows)} rows"
        values = tuple(int(v) for v in rows[0]["elements"].split())
        self.mops[-1] = Read(key, values)
        return values

    def scan(self, table: str) -> dict[str, tuple[int, ...]]:
        """Read every key of ``table`` in one query (recorded as one read per key, in key order)."""
        rows = sorted(self.tx.read_arrow(table).to_pylist(), key=lambda row: int(row["key"]))
        found = {f"{table}/{row['key']}": tuple(int(v) for v in row["elements"].split()) for row in rows}
        assert len(found) == len(rows), f"scan of {table} found a key twice: {rows}"
        self.mops += [Read(key, values) for key, values in found.items()]
        return found


Plan = Sequence[tuple[Literal["append", "r", "scan"], str]]
"""Micro-operations to run: ``append`` and ``r`` name a key, ``scan`` a table."""


def run_txn(
    lake: txlake.Lakehouse,
    level: Level,
    plan: Plan,
    values: Iterator[int],
    *,
    id: int,
    process: int,
    redo: bool = True,
    pessimistic: bool = False,
) -> Txn:
    """Run ``plan`` in one transaction; ``ok``, ``fail`` (a conflict) or ``info`` (commit state unknown)."""
    start = time.time()
    tx = (
        lake.transaction(level, redo=redo, concurrency="pessimistic")
        if pessimistic
        else lake.transaction(level, redo=redo)
    )
    rec = RecordingTransaction(tx)
    ended: TxnType = "ok"
    error: str | None = None
    pending = list(plan)
    try:
        with tx:
            while pending:
                f, key = pending.pop(0)
                if f == "append":
                    rec.append(key, next(values))
                elif f == "r":
                    rec.read(key)
                else:
                    rec.scan(key)
    except txlake.ConflictError as e:
        ended, error = "fail", type(e).__name__
    except txlake.CommitStateUnknownError as e:
        ended, error = "info", type(e).__name__
    # appends a conflict cut short never ran: record them anyway (their values must never be seen)
    rec.mops += [Append(key, next(values)) for f, key in pending if f == "append"]
    return Txn(id, process, ended, tuple(rec.mops), error, start, time.time())


def random_plan(rng: random.Random, keys: Sequence[str], config: WorkloadConfig) -> Plan:
    plan: list[tuple[Literal["append", "r", "scan"], str]] = []
    for _ in range(rng.randint(1, config.max_mops)):
        key = rng.choice(keys)
        if rng.random() >= config.read_fraction:
            plan.append(("append", key))
        elif rng.random() < config.scan_fraction:
            plan.append(("scan", _row(key)[0]))
        else:
            plan.append(("r", key))
    return plan


def worker_main(config_json: str, process: int, out: str, ready: Any, go: Any, committed: Any) -> None:
    """One worker process: random transactions until its time is up, one JSON line per transaction.

    ``committed``: a shared counter of the transactions all processes committed (``min_committed``)."""
    config = WorkloadConfig.from_json(config_json)
    rng = random.Random(config.seed * 1000 + process)
    lake = txlake.connect(
        config.uri, config.storage_options, create=False, checkpoint_interval=config.checkpoint_interval
    )
    values = iter(range(process * 10_000_000 + 1, (process + 1) * 10_000_000))
    ready.wait(timeout=120)
    go.wait(timeout=120)
    started = time.monotonic()
    per_generation = config.seconds / config.generations
    redo = config.redo == "all" or (config.redo == "half" and process % 2 == 0)
    pessimistic = config.concurrency == "pessimistic" or (config.concurrency == "mixed" and process % 2 == 1)
    with Path(out).open("w") as f:
        for i in range(10_000_000):
            elapsed = time.monotonic() - started
            if elapsed >= config.seconds and (committed.value >= config.min_committed or elapsed >= config.cap_seconds):
                break
            keys = config.keys(min(config.generations - 1, int(elapsed / per_generation)))
            t = run_txn(
                lake,
                config.level,
                random_plan(rng, keys, config),
                values,
                id=i,
                process=process,
                redo=redo,
                pessimistic=pessimistic,
            )
            f.write(json.dumps(t.to_json()) + "\n")
            f.flush()
            if t.type == "ok":
                with committed.get_lock():
                    committed.value += 1


@dataclass(frozen=True)
class Run:
    """A workload run: its history and what the run took."""

    history: list[Txn]
    seconds: float


def run_workload(config: WorkloadConfig, root: Path) -> Run:
    """Set up the lake, run the worker processes, and end the history with a read of every key."""
    lake = setup_lake(config)
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Barrier(config.processes + 1)
    go = ctx.Event()
    committed = ctx.Value("i", 0)
    outs = [root / f"p{p}.jsonl" for p in range(config.processes)]
    procs = [
        ctx.Process(target=worker_main, args=(config.to_json(), p, str(out), ready, go, committed), daemon=True)
        for p, out in enumerate(outs)
    ]
    for proc in procs:
        proc.start()
    try:
        ready.wait(timeout=120)
        started = time.monotonic()
        go.set()
        for proc in procs:
            proc.join(timeout=config.cap_seconds + 120)
        seconds = time.monotonic() - started
        codes = [proc.exitcode for proc in procs]
        assert codes == [0] * config.processes, f"worker exit codes {codes}"
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
                proc.join()
    history: list[Txn] = []
    for out in outs:
        for line in out.read_text().splitlines():
            t = Txn.from_json(json.loads(line))
            history.append(Txn(len(history), t.process, t.type, t.mops, t.error, t.start, t.end))
    start = time.time()
    final = RecordingTransaction(lake.transaction(config.level))
    for g in range(config.generations):
        for key in config.keys(g):
            final.read(key)
    assert final.tx.commit().read_only
    history.append(Txn(len(history), config.processes, "ok", tuple(final.mops), None, start, time.time()))
    return Run(history, seconds)
