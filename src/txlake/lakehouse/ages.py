"""How old a transaction may be when it commits, and the age vacuum waits for before it deletes orphans.

Vacuum tells a file of a transaction that will never commit from one of a transaction still running only by
age: a transaction refuses to claim a version (or to offer itself to a group) once it is older than
:data:`MAX_TRANSACTION_AGE`, a claimer merges only intents younger than :data:`MAX_INTENT_AGE`, and vacuum
deletes a file that no version references only once it is older than :data:`ORPHAN_GUARD`, which exceeds both
plus :data:`CLOCK_SKEW` (file times come from the store's clock, a transaction's age from its own).
"""

from __future__ import annotations

from datetime import timedelta

MAX_TRANSACTION_AGE = timedelta(hours=24)
"""A transaction that began longer ago than this cannot commit (:class:`~txlake.errors.TransactionExpiredError`)."""

MAX_INTENT_AGE = timedelta(hours=1)
"""A group intent posted longer ago than this (by the claimer's clock) is never merged."""

CLOCK_SKEW = timedelta(hours=1)
"""The most two clocks of a lakehouse (clients, object store) are assumed to disagree."""

ORPHAN_GUARD = MAX_TRANSACTION_AGE + MAX_INTENT_AGE + CLOCK_SKEW
"""Vacuum leaves a data file no version references alone while it is younger than this (26 hours)."""
