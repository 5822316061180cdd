"""The lakehouse log under ``_txlake/log/``: claims, outcomes, global checkpoints, and state replay."""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from txlake.delta.actions import now_ms
from txlake.errors import CorruptLogError, ObjectAlreadyExistsError, ObjectNotFoundError, VersionNotFoundError
from txlake.lakehouse.records import GlobalRecord, LakehouseState, Outcome, apply, apply_catalog
from txlake.storage import ObjectStore
from txlake.storage.threads import map_concurrently

ROOT = "_txlake"
LOG_DIR = f"{ROOT}/log"
_RECORD = re.compile(r"^(\d{20})\.json$")
_OUTCOME = re.compile(r"^(\d{20})\.outcome\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\.json$")
EMBEDDED_OUTCOMES = 8
"""A record carries the outcomes of up to this many versions before it that its claimer knows."""
RECORD_CACHE = 1000  # immutable records/outcomes kept in memory below the newest state
TAIL_TRUST_SECONDS = 3600.0
"""How long the newest state a client learnt is a safe place to walk the log from. Vacuum deletes the records
of versions older than 26 hours at the earliest (``txlake.lakehouse.ages.ORPHAN_GUARD``): a client idle for
longer than this starts again from the newest checkpoint, so it never walks into a cleaned-up prefix."""


class GlobalVersionTakenError(Exception):
    """Internal: another transaction claimed this global version first (the claimer re-validates)."""

    def __init__(self, version: int) -> None:
        super().__init__(f"global version {version} is taken")
        self.version = version


@dataclass
class LogListing:
    records: set[int] = field(default_factory=set)
    outcomes: set[int] = field(default_factory=set)
    checkpoints: set[int] = field(default_factory=set)

    @property
    def start(self) -> int:
        """Where the log begins: 0, or (once vacuum deleted version 0) its oldest global checkpoint; records
        below it are leftovers of an interrupted clean-up, never read."""
        return 0 if 0 in self.records or not self.checkpoints else min(self.checkpoints)


@dataclass(frozen=True, slots=True)
class LogTail:
    """The decided state plus what lies beyond it: the (at most few) claimed but undecided records."""

    state: LakehouseState
    undecided: tuple[int, ...]
    latest_claimed: int


@dataclass(frozen=True, slots=True)
class Pending:
    """A claimed version beyond the decided prefix: its record, and its outcome if it has one already."""

    record: GlobalRecord
    outcome: Outcome | None

    @property
    def aborted(self) -> bool:
        return self.outcome is not None and not self.outcome.committed


@dataclass(frozen=True, slots=True)
class LogView:
    """What a committer sees: the decided prefix (``decided``) and every claimed version after it, in order.

    Claims are pipelined: a version may be claimed while earlier ones are still publishing, so a committer
    validates against the claimed records (as if they commit) and claims ``latest + 1``.
    """

    decided: LakehouseState
    pending: tuple[Pending, ...] = ()

    @property
    def latest(self) -> int:
        return self.pending[-1].record.version if self.pending else self.decided.version

    def claimed_state(self) -> LakehouseState:
        """The catalog as if every pending claim commits (aborted ones change nothing).

        Table versions are those of the decided prefix: a pending claim's Delta versions are known only
        once it is published.
        """
        state = self.decided
        for p in self.pending:
            state = replace(state, version=p.record.version)
            if not p.aborted:
                state = apply_catalog(state, p.record.catalog, p.record.version)
        return state

    def expired(self, now_ms: float) -> list[GlobalRecord]:
        """The undecided claims whose lease has expired at ``now_ms`` (anyone may roll them forward)."""
        return [p.record for p in self.pending if p.outcome is None and now_ms >= p.record.lease_until_ms]

    def with_claim(self, record: GlobalRecord) -> LogView:
        """This view plus the next claimed version (learnt from the claim that beat ours)."""
        if record.version != self.latest + 1:
            raise CorruptLogError(
                f"global version {record.version} does not follow {self.latest}", version=record.version
            )
        return LogView(self.decided, (*self.pending, Pending(record, None)))


class GlobalLog:
    """Reads and appends the lakehouse log; caches immutable records, outcomes and the newest state."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self._records: dict[int, GlobalRecord] = {}
        self._outcomes: dict[int, Outcome] = {}
        self._states: dict[int, LakehouseState] = {}
        self._lock = threading.Lock()
        self._tail_learnt: tuple[int, float] | None = None  # (newest state learnt by tail(), monotonic time)
        self.on_committed: Callable[[GlobalRecord, Outcome], None] | None = None
        """Called with each committed version a walk of the log applies (the record holds its Delta commits)."""

    # ------------------------------------------------------------------------------------------ paths

    @staticmethod
    def record_path(version: int) -> str:
        return f"{LOG_DIR}/{version:020d}.json"

    @staticmethod
    def outcome_path(version: int) -> str:
        return f"{LOG_DIR}/{version:020d}.outcome.json"

    @staticmethod
    def checkpoint_path(version: int) -> str:
        return f"{LOG_DIR}/{version:020d}.checkpoint.json"

    # --------------------------------------------------------------------------------------- requests

    def list(self, *, after: int | None = None) -> LogListing:
        """One LIST of the log, of entries for versions > ``after`` (all when ``None``)."""
        start = f"{LOG_DIR}/{after:020d}.~" if after is not None else None
        listing = LogListing()
        for meta in self.store.list(LOG_DIR, start_after=start):
            name = meta.path.rsplit("/", 1)[-1]
            if m := _RECORD.match(name):
                listing.records.add(int(m.group(1)))
            elif m := _OUTCOME.match(name):
                listing.outcomes.add(int(m.group(1)))
            elif m := _CHECKPOINT.match(name):
                listing.checkpoints.add(int(m.group(1)))
        return listing

    def exists(self) -> bool:
        return bool(self.list().records)

    def read_record(self, version: int) -> GlobalRecord:
        cached = self._records.get(version)
        if cached is not None:
            return cached
        try:
            data = self.store.get(self.record_path(version))
        except ObjectNotFoundError as exc:
            raise VersionNotFoundError(f"global version {version} does not exist", version=version) from exc
        record = GlobalRecord.from_bytes(data, version=version)
        if record.version != version:
            raise CorruptLogError(f"global record {version} claims version {record.version}", version=version)
        if any(o.version >= version for o in record.decided):  # not what a claimer writes: trust none of them
            record = replace(record, decided=())
        with self._lock:
            self._records[version] = record
            for o in record.decided:  # decided outcomes are immutable: as good as reading them
                self._outcomes.setdefault(o.version, o)
        return record

    def read_outcome(self, version: int) -> Outcome | None:
        """The outcome of ``version`` or ``None`` while undecided."""
        cached = self._outcomes.get(version)
        if cached is not None:
            return cached
        try:
            data = self.store.get(self.outcome_path(version))
        except ObjectNotFoundError:
            return None
        outcome = Outcome.from_bytes(data, version=version)
        with self._lock:
            self._outcomes[version] = outcome
        return outcome

    def claim(self, record: GlobalRecord) -> None:
        """Put-if-absent the record; :class:`GlobalVersionTakenError` if another client was first."""
        try:
            self.store.put_if_absent(self.record_path(record.version), record.to_bytes())
        except ObjectAlreadyExistsError as exc:
            raise GlobalVersionTakenError(record.version) from exc
        with self._lock:
            self._records[record.version] = record

    def outcomes_to_embed(self, version: int) -> tuple[Outcome, ...]:
        """Outcomes for the record of ``version`` to carry (no request): those this client holds of the
        :data:`EMBEDDED_OUTCOMES` versions before it, after the newest one the previous record carried."""
        first = version - EMBEDDED_OUTCOMES
        with self._lock:
            previous = self._records.get(version - 1)
            if previous is not None and previous.decided:
                first = max(first, max(o.version for o in previous.decided) + 1)
            return tuple(self._outcomes[v] for v in range(max(first, 0), version) if v in self._outcomes)

    def decide(self, outcome: Outcome) -> Outcome:
        """Put-if-absent the outcome; if someone decided first, theirs is the outcome (returned)."""
        try:
            self.store.put_if_absent(self.outcome_path(outcome.version), outcome.to_bytes())
        except ObjectAlreadyExistsError:
            existing = self.read_outcome(outcome.version)
            if existing is None:  # pragma: no cover - put-if-absent said it exists
                raise
            if existing.txid != outcome.txid:  # an outcome without its record: the log lost the record
                raise CorruptLogError(
                    f"the outcome of global version {outcome.version} names transaction {existing.txid}, its record "
                    f"{outcome.txid}: the log lost a record (run `txlake doctor`)",
                    version=outcome.version,
                ) from None
            return existing
        with self._lock:
            self._outcomes[outcome.version] = outcome
            before = self._states.get(outcome.version - 1)
            record = self._records.get(outcome.version)
        if before is not None and record is not None:
            self._remember(apply(before, record, outcome))  # the decider knows the new state: no re-read
        return outcome

    # ------------------------------------------------------------------------------------ checkpoints

    def write_checkpoint(self, state: LakehouseState) -> None:
        """Write the state at its version (idempotent) and point ``_last_checkpoint`` at it."""
        with contextlib.suppress(ObjectAlreadyExistsError):
            self.store.put_if_absent(self.checkpoint_path(state.version), state.to_bytes())
        self.store.put(f"{ROOT}/_last_checkpoint", json.dumps({"version": state.version}).encode())

    def read_checkpoint(self, version: int) -> LakehouseState:
        state = LakehouseState.from_bytes(self.store.get(self.checkpoint_path(version)), version=version)
        with self._lock:
            self._states[state.version] = state
        return state

    def _last_checkpoint_hint(self) -> int | None:
        try:
            return int(json.loads(self.store.get(f"{ROOT}/_last_checkpoint"))["version"])
        except (ObjectNotFoundError, ValueError, KeyError, TypeError):
            return None

    # ------------------------------------------------------------------------------------------ state

    def _nearest_state(self, at_most: int | None) -> LakehouseState | None:
        with self._lock:
            usable = [v for v in self._states if at_most is None or v <= at_most]
            return self._states[max(usable)] if usable else None

    def _fetch_all(self, versions: Sequence[int], outcomes: set[int]) -> None:
        """Prefetch records, concurrently; then the listed outcomes no record carried."""
        self._concurrently(self.read_record, [v for v in versions if v not in self._records])
        self._concurrently(self.read_outcome, [v for v in versions if v in outcomes and v not in self._outcomes])

    @staticmethod
    def _concurrently(fetch: Callable[[int], object], versions: Sequence[int]) -> None:
        map_concurrently(fetch, versions, max_workers=16)

    def tail(self) -> LogTail:
        """The newest decided state and the undecided claims beyond it.

        From a cached state the log is walked by reading version after version directly (no LIST); a
        cold client starts from the newest global checkpoint and LISTs once to prefetch what follows.
        """
        base = self._nearest_state(None)
        if base is not None and self._cache_trusted():
            return self._learnt(self._catch_up(base, None, listing=None))
        hint = self._last_checkpoint_hint()
        base = None
        if hint is not None:
            try:
                base = self.read_checkpoint(hint)
            except (ObjectNotFoundError, CorruptLogError):
                base = None
        listing = self.list(after=base.version if base is not None else None)
        if base is None:
            if listing.start > 0:  # no hint, and the log was cleaned up: start from the newest checkpoint
                base = self.read_checkpoint(max(listing.checkpoints))
            elif 0 not in listing.records and self._try_record(0) is None:
                if listing.records:
                    raise CorruptLogError(
                        "the lakehouse log lost version 0 (deleted outside txlake?); run `txlake doctor`", version=0
                    )
                raise VersionNotFoundError("the lakehouse log has no version 0 (not initialized)", version=0)
            else:
                base = LakehouseState(version=-1)
        return self._learnt(self._catch_up(base, None, listing=listing))

    def through(self, version: int) -> LogTail | None:
        """The decided state and the undecided claims up to ``version``, walked from the newest state this client
        knows at or below it: no request for anything after ``version`` (:meth:`tail` ends each walk with a GET
        that finds nothing). ``None`` when this client knows no such state, or learnt the log too long ago (see
        :data:`TAIL_TRUST_SECONDS`), or the walk stops short of ``version``: ask :meth:`tail`."""
        base = self._nearest_state(version)
        if base is None or not self._cache_trusted():
            return None
        tail = self._catch_up(base, version, listing=None)
        return tail if tail.latest_claimed >= version else None

    def _cache_trusted(self) -> bool:
        """Whether the states this client holds are a safe place to walk the log from (learnt within
        :data:`TAIL_TRUST_SECONDS`)."""
        learnt = self._tail_learnt
        return learnt is not None and time.monotonic() - learnt[1] < TAIL_TRUST_SECONDS

    def _learnt(self, tail: LogTail) -> LogTail:
        self._tail_learnt = (tail.state.version, time.monotonic())
        return tail

    def _try_record(self, version: int) -> GlobalRecord | None:
        try:
            return self.read_record(version)
        except VersionNotFoundError:
            return None

    def _catch_up(self, base: LakehouseState, stop_at: int | None, *, listing: LogListing | None) -> LogTail:
        """Apply every decided version after ``base`` (up to ``stop_at``), in order.

        A listing only prefetches: directory listings of a local disk taken while files are being
        created can miss earlier entries yet show later ones, so every version is confirmed by name.
        A claim exists only after all earlier ones were decided, so a missing version below a claimed
        one is a real gap.
        """
        known_top = -1
        if listing is not None:
            newer = sorted(v for v in listing.records if v > base.version and (stop_at is None or v <= stop_at))
            self._fetch_all(newer, listing.outcomes)
            known_top = max(newer, default=-1)
        # records first, all of them: each embeds outcomes of earlier versions, which then need no GET
        records: list[GlobalRecord] = []
        v = base.version + 1
        while stop_at is None or v <= stop_at:
            record = self._records.get(v) or self._try_record(v)
            if record is None:
                if v <= known_top:
                    raise CorruptLogError(f"the lakehouse log has a gap at version {v}", version=v)
                if listing is not None and v in listing.outcomes:  # claiming v would take someone's outcome
                    raise CorruptLogError(
                        f"global version {v} has an outcome but no record: the log lost a record (run `txlake doctor`)",
                        version=v,
                    )
                break
            records.append(record)
            v += 1
        state = base
        undecided: list[int] = []
        for record in records:
            outcome = self.read_outcome(record.version)
            if outcome is None or undecided:
                undecided.append(record.version)
            else:
                state = apply(state, record, outcome)
                if outcome.committed and self.on_committed is not None:
                    self.on_committed(record, outcome)
        self._remember(state)
        return LogTail(state, tuple(undecided), max(v - 1, state.version))

    def _remember(self, state: LakehouseState) -> None:
        with self._lock:
            self._states[state.version] = state
            if len(self._states) > 64:
                for old in sorted(self._states)[:-32]:
                    del self._states[old]
            horizon = state.version - RECORD_CACHE
            if len(self._records) > 2 * RECORD_CACHE:
                for cache in (self._records, self._outcomes):
                    for old in [k for k in cache if k < horizon]:
                        del cache[old]

    def view(self) -> LogView:
        """The decided prefix and every claim after it (see :class:`LogView`)."""
        tail = self.tail()
        # the tail just read every outcome there is (decided ones are cached): no second request
        pending = tuple(Pending(self.read_record(v), self._outcomes.get(v)) for v in tail.undecided)
        return LogView(tail.state, pending)

    def nearest_state(self, at_most: int) -> LakehouseState | None:
        """The newest decided state this client knows at or below ``at_most`` (no request)."""
        return self._nearest_state(at_most)

    def decided_at_ms(self, version: int) -> int:
        """When ``version`` was decided (its outcome's time, in ms since the epoch)."""
        outcome = self.read_outcome(version)
        if outcome is None:
            raise VersionNotFoundError(f"global version {version} is not decided", version=version)
        return outcome.timestamp_ms

    def version_at_time(self, timestamp_ms: int, *, await_prefix: Callable[[int], object] | None = None) -> int:
        """The newest decided version decided at or before ``timestamp_ms``, searched by bisection over the
        decided prefix (``log2(n)`` GETs of outcomes).

        A claimer takes its outcome's time just before it writes the outcome, and claims are pipelined: a
        version claimed now may be decided later with an earlier time than the version before it, and an
        undecided claim may still get a time at or before ``timestamp_ms``. The answer for a past time is
        nevertheless fixed once given (when clocks agree): with ``await_prefix`` (the lakehouse's
        :meth:`~txlake.txn.context.LakeContext.await_prefix`), every claim undecided now whose record is from
        ``timestamp_ms`` or before is waited for first (a claimer that died is rolled forward after its lease), so
        every version decided later has a later time; and the bisection probes the same versions whatever the
        latest is (it halves ``[0, 2^k)``, counting versions past the latest as later than ``timestamp_ms``).
        Where times do not grow with versions the answer is a version ``G`` with ``time(G) <= t < time(G + 1)``.

        :class:`VersionNotFoundError` for a time before version 0 (the lakehouse did not exist yet), or before
        the oldest version vacuum kept.
        """
        # versions claimed after the walk below are decided later than t (a t in the future, which callers refuse
        # -- or a clock that jumped back -- is not waited for)
        while 0 <= timestamp_ms - now_ms() < 5:
            time.sleep(0.001)
        tail = self.tail()
        latest = tail.state.version
        # a claim's outcome is stamped after its record (claimed at the record's time): only claims from before
        # t can still be decided at or before t
        before = [v for v in tail.undecided if self.read_record(v).timestamp_ms <= timestamp_ms]
        if await_prefix is not None and before:
            await_prefix(max(before))
            latest = self.tail().state.version
        start = 0 if self._try_record(0) is not None else self.list().start  # (LogListing.start without a LIST)
        low = bisect_time(timestamp_ms, latest, start, self.decided_at_ms)
        if low < start:
            if start:
                raise VersionNotFoundError(
                    f"the lakehouse log before version {start} (from {_iso(self.decided_at_ms(start))}) was "
                    f"cleaned up by vacuum: {_iso(timestamp_ms)} is older",
                    version=start,
                )
            raise VersionNotFoundError(
                f"the lakehouse did not exist yet at {_iso(timestamp_ms)} (version 0 is from "
                f"{_iso(self.decided_at_ms(0))})",
                version=0,
            )
        return low

    def state_at(self, version: int) -> LakehouseState:
        """The decided state at ``version``; :class:`VersionNotFoundError` if not (yet) decided."""
        with self._lock:
            cached = self._states.get(version)
        if cached is not None:
            return cached
        base = self._nearest_state(version)
        if base is not None:
            tail = self._catch_up(base, version, listing=None)
            if tail.state.version == version:
                return tail.state
            # not decided, or a prefix after the cached state was cleaned up: ask the listing
        everything = self.list()
        checkpoints = [v for v in everything.checkpoints if v <= version]
        if not checkpoints and everything.start > version:
            raise VersionNotFoundError(
                f"global version {version} was cleaned up by vacuum (the log starts at version {everything.start})",
                version=version,
            )
        base = self.read_checkpoint(max(checkpoints)) if checkpoints else LakehouseState(version=-1)
        tail = self._catch_up(base, version, listing=self.list(after=base.version))
        if tail.state.version != version:
            if tail.latest_claimed >= version:
                raise VersionNotFoundError(f"global version {version} is not decided yet", version=version)
            raise VersionNotFoundError(
                f"no lakehouse version {version} (the latest is {tail.state.version})", version=version
            )
        return tail.state


def bisect_time(timestamp_ms: int, latest: int, start: int, decided_at_ms: Callable[[int], int]) -> int:
    """The version ``G`` in ``[start - 1, latest]`` with ``time(G) <= t < time(G + 1)`` that a bisection of
    ``[0, 2^k)`` finds, counting versions past ``latest`` as later than ``t`` and those before ``start`` (gone) as
    earlier. The versions probed do not depend on ``latest`` (past it, every probe is "later"), so where times
    do not grow with versions the answer stays the same as the log grows, as long as every version added has a
    later time."""
    low, high = -1, 1 << (latest + 1).bit_length()  # time(low) <= t < time(high); -1: before version 0
    while high - low > 1:
        middle = (low + high) // 2
        if middle > latest:
            high = middle
        elif middle < start or decided_at_ms(middle) <= timestamp_ms:
            low = middle
        else:
            high = middle
    return low


def _iso(timestamp_ms: int) -> str:
    return datetime.fromtimestamp(timestamp_ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
