"""Records carry the outcomes of the versions before them: a reader walking the log GETs only the newest ones."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pytest

import txlake
from txlake.errors import CorruptLogError
from txlake.lakehouse.log import GlobalLog
from txlake.lakehouse.records import GlobalRecord

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


def test_a_record_embedding_a_later_outcome_is_corrupt(tmp_path: Path) -> None:
    lake = txlake.connect(tmp_path.as_uri())
    lake.create_table("e.t", SCHEMA)
    with lake.transaction() as tx:
        tx.append("e.t", pa.table({"id": [1]}))
    glog = lake.context.glog
    version = lake.version()
    outcome = glog.read_outcome(version)
    assert outcome is not None
    record = glog.read_record(version)
    bad = dataclasses.replace(record, decided=(outcome,))
    lake.store.put(GlobalLog.record_path(version), bad.to_bytes())
    with pytest.raises(CorruptLogError, match="later version"):
        GlobalLog(lake.store).read_record(version)
    assert GlobalRecord.from_bytes(bad.to_bytes()).decided == (outcome,)
