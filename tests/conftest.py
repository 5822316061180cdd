"""Registers the shared real-service fixtures (SeaweedFS, per-test store locations) for every suite."""

from __future__ import annotations

import signal

import pytest

pytest_plugins = ["tests.services"]

LONGEST_FIRST = (
    "tests/faults/test_fault_campaign.py::test_campaign_s3",
    "tests/readme/test_readme.py::test_readme_setup_and_main_job_on_a_fresh_venv",
    "tests/faults/test_fault_campaign.py::test_campaign_file",
    "tests/storage/test_store.py::test_put_if_absent_race_has_exactly_one_winner",
)
"""Tests of a minute or more (seconds for most others), longest first. They start first: with ``-n 2`` one of
them started last kept one worker busy for minutes after the other had run out of tests. ``--dist worksteal``
(pyproject) lets the worker that finishes its share take tests from the other's."""


def _start_rank(item: pytest.Item) -> int:
    return next((i for i, prefix in enumerate(LONGEST_FIRST) if item.nodeid.startswith(prefix)), len(LONGEST_FIRST))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_start_rank)  # (stable: the collection order otherwise)


def pytest_configure(config: pytest.Config) -> None:
    # a run started in the background of a non-interactive shell inherits SIGINT ignored, and so would every
    # command a test starts and then interrupts (the Ctrl-C tests): take the default back
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--long",
        action="store_true",
        default=False,
        help="also run the long forms of stress tests (marked slow), e.g. an hour of process-kill chaos",
    )
