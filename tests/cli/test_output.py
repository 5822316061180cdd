"""Value formatting, JSON encoding, location resolution and secret masking of the command line."""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import json
from pathlib import Path

import pyarrow as pa
import pytest

from tests.cli.conftest import Txlake
from txlake.cli.exit_codes import UsageError
from txlake.cli.options import Location, SecretMasker, normalize_uri, resolve_location, storage_options_from
from txlake.cli.output import cell, human_size, to_jsonable, truncate


def test_truncate_and_cells() -> None:
    assert truncate("short") == "short"
    assert truncate("x" * 50, 10) == "x" * 9 + "…"
    assert truncate("two\nlines") == "two⏎lines"
    assert cell(None).plain == "null"
    assert cell(True).plain == "true"
    assert cell(b"\x01\xff").plain == "0x01ff"
    assert cell({"a": [1, 2]}).plain == '{"a":[1,2]}'
    assert cell("[bold]not markup[/]").plain == "[bold]not markup[/]"
    assert human_size(512) == "512 B" and human_size(1536) == "1.5 KiB"


def test_to_jsonable() -> None:
    when = dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    doc = to_jsonable(
        {
            "t": when,
            "d": dt.date(2024, 1, 2),
            "n": decimal.Decimal("1.50"),
            "b": b"hi",
            "f": float("nan"),
            "s": frozenset({"b", "a"}),
            "rows": pa.table({"x": [1, 2]}),
        }
    )
    assert json.loads(json.dumps(doc, allow_nan=False)) == {
        "t": "2024-01-02T03:04:05+00:00",
        "d": "2024-01-02",
        "n": "1.50",
        "b": "aGk=",
        "f": "nan",
        "s": ["a", "b"],
        "rows": [{"x": 1}, {"x": 2}],
    }


def test_location_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    args = argparse.Namespace(uri=None, storage_options=[])
    with pytest.raises(UsageError):
        resolve_location(args, {})
    assert resolve_location(args, {"TXLAKE_URI": "s3://b/p"}).uri == "s3://b/p"
    monkeypatch.chdir(tmp_path)
    assert normalize_uri("lake") == f"file://{tmp_path}/lake"
    flagged = argparse.Namespace(uri="s3://bkt/x", storage_options=[("aws_region", "eu-west-1")])
    env = {"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIA1234", "AWS_ALLOW_HTTP": "true"}
    location = resolve_location(flagged, env)
    assert location.storage_options == {
        "aws_region": "eu-west-1",  # the flag wins over the environment
        "aws_access_key_id": "AKIA1234",
        "aws_allow_http": "true",
    }
    assert location.masked_options()["aws_access_key_id"] == "****"
    assert storage_options_from([], env, "file:///tmp/x") == {}  # AWS_* only for s3://


def test_masker() -> None:
    masker = SecretMasker.from_sources([("aws_secret_access_key", "s3cr3t-value"), ("aws_region", "us-east-1")], {})
    assert masker("key s3cr3t-value in us-east-1") == "key **** in us-east-1"
    assert masker("s3://user:pass@bucket/x") == "s3://****@bucket/x"
    assert Location("s3://b", {"endpoint": "http://h", "token": "t0k3n"}).masked_options() == {
        "endpoint": "http://h",
        "token": "****",
    }


def test_demo_uses_txlake_uri(tmp_path: Path, txlake_cli: Txlake, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TXLAKE_URI", str(tmp_path / "from-env"))
    monkeypatch.chdir(tmp_path)
    run = txlake_cli("demo", "--seconds", "5", "--workers", "1", "--accounts", "2", "--transfers", "2", "--json")
    doc = run.json()
    assert isinstance(doc, dict)
    assert run.code == 0 and doc["ok"] is True
    assert doc["uri"] == f"file://{tmp_path / 'from-env'}"
