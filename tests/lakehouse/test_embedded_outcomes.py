"""Records carry the outcomes of the versions before them: a reader walking the log GETs only the newest ones."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pyarrow as pa

import txlake
from txlake.lakehouse.log import GlobalLog

SCHEMA = pa.schema([("id", pa.int64())])


def test_a_reader_takes_outcomes_from_later_records(tmp_path: Path) -> None:
    writer = txlake.connect(tmp_path.as_uri())
    writer.create_table("e.t", SCHEMA)
    reader = txlake.connect(tmp_path.as_uri())
    start = reader.version()
    for i in range(12):
        with writer.transaction() as tx:
            tx.append("e.t", pa.table({"id": [i]}))
    glog = writer.context.glog
    for v in range(start + 2, writer.version() + 1):  # each record carries (at least) its predecessor's outcome
        assert v - 1 in {o.version for o in glog.read_record(v).decided}
    fresh = GlobalLog(reader.store)
    requests = reader.store.counters.snapshot()
    state = fresh.tail().state
    spent = reader.store.counters.snapshot() - requests
    assert state == writer.context.glog.tail().state
    # a cold walk: the _last_checkpoint hint, one LIST, every record, the miss past the last one; outcomes of
    # every version but the newest are embedded, so only that one is fetched (not one per version)
    assert spent.as_dict()["GET"] == 1 + (writer.version() + 1) + 1 + 1
    assert sorted(reader.read_arrow("e.t")["id"].to_pylist()) == list(range(12))


def test_a_record_embedding_a_later_outcome_has_its_list_ignored(tmp_path: Path) -> None:
    lake = txlake.connect(tmp_path.as_uri())
    lake.create_table("e.t", SCHEMA)
    with lake.transaction() as tx:
        tx.append("e.t", pa.table({"id": [1]}))
    glog = lake.context.glog
    version = lake.version()
    outcome = glog.read_outcome(version)
    assert outcome is not None
    record = glog.read_record(version)
    bad = dataclasses.replace(record, decided=(dataclasses.replace(outcome, status="aborted"),))
    lake.store.put(GlobalLog.record_path(version), bad.to_bytes())
    fresh = GlobalLog(lake.store)
    assert fresh.read_record(version).decided == ()  # an outcome of itself or later: none of them is trusted
    assert fresh.tail().state.version == version
    assert txlake.connect(tmp_path.as_uri()).read_arrow("e.t")["id"].to_pylist() == [1]


def test_a_malformed_embedded_outcome_list_is_ignored_not_fatal(tmp_path: Path) -> None:
    """The embedded outcomes are copies: a record whose list is damaged still reads (its outcomes are GET)."""
    lake = txlake.connect(tmp_path.as_uri())
    lake.create_table("e.t", SCHEMA)
    with lake.transaction() as tx:
        tx.append("e.t", pa.table({"id": [1]}))
    version = lake.version()
    doc = json.loads(lake.store.get(GlobalLog.record_path(version)))
    doc["decided"] = [{"version": "x"}, 7]
    lake.store.put(GlobalLog.record_path(version), json.dumps(doc).encode())
    fresh = txlake.connect(tmp_path.as_uri())
    assert fresh.context.glog.read_record(version).decided == ()
    assert fresh.read_arrow("e.t")["id"].to_pylist() == [1]
