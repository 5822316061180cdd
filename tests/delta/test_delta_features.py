"""Delta features txlake cannot honour are refused by name, on load and on write: never wrong data."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest

from txlake.delta import DeltaTable, Metadata, Protocol
from txlake.delta.features import check_read_support, check_write_support
from txlake.delta.files import write_data_files
from txlake.errors import CorruptLogError, UnsupportedFeatureError
from txlake.storage import ObjectStore

SCHEMA = pa.schema([("id", pa.int64())])


def field(name: str, dtype: str, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": name, "type": dtype, "nullable": True, "metadata": metadata or {}}


def schema_string(*fields: dict[str, Any]) -> str:
    return json.dumps({"type": "struct", "fields": list(fields) or [field("id", "long")]})


def protocol(reader: int, writer: int, rf: list[str] | None = None, wf: list[str] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"minReaderVersion": reader, "minWriterVersion": writer}
    if rf is not None:
        body["readerFeatures"] = rf
    if wf is not None:
        body["writerFeatures"] = wf
    return {"protocol": body}


def metadata(configuration: dict[str, str] | None = None, schema: str | None = None) -> dict[str, Any]:
    return {
        "metaData": {
            "id": "00000000-0000-0000-0000-000000000001",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": schema or schema_string(),
            "partitionColumns": [],
            "configuration": configuration or {},
            "createdTime": 1700000000000,
        }
    }


def write_raw(store: ObjectStore, version: int, *lines: dict[str, Any]) -> None:
    body = "".join(json.dumps(line) + "\n" for line in [{"commitInfo": {"operation": "HAND"}}, *lines])
    store.put(f"t/_delta_log/{version:020d}.json", body.encode())


def add_line(store: ObjectStore, **extra: Any) -> dict[str, Any]:
    """A real data file with rows 1..3, as a plain add line (plus ``extra`` keys)."""
    (add,) = write_data_files(store, "t", pa.table({"id": [1, 2, 3]}))
    line = add.to_json()
    line["add"].update(extra)
    return line


def data_objects(store: ObjectStore) -> set[str]:
    return {m.path for m in store.list("t") if "/_delta_log/" not in m.path}


UNREADABLE = [
    pytest.param(protocol(4, 7, [], []), {}, "readerVersion4", id="reader-v4"),
    pytest.param(protocol(2, 5), {"delta.columnMapping.mode": "bogus"}, "columnMapping", id="column-mapping-unknown"),
    pytest.param(protocol(3, 7, ["typeWidening"], ["typeWidening"]), {}, "typeWidening", id="type-widening"),
]


@pytest.mark.parametrize(("proto", "config", "feature"), UNREADABLE)
def test_unreadable_tables_are_refused_on_load(
    store: ObjectStore, proto: dict[str, Any], config: dict[str, str], feature: str
) -> None:
    write_raw(store, 0, proto, metadata(config))
    write_raw(store, 1, add_line(store))
    table = DeltaTable(store, "t")
    for version in (None, 0, 1):
        with pytest.raises(UnsupportedFeatureError) as info:
            table.snapshot(version)
        assert info.value.feature == feature
    with pytest.raises(UnsupportedFeatureError) as info:
        table.read_arrow()
    assert info.value.feature == feature
    with pytest.raises(UnsupportedFeatureError):
        table.append(SCHEMA.empty_table())


def test_a_protocol_upgrade_later_in_the_log_is_refused_from_then_on(store: ObjectStore) -> None:
    table = DeltaTable.create(store, "t", SCHEMA)
    table.append(pa.table({"id": [1]}))
    write_raw(store, 2, protocol(3, 7, ["typeWidening"], ["typeWidening"]))
    assert table.read_arrow(1).column("id").to_pylist() == [1]
    with pytest.raises(UnsupportedFeatureError) as info:
        table.read_arrow()
    assert info.value.feature == "typeWidening"


def test_a_column_mapping_upgrade_reads_older_files_by_their_names(store: ObjectStore) -> None:
    """Enabling mapping on a table (as Spark does) keeps the old names as physical names; a column added
    afterwards has a physical name older files lack: they read it as nulls."""
    table = DeltaTable.create(store, "t", SCHEMA)
    table.append(pa.table({"id": [1]}))
    mapped = schema_string(
        field("id", "long", {"delta.columnMapping.id": 1, "delta.columnMapping.physicalName": "id"}),
        field("v", "string", {"delta.columnMapping.id": 2, "delta.columnMapping.physicalName": "col-v"}),
    )
    config = {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "2"}
    write_raw(store, 2, protocol(2, 5), metadata(config, mapped))
    assert table.append(pa.table({"id": [2], "v": ["x"]})) == 3
    got = table.read_arrow().sort_by("id")
    assert got.column("id").to_pylist() == [1, 2]
    assert got.column("v").to_pylist() == [None, "x"]
    assert table.read_arrow(1).column("id").to_pylist() == [1]


def test_supported_features_load_and_write(store: ObjectStore) -> None:
    write_raw(
        store,
        0,
        protocol(3, 7, ["timestampNtz"], ["timestampNtz", "appendOnly", "invariants"]),
        metadata({"delta.columnMapping.mode": "none", "delta.appendOnly": "true"}),
    )
    table = DeltaTable(store, "t")
    assert table.append(pa.table({"id": [5]})) == 1
    assert table.read_arrow().column("id").to_pylist() == [5]


def test_unknown_column_types_are_refused_on_read(store: ObjectStore) -> None:
    write_raw(store, 0, protocol(1, 2), metadata(schema=schema_string(field("id", "long"), field("v", "interval"))))
    write_raw(store, 1, add_line(store))
    with pytest.raises(UnsupportedFeatureError) as info:
        DeltaTable(store, "t").read_arrow()
    assert info.value.feature == "type:interval"


def test_variant_tables_read_but_refuse_appends(store: ObjectStore) -> None:
    """A file without the variant column reads it as nulls; any write to the table names ``variantType``."""
    proto = protocol(3, 7, ["variantType"], ["variantType", "appendOnly", "invariants"])
    write_raw(store, 0, proto, metadata(schema=schema_string(field("id", "long"), field("v", "variant"))))
    write_raw(store, 1, add_line(store))
    table = DeltaTable(store, "t")
    got = table.read_arrow()
    assert sorted(got.column("id").to_pylist()) == [1, 2, 3]
    assert got.column("v").null_count == 3
    with pytest.raises(UnsupportedFeatureError) as info:
        table.append(pa.table({"id": [4]}))
    assert info.value.feature == "variantType"


def test_a_log_that_starts_at_a_malformed_v2_checkpoint_is_corrupt(store: ObjectStore) -> None:
    table = DeltaTable.create(store, "t", SCHEMA)
    table.append(pa.table({"id": [1]}))
    table.append(pa.table({"id": [2]}))
    store.put("t/_delta_log/00000000000000000001.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.json", b"{}\n")
    store.delete(table.log.commit_path(0))
    store.delete(table.log.commit_path(1))
    with pytest.raises(CorruptLogError) as info:
        table.snapshot()
    assert info.value.version == 1


UNWRITABLE = [
    pytest.param(
        protocol(3, 7, ["deletionVectors"], ["deletionVectors", "changeDataFeed"]),
        {},
        None,
        "changeDataFeed",
        id="deletion-vectors-and-cdf",
    ),
    pytest.param(protocol(3, 7, [], ["domainMetadata"]), {}, None, "domainMetadata", id="domain-metadata"),
    pytest.param(protocol(3, 7, [], ["rowTracking"]), {}, None, "rowTracking", id="row-tracking"),
    pytest.param(protocol(1, 7, None, ["checkConstraints"]), {}, None, "checkConstraints", id="check-feature"),
    pytest.param(
        protocol(1, 3), {"delta.constraints.positive": "id > 0"}, None, "checkConstraints", id="check-constraint"
    ),
    pytest.param(protocol(1, 4), {"delta.enableChangeDataFeed": "true"}, None, "changeDataFeed", id="cdf"),
    pytest.param(protocol(1, 7, None, ["changeDataFeed"]), {}, None, "changeDataFeed", id="cdf-feature"),
    pytest.param(
        protocol(1, 4),
        {},
        schema_string(field("id", "long"), field("twice", "long", {"delta.generationExpression": "id * 2"})),
        "generatedColumns",
        id="generated-column",
    ),
    pytest.param(
        protocol(1, 2),
        {},
        schema_string(field("id", "long", {"delta.invariants": '{"expression":{"expression":"id > 0"}}'})),
        "invariants",
        id="invariant",
    ),
    pytest.param(
        protocol(1, 6),
        {},
        schema_string(field("id", "long", {"delta.identity.start": 1, "delta.identity.step": 1})),
        "identityColumns",
        id="identity-column",
    ),
    pytest.param(protocol(1, 8), {}, None, "writerVersion8", id="writer-v8"),
]


@pytest.mark.parametrize(("proto", "config", "schema", "feature"), UNWRITABLE)
def test_unwritable_tables_read_but_refuse_appends(
    store: ObjectStore, proto: dict[str, Any], config: dict[str, str], schema: str | None, feature: str
) -> None:
    write_raw(store, 0, proto, metadata(config, schema))
    write_raw(store, 1, add_line(store))
    table = DeltaTable(store, "t")
    assert sorted(table.read_arrow().column("id").to_pylist()) == [1, 2, 3]  # reading is safe
    before = data_objects(store)
    with pytest.raises(UnsupportedFeatureError) as info:
        table.append(pa.table({"id": [4]}))
    assert info.value.feature == feature
    assert table.latest_version() == 1
    assert data_objects(store) == before

    snap = table.snapshot()
    with pytest.raises(UnsupportedFeatureError) as info:
        check_write_support(snap.protocol, snap.metadata, table="t")
    assert info.value.feature == feature
    assert info.value.table == "t"


def test_checks_pass_for_a_plain_table() -> None:
    meta = Metadata("id", schema_string())
    check_read_support(Protocol(1, 2), meta)
    check_write_support(Protocol(1, 2), meta)
    # features inactive below the writer version that introduced them are ignored, as in Delta
    check_write_support(Protocol(1, 2), Metadata("id", schema_string(), configuration={"delta.constraints.c": "x"}))
