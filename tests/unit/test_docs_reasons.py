"""docs/cli.md's registrations-DLQ table names every code a refusal can carry."""

from __future__ import annotations

import re
from pathlib import Path

from sume.polling.registration import REFUSAL_REASONS

CLI_PAGE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def reason_table() -> list[str]:
    """The first column of the table headed ``| `REASON` |``, one code a row."""
    lines = CLI_PAGE.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| `REASON` |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return [m.group(1) for row in rows if (m := re.match(r"\| `(\w+)` \|", row))]


def test_the_reason_table_lists_every_refusal_code_once_each() -> None:
    codes = reason_table()
    refusals = [code for code in codes if code in REFUSAL_REASONS]
    assert sorted(refusals) == sorted(REFUSAL_REASONS)
    assert len(codes) == len(set(codes))
