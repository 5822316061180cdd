"""Delta log actions: exact JSON shape, round trips, and corrupt commit files."""

from __future__ import annotations

import json
from typing import Any

import pytest

from txlake.delta import (
    Action,
    Add,
    Cdc,
    CommitInfo,
    Format,
    Metadata,
    OtherAction,
    Protocol,
    Remove,
    Txn,
    parse_commit,
    serialize_commit,
)
from txlake.delta.dv import DeletionVectorDescriptor
from txlake.errors import CorruptLogError

STATS = json.dumps({"numRecords": 3, "minValues": {"x": 1}, "maxValues": {"x": 9}, "nullCount": {"x": 0}})
SCHEMA = '{"type":"struct","fields":[{"name":"x","type":"long","nullable":true,"metadata":{}}]}'

EVERY_ACTION: list[Action] = [
    CommitInfo({"timestamp": 1, "operation": "WRITE", "operationParameters": {"mode": "Append"}}),
    Protocol(1, 2),
    Protocol(3, 7, ("timestampNtz",), ("timestampNtz", "appendOnly")),
    Metadata(
        id="f00",
        schema_string=SCHEMA,
        partition_columns=("p",),
        configuration={"delta.appendOnly": "true"},
        created_time=1700000000000,
        name="t",
        description="a table",
        format=Format("parquet", {"k": "v"}),
    ),
    Metadata(id="bare", schema_string=SCHEMA),
    Add("p=1/a.parquet", {"p": "1"}, 10, 20, True, STATS),
    Add("b.parquet", {}, 10, 20, False),
    Add("c.parquet", {"p": None}, 1, 2, True, STATS, {"k": "v"}, None, 5, 6),
    Remove("a.parquet"),
    Remove("a.parquet", 123, False, True, {"p": "1"}, 10, {"k": "v"}, None, STATS),
    Txn("app", 7),
    Txn("app", 8, 1700000000000),
    Cdc("_change_data/c.parquet", {"p": "1"}, 5),
    OtherAction("domainMetadata", {"domain": "d", "configuration": "{}", "removed": False}),
]


@pytest.mark.parametrize("action", EVERY_ACTION, ids=lambda a: type(a).__name__)
def test_every_action_round_trips_through_commit_json(action: Action) -> None:
    data = serialize_commit([action])
    assert parse_commit(data) == [action]


def _line(action: Action) -> dict[str, Any]:
    lines = serialize_commit([action]).decode().splitlines()
    assert len(lines) == 1
    decoded: dict[str, Any] = json.loads(lines[0])
    return decoded


def test_add_json_keys_are_camel_case_and_stats_is_a_string() -> None:
    body = _line(Add("a.parquet", {}, 10, 20, True, STATS))["add"]
    assert set(body) == {"path", "partitionValues", "size", "modificationTime", "dataChange", "stats"}
    assert body["partitionValues"] == {}
    assert isinstance(body["stats"], str)
    assert json.loads(body["stats"])["numRecords"] == 3


def test_add_without_stats_still_has_partition_values() -> None:
    body = _line(Add("a.parquet", {}, 10, 20))["add"]
    assert set(body) == {"path", "partitionValues", "size", "modificationTime", "dataChange"}


def test_add_optional_fields_use_protocol_names() -> None:
    dv = DeletionVectorDescriptor("i", "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L", 40, 6)
    add = Add("a", {"p": None}, 1, 2, True, None, {"t": "1"}, dv, 3, 4)
    body = _line(add)["add"]
    assert body["partitionValues"] == {"p": None}
    assert body["tags"] == {"t": "1"}
    assert body["deletionVector"] == {
        "storageType": "i",
        "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L",
        "sizeInBytes": 40,
        "cardinality": 6,
    }
    assert body["baseRowId"] == 3
    assert body["defaultRowCommitVersion"] == 4


def test_remove_json_keys() -> None:
    body = _line(Remove("a", 5, True, True, {"p": "1"}, 10, None, None, STATS))["remove"]
    assert set(body) == {
        "path",
        "dataChange",
        "deletionTimestamp",
        "extendedFileMetadata",
        "partitionValues",
        "size",
        "stats",
    }
    assert _line(Remove("a"))["remove"] == {"path": "a", "dataChange": True}


def test_metadata_json_keys() -> None:
    body = _line(Metadata("id1", SCHEMA, ("p",), {"a": "b"}, 7, "n", "d"))["metaData"]
    assert set(body) == {
        "id",
        "name",
        "description",
        "format",
        "schemaString",
        "partitionColumns",
        "configuration",
        "createdTime",
    }
    assert body["format"] == {"provider": "parquet", "options": {}}
    assert body["partitionColumns"] == ["p"]
    assert isinstance(body["schemaString"], str)


def test_protocol_txn_cdc_commit_info_json() -> None:
    assert _line(Protocol(1, 2)) == {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}
    assert _line(Protocol(3, 7, (), ("appendOnly",))) == {
        "protocol": {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": [],
            "writerFeatures": ["appendOnly"],
        }
    }
    assert _line(Txn("app", 3, 9)) == {"txn": {"appId": "app", "version": 3, "lastUpdated": 9}}
    assert _line(Cdc("c", {}, 4)) == {"cdc": {"path": "c", "partitionValues": {}, "size": 4, "dataChange": False}}
    assert _line(CommitInfo({"operation": "WRITE"})) == {"commitInfo": {"operation": "WRITE"}}


def test_metadata_new_generates_id_and_created_time() -> None:
    a = Metadata.new(SCHEMA, ["x"], {"k": "v"})
    b = Metadata.new(SCHEMA)
    assert a.id != b.id
    assert a.created_time is not None
    assert a.partition_columns == ("x",)
    assert Metadata.new(SCHEMA, table_id="fixed").id == "fixed"


def test_serialize_commit_puts_commit_info_first_and_keeps_order() -> None:
    add1 = Add("1", {}, 1, 1)
    add2 = Add("2", {}, 1, 1)
    info = CommitInfo({"operation": "WRITE"})
    lines = serialize_commit([Protocol(), add1, info, add2]).decode().splitlines()
    assert [next(iter(json.loads(line))) for line in lines] == ["commitInfo", "protocol", "add", "add"]
    assert [json.loads(line)["add"]["path"] for line in lines[2:]] == ["1", "2"]


def test_serialized_commit_is_ndjson_with_trailing_newline() -> None:
    data = serialize_commit([CommitInfo({}), Protocol()])
    assert data.endswith(b"\n")
    assert all(isinstance(json.loads(line), dict) for line in data.decode().splitlines())


def test_unknown_action_kinds_become_other_actions() -> None:
    data = b'{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}\n{"sidecar":{"path":"s","sizeInBytes":1}}\n'
    actions = parse_commit(data)
    assert actions[1] == OtherAction("sidecar", {"path": "s", "sizeInBytes": 1})
    assert parse_commit(serialize_commit(actions)) == actions


def test_blank_lines_and_crlf_are_tolerated() -> None:
    data = b'{"txn":{"appId":"a","version":1}}\r\n\r\n{"txn":{"appId":"b","version":2}}\r\n'
    assert parse_commit(data) == [Txn("a", 1), Txn("b", 2)]


GOOD_LINE = b'{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}\n'


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(GOOD_LINE + b"this is not json\n", id="non-json-line"),
        pytest.param(GOOD_LINE + b'{"add":{"path":"a","partitionVal', id="truncated-last-line"),
        pytest.param(b"", id="empty-file"),
        pytest.param(b"\n\n  \n", id="only-blank-lines"),
        pytest.param(GOOD_LINE + b"[1, 2]\n", id="array-line"),
        pytest.param(GOOD_LINE + b"null\n", id="null-line"),
        pytest.param(GOOD_LINE + b'"add"\n', id="string-line"),
        pytest.param(b'{"txn":{"appId":"a","version":1},"add":{"path":"a"}}\n', id="two-keys"),
        pytest.param(b"{}\n", id="no-key"),
        pytest.param(b'{"add":{"partitionValues":{},"size":1}}\n', id="add-without-path"),
        pytest.param(b'{"add":null}\n', id="null-body"),
        pytest.param(b'{"protocol":{"minReaderVersion":"x","minWriterVersion":2}}\n', id="bad-int"),
        pytest.param(b'{"txn":{"appId":"a"}}\n', id="txn-without-version"),
        pytest.param(b"\xff\xfe{}\n", id="not-utf8"),
    ],
)
def test_corrupt_commit_raises_corrupt_log_error_with_version(data: bytes) -> None:
    with pytest.raises(CorruptLogError) as info:
        parse_commit(data, table="t", version=42)
    assert info.value.version == 42
    assert info.value.table == "t"


def test_add_stats_helpers() -> None:
    assert Add("a", {}, 1, 1, stats=STATS).num_records == 3
    assert Add("a", {}, 1, 1).num_records is None
    assert Add("a", {}, 1, 1, stats="not json").num_records is None
    assert Add("a", {}, 1, 1, stats="[1]").parsed_stats() is None
    assert Add("a", {}, 1, 1, stats='{"minValues":{}}').num_records is None


def test_add_stats_written_as_object_by_a_foreign_writer_count_as_absent() -> None:
    # The protocol says stats is a JSON string; an object there must not crash replay or row counts.
    (add,) = parse_commit(
        b'{"add":{"path":"a","partitionValues":{},"size":1,"modificationTime":1,'
        b'"dataChange":true,"stats":{"numRecords":3}}}\n'
    )
    assert isinstance(add, Add)
    assert add.parsed_stats() is None
    assert add.num_records is None


def test_add_remove_keeps_file_identity() -> None:
    add = Add("p=1/a", {"p": "1"}, 10, 20, True, STATS, {"k": "v"})
    rm = add.remove(deletion_timestamp=99)
    assert rm == Remove("p=1/a", 99, True, True, {"p": "1"}, 10, {"k": "v"}, None, STATS)
    assert add.remove().deletion_timestamp is not None


def test_commit_info_txlake_section() -> None:
    assert CommitInfo({"txlake": {"txid": "x"}}).txlake == {"txid": "x"}
    assert CommitInfo({"txlake": 5}).txlake is None
    assert CommitInfo({}).txlake is None
