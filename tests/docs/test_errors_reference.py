"""The errors page (docs/reference/errors.md) lists every error with its exit code and an example message."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import txlake.cli.exit_codes
import txlake.errors
from txlake.cli.exit_codes import CliError, exit_code_for
from txlake.ddl import DdlError
from txlake.txn.engine import NoDataEngineError

ERRORS_DOC = Path(__file__).resolve().parents[2] / "docs" / "reference" / "errors.md"


def _rows() -> dict[str, tuple[int, str]]:
    """``{class name: (exit code, example)}`` from the command-line table of the page."""
    text = ERRORS_DOC.read_text(encoding="utf-8")
    section = text[text.index("## On the command line") :]
    rows: dict[str, tuple[int, str]] = {}
    for m in re.finditer(r"^\| `(\w+)`(?: \([^)]*\))? \| (\d+) \| (.+) \|$", section, re.MULTILINE):
        rows.setdefault(m.group(1), (int(m.group(2)), m.group(3)))
    return rows


def _error_classes() -> list[type[BaseException]]:
    classes: list[type[BaseException]] = [
        c for _, c in inspect.getmembers(txlake.errors, inspect.isclass) if issubclass(c, txlake.errors.TxlakeError)
    ]
    classes += [NoDataEngineError, DdlError]
    classes += [c for _, c in inspect.getmembers(txlake.cli.exit_codes, inspect.isclass) if issubclass(c, CliError)]
    return [c for c in classes if c is not CliError]


def test_every_error_has_its_exit_code_and_an_example() -> None:
    rows = _rows()
    missing = [c.__name__ for c in _error_classes() if c.__name__ not in rows]
    assert not missing, f"add these to the table in docs/reference/errors.md: {missing}"
    for cls in _error_classes():
        code, example = rows[cls.__name__]
        assert code == exit_code_for(cls.__new__(cls)), f"{cls.__name__}: the page says {code}"
        assert example.strip(), cls.__name__


def test_every_error_is_in_the_hierarchy() -> None:
    text = ERRORS_DOC.read_text(encoding="utf-8")
    tree = text[text.index("```text") : text.index("## When each is raised")]
    for cls in _error_classes():
        if not issubclass(cls, CliError):
            assert re.search(rf"\b{cls.__name__}\b", tree), f"{cls.__name__} is not in the hierarchy"
