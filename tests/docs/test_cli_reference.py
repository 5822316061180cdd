"""The CLI reference (docs/reference/cli.md) documents every command and every flag the parser has."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

from txlake.cli.exit_codes import EXIT_CODES
from txlake.cli.main import build_parser

CLI_DOC = Path(__file__).resolve().parents[2] / "docs" / "reference" / "cli.md"
COMMON = ("-h", "--help", "--uri", "--storage-option", "--json", "--debug")


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every (sub)command of ``parser`` with its parser, depth first."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from commands(sub, (*path, name))


def section(doc: str, path: tuple[str, ...]) -> str:
    """The text under the heading ``txlake <path>`` up to the next heading of the same or a higher level."""
    title = "`txlake " + " ".join(path) + "`"
    lines = doc.splitlines()
    for i, line in enumerate(lines):
        heading = re.match(r"^(#+)\s+(.*)$", line)
        if heading and heading.group(2).strip() == title:
            level = len(heading.group(1))
            end = next(
                (j for j in range(i + 1, len(lines)) if re.match(rf"^#{{1,{level}}}\s", lines[j])),
                len(lines),
            )
            return "\n".join(lines[i:end])
    raise AssertionError(f"docs/reference/cli.md has no heading {title}")


def test_every_command_and_flag_is_documented() -> None:
    doc = CLI_DOC.read_text(encoding="utf-8")
    common = section_or_empty(doc, "## Common options")
    missing = []
    for path, parser in commands(build_parser()):
        text = section(doc, path)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            if action.option_strings:
                for flag in action.option_strings:
                    if flag == "--help":
                        continue  # every command has it; the page says so once
                    if flag.startswith("--") and f"`{flag}" not in text and not (flag in COMMON and flag in common):
                        missing.append(f"txlake {' '.join(path)} {flag}")
            else:
                name = (action.metavar or action.dest).upper() if isinstance(action.metavar or action.dest, str) else ""
                if name and name not in text:
                    missing.append(f"txlake {' '.join(path)} {name} (positional)")
    assert not missing, "document these in docs/reference/cli.md:\n" + "\n".join(missing)


def test_every_exit_code_is_documented() -> None:
    table = section_or_empty(CLI_DOC.read_text(encoding="utf-8"), "## Exit codes")
    for code, _ in EXIT_CODES:
        assert re.search(rf"^\| {int(code)} \|", table, re.MULTILINE), f"exit code {int(code)} is not in the table"


def section_or_empty(doc: str, heading: str) -> str:
    start = doc.find(heading + "\n")
    if start < 0:
        return ""
    rest = doc[start + len(heading) :]
    nxt = re.search(r"^## ", rest, re.MULTILINE)
    return rest[: nxt.start()] if nxt else rest
