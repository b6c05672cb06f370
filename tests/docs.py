"""The shell blocks of the manual's pages, and a scratch repository root to run them in.

A page's ```bash and ```sh blocks are commands a reader pastes. A block is run
unless the HTML comment right before it says why not::

    <!-- not run: needs an AWS account -->

so that a block added later is run by default.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# A fenced shell block, with the HTML comment (if any) on the line before it.
_BLOCK = re.compile(
    r"^(?:<!-- (?P<note>[^\n]*?) -->\n)?```(?P<lang>bash|sh)\n(?P<body>.*?)^```$", re.M | re.S
)
NOT_RUN = "not run: "
# Copied, not linked, into a scratch root: a block runs `npm ci` there, which
# would otherwise empty node_modules under the tests that use it.
COPIED = ("examples/integrator-js",)


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    body: str
    not_run: str | None
    """Why the block is not run (the marker's reason), or None: it is run."""

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def shell_blocks(page: str) -> list[Block]:
    """Every ```bash / ```sh block of ``page`` (a path under the repository's root)."""
    text = (ROOT / page).read_text(encoding="utf-8")
    found = []
    for match in _BLOCK.finditer(text):
        note = match.group("note")
        if note is not None and not note.startswith(NOT_RUN):
            raise AssertionError(f"{page}: an HTML comment before a block must be '{NOT_RUN}...'")
        reason = note[len(NOT_RUN) :].strip() if note else None
        assert reason != "", f"{page}: '{NOT_RUN}' needs its reason"
        line = text.count("\n", 0, match.start("lang")) + 1
        found.append(Block(page, line, match.group("body"), reason))
    return found


def scratch_root(where: Path) -> Path:
    """``where`` made to look like the repository's root, so that what a block
    writes (bindings, a detail.json, java/) lands there: each top-level entry
    linked (the .venv, schemas/, the Makefile, ...), ``COPIED`` copied."""
    for entry in ROOT.iterdir():
        if entry.name != ".git":
            _link_or_copy(entry, where / entry.name)
    return where


def _link_or_copy(source: Path, target: Path) -> None:
    relative = source.relative_to(ROOT).as_posix()
    if any(c == relative for c in COPIED):
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("node_modules"))
    elif any(c.startswith(f"{relative}/") for c in COPIED):
        target.mkdir()
        for entry in source.iterdir():
            _link_or_copy(entry, target / entry.name)
    else:
        target.symlink_to(source)
