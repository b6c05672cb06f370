"""docs/ is the user's manual: each page says, right after its title, whom it is for."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))


@pytest.mark.parametrize("page", PAGES)
def test_the_page_opens_with_whom_it_is_for(page: str) -> None:
    lines = (DOCS / page).read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("# "), f"{page} does not start with its title"
    assert lines[1] == "", page
    assert lines[2].startswith("For "), f"{page}: the line after the title is {lines[2]!r}"


def test_no_page_keeps_a_diary_of_measured_runs() -> None:
    """Figures live in `make bench` and docs/bench.md; a run's date is git history's."""
    dated = re.compile(
        r"\b(?:measured|run) on 20\d\d-\d\d-\d\d|\b20\d\d-\d\d-\d\d (?:evening|afternoon|morning)"
    )
    for page in PAGES:
        text = (DOCS / page).read_text(encoding="utf-8")
        assert not dated.search(text), f"{page}: {dated.search(text)}"
