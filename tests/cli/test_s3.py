"""The command line against a real S3 server (SeaweedFS): credentials from the environment or from flags."""

from __future__ import annotations

import pytest

import txlake
from tests.cli.conftest import SCHEMA, Txlake, accounts
from txlake.cli.exit_codes import ExitCode

pytestmark = pytest.mark.s3


def test_s3_lakehouse_with_environment_credentials(
    s3_uri: str, s3_options: dict[str, str], txlake_cli: Txlake, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in s3_options.items():
        monkeypatch.setenv(key, value)
    created = txlake_cli("init", s3_uri, "--json", "--debug")
    assert created.code == ExitCode.OK, created.err
    lake = txlake.connect(s3_uri, s3_options, create=False)
    lake.create_table("s3.accounts", SCHEMA)
    with lake.transaction() as tx:
        tx.append("s3.accounts", accounts([1, 2], ["ann", "bob"], [10, 20]))

    monkeypatch.setenv("TXLAKE_URI", s3_uri)
    tables = txlake_cli("tables", "--json", "--debug")
    assert tables.code == ExitCode.OK, tables.err
    doc = tables.json()
    assert isinstance(doc, dict)
    assert [(t["name"], t["rows"]) for t in doc["tables"]] == [("s3.accounts", 2)]
    doctor = txlake_cli("doctor", "--debug")
    assert doctor.code == ExitCode.OK, doctor.out
    for run in (created, tables, doctor):
        assert s3_options["AWS_SECRET_ACCESS_KEY"] not in run.out + run.err
        assert s3_options["AWS_ACCESS_KEY_ID"] not in run.out + run.err
    assert "'aws_secret_access_key': '****'" in tables.err


def test_s3_lakehouse_with_storage_option_flags(s3_uri: str, s3_options: dict[str, str], txlake_cli: Txlake) -> None:
    flags = [arg for key, value in s3_options.items() for arg in ("--storage-option", f"{key}={value}")]
    assert txlake_cli("init", s3_uri, *flags).code == ExitCode.OK
    shown = txlake_cli("log", "--uri", s3_uri, "--json", *flags)
    assert shown.code == ExitCode.OK, shown.err
    doc = shown.json()
    assert isinstance(doc, dict)
    assert [e["version"] for e in doc["entries"]] == [0]
    assert s3_options["AWS_SECRET_ACCESS_KEY"] not in shown.out + shown.err
