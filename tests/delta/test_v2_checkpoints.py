"""V2 checkpoints (the ``v2Checkpoint`` feature): UUID-named JSON and Parquet checkpoints with sidecar files,
classic-named V2-spec checkpoints, ``_last_checkpoint`` with ``v2Checkpoint`` info, and txlake's own
checkpoints of such tables.

The tables are delta-kernel-rs's (written by Spark/Databricks with ``delta.checkpointPolicy=v2``) and delta-rs's
``checkpoint-v2-table`` (Databricks Runtime 17). Each is read at every version by txlake and by delta-rs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.delta.test_deletion_vectors import assert_reads_like_deltars, open_table
from tests.interop.deltars import rows
from txlake.delta.checkpoint import checkpoint_sidecars
from txlake.errors import CorruptLogError, VersionNotFoundError

DATA = Path(__file__).resolve().parent.parent / "data"
KERNEL = DATA / "delta-kernel-rs"
V2_TABLES = {
    "kernel/json-with-sidecars": KERNEL / "v2-checkpoints-json-with-sidecars",
    "kernel/parquet-with-sidecars": KERNEL / "v2-checkpoints-parquet-with-sidecars",
    "kernel/classic-checkpoint-parquet": KERNEL / "v2-classic-checkpoint-parquet",
    "kernel/json-with-last-checkpoint": KERNEL / "v2-checkpoints-json-with-last-checkpoint",
    "delta-rs/checkpoint-v2-table": DATA / "delta-rs" / "checkpoint-v2-table",
}
SIDECAR_TABLES = ["kernel/json-with-sidecars", "kernel/parquet-with-sidecars"]


def commits(location: Path) -> list[int]:
    return sorted(int(p.name[:20]) for p in (location / "_delta_log").glob("*.json") if len(p.name) == 25)


def log_names(location: Path) -> list[str]:
    return sorted(p.name for p in (location / "_delta_log").iterdir() if p.is_file())


def copy_table(source: Path, tmp_path: Path) -> Path:
    target = tmp_path / source.name
    shutil.copytree(source, target)
    return target


@pytest.mark.parametrize("name", sorted(V2_TABLES))
def test_v2_tables_read_like_deltars_at_every_version(name: str) -> None:
    location = V2_TABLES[name]
    for version in [*commits(location), None]:
        assert_reads_like_deltars(location, version)


@pytest.mark.parametrize("name", SIDECAR_TABLES)
def test_the_checkpoint_and_its_sidecars_alone_give_the_table(name: str, tmp_path: Path) -> None:
    """A log cleaned up to start at a UUID-named checkpoint (version 4, four sidecars): read from it alone."""
    location = copy_table(V2_TABLES[name], tmp_path)
    expected = {v: assert_reads_like_deltars(location, v) for v in (4, 5, 6)}
    for v in range(5):
        (location / "_delta_log" / f"{v:020d}.json").unlink()
    for p in (location / "_delta_log").glob("0000000000000000000[0-3].checkpoint.*"):
        p.unlink()
    (location / "_delta_log" / "_last_checkpoint").unlink()
    table = open_table(location)
    (checkpoint,) = [p for p in (location / "_delta_log").glob("*.checkpoint.*") if p.name.startswith(f"{4:020d}")]
    assert table.log.list().best_checkpoint(4).paths[0].endswith(checkpoint.name)  # type: ignore[union-attr]
    assert len(checkpoint_sidecars(table.log, table.log.list().checkpoints[4])) == 4
    for v, before in expected.items():
        assert rows(table.read_arrow(v)) == before
        assert assert_reads_like_deltars(location, v) == before
    with pytest.raises(VersionNotFoundError):
        table.snapshot(3)


@pytest.mark.parametrize("name", SIDECAR_TABLES)
def test_a_missing_sidecar_is_a_corrupt_log(name: str, tmp_path: Path) -> None:
    location = copy_table(V2_TABLES[name], tmp_path)
    for v in range(3):
        (location / "_delta_log" / f"{v:020d}.json").unlink()
    table = open_table(location)
    (sidecar,) = [p for p in (location / "_delta_log" / "_sidecars").iterdir() if p.name.startswith(f"{2:020d}.c")][:1]
    sidecar.unlink()
    with pytest.raises(CorruptLogError) as info:
        table.snapshot(2)
    assert info.value.version == 2


def test_a_uuid_checkpoint_without_checkpoint_metadata_is_corrupt(tmp_path: Path) -> None:
    location = copy_table(V2_TABLES["kernel/json-with-sidecars"], tmp_path)
    (checkpoint,) = (location / "_delta_log").glob(f"{3:020d}.checkpoint.*.json")
    lines = [line for line in checkpoint.read_text().splitlines() if "checkpointMetadata" not in line]
    checkpoint.write_text("\n".join(lines) + "\n")
    for v in range(3):
        (location / "_delta_log" / f"{v:020d}.json").unlink()
    with pytest.raises(CorruptLogError):
        open_table(location).snapshot(3)


def test_a_malformed_json_checkpoint_is_named_a_checkpoint(tmp_path: Path) -> None:
    """A UUID-named JSON checkpoint is parsed like a commit, but its error calls it what it is."""
    location = copy_table(V2_TABLES["kernel/json-with-sidecars"], tmp_path)
    (checkpoint,) = (location / "_delta_log").glob(f"{3:020d}.checkpoint.*.json")
    checkpoint.write_text(checkpoint.read_text()[:50] + "\n")
    for v in range(3):
        (location / "_delta_log" / f"{v:020d}.json").unlink()
    with pytest.raises(CorruptLogError) as info:
        open_table(location).snapshot(3)
    assert info.value.version == 3
    assert str(info.value).startswith("checkpoint 3 ")


def test_file_actions_both_inline_and_in_sidecars_are_corrupt(tmp_path: Path) -> None:
    location = copy_table(V2_TABLES["kernel/json-with-sidecars"], tmp_path)
    (checkpoint,) = (location / "_delta_log").glob(f"{3:020d}.checkpoint.*.json")
    add = json.loads((location / "_delta_log" / f"{1:020d}.json").read_text().splitlines()[-1])
    assert "add" in add
    checkpoint.write_text(checkpoint.read_text() + json.dumps(add) + "\n")
    for v in range(3):
        (location / "_delta_log" / f"{v:020d}.json").unlink()
    with pytest.raises(CorruptLogError):
        open_table(location).snapshot(3)


def test_txlake_writes_a_classic_v2_spec_checkpoint_to_a_v2_table(tmp_path: Path) -> None:
    """An append to a v2Checkpoint table, then txlake's checkpoint: classic-named, with one checkpointMetadata row
    and every file inline; delta-rs reads the table from that checkpoint alone. Multi-part is refused."""
    location = copy_table(V2_TABLES["kernel/parquet-with-sidecars"], tmp_path)
    table = open_table(location)
    before = table.read_arrow()
    version = table.append(before.slice(0, 3))
    assert version == table.latest_version() == 7
    with pytest.raises(ValueError):
        table.checkpoint(parts=2)
    assert not list((location / "_delta_log").glob(f"{version:020d}.checkpoint*"))
    table.checkpoint()
    written = location / "_delta_log" / f"{version:020d}.checkpoint.parquet"
    content = pq.read_table(written)
    meta = [r for r in content.column("checkpointMetadata").to_pylist() if r is not None]
    assert meta == [{"version": version, "tags": []}]
    assert "sidecar" not in content.column_names
    assert json.loads((location / "_delta_log" / "_last_checkpoint").read_text())["version"] == version
    expected = assert_reads_like_deltars(location, None)
    for p in (location / "_delta_log").glob("*.json"):
        p.unlink()  # commits and UUID-named JSON checkpoints: only the parquet checkpoints are left
    assert rows(table.read_arrow()) == expected == rows(pa.concat_tables([before, before.slice(0, 3)]))
    assert assert_reads_like_deltars(location, None) == expected
