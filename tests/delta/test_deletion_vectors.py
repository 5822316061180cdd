"""Deletion vectors: Z85 and Roaring decoding, descriptors, log replay by ``(path, DV)``, and real tables.

The tables are written by real tools: Spark (delta-kernel-rs's golden tables, with Spark's own expected rows,
and delta-rs's DV fixtures) and Rust writers (delta-kernel-rs's inline-DV table). Each is read at every version
by txlake and by delta-rs (DataFusion; its pyarrow reader refuses tables with the ``deletionVectors`` reader
feature, and is compared too wherever it reads). Roaring bitmaps are checked against pyroaring's (CRoaring)
portable serialization; Z85 against the RFC's and the Delta protocol's own examples.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import struct
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import deltalake
import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pyroaring
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.interop.deltars import FileView, Row, deltars_files, deltars_read_datafusion, deltars_read_pyarrow, rows
from txlake.delta import DeltaTable
from txlake.delta.actions import Add, Remove, parse_commit
from txlake.delta.dv import (
    MAGIC,
    NATIVE_MAGIC,
    DeletionVectorDescriptor,
    decode_roaring_bitmap_array,
    encode_roaring_bitmap_array,
    inline_bytes,
    z85_decode,
    z85_encode,
)
from txlake.delta.files import load_deletion_vector, write_deletion_vectors
from txlake.delta.roaring import RoaringFormatError, decode_bitmap32, decode_bitmap64
from txlake.delta.state import SnapshotBuilder
from txlake.errors import CorruptLogError, DataFileNotFoundError
from txlake.storage import ObjectStore

DATA = Path(__file__).resolve().parent.parent / "data"
KERNEL = DATA / "delta-kernel-rs"
DELTARS = DATA / "delta-rs"

# Every vendored table that has deletion vectors and no feature txlake refuses to read.
DV_TABLES = {
    "delta-rs/table-with-dv-small": DELTARS / "table-with-dv-small",
    "delta-rs/table_with_deletion_logs": DELTARS / "table_with_deletion_logs",
    "delta-rs/cdf-table-with-cdc-and-dvs": DELTARS / "cdf-table-with-cdc-and-dvs",
    "kernel/with-short-dv": KERNEL / "with-short-dv",
    "kernel/cdf-table-with-dv": KERNEL / "cdf-table-with-dv",
    "kernel/log-replay-dv-key-cases": KERNEL / "log-replay-dv-key-cases" / "delta",
    "kernel/dv-partitioned-with-checkpoint": KERNEL / "dv-partitioned-with-checkpoint" / "delta",
    "kernel/dv-with-columnmapping": KERNEL / "dv-with-columnmapping" / "delta",
}
# Golden tables: Spark wrote the table, then wrote what it reads at the latest version into ``expected/``.
GOLDEN = ["log-replay-dv-key-cases", "dv-partitioned-with-checkpoint", "dv-with-columnmapping"]

PROTOCOL_INLINE = "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L"  # PROTOCOL.md, JSON Example 3


# ------------------------------------------------------------------------------------------------ helpers


def open_table(location: Path) -> DeltaTable:
    return DeltaTable(ObjectStore.from_uri(location.resolve().as_uri()), "")


def versions(location: Path) -> list[int]:
    return sorted(int(p.name[:20]) for p in (location / "_delta_log").glob("*.json"))


def roaring_array(values: Iterable[int]) -> bytes:
    """A RoaringBitmapArray as Delta stores it: the magic number, then CRoaring's portable 64-bit bitmap."""
    bitmap = pyroaring.BitMap64(values)
    bitmap.run_optimize()
    return struct.pack("<I", MAGIC) + bitmap.serialize()


def inline_dv(values: list[int]) -> dict[str, Any]:
    data = roaring_array(values)
    return {
        "storageType": "i",
        "pathOrInlineDv": z85_encode(data),
        "sizeInBytes": len(data),
        "cardinality": len(values),
    }


def dv_file(*dvs: bytes) -> tuple[bytes, list[int]]:
    """A DV file (format version 1) holding ``dvs``, and the offset of each."""
    out = bytearray([1])
    offsets = []
    for data in dvs:
        offsets.append(len(out))
        out += struct.pack(">I", len(data)) + data + struct.pack(">I", zlib.crc32(data))
    return bytes(out), offsets


def copy_table(source: Path, tmp_path: Path) -> Path:
    target = tmp_path / source.name
    shutil.copytree(source, target)
    return target


def rewrite_log(location: Path, version: int, edit: Any) -> None:
    """Apply ``edit`` to every action (a decoded JSON line) of commit ``version`` of a copied table."""
    path = location / "_delta_log" / f"{version:020d}.json"
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    path.write_text("".join(json.dumps(edit(line)) + "\n" for line in lines))


def deltars_rows(location: Path, version: int | None) -> tuple[dict[str, FileView], dict[str, list[Row]]]:
    """delta-rs's live files and its rows from every reader that reads the version (at least DataFusion)."""
    dt = deltalake.DeltaTable(str(location), version=version)
    found = {"datafusion": deltars_read_datafusion(dt)}
    fs = pafs.SubTreeFileSystem(str(location), pafs.LocalFileSystem())  # delta-rs#2184: never without one
    # delta-rs's pyarrow reader: "reader features {'deletionVectors'} ... not yet supported by the deltalake reader"
    with contextlib.suppress(deltalake.exceptions.DeltaProtocolError):
        found["pyarrow"] = deltars_read_pyarrow(dt, fs)
    return deltars_files(dt), found


def txlake_rows(location: Path, version: int | None) -> tuple[dict[str, FileView], list[Row]]:
    table = open_table(location)
    snap = table.snapshot(version)
    files = {path: FileView(add.size, add.num_records) for path, add in snap.files.items()}
    return files, rows(table.read_arrow(snapshot=snap))


def assert_reads_like_deltars(location: Path, version: int | None) -> list[Row]:
    mine_files, mine = txlake_rows(location, version)
    theirs_files, theirs = deltars_rows(location, version)
    assert mine_files == theirs_files, f"v{version}: live files differ"
    for reader, got in theirs.items():
        assert mine == got, f"v{version}: txlake's rows differ from delta-rs ({reader})"
    return mine


# -------------------------------------------------------------------------------------------------- Z85


def test_z85_rfc_test_vector() -> None:
    data = bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])  # ZeroMQ RFC 32
    assert z85_decode("HelloWorld") == data
    assert z85_encode(data) == "HelloWorld"


def test_z85_uuid_of_the_protocol_example_names_the_dv_file() -> None:
    dv = DeletionVectorDescriptor("u", "ab^-aqEH.-t@S}K{vb[*k^", 40, 6, offset=4)
    assert dv.relative_path() == "ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    assert dv.unique_id == "uab^-aqEH.-t@S}K{vb[*k^@4"
    bare = DeletionVectorDescriptor("u", "^-aqEH.-t@S}K{vb[*k^", 40, 6, offset=1)
    assert bare.relative_path() == "deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"


def test_z85_rust_crate_padding_of_the_last_group() -> None:
    """``##093``: two padding bytes, then the two bytes 0x03 0x00 (the Rust z85 crate's form)."""
    assert z85_decode("00000##093") == b"\0\0\0\0\x03\x00"
    assert z85_decode("#0000") == b"\0\0\0"


@pytest.mark.parametrize("text", ["abcd", "abcd~", "#####", "$$$$$", "##093abcde"])
def test_z85_rejects_malformed_text(text: str) -> None:
    with pytest.raises(ValueError):
        z85_decode(text)


@given(st.binary(max_size=64))
def test_z85_round_trips_with_zero_padding(data: bytes) -> None:
    text = z85_encode(data)
    assert len(text) % 5 == 0
    assert z85_decode(text)[: len(data)] == data


# ---------------------------------------------------------------------------------------------- Roaring


def test_inline_dv_of_the_protocol_example() -> None:
    """PROTOCOL.md's inline example holds the documented rows in a 32-bit Roaring bitmap, but behind a header in
    Delta's native format written big-endian: Delta's reader (little-endian, RoaringBitmapArray.readFrom) and
    txlake refuse it; the bitmap itself decodes to the protocol's rows."""
    dv = DeletionVectorDescriptor.from_json(
        {"storageType": "i", "pathOrInlineDv": PROTOCOL_INLINE, "sizeInBytes": 40, "cardinality": 6}
    )
    assert dv.offset is None and dv.unique_id == "i" + PROTOCOL_INLINE
    data = inline_bytes(dv)
    assert struct.unpack(">III", data[:12]) == (NATIVE_MAGIC, 1, 28)  # magic, one bitmap, of 28 bytes
    assert decode_bitmap32(data[12:]).tolist() == [3, 4, 7, 11, 18, 29]
    with pytest.raises(ValueError):
        decode_roaring_bitmap_array(data)
    little_endian = struct.pack("<III", NATIVE_MAGIC, 1, 28) + data[12:]
    assert decode_roaring_bitmap_array(little_endian).tolist() == [3, 4, 7, 11, 18, 29]


def test_native_bitmap_array_format() -> None:
    """Delta's native RoaringBitmapArray: one 32-bit bitmap per high key 0, 1, ... (empty ones fill gaps)."""
    low = pyroaring.BitMap([5, 70000]).serialize()
    empty = pyroaring.BitMap().serialize()
    high = pyroaring.BitMap(range(100, 5000)).serialize()
    data = struct.pack("<II", NATIVE_MAGIC, 3) + b"".join(struct.pack("<I", len(b)) + b for b in (low, empty, high))
    assert decode_roaring_bitmap_array(data).tolist() == [5, 70000, *((2 << 32) + i for i in range(100, 5000))]
    with pytest.raises(ValueError):
        decode_roaring_bitmap_array(data[:-1])


SETS_32 = {
    "empty": [],
    "array": [0, 9, 65535, 65536, 1 << 20],
    "bitmap": list(range(0, 20000, 2)),  # > 4096 values in one 16-bit block: a bitmap container
    "runs": [*range(100, 5000), *range(70000, 70010), 4294967295],  # run containers after run_optimize
    "mixed": [*range(0, 10000, 3), *range(65536, 65536 + 3000), 131072, *range(200000, 260000)],
}


@pytest.mark.parametrize("name", sorted(SETS_32))
@pytest.mark.parametrize("optimize", [False, True], ids=["plain", "run-optimized"])
def test_32_bit_roaring_matches_croaring(name: str, optimize: bool) -> None:
    bitmap = pyroaring.BitMap(SETS_32[name])
    if optimize:
        bitmap.run_optimize()
    assert decode_bitmap32(bitmap.serialize()).tolist() == sorted(SETS_32[name])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.integers(0, 1 << 18),  # small row indexes: array and bitmap containers
            st.integers(0, (1 << 63) - 1),  # any bucket (Delta keeps the top bit 0)
            st.integers(0, 200).map(lambda i: (1 << 32) * 3 + i),  # a second bucket
        ),
        max_size=300,
    ),
    st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(1, 9000)), max_size=3),
)
def test_64_bit_roaring_matches_croaring(values: list[int], ranges: list[tuple[int, int]]) -> None:
    wanted = set(values)
    for start, length in ranges:
        wanted.update(range(start, start + length))
    data = roaring_array(wanted)
    decoded = decode_roaring_bitmap_array(data)
    assert decoded.dtype == np.uint64
    assert decoded.tolist() == sorted(wanted)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.one_of(st.integers(0, 1 << 18), st.integers(0, (1 << 63) - 1)), max_size=300),
    st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(1, 9000)), max_size=3),
)
def test_txlake_encodes_64_bit_roaring_that_croaring_reads(values: list[int], ranges: list[tuple[int, int]]) -> None:
    """The writer's RoaringBitmapArray: CRoaring (pyroaring) deserializes it to the same rows."""
    wanted = set(values)
    for start, length in ranges:
        wanted.update(range(start, start + length))
    data = encode_roaring_bitmap_array(np.array(sorted(wanted), dtype=np.uint64))
    assert struct.unpack_from("<I", data)[0] == MAGIC
    assert list(pyroaring.BitMap64.deserialize(data[4:])) == sorted(wanted)
    assert decode_roaring_bitmap_array(data).tolist() == sorted(wanted)


def test_written_dv_files_read_back(tmp_path: Path) -> None:
    """Several DVs in one file (version byte, framed with size and CRC-32): each reads back from its offset."""
    store = ObjectStore.from_uri(tmp_path.as_uri())
    sets = [np.array([0, 5, 9], dtype=np.uint64), np.arange(0, 70_000, 3, dtype=np.uint64)]
    key, descriptors = write_deletion_vectors(store, "t", sets)
    assert key == f"t/{descriptors[0].relative_path()}" and key.startswith("t/deletion_vector_")
    raw = store.get(key)
    assert raw[0] == 1 and descriptors[0].offset == 1
    for rows_, dv in zip(sets, descriptors, strict=True):
        add = Add("f.parquet", {}, 1, 1, deletion_vector=dv)
        assert load_deletion_vector(store, "t", add).tolist() == rows_.tolist()
        assert dv.cardinality == len(rows_)


def test_roaring_rejects_malformed_bytes() -> None:
    good = pyroaring.BitMap64([1, 2, 1 << 40]).serialize()
    with pytest.raises(RoaringFormatError):
        decode_bitmap64(good[:-1])  # truncated
    with pytest.raises(RoaringFormatError):
        decode_bitmap64(good + b"\0")  # trailing bytes
    with pytest.raises(RoaringFormatError):
        decode_bitmap32(b"\x01\x02\x03\x04\0\0\0\0")  # no cookie
    with pytest.raises(ValueError):
        decode_roaring_bitmap_array(struct.pack("<I", MAGIC + 1) + good)  # another format's magic number


# ------------------------------------------------------------------------------------------- descriptors


def test_descriptor_json_round_trip_and_malformed_descriptors() -> None:
    body = {"storageType": "u", "pathOrInlineDv": "vBn[lx{q8@P<9BNH/isA", "offset": 1, "sizeInBytes": 36}
    body["cardinality"] = 2
    (add,) = parse_commit(json.dumps({"add": {"path": "a", "size": 1, "deletionVector": body}}).encode())
    assert isinstance(add, Add) and add.deletion_vector is not None
    assert add.deletion_vector.to_json() == body
    assert add.remove().deletion_vector == add.deletion_vector  # a remove names the same logical file
    for bad in ({**body, "storageType": "x"}, {**body, "cardinality": -1}, {**body, "pathOrInlineDv": "short"}, "u"):
        with pytest.raises(CorruptLogError):
            parse_commit(json.dumps({"add": {"path": "a", "size": 1, "deletionVector": bad}}).encode())


def _add(path: str, dv: DeletionVectorDescriptor | None) -> Add:
    return Add(path, {}, 1, 1, True, '{"numRecords":10}', deletion_vector=dv)


@pytest.mark.parametrize("add_first", [True, False], ids=["add-then-remove", "remove-then-add"])
def test_replay_keys_logical_files_by_path_and_dv(add_first: bool) -> None:
    """A DV update is ``remove(path, old DV)`` + ``add(path, new DV)``, in either order within a commit."""
    old = DeletionVectorDescriptor("i", PROTOCOL_INLINE, 40, 6)
    new = DeletionVectorDescriptor("u", "vBn[lx{q8@P<9BNH/isA", 36, 2, offset=1)
    builder = SnapshotBuilder("t")
    builder.apply(0, [_add("a", old), _add("b", None)], None)
    update = [_add("a", new), _add("a", old).remove()]
    builder.apply(1, update if add_first else update[::-1], None)
    assert builder.files["a"].deletion_vector == new
    assert builder.tombstones["a"].deletion_vector == old
    # a remove of the data file with another DV than the live one leaves it live
    builder.apply(2, [Remove("a", 1, deletion_vector=old), Remove("b", 1)], None)
    assert sorted(builder.files) == ["a"]
    builder.apply(3, [Remove("a", 1, deletion_vector=new)], None)
    assert not builder.files


# ------------------------------------------------------------------------------------------- real tables


@pytest.mark.parametrize("name", sorted(DV_TABLES))
def test_txlake_reads_dv_tables_like_deltars_at_every_version(name: str) -> None:
    location = DV_TABLES[name]
    for version in versions(location):
        assert_reads_like_deltars(location, version)
    assert_reads_like_deltars(location, None)


@pytest.mark.parametrize("name", GOLDEN)
def test_txlake_reads_golden_tables_as_spark_does(name: str) -> None:
    expected = pa.concat_tables(pq.read_table(p) for p in sorted((KERNEL / name / "expected").glob("*.parquet")))
    assert rows(open_table(KERNEL / name / "delta").read_arrow()) == rows(expected)


def test_dv_tables_count_live_rows() -> None:
    snap = open_table(DELTARS / "table-with-dv-small").snapshot()
    (add,) = snap.files.values()
    assert (add.num_records, add.live_records, snap.num_records) == (10, 8, 8)


def test_checkpoint_with_dvs_is_read_and_written(tmp_path: Path) -> None:
    """A Spark checkpoint holding DVs reads; txlake's own checkpoint of a DV table keeps them, for delta-rs too."""
    location = copy_table(KERNEL / "dv-partitioned-with-checkpoint" / "delta", tmp_path)
    table = open_table(location)
    before = assert_reads_like_deltars(location, None)
    assert any(a.deletion_vector is not None for a in table.snapshot(10).files.values())
    table.checkpoint()  # at the latest version, 15
    for commit in (location / "_delta_log").glob("*.json"):
        commit.unlink()  # only the checkpoint is left to read the table from
    assert rows(table.read_arrow()) == before
    assert assert_reads_like_deltars(location, None) == before


def test_relative_dv_with_prefix_and_absolute_dv(tmp_path: Path) -> None:
    """Spark's DV of table-with-dv-small moved below a random prefix (``u``), and named by URI (``p``)."""
    location = copy_table(DELTARS / "table-with-dv-small", tmp_path)
    (dv_path,) = location.glob("deletion_vector_*.bin")
    expected = rows(open_table(location).read_arrow())
    (location / "x7").mkdir()
    dv_path.rename(location / "x7" / dv_path.name)

    def prefixed(line: dict[str, Any]) -> dict[str, Any]:
        if "add" in line and line["add"].get("deletionVector"):
            line["add"]["deletionVector"]["pathOrInlineDv"] = "x7" + line["add"]["deletionVector"]["pathOrInlineDv"]
        return line

    rewrite_log(location, 1, prefixed)
    assert rows(open_table(location).read_arrow()) == expected
    assert assert_reads_like_deltars(location, None) == expected

    def absolute(line: dict[str, Any]) -> dict[str, Any]:
        if "add" in line and line["add"].get("deletionVector"):
            dv = line["add"]["deletionVector"]
            dv["storageType"], dv["pathOrInlineDv"] = "p", (location / "x7" / dv_path.name).as_uri()
        return line

    rewrite_log(location, 1, absolute)
    assert rows(open_table(location).read_arrow()) == expected


def test_several_dvs_in_one_file_and_an_inline_dv(tmp_path: Path) -> None:
    """txlake-written data files, deleted from by a hand-written commit the way Spark writes one."""
    store = ObjectStore.from_uri((tmp_path / "t").as_uri())
    table = DeltaTable.create(store, "", pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": list(range(100))}))
    table.append(pa.table({"id": list(range(100, 70100))}))
    small, big = sorted(table.snapshot().files.values(), key=lambda a: a.size)
    deleted_big = [*range(0, 70000, 7), *range(30000, 40000)]  # bitmap and run containers, two 16-bit blocks
    data, (first, second) = dv_file(roaring_array([0, 99]), roaring_array(deleted_big))
    name = "deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    store.put(name, data)
    uuid_z85 = "^-aqEH.-t@S}K{vb[*k^"
    on_disk = DeletionVectorDescriptor("u", uuid_z85, len(roaring_array(deleted_big)), len(set(deleted_big)), second)
    features = ["deletionVectors"]
    commit = [
        {
            "protocol": {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": features,
                "writerFeatures": features,
            }
        },
        {"remove": {"path": small.path, "deletionTimestamp": 1, "dataChange": True}},
        {"add": {**small.to_json()["add"], "deletionVector": inline_dv([0, 99])}},
        {"remove": {"path": big.path, "deletionTimestamp": 1, "dataChange": True}},
        {"add": {**big.to_json()["add"], "deletionVector": on_disk.to_json()}},
    ]
    assert first == 1
    store.put("_delta_log/00000000000000000003.json", "".join(json.dumps(c) + "\n" for c in commit).encode())
    ids = table.read_arrow().column("id").to_pylist()
    gone = {0, 99, *(100 + i for i in deleted_big)}
    assert sorted(ids) == [i for i in range(70100) if i not in gone]
    assert table.snapshot().num_records == 70100 - len(gone)
    assert assert_reads_like_deltars(tmp_path / "t", None) == rows(table.read_arrow())


def test_a_dv_on_a_table_without_the_feature_is_still_applied(tmp_path: Path) -> None:
    """Honouring a DV the protocol does not declare never returns a deleted row; ignoring it would."""
    store = ObjectStore.from_uri((tmp_path / "t").as_uri())
    table = DeltaTable.create(store, "", pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": [1, 2, 3]}))
    (add,) = table.snapshot().files.values()
    line = {"add": {**add.to_json()["add"], "deletionVector": inline_dv([1])}}
    store.put("_delta_log/00000000000000000002.json", (json.dumps(line) + "\n").encode())
    assert table.read_arrow().column("id").to_pylist() == [1, 3]


# ------------------------------------------------------------------------------------------ broken DVs


def _broken(tmp_path: Path, edit: Any) -> DeltaTable:
    location = copy_table(DELTARS / "table-with-dv-small", tmp_path)
    (dv_path,) = location.glob("deletion_vector_*.bin")
    edit(location, dv_path)
    return open_table(location)


def test_a_missing_dv_file_is_a_missing_data_file(tmp_path: Path) -> None:
    table = _broken(tmp_path, lambda loc, dv: dv.unlink())
    with pytest.raises(DataFileNotFoundError) as info:
        table.read_arrow()
    assert info.value.path == "deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin"


def _flip_last_byte(location: Path, dv: Path) -> None:
    data = bytearray(dv.read_bytes())
    data[-5] ^= 0xFF  # inside the bitmap: the checksum no longer matches
    dv.write_bytes(bytes(data))


def _truncate(location: Path, dv: Path) -> None:
    dv.write_bytes(dv.read_bytes()[:20])


def _claim_more_rows(location: Path, dv: Path) -> None:
    def edit(line: dict[str, Any]) -> dict[str, Any]:
        if "add" in line and line["add"].get("deletionVector"):
            line["add"]["deletionVector"]["cardinality"] = 3
        return line

    rewrite_log(location, 1, edit)


def _delete_past_the_end(location: Path, dv: Path) -> None:
    data = roaring_array([0, 10])  # the data file has rows 0..9
    body, _ = dv_file(data)
    dv.write_bytes(body)

    def edit(line: dict[str, Any]) -> dict[str, Any]:
        if "add" in line and line["add"].get("deletionVector"):
            line["add"]["deletionVector"]["sizeInBytes"] = len(data)
        return line

    rewrite_log(location, 1, edit)


def _empty(location: Path, dv: Path) -> None:
    dv.write_bytes(b"")  # shorter than the DV's byte range: the store refuses the range


def _cut_to_one_byte(location: Path, dv: Path) -> None:
    dv.write_bytes(dv.read_bytes()[:1])


def _absolute_on_an_unknown_scheme(location: Path, dv: Path) -> None:
    def edit(line: dict[str, Any]) -> dict[str, Any]:
        if "add" in line and line["add"].get("deletionVector"):
            line["add"]["deletionVector"].update(storageType="p", pathOrInlineDv="hdfs://nn/x/dv.bin")
        return line

    rewrite_log(location, 1, edit)


@pytest.mark.parametrize(
    "edit",
    [
        _flip_last_byte,
        _truncate,
        _empty,
        _cut_to_one_byte,
        _claim_more_rows,
        _delete_past_the_end,
        _absolute_on_an_unknown_scheme,
    ],
)
def test_a_corrupt_dv_is_a_corrupt_log(tmp_path: Path, edit: Any) -> None:
    table = _broken(tmp_path, edit)
    with pytest.raises(CorruptLogError) as info:
        table.read_arrow()
    assert info.value.path == "part-00000-fae5310a-a37d-4e51-827b-c3d5516560ca-c000.snappy.parquet"
    assert "(inline)" not in str(info.value)  # the message names where the DV is


# --------------------------------------------------------------------------------------------- writes


def test_appends_to_a_spark_dv_table_are_plain_files_delta_rs_reads(tmp_path: Path) -> None:
    location = copy_table(DELTARS / "table_with_deletion_logs", tmp_path)
    table = open_table(location)
    before = table.read_arrow()
    version = table.append(before.slice(0, 2))
    (add,) = [a for a in table.log.read_commit(version) if isinstance(a, Add)]
    assert add.deletion_vector is None
    assert assert_reads_like_deltars(location, None) == rows(pa.concat_tables([before, before.slice(0, 2)]))
