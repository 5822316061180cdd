"""Differential reader corpus: delta-rs's own test tables, read at every version by txlake and by delta-rs.

The tables live in ``tests/data/delta-rs`` (see its README: Spark, Databricks, delta-rs and other writers;
partitions of every type, special characters, nulls, single and multi-part checkpoints, stale or missing
``_last_checkpoint``, cleaned-up logs, CDF, column mapping, deletion vectors, V2 checkpoints, variants).
At every version of every table, exactly one of these holds:

* ``same``: txlake returns the rows every delta-rs reader (DataFusion, pyarrow) returns, compared as Python
  values regardless of order, and lists the same live files;
* ``refused``: txlake raises :class:`UnsupportedFeatureError` naming the feature (the one in ``REFUSED``), so
  it never returns rows it cannot read right (e.g. rows a deletion vector deletes);
* ``both-fail``: delta-rs fails too and txlake raises a typed :class:`TxlakeError` (a version cleaned up, a
  data file the fixture does not include, a metaData without a schema);
* ``txlake-only``: txlake reads what no delta-rs reader can (``spark-shredded-variant-preview-delta``: a table that
  allows variant shredding, whose files are unshredded; ``tests/interop/test_variant.py`` checks its rows against
  delta-rs's read of its unshredded twin);
* ``deltars-misread``: delta-rs returns wrong rows (``DELTARS_MISREADS``) and txlake the right ones.

Never an untyped exception. Where both clients load a version, their live files (path, size, record count)
must agree even when no rows can be read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import deltalake
import pyarrow.fs as pafs
import pytest

from tests.interop.deltars import (
    FileView,
    Row,
    canonical,
    deltars_files,
    deltars_read_datafusion,
    deltars_read_pyarrow,
    rows,
)
from txlake.delta import DeltaTable
from txlake.errors import DataFileNotFoundError, TxlakeError, UnsupportedFeatureError
from txlake.storage import ObjectStore

CORPUS = Path(__file__).resolve().parent.parent / "data" / "delta-rs"
TABLES = sorted(str(p.parent.relative_to(CORPUS)) for p in CORPUS.rglob("_delta_log") if p.is_dir())

# The feature txlake names for each table it cannot read yet (at the versions that use it).
REFUSED: Mapping[str, str] = {
    "simple_table_features": "readerVersion5",
}

_UTC_9999_12_31 = datetime(9999, 12, 31, tzinfo=UTC)
_UTC_9999_12_30 = datetime(9999, 12, 30, tzinfo=UTC)
# delta-rs reads Spark's INT96 timestamps through nanoseconds: year 9999 wraps around to 1816. The rows
# here are what the table's own stats (and Spark) say; txlake must return exactly these at the latest version.
DELTARS_MISREADS: Mapping[str, list[dict[str, Any]]] = {
    "table_with_edge_timestamps": [
        {"BIG_DATE": _UTC_9999_12_31, "NORMAL_DATE": datetime(2022, 1, 1, tzinfo=UTC), "SOME_VALUE": 1},
        {"BIG_DATE": _UTC_9999_12_30, "NORMAL_DATE": datetime(2022, 2, 1, tzinfo=UTC), "SOME_VALUE": 2},
    ],
}

# delta-rs's pyarrow dataset reader does not apply column mapping: it looks columns up by logical name and
# returns nulls for every data column whose physical name differs. Its DataFusion reader maps them; txlake's
# rows are compared with that one only (and the pyarrow reader is checked to still misread).
DELTARS_PYARROW_IGNORES_MAPPING = frozenset({"table_with_column_mapping"})

_LOG_FILE = re.compile(r"^(\d{20})\.(?:json|checkpoint\..*parquet)$")


# ------------------------------------------------------------------------------------------ both readers


@dataclass
class Read:
    """What one client made of one version: live files and rows, or the exception it raised instead."""

    files: dict[str, FileView] | None = None
    rows: dict[str, list[Row]] = field(default_factory=dict)  # reader -> rows
    errors: dict[str, Exception] = field(default_factory=dict)  # step or reader -> what it raised


def read_txlake(location: Path, version: int | None) -> Read:
    table = DeltaTable(ObjectStore.from_uri(location.as_uri()), "")
    out = Read()
    try:
        snap = table.snapshot(version)
        out.files = {path: FileView(add.size, add.num_records) for path, add in snap.files.items()}
        out.rows["txlake"] = rows(table.read_arrow(snapshot=snap))
    except Exception as exc:  # classified by the caller: anything but a TxlakeError fails the test
        out.errors["txlake"] = exc
    return out


def read_deltars(location: Path, version: int | None) -> Read:
    out = Read()
    try:
        dt = deltalake.DeltaTable(str(location), version=version)
    except Exception as exc:  # delta-rs cannot load this version: recorded, not judged
        out.errors["load"] = exc
        return out
    try:
        out.files = deltars_files(dt)
    except Exception as exc:
        out.errors["files"] = exc
    fs = pafs.SubTreeFileSystem(str(location), pafs.LocalFileSystem())  # delta-rs#2184: never without one
    for reader in ("datafusion", "pyarrow"):
        try:
            out.rows[reader] = deltars_read_datafusion(dt) if reader == "datafusion" else deltars_read_pyarrow(dt, fs)
        except Exception as exc:
            out.errors[reader] = exc
    return out


# -------------------------------------------------------------------------------------------- judgement


@dataclass(frozen=True)
class Outcome:
    kind: str  # same | refused | both-fail | txlake-only | deltars-misread
    detail: str = ""


def assert_same_files(mine: Mapping[str, FileView], theirs: Mapping[str, FileView], at: str) -> None:
    """Same live paths and sizes; record counts equal wherever delta-rs knows them (txlake also reads the
    counts of checkpoints that only have ``stats_parsed``, where delta-rs reports none)."""
    assert sorted(mine) == sorted(theirs), f"{at}: live files differ"
    for path, view in theirs.items():
        assert mine[path].size == view.size, f"{at}: size of {path}"
        if view.num_records is not None:
            assert mine[path].num_records == view.num_records, f"{at}: record count of {path}"


def judge(name: str, location: Path, version: int | None) -> Outcome:
    """Compare both clients on one version (``None``: latest); fail the test on any disagreement."""
    mine = read_txlake(location, version)
    theirs = read_deltars(location, version)
    at = f"{name} v{'latest' if version is None else version}"
    if mine.files is not None and theirs.files is not None:
        assert_same_files(mine.files, theirs.files, at)
    error = mine.errors.get("txlake")
    if error is not None:
        if not isinstance(error, TxlakeError):
            pytest.fail(f"{at}: untyped {type(error).__name__}: {error}")
        if isinstance(error, UnsupportedFeatureError):
            assert error.feature == REFUSED.get(name), f"{at}: unexpected refusal of {error.feature!r}"
            return Outcome("refused", error.feature)
        assert not theirs.rows, f"{at}: delta-rs reads it ({sorted(theirs.rows)}), txlake raised {error!r}"
        if isinstance(error, DataFileNotFoundError):  # the fixture lacks the file: not a path resolution bug
            assert error.path is not None
            assert not (location / unquote(error.path)).exists(), f"{at}: {error.path} exists"
        return Outcome("both-fail", type(error).__name__)
    got = mine.rows["txlake"]
    if not theirs.rows:
        return Outcome("txlake-only", ", ".join(f"{k}: {type(e).__name__}" for k, e in theirs.errors.items()))
    if name in DELTARS_MISREADS:
        if version is None:
            assert got == rows(DELTARS_MISREADS[name]), f"{at}: txlake's rows are not the table's own"
        assert all(r != got for r in theirs.rows.values()), f"{at}: delta-rs no longer misreads: drop the entry"
        return Outcome("deltars-misread")
    for reader, expected in theirs.rows.items():
        if reader == "pyarrow" and name in DELTARS_PYARROW_IGNORES_MAPPING:
            assert got != expected, f"{at}: delta-rs's pyarrow reader maps columns now: drop the entry"
            continue
        assert got == expected, f"{at}: txlake's rows differ from delta-rs ({reader})"
    return Outcome("same")


def log_versions(location: Path) -> list[int]:
    """Versions worth reading: from one below the oldest commit or checkpoint (a cleaned-up version) on."""
    found = {int(m.group(1)) for p in (location / "_delta_log").iterdir() if (m := _LOG_FILE.match(p.name))}
    if not found:
        return []
    first = max(min(found) - 1, 0)
    return list(range(first, max(found) + 1))


# ---------------------------------------------------------------------------------------------- the test


def test_the_corpus_is_vendored() -> None:
    assert len(TABLES) >= 40
    assert (CORPUS / "LICENSE").is_file()
    assert (CORPUS / "README.md").is_file()


@pytest.mark.parametrize("name", TABLES)
def test_txlake_reads_every_version_as_deltars_does(name: str) -> None:
    location = CORPUS / name
    outcomes = {v: judge(name, location, v) for v in log_versions(location)}
    latest = judge(name, location, None)
    if name in REFUSED:
        assert latest == Outcome("refused", REFUSED[name])
    elif name in DELTARS_MISREADS:
        assert latest == Outcome("deltars-misread")
    else:
        assert latest.kind in {"same", "both-fail", "txlake-only"}, latest
    assert all(o.kind != "refused" for o in outcomes.values()) or name in REFUSED


def test_canonical_rows_ignore_order_and_compare_values() -> None:
    """The comparison itself: order-insensitive, NaN equal to itself, instants compared in UTC."""
    a = [{"x": float("nan"), "t": datetime(2024, 1, 1, tzinfo=UTC)}, {"x": 1.0, "t": None}]
    assert rows(a) == rows(list(reversed(a)))
    assert canonical({"k": [1, 2]}) == (("k", (1, 2)),)
