"""Registers the shared real-service fixtures (SeaweedFS, per-test store locations) for every suite."""

from __future__ import annotations

import pytest

pytest_plugins = ["tests.services"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--long",
        action="store_true",
        default=False,
        help="also run the long forms of stress tests (marked slow), e.g. an hour of process-kill chaos",
    )
