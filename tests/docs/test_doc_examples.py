"""Runs the Python examples of the documentation (``docs/**/*.md``) exactly as the pages show them.

Every fenced ``python`` block in the docs carries a marker on the line just above it:

- ``<!-- doc-test -->``: run it;
- ``<!-- doc-test: spark -->``: run it with a local Spark session available (``docs_spark``);
- ``<!-- doc-test: s3 -->``: run it (it starts its own SeaweedFS server on loopback);
- ``<!-- doc-test: skip REASON -->``: not run, for the stated reason (a cluster, a remote bucket, ...).

The runnable blocks of one page run in order in one namespace (like a notebook), in a fresh working
directory, with ``tempfile`` pointed at the test's ``tmp_path`` so examples that make a lakehouse in
``tempfile.mkdtemp()`` leave nothing behind. Line numbers in tracebacks are those of the Markdown file.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
FENCE = re.compile(r"^(?P<indent>[ ]*)```(?P<lang>[A-Za-z0-9_+-]*)")
MARKER = re.compile(r"^\s*<!--\s*doc-test(?::\s*(?P<mode>[a-z0-9]+)\s*(?P<reason>.*?))?\s*-->\s*$")
MODES = {"run", "spark", "s3", "skip"}
OPTIONAL = {"polars", "duckdb"}  # installed by the docs extra; without it the pages using them are skipped


@dataclass(frozen=True)
class Example:
    """One fenced ``python`` block of a page."""

    page: str
    line: int  # 1-based line of the first line of code
    code: str
    mode: str | None  # None: no marker above the block
    reason: str = ""


def examples(path: Path) -> list[Example]:
    """The fenced ``python`` blocks of ``path`` with the marker above each."""
    lines = path.read_text(encoding="utf-8").splitlines()
    page = path.relative_to(DOCS).as_posix()
    found: list[Example] = []
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        indent, lang = fence.group("indent"), fence.group("lang")
        end = i + 1
        while end < len(lines) and not re.match(rf"^{indent}```\s*$", lines[end]):
            end += 1
        if lang == "python":
            prev = i - 1
            while prev >= 0 and not lines[prev].strip():
                prev -= 1
            marker = MARKER.match(lines[prev]) if prev >= 0 else None
            mode = None if marker is None else (marker.group("mode") or "run")
            reason = "" if marker is None else (marker.group("reason") or "").strip(" -—:")
            body = [line[len(indent) :] if line.startswith(indent) else line for line in lines[i + 1 : end]]
            found.append(Example(page, i + 2, "\n".join(body) + "\n", mode, reason))
        i = end + 1
    return found


def all_examples() -> list[Example]:
    return [ex for path in sorted(DOCS.rglob("*.md")) for ex in examples(path)]


def runnable_pages() -> list[object]:
    pages: dict[str, list[Example]] = {}
    for ex in all_examples():
        if ex.mode in ("run", "spark", "s3"):
            pages.setdefault(ex.page, []).append(ex)
    params = []
    for page, blocks in pages.items():
        marks = [pytest.mark.s3] if any(b.mode == "s3" for b in blocks) else []
        params.append(pytest.param(page, marks=marks, id=page))
    return params


def test_every_python_example_is_marked() -> None:
    """No example is silently untested: each says whether it runs, and if not, why."""
    problems = []
    for ex in all_examples():
        if ex.mode is None:
            problems.append(f"docs/{ex.page}:{ex.line - 1}: python block without a <!-- doc-test ... --> marker")
        elif ex.mode not in MODES:
            problems.append(f"docs/{ex.page}:{ex.line - 1}: unknown doc-test mode {ex.mode!r}")
        elif ex.mode == "skip" and not ex.reason:
            problems.append(f"docs/{ex.page}:{ex.line - 1}: a skipped example must say why")
    assert not problems, "\n".join(problems)


def test_the_docs_have_runnable_examples() -> None:
    pages = {ex.page for ex in all_examples() if ex.mode in ("run", "spark", "s3")}
    assert {"getting-started.md", "how-to/pyspark-pipeline.md", "how-to/time-travel.md"} <= pages


@pytest.mark.parametrize("page", runnable_pages())
def test_page_examples(
    page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """Run the page's examples in order, in one namespace, as a reader pasting them would."""
    blocks = [ex for ex in examples(DOCS / page) if ex.mode in ("run", "spark", "s3")]
    if any(b.mode == "spark" for b in blocks):
        request.getfixturevalue("docs_spark")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    namespace: dict[str, object] = {"__name__": "__doc_example__"}
    source = str(DOCS / page)
    for block in blocks:
        # pad with blank lines so that tracebacks show the line numbers of the Markdown file
        code = compile("\n" * (block.line - 1) + block.code, source, "exec")
        try:
            exec(code, namespace)
        except ModuleNotFoundError as exc:
            if exc.name not in OPTIONAL:
                raise
            pytest.skip(f"{exc.name} is not installed (pip install -e '.[docs]')")
