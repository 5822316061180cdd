"""MkDocs hook: show reStructuredText roles left in docstrings (``:class:`X```) as plain code.

txlake's docstrings use Sphinx roles such as ``:class:`Lakehouse``` and ``:meth:`from_uri```; rendered as
Markdown by mkdocstrings they would appear as ":class:" followed by the name. This drops the role (and a
leading ``~``, showing the last dotted component as Sphinx does).
"""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|attr|data|mod|exc|obj):<code>(~?)([^<]+)</code>")


def _plain(match: re.Match[str]) -> str:
    name = match.group(2)
    return f"<code>{name.rsplit('.', 1)[-1] if match.group(1) else name}</code>"


def on_page_content(html: str, **kwargs: Any) -> str:
    return _ROLE.sub(_plain, html)
