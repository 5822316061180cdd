"""``txlake demo``: concurrent bank transfers across three tables while readers check the total."""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from rich.console import Console, RenderableType
from rich.live import Live
from rich.table import Table

import txlake
from txlake.bench.args import positive, positive_float
from txlake.cli.exit_codes import UsageError
from txlake.cli.jvm import start_spark, stop_spark
from txlake.cli.options import URI_ENV, add_location_arguments, normalize_uri, storage_options_from
from txlake.cli.output import console_for
from txlake.errors import ConflictError, TxlakeError
from txlake.storage.local import local_directory_error
from txlake.storage.store import local_root
from txlake.testing.seaweedfs import SeaweedFS

if TYPE_CHECKING:
    from txlake.spark.session import SparkSession


def local_session(app_name: str, *, debug: bool = False) -> tuple[SparkSession, bool]:
    """A loopback-only local Spark session (pyspark is optional: imported only when the demo uses Spark)."""
    return start_spark(app_name, debug=debug)


DEFAULT_PATH = "./txlake-demo"
BANKS = ("bank.north", "bank.south", "bank.east")
SCHEMA = pa.schema([("id", pa.int64()), ("owner", pa.string()), ("balance", pa.int64())])
CHART_NAME = "txlake-demo.png"
DEMO_PROPERTY = "txlake.demo"
"""Set on the tables the demo creates: the demo writes into, and ``--fresh`` deletes, only such lakehouses."""


def foreign_tables(lake: txlake.Lakehouse) -> list[str]:
    """The tables of ``lake`` the demo did not make (not its banks, or without its mark)."""
    snap = lake.snapshot()
    return [
        name for name in snap.tables() if name not in BANKS or snap.entry(name).properties.get(DEMO_PROPERTY) != "true"
    ]


@dataclass
class DemoStats:
    """Counters shared by the worker and reader threads (guarded by ``lock``)."""

    commits: int = 0
    rebases: int = 0
    conflicts: int = 0
    gave_up: int = 0
    reads: int = 0
    violations: int = 0
    timeline: list[tuple[float, int, int]] = field(default_factory=list)  # (t, commits, conflicts)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, **delta: int) -> None:
        with self.lock:
            for k, v in delta.items():
                setattr(self, k, getattr(self, k) + v)


@dataclass(frozen=True)
class DemoResult:
    uri: str
    accounts: int
    workers: int
    seconds: float
    engine: str
    commits: int
    rebases: int
    conflicts: int
    gave_up: int
    reads: int
    violations: int
    expected_total: int
    final_total: int
    final_version: int
    time_travel_version: int
    time_travel_total: int
    chart: str | None

    @property
    def ok(self) -> bool:
        return self.violations == 0 and self.final_total == self.expected_total == self.time_travel_total


def _total(snap: txlake.LakehouseSnapshot, spark: SparkSession | None = None) -> int:
    """The sum of all balances at one lakehouse version (a Spark job when Spark is on)."""
    if spark is not None:
        frames = [snap.read(bank, columns=["balance"]) for bank in BANKS]
        union = functools.reduce(lambda a, b: a.unionByName(b), frames)
        return int(union.agg({"balance": "sum"}).collect()[0][0] or 0)
    return sum(sum(snap.read_arrow(b, columns=["balance"]).column("balance").to_pylist()) for b in BANKS)


def _setup(lake: txlake.Lakehouse, accounts: int, opening: int, spark: SparkSession | None) -> None:
    """Create the banks and open the accounts in one transaction, one data file per account.

    Conflicts are detected per data file (refined by min/max stats), so one file per account lets
    transfers between different accounts commit concurrently. With Spark the accounts are loaded by a
    Spark job with one task (and so one file) per account.
    """
    with lake.transaction() as tx:
        for bank in BANKS:
            tx.create_table(bank, SCHEMA, if_not_exists=True, properties={DEMO_PROPERTY: "true"})
            short = bank.split(".")[1]
            if spark is not None:
                # spark.range with one partition per account: each task writes exactly one account's file
                df = spark.range(0, accounts, 1, accounts).selectExpr(
                    "id", f"concat('{short}-', lpad(cast(id as string), 3, '0')) as owner", f"{opening}L as balance"
                )
                tx.append(bank, df)
                continue
            for i in range(accounts):
                tx.append(
                    bank, pa.table({"id": [i], "owner": [f"{short}-{i:03d}"], "balance": [opening]}, schema=SCHEMA)
                )


def _worker(
    lake: txlake.Lakehouse,
    seed: int,
    accounts: int,
    deadline: float,
    budget: int | None,
    stats: DemoStats,
    stop: threading.Event,
) -> None:
    rng = random.Random(seed)
    done = 0
    while time.monotonic() < deadline and (budget is None or done < budget) and not stop.is_set():
        src, dst = rng.sample(BANKS, 2)
        a, b = rng.randrange(accounts), rng.randrange(accounts)
        amount = rng.randint(1, 100)
        for attempt in range(30):
            try:
                with lake.transaction("serializable") as tx:
                    have = tx.read_arrow(src, where=f"id = {a}", columns=["balance"]).column("balance")[0].as_py()
                    if have >= amount:
                        # small point updates: the Arrow path (milliseconds), not a Spark job
                        tx.update(src, set={"balance": f"balance - {amount}"}, where=f"id = {a}", engine="arrow")
                        tx.update(dst, set={"balance": f"balance + {amount}"}, where=f"id = {b}", engine="arrow")
                stats.add(commits=1, rebases=tx.result.rebases if tx.result is not None else 0)
                break
            except ConflictError:
                stats.add(conflicts=1)
                time.sleep(rng.uniform(0, min(0.2, 0.005 * 2**attempt)))
        else:
            stats.add(gave_up=1)
        done += 1


def _reader(
    lake: txlake.Lakehouse, expected: int, stop: threading.Event, stats: DemoStats, spark: SparkSession | None
) -> None:
    while not stop.is_set():
        total = _total(lake.snapshot(), spark)
        stats.add(reads=1, violations=int(total != expected))


def _render(stats: DemoStats, lake: txlake.Lakehouse, elapsed: float) -> Table:
    table = Table(title=f"txlake demo — {lake.uri}", expand=False)
    for col in (
        "elapsed",
        "global version",
        "commits",
        "commits/s",
        "rebases",
        "conflicts (retried)",
        "aborted",
        "reader checks",
        "violations",
    ):
        # a header may wrap between words but is never cut ("elaps…")
        table.add_column(col, justify="right", min_width=max(len(word) for word in col.split()))
    with stats.lock:
        rate = stats.commits / elapsed if elapsed > 0 else 0.0
        table.add_row(
            f"{elapsed:5.1f}s",
            str(lake.version()),
            str(stats.commits),
            f"{rate:.1f}",
            str(stats.rebases),
            str(stats.conflicts),
            str(stats.gave_up),
            str(stats.reads),
            f"[{'red' if stats.violations else 'green'}]{stats.violations}",
        )
    return table


def _chart(stats: DemoStats, path: Path) -> str | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if len(stats.timeline) < 2:
        return None
    ts = [t for t, _, _ in stats.timeline]
    commits = [c for _, c, _ in stats.timeline]
    conflicts = [x for _, _, x in stats.timeline]
    rate = [0.0] + [(commits[i] - commits[i - 1]) / max(ts[i] - ts[i - 1], 1e-9) for i in range(1, len(ts))]
    crate = [0.0] + [(conflicts[i] - conflicts[i - 1]) / max(ts[i] - ts[i - 1], 1e-9) for i in range(1, len(ts))]
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot(ts, rate, label="commits/s")
    ax.plot(ts, crate, label="conflicts/s (retried)")
    ax.set_xlabel("seconds")
    ax.set_ylabel("per second")
    ax.set_title("txlake demo: transfer throughput and conflicts")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return str(path)


class _FinalFrame:
    """Instead of a live display on a terminal: keeps the last frame and prints it once, on its own lines."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def update(self, renderable: RenderableType) -> None:
        self.renderable = renderable


@contextmanager
def _live(console: Console, first: RenderableType) -> Iterator[Live | _FinalFrame]:
    """A live table on a terminal; on a pipe or file only the final table (no cursor tricks, no half lines)."""
    if console.is_terminal:
        with Live(first, console=console, refresh_per_second=4, transient=False) as live:
            yield live
        return
    frame = _FinalFrame(first)
    yield frame
    console.print(frame.renderable)


def run_demo(
    uri: str,
    *,
    storage_options: dict[str, str] | None = None,
    accounts: int = 20,
    workers: int = 4,
    seconds: float = 20.0,
    transfers: int | None = None,
    readers: int = 1,
    spark: SparkSession | None = None,
    chart: Path | None = None,
    console: Console | None = None,
) -> DemoResult:
    """Run the demo against ``uri`` and return what happened (the CLI prints it).

    With ``spark``, accounts are loaded by a Spark job and the readers check the total with Spark SQL
    over one consistent lakehouse snapshot; transfers are small Arrow transactions either way.
    """
    console = console or console_for()
    opening = 1000
    lake = txlake.connect(uri, storage_options, spark=spark)
    foreign = foreign_tables(lake)
    if foreign:
        raise UsageError(
            f"the lakehouse at {lake.uri} has tables the demo did not make ({', '.join(foreign)}; or an older "
            "txlake made them, without the demo's mark): the demo writes only into a new lakehouse or one it made",
            hint="choose a new location, e.g. `txlake demo --path ./txlake-demo-2`",
        )
    if set(BANKS) - set(lake.tables()):
        with console.status("creating three banks and opening accounts" + (" with Spark" if spark else "")):
            _setup(lake, accounts, opening, spark)
    expected = _total(lake.snapshot(), spark)
    start_version = lake.version()
    stats = DemoStats()
    stop = threading.Event()
    start = time.monotonic()
    deadline = start + seconds
    budget = transfers // workers if transfers else None
    threads = [
        threading.Thread(target=_worker, args=(lake, i, accounts, deadline, budget, stats, stop), daemon=True)
        for i in range(workers)
    ]
    threads += [
        threading.Thread(target=_reader, args=(lake, expected, stop, stats, spark), daemon=True) for _ in range(readers)
    ]
    for t in threads:
        t.start()
    workers_alive = threads[:workers]
    try:
        with _live(console, _render(stats, lake, 0.0)) as live:
            while any(t.is_alive() for t in workers_alive):
                time.sleep(0.25)
                elapsed = time.monotonic() - start
                with stats.lock:
                    stats.timeline.append((elapsed, stats.commits, stats.conflicts))
                live.update(_render(stats, lake, elapsed))
            stop.set()
            for t in threads:
                t.join(timeout=60)
            live.update(_render(stats, lake, time.monotonic() - start))
    finally:  # Ctrl-C: let every worker finish its transaction and stop before the interpreter does
        stop.set()
        for t in threads:
            t.join(timeout=30)
    elapsed = time.monotonic() - start
    final = lake.snapshot()
    travel_version = (start_version + final.version) // 2
    travel_total = _total(lake.snapshot(travel_version), spark)
    chart_path = _chart(stats, chart) if chart is not None else None
    return DemoResult(
        uri=lake.uri,
        accounts=accounts * len(BANKS),
        workers=workers,
        seconds=round(elapsed, 2),
        engine="spark" if spark is not None else "arrow",
        commits=stats.commits,
        rebases=stats.rebases,
        conflicts=stats.conflicts,
        gave_up=stats.gave_up,
        reads=stats.reads,
        violations=stats.violations,
        expected_total=expected,
        final_total=_total(final, spark),
        final_version=final.version,
        time_travel_version=travel_version,
        time_travel_total=travel_total,
        chart=chart_path,
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--path", help=f"local lakehouse directory (default: ${URI_ENV} if set, else {DEFAULT_PATH})")
    add_location_arguments(parser)
    parser.add_argument("--workers", type=positive, default=4, help="concurrent transfer workers (default 4)")
    parser.add_argument("--accounts", type=positive, default=20, help="accounts per bank")
    parser.add_argument("--seconds", type=positive_float, default=20.0, help="how long to run transfers (default 20)")
    parser.add_argument("--transfers", type=positive, help="stop after this many transfers (over all workers)")
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="first delete what an earlier demo made in the local lakehouse directory (--path, or a local --uri / "
        f"${URI_ENV}); refuses a directory holding anything else",
    )
    parser.add_argument("--no-spark", action="store_true", help="Arrow only (no local Spark session)")
    parser.add_argument(
        "--s3",
        action="store_true",
        help="run against S3: the endpoint in AWS_ENDPOINT_URL / --storage-option, or a local SeaweedFS it starts",
    )
    parser.add_argument("--s3-bucket", default="txlake-demo", help="bucket for --s3 with an existing endpoint")
    parser.add_argument(
        "--chart", help="where to write the PNG chart (default: in the local lakehouse directory, else ./)"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show stack traces on errors")


def _location(args: argparse.Namespace, storage_options: dict[str, str] | None, stack: ExitStack) -> _Location:
    if args.s3:
        options = storage_options_from(args.storage_options, os.environ, "s3://x")
        if not any(k.upper() == "AWS_ENDPOINT_URL" for k in options):
            server = stack.enter_context(SeaweedFS())  # stopped (by its pid) when the stack closes
            return _Location(f"s3://{server.new_bucket('txlake-demo')}/demo", server.storage_options(), Path("."))
        if args.fresh:
            raise UsageError(
                "--fresh deletes a local demo directory only, not a bucket prefix",
                hint="choose a new --s3-bucket, or delete the prefix yourself",
            )
        return _Location(f"s3://{args.s3_bucket}/txlake-demo", options, Path("."))
    uri = args.uri or (None if args.path else os.environ.get(URI_ENV))
    if uri:
        uri = normalize_uri(uri)
        if storage_options is None:
            storage_options = storage_options_from(args.storage_options, os.environ, uri)
        local = local_root(uri)
        if local is None:
            if args.fresh:
                raise UsageError(
                    f"--fresh deletes a local demo directory only, not {uri}",
                    hint="use a local --path (or --uri DIR) with --fresh, or delete the lakehouse yourself",
                )
            return _Location(uri, storage_options, Path("."))
        root = Path(local)  # a local --uri / TXLAKE_URI: the same rules as --path (--fresh included)
    else:
        root = Path(args.path or DEFAULT_PATH).absolute()
    if args.fresh:
        delete_demo(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
        root = root.resolve()
    except OSError as exc:  # a file in the way, a name too long, /proc: exit 7, saying which
        raise local_directory_error(root, exc) from exc
    return _Location(f"file://{root}", storage_options, root)


# ---------------------------------------------------------------------------------------------- --fresh

_TABLE_DIR = re.compile(r"^(?:north|south|east)(?:-[0-9a-f]{8})?$")
_PUT = r"(?:#\d+)?"  # a temporary object of an interrupted local put
_DATA_FILE = re.compile(rf"^part-[0-9a-f]{{32}}-[0-9A-Za-z._-]+\.parquet{_PUT}$")  # named by the writing txn
_DELTA_LOG_FILE = re.compile(
    rf"^(?:\d{{20}}\.(?:json|checkpoint(?:\.\d{{10}}\.\d{{10}})?\.parquet)|_last_checkpoint){_PUT}$"
)
_GLOBAL_LOG_FILE = re.compile(rf"^\d{{20}}\.(?:json|outcome\.json|checkpoint\.json){_PUT}$")
_TXID_DIR = re.compile(r"^[0-9a-f]{32}$")
_PNG = b"\x89PNG\r\n\x1a\n"


def _first_not_matching(directory: Path, pattern: re.Pattern[str]) -> Path | None:
    """The first entry of ``directory`` that is not a regular file named like ``pattern``, if any."""
    with os.scandir(directory) as entries:
        for entry in entries:
            if not entry.is_file(follow_symlinks=False) or not pattern.match(entry.name):
                return Path(entry.path)
    return None


def _foreign_in_table(directory: Path) -> Path | None:
    """What a demo table directory holds beyond its Delta log and the data files transactions named."""
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.is_symlink():
                return Path(entry.path)
            if entry.name == "_delta_log" and entry.is_dir():
                found = _first_not_matching(Path(entry.path), _DELTA_LOG_FILE)
                if found is not None:
                    return found
            elif not (entry.is_file() and _DATA_FILE.match(entry.name)):
                return Path(entry.path)
    return None


def _foreign_below(directory: Path) -> Path | None:
    """Anything under a transaction's staging directory that is not a plain file or directory."""
    for parent, dirs, files in os.walk(directory):
        for name in dirs + files:
            path = Path(parent) / name
            if path.is_symlink():
                return path
    return None


def _foreign_in_lakehouse_dir(directory: Path) -> Path | None:
    """``_txlake/`` holds the log (record, outcome, checkpoint files), its hint and per-transaction staging."""
    with os.scandir(directory) as entries:
        for entry in entries:
            path = Path(entry.path)
            if entry.is_symlink():
                return path
            if entry.name == "log" and entry.is_dir():
                found = _first_not_matching(path, _GLOBAL_LOG_FILE)
            elif entry.name == "txns" and entry.is_dir():
                found = next((p for p in sorted(path.iterdir()) if p.is_symlink() or not _TXID_DIR.match(p.name)), None)
                found = found or next((f for p in sorted(path.iterdir()) if (f := _foreign_below(p))), None)
            elif entry.name == "_last_checkpoint" and entry.is_file():
                found = None
            else:
                found = path
            if found is not None:
                return found
    return None


def _is_chart(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(len(_PNG)) == _PNG


def demo_contents(root: Path) -> list[Path]:
    """What ``--fresh`` deletes in ``root``: the demo's lakehouse (``_txlake/``, the three bank tables), its chart.

    Proves that everything in ``root`` is the demo's first: a lakehouse that opens, whose tables are the demo's
    banks, laid out as the demo writes them. Anything else raises :class:`UsageError` (exit 2) and nothing is
    deleted. Symbolic links are never followed.
    """
    refuse = f"refusing to delete {root} with --fresh"
    hint = "--fresh deletes only a directory the demo made; choose a new --path, or delete it yourself"
    if root.is_symlink() or not root.is_dir():
        raise UsageError(f"{refuse}: it is not a directory", hint=hint)
    entries = sorted(root.iterdir())
    if not entries:
        return []
    if not (root / "_txlake").is_dir():
        raise UsageError(f"{refuse}: it is not empty and holds no txlake demo (no _txlake/ directory)", hint=hint)
    try:
        lake = txlake.connect(f"file://{root}", create=False)
        tables = lake.tables()
    except TxlakeError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UsageError(f"{refuse}: its lakehouse cannot be read ({first})", hint=hint) from exc
    others = foreign_tables(lake)
    if others:
        raise UsageError(f"{refuse}: its lakehouse has tables the demo did not make ({', '.join(others)})", hint=hint)
    owned: list[Path] = []
    for entry in entries:
        foreign: Path | None = entry
        if entry.is_symlink():
            pass
        elif entry.name == "_txlake" and entry.is_dir():
            foreign = _foreign_in_lakehouse_dir(entry)
        elif entry.name == CHART_NAME and entry.is_file() and _is_chart(entry):
            foreign = None
        elif entry.name == "bank" and entry.is_dir():
            foreign = None
            locations = {root / lake.snapshot().entry(name).path for name in tables}
            for table in sorted(entry.iterdir()):
                if table.is_symlink() or not table.is_dir() or not _TABLE_DIR.match(table.name):
                    foreign = table
                    break
                if table not in locations:  # a directory the lakehouse does not know
                    foreign = table
                    break
                foreign = _foreign_in_table(table)
                if foreign is not None:
                    break
        if foreign is not None:
            raise UsageError(f"{refuse}: it holds {foreign}, which the demo did not make", hint=hint)
        owned.append(entry)
    return owned


def delete_demo(root: Path) -> None:
    """``--fresh``: delete what an earlier demo made in ``root`` (see :func:`demo_contents`), nothing else."""
    if not os.path.lexists(root):
        return
    for path in demo_contents(root):
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()


@dataclass(frozen=True)
class _Location:
    uri: str
    storage_options: dict[str, str] | None
    chart_dir: Path


def _check_chart(chart: Path) -> None:
    """``--chart`` is checked before the demo runs: its directory must exist and be writable."""
    parent = chart.parent if str(chart.parent) else Path(".")
    if chart.is_dir():
        raise UsageError(f"--chart {chart} is a directory", hint="give the PNG file's path, e.g. --chart demo.png")
    try:
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as exc:
        raise UsageError(
            f"--chart {chart}: cannot write in {parent} ({exc.strerror or exc})",
            hint="give a PNG path in an existing, writable directory",
        ) from exc


def _check_location_arguments(args: argparse.Namespace) -> None:
    """One way to say where the demo runs: ``--path``, ``--uri`` or ``--s3`` (never one silently ignored)."""
    if args.path is not None and not args.path.strip():
        raise UsageError("--path is empty", hint=f"give a directory, or leave --path out for {DEFAULT_PATH}")
    given = [flag for flag, value in (("--path", args.path), ("--uri", args.uri), ("--s3", args.s3)) if value]
    if len(given) > 1:
        raise UsageError(
            f"{' and '.join(given)} both say where the demo runs",
            hint="give one of --path DIR, --uri URI or --s3",
        )


def run(args: argparse.Namespace, storage_options: dict[str, str] | None = None) -> int:
    console = console_for(stderr=args.json)
    _check_location_arguments(args)
    if args.chart:
        _check_chart(Path(args.chart))
    with ExitStack() as stack:
        where = _location(args, storage_options, stack)
        spark = None
        if not args.no_spark:
            with console.status("starting local Spark (local[2])"):
                session, created = local_session("txlake-demo", debug=bool(getattr(args, "debug", False)))
            if created:
                stack.callback(stop_spark, session)
            spark = session
        result = run_demo(
            where.uri,
            storage_options=where.storage_options,
            accounts=args.accounts,
            workers=args.workers,
            seconds=args.seconds,
            transfers=args.transfers,
            spark=spark,
            chart=Path(args.chart) if args.chart else where.chart_dir / "txlake-demo.png",
            console=console,
        )
    doc: dict[str, Any] = asdict(result) | {"ok": result.ok}
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        summary = Table(title="result")
        summary.add_column("what")
        summary.add_column("value", justify="right")
        for key, value in doc.items():
            summary.add_row(key.replace("_", " "), str(value))
        console.print(summary)
        verdict = "[green]invariant held[/]" if result.ok else "[red]INVARIANT VIOLATED[/]"
        console.print(
            f"{verdict}: total {result.final_total} == {result.expected_total} at version {result.final_version}; "
            f"time travel to version {result.time_travel_version}: total {result.time_travel_total}"
        )
    return 0 if result.ok else 1
