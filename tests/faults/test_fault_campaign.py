"""The fault campaign on file:// and SeaweedFS: a fault at every request, 0 violations (docs/protocol.md §4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.campaign import ACTIONS, CampaignReport, Scenario, campaign
from tests.faults.scenarios import (
    CatalogChange,
    GroupClaimer,
    GroupMember,
    PessimisticTransfer,
    RecoverDead,
    ReservedTransfer,
    ResumableTransfer,
    ResumeCrashed,
    RollForwardHelper,
    Transfer,
)
from tests.services import SeaweedFS


def _report(report: CampaignReport, minimum: int) -> None:
    print("\n" + report.table())
    assert len(report.results) >= minimum, f"only {len(report.results)} cases: the sweep shrank"
    assert report.violations == [], "\n".join(report.violations[:20])


def _name(value: object) -> str:
    return str(getattr(value, "name", value))


# a campaign is hundreds of cases of real requests (SeaweedFS: each case waits out a 0.2 s lease or more): on a
# busy 2-core machine one scenario has taken over 5 minutes
CAMPAIGN_TIMEOUT = 1200


@pytest.mark.timeout(CAMPAIGN_TIMEOUT)
@pytest.mark.parametrize(
    ("scenario", "minimum"),
    [
        (Transfer(), 150),
        (ReservedTransfer(), 200),
        (CatalogChange(), 100),
        (RollForwardHelper(), 120),
        (GroupMember(), 60),
        (GroupClaimer(), 60),
        (PessimisticTransfer(), 200),
        (ResumableTransfer(), 150),
        (ResumeCrashed(), 100),
        (RecoverDead(), 100),
    ],
    ids=_name,
)
def test_campaign_file(scenario: Scenario, minimum: int, tmp_path: Path) -> None:
    report = campaign(scenario, lambda tag: ((tmp_path / tag).as_uri(), {}), "file")
    _report(report, minimum)


@pytest.mark.s3
@pytest.mark.timeout(CAMPAIGN_TIMEOUT)
@pytest.mark.parametrize(
    ("scenario", "minimum"),
    [
        (Transfer(), 100),
        (RollForwardHelper(), 80),
        (GroupClaimer(), 40),
        (PessimisticTransfer(), 150),
        (ResumableTransfer(), 100),
        (ResumeCrashed(), 60),
        (RecoverDead(), 60),
    ],
    ids=_name,
)
def test_campaign_s3(scenario: Scenario, minimum: int, seaweedfs: SeaweedFS, s3_bucket: str) -> None:
    options = seaweedfs.storage_options()
    # every action on every request would take minutes on S3: the permanent and the crash actions
    actions = tuple(a for a in ACTIONS if a != "transient")
    report = campaign(scenario, lambda tag: (f"s3://{s3_bucket}/{tag}", options), "s3", actions=actions)
    _report(report, minimum)
