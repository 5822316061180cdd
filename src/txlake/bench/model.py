"""A throughput model of txlake's commit protocol: a discrete-event simulation of N writers and a store.

Every writer loops over one-table append transactions (disjoint tables, as in ``txlake bench commit``):
read the log tail, stage the data file (one PUT), then commit under one of three protocols:

* ``old`` -- *serial claims*: re-read the tail, claim ``latest + 1`` by put-if-absent; a loser reads the
  winner's record (one GET) and claims the next version; the winner publishes its Delta commit and outcome.
* ``new`` -- *group commit* (``txlake.txn.group``): after a lost race a writer posts an intent for the next
  version, sleeps ``U(0, 3 rtt)`` and reads that version's record: listed in it, it is a member and waits
  for the outcome; absent, it LISTs the intents. The writer of the smallest one listed reads them, claims
  the version for all of them and publishes one Delta commit per table; the others look for its claim a
  few times before doing so themselves. Records embed the outcomes of the 8 versions before them.
* ``delta-rs`` -- the baseline: independent ``write_deltalake`` appends to separate plain tables (the
  request mix measured on SeaweedFS: 3 LIST, 4 GET, 1 PUT, 1 put-if-absent per commit).

What costs time:

* **requests** -- client CPU (``ClientCosts.request_cpu``), then half the network delay, then the server:
  non-CPU service time (disk, internal hops) and server CPU, split into ``server_parallelism`` pieces that
  run at once (SeaweedFS's gateway, filer and volume server work concurrently: its CPU per request exceeds
  the wall time), then the other half of the network delay. A write takes effect when the server is done
  with it; a read sees the store as the server takes it.
* **conditional PUTs** -- a put-if-absent that finds its key taken is refused at once (412), at the cost
  of a miss, not of a write. SeaweedFS also locks the key of a conditional PUT
  (``Environment.serialized_conditional_puts``): one request holds the lock, one more waits for it and is
  refused when the holder is done, and any further one backs off for about a second and tries again
  (``lock_queue=1``, ``lock_retry_ms``; measured here: two racers never stall, in a 4-way race 31% of the
  losers wait 1 or 2 s). S3 serializes nothing: the first of concurrent PUTs to finish wins.
* **CPU** -- one processor-sharing pool of ``Environment.cores`` cores that the server and every client
  share (SeaweedFS and the writers on this machine), or, with ``cores=None``, a server that is never the
  bottleneck and a core of its own for every writer (real S3).

The protocol logic mirrors ``txlake.txn.transaction`` and ``txlake.lakehouse.log`` (constants below name
their sources); it is deliberately independent of them (stdlib only), so that it can predict a protocol
before it is built and is not broken by edits to it. Deterministic for a given seed.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

T = TypeVar("T")

Kind = Literal["GET", "GET_MISS", "HEAD", "LIST", "PUT", "PUT_IF_ABSENT", "PUT_EXISTS"]
KINDS: tuple[Kind, ...] = ("GET", "GET_MISS", "HEAD", "LIST", "PUT", "PUT_IF_ABSENT", "PUT_EXISTS")
"""Request kinds by cost: ``GET_MISS`` is a GET of a missing key, ``PUT_EXISTS`` a put-if-absent refused
because its key exists (SeaweedFS answers it without writing anything: as cheap as a miss)."""
Protocol = Literal["old", "new", "delta-rs"]
PROTOCOLS: tuple[Protocol, ...] = ("old", "new", "delta-rs")

# ------------------------------------------------------------------------- protocol constants (mirrored)

EMBEDDED_OUTCOMES = 8  # txlake.lakehouse.log.EMBEDDED_OUTCOMES
GROUP_WAIT_ROUND_TRIPS = 3  # txlake.txn.commit.GROUP_WAIT_ROUND_TRIPS
START_VIEW_REUSE_MS = 250.0  # txlake.txn.commit.START_VIEW_REUSE
LEADER_POLLS = 4  # txlake.txn.commit.LEADER_POLLS
CONTENTION_WINDOW_MS = 1000.0  # txlake.txn.context.CONTENTION_WINDOW
FIRST_ROUND_TRIP_MS = 2.0  # txlake.txn.context.ROUND_TRIP
MAX_ROUND_TRIP_MS = 500.0  # observe_round_trip caps a sample at 0.5 s
AWAIT_FIRST_DELAY_MS = 2.0  # txlake.txn.context.AWAIT_FIRST_DELAY
AWAIT_MAX_DELAY_MS = 20.0  # txlake.txn.context.AWAIT_MAX_DELAY
MAX_MEMBERS = 64  # txlake.txn.group.MAX_MEMBERS
READ_CONCURRENCY = 16  # txlake.txn.group.READ_CONCURRENCY
FRESH_VIEW_EVERY = 16  # Commit._next_view (txn/commit.py): every 16th rebase re-reads the tail
CHECKPOINT_INTERVAL = 100  # connect(checkpoint_interval=100): a global checkpoint every 100 versions
DELTA_CHECKPOINT_INTERVAL = 100  # txlake.txn.context.DELTA_CHECKPOINT_INTERVAL

# ------------------------------------------------------------------------------------------- parameters


@dataclass(frozen=True, slots=True)
class RequestCosts:
    """Where one request's time goes, in ms, by kind (see the module docstring)."""

    network: Mapping[Kind, float]
    service: Mapping[Kind, float]
    server_cpu: Mapping[Kind, float]


@dataclass(frozen=True, slots=True)
class Environment:
    """A store and the machine(s) around it."""

    name: str
    description: str
    costs: RequestCosts
    cores: int | None
    """Cores the server and all clients share; ``None``: the server is never CPU-bound, each client has a core."""
    server_parallelism: int = 2
    serialized_conditional_puts: bool = True
    lock_queue: int | None = None
    """How many conditional PUTs of a key may wait behind the one holding its lock; ``None``: all."""
    lock_retry_ms: float = 1000.0
    """When the queue is full, a conditional PUT retries the lock after this long (SeaweedFS: about 1 s)."""
    jitter: float = 0.2
    """Coefficient of variation of the non-CPU parts of a request (log-normal, mean 1)."""
    cpu_jitter: float = 0.0
    """Coefficient of variation of the client's CPU bursts (log-normal, mean 1)."""

    def wall_ms(self, kind: Kind, client: ClientCosts) -> float:
        """The request's time on an idle system."""
        cpu = self.costs.server_cpu[kind] / self.server_parallelism
        return client.request_cpu + self.costs.network[kind] + self.costs.service[kind] + cpu


@dataclass(frozen=True, slots=True)
class ClientCosts:
    """What a writer process spends itself, in ms.

    Measured with one writer on this machine (process CPU time and time inside requests over 300 commits):
    txlake spends 3.15 ms of CPU per one-table append, 1.8 ms of it outside requests (its wall time
    outside requests) and 1.35 ms inside its 9 requests; ``write_deltalake`` spends 10.6 ms of CPU per
    commit (9 requests) and 24.6 ms of wall time, of which its requests take 10.1 ms.
    """

    request_cpu: float = 0.15
    """Client CPU per request (obstore call, building and parsing the JSON), part of the request's wall time."""
    txn_cpu: float = 1.8
    """txlake: Python per transaction outside requests (Arrow -> Parquet, validation, building the record)."""
    rebase_cpu: float = 0.2
    """txlake: per lost claim (validate against the winner's record, build the next record); not measured."""
    delta_rs_cpu: float = 9.25
    """delta-rs: CPU per ``write_deltalake`` outside requests (10.6 ms measured minus 9 requests)."""
    delta_rs_idle: float = 5.25
    """delta-rs: wall time per commit that is neither its CPU nor a request (24.6 - 10.1 - 9.25 ms)."""


# Measured on this machine (SeaweedFS 4 on loopback, 2 cores, one client at low load): wall time as the
# client sees it and server CPU (the weed process) per request, in ms. PUT_EXISTS (a refused put-if-absent):
# wall 0.52-0.57 ms measured on a quiet machine; its CPU is not resolved by 10 ms clock ticks (0.45-1.0 ms:
# the calibration moves by less than a point over that range).
SEAWEEDFS_WALL: dict[Kind, float] = {
    "GET": 0.96,
    "GET_MISS": 0.72,
    "HEAD": 0.74,
    "LIST": 1.07,
    "PUT": 1.39,
    "PUT_IF_ABSENT": 1.64,
    "PUT_EXISTS": 0.55,
}
SEAWEEDFS_SERVER_CPU: dict[Kind, float] = {
    "GET": 0.97,
    "GET_MISS": 0.60,
    "HEAD": 0.70,
    "LIST": 0.93,
    "PUT": 1.50,
    "PUT_IF_ABSENT": 1.77,
    "PUT_EXISTS": 0.45,
}


def seaweedfs_here(client: ClientCosts | None = None, *, parallelism: int = 2) -> Environment:
    """SeaweedFS on loopback sharing 2 cores with the writers: the measured walls and CPU per request.

    A request's non-CPU service time is what its wall time leaves after the client's CPU and the server's
    CPU spread over ``parallelism`` cores. Conditional PUTs of one key: one holds the lock, one waits, the
    others retry after about a second (measured).
    """
    client = client or ClientCosts()
    service = {k: SEAWEEDFS_WALL[k] - client.request_cpu - SEAWEEDFS_SERVER_CPU[k] / parallelism for k in KINDS}
    if min(service.values()) < 0:
        raise ValueError("the measured walls are shorter than their CPU: raise the server parallelism")
    return Environment(
        "seaweedfs-here",
        "SeaweedFS on loopback, 2 cores shared by server and writers (calibration)",
        RequestCosts(dict.fromkeys(KINDS, 0.0), service, SEAWEEDFS_SERVER_CPU),
        cores=2,
        server_parallelism=parallelism,
        lock_queue=1,
    )


def s3(put_ms: float, get_ms: float, *, refused_ms: float | None = None, jitter: float = 0.3) -> Environment:
    """Real S3: every PUT (conditional or not) ``put_ms``, every GET/HEAD/LIST ``get_ms``, no CPU limit.

    A put-if-absent refused because its key exists (412) takes ``refused_ms``, by default as long as a GET
    (an assumption: S3 need not store anything to refuse it). Concurrent conditional PUTs of one key are
    not serialized: each takes its own latency and the first to finish wins.
    """
    network: dict[Kind, float] = {k: (put_ms if k in ("PUT", "PUT_IF_ABSENT") else get_ms) for k in KINDS}
    network["PUT_EXISTS"] = get_ms if refused_ms is None else refused_ms
    zero = dict.fromkeys(KINDS, 0.0)
    return Environment(
        f"s3-{put_ms:g}ms",
        f"S3: PUT {put_ms:g} ms, GET/HEAD/LIST {get_ms:g} ms; server not CPU-bound, a core per writer",
        RequestCosts(network, zero, zero),
        cores=None,
        serialized_conditional_puts=False,
        jitter=jitter,
    )


def environments() -> tuple[Environment, ...]:
    """The three environments ``txlake bench model`` predicts for."""
    return (seaweedfs_here(), s3(20.0, 10.0), s3(50.0, 20.0))


# --------------------------------------------------------------------------------------- event engine


@dataclass(slots=True)
class Wait:
    ms: float


@dataclass(slots=True)
class Compute:
    pool: CpuPool
    ms: float
    pieces: int = 1


@dataclass(slots=True)
class Acquire:
    """Take a key's lock: queue behind its holder if fewer than ``queue`` wait, else retry after ``retry_ms``."""

    key: str
    queue: int | None = None
    retry_ms: float = 0.0


@dataclass(slots=True)
class Join:
    tasks: list[Generator[Command, Any, Any]]


Command = Wait | Compute | Acquire | Join
Task = Generator[Command, Any, T]


class Simulation:
    """A clock and a heap of callbacks; tasks are generators that yield :data:`Command` s."""

    def __init__(self) -> None:
        self.now = 0.0
        self._queue: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = 0
        self._held: dict[str, deque[Callable[[], None]]] = {}

    def at(self, delay: float, fn: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (self.now + max(delay, 0.0), self._seq, fn))

    def start(self, task: Task[Any], done: Callable[[Any], None] | None = None) -> None:
        self.at(0.0, lambda: self._step(task, None, done))

    def run(self, until: float) -> None:
        while self._queue and self._queue[0][0] <= until:
            now, _, fn = heapq.heappop(self._queue)
            self.now = now
            fn()
        self.now = until

    def release(self, key: str) -> None:
        """Hand a key lock to its next waiter (FIFO) or free it."""
        waiters = self._held[key]
        if waiters:
            self.at(0.0, waiters.popleft())
        else:
            del self._held[key]

    def _step(self, task: Task[Any], value: Any, done: Callable[[Any], None] | None) -> None:
        try:
            cmd = task.send(value)
        except StopIteration as stop:
            if done is not None:
                done(stop.value)
            return

        def resume(result: Any = None) -> None:
            self._step(task, result, done)

        if isinstance(cmd, Wait):
            self.at(cmd.ms, resume)
        elif isinstance(cmd, Compute):
            cmd.pool.submit(cmd.ms, cmd.pieces, resume)
        elif isinstance(cmd, Acquire):
            self._acquire(cmd, resume)
        else:
            self._join(cmd.tasks, resume)

    def _acquire(self, cmd: Acquire, resume: Callable[[], None]) -> None:
        waiters = self._held.get(cmd.key)
        if waiters is None:
            self._held[cmd.key] = deque()
            self.at(0.0, resume)
        elif cmd.queue is None or len(waiters) < cmd.queue:
            waiters.append(resume)
        else:
            self.at(cmd.retry_ms, lambda: self._acquire(cmd, resume))

    def _join(self, tasks: list[Task[Any]], resume: Callable[[Any], None]) -> None:
        results: list[Any] = [None] * len(tasks)
        left = [len(tasks)]
        if not tasks:
            self.at(0.0, lambda: resume(results))
            return
        for i, task in enumerate(tasks):

            def finished(value: Any, i: int = i) -> None:
                results[i] = value
                left[0] -= 1
                if left[0] == 0:
                    resume(results)

            self.start(task, finished)


class CpuPool:
    """Processor sharing over ``cores`` cores (``None``: unbounded); records the CPU time it served."""

    def __init__(self, sim: Simulation, cores: int | None) -> None:
        self.sim = sim
        self.cores = cores
        self.busy = 0.0  # core-ms served
        self._jobs: list[list[Any]] = []  # [remaining ms, [pieces left, callback]]
        self._last = 0.0
        self._token = 0

    def submit(self, ms: float, pieces: int, done: Callable[[], None]) -> None:
        if ms <= 0:
            self.sim.at(0.0, done)
            return
        if self.cores is None:
            self.busy += ms
            self.sim.at(ms / pieces, done)
            return
        self._advance()
        group: list[Any] = [pieces, done]
        self._jobs.extend([ms / pieces, group] for _ in range(pieces))
        self._schedule()

    def _rate(self) -> float:
        assert self.cores is not None
        return min(1.0, self.cores / len(self._jobs)) if self._jobs else 0.0

    def _advance(self) -> None:
        if self._jobs:
            served = (self.sim.now - self._last) * self._rate()
            self.busy += served * len(self._jobs)
            for job in self._jobs:
                job[0] -= served
        self._last = self.sim.now

    def _schedule(self) -> None:
        self._token += 1
        if not self._jobs:
            return
        token = self._token
        soonest = min(job[0] for job in self._jobs)
        self.sim.at(soonest / self._rate(), lambda: self._fire(token))

    def _fire(self, token: int) -> None:
        if token != self._token:
            return
        self._advance()
        running: list[list[Any]] = []
        for job in self._jobs:
            if job[0] > 1e-9:
                running.append(job)
                continue
            group = job[1]
            group[0] -= 1
            if group[0] == 0:
                self.sim.at(0.0, group[1])
        self._jobs = running
        self._schedule()


# -------------------------------------------------------------------------------------------- the log


@dataclass(frozen=True, slots=True)
class Record:
    """A global record: the claimer, the group members it took in, the outcomes it embeds."""

    version: int
    owner: int
    members: tuple[int, ...] = ()
    embedded: frozenset[int] = frozenset()

    @property
    def tables(self) -> tuple[int, ...]:
        return (self.owner, *self.members)  # writer i appends to table i


@dataclass
class Store:
    """What the object store holds (only what the protocol reads back)."""

    records: dict[int, Record] = field(default_factory=lambda: {0: Record(0, -1)})
    outcomes: set[int] = field(default_factory=lambda: {0})
    intents: dict[int, list[int]] = field(default_factory=dict)
    table_versions: Counter[int] = field(default_factory=Counter)


@dataclass
class Writer:
    """One writer process and what its client has cached."""

    id: int
    pool: CpuPool
    records: dict[int, Record] = field(default_factory=lambda: {0: Record(0, -1)})
    outcomes: set[int] = field(default_factory=lambda: {0})
    decided: int = 0
    latest: int = 0
    snapshot_at: int = 0  # Delta version of its table whose snapshot it holds
    contended_until: float = -math.inf
    round_trip: float = FIRST_ROUND_TRIP_MS

    def learn(self, record: Record, *, embedded: bool) -> None:
        self.records[record.version] = record
        self.latest = max(self.latest, record.version)
        if embedded:
            self.outcomes |= record.embedded
        self.advance()

    def advance(self) -> None:
        while self.decided + 1 in self.outcomes:
            self.decided += 1


@dataclass(frozen=True, slots=True)
class SimResult:
    """One simulated run, counted over the measured window (after the warm-up)."""

    protocol: Protocol
    writers: int
    environment: str
    seconds: float
    commits: int
    requests: Mapping[Kind, int]
    rebases: int
    versions: int
    member_commits: int
    server_cpu_ms: float
    """Server CPU asked for by the measured window's requests."""
    client_cpu_ms: float
    """Client CPU asked for in the measured window."""
    cpu_busy_ms: float | None
    """Core-ms the shared CPU served in the window (``None`` without a shared CPU)."""
    cpu_capacity_ms: float | None
    writer_time: Mapping[str, float] = field(default_factory=dict)
    """Writer-ms by activity: requests by kind, client CPU, protocol waits (concurrent requests overlap)."""

    @property
    def tx_per_s(self) -> float:
        return self.commits / self.seconds if self.seconds > 0 else 0.0

    def per_commit(self, kind: Kind | Literal["GET+MISS", "total"]) -> float:
        """Requests of a kind per committed transaction (``GET+MISS``: all GETs, as counters show them)."""
        if not self.commits:
            return math.nan
        if kind == "GET+MISS":
            n = self.requests.get("GET", 0) + self.requests.get("GET_MISS", 0)
        elif kind == "total":
            n = sum(self.requests.values())
        else:
            n = self.requests.get(kind, 0)
        return n / self.commits

    @property
    def group_size(self) -> float:
        """Committed transactions per claimed version (1 without group commit)."""
        return self.commits / self.versions if self.versions else math.nan

    def time_shares(self) -> dict[str, float]:
        """Each activity's share of the writers' time, largest first."""
        total = sum(self.writer_time.values())
        if total <= 0:
            return {}
        return {k: v / total for k, v in sorted(self.writer_time.items(), key=lambda kv: -kv[1])}

    @property
    def cpu_utilization(self) -> float | None:
        """Share of the shared cores in use (``None`` without a shared CPU)."""
        if self.cpu_busy_ms is None or not self.cpu_capacity_ms:
            return None
        return self.cpu_busy_ms / self.cpu_capacity_ms


# ------------------------------------------------------------------------------------------ the model


class _Run:
    """One simulation: the store, the writers, their transactions."""

    def __init__(
        self, protocol: Protocol, writers: int, env: Environment, client: ClientCosts, seed: int, warmup: float
    ) -> None:
        self.protocol = protocol
        self.env = env
        self.client = client
        self.rng = random.Random(seed)
        self.sim = Simulation()
        self.warmup = warmup
        self.store = Store()
        self.server = CpuPool(self.sim, env.cores)
        shared = self.server if env.cores is not None else None
        self.writers = [Writer(i, shared or CpuPool(self.sim, 1)) for i in range(writers)]
        self.requests: Counter[Kind] = Counter()
        self.writer_time: defaultdict[str, float] = defaultdict(float)
        self.commits = 0
        self.member_commits = 0
        self.rebases = 0
        self.versions = 0
        self._sigma = math.sqrt(math.log1p(env.jitter**2)) if env.jitter > 0 else 0.0
        self._cpu_sigma = math.sqrt(math.log1p(env.cpu_jitter**2)) if env.cpu_jitter > 0 else 0.0
        self.client_cpu = 0.0  # client CPU submitted (ms), measured window

    # ------------------------------------------------------------------------------------ primitives

    @property
    def measuring(self) -> bool:
        return self.sim.now >= self.warmup

    def _jitter(self, ms: float) -> float:
        if ms <= 0 or self._sigma == 0:
            return ms
        return ms * self.rng.lognormvariate(-(self._sigma**2) / 2, self._sigma)

    def _cpu(self, w: Writer, ms: float, *, book: bool = True) -> Task[None]:
        if self._cpu_sigma:
            ms *= self.rng.lognormvariate(-(self._cpu_sigma**2) / 2, self._cpu_sigma)
        if self.measuring:
            self.client_cpu += ms
        start = self.sim.now
        yield Compute(w.pool, ms)
        if book:
            self._book("client CPU", start)

    def _sleep(self, ms: float, what: str) -> Task[None]:
        start = self.sim.now
        yield Wait(ms)
        self._book(what, start)

    def _book(self, what: str, start: float) -> None:
        """Writer time spent on ``what`` (counted from the warm-up's end)."""
        if self.measuring:
            self.writer_time[what] += self.sim.now - max(start, self.warmup)

    def _request(
        self,
        w: Writer,
        kind: Kind,
        what: str,
        effect: Callable[[], T],
        *,
        key: str | None = None,
        found: Callable[[], bool] | None = None,
    ) -> Task[T]:
        """One request for the protocol step ``what``: client CPU, network, (key lock,) server service and
        CPU, effect, network back.

        ``found`` is asked when the server takes the request: a GET that does not find its object is a
        miss (and reads nothing); a put-if-absent that finds its key taken is refused at once (``effect``
        must then change nothing). When the server serializes conditional writes, a put-if-absent waits
        for the key's lock first: a loser of a race is refused once the winner is done.
        """
        costs = self.env.costs
        start = self.sim.now
        yield from self._cpu(w, self.client.request_cpu, book=False)
        yield Wait(self._jitter(costs.network[kind]) / 2)
        locked = key is not None and kind == "PUT_IF_ABSENT" and self.env.serialized_conditional_puts
        if locked:
            assert key is not None
            retry = self.env.lock_retry_ms * self.rng.uniform(0.95, 1.05)
            yield Acquire(key, self.env.lock_queue, retry)
        early: list[T] = []
        if found is not None:
            hit = found()
            if kind == "GET" and not hit:
                kind = "GET_MISS"
            if kind == "PUT_IF_ABSENT" and hit:
                kind = "PUT_EXISTS"
            if kind != "PUT_IF_ABSENT":  # reads and refusals see the store as the server takes them
                early.append(effect())
        if self.measuring:
            self.requests[kind] += 1
        yield Wait(self._jitter(costs.service[kind]))
        yield Compute(self.server, costs.server_cpu[kind], self.env.server_parallelism)
        result = early[0] if early else effect()
        if locked:
            assert key is not None
            self.sim.release(key)
        yield Wait(self._jitter(costs.network[kind]) / 2)
        self._book(what, start)
        return result

    def _put(self, w: Writer, what: str) -> Task[None]:
        yield from self._request(w, "PUT", what, lambda: None)

    def _get_record(self, w: Writer, v: int, what: str) -> Task[Record | None]:
        record: Record | None = yield from self._request(
            w, "GET", what, lambda: self.store.records.get(v), found=lambda: v in self.store.records
        )
        if record is not None:
            w.learn(record, embedded=self.protocol == "new")
        return record

    def _get_outcome(self, w: Writer, v: int, what: str) -> Task[bool]:
        decided: bool = yield from self._request(
            w, "GET", what, lambda: v in self.store.outcomes, found=lambda: v in self.store.outcomes
        )
        if decided:
            w.outcomes.add(v)
            w.advance()
        return decided

    def _put_if_absent(
        self, w: Writer, what: str, key: str, create: Callable[[], bool], taken: Callable[[], bool] | None = None
    ) -> Task[bool]:
        won: bool = yield from self._request(w, "PUT_IF_ABSENT", what, create, key=key, found=taken)
        return won

    # -------------------------------------------------------------------------------- log reading

    def _tail(self, w: Writer, through: int | None = None) -> Task[None]:
        """``GlobalLog.tail`` from the writer's decided prefix: one GET per unknown record and outcome.

        The walk ends at the first missing record (one GET miss), or after version ``through``
        (``GlobalLog.through``, new protocol). The old log reads each version's record then its outcome; the
        new one reads the records first (each embeds earlier outcomes), then only the outcomes still unknown.
        """
        v = w.decided + 1
        if self.protocol == "new":
            while (through is None or v <= through) and (
                v in w.records or (yield from self._get_record(w, v, "log tail")) is not None
            ):
                v += 1
            for u in range(w.decided + 1, v):
                if u not in w.outcomes:
                    yield from self._get_outcome(w, u, "log tail")
        else:
            while v in w.records or (yield from self._get_record(w, v, "log tail")) is not None:
                if v not in w.outcomes:
                    yield from self._get_outcome(w, v, "log tail")
                v += 1

    def _await_outcome(self, w: Writer, v: int, first_delay: float) -> Task[None]:
        """``LakeContext.await_decided``: GET the outcome, back off, GET again."""
        delay = first_delay
        while v not in w.outcomes and not (yield from self._get_outcome(w, v, "awaiting outcomes")):
            yield from self._sleep(delay * self.rng.uniform(0.5, 1.0), "awaiting outcomes")
            delay = min(delay * 1.5, AWAIT_MAX_DELAY_MS)

    def _await_visible(self, w: Writer, version: int) -> Task[None]:
        """``LakeContext.await_prefix``: nothing if the prefix reaches us, else a tail (the new protocol's up to
        ``version`` only) and polled outcomes."""
        if w.decided >= version:
            return
        yield from self._tail(w, version if self.protocol == "new" else None)
        for v in range(w.decided + 1, version + 1):
            if v not in w.records:
                yield from self._get_record(w, v, "awaiting outcomes")
            yield from self._await_outcome(w, v, AWAIT_FIRST_DELAY_MS)

    def _snapshot(self, w: Writer) -> Task[None]:
        """The writer's table at its mapped Delta version: one GET per commit its cache has not seen."""
        for _ in range(self.store.table_versions[w.id] - w.snapshot_at):
            yield from self._request(w, "GET", "table snapshot", lambda: None)
        w.snapshot_at = self.store.table_versions[w.id]

    # -------------------------------------------------------------------------------- committing

    def _claim(self, w: Writer, version: int, members: tuple[int, ...]) -> Task[bool]:
        def create() -> bool:
            if version in self.store.records:
                return False
            embedded: frozenset[int] = frozenset()
            if self.protocol == "new":
                embedded = frozenset(v for v in w.outcomes if version - EMBEDDED_OUTCOMES <= v < version)
            self.store.records[version] = Record(version, w.id, members, embedded)
            return True

        taken = lambda: version in self.store.records  # noqa: E731
        won = yield from self._put_if_absent(w, "claim", f"log/{version}", create, taken)
        if won:
            w.learn(self.store.records[version], embedded=False)
            if self.measuring:
                self.versions += 1
        return won

    def _publish(self, w: Writer, record: Record) -> Task[None]:
        """One Delta commit per table (all at once), then the outcome; then maintenance."""

        def delta_commit(table: int) -> Task[None]:
            def create() -> bool:
                self.store.table_versions[table] += 1
                return True

            key = f"delta/{table}/{self.store.table_versions[table] + 1}"
            yield from self._put_if_absent(w, "publish", key, create)

        yield Join([delta_commit(t) for t in record.tables])
        yield from self._put_if_absent(w, "publish", f"log/{record.version}.o", lambda: self._decide(record.version))
        w.outcomes.add(record.version)
        w.advance()

    def _decide(self, version: int) -> bool:
        self.store.outcomes.add(version)
        return True

    def _after_commit(self, w: Writer, record: Record) -> Task[None]:
        """``LakeContext.after_commit``: the global checkpoint and the Delta checkpoints that are due."""
        if record.version % CHECKPOINT_INTERVAL == 0:
            yield from self._put_if_absent(w, "checkpoints", f"log/{record.version}.checkpoint", lambda: True)
            yield from self._put(w, "checkpoints")
        for table in record.tables:
            if self.store.table_versions[table] % DELTA_CHECKPOINT_INTERVAL == 0:
                yield from self._put(w, "checkpoints")  # the checkpoint
                yield from self._put(w, "checkpoints")  # _last_checkpoint

    def _committed(self, *, member: bool = False) -> None:
        if self.measuring:
            self.commits += 1
            self.member_commits += member

    def _stage(self, w: Writer) -> Task[None]:
        """Begin, and stage the data file: half the transaction's Python, one PUT, the other half."""
        yield from self._snapshot(w)
        yield from self._cpu(w, self.client.txn_cpu / 2)
        yield from self._put(w, "data file")
        yield from self._cpu(w, self.client.txn_cpu / 2)

    def _lost(self, w: Writer, version: int, rebases: int, winner: Record | None) -> Task[None]:
        """``Commit._next_view`` after a lost claim of ``version``: now and then a fresh tail, else a
        short random sleep and the winner's record (the old protocol reads it now, the new one has it)."""
        if self.measuring:
            self.rebases += 1
        yield from self._cpu(w, self.client.rebase_cpu)
        if rebases % FRESH_VIEW_EVERY == 0 or (winner is None and self.protocol == "new"):
            yield from self._tail(w)
        else:
            yield from self._sleep(self.rng.uniform(0, min(5.0, 0.5 * 2 ** min(rebases, 4))), "claim")
            if winner is None:
                yield from self._get_record(w, version, "claim")
        w.latest = max(w.latest, version)

    def _finish(self, w: Writer, record: Record) -> Task[None]:
        yield from self._publish(w, record)
        yield from self._await_visible(w, record.version)
        yield from self._after_commit(w, record)
        self._committed()

    def old_txn(self, w: Writer) -> Task[None]:
        """Serial claims: every transaction claims a version of its own."""
        yield from self._tail(w)  # BEGIN: the newest decided state
        yield from self._stage(w)
        yield from self._tail(w)  # commit: the view
        yield from self._request(w, "HEAD", "probe", lambda: None)  # for plain Delta writers
        rebases = 0
        while True:
            version = w.latest + 1
            if (yield from self._claim(w, version, ())):
                break
            rebases += 1
            yield from self._lost(w, version, rebases, None)
        yield from self._finish(w, w.records[version])

    def new_txn(self, w: Writer) -> Task[None]:
        """Group commit: when contended, post an intent, wait a little, join a group or claim for one."""
        yield from self._tail(w)  # BEGIN: the view, reused by the commit while fresh
        began = self.sim.now
        yield from self._stage(w)
        if self.sim.now - began >= START_VIEW_REUSE_MS:
            yield from self._tail(w)
        yield from self._request(w, "HEAD", "probe", lambda: None)
        rebases = 0
        while True:
            version = w.latest + 1
            winner: Record | None = None
            members: tuple[int, ...] = ()
            if self.sim.now < w.contended_until:
                yield from self._post_intent(w, version)
                yield from self._sleep(self.rng.uniform(0, GROUP_WAIT_ROUND_TRIPS * w.round_trip), "group wait")
                start = self.sim.now
                winner = yield from self._get_record(w, version, "group requests")
                w.round_trip = 0.8 * w.round_trip + 0.2 * min(self.sim.now - start, MAX_ROUND_TRIP_MS)
                if winner is None:
                    members, winner = yield from self._collect(w, version)
            if winner is None:
                if (yield from self._claim(w, version, members)):
                    yield from self._finish(w, w.records[version])
                    return
                winner = yield from self._get_record(w, version, "claim")
            rebases += 1
            w.contended_until = self.sim.now + CONTENTION_WINDOW_MS
            if winner is not None and w.id in winner.members:
                yield from self._member(w, winner)
                return
            yield from self._lost(w, version, rebases, winner)

    def _post_intent(self, w: Writer, version: int) -> Task[None]:
        yield from self._request(
            w, "PUT", "group requests", lambda: self.store.intents.setdefault(version, []).append(w.id)
        )

    def _collect(self, w: Writer, version: int) -> Task[tuple[tuple[int, ...], Record | None]]:
        """``group.collect``: one LIST of the version's intents, one GET each (16 at a time). First
        ``Commit._defer``: with an intent of a smaller writer listed, look for its claim (after 3 round trips,
        then every one, :data:`LEADER_POLLS` times). The members, or the record found meanwhile."""
        listed: list[int] = yield from self._request(
            w, "LIST", "group requests", lambda: list(self.store.intents.get(version, []))
        )
        if w.id in listed and min(listed) != w.id:
            for poll in range(LEADER_POLLS):
                yield from self._sleep((3.0 if poll == 0 else 1.0) * w.round_trip, "group wait")
                record = yield from self._get_record(w, version, "group requests")
                if record is not None:
                    return (), record
        others = [i for i in listed if i != w.id][:MAX_MEMBERS]
        if not others:
            return (), None
        queue = iter(others)

        def reader() -> Task[None]:
            for _ in queue:
                yield from self._request(w, "GET", "group requests", lambda: None)

        yield Join([reader() for _ in range(min(READ_CONCURRENCY, len(others)))])
        return tuple(others), None

    def _member(self, w: Writer, winner: Record) -> Task[None]:
        """``Commit._as_member``: wait for the claimer's outcome (first wait: 3 round trips)."""
        yield from self._await_outcome(w, winner.version, GROUP_WAIT_ROUND_TRIPS * w.round_trip)
        yield from self._await_visible(w, winner.version)
        w.snapshot_at = self.store.table_versions[w.id]  # remember_commits: no GET for our own commit
        self._committed(member=True)

    def delta_rs_txn(self, w: Writer) -> Task[None]:
        """``write_deltalake(handle, rows, mode="append")`` to the writer's own plain table."""
        yield from self._cpu(w, self.client.delta_rs_cpu)
        yield from self._sleep(self.client.delta_rs_idle, "idle")
        for _ in range(3):
            yield from self._request(w, "LIST", "Delta log", lambda: None)
        for _ in range(4):
            yield from self._request(w, "GET", "Delta log", lambda: None)
        yield from self._put(w, "data file")
        yield from self._put_if_absent(w, "publish", f"delta/{w.id}/{self.sim.now}", lambda: True)
        self._committed()
        if self.measuring:
            self.versions += 1

    def writer_loop(self, w: Writer) -> Task[None]:
        yield Wait(self.rng.uniform(0.0, 5.0))  # writers do not start in lockstep
        txn = {"old": self.old_txn, "new": self.new_txn, "delta-rs": self.delta_rs_txn}[self.protocol]
        while True:
            yield from txn(w)

    # ------------------------------------------------------------------------------------- running

    def run(self, seconds: float) -> SimResult:
        for w in self.writers:
            self.sim.start(self.writer_loop(w))
        self.sim.run(self.warmup)
        busy = self.server.busy
        self.sim.run(self.warmup + seconds * 1000.0)
        shared = self.env.cores is not None
        return SimResult(
            protocol=self.protocol,
            writers=len(self.writers),
            environment=self.env.name,
            seconds=seconds,
            commits=self.commits,
            requests=dict(self.requests),
            rebases=self.rebases,
            versions=self.versions,
            member_commits=self.member_commits,
            server_cpu_ms=sum(n * self.env.costs.server_cpu[k] for k, n in self.requests.items()),
            client_cpu_ms=self.client_cpu,
            cpu_busy_ms=self.server.busy - busy if shared else None,
            writer_time=dict(self.writer_time),
            cpu_capacity_ms=self.env.cores * seconds * 1000.0 if self.env.cores is not None else None,
        )


def simulate(
    protocol: Protocol,
    writers: int,
    env: Environment,
    *,
    client: ClientCosts | None = None,
    seconds: float | None = None,
    warmup: float | None = None,
    seed: int = 0,
) -> SimResult:
    """Simulate ``writers`` writers for ``seconds`` (after ``warmup`` seconds) and count what they did.

    Defaults: 4 s (+0.5 s warm-up) on a CPU-bound local store, 30 s (+3 s) on S3-like latencies.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; expected one of {PROTOCOLS}")
    if writers < 1:
        raise ValueError("writers must be at least 1")
    slow = env.cores is None
    seconds = seconds if seconds is not None else (30.0 if slow else 4.0)
    warmup = warmup if warmup is not None else (3.0 if slow else 0.5)
    run = _Run(protocol, writers, env, client or ClientCosts(), seed, warmup * 1000.0)
    return run.run(seconds)


# -------------------------------------------------------------------------------------- calibration


@dataclass(frozen=True, slots=True)
class Measurement:
    """A throughput measured on this machine (SeaweedFS, disjoint tables, one-row appends, 6 s runs; the new
    protocol's: ``txlake bench commit --parts throughput``, 10-row appends, 20 s)."""

    protocol: Protocol
    writers: int
    tx_per_s: float
    requests: Mapping[str, float] = field(default_factory=dict)
    """Requests per committed transaction by kind, as the store's counters count them (GET includes misses)."""
    group_size: float | None = None


MEASURED: tuple[Measurement, ...] = (
    Measurement("old", 1, 92.0, {"GET": 3.0, "PUT": 4.0, "HEAD": 1.0}),
    Measurement("old", 8, 67.0, {"GET": 19.0, "PUT": 5.2, "HEAD": 1.0}),
    Measurement("new", 8, 108.6, {"GET": 10.3, "PUT": 4.4, "LIST": 1.1, "HEAD": 1.0}, group_size=3.3),
    Measurement("delta-rs", 1, 39.0, {"GET": 4.0, "LIST": 3.0, "PUT": 2.0}),
    Measurement("delta-rs", 8, 115.0),
)
TOLERANCE = 0.25
"""Largest relative error of a calibration point's tx/s that the model is held to."""


@dataclass(frozen=True, slots=True)
class CalibrationPoint:
    measured: Measurement
    predicted: SimResult

    @property
    def error(self) -> float:
        """``predicted / measured - 1``."""
        return self.predicted.tx_per_s / self.measured.tx_per_s - 1.0

    def requests(self) -> dict[str, float]:
        """Predicted requests per commit, by the store counters' kinds."""
        return counter_kinds(self.predicted)


def counter_kinds(result: SimResult) -> dict[str, float]:
    """Requests per commit as ``RequestCounts`` names them: GET (hits and misses), HEAD, LIST, PUT."""
    return {
        "GET": result.per_commit("GET+MISS"),
        "HEAD": result.per_commit("HEAD"),
        "LIST": result.per_commit("LIST"),
        "PUT": result.per_commit("PUT") + result.per_commit("PUT_IF_ABSENT") + result.per_commit("PUT_EXISTS"),
    }


def calibrate(
    env: Environment | None = None, *, client: ClientCosts | None = None, seconds: float = 4.0, seed: int = 0
) -> list[CalibrationPoint]:
    """Simulate every :data:`MEASURED` point on the local environment."""
    env = env or seaweedfs_here(client)
    return [
        CalibrationPoint(m, simulate(m.protocol, m.writers, env, client=client, seconds=seconds, seed=seed))
        for m in MEASURED
    ]


# ---------------------------------------------------------------------------------------- predictions


@dataclass(frozen=True, slots=True)
class Prediction:
    environment: Environment
    protocol: Protocol
    writers: int
    result: SimResult


def predict(
    envs: Sequence[Environment],
    writers: Sequence[int],
    protocols: Sequence[Protocol] = PROTOCOLS,
    *,
    client: ClientCosts | None = None,
    seconds: float | None = None,
    seed: int = 0,
    progress: Callable[[Prediction], None] | None = None,
) -> list[Prediction]:
    """Every (environment, protocol, writer count) combination."""
    out: list[Prediction] = []
    for env in envs:
        for protocol in protocols:
            for n in writers:
                p = Prediction(env, protocol, n, simulate(protocol, n, env, client=client, seconds=seconds, seed=seed))
                out.append(p)
                if progress is not None:
                    progress(p)
    return out


def limits(result: SimResult, env: Environment) -> str:
    """What bounds a run, in a few words: the shared CPU, or the steps the writers spend their time on."""
    util = result.cpu_utilization
    if util is not None and util > 0.9:
        return f"CPU ({util:.0%} of {env.cores} cores)"
    return ", ".join(f"{k} {v:.0%}" for k, v in list(result.time_shares().items())[:2])
