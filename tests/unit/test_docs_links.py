"""The manual's references resolve: every relative link in README.md and docs/
(file and #anchor), and every ``*.md`` page the code or the manual names.

Anchors are computed as GitHub renders them, so a renamed heading breaks the
test rather than the reader's click.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
CODE_DIRS = ("functions", "infra", "sume_cli", "devstack", "bench")

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_LINK = re.compile(r"(?<!!)\[(?:[^\]]|\][^(])*?\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_INLINE_CODE = re.compile(r"`[^`]*`")
_EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)
_MD_NAME = re.compile(r"(?<![\w/.-])((?:docs/)?[\w-]+\.md)\b")


def prose_lines(text: str) -> list[str]:
    """The page's lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text, lowercased, punctuation dropped."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").replace("*", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: Counter[str] = Counter()
    found = set()
    for line in prose_lines(page.read_text(encoding="utf-8")):
        match = _HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        found.add(f"{base}-{seen[base]}" if seen[base] else base)
        seen[base] += 1
    return found


def links(page: Path) -> list[str]:
    return [
        target
        for line in prose_lines(page.read_text(encoding="utf-8"))
        for target in _LINK.findall(_INLINE_CODE.sub("", line))
        if not _EXTERNAL.match(target)
    ]


def broken(page: Path, target: str) -> str | None:
    """Why ``target`` (a link on ``page``) does not resolve, or None."""
    path, _, anchor = target.partition("#")
    destination = (page.parent / path).resolve() if path else page
    if path and ROOT not in destination.parents:
        return f"{path}: outside the repository"
    if not destination.exists():
        return f"{path}: no such file"
    if anchor and destination.suffix == ".md" and anchor not in anchors(destination):
        return f"#{anchor}: no such heading in {destination.name}"
    return None


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    problems = [f"{target} ({why})" for target in links(page) if (why := broken(page, target))]

    assert problems == []


def test_the_readme_links_every_page_of_the_manual():
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in links(ROOT / "README.md")}

    assert [p.name for p in PAGES[1:] if p not in linked] == []


def code_files() -> list[Path]:
    return sorted(p for d in CODE_DIRS for p in (ROOT / d).rglob("*.py"))


def test_every_page_the_code_and_the_manual_name_exists():
    named = {
        (path.relative_to(ROOT), name)
        for path in [*code_files(), *PAGES]
        for name in _MD_NAME.findall(path.read_text(encoding="utf-8"))
    }
    missing = [
        f"{path}: {name}"
        for path, name in sorted(named)
        if not any((ROOT / d / name).exists() for d in (".", "docs", "docs/dev"))
    ]

    assert missing == []


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Send your first webhook", "send-your-first-webhook"),
        (
            "`status JOB_ID [--output json]`: a job's whole story",
            "status-job_id---output-json-a-jobs-whole-story",
        ),
        (
            "Sume simulator: `python -m devstack.simulator`",
            "sume-simulator-python--m-devstacksimulator",
        ),
        ("[the job item](docs/job-item.md)", "the-job-item"),
    ],
)
def test_anchors_follow_githubs_rule(heading, anchor):
    assert slug(heading) == anchor


def test_a_missing_heading_is_reported(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n```\n# not a heading\n```\n[here](#not-a-heading)\n")

    assert anchors(page) == {"title"}
    assert broken(page, "#title") is None
    assert broken(page, "#not-a-heading") is not None
